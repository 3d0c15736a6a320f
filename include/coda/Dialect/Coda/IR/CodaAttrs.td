//===- CodaAttrs.td - coda attributes and enums ------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAATTRS_TD
#define CODA_DIALECT_CODA_IR_CODAATTRS_TD

include "coda/Dialect/Coda/IR/CodaDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Dims: which of the output space's dimensions (b, m, n) a value spans.
//===----------------------------------------------------------------------===//

def Coda_DimsAttr : AttrDef<Coda_Dialect, "Dims"> {
  let mnemonic = "dims";
  let summary = "the subset of the output dimensions (b, m, n) a tensor spans";
  let description = [{
    Names the dimensions of the GEMM output space `[b, m, n]` that an epilogue
    operand or output spans, in that order. `[m, n]` is a full tile-shaped
    tensor (a residual), `[n]` a vector along the columns (a bias), `[m]` a
    vector along the rows (a per-row scale), `[]` a scalar. A tensor's rank is
    the number of dims it names; it is broadcast along the others.

    ```mlir
    #coda.dims<[m, n]>
    ```
  }];
  let parameters = (ins "unsigned":$mask);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    static constexpr unsigned kN = 1, kM = 2, kB = 4;
    bool hasB() const { return getMask() & kB; }
    bool hasM() const { return getMask() & kM; }
    bool hasN() const { return getMask() & kN; }
    /// The number of dimensions spanned, i.e. the rank of a tensor with these dims.
    unsigned getRank() const;
  }];
}

def Coda_DimsArrayAttr : TypedArrayAttrBase<Coda_DimsAttr, "array of dims">;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Coda_ReductionKind : I32EnumAttr<"ReductionKind", "reduction kind", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Mean", 2, "mean">]> {
  let cppNamespace = "::mlir::coda";
  let genSpecializedAttr = 0;
}
def Coda_ReductionKindAttr
    : EnumAttr<Coda_Dialect, Coda_ReductionKind, "reduction"> {
  let assemblyFormat = "$value";
}

def Coda_ActivationKind : I32EnumAttr<"ActivationKind", "activation function", [
    I32EnumAttrCase<"GeluTanh", 0, "gelu_tanh">,
    I32EnumAttrCase<"GeluErf", 1, "gelu_erf">,
    I32EnumAttrCase<"Relu", 2, "relu">,
    I32EnumAttrCase<"Silu", 3, "silu">,
    I32EnumAttrCase<"Sigmoid", 4, "sigmoid">]> {
  let cppNamespace = "::mlir::coda";
  let genSpecializedAttr = 0;
}
def Coda_ActivationKindAttr
    : EnumAttr<Coda_Dialect, Coda_ActivationKind, "activation"> {
  let assemblyFormat = "$value";
}

#endif // CODA_DIALECT_CODA_IR_CODAATTRS_TD
