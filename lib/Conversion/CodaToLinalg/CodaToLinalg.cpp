//===- CodaToLinalg.cpp - coda.gemm to linalg on tensors ------------------===//
//
// The reference lowering. The contraction becomes one linalg.generic; each
// epilogue op becomes one linalg.generic over exactly the dims its value varies
// along (EpilogueDims), so broadcasts, row reductions and column reductions are
// explicit tensor ops with the semantics the dialect defines.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToLinalg/CodaToLinalg.h"
#include "coda/Conversion/Passes.h"
#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CONVERTCODATOLINALG
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The position of output-space dim `bit` among the dims of `mask`, which are
/// ordered b, m, n.
unsigned positionIn(unsigned mask, unsigned bit) {
  return llvm::popcount(mask & ~((bit << 1) - 1));
}

/// A value of the epilogue, materialized: a tensor over the dims of `mask`, or
/// the scalar itself when `mask` is 0.
struct Materialized {
  Value value;
  unsigned mask = 0;
  /// An input that spans n mod `period` (read at column n mod period), else 0.
  unsigned period = 0;
};

/// Lowers one coda.gemm.
class GemmLowering {
public:
  /// Lowers `op`, computing in `computeType`: f32, or f64 for the widened
  /// reference.
  GemmLowering(GemmOp op, ConversionPatternRewriter &rewriter, Type computeType)
      : op(op), rewriter(rewriter), loc(op.getLoc()),
        space(op.getOutputSpaceDims().getMask()), f32(computeType) {}

  /// Replaces the op by its lowering on `operands`, returning values of
  /// `resultTypes`.
  LogicalResult lower(ValueRange operands, TypeRange resultTypes);

private:
  /// The size of output-space dim `bit`.
  OpFoldResult size(unsigned bit) const;
  /// An empty tensor over the dims of `mask`.
  Value emptyTensor(unsigned mask, Type elementType);
  /// The indexing map from an iteration space over the dims of `iterMask`
  /// (plus `extraDims` trailing dims) to an operand over the dims of `mask`
  /// (column n mod `period` when it is not 0).
  AffineMap operandMap(unsigned iterMask, unsigned mask, unsigned extraDims = 0,
                       unsigned period = 0) const;
  /// `value` as a tensor or scalar of the compute type, converting if
  /// needed; an input that spans n mod `period` over the dims of `mask`,
  /// column n its column n mod period.
  Value asF32(Value value, unsigned mask, unsigned period = 0);
  /// A clone of the epilogue op `inner` on `args`, computing in the compute
  /// type.
  Operation *cloneInComputeType(OpBuilder &b, Operation &inner,
                                ValueRange args);

  /// Builds a linalg.generic over the dims of `mask` that runs `body` on the
  /// elements of `inputs` and yields one value per type of `resultTypes`.
  ValueRange buildElementwise(
      unsigned mask, ArrayRef<Materialized> inputs, TypeRange resultTypes,
      function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body);

  Value lowerContraction(Value a, Value b);
  /// `value` with its dim `dim` (of even size) reordered between pairs and
  /// halves: with `toHalves`, element 2j + g moves to g * size / 2 + j (an
  /// `[m, n halves]` output); otherwise back (B's rows under b_halves).
  Value reorderPairs(Value value, unsigned dim, bool toHalves);
  /// The product of an accumulator [m, n/2] (N / 2 wide) at the even
  /// columns of the output space, zero at the odd ones.
  Value spreadToEvenColumns(Value product);
  Value lowerAccumulator(Value product, Value c, Value alpha, Value beta);
  void lowerEpilogueOp(Operation &inner);
  Materialized lowerReduction(ReductionKind kind, Materialized input,
                              unsigned reducedBit);
  /// A linalg.generic over the dims of `input` and n whose element is
  /// `body`'s value, given the element's index along each dim.
  Materialized buildAlongN(
      Materialized input,
      function_ref<Value(OpBuilder &, Location, function_ref<Value(unsigned)>)>
          body);
  /// The reduction of `input` over the group of `width` columns that holds
  /// each element (its columns inside the output).
  Materialized lowerGroupReduction(ReductionKind kind, Materialized input,
                                   int64_t width);
  /// `input` at column n xor `distance`, 0 past the last column.
  Materialized lowerPartner(Materialized input, int64_t distance);
  /// The coordinate along `dim` of every element.
  Materialized lowerCoord(OutputDim dim);
  /// `OpTy` of every element of `input` and the f32 scalar `scalar`.
  template <typename OpTy>
  Materialized withScalar(Materialized input, Value scalar);
  Value lowerOutput(Materialized value, unsigned mask, RankedTensorType type);

