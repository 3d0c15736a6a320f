//===- Epilogue.cpp - fuse a contraction's consumers into coda.gemm -------===//
//
// Starting from the contraction's result, the consumers that follow it in its
// block are visited in program order. A consumer joins the epilogue when each
// tensor it reads is either an epilogue value (the accumulator or a value an
// earlier consumer computed) or can be passed to coda.gemm as an epilogue
// input, every loop runs along b, m or n (or has size 1), its reduction, if
// any, runs over n (a row reduction) or m (a column reduction), and its body
// is scalar arith/math that the epilogue computes exactly. Its body is then
// copied into the epilogue being built; when it does not fit, everything
// copied for it is removed again and it stays as it was.
//
// Epilogue values read by code left outside become outputs of the coda.gemm;
// the fused ops, and the transposes and broadcasts only they read, go away.
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "coda/Conversion/LinalgToCoda/LinalgToCoda.h"
#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

/// The DimsAttr mask of the axes of a layout.
static unsigned maskOf(ArrayRef<unsigned> layout) {
  unsigned mask = 0;
  for (unsigned axis : layout)
    mask |= axis;
  return mask;
}

/// The reassociation that folds the unit dims of `layout` into their
/// neighbours (the layout spans at least one output-space dim).
static SmallVector<ReassociationIndices>
unitFolding(ArrayRef<unsigned> layout) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices pending;
  for (auto [i, axis] : llvm::enumerate(layout)) {
    pending.push_back(i);
    if (axis != kUnit) {
      groups.push_back(pending);
      pending.clear();
    }
  }
  groups.back().append(pending.begin(), pending.end());
  return groups;
}

/// A tensor of `type` with the unit dims of `layout` dropped.
static RankedTensorType dropUnitDims(RankedTensorType type,
                                     ArrayRef<unsigned> layout) {
  SmallVector<int64_t> shape;
  for (auto [size, axis] : llvm::zip(type.getShape(), layout))
    if (axis != kUnit)
      shape.push_back(size);
  return RankedTensorType::get(shape, type.getElementType());
}

static bool isNarrowFloat(Type type) { return type.isBF16() || type.isF16(); }

static bool isEpilogueTensorElement(Type type) {
  return type.isF32() || isNarrowFloat(type);
}

namespace {
/// A uniform value that a tensor was filled with.
struct UniformFill {
  /// The scalar a linalg.fill wrote, or null for a splat constant.
  Value scalar;
  /// The value, when it is a constant.
  std::optional<APFloat> constant;
};
} // namespace

static std::optional<UniformFill> getUniformFill(Value tensor) {
  if (auto fill = tensor.getDefiningOp<linalg::FillOp>()) {
    UniformFill result{fill.value(), std::nullopt};
    APFloat constant(0.0f);
    if (matchPattern(result.scalar, m_ConstantFloat(&constant)))
      result.constant = constant;
    return result;
  }
  DenseElementsAttr attr;
  if (matchPattern(tensor, m_Constant(&attr)) && attr.isSplat() &&
      isa<FloatType>(attr.getElementType()))
    return UniformFill{Value(), attr.getSplatValue<APFloat>()};
  return std::nullopt;
}

bool raising::isZeroFilled(Value tensor) {
  std::optional<UniformFill> fill = getUniformFill(tensor);
  return fill && fill->constant && fill->constant->isZero();
}

/// Whether `value` leaves a reduction of `kind` unchanged.
static bool isIdentity(ReductionKind kind, const APFloat &value) {
  APFloat identity(getReductionIdentity(kind));
  bool losesInfo;
  identity.convert(value.getSemantics(), APFloat::rmNearestTiesToEven,
                   &losesInfo);
  return value.compare(identity) == APFloat::cmpEqual;
}

/// The dim that `use` asks the size of, if it is a tensor.dim by a constant.
static std::optional<unsigned> getShapeQuery(OpOperand &use) {
  auto dimOp = dyn_cast<tensor::DimOp>(use.getOwner());
  if (!dimOp)
    return std::nullopt;
  std::optional<int64_t> index = dimOp.getConstantIndex();
  if (!index || *index < 0 ||
      *index >= cast<RankedTensorType>(use.get().getType()).getRank())
    return std::nullopt;
  return static_cast<unsigned>(*index);
}

namespace {
/// Builds the coda.gemm for one contraction and its fusible consumers.
class ContractionRaiser {
public:
  ContractionRaiser(RewriterBase &rewriter, linalg::LinalgOp contraction,
                    GemmOperands gemm, const RaiseLinalgOptions &options,
                    const DenseSet<Operation *> &excluded)
      : rewriter(rewriter), contraction(contraction), gemm(std::move(gemm)),
        options(options), excluded(excluded),
        epilogue(std::make_unique<Block>()), builder(contraction->getContext()),
        dominance(contraction->getParentOp()) {
    builder.setInsertionPointToEnd(epilogue.get());
  }
  ~ContractionRaiser() {
    // An epilogue that was not attached to a coda.gemm is dropped whole, and
    // so are the conversions made for its inputs.
    if (epilogue)
      epilogue->dropAllDefinedValueUses();
    for (Operation *op : conversions)
      if (op->use_empty())
        rewriter.eraseOp(op);
  }

