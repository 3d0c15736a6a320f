//===- ElementwisePatterns.cpp - elementwise math in the epilogue ---------===//
//
// coda.activation and coda.activation_derivative through EpilogueMath's
// formulas (those of the CPU reference) on the GPU's primitives; every other
// scalar arith and math op of the region cloned at the slot on the slot's
// operands; erf, in GELU(erf), as EpilogueMath's rational approximation on
// ex2.approx and div.approx. Math ops without an NVVM instruction (tanh,
// exp) reach libdevice through convert-gpu-to-nvvm, but sine and cosine:
// libdevice's keep a local-memory table for huge arguments, so they are the
// hardware's sin.approx / cos.approx after a reduction by 2 pi in two parts
// (absolute error below 1e-6 for |x| < 2^17, a rotary embedding's angles).
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::coda;

/// The activations' exp2 and division as single approximate instructions
/// (ex2.approx.ftz, div.approx.ftz: within 2 ulp, a denormal input or result
/// flushed to zero) instead of libdevice's and the IEEE division's sequences;
/// with `fast`, GELU(tanh), SiLU and sigmoid on tanh.approx.f32 (relative
/// error up to 2^-11, as cuBLASLt's fused GELU) instead.
static ActivationPrimitives buildGpuActivationPrimitives(bool fast) {
  ActivationPrimitives primitives{
      [](OpBuilder &b, Location loc, Value t) -> Value {
        return LLVM::CallIntrinsicOp::create(
                   b, loc, t.getType(),
                   b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"), t)
            .getResult(0);
      },
      [](OpBuilder &b, Location loc, Value p, Value q) -> Value {
        return LLVM::CallIntrinsicOp::create(
                   b, loc, p.getType(),
                   b.getStringAttr("llvm.nvvm.div.approx.ftz.f"),
                   ValueRange{p, q})
            .getResult(0);
      }};
  primitives.rationalErf = true;
  if (fast)
    primitives.fastTanh = [](OpBuilder &b, Location loc, Value t) -> Value {
      return LLVM::InlineAsmOp::create(
                 b, loc, t.getType(), ValueRange{t}, "tanh.approx.f32 $0, $1;",
                 "=f,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
                 LLVM::TailCallKind::None, /*asm_dialect=*/nullptr,
                 /*operand_attrs=*/nullptr)
          .getResult(0);
    };
  return primitives;
}

/// The GPU's activation primitives (buildGpuActivationPrimitives), built once.
static const ActivationPrimitives &getGpuActivationPrimitives(bool fast) {
  static const ActivationPrimitives exact = buildGpuActivationPrimitives(false);
  static const ActivationPrimitives fastTanh =
      buildGpuActivationPrimitives(true);
  return fast ? fastTanh : exact;
}

namespace {

/// The op's operands at the slot.
SmallVector<Value> getOperandsAt(Operation *op, int64_t h, int64_t c,
                                 EpilogueBuilder &builder) {
  return llvm::map_to_vector(op->getOperands(), [&](Value operand) {
    return builder.at(operand, h, c);
  });
}

struct ActivationPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    if (!isa<ActivationOp, ActivationDerivativeOp>(op))
      return failure();
    KernelBuilder &b = builder.getBuilder();
    Value input = getOperandsAt(op, h, c, builder)[0];
    const ActivationPrimitives &primitives =
        getGpuActivationPrimitives(builder.getPlan().getFastActivations());
    Value result =
        isa<ActivationOp>(op)
            ? buildActivation(b, b.getLoc(), cast<ActivationOp>(op).getKind(),
                              input, primitives)
            : buildActivationDerivative(
                  b, b.getLoc(), cast<ActivationDerivativeOp>(op).getKind(),
                  input, primitives);
    builder.define(op->getResult(0), h, c, result);
    return success();
  }
};

