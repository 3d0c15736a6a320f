//===- NormFolding.cpp - a normalization folded into the product after it -===//
//
// A matrix product whose A is a normalization of a tensor x, as frontends emit
// RMSNorm or LayerNorm before a linear layer, is rewritten so that the
// product reads x itself and the normalization's terms move to the epilogue
// and the weights. The elementwise ops between x and A are read as one
// expression; when it is affine in x with coefficients that vary along rows
// or columns only,
//
//   A[m, k] = s * R[m] * x[m, k] * C[k] + sum_u s_u * R_u[m] * C_u[k],
//
// (RMSNorm: R = rstd, C = gamma; LayerNorm: R = rstd, C = gamma, the terms
// -mean * rstd * gamma and beta), then
//
//   A B = s * R[m] * (x (B * C)) + sum_u s_u * R_u[m] * (C_u^T B)[n]:
//
// one product of x by B scaled along K, whose epilogue takes one [m] and one
// [n] vector per term, which the raising then fuses. The [m, k] operand is
// never written; B scaled along K and one vector per term are computed from
// B instead (docs/raising.md, "Normalizations before a product").
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <deque>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

namespace {

/// A scalar of the normalized operand at (m, k): the DAG of ops that
/// compute it, across the elementwise linalg ops it spans.
struct Expr {
  enum class Kind { Read, Outside, Op } kind = Kind::Op;
  /// Read: the tensor, read at `map` of (m, k); Outside: a scalar defined
  /// outside every linalg body.
  Value value;
  AffineMap map;
  /// Op: the scalar op, on `operands`.
  Operation *op = nullptr;
  SmallVector<Expr *> operands;
  /// Whether it varies along m, along k, and depends on x.
  bool alongM = false, alongK = false, readsX = false;
};

/// A product of factors that each vary along m or k only (or neither), each
/// taken as is or inverted, and a sign.
struct Factor {
  Expr *expr;
  bool inverse;
};
struct Term {
  bool negative = false;
  SmallVector<Factor> rows, columns;
};

/// The normalized operand as `scale * x + sum(offsets)`.
struct AffineInX {
  Term scale;
  SmallVector<Term> offsets;
};

/// Reads the expressions of normalized operands, and owns them.
class ExprReader {
public:
  /// The expression of `tensor` read at `map` of (m, k), or null when a
  /// scalar op in it cannot be followed (or it has too many). `stop`, if
  /// given, is read as is rather than through its producer.
  Expr *read(Value tensor, AffineMap map, Value stop) {
    limit = exprs.size() + kMaxExprs;
    this->stop = stop;
    visited.clear();
    tensors.clear();
    scalars.clear();
    return readTensor(tensor, map);
  }

  /// The tensors along rows and columns the last read went through, each
  /// after those it reads (deepest first).
  ArrayRef<Value> intermediates() const { return visited.getArrayRef(); }

private:
  static constexpr size_t kMaxExprs = 256;

  Expr *readTensor(Value tensor, AffineMap map) {
    if (exprs.size() > limit)
      return nullptr;
    auto key = std::make_pair(tensor, map);
    if (Expr *done = tensors.lookup(key))
      return done;
    Expr *expr = readTensorOnce(tensor, map);
    tensors[key] = expr;
    return expr;
  }

  Expr *readTensorOnce(Value tensor, AffineMap map) {
    ResolvedOperand resolved = resolveOperand(tensor, map);
    bool alongM = resolved.map.isFunctionOfDim(0),
         alongK = resolved.map.isFunctionOfDim(1);
    auto producer = resolved.source.getDefiningOp<linalg::LinalgOp>();
    if (alongM && alongK && producer && isElementwise(producer) &&
        resolved.source != stop) {
      auto result = cast<OpResult>(resolved.source);
      AffineMap outMap = producer.getIndexingMapMatchingResult(result);
      AffineMap loops = inversePermutation(outMap).compose(resolved.map);
      Value yielded = producer.getBlock()->getTerminator()->getOperand(
          result.getResultNumber());
      Expr *expr = readScalar(yielded, producer, loops);
      visited.insert(resolved.source);
      return expr;
    }
    Expr *expr = make(Expr::Kind::Read);
    expr->value = resolved.source;
    expr->map = resolved.map;
    expr->alongM = alongM;
    expr->alongK = alongK;
    return expr;
  }

