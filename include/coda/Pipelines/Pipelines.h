//===- Pipelines.h - coda's named pass pipelines ----------------*- C++ -*-===//

#ifndef CODA_PIPELINES_PIPELINES_H
#define CODA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::coda {

/// Adds the passes that lower a module of coda programs (func.func ops on
/// tensors that hold coda.gemm ops) to the LLVM dialect for the host CPU,
/// through the reference lowering (coda-to-linalg). Every public function gets
/// a C interface wrapper (`_mlir_ciface_<name>`) that takes and returns
/// memref descriptors.
void buildCpuPipeline(OpPassManager &pm, bool widenToF64 = false);

/// Options of coda-cpu-pipeline.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<bool> widenToF64{
      *this, "widen-to-f64",
      llvm::cl::desc("Compute in f64, every float argument and result "
                     "widened (coda-to-linalg{widen-to-f64})"),
      llvm::cl::init(false)};
};

/// Options of coda-gpu-pipeline.
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("The GPU to compile for (sm_90a)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (the PTX ISA version)"),
      llvm::cl::init("+ptx80")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: isa (PTX text), bin (a cubin, "
                     "assembled by ptxas) or fatbin"),
      llvm::cl::init("isa")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("The CUDA toolkit to take libdevice and ptxas from "
                     "(default: CUDA_ROOT, CUDA_HOME or CUDA_PATH, else the "
                     "toolkit coda was built with)"),
      llvm::cl::init("")};
  Option<int64_t> tileM{
      *this, "tile-m",
      llvm::cl::desc("Output rows per tile: 128 or 256 (cooperative), 64 or "
                     "128 (pingpong); 0 chooses"),
      llvm::cl::init(0)};
  Option<int64_t> tileN{
      *this, "tile-n",
      llvm::cl::desc("Output columns per tile: 64, 128, 192 or 256; 0 chooses"),
      llvm::cl::init(0)};
  Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Shared-memory pipeline depth; 0 chooses"),
      llvm::cl::init(0)};
  Option<int64_t> epilogueVectorBytes{
      *this, "epilogue-vector-bytes",
      llvm::cl::desc("Bytes a lane writes at once to a 16-bit output in the "
                     "epilogue: 16 or 4"),
      llvm::cl::init(16)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("How the consumer warpgroups share tiles: cooperative or "
                     "pingpong; empty chooses"),
      llvm::cl::init("")};
  Option<int64_t> clusterM{
      *this, "cluster-m",
      llvm::cl::desc("Blocks per cluster along M, sharing B tiles by TMA "
                     "multicast: 1 or 2; 0 chooses"),
      llvm::cl::init(0)};
  Option<int64_t> clusterN{
      *this, "cluster-n",
      llvm::cl::desc("Blocks per cluster along N, whose row reductions "
                     "combine across their tiles: 1 to 16; 0 chooses"),
      llvm::cl::init(0)};
  Option<int64_t> groupRows{
      *this, "group-rows",
      llvm::cl::desc("The tile order: row blocks walked column by column "
                     "before the next group (a multiple of cluster-m, at "
                     "most 1024); 0 chooses"),
      llvm::cl::init(0)};
  Option<bool> fastActivations{
      *this, "fast-activations",
      llvm::cl::desc("GELU(tanh), SiLU and sigmoid on tanh.approx.f32 "
                     "(faster, tanh within 2^-11 relative error)"),
      llvm::cl::init(false)};
  Option<bool> seedInMemory{
      *this, "seed-in-memory",
      llvm::cl::desc("The kernel reads the dropout seed from the global "
                     "address it is given, as it starts"),
      llvm::cl::init(false)};
  Option<bool> deterministic{
      *this, "deterministic",
      llvm::cl::desc("Column reductions merged in a fixed order, without "
                     "float atomics: bit-identical from run to run"),
      llvm::cl::init(false)};
};

/// Adds the passes that turn each coda program into one fused GEMM +
/// epilogue kernel for an sm_90a GPU, compiled to PTX (or a cubin), next to a
/// host declaration of the program that carries the kernel's launch contract
/// (coda.kernel_abi, see KernelABI.h):
///  1. coda-plan-kernels: each program's kernel, chosen and checked, as the
///     coda.kernel_plan of its coda.gemm; coda-to-gpu: the kernel of each
///     plan as a gpu.module of gpu/nvvm/llvm/arith/math/scf ops, each tile's
///     epilogue a coda.tile_epilogue; coda-lower-tile-epilogues: those on the
///     accumulator registers; then canonicalize and cse;
///  2. nvvm-attach-target: the NVVM target (chip, features, -O3);
///  3. in each gpu.module: convert-scf-to-cf, then convert-gpu-to-nvvm
///     (gpu, arith, math to NVVM/LLVM; math through libdevice);
///  4. coda-grid-constant-tensor-maps: tensor maps become byval grid-constant
///     parameters;
///  5. convert-nvvm-to-llvm (inline PTX for the nvvm ops without LLVM
///     intrinsics), canonicalize, cse, reconcile-unrealized-casts;
///  6. gpu-module-to-binary: each gpu.module becomes a gpu.binary holding the
///     PTX (format=isa) or a cubin (format=bin).
void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &options);

/// Registers the named pipelines with the pass registry: coda-cpu-pipeline
/// and coda-gpu-pipeline.
void registerPipelines();

} // namespace mlir::coda

#endif // CODA_PIPELINES_PIPELINES_H
