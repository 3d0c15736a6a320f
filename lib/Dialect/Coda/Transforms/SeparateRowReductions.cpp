//===- SeparateRowReductions.cpp - reductions that read no reduction ------===//
//
// A sum or mean over a row is linear: of values that are a sum of terms, each
// a product of values that vary along the row by factors uniform along it
// (row reductions, `[m]` inputs, constants), it is the sum of the factors
// times each term's reduction. A LayerNorm's gradient reduces such values,
//   mean(-(g gamma rstd + 2 c (h - mu))), c = mean(g gamma (h - mu) k),
// which read an earlier reduction; rewritten so, every reduction reads the
// row's elements only, and they are row statistics, merged after the GEMM at
// any width.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Transforms/Backward.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <optional>

using namespace mlir;
using namespace mlir::coda;

namespace {

/// A term of a sum: `values` (null: the term is uniform along the row) times
/// the product of `factors`, each uniform along the row (a divisor when its
/// flag is set), negated when `negated`.
struct Term {
  Value values;
  SmallVector<std::pair<Value, bool>, 2> factors;
  bool negated = false;
};

class Separation {
public:
  explicit Separation(GemmOp gemm) : gemm(gemm), dims(gemm) {}

  /// Rewrites `reduce` as the sum of its terms' reductions; false (nothing
  /// changed) when its values are not such a sum.
  bool separate(RowReduceOp reduce);

private:
  bool isUniform(Value v) const {
    return !(dims.getMask(v) & (DimsAttr::kN | DimsAttr::kHalfN));
  }

  /// Whether `v` is computed from a row reduction of the epilogue.
  bool readsReduction(Value v);

  /// Appends the terms of `v` times `scale` to `terms`; false when `v` is
  /// not a sum of such terms.
  bool expand(Value v, const Term &scale, SmallVectorImpl<Term> &terms);

  /// The reduction `kind` of `values`: an earlier one of the same values, or
  /// a new one at `b`'s insertion point.
  Value reduceOf(OpBuilder &b, ReductionKind kind, Value values);

  GemmOp gemm;
  EpilogueDims dims;
  DenseMap<Value, bool> reads;
};

bool Separation::readsReduction(Value v) {
  auto it = reads.find(v);
  if (it != reads.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  bool result = def && (isa<RowReduceOp>(def) ||
                        llvm::any_of(def->getOperands(), [&](Value operand) {
                          return readsReduction(operand);
                        }));
  reads[v] = result;
  return result;
}

bool Separation::expand(Value v, const Term &scale,
                        SmallVectorImpl<Term> &terms) {
  auto scaled = [&](Value factor, bool divide, bool negate) {
    Term term = scale;
    if (factor)
      term.factors.push_back({factor, divide});
    term.negated ^= negate;
    return term;
  };
  if (isUniform(v)) {
    terms.push_back(scaled(v, false, false));
    return true;
  }
  if (!readsReduction(v)) {
    Term term = scale;
    term.values = v;
    terms.push_back(std::move(term));
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (auto add = dyn_cast_or_null<arith::AddFOp>(def))
    return expand(add.getLhs(), scale, terms) &&
           expand(add.getRhs(), scale, terms);
  if (auto sub = dyn_cast_or_null<arith::SubFOp>(def))
    return expand(sub.getLhs(), scale, terms) &&
           expand(sub.getRhs(), scaled({}, false, true), terms);
  if (auto neg = dyn_cast_or_null<arith::NegFOp>(def))
    return expand(neg.getOperand(), scaled({}, false, true), terms);
  if (auto mul = dyn_cast_or_null<arith::MulFOp>(def)) {
    if (isUniform(mul.getLhs()))
      return expand(mul.getRhs(), scaled(mul.getLhs(), false, false), terms);
    if (isUniform(mul.getRhs()))
      return expand(mul.getLhs(), scaled(mul.getRhs(), false, false), terms);
    return false;
  }
  if (auto div = dyn_cast_or_null<arith::DivFOp>(def);
      div && isUniform(div.getRhs()))
    return expand(div.getLhs(), scaled(div.getRhs(), true, false), terms);
  return false;
}

Value Separation::reduceOf(OpBuilder &b, ReductionKind kind, Value values) {
  for (auto earlier : gemm.getEpilogueBlock().getOps<RowReduceOp>())
    if (earlier.getKind() == kind && earlier.getInput() == values &&
        earlier->isBeforeInBlock(&*b.getInsertionPoint()))
      return earlier.getResult();
  return RowReduceOp::create(b, values.getLoc(), values.getType(),
                             ReductionKindAttr::get(b.getContext(), kind),
                             values);
}

bool Separation::separate(RowReduceOp reduce) {
  ReductionKind kind = reduce.getKind();
  if (kind == ReductionKind::Max || !readsReduction(reduce.getInput()))
    return false;
  SmallVector<Term> terms;
  if (!expand(reduce.getInput(), Term(), terms))
    return false;
  // A sum of values uniform along the row would need the row's width.
  bool uniformTerm =
      llvm::any_of(terms, [](const Term &t) { return !t.values; });
  if (uniformTerm && kind == ReductionKind::Sum)
    return false;
  // The terms' values read no reduction: the separated reductions read none.
  OpBuilder b(reduce);
  Location loc = reduce.getLoc();
  Value total;
  for (const Term &term : terms) {
    Value value = term.values ? reduceOf(b, kind, term.values) : Value();
    for (auto [factor, divide] : term.factors) {
      if (!value)
        value = divide ? arith::DivFOp::create(
                             b, loc,
                             arith::ConstantOp::create(
                                 b, loc, b.getFloatAttr(factor.getType(), 1.0)),
                             factor)
                       : factor;
      else if (divide)
        value = arith::DivFOp::create(b, loc, value, factor);
      else
        value = arith::MulFOp::create(b, loc, value, factor);
    }
    if (!total)
      total = term.negated ? arith::NegFOp::create(b, loc, value) : value;
    else if (term.negated)
      total = arith::SubFOp::create(b, loc, total, value);
    else
      total = arith::AddFOp::create(b, loc, total, value);
  }
  reduce.replaceAllUsesWith(total);
  reduce.erase();
  return true;
}

} // namespace

void mlir::coda::separateRowReductions(GemmOp gemm) {
  SmallVector<RowReduceOp> reductions(
      gemm.getEpilogueBlock().getOps<RowReduceOp>());
  std::optional<Separation> separation;
  separation.emplace(gemm);
  for (RowReduceOp reduce : reductions)
    // A rewrite adds values: their dims and what reads a reduction are
    // computed again.
    if (separation->separate(reduce))
      separation.emplace(gemm);
}
