//===- ReductionPatterns.cpp - row and column reductions in the epilogue --===//
//
// coda.row_reduce combines the thread's column slots of a row, then the 4
// lanes of its quad that hold the rest of the row's tile; under a cluster
// along N (rows wider than a tile: KernelPlan checks N against tile_n x
// cluster_n), the quad's lane 0 then exchanges that partial result with the
// cluster's other blocks (RowExchangeLayout) and combines all of them in
// rank order, the same in every block. Row statistics under row partials
// are not combined across tiles here: each tile writes its partial result
// of each row (accumulateRowPartial, storeRowPartial; a centered one, its
// values centered on the tile's own shift: sumCenteredRow) for the merge
// kernel (MergeKernels.cpp). coda.col_reduce combines the
// thread's row slots of a column, then the 8 lanes that hold the warp's other
// rows of it, and each warp adds its partial result to the f32 output with
// one atomic (the runtime initializes the output to the reduction's
// identity, see KernelABI.h); under a deterministic plan, each warp instead
// stores its partial result in its own row of the output's partials
// scratch, which the merge kernel (CodaToGPU.cpp) combines in a fixed order.
// coda.group_reduce combines the slots of the element's group of columns
// (the tile is a multiple of the group's width, so a group never leaves it):
// slot c = 2j + e holds column 8j + 2(l % 4) + e, so a group of w >= 8
// columns is w / 4 consecutive slots of each lane of the quad, combined with
// the 3 others; of 4, a pair of slots in lanes l and l ^ 1; of 2, a pair.
// Identities, combines and atomics come from EpilogueMath, as in the CPU
// reference.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The combine of reduction `kind` on two f32 values.
Value combine(KernelBuilder &b, ReductionKind kind, Value x, Value y) {
  return buildReductionCombine(b, b.getLoc(), kind, x, y);
}

/// `total` combined with its value in the lanes l ^ offset, for each offset.
Value combineAcrossLanes(KernelBuilder &b, ReductionKind kind, Value total,
                         ArrayRef<int32_t> offsets) {
  for (int32_t offset : offsets)
    total = combine(
        b, kind, total,
        gpu::ShuffleOp::create(b, total, offset, 32, gpu::ShuffleMode::XOR)
            .getShuffleResult());
  return total;
}

/// Exchanges the calling thread's partial results of its row slots
/// (`partials`, combined across its quad) with the other blocks of its
/// cluster along N, and returns each row's result: the partial results of
/// every block combined in rank order. Lane 0 of each quad writes, waits
/// and reads (so that the slot it reads is not written again before it has
/// read it: the next writer waits for its next arrival), then gives the
/// result to its quad.
SmallVector<Value> exchangeAcrossCluster(EpilogueBuilder &builder,
                                         ReductionKind kind,
                                         ArrayRef<Value> partials) {
  KernelBuilder &b = builder.getBuilder();
  const KernelValues &values = builder.getValues();
  KernelPlanAttr plan = builder.getPlan();
  RowExchangeLayout layout{plan.getClusterN(), plan.getTileM()};
  // Exchange e uses slot e % 2 for the (e / 2)-th time.
  Value exchange = builder.takeRowExchange();
  Value slot = b.andi(exchange, b.i32(1));
  Value parity = b.andi(b.shru(exchange, b.i32(1)), b.i32(1));
  Value slotBase =
      b.byteGep(values.exchange, b.mul(slot, b.i32(layout.getSlotBytes())));
  Value barrier =
      b.byteGep(values.exchange, b.add(b.i32(layout.getBarrierOffset(0)),
                                       b.mul(slot, b.i32(8))));
  Value rank = NVVM::ClusterId::create(b, b.getI32Type());
  auto entry = [&](Value owner, int64_t h) {
    Value index =
        b.add(b.mul(owner, b.i32(plan.getTileM())), builder.getRowInTile(h));
    return b.gep(slotBase, b.getF32Type(), index);
  };
  auto clusterPtr = LLVM::LLVMPointerType::get(b.getContext(), 7);
  Value leader = b.eq(b.andi(values.lane, b.i32(3)), b.i32(0));
  b.ifThen(leader, [&] {
    for (int64_t target = 0; target < layout.clusterN; ++target) {
      Value block = b.i32(target);
      for (auto [h, partial] : llvm::enumerate(partials))
        LLVM::StoreOp::create(
            b, partial,
            NVVM::MapaOp::create(b, clusterPtr, entry(rank, h), block));
      // Releases the stores above to the cluster.
      NVVM::MBarrierArriveOp::create(
          b, /*res=*/Type(),
          NVVM::MapaOp::create(b, clusterPtr, barrier, block),
          /*count=*/Value(), NVVM::MemScopeKind::CLUSTER);
    }
    NVVM::MBarrierTryWaitParityOp::create(b, barrier, parity,
                                          b.i32(kWaitTicks));
    // The wait acquires at CTA scope; the fence extends it to the stores
    // of the cluster's other blocks.
    NVVM::FenceScClusterOp::create(b);
  });
  SmallVector<Value> totals;
  Value quadLeader = b.andi(values.lane, b.i32(~3));
  for (int64_t h = 0, e = partials.size(); h < e; ++h) {
    Value total = b.ifThenElse(
        leader, b.getF32Type(),
        [&] {
          Value total;
          for (int64_t owner = 0; owner < layout.clusterN; ++owner) {
            Value x =
                LLVM::LoadOp::create(b, b.getF32Type(), entry(b.i32(owner), h));
            total = total ? combine(b, kind, total, x) : x;
          }
          return total;
        },
        [&] { return partials[h]; });
    totals.push_back(gpu::ShuffleOp::create(b, total, quadLeader, b.i32(32),
                                            gpu::ShuffleMode::IDX)
                         .getShuffleResult());
  }
  return totals;
}

