//===- EpilogueDims.h - the dims epilogue values vary along -----*- C++ -*-===//
//
// An epilogue runs once per output element (b, m, n), but many of its values
// do not vary along every dimension: a bias varies along n only, a row
// reduction along b and m only, a constant along none. This analysis gives
// each value of a GEMM epilogue the DimsAttr mask of the dimensions it
// varies along. Verifiers use it to decide which output a value may be
// written to; lowerings use it to size the tensors they materialize.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_IR_EPILOGUEDIMS_H
#define CODA_DIALECT_CODA_IR_EPILOGUEDIMS_H

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::coda {

class EpilogueDims {
public:
  /// Computes the dims of every value of `op`'s epilogue (a coda.gemm's or a
  /// coda.tile_epilogue's). The op's operands must have been verified; the
  /// epilogue ops need not.
  explicit EpilogueDims(EpilogueOpInterface op);

  /// The DimsAttr mask of the dims `value` varies along.
  unsigned getMask(Value value) const { return masks.lookup(value); }

  /// The mask of the result of `op`, given the masks of its operands.
  static unsigned getResultMask(Operation *op, ArrayRef<unsigned> operandMasks,
                                unsigned outputSpaceMask);

private:
  llvm::DenseMap<Value, unsigned> masks;
};

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_IR_EPILOGUEDIMS_H
