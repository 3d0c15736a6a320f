//===- Mainloop.cpp - the persistent, warp-specialized GEMM kernel --------===//
//
// The body of the kernel: the producer warpgroup streams A and B tiles through
// `stages` shared-memory slots by TMA (its thread 0 issues the copies, the
// slot's "full" mbarrier counts their bytes, its "empty" mbarrier says when
// the consumers are done with it), and the consumer warpgroups multiply them
// with asynchronous wgmma instructions that read both operands through
// 128-byte swizzled shared-memory matrix descriptors, keeping one wgmma group
// in flight, then run the epilogue of the tile. Blocks walk the output tiles
// persistently in a grouped order; the producer runs ahead into the next tile
// while the consumers run the epilogue. In clusters of two blocks along M, the
// blocks walk pairs of vertically adjacent tiles and each multicasts half of
// their common B tile into both; in clusters along N, the blocks walk row
// blocks, each computing one column block of it, and their epilogues
// exchange row reductions (KernelPlan.h).
//
// A slot's state is (slot, phase): the K steps of the whole block go through
// the slots in order, and each pass over the ring flips the phase. Consumers
// wait on the full barrier for `phase`; the producer waits on the empty
// barrier for the other parity, which a fresh barrier reports as complete.
// A parity wait is only right when the barrier's previous phase has
// completed, so the waits on each barrier must come in ring order: the
// producer and cooperative consumers wait on every K step in turn; ping-pong
// consumers skip each other's tiles, so they take turns (named barriers 1 and
// 2): consumer c starts the main loop of a tile once the other has issued the
// previous tile's, which also keeps their wgmmas from interleaving.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// How many K steps before the end of a tile's main loop its epilogue inputs
/// are prefetched into L2: late enough that they do not displace A and B
/// tiles in L2 for a whole main loop, early enough to arrive in time
/// (docs/performance.md: 3 was faster than 8 and than the loop's start).
constexpr int64_t kPrefetchLeadSteps = 3;

/// One output tile: its index in the tile order and its coordinates.
struct TileCoords {
  Value index, batch, rowBlock, colBlock;
};

/// A position in the ring of slots: the slot and the parity of the pass.
struct RingState {
  Value slot, phase;
};

/// Builds the body of one kernel.
class KernelBodyBuilder {
public:
  KernelBodyBuilder(KernelBuilder &b, const KernelPlan &plan,
                    const KernelValues &values)
      : b(b), plan(plan), values(values), stages(plan.tile.stages) {}

  void build();

private:
  /// The full (TMA landed) and empty (slot read) mbarriers of `slot`.
  Value fullBarrier(Value slot) { return barrier(slot, 0); }
  Value emptyBarrier(Value slot) { return barrier(slot, stages); }
  /// The full (loaded) and empty (read) mbarriers of bias buffer `buffer`.
  Value biasFull(Value buffer) { return barrier(buffer, 2 * stages); }
  Value biasEmpty(Value buffer) { return barrier(buffer, 2 * stages + 2); }
  /// Bias buffer `buffer` in shared memory.
  Value biasBuffer(Value buffer) {
    return b.byteGep(values.sharedMemory,
                     b.add(b.i32(plan.getBiasOffset()),
                           b.mul(buffer, b.i32(plan.tile.tileN * 4))));
  }
  /// The bias buffer of the block's tile of `unit` (its tiles alternate
  /// between the two) and the parity of that buffer's use.
  std::pair<Value, Value> biasTurn(Value unit) {
    Value ordinal = b.divu(b.sub(unit, clusterId), clusterCount);
    return {b.andi(ordinal, b.i32(1)),
            b.andi(b.divu(ordinal, b.i32(2)), b.i32(1))};
  }
  /// Warp 1 of the producer warpgroup: every tile's bias into a buffer, as
  /// soon as the consumers have read the buffer's previous one.
  void buildBiasLoader();
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

  /// `state` advanced by `steps` K steps.
  RingState advance(RingState state, Value steps) {
    Value total = b.add(state.slot, steps);
    Value passes = b.divu(total, b.i32(stages));
    return {b.remu(total, b.i32(stages)),
            b.xori(state.phase, b.andi(passes, b.i32(1)))};
  }

