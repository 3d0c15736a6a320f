//===- Program.h - a checked epilogue in SSA form ---------------*- C++ -*-===//
//
// What semantic analysis makes of an epilogue: its operands and outputs with
// their types, and its computation as a list of nodes in SSA form, each
// reading earlier nodes by index. Names are resolved, function calls checked,
// constants folded, `clamp` and small integer `pow` expanded and dropout
// streams numbered, so that building IR from a program is a one-to-one map
// from nodes to operations. This layer uses MLIR only for the dialect's enums
// (CodaEnums.h), not its IR.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_FRONTEND_PROGRAM_H
#define CODA_FRONTEND_PROGRAM_H

#include "coda/Dialect/Coda/IR/CodaEnums.h"
#include "coda/Frontend/AST.h"

#include "llvm/ADT/SmallVector.h"

namespace mlir::coda::dsl {

/// One f32 value of the epilogue.
struct Node {
  enum class Kind {
    /// The GEMM result `input`.
    Accumulator,
    /// Epilogue operand number `index`.
    Input,
    /// The f32 constant `constant`.
    Constant,
    // Arithmetic on the operands.
    Negate,
    Add,
    Sub,
    Mul,
    Div,
    Minimum,
    Maximum,
    Pow,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Abs,
    Sin,
    Cos,
    /// The operand, through which no gradient flows.
    Detach,
    /// The operand rounded to `rounding` (bf16 or f16), as an f32.
    Round,
    /// `activation` of the operand.
    Activation,
    /// Dropout of the operand with probability `constant`, stream `index`.
    Dropout,
    /// `reduction` of the operand over the columns of its row.
    RowReduce,
    /// `reduction` of the operand over the rows of its column.
    ColReduce,
    /// `reduction` of the operand over its group of `index` columns.
    GroupReduce,
    /// The operand at column n xor `index` (0 past the last column).
    Partner,
    /// The element's row, as an f32.
    Row,
    /// The element's column, as an f32.
    Column,
  };

  Kind kind;
  /// Where the value is computed in the source.
  llvm::SMLoc loc;
  /// Indices of the nodes this one reads; all smaller than its own.
  llvm::SmallVector<unsigned, 2> operands;
  /// The dims the value varies along.
  unsigned dims = kScalar;
  float constant = 0;
  unsigned index = 0;
  /// The kind of an Activation node.
  std::optional<ActivationKind> activation;
  /// The kind of a RowReduce, ColReduce or GroupReduce node.
  std::optional<ReductionKind> reduction;
  /// The type a Round node rounds to.
  std::optional<ElementType> rounding;
};

/// An operand or output of the epilogue.
struct Port {
  std::string name;
  llvm::SMLoc loc;
  ValueType type;
};

/// A checked epilogue.
struct EpilogueProgram {
  /// The function name: the header's name, or "epilogue".
  std::string name;
  /// The `EPILOGUE` keyword and the closing brace.
  llvm::SMLoc loc, endLoc;
  /// The epilogue's operands, declared ones in declaration order, then the
  /// undeclared ones in order of first use. The dropout seed is not one.
  std::vector<Port> inputs;
  /// The outputs in declaration order.
  std::vector<Port> outputs;
  /// The computation, in order.
  std::vector<Node> nodes;
  /// For each output, the node whose value is written to it.
  std::vector<unsigned> outputValues;
  /// The number of dropout calls; they use streams 0 to numDropouts - 1.
  unsigned numDropouts = 0;
};

} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_PROGRAM_H
