//===- EpilogueMath.cpp - arith/math expansions of epilogue ops -----------===//

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::coda;

static Value f32Const(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
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

Value mlir::coda::buildActivation(OpBuilder &b, Location loc,
                                  ActivationKind kind, Value x,
                                  const ActivationPrimitives &primitives) {
  Value one = f32Const(b, loc, 1.0);
  Value half = f32Const(b, loc, 0.5);
  auto mul = [&](Value p, Value q) {
    return arith::MulFOp::create(b, loc, p, q);
  };
  // p / (1 + 2^t): p * sigmoid(-t / log2(e)). A large t makes 2^t infinite
  // and the quotient zero; a very negative one makes it p.
  auto overOnePlusExp2 = [&](Value p, Value t) -> Value {
    Value e = primitives.exp2(b, loc, t);
    return primitives.divide(b, loc, p, arith::AddFOp::create(b, loc, one, e));
  };
  constexpr double kLog2E = 1.4426950408889634;
  // p (1 + tanh(u)) / 2 = p sigmoid(2u), on the fast tanh: one fma after it.
  auto halfOnePlusTanh = [&](Value p, Value u) -> Value {
    Value h = mul(half, p);
    return arith::AddFOp::create(b, loc, h,
                                 mul(h, primitives.fastTanh(b, loc, u)));
  };
  if (primitives.fastTanh) {
    switch (kind) {
    case ActivationKind::GeluTanh: {
      // u = sqrt(2/pi) x (1 + 0.044715 x^2)
      constexpr double kC = 0.7978845608028654;
      Value poly = arith::AddFOp::create(
          b, loc, f32Const(b, loc, kC),
          mul(f32Const(b, loc, kC * 0.044715), mul(x, x)));
      return halfOnePlusTanh(x, mul(x, poly));
    }
    case ActivationKind::Silu:
      return halfOnePlusTanh(x, mul(half, x));
    case ActivationKind::Sigmoid:
      return halfOnePlusTanh(one, mul(half, x));
    default:
      break;
    }
  }
  switch (kind) {
  case ActivationKind::GeluTanh: {
    // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed
    // as x * sigmoid(2u) = x / (1 + 2^(-2u log2(e))): one exponential and
    // one division, and no cancellation in 1 + tanh(u) for negative x.
    constexpr double kScale = -2.0 * 0.7978845608028654 * kLog2E;
    Value poly = arith::AddFOp::create(
        b, loc, f32Const(b, loc, kScale),
        mul(f32Const(b, loc, kScale * 0.044715), mul(x, x)));
    return overOnePlusExp2(x, mul(x, poly));
  }
  case ActivationKind::GeluErf: {
    // 0.5 x (1 + erf(x / sqrt(2)))
    Value e = math::ErfOp::create(b, loc,
                                  mul(x, f32Const(b, loc, 0.7071067811865476)));
    return mul(mul(half, x), arith::AddFOp::create(b, loc, one, e));
  }
  case ActivationKind::Relu:
    return arith::MaximumFOp::create(b, loc, x, f32Const(b, loc, 0.0));
  case ActivationKind::Silu:
    // x * sigmoid(x) = x / (1 + 2^(-x log2(e)))
    return overOnePlusExp2(x, mul(x, f32Const(b, loc, -kLog2E)));
  case ActivationKind::Sigmoid:
    return overOnePlusExp2(one, mul(x, f32Const(b, loc, -kLog2E)));
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
      b, loc, seed,
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32)));
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
  Value scale = f32Const(b, loc, 65536.0 / (65536.0 - threshold));
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
                    f32Const(b, loc, 0.0));
}

Value mlir::coda::buildDropoutApplyAdd(OpBuilder &b, Location loc, Value x,
                                       Value bits, uint32_t threshold,
                                       Value y) {
  return selectKept(b, loc, x, bits, threshold, y, y);
}
