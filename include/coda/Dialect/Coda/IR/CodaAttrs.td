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

    An output may span `n/2` in place of `n`: the even columns of the output
    space, compacted, so that the value at column `2j` is written at column
    `j` of an `N / 2`-wide tensor (a gated activation whose gate and up
    columns alternate: `[m, n/2]`). N must then be even. It may span
    `n halves`: every column, its pairs stored apart, the value at column
    `2j` at column `j` and the one at `2j + 1` at column `N / 2 + j`
    (`[m, n halves]`: the gradient of such a pair when its weight is stored
    as the gate's rows, then the up's).

    An input may span `n mod p` in place of `n` (p a power of 2): it holds p
    columns, and column `n` of the output space reads its column `n mod p`
    (a table repeated along the row: a rotary embedding's per-head inverse
    frequencies `[n mod 64]`, or its cos/sin table `[m, n mod 128]`). `period`
    is p, 0 for a tensor that spans every column.

    ```mlir
    #coda.dims<[m, n]>
    #coda.dims<[m, n/2]>
    #coda.dims<[m, n halves]>
    #coda.dims<[m, n mod 128]>
    ```
  }];
  let parameters = (ins "unsigned":$mask,
                        DefaultValuedParameter<"unsigned", "0">:$period);
  let builders = [
    AttrBuilder<(ins "unsigned":$mask, CArg<"unsigned", "0">:$period), [{
      return $_get($_ctxt, mask, period);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    static constexpr unsigned kN = 1, kM = 2, kB = 4;
    /// With kN: only the even columns, compacted (`n/2`).
    static constexpr unsigned kHalfN = 8;
    /// With kN: the column pairs stored apart, column 2j at j and column
    /// 2j + 1 at N / 2 + j (`n halves`).
    static constexpr unsigned kHalves = 16;
    bool hasB() const { return getMask() & kB; }
    bool hasM() const { return getMask() & kM; }
    bool hasN() const { return getMask() & kN; }
    bool isHalfN() const { return getMask() & kHalfN; }
    bool isHalves() const { return getMask() & kHalves; }
    /// With kN: the input holds `getPeriod()` columns, read at n mod period.
    bool isPeriodic() const { return getPeriod() != 0; }
    /// The number of dimensions spanned, i.e. the rank of a tensor with these dims.
    unsigned getRank() const;
  }];
}

def Coda_DimsArrayAttr : TypedArrayAttrBase<Coda_DimsAttr, "array of dims">;

//===----------------------------------------------------------------------===//
// Kernel plan: how the GPU lowering runs one coda.gemm.
//===----------------------------------------------------------------------===//

// A true/false flag, omitted when false.
class Coda_FlagParameter<string desc>
    : AttrParameter<"bool", desc> {
  let parser = "::mlir::coda::parseFlag($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
  let defaultValue = "false";
}

// A kernel schedule (KernelShape.h), by its name.
def Coda_ScheduleParameter
    : AttrParameter<"::mlir::coda::Schedule", "how the consumers share tiles"> {
  let parser = "::mlir::coda::parseSchedule($_parser)";
  let printer = "$_printer << ::mlir::coda::getScheduleName($_self)";
}

def Coda_KernelPlanAttr : AttrDef<Coda_Dialect, "KernelPlan"> {
  let mnemonic = "kernel_plan";
  let summary = "the kernel shape and epilogue choices of one coda.gemm on the GPU";
  let description = [{
    What `coda-plan-kernels` chose, and `coda-to-gpu` builds, for the fused
    kernel of one `coda.gemm` (the `coda.kernel_plan` attribute of the op):
    the target chip, the block tile (`tile_m` x `tile_n` outputs), the depth
    of the shared-memory pipeline (`stages`), how the two consumer
    warpgroups share tiles (`schedule`: `cooperative` or `pingpong`), the
    blocks per cluster along M (`cluster_m`, whose B tile is multicast) and
    along N (`cluster_n`, absent: 1; the blocks of one row block, whose row
    reductions combine across their tiles), the row blocks per group of the
    tile order (`group_rows`), and the epilogue's choices: the widest 16-bit store per lane (`epilogue_vector_bytes`: 16
    or 4), the epilogue input a bias the accumulators start at
    (`bias_input`; absent: none), whether 16-bit `[m, n]` inputs are read 16
    bytes per lane (`chunked_loads`), whether GELU(tanh), SiLU and sigmoid
    use `tanh.approx.f32` (`fast_activations`), whether the dropout seed
    is read from memory (`seed_in_memory`) and whether column reductions
    write each warp's partial result for a merge kernel to combine in a fixed
    order, bit-identical from run to run, instead of f32 atomics
    (`deterministic`). A plan written by hand is checked
    as a chosen one is.

    ```mlir
    #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 256, stages = 4,
                      schedule = cooperative, cluster_m = 1, group_rows = 8,
                      epilogue_vector_bytes = 16, bias_input = 0>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the target chip">:$chip,
    "int64_t":$tile_m,
    "int64_t":$tile_n,
    "int64_t":$stages,
    Coda_ScheduleParameter:$schedule,
    "int64_t":$cluster_m,
    "int64_t":$group_rows,
    "int64_t":$epilogue_vector_bytes,
    DefaultValuedParameter<"int64_t", "-1", "the bias the accumulators start at">:$bias_input,
    DefaultValuedParameter<"int64_t", "1", "blocks per cluster along N">:$cluster_n,
    Coda_FlagParameter<"16-byte loads of 16-bit [m, n] inputs">:$chunked_loads,
    Coda_FlagParameter<"activations on tanh.approx.f32">:$fast_activations,
    Coda_FlagParameter<"the dropout seed read from memory">:$seed_in_memory,
    Coda_FlagParameter<"column reductions merged in a fixed order">:$deterministic
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// The rows of a tile each consumer warpgroup holds: tile_m under
    /// ping-pong, half of it when the consumers share a tile.
    int64_t getConsumerRows() const {
      return getSchedule() == Schedule::Pingpong ? getTileM() : getTileM() / 2;
    }
  }];
}

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

def Coda_OutputDim : I32EnumAttr<"OutputDim", "a dim of the output space", [
    I32EnumAttrCase<"B", 0, "b">,
    I32EnumAttrCase<"M", 1, "m">,
    I32EnumAttrCase<"N", 2, "n">]> {
  let cppNamespace = "::mlir::coda";
  let genSpecializedAttr = 0;
}
def Coda_OutputDimAttr : EnumAttr<Coda_Dialect, Coda_OutputDim, "output_dim"> {
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
