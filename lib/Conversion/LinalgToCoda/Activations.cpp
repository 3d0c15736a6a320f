//===- Activations.cpp - recognise activation formulas in an epilogue -----===//
//
// Frontends spell one activation in many ways: GELU as x * 0.5 * (1 + erf(x /
// sqrt(2))) or 0.5 * x * (1 + erf(x * 0.70710677)), x^3 as x * x * x or
// math.fpowi, relu as a maximum or as a compare and select. Rather than list
// the spellings, a value `y` that is computed from a single value `x` by
// arith/math ops and constants is compared, as a function of `x`, with the
// formula each coda.activation lowers to (EpilogueMath, the same expansion
// every target uses) at probe points spread over the range where the
// activations differ, plus NaN. It is replaced only if the two agree at every
// probe within what rounding an f32 constant or reordering a formula explains
// (a relative 1e-6). Formulas with compares, selects, min/max or abs are
// compared with relu exactly, also far out and close to 0, where a clamp or a
// threshold shows; with a smooth activation also there and on a dense grid
// (steps of 0.005 over [-12, 12]), so that only a piecewise approximation of
// it to f32 precision passes (an erfc expanded into two rational
// approximations, as StableHLO lowers it), not a formula that departs from it
// on some interval.
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

/// Formulas larger than this are not activations; it bounds the search (an
/// erfc expanded into its two rational approximations is about 100 ops).
static constexpr unsigned kMaxFormulaOps = 128;

/// Where candidate formulas are compared with the activations.
static ArrayRef<double> probePoints() {
  static const SmallVector<double> points = [] {
    SmallVector<double> p;
    for (int i = 0; i <= 46; ++i)
      p.push_back(-8.5 + 0.37 * i);
    p.append({0.0, 30.0, -30.0, 100.0, -100.0, std::nan("")});
    return p;
  }();
  return points;
}

/// Where piecewise formulas are also compared with relu, exactly: far out
/// (a clamp's bound) and close to 0 (a threshold), down to the smallest f32.
static ArrayRef<double> piecewiseProbePoints() {
  static const SmallVector<double> points = [] {
    SmallVector<double> p;
    for (double magnitude :
         {3.4028234663852886e38, 1e30, 1e10, 1e5, 1e-3, 1e-7, 1e-20,
          1.1754943508222875e-38, 1.401298464324817e-45})
      p.append({magnitude, -magnitude});
    return p;
  }();
  return points;
}

/// Where a piecewise formula is compared with a smooth activation besides
/// the probes: a grid fine enough (steps of 0.005 over [-12, 12]) that a
/// piece which is not an approximation of the activation to f32 precision
/// shows between the pieces' bounds.
static ArrayRef<double> denseProbePoints() {
  static const SmallVector<double> points = [] {
    SmallVector<double> p;
    for (int i = -2400; i <= 2400; ++i)
      p.push_back(0.005 * i);
    return p;
  }();
  return points;
}

static bool agree(double got, double want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want);
  return std::abs(got - want) <= 1e-6 * std::abs(want) + 1e-12;
}

static bool isPiecewise(Operation *op) {
  return isa<arith::CmpFOp, arith::SelectOp, arith::MaximumFOp,
             arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp,
             math::AbsFOp>(op);
}

static bool compare(arith::CmpFPredicate predicate, double a, double b) {
  using P = arith::CmpFPredicate;
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (predicate) {
  case P::AlwaysFalse:
    return false;
  case P::AlwaysTrue:
    return true;
  case P::OEQ:
    return !unordered && a == b;
  case P::OGT:
    return !unordered && a > b;
  case P::OGE:
    return !unordered && a >= b;
  case P::OLT:
    return !unordered && a < b;
  case P::OLE:
    return !unordered && a <= b;
  case P::ONE:
    return !unordered && a != b;
  case P::ORD:
    return !unordered;
  case P::UEQ:
    return unordered || a == b;
  case P::UGT:
    return unordered || a > b;
  case P::UGE:
    return unordered || a >= b;
  case P::ULT:
    return unordered || a < b;
  case P::ULE:
    return unordered || a <= b;
  case P::UNE:
    return unordered || a != b;
  case P::UNO:
    return unordered;
  }
  llvm_unreachable("unknown predicate");
}

/// IEEE maximum/minimum: NaN if either is NaN, and -0 < +0.
static double maximum(double a, double b, bool max) {
  if (std::isnan(a) || std::isnan(b))
    return std::nan("");
  if (a == b)
    return std::signbit(a) == max ? b : a;
  return (a > b) == max ? a : b;
}