  Expr *make(Expr::Kind kind) {
    Expr &expr = exprs.emplace_back();
    expr.kind = kind;
    return &expr;
  }

  /// Whether `op` computes each element of its results from elements of its
  /// inputs at the same loop point: all loops parallel, results written at
  /// permutations, no linalg.index.
  static bool isElementwise(linalg::LinalgOp op) {
    if (!op.hasPureTensorSemantics() || !op.isAllParallelLoops() ||
        op.hasIndexSemantics())
      return false;
    return llvm::all_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
      return op.getMatchingIndexingMap(&init).isPermutation();
    });
  }

  /// The expression of `scalar`, a value in the body of `op`, whose loops
  /// run at `loops` of (m, k).
  Expr *readScalar(Value scalar, linalg::LinalgOp op, AffineMap loops) {
    if (exprs.size() > limit)
      return nullptr;
    auto key = std::make_pair(scalar, loops);
    if (Expr *done = scalars.lookup(key))
      return done;
    Expr *expr = readScalarOnce(scalar, op, loops);
    scalars[key] = expr;
    return expr;
  }

  Expr *readScalarOnce(Value scalar, linalg::LinalgOp op, AffineMap loops) {
    Block *body = op.getBlock();
    if (auto arg = dyn_cast<BlockArgument>(scalar);
        arg && arg.getOwner() == body) {
      OpOperand &operand = op->getOpOperand(arg.getArgNumber());
      if (op.isDpsInit(&operand))
        return nullptr;
      return readTensor(operand.get(),
                        op.getMatchingIndexingMap(&operand).compose(loops));
    }
    Operation *def = scalar.getDefiningOp();
    if (!def || !body->getParentOp()->isProperAncestor(def)) {
      Expr *expr = make(Expr::Kind::Outside);
      expr->value = scalar;
      return expr;
    }
    if (def->getNumRegions() || def->getNumResults() != 1 ||
        !isMemoryEffectFree(def) || isa<linalg::IndexOp>(def))
      return nullptr;
    Expr *expr = make(Expr::Kind::Op);
    expr->op = def;
    for (Value operand : def->getOperands()) {
      Expr *child = readScalar(operand, op, loops);
      if (!child)
        return nullptr;
      expr->operands.push_back(child);
      expr->alongM |= child->alongM;
      expr->alongK |= child->alongK;
    }
    return expr;
  }

  std::deque<Expr> exprs;
  size_t limit = 0;
  Value stop;
  llvm::SetVector<Value> visited;
  /// What this read made of each value at each map (the expression is a
  /// DAG where the ops are).
  DenseMap<std::pair<Value, AffineMap>, Expr *> tensors, scalars;
};

/// The tensor reads under `roots`, each once.
SmallVector<Expr *> getReads(ArrayRef<Expr *> roots) {
  SmallVector<Expr *> reads, stack(roots);
  DenseSet<Expr *> seen(roots.begin(), roots.end());
  while (!stack.empty()) {
    Expr *expr = stack.pop_back_val();
    for (Expr *operand : expr->operands)
      if (seen.insert(operand).second)
        stack.push_back(operand);
    if (expr->kind == Expr::Kind::Read)
      reads.push_back(expr);
  }
  return reads;
}

/// Marks the expressions that depend on `x` (each once).
void markReadsOfX(Expr *expr, Value x, DenseSet<Expr *> &done) {
  if (!done.insert(expr).second)
    return;
  if (expr->kind == Expr::Kind::Read)
    expr->readsX = expr->value == x;
  for (Expr *operand : expr->operands) {
    markReadsOfX(operand, x, done);
    expr->readsX |= operand->readsX;
  }
}