  /// The size of output-space dim `bit` as an f32 scalar.
  Value sizeAsF32(unsigned bit);

  GemmOp op;
  ConversionPatternRewriter &rewriter;
  Location loc;
  unsigned space;
  /// The compute type (f32 but in the widened reference).
  Type f32;
  OpFoldResult batchSize, mSize, nSize;
  llvm::DenseMap<Value, Materialized> values;
  std::optional<EpilogueDims> dims;
};

OpFoldResult GemmLowering::size(unsigned bit) const {
  return bit == DimsAttr::kB ? batchSize : bit == DimsAttr::kM ? mSize : nSize;
}

Value GemmLowering::emptyTensor(unsigned mask, Type elementType) {
  SmallVector<OpFoldResult> sizes;
  for (unsigned bit : {DimsAttr::kB, DimsAttr::kM, DimsAttr::kN})
    if (mask & bit)
      sizes.push_back(size(bit));
  return tensor::EmptyOp::create(rewriter, loc, sizes, elementType);
}

AffineMap GemmLowering::operandMap(unsigned iterMask, unsigned mask,
                                   unsigned extraDims, unsigned period) const {
  SmallVector<AffineExpr> results;
  for (unsigned bit : {DimsAttr::kB, DimsAttr::kM, DimsAttr::kN}) {
    if (!(mask & bit))
      continue;
    AffineExpr dim = rewriter.getAffineDimExpr(positionIn(iterMask, bit));
    results.push_back(bit == DimsAttr::kN && period ? dim % period : dim);
  }
  return AffineMap::get(llvm::popcount(iterMask) + extraDims, 0, results,
                        rewriter.getContext());
}

ValueRange GemmLowering::buildElementwise(
    unsigned mask, ArrayRef<Materialized> inputs, TypeRange resultTypes,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> ins, outs;
  SmallVector<AffineMap> maps;
  for (const Materialized &input : inputs) {
    ins.push_back(input.value);
    maps.push_back(operandMap(mask, input.mask, 0, input.period));
  }
  SmallVector<Type> tensorTypes;
  for (Type type : resultTypes) {
    outs.push_back(emptyTensor(mask, type));
    tensorTypes.push_back(outs.back().getType());
    maps.push_back(operandMap(mask, mask));
  }
  SmallVector<utils::IteratorType> iterators(llvm::popcount(mask),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, tensorTypes, ins, outs, maps, iterators,
      [&](OpBuilder &b, Location l, ValueRange args) {
        SmallVector<Value> results = body(b, l, args.take_front(ins.size()));
        linalg::YieldOp::create(b, l, results);
      });
  return generic.getResults();
}

Operation *GemmLowering::cloneInComputeType(OpBuilder &b, Operation &inner,
                                            ValueRange args) {
  IRMapping mapping;
  mapping.map(inner.getOperands(), args);
  if (f32.isF32())
    return b.clone(inner, mapping);
  // Widened: the epilogue's f32 values become values of the compute type.
  if (auto constant = dyn_cast<arith::ConstantOp>(inner))
    if (auto value = dyn_cast<FloatAttr>(constant.getValue()))
      return arith::ConstantOp::create(
          b, inner.getLoc(), b.getFloatAttr(f32, value.getValueAsDouble()));
  Operation *clone = b.clone(inner, mapping);
  for (OpResult result : clone->getResults())
    if (isa<FloatType>(result.getType()))
      result.setType(f32);
  return clone;
}

