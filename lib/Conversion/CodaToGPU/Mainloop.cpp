//===- Mainloop.cpp - TMA loads and wgmma of the GEMM kernel --------------===//
//
// The K loop of the kernel: A and B tiles stream through `stages`
// shared-memory slots by TMA (thread 0 issues the copies, the slot's "full"
// mbarrier counts their bytes), and each warpgroup multiplies its 64 rows with
// asynchronous wgmma instructions that read both operands through 128-byte
// swizzled shared-memory matrix descriptors. One wgmma group stays in flight;
// once the previous group retires its slot is released ("empty" mbarrier) and
// refilled with the K step `stages` ahead.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The suspend-time hint of an mbarrier wait, in nanoseconds.
constexpr int64_t kWaitTicks = 10000000;

/// Builds the pieces of the main loop of one kernel.
class MainloopBuilder {
public:
  MainloopBuilder(KernelBuilder &b, const KernelPlan &plan,
                  const KernelValues &values)
      : b(b), plan(plan), values(values), stages(plan.tile.stages) {}

  Value build();

private:
  /// The full (TMA landed) and empty (slot read) mbarriers of `slot`.
  Value fullBarrier(Value slot) { return barrier(slot, 0); }
  Value emptyBarrier(Value slot) { return barrier(slot, stages); }
  Value barrier(Value slot, int64_t first) {
    return b.byteGep(values.sharedMemory,
                     b.add(b.i32(plan.getBarrierOffset() + 8 * first),
                           b.mul(slot, b.i32(8))));
  }
  /// The shared-memory offset of A's and B's tiles in `slot`.
  Value tileOffsetA(Value slot) {
    return b.mul(slot, b.i32(plan.a.getStageBytes()));
  }
  Value tileOffsetB(Value slot) {
    return b.add(b.i32(stages * plan.a.getStageBytes()),
                 b.mul(slot, b.i32(plan.b.getStageBytes())));
  }

  /// Thread 0: arms the full barrier of `slot` and loads K step `kStep` of A
  /// and B into it.
  void issueLoads(Value slot, Value kStep);
  void loadOperand(const OperandPlan &operand, Value tensorMap,
                   Value tileOffset, Value outerBase, Value kBase,
                   Value barrier);

  /// The wgmma descriptor of the operand tile at byte `offset` (i32) of
  /// shared memory.
  Value descriptor(const OperandPlan &operand, Value offset);

  /// Waits for K step `kStep`, issues its wgmmas on `acc` and waits for the
  /// previous step's to retire; then (but for the first step) releases and
  /// refills the previous step's slot. The first step ignores `acc` (its
  /// first wgmma does not accumulate), so that no register is written
  /// between the wgmma fence and the wgmmas.
  Value mmaStep(Value kStep, Value acc, bool first);

  KernelBuilder &b;
  const KernelPlan &plan;
  const KernelValues &values;
  int64_t stages;
  Value isLeader;
  Value kSteps;
  LLVM::LLVMStructType accType;
};

} // namespace

void MainloopBuilder::loadOperand(const OperandPlan &operand, Value tensorMap,
                                  Value tileOffset, Value outerBase,
                                  Value kBase, Value barrier) {
  auto clusterPtr = LLVM::LLVMPointerType::get(b.getContext(), 7);
  for (int64_t box = 0, e = operand.getNumBoxes(); box < e; ++box) {
    // A K-major tile is one [extent x tileK] box at (k, row); an MN-major
    // one is extent / 64 boxes of [tileK x 64] at (row + 64 box, k).
    SmallVector<Value> coords =
        operand.kMajor
            ? SmallVector<Value>{kBase, outerBase}
            : SmallVector<Value>{
                  b.add(outerBase, b.i32(box * operand.getSwizzleElems())),
                  kBase};
    if (operand.batched)
      coords.push_back(values.blockZ);
    Value dst =
        b.byteGep(values.sharedMemory,
                  b.add(tileOffset, b.i32(box * operand.getBoxBytes())));
    // The shared::cluster form with the block's own address: the shared::cta
    // destination needs PTX 8.6.
    dst = LLVM::AddrSpaceCastOp::create(b, clusterPtr, dst);
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        b, dst, tensorMap, coords, barrier, /*im2colOffsets=*/ValueRange(),
        /*multicastMask=*/Value(), /*l2CacheHint=*/Value(),
        NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, /*group=*/nullptr,
        /*predicate=*/Value());
  }
}

void MainloopBuilder::issueLoads(Value slot, Value kStep) {
  Value full = fullBarrier(slot);
  NVVM::MBarrierArriveExpectTxOp::create(
      b, /*res=*/Type(), full, b.i32(plan.getStageBytes()),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, /*predicate=*/Value());
  Value kBase = b.mul(kStep, b.i32(plan.tileK));
  loadOperand(plan.a, values.tensorMapA, tileOffsetA(slot), values.rowBase,
              kBase, full);
  loadOperand(plan.b, values.tensorMapB, tileOffsetB(slot), values.colBase,
              kBase, full);
}