/// Appends `expr`, which does not read x, to `term` as a product of factors
/// along m or k; fails when it varies along both other than as a product.
LogicalResult appendFactors(Expr *expr, bool inverse, Term &term,
                            std::string &why) {
  // A product of shared factors (p * p, repeated) is as many factors as it
  // has paths.
  constexpr size_t kMaxFactors = 64;
  if (term.rows.size() + term.columns.size() >= kMaxFactors) {
    why = "its coefficients are products of more than " +
          std::to_string(kMaxFactors) + " factors";
    return failure();
  }
  if (!expr->alongK) {
    term.rows.push_back({expr, inverse});
    return success();
  }
  if (!expr->alongM) {
    term.columns.push_back({expr, inverse});
    return success();
  }
  if (expr->kind == Expr::Kind::Op) {
    if (isa<arith::MulFOp>(expr->op))
      return success(
          succeeded(appendFactors(expr->operands[0], inverse, term, why)) &&
          succeeded(appendFactors(expr->operands[1], inverse, term, why)));
    if (isa<arith::DivFOp>(expr->op))
      return success(
          succeeded(appendFactors(expr->operands[0], inverse, term, why)) &&
          succeeded(appendFactors(expr->operands[1], !inverse, term, why)));
    if (isa<arith::NegFOp>(expr->op)) {
      term.negative = !term.negative;
      return appendFactors(expr->operands[0], inverse, term, why);
    }
  }
  why = "it adds or multiplies a value that varies along both rows and "
        "columns and is not x";
  return failure();
}

void multiply(Term &term, const Term &by) {
  term.negative ^= by.negative;
  llvm::append_range(term.rows, by.rows);
  llvm::append_range(term.columns, by.columns);
}

/// `expr` (which reads x) as scale * x + offsets.
FailureOr<AffineInX> decompose(Expr *expr, std::string &why) {
  if (expr->kind == Expr::Kind::Read)
    return AffineInX{};
  if (expr->kind != Expr::Kind::Op)
    return failure();
  Operation *op = expr->op;
  auto negate = [](AffineInX value) {
    value.scale.negative = !value.scale.negative;
    for (Term &offset : value.offsets)
      offset.negative = !offset.negative;
    return value;
  };
  if (isa<arith::NegFOp>(op)) {
    FailureOr<AffineInX> value = decompose(expr->operands[0], why);
    return failed(value) ? value : FailureOr<AffineInX>(negate(*value));
  }
  if (!isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp>(op)) {
    why =
        "'" + op->getName().getStringRef().str() + "' of x is not affine in x";
    return failure();
  }
  Expr *lhs = expr->operands[0], *rhs = expr->operands[1];
  if (lhs->readsX && rhs->readsX) {
    why = "it reads the normalized tensor more than once";
    return failure();
  }
  bool xOnLeft = lhs->readsX;
  FailureOr<AffineInX> value = decompose(xOnLeft ? lhs : rhs, why);
  if (failed(value))
    return failure();
  Term other;
  if (isa<arith::DivFOp>(op)) {
    if (!xOnLeft) {
      why = "x is a divisor";
      return failure();
    }
    if (failed(appendFactors(rhs, /*inverse=*/true, other, why)))
      return failure();
  } else if (failed(appendFactors(xOnLeft ? rhs : lhs, false, other, why))) {
    return failure();
  }
  if (isa<arith::MulFOp, arith::DivFOp>(op)) {
    multiply(value->scale, other);
    for (Term &offset : value->offsets)
      multiply(offset, other);
    return value;
  }
  if (isa<arith::SubFOp>(op) && !xOnLeft)
    value = negate(*value);
  else if (isa<arith::SubFOp>(op))
    other.negative = !other.negative;
  value->offsets.push_back(other);
  return value;
}

