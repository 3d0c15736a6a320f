//===- Pipelines.h - coda's named pass pipelines ----------------*- C++ -*-===//

#ifndef CODA_PIPELINES_PIPELINES_H
#define CODA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::coda {

/// Adds the passes that lower a module of coda programs (func.func ops on
/// tensors that hold coda.gemm ops) to the LLVM dialect for the host CPU,
/// through the reference lowering (coda-to-linalg). Every public function gets
/// a C interface wrapper (`_mlir_ciface_<name>`) that takes and returns
/// memref descriptors.
void buildCpuPipeline(OpPassManager &pm);

/// Registers the named pipelines with the pass registry: coda-cpu-pipeline.
void registerPipelines();

} // namespace mlir::coda

#endif // CODA_PIPELINES_PIPELINES_H
