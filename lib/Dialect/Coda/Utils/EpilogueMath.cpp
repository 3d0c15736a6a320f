//===- EpilogueMath.cpp - arith/math expansions of epilogue ops -----------===//

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::coda;

/// A constant of the float type `type` (f32, or f64 in the reference's
/// widened programs).
static Value floatConst(OpBuilder &b, Location loc, Type type, double value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

static Value i32Const(OpBuilder &b, Location loc, uint32_t value) {
  return arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr(static_cast<int32_t>(value)));
}

ActivationPrimitives ActivationPrimitives::exact() {
  return {[](OpBuilder &b, Location loc, Value t) -> Value {
            return math::Exp2Op::create(b, loc, t);
          },
          [](OpBuilder &b, Location loc, Value p, Value q) -> Value {
            return arith::DivFOp::create(b, loc, p, q);
          }};
}

namespace {
/// Scalar arithmetic on one float type, with the activations' shared pieces
/// built on the target's primitives, so that an activation and its
/// derivative are made of the same operations.
struct ActivationMath {
  OpBuilder &b;
  Location loc;
  Type type;
  const ActivationPrimitives &primitives;

  static constexpr double kLog2E = 1.4426950408889634;
  /// sqrt(2/pi) and the cubic coefficient of GELU(tanh).
  static constexpr double kGeluC = 0.7978845608028654, kGeluCubic = 0.044715;

  Value constant(double value) { return floatConst(b, loc, type, value); }
  Value mul(Value p, Value q) { return arith::MulFOp::create(b, loc, p, q); }
  Value add(Value p, Value q) { return arith::AddFOp::create(b, loc, p, q); }
  Value sub(Value p, Value q) { return arith::SubFOp::create(b, loc, p, q); }

  /// p / (1 + 2^t): p * sigmoid(-t / log2(e)). A large t makes 2^t infinite
  /// and the quotient zero; a very negative one makes it p.
  Value overOnePlusExp2(Value p, Value t) {
    Value e = primitives.exp2(b, loc, t);
    return primitives.divide(b, loc, p, add(constant(1.0), e));
  }
  /// p (1 + tanh(u)) / 2 = p sigmoid(2u), on the fast tanh: one fma after it.
  Value halfOnePlusTanh(Value p, Value u) {
    Value h = mul(constant(0.5), p);
    return add(h, mul(h, primitives.fastTanh(b, loc, u)));
  }
  /// sigmoid(z), on the fast tanh when there is one.
  Value sigmoid(Value z) {
    if (primitives.fastTanh)
      return halfOnePlusTanh(constant(1.0), mul(constant(0.5), z));
    return overOnePlusExp2(constant(1.0), mul(z, constant(-kLog2E)));
  }
  /// erf(x): math.erf, or 1 - t P(t) e^(-x^2) with t = 1 / (1 + p |x|)
  /// and the sign of x (Abramowitz and Stegun 7.1.26).
  Value erf(Value x) {
    if (!primitives.rationalErf)
      return math::ErfOp::create(b, loc, x);
    constexpr double kP = 0.3275911;
    constexpr double kCoefficients[] = {1.061405429, -1.453152027, 1.421413741,
                                        -0.284496736, 0.254829592};
    Value a = math::AbsFOp::create(b, loc, x);
    Value t = primitives.divide(b, loc, constant(1.0),
                                add(constant(1.0), mul(constant(kP), a)));
    Value poly = constant(kCoefficients[0]);
    for (double coefficient : ArrayRef(kCoefficients).drop_front())
      poly = add(constant(coefficient), mul(t, poly));
    Value gaussian = primitives.exp2(b, loc, mul(mul(a, a), constant(-kLog2E)));
    Value y = sub(constant(1.0), mul(mul(t, poly), gaussian));
    return math::CopySignOp::create(b, loc, y, x);
  }
  /// 2u of GELU(tanh): 2 sqrt(2/pi) (x + 0.044715 x^3).
  Value geluTwiceU(Value x) {
    Value poly = add(constant(2.0 * kGeluC),
                     mul(constant(2.0 * kGeluC * kGeluCubic), mul(x, x)));
    return mul(x, poly);
  }
};
} // namespace