/// Builds linalg ops that evaluate expressions of one axis (m or k) over a
/// 1-D loop: each term's factors multiplied (inverses divided), its sign
/// applied.
class VectorBuilder {
public:
  VectorBuilder(RewriterBase &rewriter, Location loc, unsigned axis,
                Value extentOf, int64_t extentDim)
      : rewriter(rewriter), loc(loc), axis(axis), extentOf(extentOf),
        extentDim(extentDim) {}

  /// The vector of `factors` (and `negative`), or null when it is 1.
  Value build(ArrayRef<Factor> factors, bool negative) {
    if (factors.empty() && !negative)
      return {};
    MLIRContext *context = rewriter.getContext();
    // Reading a tensor of the operand's (m, k) space at loop i: i on this
    // axis, 0 on the other (which it does not read).
    AffineExpr i = getAffineDimExpr(0, context),
               zero = getAffineConstantExpr(0, context);
    AffineMap embed = AffineMap::get(
        1, 0, axis == 0 ? ArrayRef<AffineExpr>{i, zero} : ArrayRef{zero, i},
        context);
    // A vector as it is.
    if (factors.size() == 1 && !factors[0].inverse && !negative &&
        factors[0].expr->kind == Expr::Kind::Read &&
        factors[0].expr->map.compose(embed) ==
            AffineMap::getMultiDimIdentityMap(1, context))
      return factors[0].expr->value;
    // The tensors the factors read, each (tensor, map) once.
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    DenseMap<Expr *, unsigned> argument;
    SmallVector<Expr *> roots;
    for (const Factor &factor : factors)
      roots.push_back(factor.expr);
    for (Expr *expr : getReads(roots)) {
      AffineMap map = expr->map.compose(embed);
      unsigned index = 0;
      while (index < inputs.size() &&
             (inputs[index] != expr->value || maps[index] != map))
        ++index;
      if (index == inputs.size()) {
        inputs.push_back(expr->value);
        maps.push_back(map);
      }
      argument[expr] = index;
    }
    OpFoldResult extent =
        tensor::getMixedSize(rewriter, loc, extentOf, extentDim);
    Value init =
        tensor::EmptyOp::create(rewriter, loc, {extent}, rewriter.getF32Type());
    maps.push_back(AffineMap::getMultiDimIdentityMap(1, context));
    auto generic = linalg::GenericOp::create(
        rewriter, loc, init.getType(), inputs, init, maps,
        {utils::IteratorType::parallel},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          DenseMap<Expr *, Value> emitted;
          auto emit = [&](auto &self, Expr *expr) -> Value {
            if (Value done = emitted.lookup(expr))
              return done;
            Value value;
            if (expr->kind == Expr::Kind::Read) {
              value = args[argument.lookup(expr)];
            } else if (expr->kind == Expr::Kind::Outside) {
              value = expr->value;
            } else {
              IRMapping mapping;
              for (auto [operand, child] :
                   llvm::zip(expr->op->getOperands(), expr->operands))
                mapping.map(operand, self(self, child));
              value = b.clone(*expr->op, mapping)->getResult(0);
            }
            return emitted[expr] = value;
          };
          Value product;
          auto one = [&] {
            return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f))
                .getResult();
          };
          for (const Factor &factor : factors) {
            Value value = emit(emit, factor.expr);
            if (factor.inverse)
              product = arith::DivFOp::create(b, loc, product ? product : one(),
                                              value);
            else
              product = product ? arith::MulFOp::create(b, loc, product, value)
                                      .getResult()
                                : value;
          }
          if (negative)
            product = product
                          ? arith::NegFOp::create(b, loc, product).getResult()
                          : arith::NegFOp::create(b, loc, one()).getResult();
          linalg::YieldOp::create(b, loc, product);
        });
    return generic.getResult(0);
  }

private:
  RewriterBase &rewriter;
  Location loc;
  unsigned axis;
  Value extentOf;
  int64_t extentDim;
};

