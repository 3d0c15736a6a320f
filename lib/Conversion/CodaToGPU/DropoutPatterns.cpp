//===- DropoutPatterns.cpp - dropout in the epilogue ----------------------===//
//
// coda.dropout draws its decisions from Philox4x32-10 exactly as its
// definition (EpilogueMath, shared with the CPU reference) says: one call per
// 8 elements, the 8 columns 32q + 8j' + 2(l % 4) + {0, 1} (j' = 0..3) of one
// row that are 8 slots of one thread, so each thread calls it once per row
// slot and column group and takes a 16-bit slice per slot. The mask is never
// stored: the backward regenerates it from the same seed and stream.
// dropout(x) + y selects between x * scale + y and y, which saves the
// product's own instruction (the sum contracts into an fma).
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The 16 random bits that decide `dropout` at the slot.
Value buildDropoutBits(DropoutOp dropout, int64_t h, int64_t c,
                       EpilogueBuilder &builder) {
  KernelBuilder &b = builder.getBuilder();
  // Slot c = 2j + e is column 8j + 2(l % 4) + e: the slots c / 8 = q of a row
  // share one Philox call, and the slice each takes depends only on
  // 8(j % 4) + e.
  if (builder.getShared(dropout, h, c / 8).empty()) {
    std::array<Value, 4> drawn = buildDropoutWords(
        b, b.getLoc(), builder.at(dropout.getSeed(), h, c), dropout.getStream(),
        builder.getValues().batch, builder.getRow(h), builder.getCol(c));
    builder.getShared(dropout, h, c / 8).assign(drawn.begin(), drawn.end());
  }
  ArrayRef<Value> words = builder.getShared(dropout, h, c / 8);
  return buildDropoutSlice(b, b.getLoc(),
                           {words[0], words[1], words[2], words[3]},
                           b.i32(8 * ((c / 2) % 4) + c % 2));
}

struct DropoutPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto dropout = dyn_cast<DropoutOp>(op);
    if (!dropout)
      return failure();
    KernelBuilder &b = builder.getBuilder();
    builder.define(dropout.getResult(), h, c,
                   buildDropoutApply(b, b.getLoc(),
                                     builder.at(dropout.getInput(), h, c),
                                     buildDropoutBits(dropout, h, c, builder),
                                     dropout.getThreshold()));
    return success();
  }
};

/// dropout(x) + y: selects between the sum and y rather than between the
/// product and 0, so that its product and sum contract into one fma.
struct DropoutAddPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto add = dyn_cast<arith::AddFOp>(op);
    if (!add)
      return failure();
    for (int i : {0, 1}) {
      auto dropout = add->getOperand(i).getDefiningOp<DropoutOp>();
      if (!dropout)
        continue;
      KernelBuilder &b = builder.getBuilder();
      builder.define(add.getResult(), h, c,
                     buildDropoutApplyAdd(
                         b, b.getLoc(), builder.at(dropout.getInput(), h, c),
                         buildDropoutBits(dropout, h, c, builder),
                         dropout.getThreshold(),
                         builder.at(add->getOperand(1 - i), h, c)));
      return success();
    }
    return failure();
  }
};

} // namespace

void mlir::coda::populateDropoutPatterns(EpiloguePatterns &patterns) {
  patterns.push_back(std::make_unique<DropoutPattern>());
  patterns.push_back(std::make_unique<DropoutAddPattern>());
}
