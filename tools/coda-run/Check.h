//===- Check.h - comparing and writing coda-run's results -------*- C++ -*-===//
//
// Part of coda-run: how a GPU result is compared with the CPU reference, how
// results are written to .npy files, and how a run fails.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_TOOLS_CODA_RUN_CHECK_H
#define CODA_TOOLS_CODA_RUN_CHECK_H

#include "coda/Support/Npy.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <string>

namespace mlir::coda {

/// Prints "coda-run: error: MESSAGE" and returns the exit code of a failed
/// run.
int fail(const llvm::Twine &message);
int fail(llvm::Error error);

/// Fails `--device cuda` in a coda-run built without the CUDA headers.
int failWithoutCuda();

/// The seconds since `start`.
double secondsSince(std::chrono::steady_clock::time_point start);

/// A result of a run, as coda-run reports it.
struct ResultReport {
  /// The output's name.
  std::string name;
  const HostArray *array = nullptr;
  /// The CPU reference's result to compare with (--check), or null.
  const HostArray *reference = nullptr;
  /// Whether GEMMs on f32 operands (tf32 on the GPU) computed it.
  bool tf32 = false;
  /// The .npy files to write it to (as f32).
  llvm::SmallVector<std::string> files;
};

/// Prints a line per result ("  NAME [SHAPE] TYPE", its relative error from
/// the reference, the files written) and writes its files. Fails when a
/// write fails (removing the files written before it, so that a failed run
/// leaves no mix of new and old outputs) or a result is not within
/// tolerance of its reference.
llvm::Error reportResults(llvm::ArrayRef<ResultReport> results);

} // namespace mlir::coda

#endif // CODA_TOOLS_CODA_RUN_CHECK_H
