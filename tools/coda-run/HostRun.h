//===- HostRun.h - run a GPU program on host arrays -------------*- C++ -*-===//
//
// Part of coda-run: runs a program on the GPU runtime from and to host
// arrays.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_TOOLS_CODA_RUN_HOSTRUN_H
#define CODA_TOOLS_CODA_RUN_HOSTRUN_H

#include "coda/Runner/HostFunction.h"
#include "coda/Runtime/Runtime.h"
#include "coda/Support/HostValue.h"

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace mlir::coda {

struct HostRunResult {
  std::vector<HostArray> outputs;
  /// The median kernel time in milliseconds, when benchmarked.
  std::optional<double> medianMs;
};

/// The GPU runtime of device 0 for `--device cuda`, or an error that says
/// why not and that `--device cpu` runs the CPU reference instead.
llvm::Expected<std::unique_ptr<GpuRuntime>> createDeviceRuntime();

/// Runs `program` on host data: copies the arguments to the device, fills
/// the outputs with NaN (so that an element the kernel fails to write cannot
/// pass a check), launches, waits, and copies the outputs back. With
/// `benchmarkIterations` > 0, also times the kernel (CUDA events, median).
llvm::Expected<HostRunResult> runOnHost(GpuRuntime &runtime,
                                        GpuProgram &program,
                                        ArrayRef<ArgumentValue> arguments,
                                        const ProblemShape &problem,
                                        int benchmarkIterations = 0);

/// Runs the program graph `host` (HostFunction::getGraph) on the GPU as one
/// launch of the runtime's GpuProgramGraph: copies the arguments to the
/// device, fills the results and the workspace with NaN, launches, waits,
/// and copies the results back.
llvm::Expected<std::vector<HostArray>>
runGraphOnDevice(GpuRuntime &runtime, const HostFunction &host,
                 ArrayRef<HostArray> args, GpuCompileOptions options,
                 StringRef sourceName);

/// Runs the programs of a host function (coda-run --entry) on the GPU,
/// each loaded at its first launch: copies the arguments to the device,
/// launches, and copies the outputs back.
class GpuProgramLauncher : public ProgramLauncher {
public:
  /// `module` holds the programs; it must outlive the launcher.
  GpuProgramLauncher(GpuRuntime &runtime, ModuleOp module,
                     ArrayRef<ProgramSignature> programs,
                     GpuCompileOptions options, StringRef sourceName);
  llvm::Error launch(unsigned index, ArrayRef<ArgumentRef> args,
                     ArrayRef<BufferRef> outputs) override;

private:
  GpuRuntime &runtime;
  ModuleOp module;
  std::string sourceName;
  std::vector<ProgramSignature> programs;
  GpuCompileOptions options;
  std::map<unsigned, std::unique_ptr<GpuProgram>> loaded;
};

} // namespace mlir::coda

#endif // CODA_TOOLS_CODA_RUN_HOSTRUN_H