Value mlir::coda::buildActivation(OpBuilder &b, Location loc,
                                  ActivationKind kind, Value x,
                                  const ActivationPrimitives &primitives) {
  ActivationMath m{b, loc, x.getType(), primitives};
  if (primitives.fastTanh) {
    switch (kind) {
    case ActivationKind::GeluTanh: {
      // u = sqrt(2/pi) x (1 + 0.044715 x^2)
      Value poly = m.add(
          m.constant(ActivationMath::kGeluC),
          m.mul(m.constant(ActivationMath::kGeluC * ActivationMath::kGeluCubic),
                m.mul(x, x)));
      return m.halfOnePlusTanh(x, m.mul(x, poly));
    }
    case ActivationKind::Silu:
      return m.halfOnePlusTanh(x, m.mul(m.constant(0.5), x));
    case ActivationKind::Sigmoid:
      return m.halfOnePlusTanh(m.constant(1.0), m.mul(m.constant(0.5), x));
    default:
      break;
    }
  }
  constexpr double kLog2E = ActivationMath::kLog2E;
  switch (kind) {
  case ActivationKind::GeluTanh: {
    // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed
    // as x * sigmoid(2u) = x / (1 + 2^(-2u log2(e))): one exponential and
    // one division, and no cancellation in 1 + tanh(u) for negative x.
    constexpr double kScale = -2.0 * ActivationMath::kGeluC * kLog2E;
    Value poly = m.add(
        m.constant(kScale),
        m.mul(m.constant(kScale * ActivationMath::kGeluCubic), m.mul(x, x)));
    return m.overOnePlusExp2(x, m.mul(x, poly));
  }
  case ActivationKind::GeluErf: {
    // 0.5 x (1 + erf(x / sqrt(2)))
    Value e = m.erf(m.mul(x, m.constant(0.7071067811865476)));
    return m.mul(m.mul(m.constant(0.5), x), m.add(m.constant(1.0), e));
  }
  case ActivationKind::Relu:
    return arith::MaximumFOp::create(b, loc, x, m.constant(0.0));
  case ActivationKind::Silu:
    // x * sigmoid(x) = x / (1 + 2^(-x log2(e)))
    return m.overOnePlusExp2(x, m.mul(x, m.constant(-kLog2E)));
  case ActivationKind::Sigmoid:
    return m.overOnePlusExp2(m.constant(1.0), m.mul(x, m.constant(-kLog2E)));
  }
  llvm_unreachable("unknown activation kind");
}

Value mlir::coda::buildActivationDerivative(
    OpBuilder &b, Location loc, ActivationKind kind, Value x,
    const ActivationPrimitives &primitives) {
  ActivationMath m{b, loc, x.getType(), primitives};
  switch (kind) {
  case ActivationKind::GeluTanh: {
    // d/dx x s(x), s = sigmoid(2u): s + x s (1 - s) 2u', with
    // 2u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2).
    Value s = m.sigmoid(m.geluTwiceU(x));
    Value twiceDu = m.add(m.constant(2.0 * ActivationMath::kGeluC),
                          m.mul(m.constant(6.0 * ActivationMath::kGeluC *
                                           ActivationMath::kGeluCubic),
                                m.mul(x, x)));
    Value ds = m.mul(m.mul(s, m.sub(m.constant(1.0), s)), twiceDu);
    return m.add(s, m.mul(x, ds));
  }
  case ActivationKind::GeluErf: {
    // Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt(2))) + x e^(-x^2/2) / sqrt(2
    // pi)
    Value e = m.erf(m.mul(x, m.constant(0.7071067811865476)));
    Value cdf = m.mul(m.constant(0.5), m.add(m.constant(1.0), e));
    Value density = primitives.exp2(
        b, loc, m.mul(m.mul(x, x), m.constant(-0.5 * ActivationMath::kLog2E)));
    return m.add(cdf, m.mul(x, m.mul(density, m.constant(0.3989422804014327))));
  }
  case ActivationKind::Relu: {
    // 1 where x > 0, else 0 (0 at x = 0, as PyTorch's relu backward).
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                           m.constant(0.0));
    return arith::SelectOp::create(b, loc, positive, m.constant(1.0),
                                   m.constant(0.0));
  }
  case ActivationKind::Silu: {
    // d/dx x s(x), s = sigmoid(x): s (1 + x (1 - s)).
    Value s = m.sigmoid(x);
    return m.mul(s,
                 m.add(m.constant(1.0), m.mul(x, m.sub(m.constant(1.0), s))));
  }
  case ActivationKind::Sigmoid: {
    Value s = m.sigmoid(x);
    return m.mul(s, m.sub(m.constant(1.0), s));
  }
  }
  llvm_unreachable("unknown activation kind");
}

