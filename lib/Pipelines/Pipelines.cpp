//===- Pipelines.cpp - registration of coda's named pipelines -------------===//

#include "coda/Pipelines/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void mlir::coda::registerPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "coda-cpu-pipeline",
      "Lower coda programs to the LLVM dialect for the host CPU through the "
      "reference lowering (coda-to-linalg, bufferization, loops)",
      [](OpPassManager &pm, const CpuPipelineOptions &options) {
        buildCpuPipeline(pm, options.widenToF64);
      });
  PassPipelineRegistration<GpuPipelineOptions>(
      "coda-gpu-pipeline",
      "Compile each coda program to one fused GEMM + epilogue kernel for an "
      "sm_90a GPU (TMA, wgmma, epilogue on the accumulator registers), as a "
      "gpu.binary next to a host declaration that carries its launch ABI",
      buildGpuPipeline);
}