Value GemmLowering::asF32(Value value, unsigned mask, unsigned period) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || (type.getElementType() == f32 && !period))
    return value;
  return buildElementwise(mask, {{value, mask, period}}, {f32},
                          [&](OpBuilder &b, Location l, ValueRange args) {
                            Value element = args[0];
                            if (element.getType() != f32)
                              element =
                                  arith::ExtFOp::create(b, l, f32, element);
                            return SmallVector<Value>{element};
                          })[0];
}

Value GemmLowering::sizeAsF32(unsigned bit) {
  Value index = getValueOrCreateConstantIndexOp(rewriter, loc, size(bit));
  Value i64 =
      arith::IndexCastUIOp::create(rewriter, loc, rewriter.getI64Type(), index);
  return arith::UIToFPOp::create(rewriter, loc, f32, i64);
}

Value GemmLowering::lowerContraction(Value a, Value b) {
  // Iteration space: [b,] m, n, k.
  unsigned k = llvm::popcount(space); // position of the k dim
  auto dim = [&](unsigned bit) {
    return rewriter.getAffineDimExpr(positionIn(space, bit));
  };
  AffineExpr kExpr = rewriter.getAffineDimExpr(k);
  auto operandMapFor = [&](Value operand, AffineExpr rows, AffineExpr cols) {
    SmallVector<AffineExpr> results;
    if (cast<RankedTensorType>(operand.getType()).getRank() == 3)
      results.push_back(dim(DimsAttr::kB));
    results.append({rows, cols});
    return AffineMap::get(k + 1, 0, results, rewriter.getContext());
  };
  AffineMap aMap = op.getTransposeA()
                       ? operandMapFor(a, kExpr, dim(DimsAttr::kM))
                       : operandMapFor(a, dim(DimsAttr::kM), kExpr);
  AffineMap bMap = op.getTransposeB()
                       ? operandMapFor(b, dim(DimsAttr::kN), kExpr)
                       : operandMapFor(b, kExpr, dim(DimsAttr::kN));
  AffineMap outMap = operandMap(space, space, /*extraDims=*/1);

  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(f32, 0.0));
  Value init =
      linalg::FillOp::create(rewriter, loc, zero, emptyTensor(space, f32))
          .getResult(0);
  SmallVector<utils::IteratorType> iterators(k, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, init.getType(), ValueRange{a, b}, ValueRange{init},
      ArrayRef<AffineMap>{aMap, bMap, outMap}, iterators,
      [&](OpBuilder &bb, Location l, ValueRange args) {
        auto ext = [&](Value v) -> Value {
          return v.getType() == f32 ? v : arith::ExtFOp::create(bb, l, f32, v);
        };
        // The sum over K may be reassociated (vectorized) and contracted:
        // f32 accumulation in any order, as on the GPU's tensor cores.
        auto flags =
            arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
        Value product =
            arith::MulFOp::create(bb, l, ext(args[0]), ext(args[1]), flags);
        linalg::YieldOp::create(
            bb, l,
            ValueRange{arith::AddFOp::create(bb, l, args[2], product, flags)});
      });
  return generic.getResult(0);
}

Value GemmLowering::reorderPairs(Value value, unsigned dim, bool toHalves) {
  // Element i of the result along `dim` reads element `from(i)` of `value`.
  auto type = cast<RankedTensorType>(value.getType());
  unsigned rank = type.getRank();
  Value init = tensor::EmptyOp::create(
      rewriter, loc, tensor::getMixedSizes(rewriter, loc, value),
      type.getElementType());
  Value size = tensor::DimOp::create(rewriter, loc, value, dim);
  MLIRContext *context = rewriter.getContext();
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             rewriter, loc, type, ValueRange{}, ValueRange{init},
             ArrayRef<AffineMap>{
                 AffineMap::getMultiDimIdentityMap(rank, context)},
             iterators,
             [&](OpBuilder &b, Location l, ValueRange) {
               SmallVector<Value> indices;
               for (unsigned d = 0; d < rank; ++d)
                 indices.push_back(linalg::IndexOp::create(b, l, d));
               Value two = arith::ConstantIndexOp::create(b, l, 2);
               Value pairs = arith::DivUIOp::create(b, l, size, two);
               // i reads (i mod d) * s + i / d: halves (i = g * pairs + j
               // holds pair element 2j + g) with d = pairs, s = 2; pairs
               // (i = 2j + g holds half element g * pairs + j) with d = 2,
               // s = pairs.
               Value d = toHalves ? pairs : two, s = toHalves ? two : pairs;
               Value i = indices[dim];
               indices[dim] = arith::AddIOp::create(
                   b, l,
                   arith::MulIOp::create(b, l,
                                         arith::RemUIOp::create(b, l, i, d), s),
                   arith::DivUIOp::create(b, l, i, d));
               linalg::YieldOp::create(
                   b, l,
                   ValueRange{tensor::ExtractOp::create(b, l, value, indices)});
             })
      .getResult(0);
}