  FailureOr<GemmOp> run();
  /// After a failed run(): a consumer whose i1 result the run fused but
  /// something outside the epilogue reads (coda.gemm cannot write it); the
  /// raising is worth trying again without it. Null otherwise.
  Operation *getUnwritable() const { return unwritable; }

private:
  /// An epilogue value standing for a tensor the fused ops compute.
  struct FusedTensor {
    /// Its element at the current (b, m, n), in f32.
    Value scalar;
    /// The axis of each of its dims.
    SmallVector<unsigned> layout;
    /// The narrower type the tensor holds `scalar` rounded to, if any: a
    /// reader rounds it (coda.round), an output written in that type rounds
    /// it as it writes.
    Type roundedTo;
    /// Whether `scalar` is a column reduction, which can only be yielded.
    bool columnReduction = false;
  };
  /// An epilogue input: `source` read with the given layout (a scalar when
  /// `layout` is empty and `source` is not a tensor).
  struct Input {
    Value source;
    SmallVector<unsigned> layout;
  };
  /// A value of a linalg body, translated into the epilogue.
  struct Translated {
    Value value;
    /// As FusedTensor::roundedTo.
    Type roundedTo;
  };

  /// The value `t` stands for: its scalar, rounded when it is.
  Value materialize(const Translated &t) {
    if (!t.roundedTo)
      return t.value;
    return RoundOp::create(builder, t.value.getLoc(), builder.getF32Type(),
                           t.value, TypeAttr::get(t.roundedTo));
  }

  LogicalResult fail(const Twine &why) {
    reason = why.str();
    return failure();
  }

  LogicalResult seedAccumulator();
  LogicalResult absorb(linalg::LinalgOp op);
  LogicalResult mapLoops(linalg::LinalgOp op,
                         ArrayRef<ResolvedOperand> operands, LoopAxes &loops);
  FailureOr<SmallVector<unsigned>>
  layoutOf(AffineMap map, ArrayRef<std::optional<unsigned>> loops,
           RankedTensorType type, const Twine &what);
  FailureOr<Value> readOperand(const ResolvedOperand &operand,
                               ArrayRef<std::optional<unsigned>> loops);
  FailureOr<Value> readScalar(Value scalar);
  FailureOr<Value> readConstant(Attribute attr);
  Value addInput(Value source, ArrayRef<unsigned> layout, Type argType);
  FailureOr<Translated> translate(Operation &op, ArrayRef<Translated> operands);
  FailureOr<Translated> lookup(DenseMap<Value, Translated> &values, Block &body,
                               Value value);
  Value materializeInput(const Input &input);
  /// The size of output-space dim `axis` (1 for a unit dim), from A and B.
  Value outputSize(Location loc, unsigned axis);
  GemmOp rewrite(ArrayRef<Value> outputs, const DenseSet<Operation *> &gone);

  RewriterBase &rewriter;
  linalg::LinalgOp contraction;
  GemmOperands gemm;
  RaiseLinalgOptions options;
  /// Consumers not to fuse (see getUnwritable).
  const DenseSet<Operation *> &excluded;
  Operation *unwritable = nullptr;
  std::unique_ptr<Block> epilogue;
  OpBuilder builder;
  DominanceInfo dominance;
  Value c;
  SmallVector<Input> inputs;
  llvm::MapVector<Value, FusedTensor> fused;
  SmallVector<Operation *> fusedOps;
  /// Values the epilogue reads that must be defined before the contraction.
  SmallVector<Value> toHoist;
  /// Ops made outside the epilogue to pass a value into it (an i1 scalar
  /// widened to i64).
  SmallVector<Operation *> conversions;
  std::string reason;
};
} // namespace

Value ContractionRaiser::addInput(Value source, ArrayRef<unsigned> layout,
                                  Type argType) {
  for (auto [i, input] : llvm::enumerate(inputs))
    if (input.source == source && ArrayRef<unsigned>(input.layout) == layout)
      return epilogue->getArgument(i + 1);
  inputs.push_back({source, SmallVector<unsigned>(layout)});
  toHoist.push_back(source);
  return epilogue->addArgument(argType, source.getLoc());
}

FailureOr<Value> ContractionRaiser::readConstant(Attribute attr) {
  if (auto floatAttr = dyn_cast<FloatAttr>(attr)) {
    if (!isEpilogueTensorElement(floatAttr.getType()))
      return fail(Twine("uses a constant of type ") +
                  print(floatAttr.getType()) +
                  "; the epilogue computes in f32");
    // Exact: the type is at most as wide as f32.
    APFloat value = floatAttr.getValue();
    bool losesInfo = false;
    value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    return Value(arith::ConstantOp::create(
        builder, builder.getUnknownLoc(),
        builder.getF32FloatAttr(value.convertToFloat())));
  }
  auto intAttr = dyn_cast<IntegerAttr>(attr);
  if (!intAttr || !intAttr.getType().isSignlessInteger())
    return fail("uses a constant that is neither a float nor a signless "
                "integer");
  return Value(
      arith::ConstantOp::create(builder, builder.getUnknownLoc(), intAttr));
}