namespace {
class ReferenceActivations;

/// Evaluates, in double precision, a computation of one variable.
class Evaluator {
public:
  Evaluator(Value variable, double value, const ReferenceActivations &refs)
      : variable(variable), value(value), refs(refs) {}

  /// The value of `v`, or std::nullopt if it depends on something other than
  /// the variable and constants, or on an op the evaluator does not know.
  std::optional<double> evaluate(Value v);

  /// Whether a compare, select, min/max or abs was evaluated.
  bool sawPiecewise() const { return piecewise; }

private:
  std::optional<double> apply(Operation *op, ArrayRef<double> args);

  Value variable;
  double value;
  const ReferenceActivations &refs;
  DenseMap<Value, std::optional<double>> memo;
  bool piecewise = false;
};

/// The formulas coda.activation lowers to, built once with EpilogueMath.
class ReferenceActivations {
public:
  explicit ReferenceActivations(MLIRContext *context) {
    OpBuilder builder(context);
    builder.setInsertionPointToEnd(&block);
    Location loc = UnknownLoc::get(context);
    Value x = block.addArgument(Float32Type::get(context), loc);
    for (unsigned k = 0; k <= getMaxEnumValForActivationKind(); ++k) {
      auto kind = static_cast<ActivationKind>(k);
      formulas.push_back(buildActivation(builder, loc, kind, x));
      probed.push_back(llvm::map_to_vector(
          probePoints(), [&](double p) { return evaluate(kind, p); }));
    }
  }
  ~ReferenceActivations() { block.dropAllDefinedValueUses(); }

  double evaluate(ActivationKind kind, double x) const {
    Evaluator evaluator(block.getArgument(0), x, *this);
    return *evaluator.evaluate(formulas[static_cast<unsigned>(kind)]);
  }

  /// The activation at each of probePoints().
  ArrayRef<double> atProbes(ActivationKind kind) const {
    return probed[static_cast<unsigned>(kind)];
  }

private:
  mutable Block block;
  SmallVector<Value> formulas;
  SmallVector<SmallVector<double>> probed;
};
} // namespace

std::optional<double> Evaluator::evaluate(Value v) {
  if (v == variable)
    return value;
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumResults() != 1 || memo.size() > kMaxFormulaOps)
    return std::nullopt;
  SmallVector<double> args;
  for (Value operand : op->getOperands()) {
    std::optional<double> arg = evaluate(operand);
    if (!arg)
      return memo[v] = std::nullopt;
    args.push_back(*arg);
  }
  piecewise |= isPiecewise(op);
  return memo[v] = apply(op, args);
}