  /// The block's tile of unit `unit` of the grouped order.
  TileCoords decodeTile(Value unit);
  /// Builds `for (unit = first; unit < numUnits; unit += step)` carrying the
  /// ring state (starting at `state`, advanced by `stateStep` K steps per
  /// tile); `body` builds one iteration.
  void buildTileLoop(Value first, Value step, RingState state, Value stateStep,
                     function_ref<void(const TileCoords &, RingState)> body);

  /// A barrier of the whole cluster (of the block when it is alone).
  void syncCluster();

  /// The producer: every K step of every tile of the block.
  void buildProducer();
  void loadOperand(const OperandPlan &operand, Value tensorMap,
                   Value tileOffset, Value outerBase, Value kBase, Value batch,
                   Value barrier);

  /// Consumer `consumer` (i32, 0 or 1): its tiles, main loop and epilogue.
  void buildConsumer(Value consumer);
  /// The wgmma descriptor of the operand tile at byte `offset` (i32) of
  /// shared memory.
  Value descriptor(const OperandPlan &operand, Value offset);
  /// Waits for the slot of `state`, issues its wgmmas on `acc` (A rows from
  /// byte `rowsOffsetA` of the slot's A tile) and waits for the previous
  /// step's to retire; then (but for the first step) releases the previous
  /// step's slot. The first step ignores `acc` (its first wgmma does not
  /// accumulate), so that no register is written between the wgmma fence and
  /// the wgmmas.
  SmallVector<Value> mmaStep(RingState state, Value rowsOffsetA, ValueRange acc,
                             bool first);
  /// Releases the slot of `state`, advanced by -1: each consumer thread
  /// arrives once on the slot's empty barrier in one block of the cluster.
  void releasePrevious(RingState base, Value kStep);

  KernelBuilder &b;
  const KernelPlan &plan;
  const KernelValues &values;
  int64_t stages;
  Value kSteps, tilesM, tilesN;
  /// The blocks walk the tiles by units: a unit is the clusterM vertically
  /// adjacent tiles (or the clusterN horizontally adjacent tiles) of one
  /// cluster, the block of rank `clusterRank` in the cluster taking the
  /// unit's tile of that rank. The cluster's units are clusterId, then every
  /// clusterCount-th, of numUnits; unitCols are the units of a row of them.
  Value unitsPerBatch, numUnits, unitCols, clusterId, clusterCount, clusterRank;
  LLVM::LLVMStructType accType;
};

} // namespace

TileCoords KernelBodyBuilder::decodeTile(Value unit) {
  // Units run batch by batch; within a batch, groups of rows of units
  // (groupRows row blocks), column by column, row by row within a column.
  int64_t clusterM = plan.tile.clusterM;
  int64_t rowsPerGroup = plan.tile.groupRows / clusterM;
  Value batch = b.divu(unit, unitsPerBatch);
  Value inBatch = b.remu(unit, unitsPerBatch);
  Value unitRows = b.divu(unitsPerBatch, unitCols);
  Value groupSize = b.mul(b.i32(rowsPerGroup), unitCols);
  Value group = b.divu(inBatch, groupSize);
  Value firstRow = b.mul(group, b.i32(rowsPerGroup));
  Value groupRows =
      arith::MinUIOp::create(b, b.sub(unitRows, firstRow), b.i32(rowsPerGroup));
  Value inGroup = b.remu(inBatch, groupSize);
  Value unitRow = b.add(firstRow, b.remu(inGroup, groupRows));
  Value rowBlock = clusterM == 1
                       ? unitRow
                       : b.add(b.mul(unitRow, b.i32(clusterM)), clusterRank);
  Value unitCol = b.divu(inGroup, groupRows);
  Value colBlock = plan.tile.clusterN == 1 ? unitCol : clusterRank;
  return {unit, batch, rowBlock, colBlock};
}

void KernelBodyBuilder::buildTileLoop(
    Value first, Value step, RingState state, Value stateStep,
    function_ref<void(const TileCoords &, RingState)> body) {
  auto loop = scf::ForOp::create(b, first, numUnits, step,
                                 ValueRange{state.slot, state.phase});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  RingState current{loop.getRegionIterArg(0), loop.getRegionIterArg(1)};
  body(decodeTile(loop.getInductionVar()), current);
  RingState next = advance(current, stateStep);
  scf::YieldOp::create(b, ValueRange{next.slot, next.phase});
}

