//===- GatedPairs.cpp - two raised products of one A as one gated GEMM ----===//
//
// A gated MLP as frontends emit it, act(x Wg^T) * (x Wu^T), raises into two
// coda.gemm: the up projection's product alone, and the gate projection's
// with the activation and the product with the up projection's result (an
// [m, n] input) in its epilogue. The up projection's result then makes a
// round trip through memory. This rewrite makes the two one GEMM over B's
// rows (or columns) interleaved, gate j at 2j and up j at 2j + 1: the
// epilogue reads the up value as `coda.partner(acc, 1)` and writes the even
// columns (`[m, n/2]`), the form coda's gated programs take
// (examples/swiglu.coda).
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

namespace {

/// A coda.gemm that computes the plain product op(A) op(B) into one [m, n]
/// output and nothing else.
bool isPlainProduct(GemmOp gemm) {
  if (gemm.getC() || gemm.getAlpha() || !gemm.getInputs().empty() ||
      gemm.getNumResults() != 1 || gemm.isBatched() ||
      gemm.getAccumulatorHalfN())
    return false;
  ValueRange yielded = gemm.getYield().getValues();
  return yielded.size() == 1 && yielded[0] == gemm.getAccumulator();
}

/// Why `gate`, which reads the result of `up` (the same A) as its epilogue
/// input `upInput`, cannot become one gated GEMM with it; empty when it can.
std::string whyNotPaired(GemmOp gate, GemmOp up, unsigned upInput,
                         const RaiseLinalgOptions &options) {
  if (gate.getB().getType() != up.getB().getType() ||
      gate.getTransposeA() != up.getTransposeA() ||
      gate.getTransposeB() != up.getTransposeB())
    return "its B and the up projection's differ in type or layout";
  if (gate.getC() || gate.getAlpha() || gate.isBatched() ||
      gate.getAccumulatorHalfN())
    return "it has a C operand, an alpha or a batch";
  if (!up.getResult(0).hasOneUse())
    return "the up projection's result is read elsewhere too";
  if (!options.lowPrecisionEpilogue &&
      !getElementTypeOrSelf(up.getResult(0).getType()).isF32())
    return "the up projection's result is rounded to " +
           print(getElementTypeOrSelf(up.getResult(0).getType())) +
           " before the product, which the fused epilogue would not do "
           "(low-precision-epilogue=true allows it)";
  for (unsigned i = 0, e = gate.getInputs().size(); i < e; ++i)
    if (i != upInput && (gate.getInputDimsAt(i).getMask() & DimsAttr::kN))
      return "its epilogue input #" + std::to_string(i) +
             " spans n, which the interleaved GEMM's columns would not match";
  for (Operation &op : gate.getEpilogueBlock().without_terminator())
    if (isa<RowReduceOp, ColReduceOp, PartnerOp, CoordOp>(op))
      return "its epilogue has " + op.getName().getStringRef().str() +
             ", which the interleaved columns would change";
  for (unsigned i = 0, e = gate.getNumResults(); i < e; ++i)
    if (gate.getResultDimsAt(i).getMask() != (DimsAttr::kM | DimsAttr::kN))
      return "output #" + std::to_string(i) + " does not span [m, n]";
  return "";
}

/// `gate` and `up` stored interleaved along N: row (or column, when B is
/// [K, N]) 2j of the result is gate's j, 2j + 1 up's j.
Value interleave(RewriterBase &rewriter, Location loc, Value gate, Value up,
                 bool transposeB) {
  auto type = cast<RankedTensorType>(gate.getType());
  unsigned nDim = transposeB ? 0 : 1;
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rewriter, loc, gate);
  SmallVector<OpFoldResult> wide = sizes;
  if (std::optional<int64_t> n = getConstantIntValue(sizes[nDim]))
    wide[nDim] = rewriter.getIndexAttr(2 * *n);
  else
    wide[nDim] =
        arith::MulIOp::create(rewriter, loc, cast<Value>(sizes[nDim]),
                              arith::ConstantIndexOp::create(rewriter, loc, 2))
            .getResult();
  Value result =
      tensor::EmptyOp::create(rewriter, loc, wide, type.getElementType());
  SmallVector<OpFoldResult> strides(2, rewriter.getIndexAttr(1));
  strides[nDim] = rewriter.getIndexAttr(2);
  Value halves[] = {gate, up};
  for (auto [parity, half] : llvm::enumerate(halves)) {
    SmallVector<OpFoldResult> offsets(2, rewriter.getIndexAttr(0));
    offsets[nDim] = rewriter.getIndexAttr(parity);
    result = tensor::InsertSliceOp::create(rewriter, loc, half, result, offsets,
                                           sizes, strides);
  }
  return result;
}