/// A contraction whose A may be a normalization, as read for folding.
struct Candidate {
  linalg::LinalgOp contraction;
  /// The normalized operand A, the tensor x it normalizes, and A as an
  /// affine function of x.
  Value normalized, x;
  AffineInX affine;
  /// The dim of B that is K.
  unsigned kDimOfB;
};

/// Whether the contraction `op` reads `normalized` as its A, [M, K], and
/// how: fills `kDimOfB`.
LogicalResult matchAsProductOf(linalg::LinalgOp op, Value normalized,
                               unsigned &kDimOfB) {
  std::string unused;
  if (failed(matchContraction(op, /*lowPrecision=*/false, unused)))
    return failure();
  OpOperand *a = op.getDpsInputOperand(0), *b = op.getDpsInputOperand(1);
  if (a->get() != normalized || b->get() == normalized)
    return failure();
  AffineMap aMap = op.getMatchingIndexingMap(a),
            bMap = op.getMatchingIndexingMap(b),
            outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto dimOf = [](AffineMap map, unsigned result) {
    return cast<AffineDimExpr>(map.getResult(result)).getPosition();
  };
  if (op.getNumLoops() != 3 || aMap.getNumResults() != 2 ||
      !isa<AffineDimExpr>(aMap.getResult(0)) ||
      !isa<AffineDimExpr>(aMap.getResult(1)) || outMap.getNumResults() != 2 ||
      dimOf(aMap, 0) != dimOf(outMap, 0))
    return failure();
  std::optional<unsigned> kDim = bMap.getResultPosition(aMap.getResult(1));
  if (!kDim)
    return failure();
  kDimOfB = *kDim;
  return success();
}

/// Why the products `candidates` of `normalized` are not folded, or empty:
/// another op reads the operand, or the weights' work the folds add (B
/// scaled along K, written and read, and one pass over B per term) exceeds
/// the operand's write and its reads, which they save. With dynamic sizes it
/// is assumed to pay (M is the token count).
std::string whyNotFolded(Value normalized, ArrayRef<Candidate> candidates) {
  for (Operation *user : normalized.getUsers())
    if (!llvm::any_of(candidates, [&](const Candidate &candidate) {
          return candidate.contraction == user;
        }))
      return "the normalized operand is also read by '" +
             user->getName().getStringRef().str() + "'";
  auto x = cast<RankedTensorType>(candidates.front().x.getType());
  if (!x.hasStaticShape())
    return "";
  int64_t m = x.getDimSize(0), k = x.getDimSize(1);
  int64_t saved = (1 + static_cast<int64_t>(candidates.size())) * m * k;
  int64_t added = 0;
  for (const Candidate &candidate : candidates) {
    auto b =
        cast<RankedTensorType>(candidate.contraction->getOperand(1).getType());
    if (!b.hasStaticShape())
      return "";
    int64_t passes = (candidate.affine.scale.columns.empty() ? 0 : 2) +
                     static_cast<int64_t>(candidate.affine.offsets.size());
    added += passes * b.getDimSize(1 - candidate.kDimOfB) * k;
  }
  if (added <= saved)
    return "";
  return "the weights' work it adds (" + std::to_string(added) +
         " elements) exceeds the normalized operand's write and reads it "
         "saves (" +
         std::to_string(saved) + ")";
}

