//===- CpuRunner.h - run coda programs on the host CPU ----------*- C++ -*-===//
//
// Compiles a coda program through the CPU reference pipeline (coda-to-linalg
// down to LLVM), JIT-compiles it for the host, and runs it on host arrays.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNNER_CPURUNNER_H
#define CODA_RUNNER_CPURUNNER_H

#include "coda/Program/ProgramSignature.h"
#include "coda/Support/Npy.h"

#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace mlir {
class ExecutionEngine;
namespace coda {

/// The value bound to one program argument: `array` for tensors (in the
/// argument's element type), `f32` or `i64` for scalars of that type.
struct ArgumentValue {
  HostArray array;
  float f32 = 0.0f;
  int64_t i64 = 0;
};

/// The host element type of a tensor element type, if coda supports it.
std::optional<ElementType> getHostElementType(Type type);

class CpuExecutable {
public:
  /// Lowers the program `signature` describes in `module` with the CPU
  /// pipeline and JIT-compiles it. Lowering errors are reported through the
  /// context's diagnostic handler.
  static llvm::Expected<std::unique_ptr<CpuExecutable>>
  create(OwningOpRef<ModuleOp> module, ProgramSignature signature);

  ~CpuExecutable();

  /// Runs the program on `args` (one per argument, in order; shapes must have
  /// been checked with ProgramSignature::inferProblemShape) and returns its
  /// outputs.
  llvm::Expected<std::vector<HostArray>>
  run(ArrayRef<ArgumentValue> args) const;

private:
  CpuExecutable(std::unique_ptr<ExecutionEngine> engine,
                ProgramSignature signature);

  std::unique_ptr<ExecutionEngine> engine;
  ProgramSignature signature;
};

} // namespace coda
} // namespace mlir

#endif // CODA_RUNNER_CPURUNNER_H