FailureOr<Value> ContractionRaiser::readScalar(Value scalar) {
  Attribute attr;
  if (matchPattern(scalar, m_Constant(&attr)))
    return readConstant(attr);
  Type type = scalar.getType();
  if (type.isSignlessInteger(1)) {
    // A predicate (JAX's `N - ddof > 0` in a variance) goes in as an i64 and
    // comes back as the i1 it was.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointAfterValue(scalar);
    auto wide = arith::ExtUIOp::create(rewriter, scalar.getLoc(),
                                       rewriter.getI64Type(), scalar);
    conversions.push_back(wide);
    Value input = addInput(wide, {}, wide.getType());
    return Value(arith::TruncIOp::create(builder, scalar.getLoc(),
                                         builder.getI1Type(), input));
  }
  if (!type.isF32() && !type.isSignlessInteger(64))
    return fail(Twine("reads the scalar ") + print(type) +
                " from outside; a scalar epilogue input is f32, i64 or i1");
  return addInput(scalar, {}, type);
}

FailureOr<SmallVector<unsigned>>
ContractionRaiser::layoutOf(AffineMap map,
                            ArrayRef<std::optional<unsigned>> loops,
                            RankedTensorType type, const Twine &what) {
  SmallVector<unsigned> layout;
  unsigned previous = DimsAttr::kB << 1;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    unsigned axis = kUnit;
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      std::optional<unsigned> loopAxis = loops[dim.getPosition()];
      if (!loopAxis)
        return fail(what + " is indexed by a loop that is not an output "
                           "dimension of the GEMM");
      axis = *loopAxis;
    } else if (!isa<AffineConstantExpr>(expr) ||
               cast<AffineConstantExpr>(expr).getValue() != 0) {
      return fail(what + " is indexed by " + print(expr) +
                  "; only loops, and 0 along a dim of size 1, are supported");
    }
    if (axis == kUnit && type.getDimSize(i) != 1)
      return fail(what + " (" + print(type) + ") is read at index 0 only " +
                  "along dim " + Twine(i) + ", which is not of size 1");
    if (axis != kUnit) {
      if (previous <= axis)
        return fail(what + " is not laid out in [b, m, n] order");
      previous = axis;
    }
    layout.push_back(axis);
  }
  return layout;
}

FailureOr<Value>
ContractionRaiser::readOperand(const ResolvedOperand &operand,
                               ArrayRef<std::optional<unsigned>> loops) {
  if (auto it = fused.find(operand.source); it != fused.end())
    return it->second.scalar;
  // coda.gemm widens narrow inputs to f32 itself: a tensor widened only to be
  // read here is read narrow.
  ResolvedOperand read = operand;
  while (auto producer = read.source.getDefiningOp<linalg::LinalgOp>()) {
    if (!isExactWidening(producer))
      break;
    ResolvedOperand input = readThrough(producer, read.map);
    ResolvedOperand narrow = resolveOperand(input.source, input.map);
    if (fused.contains(narrow.source))
      break;
    read = narrow;
  }
  auto type = dyn_cast<RankedTensorType>(read.source.getType());
  if (!type)
    return readScalar(read.source);
  // A splat constant (StableHLO broadcasts its scalar constants) is read as
  // the scalar.
  if (std::optional<UniformFill> fill = getUniformFill(read.source);
      fill && !fill->scalar)
    return readConstant(FloatAttr::get(type.getElementType(), *fill->constant));
  if (!isEpilogueTensorElement(type.getElementType()))
    return fail(Twine("reads a tensor of ") + print(type.getElementType()) +
                "; epilogue inputs are f32, bf16 or f16");
  FailureOr<SmallVector<unsigned>> layout =
      layoutOf(read.map, loops, type, "an operand");
  if (failed(layout))
    return failure();
  return addInput(read.source, *layout, builder.getF32Type());
}

FailureOr<ContractionRaiser::Translated>
ContractionRaiser::lookup(DenseMap<Value, Translated> &values, Block &body,
                          Value value) {
  if (auto it = values.find(value); it != values.end())
    return it->second;
  if (value.getParentRegion()->isProperAncestor(body.getParent())) {
    FailureOr<Value> scalar = readScalar(value);
    if (failed(scalar))
      return failure();
    return Translated{*scalar, Type()};
  }
  return fail("uses the running value of its reduction other than to "
              "combine it with the next element");
}