/// sin and cos: x - 2 pi k (k = rint(x / 2 pi)) in two fmas with 2 pi split
/// into a head of few bits (exact in k * head for |k| < 2^16) and a tail,
/// then the approximate instruction (absolute error 2^-20.5 on [-pi, pi]).
struct TrigonometryPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    if (!isa<math::SinOp, math::CosOp>(op))
      return failure();
    KernelBuilder &b = builder.getBuilder();
    Value x = builder.at(op->getOperand(0), h, c);
    constexpr double kTwoPiHead = 6.28125;
    constexpr double kTwoPiTail = 6.283185307179586 - kTwoPiHead;
    Value k = math::RoundEvenOp::create(
        b, arith::MulFOp::create(b, x, b.f32(1.0 / 6.283185307179586)));
    Value negK = arith::NegFOp::create(b, k);
    Value r = math::FmaOp::create(b, negK, b.f32(kTwoPiHead), x);
    r = math::FmaOp::create(b, negK, b.f32(kTwoPiTail), r);
    StringRef intrinsic = isa<math::SinOp>(op) ? "llvm.nvvm.sin.approx.ftz.f"
                                               : "llvm.nvvm.cos.approx.ftz.f";
    builder.define(op->getResult(0), h, c,
                   LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                                 b.getStringAttr(intrinsic), r)
                       .getResult(0));
    return success();
  }
};

/// Products with the absent columns of an accumulator [m, n/2]
/// (EpilogueBuilder::getAbsentZero): a product or quotient of it is absent,
/// a sum or difference with it the other term, its negation, rounding or
/// detached value itself. The derived backward of a pair epilogue (SwiGLU's)
/// multiplies each activation's gradient by the accumulator of its column,
/// absent at a pair's second one; folded here, those columns compute none
/// of them (IEEE arithmetic keeps 0 x inf, so nothing later folds it). A
/// factor built first is not built at all when it is absent.
struct AbsentColumnPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    Value absent = builder.getAbsentZero();
    if (!absent || !isa<arith::MulFOp, arith::DivFOp, arith::AddFOp,
                        arith::SubFOp, arith::NegFOp, RoundOp, DetachOp>(op))
      return failure();
    Value first = builder.at(op->getOperand(0), h, c);
    Value result;
    if (first == absent && !isa<arith::AddFOp, arith::SubFOp>(op)) {
      result = absent;
    } else if (op->getNumOperands() == 2) {
      Value second = builder.at(op->getOperand(1), h, c);
      if (second == absent &&
          isa<arith::MulFOp, arith::AddFOp, arith::SubFOp>(op))
        result = isa<arith::MulFOp>(op) ? absent : first;
      else if (first == absent && isa<arith::AddFOp>(op))
        result = second;
      else if (first == absent && isa<arith::SubFOp>(op))
        result = arith::NegFOp::create(builder.getBuilder(), second);
    }
    if (!result)
      return failure();
    builder.define(op->getResult(0), h, c, result);
    return success();
  }
};

/// Any scalar arith or math op: cloned at the slot.
struct ScalarMathPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
      return failure();
    IRMapping mapping;
    mapping.map(op->getOperands(), getOperandsAt(op, h, c, builder));
    Operation *clone = builder.getBuilder().clone(*op, mapping);
    for (auto [result, value] :
         llvm::zip(op->getResults(), clone->getResults()))
      builder.define(result, h, c, value);
    return success();
  }
};

/// coda.detach: the value itself (it only stops the backward's derivation).
struct DetachPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto detach = dyn_cast<DetachOp>(op);
    if (!detach)
      return failure();
    builder.define(detach.getResult(), h, c,
                   builder.at(detach.getInput(), h, c));
    return success();
  }
};

/// coda.round: the value rounded to its 16-bit type and back.
struct RoundPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto round = dyn_cast<RoundOp>(op);
    if (!round)
      return failure();
    OpBuilder &b = builder.getBuilder();
    builder.define(round.getResult(), h, c,
                   buildRounding(b, round.getLoc(),
                                 builder.at(round.getInput(), h, c),
                                 round.getTo()));
    return success();
  }
};

} // namespace

void mlir::coda::populateElementwisePatterns(EpiloguePatterns &patterns) {
  patterns.push_back(std::make_unique<AbsentColumnPattern>());
  patterns.push_back(std::make_unique<ActivationPattern>());
  patterns.push_back(std::make_unique<TrigonometryPattern>());
  patterns.push_back(std::make_unique<ScalarMathPattern>());
  patterns.push_back(std::make_unique<DetachPattern>());
  patterns.push_back(std::make_unique<RoundPattern>());
}
