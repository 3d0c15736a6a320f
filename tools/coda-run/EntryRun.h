//===- EntryRun.h - run a host function that launches programs --*- C++ -*-===//
//
// Part of coda-run: `--entry NAME` runs function NAME of a module (an
// exported model function once raised and outlined), compiled for the host
// CPU, with each coda program it calls launched on the device: fused GPU
// kernels with --device cuda, the CPU reference with --device cpu.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_TOOLS_CODA_RUN_ENTRYRUN_H
#define CODA_TOOLS_CODA_RUN_ENTRYRUN_H

#include "coda/Runtime/Runtime.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::coda {

struct EntryRequest {
  std::string entry;
  std::string programPath;
  /// "cpu" or "cuda".
  std::string device;
  /// With cuda: run again with the programs on the CPU reference and
  /// compare each result.
  bool check = false;
  /// `argI=FILE.npy` for argument I, `resultI=FILE.npy` for result I.
  std::vector<std::pair<std::string, std::string>> arguments, outputs;
  GpuCompileOptions gpuOptions;
};

/// Runs `request` on `module`; returns coda-run's exit code, having printed
/// what it ran, or why it could not.
int runEntry(ModuleOp module, const EntryRequest &request);

} // namespace mlir::coda

#endif // CODA_TOOLS_CODA_RUN_ENTRYRUN_H