std::optional<double> Evaluator::apply(Operation *op, ArrayRef<double> args) {
  using Result = std::optional<double>;
  return TypeSwitch<Operation *, Result>(op)
      .Case([](arith::ConstantOp c) -> Result {
        if (auto f = dyn_cast<FloatAttr>(c.getValue()))
          return f.getValueAsDouble();
        if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
          return i.getType().isInteger(1)
                     ? static_cast<double>(i.getValue().getBoolValue())
                     : static_cast<double>(i.getValue().getSExtValue());
        return std::nullopt;
      })
      .Case([&](arith::AddFOp) { return args[0] + args[1]; })
      .Case([&](arith::SubFOp) { return args[0] - args[1]; })
      .Case([&](arith::MulFOp) { return args[0] * args[1]; })
      .Case([&](arith::DivFOp) { return args[0] / args[1]; })
      .Case([&](arith::NegFOp) { return -args[0]; })
      .Case([&](arith::MaximumFOp) { return maximum(args[0], args[1], true); })
      .Case([&](arith::MinimumFOp) { return maximum(args[0], args[1], false); })
      .Case([&](arith::MaxNumFOp) { return std::fmax(args[0], args[1]); })
      .Case([&](arith::MinNumFOp) { return std::fmin(args[0], args[1]); })
      .Case([&](arith::CmpFOp cmp) {
        return compare(cmp.getPredicate(), args[0], args[1]) ? 1.0 : 0.0;
      })
      .Case([&](arith::SelectOp) { return args[0] != 0 ? args[1] : args[2]; })
      .Case([&](math::AbsFOp) { return std::abs(args[0]); })
      .Case([&](math::ErfOp) { return std::erf(args[0]); })
      .Case([&](math::ErfcOp) { return std::erfc(args[0]); })
      .Case([&](math::ExpOp) { return std::exp(args[0]); })
      .Case([&](math::Exp2Op) { return std::exp2(args[0]); })
      .Case([&](math::ExpM1Op) { return std::expm1(args[0]); })
      .Case([&](math::LogOp) { return std::log(args[0]); })
      .Case([&](math::Log1pOp) { return std::log1p(args[0]); })
      .Case([&](math::Log2Op) { return std::log2(args[0]); })
      .Case([&](math::TanhOp) { return std::tanh(args[0]); })
      .Case([&](math::SqrtOp) { return std::sqrt(args[0]); })
      .Case([&](math::RsqrtOp) { return 1.0 / std::sqrt(args[0]); })
      .Case([&](math::PowFOp) { return std::pow(args[0], args[1]); })
      .Case([&](math::FPowIOp) { return std::pow(args[0], args[1]); })
      .Case([&](ActivationOp act) {
        return refs.evaluate(act.getKind(), args[0]);
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The values `y` is a function of (with constants), latest first: the chain
/// of values every path from `y` to its inputs passes through.
static SmallVector<Value> variablesOf(Value y,
                                      const ReferenceActivations &refs) {
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  if (failed(getBackwardSlice(y, &slice, options)) ||
      slice.size() > kMaxFormulaOps)
    return {};
  // The slice is topologically sorted, so reversing it puts later values
  // first; block arguments come last.
  SmallVector<Value> candidates, arguments;
  for (Operation *op : llvm::reverse(slice)) {
    if (op->getNumResults() == 1 && op->getResult(0) != y &&
        !isa<arith::ConstantOp>(op))
      candidates.push_back(op->getResult(0));
    for (Value operand : op->getOperands())
      if (isa<BlockArgument>(operand) &&
          !llvm::is_contained(arguments, operand))
        arguments.push_back(operand);
  }
  candidates.append(arguments);
  return llvm::filter_to_vector(candidates, [&](Value x) {
    return x.getType().isF32() &&
           Evaluator(x, 0.5, refs).evaluate(y).has_value();
  });
}

/// The activation that `y`, as a function of `x`, computes.
static std::optional<ActivationKind>
recognise(Value y, Value x, const ReferenceActivations &refs) {
  Evaluator probe(x, 0.5, refs);
  (void)probe.evaluate(y);
  bool piecewise = probe.sawPiecewise();
  auto agreesAt = [&](ArrayRef<double> points, ActivationKind kind,
                      bool exactly) {
    return llvm::all_of(points, [&](double point) {
      std::optional<double> got = Evaluator(x, point, refs).evaluate(y);
      double want = refs.evaluate(kind, point);
      return got && (exactly ? *got == want : agree(*got, want));
    });
  };
  for (unsigned k = 0; k <= getMaxEnumValForActivationKind(); ++k) {
    auto kind = static_cast<ActivationKind>(k);
    bool relu = kind == ActivationKind::Relu;
    // A smooth formula is never relu.
    if (relu && !piecewise)
      continue;
    bool all = llvm::all_of(
        llvm::zip(probePoints(), refs.atProbes(kind)), [&](auto probe) {
          auto [point, want] = probe;
          std::optional<double> got = Evaluator(x, point, refs).evaluate(y);
          return got && agree(*got, want);
        });
    // Every spelling of relu is exact; a piecewise approximation of a
    // smooth activation (an erfc expanded into rational approximations on
    // either side of a bound) agrees on a dense grid and far out too.
    if (all && piecewise)
      all = agreesAt(piecewiseProbePoints(), kind, relu) &&
            (relu || agreesAt(denseProbePoints(), kind, false));
    if (all)
      return kind;
  }
  return std::nullopt;
}

void raising::raiseActivations(RewriterBase &rewriter, Block &epilogue) {
  ReferenceActivations refs(rewriter.getContext());
  SmallVector<Operation *> ops;
  for (Operation &op : epilogue.without_terminator())
    ops.push_back(&op);
  // In program order, so that a sigmoid raised first can make the silu that
  // uses it recognisable.
  for (Operation *op : ops) {
    if (op->getNumResults() != 1 || op->use_empty() ||
        isa<arith::ConstantOp, ActivationOp>(op))
      continue;
    Value y = op->getResult(0);
    if (!y.getType().isF32())
      continue;
    Value x;
    std::optional<ActivationKind> kind;
    for (Value candidate : variablesOf(y, refs)) {
      x = candidate;
      if ((kind = recognise(y, x, refs)))
        break;
    }
    if (!kind)
      continue;
    rewriter.setInsertionPointAfter(op);
    Value activation =
        ActivationOp::create(rewriter, op->getLoc(), y.getType(), *kind, x);
    rewriter.replaceAllUsesWith(y, activation);
  }
  // Users before producers, so that whole dead formulas go.
  ops.clear();
  for (Operation &op : epilogue.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      rewriter.eraseOp(op);
}