Value GemmLowering::spreadToEvenColumns(Value product) {
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(f32, 0.0));
  Value init = emptyTensor(space, f32);
  SmallVector<utils::IteratorType> iterators(llvm::popcount(space),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, TypeRange{init.getType()}, ValueRange{}, ValueRange{init},
      ArrayRef<AffineMap>{operandMap(space, space)}, iterators,
      [&](OpBuilder &b, Location l, ValueRange) {
        Value m =
            linalg::IndexOp::create(b, l, positionIn(space, DimsAttr::kM));
        Value n =
            linalg::IndexOp::create(b, l, positionIn(space, DimsAttr::kN));
        Value two = arith::ConstantIndexOp::create(b, l, 2);
        Value even =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                  arith::RemUIOp::create(b, l, n, two),
                                  arith::ConstantIndexOp::create(b, l, 0));
        Value value = tensor::ExtractOp::create(
            b, l, product,
            ValueRange{m, arith::DivUIOp::create(b, l, n, two).getResult()});
        linalg::YieldOp::create(
            b, l, ValueRange{arith::SelectOp::create(b, l, even, value, zero)});
      });
  return generic.getResult(0);
}

Value GemmLowering::lowerAccumulator(Value product, Value c, Value alpha,
                                     Value beta) {
  if (!c && !alpha)
    return product;
  SmallVector<Materialized> inputs{{product, space}};
  if (alpha)
    inputs.push_back({alpha, 0});
  if (c) {
    inputs.push_back({c, space});
    if (beta)
      inputs.push_back({beta, 0});
  }
  return buildElementwise(
      space, inputs, {f32}, [&](OpBuilder &b, Location l, ValueRange args) {
        unsigned next = 1;
        Value acc = args[0];
        if (alpha)
          acc = arith::MulFOp::create(b, l, acc, args[next++]);
        if (c) {
          Value cValue = args[next++];
          if (cValue.getType() != f32)
            cValue = arith::ExtFOp::create(b, l, f32, cValue);
          if (beta)
            cValue = arith::MulFOp::create(b, l, cValue, args[next++]);
          acc = arith::AddFOp::create(b, l, acc, cValue);
        }
        return SmallVector<Value>{acc};
      })[0];
}

Materialized GemmLowering::lowerReduction(ReductionKind kind,
                                          Materialized input,
                                          unsigned reducedBit) {
  unsigned outMask = input.mask & ~reducedBit;
  if (!(input.mask & reducedBit)) {
    // The value is uniform along the reduced dim: the max and the mean are the
    // value itself, the sum is the value times the extent.
    if (!reductionScalesUniformValue(kind))
      return input;
    return withScalar<arith::MulFOp>(input, sizeAsF32(reducedBit));
  }

  Value identityValue = arith::ConstantOp::create(
      rewriter, loc, rewriter.getFloatAttr(f32, getReductionIdentity(kind)));
  Value init = linalg::FillOp::create(rewriter, loc, identityValue,
                                      emptyTensor(outMask, f32))
                   .getResult(0);
  // A reduction to a scalar still produces a rank-0 tensor here.
  SmallVector<utils::IteratorType> iterators;
  for (unsigned bit : {DimsAttr::kB, DimsAttr::kM, DimsAttr::kN})
    if (input.mask & bit)
      iterators.push_back(bit == reducedBit ? utils::IteratorType::reduction
                                            : utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, init.getType(), ValueRange{input.value}, ValueRange{init},
      ArrayRef<AffineMap>{operandMap(input.mask, input.mask),
                          operandMap(input.mask, outMask)},
      iterators, [&](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(
            b, l, buildReductionCombine(b, l, kind, args[0], args[1]));
      });
  Materialized result{generic.getResult(0), outMask};
  if (outMask == 0)
    result.value =
        tensor::ExtractOp::create(rewriter, loc, result.value, ValueRange{});
  if (!reductionDividesByCount(kind))
    return result;
  return withScalar<arith::DivFOp>(result, sizeAsF32(reducedBit));
}

