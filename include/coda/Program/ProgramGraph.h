//===- ProgramGraph.h - a function of several coda programs -----*- C++ -*-===//
//
// A program graph is a function that calls coda programs and nothing else:
// once coda-outline-programs has made each of its GEMMs a program, its body
// is calls of the module's programs and the return, each call's operands the
// function's arguments or results of earlier calls, its results results of
// calls. A chain of GEMMs that pass tensors along (an output projection
// writing h and its row statistics, then the next projection reading them:
// docs/raising.md) is one. It runs without host code: each program in
// order, on one stream, the values that pass between them in a workspace
// (GraphPlan). A function that is itself a program is a graph of one call.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_PROGRAM_PROGRAMGRAPH_H
#define CODA_PROGRAM_PROGRAMGRAPH_H

#include "coda/Program/ProgramSignature.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace mlir::coda {

/// A value of a graph: argument `index` of the function, or output `output`
/// of the call `index`.
struct GraphValue {
  enum class Kind { Argument, CallOutput };
  Kind kind = Kind::Argument;
  unsigned index = 0, output = 0;
};

/// One call of a program.
struct GraphCall {
  /// The program it calls: its index in ProgramGraph::programs.
  unsigned program = 0;
  /// What it passes, one per program argument.
  SmallVector<GraphValue> arguments;
};

/// Where a call's output is written: result `result` of the function, or
/// the workspace at `offset` bytes.
struct GraphPlace {
  int result = -1;
  int64_t offset = 0;
};

/// A graph's calls on arguments of given shapes.
struct GraphPlan {
  /// Per call: its problem, and its outputs' shapes and places.
  SmallVector<ProblemShape> problems;
  SmallVector<SmallVector<SmallVector<int64_t>>> outputShapes;
  SmallVector<SmallVector<GraphPlace>> places;
  /// The function's results' shapes.
  SmallVector<SmallVector<int64_t>> resultShapes;
  /// The workspace the values between calls take: each at an offset that is
  /// a multiple of kWorkspaceAlignment, a value's bytes reused by values
  /// made after its last reader.
  int64_t workspaceBytes = 0;
};

struct ProgramGraph {
  /// The alignment of each value in the workspace, in bytes.
  static constexpr int64_t kWorkspaceAlignment = 256;

  std::string functionName;
  /// Ranked tensor types, or f32 / i64 for scalars.
  SmallVector<Type> argumentTypes;
  SmallVector<RankedTensorType> resultTypes;
  /// The module's programs, in its order (getPrograms): what HostLaunch.h
  /// numbers them by.
  SmallVector<ProgramSignature> programs;
  SmallVector<GraphCall> calls;
  /// What the function returns: outputs of calls, each once.
  SmallVector<GraphValue> results;

  /// Describes function `name` of `module`, whose GEMMs are programs
  /// (coda-outline-programs); with no name, the module's only function that
  /// is not a program, else its only program. Emits an error on the
  /// function (or the module) and fails when it is not a graph
  /// (getGraphViolation).
  static FailureOr<ProgramGraph> get(ModuleOp module, StringRef name);

  /// The calls' problems and outputs and the workspace for arguments of
  /// `shapes` (`shapes[i]` for argument i; ignored for scalars), checked
  /// against the function's static sizes and each program's; an error names
  /// the call and its program.
  llvm::Expected<GraphPlan> plan(ArrayRef<SmallVector<int64_t>> shapes) const;

  /// "the call of 'p' (#1) in 'f'": how errors name call `call`.
  std::string describeCall(unsigned call) const;

  /// The calls and results as JSON: {"function": NAME, "calls": [{"program":
  /// NAME, "arguments": [VALUE...]}...], "results": [VALUE...]}, each VALUE
  /// ["argument", I] or ["call", J, OUTPUT].
  llvm::json::Object describe() const;
};

/// Why `func` of `module` is not a program graph (no body, an op that is not
/// a call of a program, a result that is an argument or returned twice), or
/// nothing when it is one.
std::optional<std::string> getGraphViolation(ModuleOp module,
                                             func::FuncOp func);

} // namespace mlir::coda

#endif // CODA_PROGRAM_PROGRAMGRAPH_H