FailureOr<ContractionRaiser::Translated>
ContractionRaiser::translate(Operation &op, ArrayRef<Translated> operands) {
  bool narrow = options.lowPrecisionEpilogue;
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    FailureOr<Value> value = readConstant(constant.getValue());
    if (failed(value))
      return failure();
    return Translated{*value, Type()};
  }
  if (auto ext = dyn_cast<arith::ExtFOp>(op); ext && ext.getType().isF32())
    return Translated{materialize(operands[0]), Type()};
  if (auto trunc = dyn_cast<arith::TruncFOp>(op)) {
    Type from = trunc.getIn().getType(), to = trunc.getType();
    if (!isNarrowFloat(to) ||
        !(from.isF32() || (narrow && isNarrowFloat(from))))
      return fail("rounds " + print(from) + " to " + print(to) +
                  "; the epilogue rounds f32 to bf16 or f16");
    std::optional<arith::RoundingMode> mode = trunc.getRoundingmode();
    if (!narrow && mode && *mode != arith::RoundingMode::to_nearest_even)
      return fail("rounds with a mode other than to-nearest-even, which is "
                  "how coda.gemm writes its outputs");
    return Translated{operands[0].value, narrow ? Type() : to};
  }
  for (Type type :
       llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes())) {
    if (type.isF32() || type.isSignlessInteger())
      continue;
    if (!isNarrowFloat(type))
      return fail(Twine("computes on ") + print(type) +
                  "; the epilogue computes in f32");
    if (isa<arith::BitcastOp>(op))
      return fail("bitcasts a narrow float, which has no f32 equivalent");
    // Exactly, the ops whose result rounded from f32 is the narrow op's:
    // f32 has more than twice the narrow types' precision, so rounding the
    // f32 result again is rounding the exact one (and comparisons, the
    // maximum, the minimum, negation and selection are exact).
    if (!narrow &&
        !isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, arith::CmpFOp,
             arith::SelectOp, arith::ConstantOp, math::SqrtOp>(op))
      return fail(Twine("computes '") + op.getName().getStringRef() + "' in " +
                  print(type) +
                  ", which f32 does not give exactly; the epilogue computes "
                  "in f32 (low-precision-epilogue=true allows this, rounding "
                  "once at the output)");
  }
  IRMapping mapping;
  for (auto [original, operand] : llvm::zip(op.getOperands(), operands))
    mapping.map(original, narrow ? operand.value : materialize(operand));
  Operation *clone = builder.clone(op, mapping);
  Type resultType = clone->getResult(0).getType();
  if (!isNarrowFloat(resultType))
    return Translated{clone->getResult(0), Type()};
  clone->getResult(0).setType(builder.getF32Type());
  // An exact narrow op's result is its f32 result rounded.
  return Translated{clone->getResult(0), narrow ? Type() : resultType};
}

LogicalResult ContractionRaiser::mapLoops(linalg::LinalgOp op,
                                          ArrayRef<ResolvedOperand> operands,
                                          LoopAxes &loops) {
  loops.assign(op.getNumLoops(), std::nullopt);
  for (const ResolvedOperand &operand : operands) {
    auto it = fused.find(operand.source);
    if (it == fused.end())
      continue;
    const FusedTensor &tensor = it->second;
    if (tensor.columnReduction)
      return fail("reads a column reduction, which is complete only after "
                  "every row: it can only be an output");
    for (auto [expr, axis] :
         llvm::zip(operand.map.getResults(), tensor.layout)) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
        std::optional<unsigned> &loop = loops[dim.getPosition()];
        if (loop && *loop != axis)
          return fail("reads epilogue values along mismatching dims");
        loop = axis;
        continue;
      }
      auto constant = dyn_cast<AffineConstantExpr>(expr);
      if (!constant || constant.getValue() != 0 || axis != kUnit)
        return fail(Twine("reads an epilogue value at ") + print(expr) +
                    ", not elementwise");
    }
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned seen = 0;
  for (auto [i, loop] : llvm::enumerate(loops)) {
    if (!loop && ranges[i] == 1)
      loop = kUnit;
    if (!loop)
      return fail("loop " + Twine(i) +
                  " runs along no dim of the epilogue values it reads (a "
                  "broadcast whose dim cannot be told)");
    if (*loop != kUnit && (seen & *loop))
      return fail("two loops run along the same output dim");
    seen |= *loop;
  }
  return success();
}

LogicalResult ContractionRaiser::absorb(linalg::LinalgOp op) {
  // Results that nothing reads (the indices of torch's max.dim beside its
  // values) are not computed, nor is what only they need.
  Block &body = *op.getBlock();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  SmallVector<bool> live;
  for (OpResult result : op->getResults())
    live.push_back(!result.use_empty());
  if (llvm::none_of(live, [](bool l) { return l; }))
    live.assign(live.size(), true);
  DenseSet<Operation *> liveOps;
  SmallVector<Value> worklist;
  for (auto [i, yielded] : llvm::enumerate(yield.getOperands()))
    if (live[i])
      worklist.push_back(yielded);
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && def->getBlock() == &body && liveOps.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  auto liveUses = [&](Value value) {
    return llvm::count_if(value.getUsers(), [&](Operation *user) {
      return liveOps.contains(user);
    });
  };
  if (llvm::any_of(liveOps, [](Operation *inner) {
        return isa<linalg::IndexOp>(inner);
      }))
    return fail("reads loop indices (linalg.index)");

  SmallVector<ResolvedOperand> resolved;
  for (OpOperand &operand : op->getOpOperands())
    resolved.push_back(
        resolveOperand(operand.get(), op.getMatchingIndexingMap(&operand)));
  LoopAxes loops;
  if (failed(mapLoops(op, resolved, loops)))
    return failure();

  // At most one reduction loop, over n (a row reduction) or over m (a column
  // reduction).
  SmallVector<unsigned> reductionLoops;
  op.getReductionDims(reductionLoops);
  std::optional<unsigned> reducedAxis;
  if (!reductionLoops.empty()) {
    reducedAxis = loops[reductionLoops.front()];
    if (reductionLoops.size() != 1 ||
        (*reducedAxis != DimsAttr::kN && *reducedAxis != DimsAttr::kM))
      return fail("reduces over something other than exactly n (a row "
                  "reduction) or m (a column reduction)");
  }
  bool columnReduction = reducedAxis == DimsAttr::kM;

  // Results: laid out in [b, m, n] order over every parallel loop.
  LoopAxes resultLoops = loops;
  if (reducedAxis)
    resultLoops[reductionLoops.front()] = std::nullopt;
  SmallVector<SmallVector<unsigned>> resultLayouts;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (!live[init.getOperandNumber() - op.getNumDpsInputs()]) {
      resultLayouts.emplace_back();
      continue;
    }
    auto type = cast<RankedTensorType>(init.get().getType());
    // A tensor of i1 (a compare that a select reads, as in StableHLO's erfc)
    // may be computed in the epilogue, but not written by it.
    bool predicate = type.getElementType().isInteger(1) && !reducedAxis;
    if (!isEpilogueTensorElement(type.getElementType()) && !predicate)
      return fail(Twine("produces a tensor of ") +
                  print(type.getElementType()) +
                  "; coda.gemm outputs are f32, bf16 or f16");
    AffineMap map = op.getMatchingIndexingMap(&init);
    FailureOr<SmallVector<unsigned>> layout =
        layoutOf(map, resultLoops, type, "a result");
    if (failed(layout))
      return failure();
    unsigned covered = maskOf(*layout), expected = 0;
    for (std::optional<unsigned> axis : resultLoops)
      expected |= axis.value_or(kUnit);
    if (covered != expected)
      return fail("a result does not span every parallel loop");
    if (!(covered & (DimsAttr::kM | DimsAttr::kN)))
      return fail("a result spans neither m nor n (it reduces a reduction)");
    resultLayouts.push_back(std::move(*layout));
  }

  // Translate the body into the epilogue. Each reduction result is
  // `yield(combine(acc, x))`; `combine` becomes the reduction.
  SmallVector<std::pair<Operation *, ReductionKind>> combiners;
  if (reducedAxis) {
    for (OpOperand &init : op.getDpsInitsMutable()) {
      if (!live[init.getOperandNumber() - op.getNumDpsInputs()]) {
        combiners.push_back({nullptr, ReductionKind::Sum});
        continue;
      }
      BlockArgument acc = op.getMatchingBlockArgument(&init);
      Operation *combiner =
          op.getMatchingYieldValue(&init)->get().getDefiningOp();
      // The kinds whose result is the combination itself; a mean is raised
      // as a sum and a division.
      std::optional<ReductionKind> kind;
      for (uint32_t i = 0;
           combiner && !kind && i <= getMaxEnumValForReductionKind(); ++i) {
        auto candidate = static_cast<ReductionKind>(i);
        if (!reductionDividesByCount(candidate) &&
            isReductionCombine(candidate, combiner))
          kind = candidate;
      }
      if (!combiner || combiner->getBlock() != &body || liveUses(acc) != 1 ||
          !liveOps.contains(combiner) || !kind)
        return fail("is not a sum (arith.addf) or maximum (arith.maximumf) "
                    "reduction");
      if (!options.lowPrecisionEpilogue && !acc.getType().isF32())
        return fail(Twine("reduces in ") + print(acc.getType()) +
                    "; the epilogue reduces in f32");
      combiners.push_back({combiner, *kind});
    }
  }
  DenseMap<Value, Translated> values;
  for (auto [operand, read] : llvm::zip(op->getOpOperands(), resolved)) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if (liveUses(arg) == 0 || (reducedAxis && op.isDpsInit(&operand)))
      continue;
    FailureOr<Value> value = readOperand(read, loops);
    if (failed(value))
      return failure();
    Type roundedTo;
    if (auto it = fused.find(read.source); it != fused.end())
      roundedTo = it->second.roundedTo;
    values[arg] = {*value, roundedTo};
  }
  for (Operation &inner : body.without_terminator()) {
    if (!liveOps.contains(&inner) ||
        llvm::any_of(combiners, [&](auto &c) { return c.first == &inner; }))
      continue;
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()) ||
        inner.getNumRegions() != 0 || inner.getNumResults() != 1)
      return fail(Twine("computes '") + inner.getName().getStringRef() +
                  "'; an epilogue runs scalar arith and math ops");
    // A wider constant rounded to f32 (torch-mlir's f64 epsilon) is that f32
    // constant: the constant itself is not needed, its truncf folds it.
    if (auto constant = dyn_cast<arith::ConstantOp>(inner);
        constant && !constant.use_empty() &&
        llvm::all_of(constant->getUsers(), [](Operation *user) {
          auto trunc = dyn_cast<arith::TruncFOp>(user);
          return trunc && trunc.getType().isF32() &&
                 !trunc.getRoundingmodeAttr();
        }))
      continue;
    FloatAttr wide;
    if (auto trunc = dyn_cast<arith::TruncFOp>(inner);
        trunc && trunc.getType().isF32() && !trunc.getRoundingmodeAttr() &&
        matchPattern(trunc.getIn(), m_Constant(&wide))) {
      APFloat rounded = wide.getValue();
      bool losesInfo = false;
      rounded.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                      &losesInfo);
      FailureOr<Value> constant =
          readConstant(builder.getF32FloatAttr(rounded.convertToFloat()));
      if (failed(constant))
        return failure();
      values[inner.getResult(0)] = {*constant, Type()};
      continue;
    }
    SmallVector<Translated> operands;
    for (Value operand : inner.getOperands()) {
      FailureOr<Translated> value = lookup(values, body, operand);
      if (failed(value))
        return failure();
      operands.push_back(*value);
    }
    FailureOr<Translated> result = translate(inner, operands);
    if (failed(result))
      return failure();
    values[inner.getResult(0)] = *result;
  }

  SmallVector<Translated> results;
  for (auto [i, yielded] : llvm::enumerate(yield.getOperands())) {
    if (!live[i]) {
      results.emplace_back();
      continue;
    }
    if (!reducedAxis) {
      FailureOr<Translated> value = lookup(values, body, yielded);
      if (failed(value))
        return failure();
      results.push_back(*value);
      continue;
    }
    auto [combiner, kind] = combiners[i];
    Value acc = op.getMatchingBlockArgument(op.getDpsInitOperand(i));
    Value element = combiner->getOperand(0) == acc ? combiner->getOperand(1)
                                                   : combiner->getOperand(0);
    FailureOr<Translated> x = lookup(values, body, element);
    if (failed(x))
      return failure();
    Location loc = op.getLoc();
    Value reduced =
        columnReduction
            ? ColReduceOp::create(builder, loc, builder.getF32Type(), kind,
                                  materialize(*x))
                  .getResult()
            : RowReduceOp::create(builder, loc, builder.getF32Type(), kind,
                                  materialize(*x))
                  .getResult();
    // A reduction starts from its init: unless that is the identity, it is
    // combined with the reduced value.
    Value init = op.getDpsInitOperand(i)->get();
    std::optional<UniformFill> fill = getUniformFill(init);
    if (!fill || !fill->constant || !isIdentity(kind, *fill->constant)) {
      if (columnReduction)
        return fail("starts a column reduction from a value other than its "
                    "identity (0 for a sum, -inf for a maximum)");
      FailureOr<Value> start =
          readOperand(resolved[op.getNumDpsInputs() + i], resultLoops);
      if (failed(start))
        return failure();
      reduced = buildReductionCombine(builder, loc, kind, *start, reduced);
    }
    results.push_back({reduced, Type()});
  }

  // Everything the epilogue reads must be available where the coda.gemm
  // goes, in place of the contraction.
  if (failed(moveValueDefinitions(rewriter, toHoist, contraction, dominance)))
    return fail("reads a value computed from the GEMM result or by an op "
                "with side effects");
  toHoist.clear();
  for (auto [result, layout, value, isLive] :
       llvm::zip(op->getResults(), resultLayouts, results, live))
    if (isLive)
      fused[result] = {value.value, layout, value.roundedTo, columnReduction};
  fusedOps.push_back(op);
  return success();
}

