//===- Adjoints.cpp - the derivative of each epilogue op ------------------===//
//
// Element semantics: every epilogue value is a function of the output element
// (b, m, n), uniform along the dims it does not vary along. An elementwise op
// passes adjoints to its operands at the same element; a row reduction, whose
// result at (b, m, n) depends on the whole row, passes each element the row
// reduction of its adjoint; coda.partner passes its adjoint to the partner
// column, a coordinate and a detached value have none. An activation's
// derivative is the op coda.activation_derivative, which every target builds
// through EpilogueMath from the same primitives as the activation.
//
//===----------------------------------------------------------------------===//

#include "Adjoints.h"

#include "coda/Dialect/Coda/IR/CodaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::coda;

namespace {
/// Float arithmetic at one location, in the type of the adjoints.
struct Arith {
  OpBuilder &b;
  Location loc;
  Type type;

  Value constant(double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  }
  Value mul(Value p, Value q) { return arith::MulFOp::create(b, loc, p, q); }
  Value div(Value p, Value q) { return arith::DivFOp::create(b, loc, p, q); }
  Value neg(Value p) { return arith::NegFOp::create(b, loc, p); }
  Value sub(Value p, Value q) { return arith::SubFOp::create(b, loc, p, q); }
  Value cmp(arith::CmpFPredicate predicate, Value p, Value q) {
    return arith::CmpFOp::create(b, loc, predicate, p, q);
  }
  Value select(Value condition, Value p, Value q) {
    return arith::SelectOp::create(b, loc, condition, p, q);
  }
  /// `g` where `condition`, else 0.
  Value where(Value condition, Value g) {
    return select(condition, g, constant(0.0));
  }
};

/// The adjoints of max(x, y) (min with `lt`): all of it to the larger
/// (smaller) operand, half to each on a tie, as PyTorch's maximum/minimum.
SmallVector<Value> extremumAdjoint(Arith &a, Value x, Value y, Value g,
                                   arith::CmpFPredicate wins) {
  Value half = a.mul(g, a.constant(0.5));
  Value tie = a.cmp(arith::CmpFPredicate::OEQ, x, y);
  Value tieShare = a.where(tie, half);
  return {a.select(a.cmp(wins, x, y), g, tieShare),
          a.select(a.cmp(wins, y, x), g, tieShare)};
}

/// The adjoint of a reduction of x to y over the columns of a row (`width`
/// 0) or of a group of `width` columns, at this element: the reduction of g
/// over the same columns that the reduction's derivative calls for.
Value reduceAdjoint(OpBuilder &b, Location loc, Arith &a, ReductionKind kind,
                    int64_t width, Value x, Value y, Value g) {
  auto reduce = [&](ReductionKind k, Value v) -> Value {
    auto attr = ReductionKindAttr::get(b.getContext(), k);
    if (width)
      return GroupReduceOp::create(b, loc, v.getType(), attr, v,
                                   b.getI64IntegerAttr(width));
    return RowReduceOp::create(b, loc, v.getType(), attr, v);
  };
  switch (kind) {
  case ReductionKind::Sum:
    return reduce(ReductionKind::Sum, g);
  case ReductionKind::Mean:
    return reduce(ReductionKind::Mean, g);
  case ReductionKind::Max: {
    // The row's total adjoint, shared by the elements that attain the max
    // (as torch.amax).
    Value attains = a.cmp(arith::CmpFPredicate::OEQ, x, y);
    Value count = reduce(ReductionKind::Sum,
                         a.select(attains, a.constant(1.0), a.constant(0.0)));
    return a.where(attains, a.div(reduce(ReductionKind::Sum, g), count));
  }
  }
  llvm_unreachable("unknown reduction kind");
}

/// A list of op classes.
template <typename... OpTys> struct OpList {
  static bool contains(Operation *op) { return isa<OpTys...>(op); }
  /// The op names, as "arith.addf, arith.subf and coda.row_reduce".
  static std::string spell() {
    SmallVector<StringRef> names = {OpTys::getOperationName()...};
    std::string text;
    for (auto [i, name] : llvm::enumerate(names)) {
      if (i)
        text += i + 1 == names.size() ? " and " : ", ";
      text += name.str();
    }
    return text;
  }
};

/// The ops buildAdjoint differentiates: each has a case in its TypeSwitch,
/// and the "has no derivative" message lists them.
using DifferentiableOps =
    OpList<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
           arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, arith::SelectOp,
           math::ExpOp, math::LogOp, math::SqrtOp, math::RsqrtOp, math::TanhOp,
           math::AbsFOp, math::PowFOp, math::SinOp, math::CosOp, ActivationOp,
           DropoutOp, RowReduceOp, GroupReduceOp, PartnerOp, CoordOp, DetachOp,
           RoundOp>;
} // namespace

