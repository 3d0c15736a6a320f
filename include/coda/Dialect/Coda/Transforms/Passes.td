//===- Passes.td - coda dialect transforms -----------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD
#define CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodaDeriveBackward : Pass<"coda-derive-backward", "::mlir::ModuleOp"> {
  let summary = "Derive the backward programs of every coda program";
  let description = [{
    For every coda program `@f` of the module, adds the programs that compute
    its gradients (docs/autodiff.md), each one GEMM + epilogue:

    - `@f_backward` (`accumulator=recompute`): recomputes the forward GEMM and
      runs the epilogue gradient on it: from `grad_<output>` of every `[m, n]`
      output, `grad_acc` and `grad_<input>` of every tensor input (`[n]`
      inputs as column sums, `[m]` inputs as row sums); dropout regenerates
      the forward mask from its seed and stream;
    - or (`accumulator=saved`) `@f_saving`, the forward that also writes its
      accumulator `saved_acc` and the row statistics its gradient reads
      (`saved_row<i>`, `[m]`), and `@f_backward_saved`, the epilogue gradient
      on the accumulator of the GEMM that produces the gradient of the first
      `[m, n]` output (`A [M, K] * B [K, N]`: the next layer's dgrad; with
      `next-weight=nk`, B stored `[N, K]`, `@f_backward_saved_nk`); and,
      unless an output spans `[m, n/2]`, `@f_backward_from_saved`, the
      epilogue gradient on `saved_acc` with every output's gradient an input
      (its kernel runs no product);
    - `@f_grad_a` and `@f_grad_b`: `grad_a` and `grad_b` (in the types of A and B) from
      `grad_acc`, in the layouts of A and B.

    A program that cannot be differentiated (a batched GEMM, C, an op without
    a derivative) is reported at the offending op and fails the pass.

    ```mlir
    // coda-opt --coda-derive-backward
    func.func @f_backward(%a: tensor<?x768xbf16>, %b: tensor<3072x768xbf16>,
                          %bias: tensor<3072xf32> {coda.name = "bias"},
                          %g: tensor<?x3072xbf16> {coda.name = "grad_output"})
        -> (tensor<?x3072xbf16> {coda.name = "grad_acc"},
            tensor<3072xf32> {coda.name = "grad_bias"})
    ```
  }];
  let options = [
    Option<"accumulator", "accumulator", "std::string", "\"recompute\"",
           "Where the epilogue gradient finds the forward accumulator: "
           "recompute (the GEMM again) or saved (written by the forward)">,
    Option<"nextWeight", "next-weight", "std::string", "\"kn\"",
           "With accumulator=saved, how the B of @f_backward_saved (the next "
           "layer's weight) is stored: kn ([K, N], an nn.Linear weight) or "
           "nk ([N, K], a weight stored [in, out] as Hugging Face's Conv1D; "
           "the program is then @f_backward_saved_nk)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def CodaSplitRows : Pass<"coda-split-rows", "::mlir::ModuleOp"> {
  let summary = "Split each program whose rows are exchanged across tiles in two";
  let description = [{
    A program whose row reductions reach elements of the row (a LayerNorm's
    or a softmax's written output) exchanges each row's partial results
    across the tiles of a cluster on the GPU, which holds rows of up to 4096
    columns. This pass makes each such program `@f` a program graph
    (docs/gpu.md#program-graphs) of two derived programs whose rows have no
    width limit (deriveRowSplit, docs/autodiff.md): `@f_row_statistics`, the
    GEMM writing its accumulator (`split_acc`, f32) and its row reductions
    as row statistics (`split_row<i>`, merged after the GEMM), then
    `@f_row_apply`, the epilogue on them, which runs no product. The GPU
    runtime does this itself for a launch whose rows are too wide for a
    cluster. A program that cannot be split fails the pass, saying why.

    ```mlir
    // coda-opt --coda-split-rows
    func.func @ln(%a: ..., %b: ..., %gamma: ...) -> (tensor<?x?xbf16> {coda.name = "output"}) {
      %s:3 = call @ln_row_statistics(%a, %b, %gamma) : ...
      %0 = call @ln_row_apply(%a, %b, %gamma, %s#0, %s#1, %s#2) : ...
      return %0 : tensor<?x?xbf16>
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def CodaOutlinePrograms : Pass<"coda-outline-programs", "::mlir::ModuleOp"> {
  let summary = "Make every coda.gemm that is not a program a program of its own";
  let description = [{
    A coda.gemm in the middle of a larger function (as `coda-raise-linalg`
    leaves it) is not a coda program, which the GPU lowering, the runtime and
    `coda-derive-backward` take. This pass moves each such coda.gemm into a
    new function of the module that is one: its arguments the GEMM's
    operands in order (A, B, C, alpha, beta, then the epilogue inputs, named
    `input<i>`, or `seed` for the i64 input that seeds a dropout), its results
    the GEMM's (named `output`, or `output<i>` when there are several). The
    function is named after the one the GEMM was in (`@mlp` gives
    `@mlp_gemm`, `@mlp_gemm_1`, ... where the name is taken), and a
    `func.call` to it takes the GEMM's place. Programs are left as they are.
    With `report`, every op left around the calls that computes a tensor
    (a linalg op: the weights a folded normalization scales, statistics
    computed outside an epilogue, a consumer that could not fuse) gets a
    remark: it is compiled as the rest of the function is, not as part of a
    fused kernel.

    ```mlir
    // coda-opt --coda-raise-linalg --coda-outline-programs
    func.func @mlp_gemm(%a: tensor<?x768xf32>, %b: tensor<768x3072xf32>,
                        %bias: tensor<3072xf32> {coda.name = "input0"})
        -> (tensor<?x3072xf32> {coda.name = "output"})
    func.func @mlp(...) {
      ...
      %0 = call @mlp_gemm(%x, %w, %bias) : (...) -> tensor<?x3072xf32>
    ```
  }];
  let options = [
    Option<"report", "report", "bool", "false",
           "Emit a remark on each op left outside the programs that computes "
           "a tensor">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def CodaLaunchPrograms : Pass<"coda-launch-programs", "::mlir::ModuleOp"> {
  let summary = "Replace each program's body by a launch through the host runtime";
  let description = [{
    The host side of a module whose functions call coda programs (as
    `coda-outline-programs` leaves them): the body of every program becomes
    a call into the runtime that runs it as a fused kernel (the GPU) or as
    the CPU reference, so that the rest of the module can be compiled for
    the host CPU (`coda-cpu-pipeline`) with the programs compiled apart.
    Programs are numbered in the order of the module. A program's arguments
    and outputs travel in one `memref<?xi64>` of five words each (a tensor's
    aligned address, rank and up to three sizes; a scalar's bits):
    `coda_host_shapes(index, packed)` writes the outputs' sizes, which come
    from the program's signature; the program allocates its outputs, stores
    their addresses, and `coda_host_launch(index, packed)` runs it. Both are
    external functions with the C interface (`_mlir_ciface_...`), which the
    host runner binds (include/coda/Runner/HostFunction.h). A function that
    holds a coda.gemm but is not a program is an error: outline it first.

    ```mlir
    // coda-opt --coda-outline-programs --coda-launch-programs
    func.func @mlp_gemm(%a: tensor<?x768xf32>, %b: tensor<3072x768xf32>, ...)
        -> (tensor<?x3072xf32> {coda.name = "output"}) {
      %packed = memref.alloca() : memref<20xi64>
      ...
      call @coda_host_shapes(%c0_i64, %cast) : (i64, memref<?xi64>) -> ()
      %out = memref.alloc(%m) : memref<?x3072xf32>
      ...
      call @coda_host_launch(%c0_i64, %cast) : (i64, memref<?xi64>) -> ()
      %t = bufferization.to_tensor %out restrict writable : ...
      return %t : tensor<?x3072xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD
