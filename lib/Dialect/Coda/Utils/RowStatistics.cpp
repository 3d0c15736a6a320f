//===- RowStatistics.cpp - row reductions merged after the GEMM -----------===//

#include "coda/Dialect/Coda/Utils/RowStatistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::coda;

namespace {
/// A row reduction centered on an earlier one: `reduce` of f(x - shift),
/// where `shift` reduces x and f is `centering`; `ops` computes f(x - shift)
/// (the subtraction, then the square or exponential), for nothing else.
struct CenteredReduction {
  RowReduceOp shift;
  RowStatistics::Centering centering;
  SmallVector<Operation *, 2> ops;
};

/// `reduce` as a centered reduction, when it is one.
std::optional<CenteredReduction> matchCentered(RowReduceOp reduce) {
  using Centering = RowStatistics::Centering;
  Operation *f = reduce.getInput().getDefiningOp();
  if (!f || !reduce.getInput().hasOneUse())
    return std::nullopt;
  Value d;
  Centering centering;
  if (auto square = dyn_cast<arith::MulFOp>(f);
      square && square.getLhs() == square.getRhs()) {
    d = square.getLhs();
    centering = Centering::Square;
  } else if (auto exp = dyn_cast<math::ExpOp>(f)) {
    d = exp.getOperand();
    centering = Centering::Exp;
  } else {
    return std::nullopt;
  }
  auto sub = d.getDefiningOp<arith::SubFOp>();
  if (!sub || !llvm::all_of(d.getUsers(), [&](Operation *u) { return u == f; }))
    return std::nullopt;
  // The shift, detached or not (a gradient's concern only).
  Value shiftValue = sub.getRhs();
  if (auto detach = shiftValue.getDefiningOp<DetachOp>())
    shiftValue = detach.getInput();
  auto shift = shiftValue.getDefiningOp<RowReduceOp>();
  if (!shift || shift.getInput() != sub.getLhs())
    return std::nullopt;
  // A variance's mean, then a mean or sum of squares; a softmax's maximum,
  // then a sum of exponentials.
  bool square = centering == Centering::Square;
  ReductionKind kind = reduce.getKind();
  if (square
          ? shift.getKind() != ReductionKind::Mean || kind == ReductionKind::Max
          : shift.getKind() != ReductionKind::Max || kind != ReductionKind::Sum)
    return std::nullopt;
  return CenteredReduction{shift, centering, {sub, f}};
}
} // namespace

std::optional<RowStatistics> RowStatistics::get(EpilogueOpInterface op,
                                                const EpilogueDims &dims) {
  constexpr unsigned kAlongN = DimsAttr::kN | DimsAttr::kHalfN;
  Block &block = op.getEpilogueBlock();
  RowStatistics statistics;
  // The centered reductions, and the ops that center their values, which
  // the tiles compute on their own shifts.
  llvm::DenseMap<Operation *, CenteredReduction> centered;
  llvm::DenseSet<Operation *> centering;
  for (auto reduce : block.getOps<RowReduceOp>())
    if (std::optional<CenteredReduction> match = matchCentered(reduce)) {
      centering.insert(match->ops.begin(), match->ops.end());
      centered[reduce] = *match;
    }
  // The values computed from row reductions, and the constants they read.
  llvm::DenseSet<Value> derived;
  llvm::DenseSet<Operation *> constants;
  for (Operation &inner : block.without_terminator()) {
    if (centering.contains(&inner))
      continue;
    if (auto reduce = dyn_cast<RowReduceOp>(inner)) {
      statistics.reductions.push_back(reduce);
      statistics.centerings.push_back(Centering::None);
      statistics.shifts.push_back(-1);
      auto match = centered.find(reduce);
      if (match != centered.end()) {
        // One centered reduction per shift, itself not centered.
        int64_t shift = llvm::find(statistics.reductions, match->second.shift) -
                        statistics.reductions.begin();
        if (statistics.getCenteredOn(shift) >= 0 ||
            statistics.shifts[shift] >= 0)
          return std::nullopt;
        statistics.centerings.back() = match->second.centering;
        statistics.shifts.back() = shift;
        derived.insert(reduce.getResult());
        continue;
      }
      // A reduction of a value uniform along the row, or of another
      // statistic, is not a row statistic.
      if (derived.contains(reduce.getInput()) ||
          !(dims.getMask(reduce.getInput()) & kAlongN))
        return std::nullopt;
      derived.insert(reduce.getResult());
      continue;
    }
    if (llvm::none_of(inner.getOperands(),
                      [&](Value v) { return derived.contains(v); }))
      continue;
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()) &&
        !isa<DetachOp, RoundOp>(inner))
      return std::nullopt;
    for (Value operand : inner.getOperands()) {
      if (derived.contains(operand))
        continue;
      // Inputs read at the row: float values (not a dropout seed).
      if (auto arg = dyn_cast<BlockArgument>(operand)) {
        if (arg == op.getAccumulator() || (dims.getMask(arg) & kAlongN) ||
            !isa<FloatType>(arg.getType()))
          return std::nullopt;
        continue;
      }
      Operation *def = operand.getDefiningOp();
      if (!def || !def->hasTrait<OpTrait::ConstantLike>())
        return std::nullopt;
      constants.insert(def);
    }
    for (Value result : inner.getResults())
      derived.insert(result);
  }
  if (statistics.reductions.empty())
    return std::nullopt;
  for (Operation &inner : block.without_terminator())
    if (constants.contains(&inner) ||
        (!isa<RowReduceOp>(inner) && inner.getNumResults() &&
         derived.contains(inner.getResult(0))))
      statistics.mergeOps.push_back(&inner);
  // An output of a statistic spans the rows only (not broadcast along n).
  for (auto [i, value] :
       llvm::enumerate(block.getTerminator()->getOperands())) {
    bool merged = derived.contains(value);
    if (merged && (op.getResultDimsAt(i).getMask() & kAlongN))
      return std::nullopt;
    statistics.merged.push_back(merged);
  }
  return statistics;
}
