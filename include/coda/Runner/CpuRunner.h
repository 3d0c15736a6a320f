//===- CpuRunner.h - run coda programs on the host CPU ----------*- C++ -*-===//
//
// Compiles a coda program through the CPU reference pipeline (coda-to-linalg
// down to LLVM), JIT-compiles it for the host, and runs it on host arrays.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNNER_CPURUNNER_H
#define CODA_RUNNER_CPURUNNER_H

#include "coda/Program/ProgramSignature.h"
#include "coda/Support/HostValue.h"

#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace mlir {
class ExecutionEngine;
namespace coda {

/// A dense row-major buffer in host memory that the caller owns.
struct BufferRef {
  void *data = nullptr;
  SmallVector<int64_t> shape;
};

/// One argument of a run on caller-owned buffers: `buffer` for tensors,
/// `number` (f32 scalars) or `i64` for scalars.
struct ArgumentRef {
  BufferRef buffer;
  double number = 0.0;
  int64_t i64 = 0;
};

class CpuExecutable {
public:
  /// Lowers the program `signature` describes in `module` with the CPU
  /// pipeline and JIT-compiles it; `widenToF64` computes in f64, every float
  /// tensor and scalar widened to f64 (coda-cpu-pipeline{widen-to-f64}).
  /// Lowering errors are reported through the context's diagnostic handler.
  static llvm::Expected<std::unique_ptr<CpuExecutable>>
  create(OwningOpRef<ModuleOp> module, ProgramSignature signature,
         bool widenToF64 = false);

  ~CpuExecutable();

  /// Runs the program on `args` (one per argument, in order, in each
  /// argument's element type; shapes must have been checked with
  /// ProgramSignature::inferProblemShape) and returns its outputs. Not for
  /// a widened program.
  llvm::Expected<std::vector<HostArray>>
  run(ArrayRef<ArgumentValue> args) const;

  /// Runs the program on caller-owned buffers, in the element types it was
  /// compiled for (f64 when widened): checks the arguments' shapes, and
  /// writes each output into `outputs[i]`, which must have its shape.
  llvm::Error runInto(ArrayRef<ArgumentRef> args,
                      ArrayRef<BufferRef> outputs) const;

  const ProgramSignature &getSignature() const { return signature; }
  bool isWidened() const { return widenedToF64; }

private:
  CpuExecutable(std::unique_ptr<ExecutionEngine> engine,
                ProgramSignature signature, bool widenToF64);
  /// The size of an element of `type` in the compiled program.
  unsigned getElementBytes(Type type) const;
  /// Fails, saying why, when `problem`'s outputs and accumulator do not fit
  /// in this machine's memory.
  llvm::Error checkFits(const ProblemShape &problem) const;

  std::unique_ptr<ExecutionEngine> engine;
  ProgramSignature signature;
  bool widenedToF64;
};

} // namespace coda
} // namespace mlir

#endif // CODA_RUNNER_CPURUNNER_H
