//===- ReductionPatterns.cpp - row and column reductions in the epilogue --===//
//
// coda.row_reduce combines the thread's column slots of a row, then the 4
// lanes of its quad that hold the rest of the row (the whole row must be in
// the tile: KernelPlan checks N against tile_n). coda.col_reduce combines the
// thread's row slots of a column, then the 8 lanes that hold the warp's other
// rows of it, and each warp adds its partial result to the f32 output with
// one atomic (the runtime initializes the output to the reduction's
// identity, see KernelABI.h). Identities, combines and atomics come from
// EpilogueMath, as in the CPU reference.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

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
    Value total;
    if (!(builder.getDims().getMask(input) & DimsAttr::kN)) {
      // Uniform along the row: the max and mean are the value, the sum is
      // the value times N.
      Value x = builder.at(input, h, 0);
      total = reductionScalesUniformValue(kind)
                  ? Value(arith::MulFOp::create(b, x, n))
                  : x;
    } else {
      Value identity = b.f32(getReductionIdentity(kind));
      for (int64_t col = 0; col < builder.numColSlots(); ++col) {
        Value x = builder.selectInBounds(DimsAttr::kN, h, col,
                                         builder.at(input, h, col), identity);
        total = total ? combine(b, kind, total, x) : x;
      }
      // The lanes l ^ 1, l ^ 2 and l ^ 3 hold the rest of the row.
      total = combineAcrossLanes(b, kind, total, {1, 2});
      if (reductionDividesByCount(kind))
        total = arith::DivFOp::create(b, total, n);
    }
    builder.define(reduce.getResult(), h, c, total);
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
    for (int64_t c = 8 * group; c < 8 * group + 8; ++c)
      accumulateColumn(reduce, pointer, c, builder);
    return success();
  }

  /// Combines column slot `c` over the block's rows into the f32 output at
  /// `pointer`, atomically.
  static void accumulateColumn(ColReduceOp reduce, Value pointer, int64_t c,
                               EpilogueBuilder &builder) {
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
    b.ifThen(writes, [&] {
      LLVM::AtomicRMWOp::create(
          b, getReductionAtomicOp(kind),
          builder.slotAddress(pointer, b.getF32Type(), 0, c), total,
          LLVM::AtomicOrdering::monotonic);
    });
  }
};

} // namespace

void mlir::coda::populateReductionPatterns(EpiloguePatterns &patterns) {
  patterns.push_back(std::make_unique<RowReducePattern>());
  patterns.push_back(std::make_unique<ColReducePattern>());
}