void KernelBodyBuilder::loadOperand(const OperandPlan &operand, Value tensorMap,
                                    Value tileOffset, Value outerBase,
                                    Value kBase, Value batch, Value barrier) {
  auto clusterPtr = LLVM::LLVMPointerType::get(b.getContext(), 7);
  // A shared operand's boxes are multicast to every block of the cluster,
  // box i loaded by the block of rank i % multicast.
  Value mask;
  if (operand.multicast > 1)
    mask = b.i16((1 << operand.multicast) - 1);
  for (int64_t box = 0, e = operand.getNumBoxes(); box < e; ++box) {
    // A K-major tile is `multicast` [extent / multicast x tileK] boxes at
    // (k, row + box extent); an MN-major one is extent / 64 boxes of
    // [tileK x 64] at (row + 64 box, k).
    // Halves: rows [outer, outer + extent) of op(B) are pairs
    // [outer / 2, ...) of the two halves (coordinates k, half, pair).
    Value outer = b.add(outerBase, b.i32(box * operand.getBoxExtent()));
    SmallVector<Value> coords =
        operand.halves
            ? SmallVector<Value>{kBase, b.i32(0), b.shru(outer, b.i32(1))}
        : operand.kMajor ? SmallVector<Value>{kBase, outer}
                         : SmallVector<Value>{outer, kBase};
    if (operand.batched)
      coords.push_back(batch);
    auto load = [&] {
      Value dst =
          b.byteGep(values.sharedMemory,
                    b.add(tileOffset, b.i32(box * operand.getBoxBytes())));
      // The shared::cluster form with the block's own address: the
      // shared::cta destination needs PTX 8.6.
      dst = LLVM::AddrSpaceCastOp::create(b, clusterPtr, dst);
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          b, dst, tensorMap, coords, barrier, /*im2colOffsets=*/ValueRange(),
          mask, /*l2CacheHint=*/Value(), NVVM::TMALoadMode::TILE,
          /*isCTAOnly=*/false, /*group=*/nullptr, /*predicate=*/Value());
    };
    if (operand.multicast > 1)
      b.ifThen(b.eq(clusterRank, b.i32(box % operand.multicast)), load);
    else
      load();
  }
}

void KernelBodyBuilder::buildBiasLoader() {
  RingState start{b.i32(0), b.i32(0)};
  buildTileLoop(
      clusterId, clusterCount, start, b.i32(0),
      [&](const TileCoords &tile, RingState) {
        auto [buffer, parity] = biasTurn(tile.index);
        // A fresh barrier has completed the phase before its first.
        NVVM::MBarrierTryWaitParityOp::create(
            b, biasEmpty(buffer), b.xori(parity, b.i32(1)), b.i32(kWaitTicks));
        KernelValues tileValues = values;
        tileValues.batch = tile.batch;
        tileValues.colBase = b.mul(tile.colBlock, b.i32(plan.tile.tileN));
        buildBiasTileLoad(b, b.getLoc(), plan, tileValues, biasBuffer(buffer));
        // Each lane's arrival releases its stores.
        NVVM::MBarrierArriveOp::create(b, /*res=*/Type(), biasFull(buffer),
                                       /*count=*/Value());
      });
}

void KernelBodyBuilder::buildProducer() {
  RingState start{b.i32(0), b.i32(0)};
  buildTileLoop(
      clusterId, clusterCount, start, kSteps,
      [&](const TileCoords &tile, RingState base) {
        Value rowBase = b.mul(tile.rowBlock, b.i32(plan.tile.tileM));
        Value colBase = b.mul(tile.colBlock, b.i32(plan.tile.tileN));
        auto loop = scf::ForOp::create(b, b.i32(0), kSteps, b.i32(1));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value kStep = loop.getInductionVar();
        RingState state = advance(base, kStep);
        // Wait until the consumers released the slot's previous contents (a
        // fresh barrier has completed the phase before its first).
        NVVM::MBarrierTryWaitParityOp::create(b, emptyBarrier(state.slot),
                                              b.xori(state.phase, b.i32(1)),
                                              b.i32(kWaitTicks));
        Value full = fullBarrier(state.slot);
        NVVM::MBarrierArriveExpectTxOp::create(
            b, /*res=*/Type(), full, b.i32(plan.getStageBytes()),
            NVVM::MemScopeKind::CTA, /*relaxed=*/false, /*predicate=*/Value());
        Value kBase = b.mul(kStep, b.i32(plan.tileK));
        loadOperand(plan.a, values.tensorMapA, tileOffsetA(state.slot), rowBase,
                    kBase, tile.batch, full);
        loadOperand(plan.b, values.tensorMapB, tileOffsetB(state.slot), colBase,
                    kBase, tile.batch, full);
      });
}