Value MainloopBuilder::descriptor(const OperandPlan &operand, Value offset) {
  // sm_90 matrix descriptor: start address >> 4 in bits 0-13, leading byte
  // offset >> 4 in bits 16-29, stride byte offset >> 4 in bits 32-45, layout
  // (1 = 128-byte swizzle) in bits 62-63. The stride byte offset steps over
  // 8 rows of 128 bytes; the leading byte offset steps from one 64-element
  // column block of an MN-major tile to the next (unused when K-major).
  int64_t leading = operand.kMajor ? 16 : operand.getBoxBytes();
  int64_t fixed = ((leading >> 4) << 16) | ((int64_t{1024} >> 4) << 32) |
                  (int64_t{1} << 62);
  Value base = LLVM::PtrToIntOp::create(b, b.getI64Type(), values.sharedMemory);
  Value address = b.add(base, b.wide(offset));
  Value start = b.andi(b.shru(address, b.i64(4)), b.i64(0x3FFF));
  return b.ori(start, b.i64(fixed));
}

Value MainloopBuilder::mmaStep(Value kStep, Value acc, bool first) {
  const OperandPlan &a = plan.a, &bp = plan.b;
  Value slot = b.remu(kStep, b.i32(stages));
  Value phase = b.andi(b.divu(kStep, b.i32(stages)), b.i32(1));
  NVVM::MBarrierTryWaitParityOp::create(b, fullBarrier(slot), phase,
                                        b.i32(kWaitTicks));

  // Warpgroup w reads A's rows [64w, 64w + 64): 64 rows of 128 bytes when
  // K-major, box w when MN-major. One wgmma advances along K by 32 bytes
  // within the swizzled rows (K-major) or by mmaK rows of 128 bytes.
  Value rowsOffsetA =
      b.mul(values.warpgroup, b.i32(a.kMajor ? 64 * 128 : a.getBoxBytes()));
  Value descA = descriptor(a, b.add(tileOffsetA(slot), rowsOffsetA));
  Value descB = descriptor(bp, tileOffsetB(slot));
  auto kStepBytes = [&](const OperandPlan &operand) {
    return operand.kMajor ? plan.mmaK * operand.elementBytes : plan.mmaK * 128;
  };
  auto layoutA = a.kMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col;
  auto layoutB = bp.kMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row;
  auto shape =
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tile.tileN, plan.mmaK);
  NVVM::WGMMATypes mmaType = plan.getMmaType();

  NVVM::WgmmaFenceAlignedOp::create(b);
  for (int64_t kk = 0; kk < plan.tileK / plan.mmaK; ++kk) {
    Value stepA = b.i64(kk * kStepBytes(a) >> 4);
    Value stepB = b.i64(kk * kStepBytes(bp) >> 4);
    auto scaleD =
        first && kk == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one;
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, accType, acc, b.add(descA, stepA), b.add(descB, stepB), shape,
        mmaType, mmaType, NVVM::WGMMATypes::f32, scaleD,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, layoutA, layoutB,
        /*satfinite=*/nullptr);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
  if (first)
    return acc;

  // The previous K step's wgmmas have retired: release its slot and refill
  // it with the step `stages` ahead of it.
  Value previous = b.sub(kStep, b.i32(1));
  Value previousSlot = b.remu(previous, b.i32(stages));
  Value emptyBar = emptyBarrier(previousSlot);
  NVVM::MBarrierArriveOp::create(b, /*res=*/Type(), emptyBar,
                                 /*count=*/Value());
  Value next = b.add(previous, b.i32(stages));
  b.ifThen(b.andi(isLeader, b.ult(next, kSteps)), [&] {
    Value emptyPhase = b.andi(b.divu(previous, b.i32(stages)), b.i32(1));
    NVVM::MBarrierTryWaitParityOp::create(b, emptyBar, emptyPhase,
                                          b.i32(kWaitTicks));
    issueLoads(previousSlot, next);
  });
  return acc;
}

Value MainloopBuilder::build() {
  isLeader = b.eq(values.threadId, b.i32(0));

  b.ifThen(isLeader, [&] {
    for (int64_t s = 0; s < stages; ++s) {
      NVVM::MBarrierInitOp::create(b, fullBarrier(b.i32(s)), b.i32(1),
                                   /*predicate=*/Value());
      NVVM::MBarrierInitOp::create(b, emptyBarrier(b.i32(s)),
                                   b.i32(KernelPlan::kThreads),
                                   /*predicate=*/Value());
    }
    NVVM::FenceMbarrierInitOp::create(b);
  });
  gpu::BarrierOp::create(b);

  kSteps = b.divu(b.add(values.k, b.i32(plan.tileK - 1)), b.i32(plan.tileK));
  // Prologue: fill every slot.
  b.ifThen(isLeader, [&] {
    for (int64_t s = 0; s < stages; ++s)
      b.ifThen(b.ult(b.i32(s), kSteps),
               [&] { issueLoads(b.i32(s), b.i32(s)); });
  });

  accType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(plan.tile.tileN / 2, b.getF32Type()));
  // The first K step starts the accumulator (K = 0 leaves it zero), the loop
  // runs the others.
  Value first = b.ifThenElse(
      b.ult(b.i32(0), kSteps), accType,
      [&] {
        return mmaStep(b.i32(0), LLVM::UndefOp::create(b, accType), true);
      },
      [&] { return LLVM::ZeroOp::create(b, accType); });
  auto loop =
      scf::ForOp::create(b, b.i32(1), kSteps, b.i32(1), ValueRange{first});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(b, mmaStep(loop.getInductionVar(),
                                    loop.getRegionIterArg(0),
                                    /*first=*/false));
  }
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  return loop.getResult(0);
}

Value mlir::coda::buildMainloop(OpBuilder &builder, Location loc,
                                const KernelPlan &plan,
                                const KernelValues &values) {
  KernelBuilder b(loc, builder);
  return MainloopBuilder(b, plan, values).build();
}
