//===- ProgramSignature.h - the interface of a coda program -----*- C++ -*-===//
//
// A coda program is a func.func whose body is one coda.gemm fed directly by
// the function's arguments and whose results it returns in order. Argument and
// result attributes `coda.name` name epilogue inputs and outputs; the dropout
// seed is the i64 input named "seed". A, B, C, alpha and beta are identified by
// the gemm operand they feed. ProgramSignature describes that interface to the
// tools and runtimes that bind data to a program and check its shapes.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_PROGRAM_PROGRAMSIGNATURE_H
#define CODA_PROGRAM_PROGRAMSIGNATURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir::coda {

/// What a program argument feeds.
enum class ArgumentRole { A, B, C, Alpha, Beta, Input };

/// The name of `role`: "a", "b", "c", "alpha", "beta" or "input" (a string
/// literal, so its data() is null-terminated).
StringRef stringifyArgumentRole(ArgumentRole role);

struct ProgramArgument {
  /// `coda.name` if present, else the role ("a", "b", "c", "alpha", "beta"),
  /// else "argN".
  std::string name;
  ArgumentRole role;
  /// A ranked tensor type, or f32 / i64 for scalars.
  Type type;
  /// The DimsAttr mask the argument spans (A and B: none, C: the output space).
  unsigned dims = 0;
  /// An input that spans `n mod p`: p (its columns), else 0.
  unsigned period = 0;
};

/// What an output's every element is, when the GEMM plays no part in it:
/// an argument's own value, or the sum of an `[m, n]` argument over its rows.
/// A derived backward program's outputs often are (docs/autodiff.md): the
/// gradients of the accumulator and of a residual are the output's gradient,
/// a bias's its column sum. A caller may take or sum the argument instead of
/// launching the program.
enum class OutputSource { Computed, Argument, ColumnSum };

/// The name of `source`: "computed", "argument" or "column_sum" (a string
/// literal).
StringRef stringifyOutputSource(OutputSource source);

struct ProgramOutput {
  /// `coda.name` if present, else "resultN".
  std::string name;
  RankedTensorType type;
  unsigned dims = 0;
  OutputSource source = OutputSource::Computed;
  /// The argument the output is or sums (not Computed), else -1.
  int sourceArgument = -1;
};

/// The sizes of one problem: batch (1 when not batched), M, N, K.
struct ProblemShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

struct ProgramSignature {
  std::string functionName;
  SmallVector<ProgramArgument> arguments;
  SmallVector<ProgramOutput> outputs;
  Type operandType;
  bool transposeA = false, transposeB = false, batched = false;
  /// Whether the accumulator spans [m, n/2]: B then has N / 2 columns.
  bool halfNAccumulator = false;
  /// Whether B holds op(B)'s column pairs in its two halves (b_halves).
  bool bHalves = false;

  /// B's layout as the tools spell it: nk, kn or halves.
  StringRef getLayoutB() const {
    return bHalves ? "halves" : transposeB ? "nk" : "kn";
  }

  /// Describes the program in `module`: the function named `name`, or the only
  /// function that holds a coda.gemm. Emits an error on the function (or the
  /// module) and fails when it is not a program.
  static FailureOr<ProgramSignature> get(ModuleOp module, StringRef name = "");

  /// The index of the argument with `role`, or -1.
  int findRole(ArgumentRole role) const;
  /// The index of the epilogue input named `name`, or -1.
  int findInput(StringRef name) const;
  /// The index of the output named `name`, or -1.
  int findOutput(StringRef name) const;
  /// The index of the dropout seed (the i64 input named "seed"), or -1.
  int findSeed() const;

  /// Infers M, N, K (and the batch) from the shapes of the tensor arguments
  /// (`shapes[i]` for argument i; ignored for scalars) and checks every tensor
  /// against them and against the static sizes of its type.
  llvm::Expected<ProblemShape>
  inferProblemShape(ArrayRef<SmallVector<int64_t>> shapes) const;

  /// The shape of output `index` for `problem`.
  SmallVector<int64_t> getOutputShape(unsigned index,
                                      const ProblemShape &problem) const;
};

/// `shape` spelled "[2, ?, 3]" (? where dynamic), as errors give shapes.
std::string spellShape(ArrayRef<int64_t> shape);

/// Why `func` is not a coda program, as ProgramSignature::get reports it (no
/// body, a body other than one coda.gemm and the return of its results, an
/// operand that is not an argument or an argument that feeds two operands or
/// none), or nothing when it is one.
std::optional<std::string> getProgramViolation(func::FuncOp func);

/// The programs of `module` (the functions getProgramViolation accepts that
/// hold a coda.gemm), in the order of the module: the order that numbers
/// them for a launch from host code (HostLaunch.h).
SmallVector<func::FuncOp> getPrograms(ModuleOp module);

/// Erases every function of `module` but the program `functionName`, so that
/// lowering the module compiles that program alone.
void isolateProgram(ModuleOp module, StringRef functionName);

} // namespace mlir::coda

#endif // CODA_PROGRAM_PROGRAMSIGNATURE_H