/// The normalization `a` is of x, as read with `stop` (a tensor along rows
/// and columns read as is, not through its producer; null: none). Fails
/// with `why` set when it is worth a remark: when it reads per-row values
/// (statistics) and is not one this rewrite folds.
FailureOr<std::pair<Value, AffineInX>>
readNormalization(Value a, Value stop, ExprReader &reader, std::string &why) {
  MLIRContext *context = a.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, context);
  Expr *expr = reader.read(a, identity, stop);
  if (!expr)
    return failure();
  bool looksNormalized = false, oneX = true;
  Value x;
  for (Expr *e : getReads(expr)) {
    looksNormalized |= e->alongM && !e->alongK;
    if (e->alongM && e->alongK) {
      oneX &= e->map == identity && (!x || x == e->value);
      x = e->value;
    }
  }
  auto fail = [&](const Twine &message) {
    why = looksNormalized ? message.str() : "";
    return failure();
  };
  if (!x || x == a)
    return failure();
  if (!oneX)
    return fail("the operand reads a tensor along rows and columns other "
                "than the one it normalizes");
  if (!getElementTypeOrSelf(x.getType()).isF32())
    return fail("the normalized tensor is not f32");
  DenseSet<Expr *> marked;
  markReadsOfX(expr, x, marked);
  std::string notAffine;
  FailureOr<AffineInX> affine = decompose(expr, notAffine);
  if (failed(affine))
    return fail(notAffine);
  return std::make_pair(x, std::move(*affine));
}

/// Reads the normalization of `contraction`'s A. Its x is the deepest tensor
/// along rows and columns that it is affine in: the input of the
/// elementwise ops that compute A, or, where that reads more than one such
/// tensor (x is itself a sum: a residual added to a product), the first of
/// its intermediates that A is a normalization of. Fails (with `why` set
/// when it is worth a remark) when there is none.
FailureOr<Candidate> readCandidate(linalg::LinalgOp contraction,
                                   ExprReader &reader, std::string &why) {
  Candidate candidate;
  candidate.contraction = contraction;
  Value a = contraction.getDpsInputOperand(0)->get();
  auto aType = dyn_cast<RankedTensorType>(a.getType());
  auto producer = a.getDefiningOp<linalg::LinalgOp>();
  if (!aType || aType.getRank() != 2 || !aType.getElementType().isF32() ||
      !producer || isDataMovement(producer))
    return failure();
  if (failed(matchAsProductOf(contraction, a, candidate.kDimOfB)))
    return failure();
  auto read = readNormalization(a, Value(), reader, why);
  // The intermediates, deepest first.
  SmallVector<Value> cuts(reader.intermediates());
  for (Value cut : cuts) {
    if (succeeded(read) || cut == a)
      break;
    std::string cutWhy;
    auto cutRead = readNormalization(a, cut, reader, cutWhy);
    if (succeeded(cutRead))
      read = std::move(cutRead);
  }
  if (failed(read))
    return failure();
  if (!isZeroFilled(contraction.getDpsInitOperand(0)->get())) {
    why = "the product adds to an initial value other than zero, which the "
          "row factor would scale too";
    return failure();
  }
  why.clear();
  candidate.normalized = a;
  candidate.x = read->first;
  candidate.affine = std::move(read->second);
  return candidate;
}

