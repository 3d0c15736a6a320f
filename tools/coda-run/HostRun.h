//===- HostRun.h - run a GPU program on host arrays -------------*- C++ -*-===//
//
// Part of coda-run: runs a program on the GPU runtime from and to host
// arrays.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_TOOLS_CODA_RUN_HOSTRUN_H
#define CODA_TOOLS_CODA_RUN_HOSTRUN_H

#include "coda/Runtime/Runtime.h"
#include "coda/Support/HostValue.h"

#include <optional>
#include <vector>

namespace mlir::coda {

struct HostRunResult {
  std::vector<HostArray> outputs;
  /// The median kernel time in milliseconds, when benchmarked.
  std::optional<double> medianMs;
};

/// Runs `program` on host data: copies the arguments to the device, fills
/// the outputs with NaN (so that an element the kernel fails to write cannot
/// pass a check), launches, waits, and copies the outputs back. With
/// `benchmarkIterations` > 0, also times the kernel (CUDA events, median).
llvm::Expected<HostRunResult> runOnHost(GpuRuntime &runtime,
                                        GpuProgram &program,
                                        ArrayRef<ArgumentValue> arguments,
                                        const ProblemShape &problem,
                                        int benchmarkIterations = 0);

} // namespace mlir::coda

#endif // CODA_TOOLS_CODA_RUN_HOSTRUN_H