Materialized GemmLowering::buildAlongN(
    Materialized input,
    function_ref<Value(OpBuilder &, Location, function_ref<Value(unsigned)>)>
        body) {
  unsigned mask = input.mask | DimsAttr::kN;
  SmallVector<utils::IteratorType> iterators(llvm::popcount(mask),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, TypeRange{emptyTensor(mask, f32).getType()}, ValueRange{},
      ValueRange{emptyTensor(mask, f32)},
      ArrayRef<AffineMap>{operandMap(mask, mask)}, iterators,
      [&](OpBuilder &b, Location l, ValueRange) {
        auto index = [&](unsigned bit) -> Value {
          return linalg::IndexOp::create(b, l, positionIn(mask, bit));
        };
        linalg::YieldOp::create(b, l, ValueRange{body(b, l, index)});
      });
  return {generic.getResult(0), mask};
}

Materialized GemmLowering::lowerGroupReduction(ReductionKind kind,
                                               Materialized input,
                                               int64_t width) {
  Value n = getValueOrCreateConstantIndexOp(rewriter, loc, nSize);
  return buildAlongN(input, [&](OpBuilder &b, Location l,
                                function_ref<Value(unsigned)> index) {
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, l, v);
    };
    // The group's columns inside the output: [start, end).
    Value col = index(DimsAttr::kN);
    Value start = arith::SubIOp::create(
        b, l, col, arith::RemUIOp::create(b, l, col, constant(width)));
    Value end = arith::MinUIOp::create(
        b, l, arith::AddIOp::create(b, l, start, constant(width)), n);
    Value identity = arith::ConstantOp::create(
        b, l, b.getFloatAttr(f32, getReductionIdentity(kind)));
    // The element's indices into the input along b and m (linalg.index only
    // in the generic's own body), then the loop's along n.
    SmallVector<Value> indices;
    for (unsigned bit : {DimsAttr::kB, DimsAttr::kM})
      if (input.mask & bit)
        indices.push_back(index(bit));
    auto loop = scf::ForOp::create(
        b, l, start, end, constant(1), ValueRange{identity},
        [&](OpBuilder &fb, Location fl, Value j, ValueRange totals) {
          Value x = input.value;
          if (input.mask) {
            SmallVector<Value> at = indices;
            if (input.mask & DimsAttr::kN)
              at.push_back(j);
            x = tensor::ExtractOp::create(fb, fl, input.value, at);
          }
          scf::YieldOp::create(
              fb, fl, buildReductionCombine(fb, fl, kind, totals[0], x));
        });
    Value total = loop.getResult(0);
    if (!reductionDividesByCount(kind))
      return total;
    Value count = arith::IndexCastUIOp::create(
        b, l, b.getI64Type(), arith::SubIOp::create(b, l, end, start));
    return Value(arith::DivFOp::create(
        b, l, total, arith::UIToFPOp::create(b, l, f32, count)));
  });
}