std::array<Value, 4> mlir::coda::buildPhilox4x32(OpBuilder &b, Location loc,
                                                 std::array<Value, 4> counter,
                                                 std::array<Value, 2> key) {
  // Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11):
  // ten rounds, the key bumped by the Weyl constants between rounds.
  Value m0 = i32Const(b, loc, 0xD2511F53u), m1 = i32Const(b, loc, 0xCD9E8D57u);
  Value w0 = i32Const(b, loc, 0x9E3779B9u), w1 = i32Const(b, loc, 0xBB67AE85u);
  auto [c0, c1, c2, c3] = counter;
  auto [k0, k1] = key;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = arith::AddIOp::create(b, loc, k0, w0);
      k1 = arith::AddIOp::create(b, loc, k1, w1);
    }
    auto p0 = arith::MulUIExtendedOp::create(b, loc, m0, c0);
    auto p1 = arith::MulUIExtendedOp::create(b, loc, m1, c2);
    Value n0 = arith::XOrIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, p1.getHigh(), c1), k0);
    Value n2 = arith::XOrIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, p0.getHigh(), c3), k1);
    c0 = n0;
    c1 = p1.getLow();
    c2 = n2;
    c3 = p0.getLow();
  }
  return {c0, c1, c2, c3};
}

std::array<Value, 2> mlir::coda::buildDropoutKey(OpBuilder &b, Location loc,
                                                 Value seed) {
  Type i32 = b.getI32Type();
  Value lo = arith::TruncIOp::create(b, loc, i32, seed);
  Value shifted = arith::ShRUIOp::create(
      b, loc, seed, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32)));
  Value hi = arith::TruncIOp::create(b, loc, i32, shifted);
  return {lo, hi};
}

namespace {
/// Shift and mask helpers on i32 values.
struct I32Bits {
  OpBuilder &b;
  Location loc;
  Value shr(Value v, uint32_t s) {
    return arith::ShRUIOp::create(b, loc, v, i32Const(b, loc, s));
  }
  Value shl(Value v, uint32_t s) {
    return arith::ShLIOp::create(b, loc, v, i32Const(b, loc, s));
  }
  Value andi(Value v, uint32_t m) {
    return arith::AndIOp::create(b, loc, v, i32Const(b, loc, m));
  }
};
} // namespace

std::array<Value, 4> mlir::coda::buildDropoutWords(OpBuilder &b, Location loc,
                                                   Value seed, int32_t stream,
                                                   Value batch, Value row,
                                                   Value col) {
  I32Bits bits{b, loc};
  // group(n) = (n >> 5) * 4 + ((n >> 1) & 3)
  Value group = arith::OrIOp::create(b, loc, bits.shl(bits.shr(col, 5), 2),
                                     bits.andi(bits.shr(col, 1), 3));
  return buildPhilox4x32(b, loc, {group, row, i32Const(b, loc, stream), batch},
                         buildDropoutKey(b, loc, seed));
}

