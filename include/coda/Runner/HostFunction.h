//===- HostFunction.h - host code that launches coda programs ---*- C++ -*-===//
//
// A function of a module that calls coda programs (a whole exported model
// function once coda-raise-linalg and coda-outline-programs have made its
// GEMMs programs), compiled for the host CPU with every program call a
// launch (coda-launch-programs): the programs run where a ProgramLauncher
// runs them (fused GPU kernels, or the CPU reference), the rest of the
// function on the host.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNNER_HOSTFUNCTION_H
#define CODA_RUNNER_HOSTFUNCTION_H

#include "coda/Runner/CpuRunner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <memory>
#include <vector>

namespace mlir::coda {

/// Runs the programs of a host function: program `index` (its place among
/// the module's programs, getPrograms) on `args`, writing `outputs`, host
/// buffers of the shapes its signature gives for them.
class ProgramLauncher {
public:
  virtual ~ProgramLauncher();
  virtual llvm::Error launch(unsigned index, ArrayRef<ArgumentRef> args,
                             ArrayRef<BufferRef> outputs) = 0;
};

/// Runs each program on the CPU reference, compiled at its first launch.
class CpuProgramLauncher : public ProgramLauncher {
public:
  /// `module` holds the programs; it must outlive the launcher.
  CpuProgramLauncher(ModuleOp module, ArrayRef<ProgramSignature> programs);
  ~CpuProgramLauncher() override;
  llvm::Error launch(unsigned index, ArrayRef<ArgumentRef> args,
                     ArrayRef<BufferRef> outputs) override;

private:
  ModuleOp module;
  std::vector<ProgramSignature> programs;
  std::map<unsigned, std::unique_ptr<CpuExecutable>> executables;
};

/// The element type and sizes (ShapedType::kDynamic where not static) of
/// an argument or result of a host function.
struct HostTensorType {
  ElementType elementType;
  SmallVector<int64_t> shape;
  /// "tensor<?x768xf32>", as the function spells it.
  std::string spelling;
};

class HostFunction {
public:
  /// Compiles function `name` of `module` (left as it is) for the host CPU,
  /// its program calls launches. The function must not be a program itself;
  /// its arguments and results must be ranked tensors of f32, f16 or bf16;
  /// a coda.gemm outside a program is an error (outline it first).
  static llvm::Expected<std::unique_ptr<HostFunction>> create(ModuleOp module,
                                                              StringRef name);
  ~HostFunction();

  /// The programs the function may launch, in the order of the module,
  /// and the module a launcher compiles them from (what the function
  /// calls, taken from the module it was created from).
  ArrayRef<ProgramSignature> getPrograms() const { return programs; }
  ModuleOp getProgramModule() const { return *programModule; }
  ArrayRef<HostTensorType> getArgumentTypes() const { return argumentTypes; }
  ArrayRef<HostTensorType> getResultTypes() const { return resultTypes; }

  /// Runs the function on `args` (one per argument, of its element type
  /// and static sizes), its programs through `launcher`; returns its
  /// results. A launch that fails fails the run.
  llvm::Expected<std::vector<HostArray>> run(ArrayRef<HostArray> args,
                                             ProgramLauncher &launcher) const;

private:
  HostFunction() = default;

  std::string name;
  OwningOpRef<ModuleOp> programModule;
  std::unique_ptr<ExecutionEngine> engine;
  std::vector<ProgramSignature> programs;
  std::vector<HostTensorType> argumentTypes, resultTypes;
};

} // namespace mlir::coda

#endif // CODA_RUNNER_HOSTFUNCTION_H