Materialized GemmLowering::lowerPartner(Materialized input, int64_t distance) {
  Value n = getValueOrCreateConstantIndexOp(rewriter, loc, nSize);
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(f32, 0.0));
  return buildAlongN(input, [&](OpBuilder &b, Location l,
                                function_ref<Value(unsigned)> index) {
    Value partner =
        arith::XOrIOp::create(b, l, index(DimsAttr::kN),
                              arith::ConstantIndexOp::create(b, l, distance));
    Value inside =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, partner, n);
    Value value = input.value;
    if (input.mask) {
      // Clamped into the tensor where the partner is outside; that
      // element's value is then replaced by 0.
      Value safe = arith::SelectOp::create(
          b, l, inside, partner, arith::ConstantIndexOp::create(b, l, 0));
      SmallVector<Value> indices;
      for (unsigned bit : {DimsAttr::kB, DimsAttr::kM, DimsAttr::kN})
        if (input.mask & bit)
          indices.push_back(bit == DimsAttr::kN ? safe : index(bit));
      value = tensor::ExtractOp::create(b, l, input.value, indices);
    }
    return Value(arith::SelectOp::create(b, l, inside, value, zero));
  });
}

Materialized GemmLowering::lowerCoord(OutputDim dim) {
  unsigned bit = getDimsBit(dim);
  if (!(space & bit))
    return {arith::ConstantOp::create(rewriter, loc,
                                      rewriter.getFloatAttr(f32, 0.0)),
            0};
  return {buildElementwise(bit, {}, {f32},
                           [&](OpBuilder &b, Location l, ValueRange) {
                             Value index = linalg::IndexOp::create(b, l, 0);
                             Value i64 = arith::IndexCastUIOp::create(
                                 b, l, b.getI64Type(), index);
                             return SmallVector<Value>{
                                 arith::UIToFPOp::create(b, l, f32, i64)};
                           })[0],
          bit};
}

template <typename OpTy>
Materialized GemmLowering::withScalar(Materialized input, Value scalar) {
  if (input.mask == 0)
    return {OpTy::create(rewriter, loc, input.value, scalar), 0};
  return {buildElementwise(input.mask, {input, {scalar, 0}}, {f32},
                           [](OpBuilder &b, Location l, ValueRange args) {
                             return SmallVector<Value>{
                                 OpTy::create(b, l, args[0], args[1])};
                           })[0],
          input.mask};
}

void GemmLowering::lowerEpilogueOp(Operation &inner) {
  SmallVector<Materialized> operands;
  for (Value operand : inner.getOperands())
    operands.push_back(values.lookup(operand));

  if (auto reduce = dyn_cast<RowReduceOp>(inner)) {
    values[reduce.getResult()] =
        lowerReduction(reduce.getKind(), operands[0], DimsAttr::kN);
    return;
  }
  if (auto reduce = dyn_cast<ColReduceOp>(inner)) {
    values[reduce.getResult()] =
        lowerReduction(reduce.getKind(), operands[0], DimsAttr::kM);
    return;
  }
  if (auto reduce = dyn_cast<GroupReduceOp>(inner)) {
    values[reduce.getResult()] =
        lowerGroupReduction(reduce.getKind(), operands[0], reduce.getWidth());
    return;
  }
  if (auto partner = dyn_cast<PartnerOp>(inner)) {
    values[partner.getResult()] =
        lowerPartner(operands[0], partner.getDistance());
    return;
  }
  if (auto coord = dyn_cast<CoordOp>(inner)) {
    values[coord.getResult()] = lowerCoord(coord.getDim());
    return;
  }
  // Detached only for the backward's derivation: the value itself.
  if (auto detach = dyn_cast<DetachOp>(inner)) {
    values[detach.getResult()] = operands[0];
    return;
  }

  unsigned mask = dims->getMask(inner.getResult(0));
  // Builds the scalar computation of `inner` on `args` (its operands' values
  // at one element, in order). Dropout varies along every dim, so it is always
  // built inside a linalg.generic, where it reads the element's indices.
  auto buildScalar = [&](OpBuilder &b, Location l,
                         ValueRange args) -> SmallVector<Value> {
    if (auto act = dyn_cast<ActivationOp>(inner))
      return {buildActivation(b, l, act.getKind(), args[0])};
    if (auto act = dyn_cast<ActivationDerivativeOp>(inner))
      return {buildActivationDerivative(b, l, act.getKind(), args[0])};
    if (auto round = dyn_cast<RoundOp>(inner))
      return {buildRounding(b, l, args[0], round.getTo())};
    if (auto dropout = dyn_cast<DropoutOp>(inner)) {
      auto index = [&](unsigned bit) -> Value {
        if (!(space & bit))
          return arith::ConstantOp::create(b, l, b.getI32IntegerAttr(0));
        Value i = linalg::IndexOp::create(b, l, positionIn(space, bit));
        return arith::IndexCastUIOp::create(b, l, b.getI32Type(), i);
      };
      Value bits = buildDropoutBits(b, l, args[1], dropout.getStream(),
                                    index(DimsAttr::kB), index(DimsAttr::kM),
                                    index(DimsAttr::kN));
      return {buildDropoutApply(b, l, args[0], bits, dropout.getThreshold())};
    }
    Operation *clone = cloneInComputeType(b, inner, args);
    return SmallVector<Value>(clone->getResults());
  };

  if (mask == 0) {
    SmallVector<Value> scalars;
    for (const Materialized &m : operands)
      scalars.push_back(m.value);
    SmallVector<Value> results = buildScalar(rewriter, inner.getLoc(), scalars);
    for (auto [result, value] : llvm::zip(inner.getResults(), results))
      values[result] = {value, 0};
    return;
  }
  SmallVector<Type> resultTypes;
  for (Type type : inner.getResultTypes())
    resultTypes.push_back(isa<FloatType>(type) ? f32 : type);
  ValueRange results =
      buildElementwise(mask, operands, resultTypes, buildScalar);
  for (auto [result, value] : llvm::zip(inner.getResults(), results))
    values[result] = {value, mask};
}