void pair(RewriterBase &rewriter, GemmOp gate, GemmOp up, unsigned upInput) {
  Location loc = gate.getLoc();
  rewriter.setInsertionPoint(gate);
  Value b =
      interleave(rewriter, loc, gate.getB(), up.getB(), gate.getTransposeB());
  SmallVector<Value> inputs;
  SmallVector<DimsAttr> inputDims;
  for (auto [i, input] : llvm::enumerate(gate.getInputs()))
    if (i != upInput) {
      inputs.push_back(input);
      inputDims.push_back(gate.getInputDimsAt(i));
    }
  MLIRContext *context = rewriter.getContext();
  SmallVector<DimsAttr> resultDims(
      gate.getNumResults(),
      DimsAttr::get(context, DimsAttr::kM | DimsAttr::kN | DimsAttr::kHalfN));
  auto gated =
      GemmOp::create(rewriter, loc, gate.getResultTypes(), resultDims,
                     gate.getA(), b, gate.getTransposeA(), gate.getTransposeB(),
                     Value(), Value(), Value(), inputs, inputDims);
  Block &block = gated.getEpilogueBlock();
  OpBuilder body = OpBuilder::atBlockEnd(&block);
  IRMapping mapping;
  mapping.map(gate.getAccumulator(), gated.getAccumulator());
  unsigned next = 1;
  for (unsigned i = 0, e = gate.getInputs().size(); i < e; ++i)
    if (i != upInput)
      mapping.map(gate.getInputArg(i), block.getArgument(next++));
  mapping.map(gate.getInputArg(upInput),
              PartnerOp::create(body, loc, body.getF32Type(),
                                gated.getAccumulator(),
                                body.getI64IntegerAttr(1)));
  for (Operation &op : gate.getEpilogueBlock())
    body.clone(op, mapping);
  rewriter.replaceOp(gate, gated.getResults());
  rewriter.eraseOp(up);
}

} // namespace

void raising::pairGatedProducts(RewriterBase &rewriter, Operation *root,
                                const RaiseLinalgOptions &options) {
  // The pairs are disjoint (an up projection has no input, a gate one has
  // one): found first, then rewritten.
  SmallVector<std::tuple<GemmOp, GemmOp, unsigned>> pairs;
  root->walk([&](GemmOp gate) {
    for (auto [i, input] : llvm::enumerate(gate.getInputs())) {
      auto up = input.getDefiningOp<GemmOp>();
      if (!up || !isPlainProduct(up) || up.getA() != gate.getA() ||
          gate.getInputDimsAt(i).getMask() != (DimsAttr::kM | DimsAttr::kN))
        continue;
      std::string why = whyNotPaired(gate, up, i, options);
      if (why.empty()) {
        pairs.emplace_back(gate, up, i);
        return;
      }
      if (options.explain)
        gate->emitRemark() << "not made one gated GEMM with the product of "
                              "the same A that it reads: "
                           << why;
    }
  });
  for (auto [gate, up, input] : pairs)
    pair(rewriter, gate, up, input);
}
