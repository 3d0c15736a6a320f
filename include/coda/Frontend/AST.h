//===- AST.h - the parse tree of the epilogue DSL ---------------*- C++ -*-===//
//
// The epilogue DSL (docs/dsl.md) as the parser sees it: a header that declares
// operands and outputs, and a list of assignments of expressions. Nothing here
// is checked beyond syntax; Sema.h turns a parse tree into an EpilogueProgram.
// This layer depends on LLVM's Support library only, not on MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_FRONTEND_AST_H
#define CODA_FRONTEND_AST_H

#include "llvm/Support/SMLoc.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::coda::dsl {

/// The element type of a declared operand or output.
enum class ElementType { BF16, F16, F32 };

/// Which output dims (rows M, columns N) a value spans, as a bit mask. The bits
/// are those of the coda dialect's DimsAttr (n = 1, m = 2, and with n, 8 for
/// an output of the even columns only, `[M, N/2]`).
enum Dims : unsigned {
  kScalar = 0,
  kN = 1,
  kM = 2,
  kMN = kM | kN,
  kHalfN = 8,
  kMHalfN = kMN | kHalfN
};

/// A declared type `dtype[dims]`; `elementType` is empty for the GEMM operand
/// type (the type of undeclared inputs and of an undeclared `output`).
struct ValueType {
  std::optional<ElementType> elementType;
  unsigned dims = kMN;
  /// `N % p` (an operand of p columns, read at column n mod p): p, else 0.
  unsigned period = 0;
};

namespace ast {

/// An expression. One struct for every kind keeps the tree simple to build
/// and walk; the fields a kind does not use are left empty.
struct Expr {
  enum class Kind { Number, Name, Negate, Add, Sub, Mul, Div, Call };

  Kind kind;
  /// The whole expression, for underlining.
  llvm::SMRange range;
  /// Where diagnostics about this expression point: the literal, the name,
  /// the operator or the called function's name.
  llvm::SMLoc loc;
  /// Number: its value, rounded to f32.
  float number = 0;
  /// Name: the name read; Call: the function called.
  std::string name;
  /// Negate: 1 operand; Add, Sub, Mul, Div: 2; Call: the arguments.
  std::vector<std::unique_ptr<Expr>> operands;
  /// The depth of the tree below this node, counting this node.
  unsigned depth = 1;
};

/// `name: dtype[dims]` in the header.
struct Declaration {
  std::string name;
  llvm::SMRange nameRange;
  ValueType type;
  llvm::SMRange typeRange;
};

/// `name = value;`
struct Assignment {
  std::string name;
  llvm::SMRange nameRange;
  std::unique_ptr<Expr> value;
};

/// A whole program: `EPILOGUE [name(operands) [-> (outputs)]] { body }`.
struct Epilogue {
  /// The `EPILOGUE` keyword.
  llvm::SMRange keywordRange;
  /// The name in the header; empty without a header.
  std::string name;
  llvm::SMRange nameRange;
  std::vector<Declaration> operands;
  /// The declared outputs; empty when the header does not declare them.
  std::optional<std::vector<Declaration>> outputs;
  /// The `->` before the outputs, when they are declared.
  llvm::SMRange arrowRange;
  std::vector<Assignment> body;
  /// The closing brace.
  llvm::SMRange endRange;
};

} // namespace ast
} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_AST_H