struct RowReducePattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto reduce = dyn_cast<RowReduceOp>(op);
    if (!reduce)
      return failure();
    KernelBuilder &b = builder.getBuilder();
    ReductionKind kind = reduce.getKind();
    Value input = reduce.getInput();
    Value n = arith::UIToFPOp::create(b, b.getF32Type(), builder.getValues().n);
    if (!(builder.getDims().getMask(input) & DimsAttr::kN)) {
      // Uniform along the row: the max and mean are the value, the sum is
      // the value times N.
      Value x = builder.at(input, h, 0);
      Value total = reductionScalesUniformValue(kind)
                        ? Value(arith::MulFOp::create(b, x, n))
                        : x;
      builder.define(reduce.getResult(), h, c, total);
      return success();
    }
    // Within a tile, row slot h; across a cluster, every row slot at once,
    // exchanged together.
    bool exchanges = builder.getPlan().getClusterN() > 1;
    Value identity = b.f32(getReductionIdentity(kind));
    SmallVector<int64_t> rows = {h};
    if (exchanges)
      rows = llvm::to_vector(llvm::seq<int64_t>(0, builder.numRowSlots()));
    SmallVector<Value> totals;
    for (int64_t row : rows) {
      Value total;
      for (int64_t col = 0; col < builder.numColSlots(); ++col) {
        Value x = builder.selectInBounds(DimsAttr::kN, row, col,
                                         builder.at(input, row, col), identity);
        total = total ? combine(b, kind, total, x) : x;
      }
      // The lanes l ^ 1, l ^ 2 and l ^ 3 hold the rest of the tile's row.
      totals.push_back(combineAcrossLanes(b, kind, total, {1, 2}));
    }
    if (exchanges) {
      totals = exchangeAcrossCluster(builder, kind, totals);
      if (builder.numRowExchanges() == 1)
        builder.forgetValuesAlongN();
    }
    for (auto [row, total] : llvm::zip_equal(rows, totals)) {
      if (reductionDividesByCount(kind))
        total = arith::DivFOp::create(b, total, n);
      builder.define(reduce.getResult(), row, c, total);
    }
    return success();
  }
};

