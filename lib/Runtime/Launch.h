//===- Launch.h - how the runtime launches a kernel -------------*- C++ -*-===//
//
// Internal to the GPU runtime: the parts of a launch that loading a kernel
// (Program.cpp) and checking a cached one (KernelCache.cpp) also need.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_RUNTIME_LAUNCH_H
#define CODA_LIB_RUNTIME_LAUNCH_H

#include "RuntimeImpl.h"

#include "mlir/IR/Types.h"

#include <optional>

namespace mlir::coda::runtime {

/// The launch of `kernel` on `grid` blocks, in clusters when the kernel runs
/// in clusters; `attribute` then holds the cluster dims that the config
/// points to.
CUlaunchConfig getLaunchConfig(const Kernel &kernel, int64_t grid,
                               CUstream stream, CUlaunchAttribute &attribute);

/// The tensor map element type of `type`, if TMA reads it.
std::optional<CUtensorMapDataType> tensorMapType(Type type);

} // namespace mlir::coda::runtime

#endif // CODA_LIB_RUNTIME_LAUNCH_H
