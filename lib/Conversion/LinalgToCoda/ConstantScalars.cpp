//===- ConstantScalars.cpp - scalars the host computes from constants ----===//
//
// Frontends compute some scalars of an epilogue in single-element tensors
// from constants: JAX's variance divides by `N - ddof` and selects NaN unless
// `N - ddof > 0`, both computed by 0-d linalg.generic ops from the constant
// ddof. Raised as they are, they become epilogue inputs the host code computes
// at every call and the kernel reads (an f32, and the guard as an i64). Each
// such op is evaluated here instead, by folding its body one op at a time,
// and replaced by a constant, as is each tensor.extract of one: the epilogue
// then reads constants, which the GPU pipeline folds (the guard's select
// disappears, the division is by a constant).
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

namespace {

/// The single element `op`'s payload yields when its inputs are constants of
/// one element each, found by folding the payload's ops in order; null when
/// an input is not such a constant or an op does not fold to a constant.
Attribute evaluateSingleElement(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumResults() != 1)
    return {};
  auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() != 1)
    return {};
  Block &body = op.getRegion().front();
  DenseMap<Value, Attribute> known;
  for (OpOperand *input : op.getDpsInputOperands()) {
    DenseElementsAttr elements;
    if (!matchPattern(input->get(), m_Constant(&elements)) ||
        elements.getNumElements() != 1)
      return {};
    known[op.getMatchingBlockArgument(input)] =
        elements.getValues<Attribute>()[0];
  }
  if (op.payloadUsesValueFromOperand(op.getDpsInitOperand(0)))
    return {};
  auto valueOf = [&](Value value) -> Attribute {
    if (Attribute attr = known.lookup(value))
      return attr;
    Attribute attr;
    if (value.getParentBlock() != &body &&
        matchPattern(value, m_Constant(&attr)))
      return attr;
    return {};
  };
  for (Operation &inner : body.without_terminator()) {
    if (inner.getNumResults() != 1 || inner.getNumRegions() != 0)
      return {};
    SmallVector<Attribute> operands;
    for (Value operand : inner.getOperands())
      if (!operands.emplace_back(valueOf(operand)))
        return {};
    // A fold gives an attribute, or one of the op's operands (x - 0 is x).
    SmallVector<OpFoldResult> folded;
    if (failed(inner.fold(operands, folded)) || folded.size() != 1)
      return {};
    Attribute result = isa<Attribute>(folded[0])
                           ? cast<Attribute>(folded[0])
                           : valueOf(cast<Value>(folded[0]));
    if (!result)
      return {};
    known[inner.getResult(0)] = result;
  }
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto element = dyn_cast_or_null<TypedAttr>(valueOf(yield.getValues()[0]));
  if (!element || element.getType() != type.getElementType())
    return {};
  return DenseElementsAttr::get(type, element);
}

} // namespace

SmallVector<Operation *> raising::foldConstantScalars(RewriterBase &rewriter,
                                                      Operation *root) {
  // In program order, so that a scalar computed from a folded one folds too.
  SmallVector<linalg::GenericOp> generics;
  root->walk([&](linalg::GenericOp op) { generics.push_back(op); });
  SmallVector<Operation *> constants;
  for (linalg::GenericOp op : generics) {
    Attribute value = evaluateSingleElement(op);
    if (!value)
      continue;
    rewriter.setInsertionPoint(op);
    auto constant = arith::ConstantOp::create(rewriter, op.getLoc(),
                                              cast<TypedAttr>(value));
    constants.push_back(constant);
    for (OpOperand &use :
         llvm::make_early_inc_range(op->getResult(0).getUses()))
      if (auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner())) {
        rewriter.setInsertionPoint(extract);
        constants.push_back(rewriter.replaceOpWithNewOp<arith::ConstantOp>(
            extract, cast<DenseElementsAttr>(value).getValues<TypedAttr>()[0]));
      }
    SmallVector<Operation *> operands;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        operands.push_back(def);
    rewriter.replaceOp(op, constant);
    eraseDeadOps(rewriter, operands);
  }
  return constants;
}