struct GroupReducePattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto reduce = dyn_cast<GroupReduceOp>(op);
    if (!reduce)
      return failure();
    KernelBuilder &b = builder.getBuilder();
    ReductionKind kind = reduce.getKind();
    int64_t width = reduce.getWidth();
    // The thread's slots of the group, and the lanes l ^ offset that hold
    // the rest of it.
    int64_t slots = width >= 8 ? width / 4 : std::min<int64_t>(width, 2);
    SmallVector<int32_t> lanes;
    if (width >= 4)
      lanes.push_back(1);
    if (width >= 8)
      lanes.push_back(2);
    int64_t first = c - c % slots;
    Value identity = b.f32(getReductionIdentity(kind));
    Value total;
    for (int64_t slot = first; slot < first + slots; ++slot) {
      Value x = builder.selectInBounds(DimsAttr::kN, h, slot,
                                       builder.at(reduce.getInput(), h, slot),
                                       identity);
      total = total ? combine(b, kind, total, x) : x;
    }
    total = combineAcrossLanes(b, kind, total, lanes);
    if (reductionDividesByCount(kind)) {
      // The group's columns inside the output: all of them in an interior
      // tile, else min(width, N - its first column).
      Value count = b.i32(width);
      if (builder.inBounds(DimsAttr::kN, h, first)) {
        Value start = b.andi(builder.getCol(first), b.i32(~(width - 1)));
        count = arith::MinUIOp::create(b, count,
                                       b.sub(builder.getValues().n, start));
      }
      total = arith::DivFOp::create(
          b, total, arith::UIToFPOp::create(b, b.getF32Type(), count));
    }
    for (int64_t slot = first; slot < first + slots; ++slot)
      builder.define(reduce.getResult(), h, slot, total);
    return success();
  }
};

struct ColReducePattern final : EpiloguePattern {
  LogicalResult buildOutput(unsigned i, Value value, int64_t group, int64_t h,
                            EpilogueBuilder &builder) const override {
    auto reduce = value.getDefiningOp<ColReduceOp>();
    if (!reduce)
      return failure();
    Value pointer = builder.getValues().outputs[i];
    unsigned mask = builder.getOp().getResultDimsAt(i).getMask();
    for (int64_t c = 8 * group; c < 8 * group + 8; ++c)
      accumulateColumn(reduce, pointer, mask, c, builder);
    return success();
  }

  /// Combines column slot `c` over the block's rows into the f32 output at
  /// `pointer` (spanning `mask`), atomically, or under a deterministic plan
  /// writes the warp's partial result into its row of the partials scratch
  /// at `pointer`.
  static void accumulateColumn(ColReduceOp reduce, Value pointer, unsigned mask,
                               int64_t c, EpilogueBuilder &builder) {
    KernelBuilder &b = builder.getBuilder();
    const KernelValues &values = builder.getValues();
    ReductionKind kind = reduce.getKind();
    Value identity = b.f32(getReductionIdentity(kind));
    // The thread's rows, then the 8 lanes l ^ 4k that hold the warp's other
    // rows of this column.
    Value total;
    for (int64_t h = 0; h < builder.numRowSlots(); ++h) {
      Value x = builder.selectInBounds(
          DimsAttr::kM, h, c, builder.at(reduce.getInput(), h, c), identity);
      total = total ? combine(b, kind, total, x) : x;
    }
    total = combineAcrossLanes(b, kind, total, {4, 8, 16});
    // A mean sums each element divided by M.
    if (reductionDividesByCount(kind))
      total = arith::DivFOp::create(
          b, total, arith::UIToFPOp::create(b, b.getF32Type(), values.m));
    Value writes = b.ult(values.lane, b.i32(4));
    if (Value inside = builder.inBounds(DimsAttr::kN, 0, c))
      writes = b.andi(writes, inside);
    // Under a deterministic plan, the warp's row of the partials scratch is
    // addressed as the output is, shifted by whole rows.
    Value shift;
    if (builder.getPlan().getDeterministic())
      shift = partialRowShift(builder, mask);
    b.ifThen(writes, [&] {
      Value address = builder.slotAddress(pointer, b.getF32Type(), 0, c);
      if (shift) {
        LLVM::StoreOp::create(b, total, b.gep(address, b.getF32Type(), shift));
        return;
      }
      LLVM::AtomicRMWOp::create(b, getReductionAtomicOp(kind), address, total,
                                LLVM::AtomicOrdering::monotonic);
    });
  }

