//===- Builtins.h - the DSL's built-in functions ----------------*- C++ -*-===//
//
// The one table of the functions an epilogue can call. Semantic analysis
// looks calls up in it and lowers them as it says, its diagnostics list it,
// and `coda-translate --list-epilogue-builtins` prints it, which a test
// compares with docs/dsl.md and the fuzzer's dictionary. The activations and
// the row reductions come from the dialect's enums, so a new ActivationKind
// or ReductionKind is a DSL function without a change here.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_FRONTEND_BUILTINS_H
#define CODA_FRONTEND_BUILTINS_H

#include "coda/Frontend/Program.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::coda::dsl {

/// How a call to a built-in function becomes nodes.
enum class Lowering {
  /// One node of `kind` on the arguments.
  Direct,
  /// min(max(x, lo), hi).
  Clamp,
  /// Multiplications for small integer exponents, else a Pow node.
  Pow,
  /// A Dropout node with the next stream.
  Dropout,
  /// A ColReduce node, only as the value of an output declared [N].
  ColSum,
  /// A Partner node at a constant power-of-2 distance.
  Partner,
  /// A GroupReduce node over groups of a constant power-of-2 width.
  Group,
};

/// A built-in function.
struct Builtin {
  /// What the function is, for the listing.
  enum class Family {
    /// coda.activation of a kind.
    Activation,
    /// An elementwise arith or math op, or dropout.
    Elementwise,
    /// coda.row_reduce, coda.col_reduce or coda.group_reduce of a kind.
    Reduction,
    /// The element's coordinates, or a value at another column.
    Position,
  };

  std::string name;
  /// The call as the documentation spells it: "clamp(x, lo, hi)".
  std::string signature;
  unsigned arity;
  Family family;
  Lowering lowering;
  Node::Kind kind;
  /// The kind of an activation.
  std::optional<ActivationKind> activation;
  /// The kind of a reduction.
  std::optional<ReductionKind> reduction;
  /// The type a rounding rounds to.
  std::optional<ElementType> rounding;
};

/// The built-in functions in the order diagnostics and the documentation list
/// them: one activation per ActivationKind, named as the dialect spells the
/// kind (but `gelu` for gelu_tanh), the elementwise functions, one `row_<kind>`
/// per ReductionKind, `col_sum`, one `group_<kind>` per ReductionKind, then
/// the position functions.
llvm::ArrayRef<Builtin> getBuiltins();

/// The built-in function called `name`, or null.
const Builtin *lookupBuiltin(llvm::StringRef name);

/// Prints the table, one function a line: its name, its family
/// (`activation`, `elementwise`, `reduction`) and its signature, separated
/// by tabs.
void printBuiltins(llvm::raw_ostream &os);

} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_BUILTINS_H