Value KernelBodyBuilder::descriptor(const OperandPlan &operand, Value offset) {
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

void KernelBodyBuilder::releasePrevious(RingState base, Value kStep) {
  RingState previous = advance(base, b.sub(kStep, b.i32(1)));
  Value barrier = emptyBarrier(previous.slot);
  if (plan.tile.clusterM == 1) {
    NVVM::MBarrierArriveOp::create(b, /*res=*/Type(), barrier,
                                   /*count=*/Value());
    return;
  }
  // Lane l arrives in the cluster's block l % clusterM: each warp's wgmmas
  // have retired (the wait is warp-wide), and each block hears from every
  // warp of every block.
  auto clusterPtr = LLVM::LLVMPointerType::get(b.getContext(), 7);
  Value remote = NVVM::MapaOp::create(
      b, clusterPtr, barrier, b.remu(values.lane, b.i32(plan.tile.clusterM)));
  NVVM::MBarrierArriveOp::create(b, /*res=*/Type(), remote, /*count=*/Value());
}

SmallVector<Value> KernelBodyBuilder::mmaStep(RingState state,
                                              Value rowsOffsetA, ValueRange acc,
                                              bool first) {
  const OperandPlan &a = plan.a, &bp = plan.b;
  NVVM::MBarrierTryWaitParityOp::create(b, fullBarrier(state.slot), state.phase,
                                        b.i32(kWaitTicks));

  // One wgmma advances along K by 32 bytes within the swizzled rows (K-major)
  // or by mmaK rows of 128 bytes; fragment i reads A's rows 64i further.
  Value descA = descriptor(a, b.add(tileOffsetA(state.slot), rowsOffsetA));
  Value descB = descriptor(bp, tileOffsetB(state.slot));
  auto kStepBytes = [&](const OperandPlan &operand) {
    return operand.kMajor ? plan.mmaK * operand.elementBytes : plan.mmaK * 128;
  };
  auto layoutA = a.kMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col;
  auto layoutB = bp.kMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row;
  auto shape =
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tile.tileN, plan.mmaK);
  NVVM::WGMMATypes mmaType = plan.getMmaType();

  SmallVector<Value> result(acc.begin(), acc.end());
  NVVM::WgmmaFenceAlignedOp::create(b);
  for (int64_t kk = 0; kk < plan.tileK / plan.mmaK; ++kk) {
    Value stepB = b.i64(kk * kStepBytes(bp) >> 4);
    for (int64_t i = 0; i < plan.getFragments(); ++i) {
      Value stepA = b.i64((kk * kStepBytes(a) + i * a.getRowBlockBytes()) >> 4);
      auto scaleD = first && kk == 0 ? NVVM::WGMMAScaleOut::zero
                                     : NVVM::WGMMAScaleOut::one;
      result[i] = NVVM::WgmmaMmaAsyncOp::create(
          b, accType, result[i], b.add(descA, stepA), b.add(descB, stepB),
          shape, mmaType, mmaType, NVVM::WGMMATypes::f32, scaleD,
          NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, layoutA, layoutB,
          /*satfinite=*/nullptr);
    }
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
  return result;
}

void KernelBodyBuilder::buildConsumer(Value consumer) {
  bool pingpong = plan.isPingpong();
  // Ping-pong turns: consumer c waits on named barrier 1 + c, which the
  // other consumer arrives on; both warpgroups count.
  Value ownTurn = b.add(consumer, b.i32(1));
  Value otherTurn = b.sub(b.i32(2), consumer);
  Value turnThreads = b.i32(2 * 128);
  // Ping-pong: consumer c takes tiles c, c + 2, ... of the block, and skips
  // the other's K steps in the ring. Cooperative: both take every tile.
  int64_t stride = pingpong ? KernelPlan::kConsumers : 1;
  RingState start{b.i32(0), b.i32(0)};
  Value first = clusterId;
  if (pingpong) {
    start = advance(start, b.mul(consumer, kSteps));
    first = b.add(clusterId, b.mul(consumer, clusterCount));
  }
  // A's rows of this consumer within the stage's A tile.
  Value rowsOffsetA =
      pingpong ? b.i32(0)
               : b.mul(consumer,
                       b.i32(plan.getFragments() * plan.a.getRowBlockBytes()));
  Value consumerRow =
      pingpong ? b.i32(0) : b.mul(consumer, b.i32(plan.consumerRows));
  accType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(plan.tile.tileN / 2, b.getF32Type()));
  SmallVector<Type> accTypes(plan.getFragments(), accType);

  buildTileLoop(
      first, b.mul(clusterCount, b.i32(stride)), start,
      b.mul(kSteps, b.i32(stride)),
      [&](const TileCoords &tile, RingState base) {
        // Every tile of the block but the first follows the other consumer's.
        if (pingpong)
          b.ifThen(
              b.ori(b.eq(consumer, b.i32(1)),
                    b.cmp(arith::CmpIPredicate::ne, tile.index, clusterId)),
              [&] {
                NVVM::BarrierOp::create(b, Type(), ownTurn, turnThreads,
                                        nullptr, Value());
              });
        KernelValues tileValues = values;
        tileValues.batch = tile.batch;
        tileValues.rowBase =
            b.add(b.mul(tile.rowBlock, b.i32(plan.tile.tileM)), consumerRow);
        tileValues.colBase = b.mul(tile.colBlock, b.i32(plan.tile.tileN));
        // The first K step starts the accumulators (K = 0 leaves them zero),
        // the loop runs the others.
        // With a bias in the accumulators, they start at it: read from its
        // buffer, which is then free for the loader.
        SmallVector<Value> biasAcc;
        if (plan.biasAdd) {
          auto [buffer, parity] = biasTurn(tile.index);
          NVVM::MBarrierTryWaitParityOp::create(b, biasFull(buffer), parity,
                                                b.i32(kWaitTicks));
          biasAcc = buildBiasAccumulators(b, b.getLoc(), plan, tileValues,
                                          biasBuffer(buffer), accType);
          NVVM::MBarrierArriveOp::create(b, /*res=*/Type(), biasEmpty(buffer),
                                         /*count=*/Value());
        }
        auto firstStep = scf::IfOp::create(b, accTypes, b.ult(b.i32(0), kSteps),
                                           /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(firstStep.thenBlock());
          if (plan.biasAdd) {
            scf::YieldOp::create(b, mmaStep(base, rowsOffsetA, biasAcc, false));
          } else {
            SmallVector<Value> undef(plan.getFragments(),
                                     LLVM::UndefOp::create(b, accType));
            scf::YieldOp::create(b, mmaStep(base, rowsOffsetA, undef, true));
          }
          b.setInsertionPointToStart(firstStep.elseBlock());
          if (plan.biasAdd) {
            scf::YieldOp::create(b, biasAcc);
          } else {
            SmallVector<Value> zero(plan.getFragments(),
                                    LLVM::ZeroOp::create(b, accType));
            scf::YieldOp::create(b, zero);
          }
        }
        // The K steps [from, to) after the first.
        auto buildSteps = [&](Value from, Value to, ValueRange init) {
          auto loop = scf::ForOp::create(b, from, to, b.i32(1), init);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(loop.getBody());
          Value kStep = loop.getInductionVar();
          SmallVector<Value> acc =
              mmaStep(advance(base, kStep), rowsOffsetA,
                      loop.getRegionIterArgs(), /*first=*/false);
          // The previous K step's wgmmas have retired: release its slot.
          releasePrevious(base, kStep);
          scf::YieldOp::create(b, acc);
          return loop;
        };
        // A cluster's last unit may reach below the last row block: that
        // block multiplies (its A tile reads as zeros) for the other's sake
        // and writes nothing.
        auto ifTileInside = [&](function_ref<void()> build) {
          if (plan.tile.clusterM == 1)
            return build();
          b.ifThen(b.ult(tile.rowBlock, tilesM), build);
        };
        // kPrefetchLeadSteps K steps before the main loop ends (or with the
        // first wgmmas in flight), the tile's epilogue inputs start for L2.
        Value split = arith::MaxSIOp::create(
            b, b.sub(kSteps, b.i32(kPrefetchLeadSteps)), b.i32(1));
        auto head = buildSteps(b.i32(1), split, firstStep.getResults());
        // A cluster along N wider than the row has blocks past its last
        // column: they prefetch nothing, but their epilogues take part in
        // the row exchanges (and write nothing).
        ifTileInside([&] {
          if (plan.tile.clusterN == 1)
            return buildEpiloguePrefetch(b, b.getLoc(), plan, tileValues);
          b.ifThen(b.ult(tile.colBlock, tilesN), [&] {
            buildEpiloguePrefetch(b, b.getLoc(), plan, tileValues);
          });
        });
        auto loop = buildSteps(split, kSteps, head.getResults());
        // The other consumer's turn, if it has a next tile.
        if (pingpong)
          b.ifThen(b.ult(b.add(tile.index, clusterCount), numUnits), [&] {
            NVVM::BarrierArriveOp::create(b, otherTurn, turnThreads);
          });
        NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
        b.ifThen(b.ult(b.i32(0), kSteps),
                 [&] { releasePrevious(base, kSteps); });

        // The tiles this consumer computed before (cooperative: the block).
        Value ordinal = b.divu(b.sub(tile.index, first),
                               b.mul(clusterCount, b.i32(stride)));
        ifTileInside([&] {
          buildTileEpilogue(b, b.getLoc(), plan, tileValues, loop.getResults(),
                            ordinal);
        });
      });
}