/// Rewrites `candidate`'s contraction to read x and computes its former
/// result in an elementwise op after it.
void fold(RewriterBase &rewriter, Candidate &candidate) {
  linalg::LinalgOp contraction = candidate.contraction;
  Location loc = contraction.getLoc();
  rewriter.setInsertionPoint(contraction);
  MLIRContext *context = rewriter.getContext();
  Value b = contraction.getDpsInputOperand(1)->get();
  // Both frontends write B as a transpose of the weights: scale (and reduce)
  // the weights as stored, then move the scaled ones as B was moved.
  SmallVector<linalg::LinalgOp> moves;
  Value weights = b;
  unsigned kDim = candidate.kDimOfB;
  while (auto move = weights.getDefiningOp<linalg::LinalgOp>()) {
    if (!isDataMovement(move) || move.getNumDpsInputs() != 1)
      break;
    OpOperand *input = move.getDpsInputOperand(0);
    AffineMap inMap = move.getMatchingIndexingMap(input),
              outMap = move.getMatchingIndexingMap(move.getDpsInitOperand(0));
    if (!inMap.isPermutation() || !outMap.isPermutation() ||
        inMap.getNumResults() != 2)
      break;
    kDim = *inMap.getResultPosition(
        getAffineDimExpr(outMap.getDimPosition(kDim), context));
    moves.push_back(move);
    weights = input->get();
  }
  unsigned nDim = 1 - kDim;
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, context);
  AffineMap weightsAlongK =
      AffineMap::get(2, 0, getAffineDimExpr(kDim, context), context);
  AffineMap weightsAlongN =
      AffineMap::get(2, 0, getAffineDimExpr(nDim, context), context);

  VectorBuilder rows(rewriter, loc, 0, candidate.x, 0);
  VectorBuilder columns(rewriter, loc, 1, candidate.x, 1);
  const Term &scale = candidate.affine.scale;

  // The weights scaled along K by the scale's column factors, moved as B.
  Value scaledB = b;
  if (Value c = columns.build(scale.columns, false)) {
    Value init = tensor::EmptyOp::create(
        rewriter, loc, tensor::getMixedSizes(rewriter, loc, weights),
        rewriter.getF32Type());
    scaledB =
        linalg::GenericOp::create(
            rewriter, loc, weights.getType(), ValueRange{weights, c}, init,
            ArrayRef{identity, weightsAlongK, identity},
            {utils::IteratorType::parallel, utils::IteratorType::parallel},
            [](OpBuilder &builder, Location loc, ValueRange args) {
              linalg::YieldOp::create(
                  builder, loc,
                  arith::MulFOp::create(builder, loc, args[0], args[1])
                      .getResult());
            })
            .getResult(0);
    for (linalg::LinalgOp move : llvm::reverse(moves)) {
      IRMapping mapping;
      mapping.map(move.getDpsInputOperand(0)->get(), scaledB);
      scaledB = rewriter.clone(*move, mapping)->getResult(0);
    }
  }

  // Each term's [n] vector: the weights along N dotted with its column
  // factors, its sign applied there when it has no row factors.
  struct TermVectors {
    Value row, column;
  };
  SmallVector<TermVectors> terms;
  for (const Term &offset : candidate.affine.offsets) {
    bool rowsCarrySign = !offset.rows.empty();
    Value row = rows.build(offset.rows, rowsCarrySign && offset.negative);
    Value c = columns.build(offset.columns, !rowsCarrySign && offset.negative);
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getF32FloatAttr(0.0f));
    Value init = linalg::FillOp::create(
                     rewriter, loc, zero,
                     tensor::EmptyOp::create(
                         rewriter, loc,
                         {tensor::getMixedSize(rewriter, loc, weights, nDim)},
                         rewriter.getF32Type())
                         .getResult())
                     .getResult(0);
    SmallVector<Value> inputs{weights};
    SmallVector<AffineMap> maps{identity};
    if (c) {
      inputs.push_back(c);
      maps.push_back(weightsAlongK);
    }
    maps.push_back(weightsAlongN);
    SmallVector<utils::IteratorType> iterators(2,
                                               utils::IteratorType::parallel);
    iterators[kDim] = utils::IteratorType::reduction;
    Value column =
        linalg::GenericOp::create(
            rewriter, loc, init.getType(), inputs, init, maps, iterators,
            [&](OpBuilder &builder, Location loc, ValueRange args) {
              // A fused multiply-add rather than a product and a sum: this
              // matrix-vector product is not one for the raising to take.
              Value sum =
                  c ? math::FmaOp::create(builder, loc, args[0], args[1],
                                          args.back())
                          .getResult()
                    : arith::AddFOp::create(builder, loc, args.back(), args[0])
                          .getResult();
              linalg::YieldOp::create(builder, loc, sum);
            })
            .getResult(0);
    terms.push_back({row, column});
  }
  Value scaleRow = rows.build(scale.rows, scale.negative);

  // The product of x by scaled B, in the contraction's own form.
  IRMapping mapping;
  mapping.map(candidate.normalized, candidate.x);
  mapping.map(b, scaledB);
  Operation *product = rewriter.clone(*contraction, mapping);

  // y = scaleRow * product + sum(row_u * column_u).
  Value acc = product->getResult(0);
  auto accType = cast<RankedTensorType>(acc.getType());
  AffineMap alongM =
      AffineMap::get(2, 0, getAffineDimExpr(0, context), context);
  AffineMap alongN =
      AffineMap::get(2, 0, getAffineDimExpr(1, context), context);
  SmallVector<Value> inputs{acc};
  SmallVector<AffineMap> maps{identity};
  if (scaleRow) {
    inputs.push_back(scaleRow);
    maps.push_back(alongM);
  }
  for (const TermVectors &term : terms) {
    if (term.row) {
      inputs.push_back(term.row);
      maps.push_back(alongM);
    }
    inputs.push_back(term.column);
    maps.push_back(alongN);
  }
  maps.push_back(identity);
  Value init = tensor::EmptyOp::create(
      rewriter, loc, tensor::getMixedSizes(rewriter, loc, acc),
      accType.getElementType());
  Value result =
      linalg::GenericOp::create(
          rewriter, loc, accType, inputs, init, maps,
          {utils::IteratorType::parallel, utils::IteratorType::parallel},
          [&](OpBuilder &builder, Location loc, ValueRange args) {
            unsigned next = 1;
            Value sum = args[0];
            if (scaleRow)
              sum = arith::MulFOp::create(builder, loc, args[next++], sum);
            for (const TermVectors &term : terms) {
              Value value =
                  term.row ? arith::MulFOp::create(builder, loc, args[next],
                                                   args[next + 1])
                                 .getResult()
                           : args[next];
              next += term.row ? 2 : 1;
              sum = arith::AddFOp::create(builder, loc, sum, value);
            }
            linalg::YieldOp::create(builder, loc, sum);
          })
          .getResult(0);
  rewriter.replaceOp(contraction, result);
  // B as the frontend moved it, when nothing else reads it.
  if (Operation *move = b.getDefiningOp())
    eraseDeadOps(rewriter, move);
}

} // namespace