FailureOr<SmallVector<Value>> mlir::coda::buildAdjoint(OpBuilder &b,
                                                       Operation *op, Value g) {
  if (!DifferentiableOps::contains(op))
    return op->emitOpError()
           << "has no derivative: the backward of an epilogue can be derived "
              "through "
           << DifferentiableOps::spell();
  Location loc = op->getLoc();
  Arith a{b, loc, g.getType()};
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto result = [&] { return op->getResult(0); };
  using Adjoints = std::optional<SmallVector<Value>>;
  Adjoints adjoints =
      llvm::TypeSwitch<Operation *, Adjoints>(op)
          .Case([&](arith::AddFOp) {
            return SmallVector<Value>{g, g};
          })
          .Case([&](arith::SubFOp) {
            return SmallVector<Value>{g, a.neg(g)};
          })
          .Case([&](arith::MulFOp) {
            return SmallVector<Value>{a.mul(g, operand(1)),
                                      a.mul(g, operand(0))};
          })
          .Case([&](arith::DivFOp) {
            // d(x / y) = dx / y - (x / y) dy / y
            return SmallVector<Value>{
                a.div(g, operand(1)),
                a.neg(a.div(a.mul(g, result()), operand(1)))};
          })
          .Case([&](arith::NegFOp) { return SmallVector<Value>{a.neg(g)}; })
          .Case([&](arith::MaximumFOp) {
            return extremumAdjoint(a, operand(0), operand(1), g,
                                   arith::CmpFPredicate::OGT);
          })
          .Case([&](arith::MinimumFOp) {
            return extremumAdjoint(a, operand(0), operand(1), g,
                                   arith::CmpFPredicate::OLT);
          })
          .Case([&](arith::SelectOp) {
            return SmallVector<Value>{Value(), a.where(operand(0), g),
                                      a.select(operand(0), a.constant(0.0), g)};
          })
          .Case([&](math::ExpOp) {
            return SmallVector<Value>{a.mul(g, result())};
          })
          .Case([&](math::LogOp) {
            return SmallVector<Value>{a.div(g, operand(0))};
          })
          .Case([&](math::SqrtOp) {
            // d sqrt(x) = dx / (2 sqrt(x))
            return SmallVector<Value>{
                a.div(a.mul(g, a.constant(0.5)), result())};
          })
          .Case([&](math::RsqrtOp) {
            // d x^(-1/2) = -x^(-1/2) dx / (2 x)
            return SmallVector<Value>{
                a.div(a.mul(a.mul(g, a.constant(-0.5)), result()), operand(0))};
          })
          .Case([&](math::TanhOp) {
            Value t = result();
            return SmallVector<Value>{
                a.mul(g, a.sub(a.constant(1.0), a.mul(t, t)))};
          })
          .Case([&](math::SinOp) {
            return SmallVector<Value>{
                a.mul(g, math::CosOp::create(b, loc, operand(0)))};
          })
          .Case([&](math::CosOp) {
            return SmallVector<Value>{
                a.neg(a.mul(g, math::SinOp::create(b, loc, operand(0))))};
          })
          .Case([&](math::AbsFOp) {
            // sign(x) dx, 0 at x = 0 (as PyTorch's abs backward).
            Value x = operand(0);
            Value zero = a.constant(0.0);
            return SmallVector<Value>{a.select(
                a.cmp(arith::CmpFPredicate::OGT, x, zero), g,
                a.where(a.cmp(arith::CmpFPredicate::OLT, x, zero), a.neg(g)))};
          })
          .Case([&](math::PowFOp) {
            // d x^c = c x^(c-1) dx + x^c log(x) dc
            Value x = operand(0), c = operand(1);
            Value lower =
                math::PowFOp::create(b, loc, x, a.sub(c, a.constant(1.0)));
            Value dc =
                c.getDefiningOp<arith::ConstantOp>()
                    ? Value()
                    : a.mul(g, a.mul(result(), math::LogOp::create(b, loc, x)));
            return SmallVector<Value>{a.mul(g, a.mul(c, lower)), dc};
          })
          .Case([&](ActivationOp act) {
            Value derivative = ActivationDerivativeOp::create(
                b, loc, act.getType(), act.getKindAttr(), act.getInput());
            return SmallVector<Value>{a.mul(g, derivative)};
          })
          .Case([&](DropoutOp dropout) {
            // The forward's mask and scale, regenerated from its seed and
            // stream at this element.
            auto masked =
                DropoutOp::create(b, loc, g.getType(), g, dropout.getSeed(),
                                  dropout.getPAttr(), dropout.getStreamAttr());
            return SmallVector<Value>{Value(masked.getResult()), Value()};
          })
          .Case([&](PartnerOp partner) {
            // y(n) = x(n xor d): x(n') receives the adjoint at n' xor d (0
            // where that is past the last column, as y is 0 there).
            return SmallVector<Value>{
                Value(PartnerOp::create(b, loc, g.getType(), g,
                                        partner.getDistanceAttr())
                          .getResult())};
          })
          .Case([&](CoordOp) { return SmallVector<Value>{}; })
          .Case([&](DetachOp) { return SmallVector<Value>{Value()}; })
          // Straight through: rounding's derivative is taken as 1.
          .Case([&](RoundOp) { return SmallVector<Value>{g}; })
          .Case([&](RowReduceOp reduce) {
            return SmallVector<Value>{
                reduceAdjoint(b, loc, a, reduce.getKind(),
                              /*width=*/0, reduce.getInput(), result(), g)};
          })
          .Case([&](GroupReduceOp reduce) {
            return SmallVector<Value>{
                reduceAdjoint(b, loc, a, reduce.getKind(), reduce.getWidth(),
                              reduce.getInput(), result(), g)};
          })
          .Default([](Operation *) { return Adjoints(); });
  assert(adjoints && "a differentiable op without a case");
  return *adjoints;
}