void KernelBodyBuilder::build() {
  Value isLeader = b.eq(values.threadId, b.i32(0));
  b.ifThen(isLeader, [&] {
    for (int64_t s = 0; s < stages; ++s) {
      NVVM::MBarrierInitOp::create(b, fullBarrier(b.i32(s)), b.i32(1),
                                   /*predicate=*/Value());
      NVVM::MBarrierInitOp::create(b, emptyBarrier(b.i32(s)),
                                   b.i32(plan.getSlotReleases()),
                                   /*predicate=*/Value());
    }
    if (plan.biasAdd)
      for (int64_t buffer = 0; buffer < 2; ++buffer) {
        NVVM::MBarrierInitOp::create(b, biasFull(b.i32(buffer)), b.i32(32),
                                     /*predicate=*/Value());
        // Every consumer thread that computes the buffer's tile reads it,
        // as it reads the tile's operand slots.
        NVVM::MBarrierInitOp::create(b, biasEmpty(b.i32(buffer)),
                                     b.i32(plan.getSlotReleases()),
                                     /*predicate=*/Value());
      }
    RowExchangeLayout exchange = plan.getRowExchange();
    for (int64_t slot = 0; exchange.getBytes() && slot < 2; ++slot)
      NVVM::MBarrierInitOp::create(
          b,
          b.byteGep(values.sharedMemory,
                    b.i32(plan.getExchangeOffset() +
                          exchange.getBarrierOffset(slot))),
          b.i32(exchange.getArrivals()), /*predicate=*/Value());
    NVVM::FenceMbarrierInitOp::create(b);
  });
  // The barriers of every block of the cluster are ready before any block
  // multicasts into it or arrives on them.
  syncCluster();

  auto ceilDiv = [&](Value x, int64_t y) {
    return b.divu(b.add(x, b.i32(y - 1)), b.i32(y));
  };
  // An epilogue that does not read the accumulator needs no product.
  kSteps = plan.readsAccumulator ? ceilDiv(values.k, plan.tileK) : b.i32(0);
  tilesM = ceilDiv(values.m, plan.tile.tileM);
  tilesN = ceilDiv(values.n, plan.tile.tileN);
  int64_t clusterM = plan.tile.clusterM;
  // A cluster along N spans the row: one unit per row block.
  unitCols = plan.tile.clusterN == 1 ? tilesN : b.i32(1);
  unitsPerBatch =
      b.mul(clusterM == 1 ? tilesM : ceilDiv(tilesM, clusterM), unitCols);
  numUnits = b.mul(unitsPerBatch, values.batchCount);
  // The grid is a whole number of clusters along x.
  int64_t clusterSize = plan.getClusterSize();
  Value blockId = b.index32(gpu::BlockIdOp::create(b, gpu::Dimension::x));
  Value gridSize = b.index32(gpu::GridDimOp::create(b, gpu::Dimension::x));
  clusterId = blockId;
  clusterCount = gridSize;
  clusterRank = b.i32(0);
  if (clusterSize > 1) {
    clusterId = b.divu(blockId, b.i32(clusterSize));
    clusterCount = b.divu(gridSize, b.i32(clusterSize));
    clusterRank = b.remu(blockId, b.i32(clusterSize));
  }

  // Warpgroup 0 produces, warpgroups 1 and 2 consume; each role is one side
  // of a single if/else, as setmaxnreg needs.
  auto roles = scf::IfOp::create(b, b.eq(values.warpgroup, b.i32(0)),
                                 /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(roles.thenBlock()->getTerminator());
    NVVM::SetMaxRegisterOp::create(b, plan.getProducerRegisters(),
                                   NVVM::SetMaxRegisterAction::decrease);
    b.ifThen(isLeader, [&] { buildProducer(); });
    if (plan.biasAdd)
      b.ifThen(b.eq(values.warp, b.i32(1)), [&] { buildBiasLoader(); });
    b.setInsertionPoint(roles.elseBlock()->getTerminator());
    NVVM::SetMaxRegisterOp::create(b, plan.getConsumerRegisters(),
                                   NVVM::SetMaxRegisterAction::increase);
    buildConsumer(b.sub(values.warpgroup, b.i32(1)));
  }
  // No block leaves while another of its cluster may still arrive on its
  // barriers or write its row exchange.
  if (plan.getClusterSize() > 1)
    syncCluster();
}