  /// How many elements the calling warp's row of the partials scratch
  /// (KernelABI::getPartialRows: the rows of each batch's tiles in order,
  /// and in each tile the rows of its consumer warps, by consumer and warp)
  /// starts after the output's row of the tile (row `batch` of an output
  /// spanning `mask` with the batch, else row 0).
  static Value partialRowShift(EpilogueBuilder &builder, unsigned mask) {
    KernelBuilder &b = builder.getBuilder();
    const KernelValues &values = builder.getValues();
    KernelPlanAttr plan = builder.getPlan();
    int64_t tileM = plan.getTileM(), consumerRows = plan.getConsumerRows();
    Value tiles = b.divu(b.add(values.m, b.i32(tileM - 1)), b.i32(tileM));
    Value tile =
        b.add(b.mul(values.batch, tiles), b.divu(values.rowBase, b.i32(tileM)));
    Value consumer =
        b.divu(b.remu(values.rowBase, b.i32(tileM)), b.i32(consumerRows));
    Value row =
        b.add(b.mul(b.add(b.mul(tile, b.i32(tileM / consumerRows)), consumer),
                    b.i32(4)),
              values.warp);
    if (mask & DimsAttr::kB)
      row = b.sub(row, values.batch);
    return arith::MulIOp::create(b, b.wide(row), b.wide(values.n));
  }
};

} // namespace

Value mlir::coda::accumulateRowPartial(RowReduceOp reduce, int64_t group,
                                       int64_t h, Value partial,
                                       EpilogueBuilder &builder) {
  KernelBuilder &b = builder.getBuilder();
  ReductionKind kind = reduce.getKind();
  Value identity = b.f32(getReductionIdentity(kind));
  for (int64_t c = 8 * group; c < 8 * group + 8; ++c) {
    Value x = builder.selectInBounds(
        DimsAttr::kN, h, c, builder.at(reduce.getInput(), h, c), identity);
    partial = partial ? combine(b, kind, partial, x) : x;
  }
  return partial;
}

Value mlir::coda::combineRowAcrossQuad(ReductionKind kind, Value partial,
                                       EpilogueBuilder &builder) {
  // The lanes l ^ 1 and l ^ 2 hold the rest of the tile's row.
  return combineAcrossLanes(builder.getBuilder(), kind, partial, {1, 2});
}

Value mlir::coda::sumCenteredRow(RowReduceOp shiftReduce,
                                 RowStatistics::Centering centering,
                                 Value shift, int64_t h,
                                 EpilogueBuilder &builder) {
  KernelBuilder &b = builder.getBuilder();
  Value total;
  for (int64_t c = 0; c < builder.numColSlots(); ++c) {
    Value d = arith::SubFOp::create(b, builder.at(shiftReduce.getInput(), h, c),
                                    shift);
    Value x = centering == RowStatistics::Centering::Square
                  ? Value(arith::MulFOp::create(b, d, d))
                  : Value(math::ExpOp::create(b, d));
    x = builder.selectInBounds(DimsAttr::kN, h, c, x, b.f32(0.0));
    total = total ? arith::AddFOp::create(b, total, x) : x;
  }
  return combineRowAcrossQuad(ReductionKind::Sum, total, builder);
}

void mlir::coda::storeRowPartial(Value scratch, int64_t h, Value total,
                                 EpilogueBuilder &builder) {
  KernelBuilder &b = builder.getBuilder();
  const KernelValues &values = builder.getValues();
  int64_t tileN = builder.getPlan().getTileN();
  Value index = getRowPartialIndex(
      b, values, countColumnTiles(b, values, tileN), values.batch,
      b.divu(values.colBase, b.i32(tileN)), builder.getRow(h));
  Value writes = b.eq(b.andi(values.lane, b.i32(3)), b.i32(0));
  if (Value inside = builder.inBounds(DimsAttr::kM, h, 0))
    writes = b.andi(writes, inside);
  b.ifThen(writes, [&] {
    LLVM::StoreOp::create(b, total, b.gep(scratch, b.getF32Type(), index));
  });
}

void mlir::coda::populateReductionPatterns(EpiloguePatterns &patterns) {
  patterns.push_back(std::make_unique<RowReducePattern>());
  patterns.push_back(std::make_unique<ColReducePattern>());
  patterns.push_back(std::make_unique<GroupReducePattern>());
}
