//===- EpilogueDims.cpp - the dims each epilogue value varies along -------===//

#include "coda/Dialect/Coda/IR/EpilogueDims.h"

using namespace mlir;
using namespace mlir::coda;

unsigned EpilogueDims::getResultMask(Operation *op,
                                     ArrayRef<unsigned> operandMasks,
                                     unsigned outputSpaceMask) {
  if (isa<RowReduceOp>(op))
    return operandMasks[0] & ~DimsAttr::kN;
  if (isa<ColReduceOp>(op))
    return operandMasks[0] & ~DimsAttr::kM;
  if (isa<DropoutOp>(op))
    return outputSpaceMask;
  if (isa<PartnerOp, GroupReduceOp>(op))
    return operandMasks[0] | DimsAttr::kN;
  if (auto coord = dyn_cast<CoordOp>(op))
    return getDimsBit(coord.getDim()) & outputSpaceMask;
  unsigned mask = 0;
  for (unsigned m : operandMasks)
    mask |= m;
  return mask;
}

EpilogueDims::EpilogueDims(EpilogueOpInterface op) {
  unsigned space = op.getOutputSpaceDims().getMask();
  Block &block = op.getEpilogueBlock();
  if (block.getNumArguments() != op.getNumEpilogueInputs() + 1)
    return;
  masks[op.getAccumulator()] = space;
  for (unsigned i = 0, e = op.getNumEpilogueInputs(); i < e; ++i)
    masks[op.getInputArg(i)] = op.getInputDimsAt(i).getMask();
  SmallVector<unsigned> operandMasks;
  for (Operation &inner : block) {
    operandMasks.clear();
    for (Value operand : inner.getOperands())
      operandMasks.push_back(masks.lookup(operand));
    unsigned mask = getResultMask(&inner, operandMasks, space);
    for (Value result : inner.getResults())
      masks[result] = mask;
  }
}
