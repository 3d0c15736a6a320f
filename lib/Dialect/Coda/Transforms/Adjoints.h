//===- Adjoints.h - the derivative of each epilogue op ----------*- C++ -*-===//
//
// The one table of derivatives: for every op an epilogue may hold, how the
// adjoint of its result becomes adjoints of its operands.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_DIALECT_CODA_TRANSFORMS_ADJOINTS_H
#define CODA_LIB_DIALECT_CODA_TRANSFORMS_ADJOINTS_H

#include "mlir/IR/Builders.h"

namespace mlir::coda {

/// Builds, after the forward ops, the contributions of `op` to the adjoints
/// of its operands given `resultAdjoint`, the adjoint of its one result: one
/// value per operand, null for an operand that takes none (integers, an
/// op's constant parameters). Each value is read at the same output element
/// (b, m, n) as the op, so a row reduction's contribution is a row reduction
/// again. Emits an error at `op` and fails when it has no derivative.
FailureOr<SmallVector<Value>> buildAdjoint(OpBuilder &b, Operation *op,
                                           Value resultAdjoint);

} // namespace mlir::coda

#endif // CODA_LIB_DIALECT_CODA_TRANSFORMS_ADJOINTS_H