Value GemmLowering::lowerOutput(Materialized value, unsigned mask,
                                RankedTensorType type) {
  Type elementType = type.getElementType();
  bool half = mask & DimsAttr::kHalfN, halves = mask & DimsAttr::kHalves;
  mask &= ~(DimsAttr::kHalfN | DimsAttr::kHalves);
  Value result =
      buildElementwise(mask, {value}, {elementType},
                       [&](OpBuilder &b, Location l, ValueRange args) {
                         Value v = args[0];
                         if (elementType != f32)
                           v = arith::TruncFOp::create(b, l, elementType, v);
                         return SmallVector<Value>{v};
                       })[0];
  if (halves)
    result = reorderPairs(result, llvm::popcount(mask) - 1, /*toHalves=*/true);
  if (half) {
    // The even columns: element j of the output is column 2j of the full one.
    auto full = cast<RankedTensorType>(result.getType());
    unsigned rank = full.getRank();
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(rewriter, loc, result);
    Value n = getValueOrCreateConstantIndexOp(rewriter, loc, nSize);
    sizes.back() =
        arith::DivUIOp::create(rewriter, loc, n,
                               arith::ConstantIndexOp::create(rewriter, loc, 2))
            .getResult();
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes, elementType);
    SmallVector<AffineExpr> evenColumns;
    for (unsigned d = 0; d < rank; ++d)
      evenColumns.push_back(rewriter.getAffineDimExpr(d) *
                            (d + 1 == rank ? 2 : 1));
    MLIRContext *context = rewriter.getContext();
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    result =
        linalg::GenericOp::create(
            rewriter, loc, init.getType(), ValueRange{result}, ValueRange{init},
            ArrayRef<AffineMap>{
                AffineMap::get(rank, 0, evenColumns, context),
                AffineMap::getMultiDimIdentityMap(rank, context)},
            iterators,
            [](OpBuilder &b, Location l, ValueRange args) {
              linalg::YieldOp::create(b, l, args[0]);
            })
            .getResult(0);
  }
  if (result.getType() != type)
    result = tensor::CastOp::create(rewriter, loc, type, result);
  return result;
}

