//===- Passes.td - coda conversion passes ------------------*- tablegen -*-===//

#ifndef CODA_CONVERSION_PASSES_TD
#define CODA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodaGridConstantTensorMaps : Pass<"coda-grid-constant-tensor-maps",
                                      "::mlir::ModuleOp"> {
  let summary = "Pass the tensor maps of coda kernels by value, as grid constants";
  let description = [{
    Runs after `convert-gpu-to-nvvm` on the kernels `coda-to-gpu` generated.
    Every kernel parameter that the module's `coda.kernel_abi` calls a
    `tensor_map` becomes a 128-byte, 64-byte aligned `llvm.byval` parameter
    with `nvvm.grid_constant`: the runtime passes the `CUtensorMap` itself,
    and the TMA instructions read it through the parameter's address.
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

def CodaPlanKernels : Pass<"coda-plan-kernels", "::mlir::ModuleOp"> {
  let summary = "Choose and check the GPU kernel of every coda program";
  let description = [{
    Gives the `coda.gemm` of every coda program (a top-level `func.func`
    whose body is one `coda.gemm` fed by its arguments, returning its
    results) the `coda.kernel_plan` attribute that `coda-to-gpu` builds its
    kernel from: the options' tile, pipeline, schedule, cluster and tile
    order, each one the options leave open chosen for the GEMM, and the
    epilogue's choices (a bias the accumulators start at, 16-byte loads).
    Programs the kernel cannot run (target, layouts wgmma cannot read, TMA
    row alignment, column reductions into non-f32 outputs, row reductions
    wider than a cluster of tiles, shared-memory budget) are rejected with an error that
    says what would be legal, and the module is left unchanged.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The GPU the kernels are generated for (sm_90a)">,
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Output rows per tile: 128 or 256 (cooperative), 64 or 128 "
           "(pingpong); 0 chooses">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Output columns per tile: 64, 128, 192 or 256; 0 chooses">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Shared-memory pipeline depth (K steps in flight), at least 2; 0 "
           "chooses">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "How the two consumer warpgroups share tiles: cooperative (one "
           "tile, half the rows each) or pingpong (every other tile each, one "
           "multiplying while the other runs its epilogue); empty chooses">,
    Option<"epilogueVectorBytes", "epilogue-vector-bytes", "int64_t",
           /*default=*/"16",
           "Bytes a lane writes at once to a 16-bit output in the epilogue: "
           "16 (8 columns, regrouped across each quad of lanes by shuffles) "
           "or 4 (2 columns)">,
    Option<"clusterM", "cluster-m", "int64_t", /*default=*/"0",
           "Blocks per cluster along M: 1, or 2 (the two blocks compute "
           "vertically adjacent tiles and each loads half of their common B "
           "tile into both by TMA multicast); 0 chooses">,
    Option<"clusterN", "cluster-n", "int64_t", /*default=*/"0",
           "Blocks per cluster along N, 1 to 16: the blocks compute the "
           "adjacent tiles of one row block and row reductions combine "
           "across them through distributed shared memory, for rows of up "
           "to cluster-n x tile-n columns; 0 chooses (from a static N)">,
    Option<"groupRows", "group-rows", "int64_t", /*default=*/"0",
           "The tile order (raster): the blocks walk the output tiles "
           "group-rows row blocks at a time, column by column (1: row by "
           "row); a multiple of cluster-m, at most 1024; 0 chooses (8)">,
    Option<"fastActivations", "fast-activations", "bool", /*default=*/"false",
           "GELU(tanh), SiLU and sigmoid on the tanh.approx.f32 instruction "
           "(one special-function operation instead of two; tanh's relative "
           "error up to 2^-11, as cuBLASLt's fused GELU)">,
    Option<"seedInMemory", "seed-in-memory", "bool", /*default=*/"false",
           "The dropout seed's kernel parameter is the global address of its "
           "8 bytes, read as the kernel starts, instead of its value: a CUDA "
           "graph that captured a launch replays with the seed memory holds "
           "then">,
    Option<"deterministic", "deterministic", "bool", /*default=*/"false",
           "Column reductions without float atomics: each warp writes its "
           "partial result, and a merge kernel combines them in a fixed "
           "order, so that the result is bit-identical from run to run">
  ];
}

def ConvertCodaToGPU : Pass<"coda-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Generate one fused sm_90a GEMM + epilogue kernel per coda program";
  let description = [{
    Replaces every coda program (a top-level `func.func` whose body is one
    `coda.gemm` fed by its arguments, returning its results) by:

    - a `gpu.module @<program>_kernels` holding one kernel `gpu.func
      @<program>` built from gpu, nvvm, llvm, arith, math and scf ops: A and
      B tiles stream through a multi-stage shared-memory pipeline by TMA
      (128-byte swizzle, mbarriers) that a producer warpgroup fills, two
      consumer warpgroups multiply them with asynchronous wgmma instructions
      into fp32 accumulator registers, persistent blocks walk the output
      tiles, and each tile's epilogue is a `coda.tile_epilogue` on those
      registers, which `coda-lower-tile-epilogues` lowers;
    - a private declaration of the program that keeps its signature and
      argument names.

    Both carry `coda.kernel_abi`, the launch contract (parameters, grid,
    block, shared memory; see KernelABI.h). The kernel is the one the
    `coda.kernel_plan` of the `coda.gemm` describes (`coda-plan-kernels`
    attaches it); a program without one, or whose plan it cannot run, is
    rejected with an error and the module is left unchanged.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def CodaLowerTileEpilogues : Pass<"coda-lower-tile-epilogues",
                                  "::mlir::ModuleOp"> {
  let summary = "Lower the epilogues of coda kernels onto their accumulator registers";
  let description = [{
    Replaces every `coda.tile_epilogue` that `coda-to-gpu` left in a kernel
    by the code that runs the epilogue on the accumulator elements each
    thread holds and writes every output element once: inputs read a column
    group at a time (16-byte chunks regrouped by quad shuffles where the plan
    says so), three steps ahead; one Philox call per 8 dropout decisions;
    row reductions by quad shuffles, column reductions by warp shuffles and
    one f32 atomic per warp and column (under a deterministic plan, a store
    of the warp's partial result for the merge kernel); 16-bit outputs written 16 bytes per
    lane; every access unchecked in interior tiles and checked in the
    others. The kernel's float arithmetic may then contract into fmas.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def ConvertCodaToLinalg : Pass<"coda-to-linalg"> {
  let summary = "Lower coda.gemm to linalg on tensors (the reference semantics)";
  let description = [{
    Rewrites every `coda.gemm` into `linalg.generic` ops on tensors: one
    contraction for `op(A) * op(B)`, then one elementwise or reduction op per
    epilogue op, each over exactly the dims its value varies along (a bias add
    over `[n]` stays a vector op; a row reduction reduces over `n`). Dropout
    expands to the Philox-4x32-10 arithmetic of its definition, activations to
    their `arith`/`math` formulas. Nothing is fused or approximated: this is
    the reference every other lowering is checked against.
    `linalg-fuse-elementwise-ops` afterwards merges the elementwise ops.

    With `widen-to-f64`, every float argument, result and value of the
    functions is widened to f64 (the program's function in double precision,
    for gradient checks): the function's signature changes accordingly.
  }];
  let options = [
    Option<"widenToF64", "widen-to-f64", "bool", "false",
           "Compute in f64, with every float argument and result widened">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def ConvertLinalgToCoda : Pass<"coda-raise-linalg"> {
  let summary = "Raise linalg matmuls and their epilogue consumers into coda.gemm";
  let description = [{
    Finds contractions on tensors (`linalg.matmul`, with or without
    transposing `indexing_maps`, `linalg.batch_matmul`, a `linalg.generic`
    that is a matmul, operands fed through `linalg.transpose` or broadcasts)
    and rewrites each, together with the consumers that can run on its
    accumulator, into one `coda.gemm`: elementwise ops (`linalg.generic`,
    `linalg.elementwise`, `linalg.add`, ...) with operands broadcast along M
    or N, row reductions whose results feed back (LayerNorm, softmax) and
    column reductions into an `[n]` output. Activation formulas are raised to
    `coda.activation`; a final cast to bf16 or f16 becomes the output element
    type. Consumers that cannot join the epilogue are left exactly as they
    were; an intermediate they read becomes an extra output. Before that,
    a product whose A is a normalization of a tensor x (affine in x with
    per-row and per-column coefficients) is rewritten to read x, the
    weights scaled along K and the normalization's row and column terms
    applied after it (`fold-norms`).
    docs/raising.md lists what is recognised and why the rest is not.
  }];
  let options = [
    Option<"lowPrecisionEpilogue", "low-precision-epilogue", "bool", "false",
           "Also fuse ops that compute (or contractions that accumulate) in "
           "bf16/f16; the epilogue computes them in f32 and rounds once">,
    Option<"explain", "explain", "bool", "false",
           "Emit a remark on each contraction or consumer left in linalg, "
           "saying why">,
    Option<"foldNorms", "fold-norms", "bool", "true",
           "Fold a normalization before a product (RMSNorm, LayerNorm) into "
           "it: the product reads the tensor before the normalization, with "
           "the weights scaled along K and the rest in the epilogue, where "
           "that moves fewer elements">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::coda::CodaDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // CODA_CONVERSION_PASSES_TD
