//===- CodaOps.td - coda operations ------------------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAOPS_TD
#define CODA_DIALECT_CODA_IR_CODAOPS_TD

include "coda/Dialect/Coda/IR/CodaAttrs.td"
include "coda/Dialect/Coda/IR/CodaDialect.td"
include "coda/Dialect/Coda/IR/CodaInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

//===----------------------------------------------------------------------===//
// coda.gemm
//===----------------------------------------------------------------------===//

def Coda_GemmOp : Coda_Op<"gemm", [
    AttrSizedOperandSegments, Coda_EpilogueOpInterface, IsolatedFromAbove,
    Pure, SingleBlock]> {
  let summary = "a matrix product whose accumulator is transformed by an epilogue";
  let description = [{
    Computes, for every element `(b, m, n)` of the output space,

    ```
    acc[b, m, n] = alpha * sum_k op(A)[b, m, k] * op(B)[b, k, n] + beta * C[b, m, n]
    ```

    in fp32 and runs the `epilogue` region on it. `op(A)` is `A` (`[M, K]`) or,
    with `transpose_a`, the transpose of `A` stored `[K, M]`; `op(B)` is `B`
    (`[K, N]`) or, with `transpose_b`, the transpose of `B` stored `[N, K]` (the
    layout of an `nn.Linear` weight). With `b_halves` (and `transpose_b`), B
    stored `[N, K]` holds the two columns of each pair of op(B) in its two
    halves: column `2j` of op(B) is B's row `j`, column `2j + 1` its row
    `N / 2 + j` (a gated MLP's gate and up weights, one after the other, read
    as one interleaved weight without a copy). A and B share one element type: bf16 and
    f16 are multiplied exactly and summed in fp32; f32 operands are multiplied
    as tf32 on tensor cores (the CPU reference computes them in full fp32).
    A rank-3 A or B is batched (`[batch, ...]`); a rank-2 operand of a batched
    GEMM is shared by every batch. `alpha` defaults to 1; `beta` defaults to 1
    when `C` is given and needs `C`.

    The epilogue is a single block run once per output element. Its arguments
    are the accumulator, then one value per epilogue input: the element of an
    input tensor at this `(b, m, n)` (broadcast along the dims it does not
    span, converted to f32), or the scalar input itself. The block holds
    scalar `arith`/`math` ops on f32 (and integer seeds), `coda.activation`,
    `coda.activation_derivative`, `coda.dropout`, `coda.partner`,
    `coda.coord`, `coda.row_reduce` and `coda.col_reduce`, and ends with `coda.yield` of one f32 per output; each
    output is converted to its element type (round to nearest even) when it
    is written.

    Each input and output names the dims it spans (`#coda.dims`); an output
    may only receive a value that is uniform along the dims it does not span
    (a `[m]` output takes a row reduction, an `[n]` output a column reduction).
    An output spanning `[m, n/2]` receives the values of the even columns
    only, written `N / 2` wide (a gated activation: `silu(acc) *
    coda.partner(acc)`). An output spanning `[m, n halves]` is the output
    space stored with its column pairs apart, as `b_halves` stores op(B):
    column `2j` at `j`, column `2j + 1` at `N / 2 + j` (the gradient of a
    gated activation whose weight is stored in halves, which the operand
    gradients then read as they read that weight).

    With `accumulator [m, n/2]`, op(B) has `N / 2` columns and the product
    fills the even columns of the output space, the odd ones being zero:
    `acc[m, 2j] = alpha * (op(A) op(B))[m, j]`, `acc[m, 2j + 1] = 0`. It is
    the transpose of an `[m, n/2]` output: the gradient of a gated
    activation, which arrives as the `N / 2`-wide product of the next
    layer's dgrad GEMM, runs on it and writes both columns of each pair
    (`coda-derive-backward`). Not with C or a batched GEMM, nor with an
    `[m, n/2]` output.

    ```mlir
    %out, %dbias = coda.gemm %x, %w transpose_b
        ins(%bias : tensor<3072xf32> [n], %res : tensor<?x3072xbf16> [m, n])
        : tensor<?x768xbf16>, tensor<3072x768xbf16>
        -> (tensor<?x3072xbf16> [m, n], tensor<3072xf32> [n]) {
    ^bb0(%acc: f32, %b: f32, %r: f32):
      %0 = arith.addf %acc, %b : f32
      %1 = coda.activation gelu_tanh %0
      %2 = arith.addf %1, %r : f32
      %3 = coda.col_reduce sum %acc
      coda.yield %2, %3 : f32, f32
    }
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$a,
    AnyRankedTensor:$b,
    Optional<AnyRankedTensor>:$c,
    Optional<F32>:$alpha,
    Optional<F32>:$beta,
    Variadic<AnyType>:$inputs,
    UnitAttr:$transpose_a,
    UnitAttr:$transpose_b,
    UnitAttr:$b_halves,
    UnitAttr:$accumulator_half_n,
    Coda_DimsArrayAttr:$input_dims,
    Coda_DimsArrayAttr:$result_dims
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$epilogue);

  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;

  let builders = [
    // Builds the op with an entry block whose arguments match the inputs; the
    // caller fills the block and terminates it with coda.yield.
    OpBuilder<(ins "TypeRange":$resultTypes, "ArrayRef<DimsAttr>":$resultDims,
      "Value":$a, "Value":$b, "bool":$transposeA, "bool":$transposeB,
      "Value":$c, "Value":$alpha, "Value":$beta, "ValueRange":$inputs,
      "ArrayRef<DimsAttr>":$inputDims)>
  ];

  let extraClassDeclaration = [{
    /// Whether A or B carries a batch dimension.
    bool isBatched();
    /// The dims of the output space: [b, m, n] when batched, else [m, n].
    DimsAttr getOutputSpaceDims();
    /// The epilogue's single block.
    Block &getEpilogueBlock() { return getEpilogue().front(); }
    unsigned getNumEpilogueInputs() { return getInputs().size(); }
    Type getEpilogueInputType(unsigned i) { return getInputs()[i].getType(); }
    unsigned getNumEpilogueOutputs() { return getNumResults(); }
    Type getEpilogueOutputType(unsigned i) { return getResult(i).getType(); }
    Type getEpilogueCType() { return getC() ? getC().getType() : Type(); }
    DimsAttr getInputDimsAt(unsigned i) {
      return ::llvm::cast<DimsAttr>(getInputDims()[i]);
    }
    DimsAttr getResultDimsAt(unsigned i) {
      return ::llvm::cast<DimsAttr>(getResultDims()[i]);
    }
    /// The terminator of the epilogue.
    YieldOp getYield();
    /// The element type of A and B.
    Type getOperandElementType() {
      return ::llvm::cast<RankedTensorType>(getA().getType()).getElementType();
    }
  }];
}

//===----------------------------------------------------------------------===//
// coda.tile_epilogue
//===----------------------------------------------------------------------===//

def Coda_TileEpilogueOp : Coda_Op<"tile_epilogue", [
    AttrSizedOperandSegments, Coda_EpilogueOpInterface, IsolatedFromAbove,
    SingleBlock]> {
  let summary = "a coda.gemm epilogue on one consumer's accumulator registers";
  let description = [{
    The epilogue of a `coda.gemm` inside the GPU kernel `coda-to-gpu` built
    for it, where one consumer warpgroup holds its rows of an output tile:
    `accumulators` are its wgmma D fragments (one LLVM struct of `tile_n / 2`
    f32 per 64 rows, in the wgmma register layout), `row` and `col` the
    tile's first output row of the consumer's rows and first column, `batch`
    the tile's batch, and `batches`, `m`, `n` the output space. `c`, `alpha`,
    `beta`, `inputs` and `outputs` are the kernel's parameters for the
    GEMM's C, scalars, epilogue inputs (a tensor's global address, or the
    scalar) and outputs (global addresses, dense row-major tensors of
    `output_types`). The region is the GEMM's epilogue, whose inputs and
    outputs `input_types`, `input_dims`, `output_types`, `result_dims` and
    `c_type` describe as the `coda.gemm` declared them (`accumulator_half_n`
    as it does: `col` is then a column of the product, the tile's first
    output column `2 col`); `plan` is the GEMM's `coda.kernel_plan`. Under a plan with `cluster_n` > 1, `exchange` is the
    block's shared memory where the cluster's blocks exchange their row
    reductions' partial results (two slots of `cluster_n` x `tile_m` f32,
    then an mbarrier per slot; lane 0 of each quad of every consumer warp
    of the cluster takes part in each exchange) and `ordinal` counts the tiles the block has
    computed before this one, which says which slot and phase each exchange
    uses. When the plan merges the epilogue's row reductions from partial
    results (row statistics, without a cluster along N), `row_partials` are
    their f32 scratch, one per row reduction in the region's order, into
    which the tile writes its partial result of each row at [batch][column
    tile][row]; the outputs computed from them are left to the merge kernel.

    `coda-lower-tile-epilogues` lowers it, pattern by pattern, to the code
    that computes every output element the consumer's threads hold and
    writes it once.
  }];
  let arguments = (ins
    Variadic<AnyType>:$accumulators,
    I32:$batch, I32:$row, I32:$col,
    I32:$batches, I32:$m, I32:$n,
    Optional<AnyType>:$c,
    Optional<F32>:$alpha,
    Optional<F32>:$beta,
    Variadic<AnyType>:$inputs,
    Variadic<AnyType>:$outputs,
    Variadic<AnyType>:$row_partials,
    Optional<AnyType>:$exchange,
    Optional<I32>:$ordinal,
    TypeArrayAttr:$input_types,
    Coda_DimsArrayAttr:$input_dims,
    TypeArrayAttr:$output_types,
    Coda_DimsArrayAttr:$result_dims,
    OptionalAttr<TypeAttr>:$c_type,
    UnitAttr:$batched,
    UnitAttr:$accumulator_half_n,
    Coda_KernelPlanAttr:$plan
  );
  let regions = (region SizedRegion<1>:$epilogue);
  let assemblyFormat = [{
    $accumulators `at` `(` $batch `,` $row `,` $col `)`
    `of` `(` $batches `,` $m `,` $n `)`
    (`c` `(` $c^ `:` type($c) `)`)?
    (`alpha` `(` $alpha^ `)`)? (`beta` `(` $beta^ `)`)?
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`row_partials` `(` $row_partials^ `:` type($row_partials) `)`)?
    (`exchange` `(` $exchange^ `:` type($exchange) `,` $ordinal `)`)?
    attr-dict-with-keyword `:` type($accumulators) $epilogue
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    Block &getEpilogueBlock() { return getEpilogue().front(); }
    unsigned getNumEpilogueInputs() { return getInputs().size(); }
    Type getEpilogueInputType(unsigned i) {
      return ::llvm::cast<TypeAttr>(getInputTypes()[i]).getValue();
    }
    unsigned getNumEpilogueOutputs() { return getOutputs().size(); }
    Type getEpilogueOutputType(unsigned i) {
      return ::llvm::cast<TypeAttr>(getOutputTypes()[i]).getValue();
    }
    Type getEpilogueCType() {
      return getCType() ? *getCType() : Type();
    }
    DimsAttr getInputDimsAt(unsigned i) {
      return ::llvm::cast<DimsAttr>(getInputDims()[i]);
    }
    DimsAttr getResultDimsAt(unsigned i) {
      return ::llvm::cast<DimsAttr>(getResultDims()[i]);
    }
    DimsAttr getOutputSpaceDims() {
      return DimsAttr::get(getContext(), DimsAttr::kM | DimsAttr::kN |
                                             (getBatched() ? DimsAttr::kB : 0));
    }
    /// The terminator of the epilogue.
    YieldOp getYield();
  }];
}

//===----------------------------------------------------------------------===//
// Epilogue ops
//===----------------------------------------------------------------------===//

class Coda_EpilogueOp<string mnemonic, list<Trait> traits = []>
    : Coda_Op<mnemonic, !listconcat(traits,
                                    [ParentOneOf<["GemmOp", "TileEpilogueOp"]>])>;

def Coda_YieldOp : Coda_EpilogueOp<"yield", [
    Pure, ReturnLike, Terminator]> {
  let summary = "yields the epilogue's value for each output";
  let description = [{
    Ends a `coda.gemm` (or `coda.tile_epilogue`) epilogue with one f32 value
    per output, in order.

    ```mlir
    coda.yield %out, %pre : f32, f32
    ```
  }];
  let arguments = (ins Variadic<F32>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Coda_ActivationOp : Coda_EpilogueOp<"activation", [
    Pure]> {
  let summary = "a named activation function";
  let description = [{
    Applies an activation function to an f32 value:

    | kind        | definition                                                   |
    |-------------|--------------------------------------------------------------|
    | `gelu_tanh` | 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))              |
    | `gelu_erf`  | 0.5 x (1 + erf(x / sqrt(2)))                                 |
    | `relu`      | max(x, 0)                                                    |
    | `silu`      | x / (1 + exp(-x))                                            |
    | `sigmoid`   | 1 / (1 + exp(-x))                                            |

    Activations are ops rather than arith/math expansions so that a target can
    pick its fastest faithful formulation and so that frontends' many
    spellings of one function raise to one op.

    ```mlir
    %y = coda.activation gelu_tanh %x
    ```
  }];
  let arguments = (ins Coda_ActivationKindAttr:$kind, F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "custom<Kind>($kind) $input attr-dict";
}

def Coda_ActivationDerivativeOp : Coda_EpilogueOp<"activation_derivative", [
    Pure]> {
  let summary = "the derivative of a named activation function";
  let description = [{
    The derivative `d kind(x) / dx` of the activation `kind` of
    `coda.activation` at an f32 value (relu's is 0 at x = 0). The backward
    derivation (`coda-derive-backward`) writes it for the gradient of an
    activation; a target builds it from the same primitives as the
    activation itself (the GPU's approximate exponential and division), so
    that a backward kernel is as cheap as the forward one.

    ```mlir
    %d = coda.activation_derivative gelu_tanh %x
    ```
  }];
  let arguments = (ins Coda_ActivationKindAttr:$kind, F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "custom<Kind>($kind) $input attr-dict";
}

def Coda_DropoutOp : Coda_EpilogueOp<"dropout", [Pure]> {
  let summary = "inverted dropout with a counter-based random number generator";
  let description = [{
    Zeroes the element with probability `p` and scales the kept ones so that
    the expectation is unchanged. The decision for element `(b, m, n)` is a
    pure function of `(seed, stream, b, m, n)`, identical on every target:

    - `p` is quantized to `t = round(p * 65536)` (a multiple of 1/65536);
    - `group(n) = (n >> 5) * 4 + ((n >> 1) & 3)` and
      `slot(n) = ((n >> 3) & 3) * 2 + (n & 1)` split the column index into a
      Philox counter word and one of the 8 16-bit slices of its output;
    - `r = Philox4x32-10(key = (seed[31:0], seed[63:32]),
                          counter = (group(n), m, stream, b))`;
    - `u = 16-bit slice slot(n) of r` (slice `s` is bits `16*(s&1)` to
      `16*(s&1)+15` of word `s >> 1`);
    - the element is kept iff `u >= t`, and scaled by `65536 / (65536 - t)`.

    One Philox call thus serves the 8 elements of a row at columns
    `32q + 8j + 2l + {0, 1}` (`j = 0..3`), which is exactly the set one thread
    holds in a Hopper or Ampere MMA accumulator fragment. `stream` separates
    several dropouts in one epilogue.

    ```mlir
    %y = coda.dropout %x, %seed {p = 1.000000e-01 : f32}
    ```
  }];
  let arguments = (ins F32:$input, I64:$seed, F32Attr:$p,
                       DefaultValuedAttr<I32Attr, "0">:$stream);
  let results = (outs F32:$result);
  let assemblyFormat = "$input `,` $seed attr-dict";
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The drop threshold t = round(p * 65536), in [0, 65536].
    uint32_t getThreshold();
  }];
}

def Coda_PartnerOp : Coda_EpilogueOp<"partner", [Pure]> {
  let summary = "a value at the partner column of the element";
  let description = [{
    The value of `input` at element `(b, m, n xor distance)` of the output
    space, or 0 where `n xor distance` is not a column of the output
    (`distance` is a power of 2). With distance 1 it pairs columns `2j` and
    `2j + 1`: the gate and up columns of a gated activation whose weight
    rows alternate (`silu(acc) * partner(acc)` at the even columns), or the
    two halves of an interleaved rotary embedding; with half a head's width
    it pairs the halves of each head (the rotate-half rotary embedding).

    On the GPU both columns of a pair sit in one thread's accumulator
    fragment for distance 1 and for distances from 8 up to half the tile
    width (the kernel's tile is then at least `2 * distance` wide); distances
    2 and 4 take one warp shuffle.

    ```mlir
    %up = coda.partner %acc xor 1
    ```
  }];
  let arguments = (ins F32:$input, I64Attr:$distance);
  let results = (outs F32:$result);
  let assemblyFormat = "$input `xor` $distance attr-dict";
  let hasVerifier = 1;
}

def Coda_CoordOp : Coda_EpilogueOp<"coord", [Pure]> {
  let summary = "the element's coordinate along one dim of the output space";
  let description = [{
    The index of the element along `dim` of the output space (`b`: its batch,
    0 when the GEMM is not batched; `m`: its row; `n`: its column), as an f32
    (exact below 2^24). Position-dependent math uses it: a rotary
    embedding's angle from the column, a mask from the row and the column.

    ```mlir
    %col = coda.coord n
    ```
  }];
  let arguments = (ins Coda_OutputDimAttr:$dim);
  let results = (outs F32:$result);
  let assemblyFormat = "custom<Kind>($dim) attr-dict";
}

def Coda_DetachOp : Coda_EpilogueOp<"detach", [Pure]> {
  let summary = "a value that gradients do not flow through";
  let description = [{
    `input` itself in the forward program; in the backward that
    `coda-derive-backward` derives, a constant: no gradient flows from the
    result to `input` (PyTorch's `detach`, JAX's `stop_gradient`). Its use is
    a shift that the result does not depend on, such as the maximum a
    log-sum-exp subtracts for its range (`m + log(row_sum(exp(x - m)))` with
    `m` detached has the exact gradient `exp(x - lse)` and needs no row
    reduction of the gradient), and an input that takes no gradient (a class
    index).

    ```mlir
    %m = coda.row_reduce max %acc
    %shift = coda.detach %m
    ```
  }];
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict";
}

def Coda_RoundOp : Coda_EpilogueOp<"round", [Pure]> {
  let summary = "a value rounded to a 16-bit float type, kept as f32";
  let description = [{
    `input` rounded to `to` (bf16 or f16, to nearest even), as the f32
    value that the rounded number is: what a program computes when it goes on
    from a value as it is written to memory rather than from the f32 value
    before the write (PyTorch's `h = (x @ w.T + r).bfloat16()` followed by a
    LayerNorm of `h`). Its derivative is 1: the backward passes gradients
    through the rounding, as PyTorch's casts do. The float64 reference
    rounds through f32, as the f32 program does. A program whose row
    reductions read a rounded value saves it in that type when its rows are split
    (`coda-split-rows`), not in f32.

    ```mlir
    %h = coda.round %sum to bf16
    ```
  }];
  let arguments = (ins F32:$input, TypeAttrOf<AnyTypeOf<[BF16, F16]>>:$to);
  let results = (outs F32:$result);
  let assemblyFormat = "$input `to` $to attr-dict";
}

class Coda_ReduceOp<string mnemonic> : Coda_EpilogueOp<mnemonic, [Pure]> {
  let arguments = (ins Coda_ReductionKindAttr:$kind, F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "custom<Kind>($kind) $input attr-dict";
}

def Coda_RowReduceOp : Coda_ReduceOp<"row_reduce"> {
  let summary = "reduces a value over the columns of its row";
  let description = [{
    The result at `(b, m, n)` is the `sum`, `max` or `mean` of the input over
    all `n` of row `(b, m)`. It is uniform along `n`, can be used by later
    epilogue ops (LayerNorm, softmax) and yielded to an output that spans
    `[m]`.

    ```mlir
    %mean = coda.row_reduce mean %x
    ```
  }];
}

def Coda_GroupReduceOp : Coda_EpilogueOp<"group_reduce", [Pure]> {
  let summary = "reduces a value over the group of columns that holds the element";
  let description = [{
    The columns of the output space fall into groups of `width` (a power of
    2): columns `[w * g, w * g + w)` of each row. The result at `(b, m, n)` is
    the `sum`, `max` or `mean` of the input over the group of column `n` in
    row `(b, m)`, the columns of the group past the last column of the output
    left out (a mean divides by the columns it sums). It is uniform along
    each group: a per-head statistic of a projection whose heads are groups
    of `width` columns (the RMSNorm of each query and key head, QK-norm).

    On the GPU a group is read from the thread's own slots and up to 3 other
    lanes of its quad, no shared memory: the kernel's tile is a multiple of
    `width` wide.

    ```mlir
    %ms = coda.group_reduce mean %sq width 128
    ```
  }];
  let arguments = (ins Coda_ReductionKindAttr:$kind, F32:$input,
                       I64Attr:$width);
  let results = (outs F32:$result);
  let assemblyFormat = "custom<Kind>($kind) $input `width` $width attr-dict";
  let hasVerifier = 1;
}

def Coda_ColReduceOp : Coda_ReduceOp<"col_reduce"> {
  let summary = "reduces a value over the rows of its column";
  let description = [{
    The result at `(b, n)` is the `sum`, `max` or `mean` of the input over all
    `m`. A column reduction completes only once every row tile is done, so its
    result may only be yielded, to an output that spans `[n]` (`[b, n]` when
    batched): a bias gradient, for instance.

    ```mlir
    %dbias = coda.col_reduce sum %acc
    ```
  }];
  let hasVerifier = 1;
}

#endif // CODA_DIALECT_CODA_IR_CODAOPS_TD