void raising::foldNormalizations(RewriterBase &rewriter, Operation *root,
                                 const RaiseLinalgOptions &options) {
  // One group of products of a normalized operand at a time, the IR read
  // again after each: a folded product's result may be the x of the next
  // normalization (Linear, norm, Linear).
  while (true) {
    SmallVector<linalg::LinalgOp> contractions;
    root->walk([&](linalg::LinalgOp op) {
      if (linalg::isaContractionOpInterface(op))
        contractions.push_back(op);
    });
    // Owns the expressions the candidates refer to.
    ExprReader reader;
    // The candidates by normalized operand: each one is folded only when
    // every reader of that operand is a product that folds, so that it is
    // not written at all.
    llvm::MapVector<Value, SmallVector<Candidate, 1>> byOperand;
    SmallVector<std::pair<Operation *, std::string>> notFolded;
    for (linalg::LinalgOp op : contractions) {
      std::string why;
      FailureOr<Candidate> candidate = readCandidate(op, reader, why);
      if (succeeded(candidate))
        byOperand[candidate->normalized].push_back(std::move(*candidate));
      else if (!why.empty())
        notFolded.emplace_back(op, why);
    }
    bool folded = false;
    for (auto &[normalized, candidates] : byOperand) {
      std::string why = whyNotFolded(normalized, candidates);
      if (!why.empty()) {
        for (const Candidate &candidate : candidates)
          notFolded.emplace_back(candidate.contraction, why);
        continue;
      }
      Operation *producer = normalized.getDefiningOp();
      for (Candidate &candidate : candidates)
        fold(rewriter, candidate);
      eraseDeadOps(rewriter, producer);
      folded = true;
      break;
    }
    if (folded)
      continue;
    if (options.explain)
      for (auto &[op, why] : notFolded)
        op->emitRemark() << "normalization not folded into the product: "
                         << why;
    return;
  }
}
