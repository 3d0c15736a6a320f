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

#include "coda/Program/ProgramGraph.h"
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
  /// its program calls launches, each coda.gemm outside a program made one
  /// first (coda-outline-programs). Its arguments and results must be
  /// ranked tensors of f32, f16 or bf16. A program graph (ProgramGraph.h)
  /// needs no host code: its programs are launched in turn.
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
  /// The function as a program graph, or null when it is not one
  /// (getGraphViolation says why).
  const ProgramGraph *getGraph() const { return graph ? &*graph : nullptr; }
  StringRef getGraphViolation() const { return graphViolation; }

  /// Whether `args` are one per argument, each of its element type and
  /// static sizes; an error says which is not.
  llvm::Error checkArguments(ArrayRef<HostArray> args) const;

  /// Runs the function on `args` (checkArguments), its programs through
  /// `launcher`; returns its results. A launch that fails fails the run.
  llvm::Expected<std::vector<HostArray>> run(ArrayRef<HostArray> args,
                                             ProgramLauncher &launcher) const;

private:
  HostFunction() = default;
  llvm::Expected<std::vector<HostArray>>
  runGraph(ArrayRef<HostArray> args, ProgramLauncher &launcher) const;
  llvm::Expected<std::vector<HostArray>>
  runHostCode(ArrayRef<HostArray> args, ProgramLauncher &launcher) const;

  std::string name;
  OwningOpRef<ModuleOp> programModule;
  std::unique_ptr<ExecutionEngine> engine;
  std::optional<ProgramGraph> graph;
  std::string graphViolation;
  std::vector<ProgramSignature> programs;
  std::vector<HostTensorType> argumentTypes, resultTypes;
};

} // namespace mlir::coda

#endif // CODA_RUNNER_HOSTFUNCTION_H