LogicalResult ContractionRaiser::seedAccumulator() {
  Value acc = epilogue->addArgument(builder.getF32Type(), contraction.getLoc());
  OpOperand *init = contraction.getDpsInitOperand(0);
  auto initType = cast<RankedTensorType>(init->get().getType());
  SmallVector<unsigned> layout;
  for (unsigned axis : {DimsAttr::kB, DimsAttr::kM, DimsAttr::kN})
    if (gemm.space & axis)
      layout.push_back(axis);

  if (std::optional<UniformFill> fill = getUniformFill(init->get())) {
    // Starting from a uniform value adds it to every element.
    if (!fill->constant || !fill->constant->isZero()) {
      FailureOr<Value> start =
          fill->scalar ? readScalar(fill->scalar)
                       : readConstant(FloatAttr::get(initType.getElementType(),
                                                     *fill->constant));
      if (failed(start))
        return failure();
      acc = arith::AddFOp::create(builder, contraction.getLoc(), acc, *start);
    }
  } else {
    // Accumulating into a tensor is C with beta = 1; a broadcast one is read
    // as an epilogue input.
    ResolvedOperand read =
        resolveOperand(init->get(), contraction.getMatchingIndexingMap(init));
    auto type = dyn_cast<RankedTensorType>(read.source.getType());
    FailureOr<SmallVector<unsigned>> readLayout =
        type ? layoutOf(read.map, gemm.loops, type, "the accumulator's init")
             : FailureOr<SmallVector<unsigned>>(failure());
    if (succeeded(readLayout) && *readLayout == layout) {
      c = read.source;
    } else {
      FailureOr<Value> start = readOperand(read, gemm.loops);
      if (failed(start))
        return failure();
      acc = arith::AddFOp::create(builder, contraction.getLoc(), acc, *start);
    }
  }
  // What the contraction itself reads is defined before it.
  toHoist.clear();
  fused[contraction->getResult(0)] = {acc, layout, Type(), false};
  fusedOps.push_back(contraction);
  return success();
}