void KernelBodyBuilder::syncCluster() {
  if (plan.getClusterSize() == 1) {
    gpu::BarrierOp::create(b);
    return;
  }
  NVVM::ClusterArriveOp::create(b, /*aligned=*/nullptr);
  NVVM::ClusterWaitOp::create(b, /*aligned=*/nullptr);
}

void mlir::coda::buildPersistentKernel(OpBuilder &builder, Location loc,
                                       const KernelPlan &plan,
                                       const KernelValues &values) {
  KernelBuilder b(loc, builder);
  KernelBodyBuilder(b, plan, values).build();
}

void mlir::coda::buildTileEpilogue(OpBuilder &b, Location loc,
                                   const KernelPlan &plan,
                                   const KernelValues &values,
                                   ValueRange accumulators, Value ordinal) {
  GemmOp op = plan.op;
  KernelBuilder kb(loc, b);
  Value exchange;
  if (plan.getRowExchange().getBytes())
    exchange =
        kb.byteGep(values.sharedMemory, kb.i32(plan.getExchangeOffset()));
  else
    ordinal = Value();
  auto typeAttrs = [](auto types) {
    return llvm::map_to_vector(
        types, [](Type type) -> Attribute { return TypeAttr::get(type); });
  };
  // With an accumulator [m, n/2] the output space is twice the product's N.
  Value n = op.getAccumulatorHalfN() ? kb.mul(values.n, kb.i32(2)) : values.n;
  auto tile = TileEpilogueOp::create(
      b, loc, accumulators, values.batch, values.rowBase, values.colBase,
      values.batchCount, values.m, n, values.c, values.alpha, values.beta,
      values.inputs, values.outputs, values.rowPartials, exchange, ordinal,
      b.getArrayAttr(typeAttrs(op.getInputs().getTypes())), op.getInputDims(),
      b.getArrayAttr(typeAttrs(op.getResultTypes())), op.getResultDims(),
      op.getC() ? TypeAttr::get(op.getC().getType()) : TypeAttr(),
      op.isBatched() ? b.getUnitAttr() : UnitAttr(),
      op.getAccumulatorHalfN() ? b.getUnitAttr() : UnitAttr(), plan.getAttr());
  IRMapping mapping;
  op.getEpilogue().cloneInto(&tile.getEpilogue(), mapping);
}
