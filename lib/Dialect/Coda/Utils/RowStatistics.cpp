//===- RowStatistics.cpp - row reductions merged after the GEMM -----------===//

#include "coda/Dialect/Coda/Utils/RowStatistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::coda;

std::optional<RowStatistics> RowStatistics::get(EpilogueOpInterface op,
                                                const EpilogueDims &dims) {
  constexpr unsigned kAlongN = DimsAttr::kN | DimsAttr::kHalfN;
  Block &block = op.getEpilogueBlock();
  RowStatistics statistics;
  // The values computed from row reductions, and the constants they read.
  llvm::DenseSet<Value> derived;
  llvm::DenseSet<Operation *> constants;
  for (Operation &inner : block.without_terminator()) {
    if (auto reduce = dyn_cast<RowReduceOp>(inner)) {
      // A reduction of a value uniform along the row, or of another
      // statistic, is left to the tiles.
      if (derived.contains(reduce.getInput()) ||
          !(dims.getMask(reduce.getInput()) & kAlongN))
        return std::nullopt;
      statistics.reductions.push_back(reduce);
      derived.insert(reduce.getResult());
      continue;
    }
    if (llvm::none_of(inner.getOperands(),
                      [&](Value v) { return derived.contains(v); }))
      continue;
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return std::nullopt;
    for (Value operand : inner.getOperands()) {
      if (derived.contains(operand))
        continue;
      if (auto arg = dyn_cast<BlockArgument>(operand)) {
        if (arg == op.getAccumulator() || (dims.getMask(arg) & kAlongN))
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
  for (auto [i, value] : llvm::enumerate(block.getTerminator()->getOperands())) {
    bool merged = derived.contains(value);
    if (merged && (op.getResultDimsAt(i).getMask() & kAlongN))
      return std::nullopt;
    statistics.merged.push_back(merged);
  }
  return statistics;
}