Value ContractionRaiser::materializeInput(const Input &input) {
  Location loc = input.source.getLoc();
  auto type = dyn_cast<RankedTensorType>(input.source.getType());
  if (!type)
    return input.source;
  // Size-1 dims are folded away; a tensor without other dims is a scalar.
  if (maskOf(input.layout) != 0) {
    if (!llvm::is_contained(input.layout, kUnit))
      return input.source;
    return tensor::CollapseShapeOp::create(rewriter, loc, input.source,
                                           unitFolding(input.layout));
  }
  SmallVector<Value> zeros;
  if (type.getRank() != 0)
    zeros.assign(type.getRank(),
                 arith::ConstantIndexOp::create(rewriter, loc, 0));
  Value scalar = tensor::ExtractOp::create(rewriter, loc, input.source, zeros);
  if (!scalar.getType().isF32())
    scalar =
        arith::ExtFOp::create(rewriter, loc, rewriter.getF32Type(), scalar);
  return scalar;
}

GemmOp ContractionRaiser::rewrite(ArrayRef<Value> outputs,
                                  const DenseSet<Operation *> &gone) {
  SmallVector<Location> locs;
  for (Operation *op : fusedOps)
    locs.push_back(op->getLoc());
  Location loc = rewriter.getFusedLoc(locs);

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<DimsAttr> resultDims;
  for (Value output : outputs) {
    const FusedTensor &tensor = fused.find(output)->second;
    results.push_back(tensor.scalar);
    resultTypes.push_back(
        dropUnitDims(cast<RankedTensorType>(output.getType()), tensor.layout));
    resultDims.push_back(
        DimsAttr::get(rewriter.getContext(), maskOf(tensor.layout)));
  }
  YieldOp::create(builder, loc, results);
  raiseActivations(rewriter, *epilogue);

  rewriter.setInsertionPoint(contraction);
  SmallVector<Value> inputValues;
  SmallVector<Attribute> inputDims;
  for (const Input &input : inputs) {
    inputValues.push_back(materializeInput(input));
    inputDims.push_back(
        DimsAttr::get(rewriter.getContext(), maskOf(input.layout)));
  }
  auto gemmOp = GemmOp::create(
      rewriter, loc, resultTypes, gemm.a, gemm.b, c, /*alpha=*/Value(),
      /*beta=*/Value(), inputValues, gemm.transposeA, gemm.transposeB,
      /*b_halves=*/false, /*accumulator_half_n=*/false,
      rewriter.getArrayAttr(inputDims),
      rewriter.getArrayAttr(
          SmallVector<Attribute>(resultDims.begin(), resultDims.end())));
  gemmOp.getEpilogue().push_back(epilogue.release());
  // A frontend may compute a value twice (JAX's LayerNorm reduces each row
  // for its mean twice): one epilogue op for each.
  DominanceInfo dominance;
  eliminateCommonSubExpressions(rewriter, dominance, gemmOp);

  // Sizes queried from epilogue values are the sizes of A and B.
  for (auto &[value, tensor] : fused) {
    for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
      std::optional<unsigned> dim = getShapeQuery(use);
      if (!dim)
        continue;
      Operation *query = use.getOwner();
      rewriter.setInsertionPoint(query);
      rewriter.replaceOp(query,
                         outputSize(query->getLoc(), tensor.layout[*dim]));
    }
  }

  rewriter.setInsertionPointAfter(gemmOp);
  for (auto [output, result] : llvm::zip(outputs, gemmOp.getResults())) {
    Value replacement = result;
    if (result.getType() != output.getType()) {
      auto type = cast<RankedTensorType>(output.getType());
      ArrayRef<unsigned> layout = fused.find(output)->second.layout;
      SmallVector<OpFoldResult> sizes;
      for (auto [size, axis] : llvm::zip(type.getShape(), layout))
        sizes.push_back(ShapedType::isDynamic(size)
                            ? OpFoldResult(outputSize(loc, axis))
                            : OpFoldResult(rewriter.getIndexAttr(size)));
      replacement = tensor::ExpandShapeOp::create(rewriter, loc, type, result,
                                                  unitFolding(layout), sizes);
    }
    rewriter.replaceUsesWithIf(output, replacement, [&](OpOperand &use) {
      return !gone.contains(use.getOwner());
    });
  }

  // Erase the raised ops, users first, then what only they used.
  SmallVector<Operation *> erased(gone.begin(), gone.end());
  llvm::sort(erased,
             [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  SetVector<Operation *> producers;
  for (Operation *op : erased)
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && !gone.contains(def) && !op->isAncestor(def))
          producers.insert(def);
    });
  for (Operation *op : erased)
    rewriter.eraseOp(op);
  eraseDeadOps(rewriter, producers.getArrayRef());
  return gemmOp;
}