LogicalResult GemmLowering::lower(ValueRange operands, TypeRange resultTypes) {
  GemmOp::Adaptor adaptor(operands, op);
  Value a = adaptor.getA(), b = adaptor.getB();
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(b.getType());
  int64_t ra = aType.getRank(), rb = bType.getRank();
  mSize = tensor::getMixedSize(rewriter, loc, a,
                               op.getTransposeA() ? ra - 1 : ra - 2);
  nSize = tensor::getMixedSize(rewriter, loc, b,
                               op.getTransposeB() ? rb - 2 : rb - 1);
  if (ra == 3)
    batchSize = tensor::getMixedSize(rewriter, loc, a, 0);
  else if (rb == 3)
    batchSize = tensor::getMixedSize(rewriter, loc, b, 0);

  // B's rows as op(B)'s columns: each pair from the two halves.
  if (op.getBHalves())
    b = reorderPairs(b, 0, /*toHalves=*/false);
  Value product = lowerContraction(a, b);
  if (op.getAccumulatorHalfN()) {
    // The output space is twice the product's N.
    Value n = getValueOrCreateConstantIndexOp(rewriter, loc, nSize);
    nSize =
        arith::MulIOp::create(rewriter, loc, n,
                              arith::ConstantIndexOp::create(rewriter, loc, 2))
            .getResult();
    product = spreadToEvenColumns(product);
  }
  values[op.getAccumulator()] = {lowerAccumulator(product, adaptor.getC(),
                                                  adaptor.getAlpha(),
                                                  adaptor.getBeta()),
                                 space};
  for (auto [i, input] : llvm::enumerate(adaptor.getInputs())) {
    DimsAttr dims = op.getInputDimsAt(i);
    unsigned mask = dims.getMask();
    values[op.getInputArg(i)] = {asF32(input, mask, dims.getPeriod()), mask};
  }

  dims.emplace(op);
  for (Operation &inner : op.getEpilogueBlock().without_terminator())
    lowerEpilogueOp(inner);

  SmallVector<Value> results;
  for (auto [i, value] : llvm::enumerate(op.getYield().getValues()))
    results.push_back(lowerOutput(values.lookup(value),
                                  op.getResultDimsAt(i).getMask(),
                                  cast<RankedTensorType>(resultTypes[i])));
  rewriter.replaceOp(op, results);
  return success();
}

struct GemmOpLowering final : OpConversionPattern<GemmOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Type> resultTypes;
    if (failed(
            getTypeConverter()->convertTypes(op.getResultTypes(), resultTypes)))
      return failure();
    Type computeType = getTypeConverter()->convertType(rewriter.getF32Type());
    return GemmLowering(op, rewriter, computeType)
        .lower(adaptor.getOperands(), resultTypes);
  }
};

struct ConvertCodaToLinalg final
    : coda::impl::ConvertCodaToLinalgBase<ConvertCodaToLinalg> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    TypeConverter converter = getCodaToLinalgTypeConverter(widenToF64);
    ConversionTarget target(*context);
    target.addIllegalDialect<CodaDialect>();
    target.markUnknownOpDynamicallyLegal([&](Operation *op) {
      if (auto func = dyn_cast<func::FuncOp>(op))
        return converter.isSignatureLegal(func.getFunctionType());
      return converter.isLegal(op);
    });
    // coda.round's scalar conversions through its 16-bit type, in the
    // widened programs too.
    target.addDynamicallyLegalOp<arith::TruncFOp, arith::ExtFOp>(
        [&](Operation *op) {
          auto scalar = [](Type type) { return isa<FloatType>(type); };
          return converter.isLegal(op) ||
                 (llvm::all_of(op->getOperandTypes(), scalar) &&
                  llvm::all_of(op->getResultTypes(), scalar));
        });
    RewritePatternSet patterns(context);
    populateCodaToLinalgConversionPatterns(converter, patterns);
    if (widenToF64) {
      populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                     converter);
      populateReturnOpTypeConversionPattern(patterns, converter);
    }
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

TypeConverter mlir::coda::getCodaToLinalgTypeConverter(bool widenToF64) {
  TypeConverter converter;
  converter.addConversion([](Type type) { return type; });
  if (!widenToF64)
    return converter;
  auto widen = [](Type type) -> Type {
    return isa<FloatType>(type) ? Float64Type::get(type.getContext()) : type;
  };
  converter.addConversion([widen](FloatType type) { return widen(type); });
  converter.addConversion([widen](RankedTensorType type) -> Type {
    return type.clone(widen(type.getElementType()));
  });
  return converter;
}

void mlir::coda::populateCodaToLinalgConversionPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<GemmOpLowering>(converter, patterns.getContext());
}
