//===- EpilogueInputs.cpp - what the main loop does for the epilogue ------===//
//
// The parts of the kernel skeleton (coda-to-gpu) that serve the epilogue:
// the bias tile that the accumulators start at (KernelPlan::biasAdd), loaded
// by a producer warp a tile ahead and read into the accumulators, and the L2
// prefetch of the tensors the epilogue reads along m and n (C, a residual):
// three K steps before a tile's main loop ends, the consumer warpgroup
// brings its rows of them into L2, a 128-byte line per thread at a time, so
// that the epilogue's loads find them there (a kernel without a product, whose
// epilogue nothing precedes, prefetches nothing).
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

using namespace mlir;
using namespace mlir::coda;

void mlir::coda::buildBiasTileLoad(OpBuilder &builder, Location loc,
                                   const KernelPlan &plan,
                                   const KernelValues &values, Value buffer) {
  KernelBuilder b(loc, builder);
  GemmOp op = plan.op;
  Value input = op.getInputs()[plan.biasInput];
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  unsigned mask = EpilogueDims(op).getMask(
      op.getEpilogueBlock().getArgument(plan.biasInput + 1));
  Value pointer = values.inputs[plan.biasInput];
  // Lane l takes columns l, l + 32, ...: the loads of a warp are contiguous.
  // Columns past N read the last column (always in bounds) and store zero.
  Value last = b.sub(values.n, b.i32(1));
  SmallVector<Value> loaded;
  for (int64_t q = 0; q < plan.tile.tileN / 32; ++q) {
    Value col = b.add(values.colBase, b.add(values.lane, b.i32(32 * q)));
    Value element = LLVM::LoadOp::create(
        b, elementType,
        b.gep(pointer, elementType,
              getLinearIndex(b, values, mask, values.batch, Value(),
                             arith::MinUIOp::create(b, col, last))));
    Value value = elementType.isF32()
                      ? element
                      : arith::ExtFOp::create(b, b.getF32Type(), element);
    loaded.push_back(
        arith::SelectOp::create(b, b.ult(col, values.n), value, b.f32(0.0)));
  }
  for (auto [q, value] : llvm::enumerate(loaded))
    LLVM::StoreOp::create(
        b, value,
        b.byteGep(buffer, b.mul(b.add(values.lane, b.i32(32 * q)), b.i32(4))));
}

SmallVector<Value> mlir::coda::buildBiasAccumulators(
    OpBuilder &builder, Location loc, const KernelPlan &plan,
    const KernelValues &values, Value buffer, Type accType) {
  KernelBuilder b(loc, builder);
  // Element 4j + 2r + e of a fragment is column 8j + 2(l % 4) + e (row r of
  // the lane's two): the same bias for both rows, read as a pair.
  Value firstCol = b.mul(b.remu(values.lane, b.i32(4)), b.i32(2));
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value acc = LLVM::UndefOp::create(b, accType);
  for (int64_t j = 0; j < plan.tile.tileN / 8; ++j) {
    Value pair = LLVM::LoadOp::create(
        b, pairType,
        b.byteGep(buffer, b.mul(b.add(firstCol, b.i32(8 * j)), b.i32(4))),
        /*alignment=*/8);
    for (int64_t e = 0; e < 2; ++e) {
      Value value = LLVM::ExtractElementOp::create(
          b, pair, b.i32(static_cast<int32_t>(e)));
      for (int64_t r = 0; r < 2; ++r)
        acc = LLVM::InsertValueOp::create(b, acc, value, 4 * j + 2 * r + e);
    }
  }
  // Each element in its own register before the first wgmma's fence:
  // copies made at the wgmma would serialize it.
  return hideFromHoisting(b, SmallVector<Value>(plan.getFragments(), acc));
}

void mlir::coda::buildEpiloguePrefetch(OpBuilder &builder, Location loc,
                                       const KernelPlan &plan,
                                       const KernelValues &kernelValues) {
  // A kernel without a product has nothing to hide the prefetch behind: its
  // epilogue, which streams, ran 2-15% faster without it
  // (docs/performance.md).
  if (!plan.readsAccumulator)
    return;
  KernelBuilder b(loc, builder);
  // In the output space: with an accumulator [m, n/2], twice the product's
  // columns.
  KernelValues values = kernelValues;
  int64_t tileN = plan.tile.tileN;
  if (GemmOp(plan.op).getAccumulatorHalfN()) {
    values.n = b.mul(values.n, b.i32(2));
    values.colBase = b.mul(values.colBase, b.i32(2));
    tileN *= 2;
  }
  constexpr unsigned kMatrix = DimsAttr::kM | DimsAttr::kN;
  SmallVector<EpilogueTensor> tensors = llvm::filter_to_vector(
      getTensors(plan.op, plan.biasInput, values, EpilogueDims(plan.op)),
      [&](const EpilogueTensor &tensor) {
        return !tensor.isOutput && (tensor.mask & kMatrix) == kMatrix;
      });
  if (tensors.empty())
    return;
  // The warpgroup's 128 threads take the 128-byte lines of its rows of the
  // tile in turn: thread t lines t, t + 128, ... (line i of a row starts 128i
  // bytes after the row's first column).
  Value t = b.remu(values.threadId, b.i32(128));
  Value cols =
      arith::MinUIOp::create(b, b.i32(tileN), b.sub(values.n, values.colBase));
  for (const EpilogueTensor &tensor : tensors) {
    int64_t bytes = tensor.elementType.getIntOrFloatBitWidth() / 8;
    int64_t linesPerRow = llvm::divideCeil(tileN * bytes, 128);
    int64_t lines = plan.consumerRows * linesPerRow;
    for (int64_t first = 0; first < lines; first += 128) {
      Value task = b.add(t, b.i32(first));
      Value rowInTile = b.divu(task, b.i32(linesPerRow));
      Value lineBytes = b.mul(b.remu(task, b.i32(linesPerRow)), b.i32(128));
      Value row = b.add(values.rowBase, rowInTile);
      Value inside = b.andi(b.ult(row, values.m),
                            b.ult(lineBytes, b.mul(cols, b.i32(bytes))));
      if (first + 128 > lines)
        inside = b.andi(inside, b.ult(task, b.i32(lines)));
      b.ifThen(inside, [&] {
        Value address =
            b.gep(b.gep(tensor.pointer, tensor.elementType,
                        getLinearIndex(b, values, tensor.mask, values.batch,
                                       row, values.colBase)),
                  b.getI8Type(), b.wide(lineBytes));
        NVVM::PrefetchOp::create(
            b,
            NVVM::PrefetchCacheLevelAttr::get(b.getContext(),
                                              NVVM::PrefetchCacheLevel::L2),
            /*evictPriority=*/nullptr, address, /*predicate=*/Value());
      });
    }
  }
}