Value ContractionRaiser::outputSize(Location loc, unsigned axis) {
  if (axis == kUnit)
    return arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto size = [&](Value operand, bool lastDim) -> Value {
    int64_t rank = cast<RankedTensorType>(operand.getType()).getRank();
    return tensor::DimOp::create(rewriter, loc, operand,
                                 lastDim ? rank - 1 : rank - 2);
  };
  if (axis == DimsAttr::kM)
    return size(gemm.a, gemm.transposeA);
  if (axis == DimsAttr::kN)
    return size(gemm.b, !gemm.transposeB);
  Value batched =
      cast<RankedTensorType>(gemm.a.getType()).getRank() == 3 ? gemm.a : gemm.b;
  return tensor::DimOp::create(rewriter, loc, batched, 0);
}

FailureOr<GemmOp> ContractionRaiser::run() {
  if (failed(seedAccumulator())) {
    if (options.explain)
      contraction->emitRemark() << "not raised to coda.gemm: " << reason;
    return failure();
  }
  for (Operation *op = contraction->getNextNode(); op; op = op->getNextNode()) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp || isDataMovement(linalgOp) ||
        linalg::isaContractionOpInterface(linalgOp))
      continue;
    if (excluded.contains(op)) {
      if (options.explain)
        op->emitRemark() << "not fused into the coda.gemm epilogue: its "
                            "tensor of i1 is read outside the epilogue, "
                            "and coda.gemm outputs are f32, bf16 or f16";
      continue;
    }
    bool readsEpilogue = llvm::any_of(op->getOpOperands(), [&](OpOperand &o) {
      return fused.contains(
          resolveOperand(o.get(), linalgOp.getMatchingIndexingMap(&o)).source);
    });
    if (!readsEpilogue)
      continue;
    // Whatever a failed attempt added to the epilogue is taken out again.
    size_t numInputs = inputs.size();
    Operation *last = epilogue->empty() ? nullptr : &epilogue->back();
    if (succeeded(absorb(linalgOp)))
      continue;
    while (!epilogue->empty() && &epilogue->back() != last)
      epilogue->back().erase();
    epilogue->eraseArguments(numInputs + 1, inputs.size() - numInputs);
    inputs.truncate(numInputs);
    toHoist.clear();
    // One that reads another product is that product's to fuse, when it is
    // raised; the remark would be about the wrong GEMM.
    bool readsOtherProduct = llvm::any_of(op->getOperands(), [&](Value v) {
      auto producer = v.getDefiningOp<linalg::LinalgOp>();
      return producer && producer != contraction &&
             linalg::isaContractionOpInterface(producer);
    });
    if (options.explain && !readsOtherProduct)
      op->emitRemark() << "not fused into the coda.gemm epilogue: " << reason;
  }

  // The raised ops go away, and with them the data movement that only they
  // read. Epilogue values read by anything else become outputs.
  DenseSet<Operation *> gone(fusedOps.begin(), fusedOps.end());
  Block *block = contraction->getBlock();
  for (Operation &op : llvm::reverse(*block)) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    bool movesData = linalgOp ? isDataMovement(linalgOp) : isUnitReshape(&op);
    if (movesData && !op.use_empty() &&
        llvm::all_of(op.getUsers(),
                     [&](Operation *user) { return gone.contains(user); }))
      gone.insert(&op);
  }
  SmallVector<Value> outputs;
  for (auto &[value, tensor] : fused)
    if (llvm::any_of(value.getUses(), [&](OpOperand &use) {
          return !gone.contains(use.getOwner()) && !getShapeQuery(use);
        }))
      outputs.push_back(value);
  for (Value output : outputs)
    if (!isEpilogueTensorElement(getElementTypeOrSelf(output.getType()))) {
      unwritable = output.getDefiningOp();
      return failure();
    }
  if (outputs.empty()) {
    if (options.explain)
      contraction->emitRemark()
          << "not raised to coda.gemm: none of its results is used";
    return failure();
  }
  return rewrite(outputs, gone);
}

FailureOr<GemmOp>
mlir::coda::raiseContraction(RewriterBase &rewriter,
                             linalg::LinalgOp contraction,
                             const RaiseLinalgOptions &options) {
  std::string why;
  FailureOr<GemmOperands> gemm =
      matchContraction(contraction, options.lowPrecisionEpilogue, why);
  if (failed(gemm)) {
    if (options.explain)
      contraction->emitRemark() << "not raised to coda.gemm: " << why;
    return failure();
  }
  // A consumer of i1 that the epilogue could compute but not write is left
  // out, and the raising tried again: once per such consumer.
  DenseSet<Operation *> excluded;
  while (true) {
    ContractionRaiser raiser(rewriter, contraction, *gemm, options, excluded);
    FailureOr<GemmOp> raised = raiser.run();
    if (succeeded(raised) || !raiser.getUnwritable())
      return raised;
    excluded.insert(raiser.getUnwritable());
  }
}

void raising::eraseDeadOps(RewriterBase &rewriter,
                           ArrayRef<Operation *> start) {
  SetVector<Operation *> ops(start.begin(), start.end());
  while (!ops.empty()) {
    Operation *op = ops.pop_back_val();
    if (!isOpTriviallyDead(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        ops.insert(def);
    rewriter.eraseOp(op);
  }
}
