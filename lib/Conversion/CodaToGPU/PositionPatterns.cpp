//===- PositionPatterns.cpp - coordinates and partner columns -------------===//
//
// coda.coord is the slot's row, column or batch as an f32. coda.partner
// reads its input at column n xor d: slot c = 2j + e of a thread is column
// 8j + 2(l % 4) + e of a tile whose first column is a multiple of its width,
// so the partner is the thread's own slot c ^ 1 for d = 1 and c ^ (d / 4)
// for 8 <= d < tile_n (the plan checks that the tile is a multiple of 2d
// wide), and the same slot of lane l ^ (d / 2) for d = 2 and 4, one shuffle
// away. Past the last column of the output the partner is 0.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

struct CoordPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto coord = dyn_cast<CoordOp>(op);
    if (!coord)
      return failure();
    KernelBuilder &b = builder.getBuilder();
    Value index = coord.getDim() == OutputDim::M   ? builder.getRow(h)
                  : coord.getDim() == OutputDim::N ? builder.getCol(c)
                                                   : builder.getValues().batch;
    builder.define(coord.getResult(), h, c,
                   arith::UIToFPOp::create(b, b.getF32Type(), index));
    return success();
  }
};

struct PartnerPattern final : EpiloguePattern {
  LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                           EpilogueBuilder &builder) const override {
    auto partner = dyn_cast<PartnerOp>(op);
    if (!partner)
      return failure();
    KernelBuilder &b = builder.getBuilder();
    int64_t distance = partner.getDistance();
    Value value;
    if (distance == 2 || distance == 4) {
      value = gpu::ShuffleOp::create(b, builder.at(partner.getInput(), h, c),
                                     static_cast<int32_t>(distance / 2), 32,
                                     gpu::ShuffleMode::XOR)
                  .getShuffleResult();
    } else {
      value = builder.at(partner.getInput(), h,
                         c ^ (distance == 1 ? 1 : distance / 4));
    }
    Value column = b.xori(builder.getCol(c), b.i32(distance));
    if (Value inside = builder.columnInBounds(column))
      value = arith::SelectOp::create(b, inside, value, b.f32(0.0));
    builder.define(partner.getResult(), h, c, value);
    return success();
  }
};

} // namespace

void mlir::coda::populatePositionPatterns(EpiloguePatterns &patterns) {
  patterns.push_back(std::make_unique<CoordPattern>());
  patterns.push_back(std::make_unique<PartnerPattern>());
}