Value mlir::coda::buildDropoutSlice(OpBuilder &b, Location loc,
                                    std::array<Value, 4> words, Value col) {
  I32Bits bits{b, loc};
  // slot(n) = ((n >> 3) & 3) * 2 + (n & 1): word (n >> 3) & 3, half n & 1.
  Value wordIndex = bits.andi(bits.shr(col, 3), 3);
  auto isWord = [&](uint32_t i) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wordIndex,
                                 i32Const(b, loc, i));
  };
  Value word = arith::SelectOp::create(
      b, loc, isWord(0), words[0],
      arith::SelectOp::create(
          b, loc, isWord(1), words[1],
          arith::SelectOp::create(b, loc, isWord(2), words[2], words[3])));
  Value halfShift = bits.shl(bits.andi(col, 1), 4);
  return bits.andi(arith::ShRUIOp::create(b, loc, word, halfShift), 0xFFFF);
}

Value mlir::coda::buildDropoutBits(OpBuilder &b, Location loc, Value seed,
                                   int32_t stream, Value batch, Value row,
                                   Value col) {
  return buildDropoutSlice(
      b, loc, buildDropoutWords(b, loc, seed, stream, batch, row, col), col);
}

/// x * scale (+ `addend`, when given) where `bits` keep x, else `dropped`.
static Value selectKept(OpBuilder &b, Location loc, Value x, Value bits,
                        uint32_t threshold, Value addend, Value dropped) {
  if (threshold >= 65536)
    return dropped;
  Value scale =
      floatConst(b, loc, x.getType(), 65536.0 / (65536.0 - threshold));
  Value keep = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, bits,
                                     i32Const(b, loc, threshold));
  Value kept = arith::MulFOp::create(b, loc, x, scale);
  if (addend)
    kept = arith::AddFOp::create(b, loc, kept, addend);
  return arith::SelectOp::create(b, loc, keep, kept, dropped);
}

Value mlir::coda::buildDropoutApply(OpBuilder &b, Location loc, Value x,
                                    Value bits, uint32_t threshold) {
  return selectKept(b, loc, x, bits, threshold, Value(),
                    floatConst(b, loc, x.getType(), 0.0));
}

Value mlir::coda::buildDropoutApplyAdd(OpBuilder &b, Location loc, Value x,
                                       Value bits, uint32_t threshold,
                                       Value y) {
  return selectKept(b, loc, x, bits, threshold, y, y);
}

Value mlir::coda::buildRounding(OpBuilder &b, Location loc, Value x,
                                Type narrow) {
  // A widened f64 value goes through f32, as the f32 program's does.
  Value f32 = x.getType().isF32()
                  ? x
                  : arith::TruncFOp::create(b, loc, b.getF32Type(), x);
  Value rounded = arith::TruncFOp::create(b, loc, narrow, f32);
  return arith::ExtFOp::create(b, loc, x.getType(), rounded);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

double mlir::coda::getReductionIdentity(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Mean:
    return 0.0;
  case ReductionKind::Max:
    return -std::numeric_limits<double>::infinity();
  }
  llvm_unreachable("unknown reduction kind");
}

Value mlir::coda::buildReductionCombine(OpBuilder &b, Location loc,
                                        ReductionKind kind, Value x, Value y) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Mean:
    return arith::AddFOp::create(b, loc, x, y);
  case ReductionKind::Max:
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  llvm_unreachable("unknown reduction kind");
}

bool mlir::coda::isReductionCombine(ReductionKind kind, Operation *op) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Mean:
    return isa<arith::AddFOp>(op);
  case ReductionKind::Max:
    return isa<arith::MaximumFOp>(op);
  }
  llvm_unreachable("unknown reduction kind");
}

LLVM::AtomicBinOp mlir::coda::getReductionAtomicOp(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Mean:
    return LLVM::AtomicBinOp::fadd;
  case ReductionKind::Max:
    return LLVM::AtomicBinOp::fmax;
  }
  llvm_unreachable("unknown reduction kind");
}

bool mlir::coda::reductionDividesByCount(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Max:
    return false;
  case ReductionKind::Mean:
    return true;
  }
  llvm_unreachable("unknown reduction kind");
}

bool mlir::coda::reductionScalesUniformValue(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
    return true;
  case ReductionKind::Max:
  case ReductionKind::Mean:
    return false;
  }
  llvm_unreachable("unknown reduction kind");
}
