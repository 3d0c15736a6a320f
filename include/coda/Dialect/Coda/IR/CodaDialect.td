//===- CodaDialect.td - the coda dialect -------------------*- tablegen -*-===//
//
// The coda dialect represents GEMM + epilogue programs: a matrix product whose
// fp32 accumulator is transformed by an elementwise program before the only
// write of each output to memory.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_IR_CODADIALECT_TD
#define CODA_DIALECT_CODA_IR_CODADIALECT_TD

include "mlir/IR/OpBase.td"

def Coda_Dialect : Dialect {
  let name = "coda";
  let cppNamespace = "::mlir::coda";
  let summary = "GEMM + epilogue programs for fused Transformer layers";
  let description = [{
    A `coda.gemm` op computes `acc = alpha * op(A) * op(B) + beta * C` in fp32
    and runs its epilogue region once per output element `(b, m, n)` on the
    accumulator value. The region holds scalar fp32 math (`arith`, `math` and
    the coda activation ops), dropout with a counter-based RNG, and row/column
    reductions. Every op allowed in the region can be evaluated on a GEMM tile
    held in registers, so a verified `coda.gemm` can always be fused.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Adds the attributes, whose storage is defined next to them.
    void registerAttributes();
  }];
}

class Coda_Op<string mnemonic, list<Trait> traits = []>
    : Op<Coda_Dialect, mnemonic, traits>;

#endif // CODA_DIALECT_CODA_IR_CODADIALECT_TD
