//===- MergeKernels.cpp - the kernels that merge partial results ----------===//
//
// The kernels that run after a GEMM's kernel to combine the partial results
// its tiles wrote, in an order that depends on the sizes only, so that the
// results are the same from run to run: a deterministic column reduction's
// (KernelABI's Partials), and a kernel's row statistics (RowPartials), whose
// merge then computes the outputs that depend on them.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"
#include "KernelPlan.h"

#include "coda/Dialect/Coda/Utils/EpilogueMath.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::coda;

void mlir::coda::buildColumnMergeKernel(OpBuilder &b, Location loc,
                                        StringRef name, ReductionKind kind,
                                        LLVM::GlobalOp sharedMemory) {
  MLIRContext *ctx = b.getContext();
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto kernel = gpu::GPUFuncOp::create(
      b, loc, name, b.getFunctionType({globalPtr, globalPtr, i32, i32}, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  constexpr int64_t threads = KernelABI::kMergeThreads;
  constexpr int64_t columns = KernelABI::kMergeColumns;
  constexpr int64_t warps = threads / 32;
  static_assert(threads == 32 * warps && columns == 32,
                "a merge block is 8 warps of one column per lane");
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&kernel.front());
  KernelBuilder kb(loc, b);
  Value partials = kernel.getArgument(0), output = kernel.getArgument(1);
  Value rows = kernel.getArgument(2), n = kernel.getArgument(3);
  Value thread = kb.index32(gpu::ThreadIdOp::create(kb, gpu::Dimension::x));
  Value lane = kb.remu(thread, kb.i32(32));
  Value warp = kb.divu(thread, kb.i32(32));
  Value col =
      kb.add(kb.mul(kb.index32(gpu::BlockIdOp::create(kb, gpu::Dimension::x)),
                    kb.i32(columns)),
             lane);
  Value batch = kb.index32(gpu::BlockIdOp::create(kb, gpu::Dimension::y));
  Value inside = kb.ult(col, n);
  Value identity = kb.f32(getReductionIdentity(kind));
  auto combine = [&](Value x, Value y) {
    return buildReductionCombine(kb, loc, kind, x, y);
  };
  // Rows warp, warp + 8, ... of the batch, in order (none outside N), read
  // kLoads at a time so that their loads are in flight together: a row past
  // the end reads the last row and contributes the identity.
  constexpr int64_t kLoads = 8;
  Value firstRow = kb.mul(batch, rows);
  Value end = arith::SelectOp::create(kb, inside, rows, kb.i32(0));
  Value last = kb.sub(end, kb.i32(1));
  auto loop = scf::ForOp::create(kb, warp, end, kb.i32(warps * kLoads),
                                 ValueRange{identity});
  {
    OpBuilder::InsertionGuard inner(kb);
    kb.setInsertionPointToStart(loop.getBody());
    SmallVector<std::pair<Value, Value>> loaded;
    for (int64_t j = 0; j < kLoads; ++j) {
      Value row = kb.add(loop.getInductionVar(), kb.i32(j * warps));
      Value valid = kb.cmp(arith::CmpIPredicate::slt, row, end);
      row = kb.add(firstRow, arith::MinSIOp::create(kb, row, last));
      Value index = arith::AddIOp::create(
          kb, arith::MulIOp::create(kb, kb.wide(row), kb.wide(n)),
          kb.wide(col));
      loaded.push_back(
          {valid, LLVM::LoadOp::create(kb, f32, kb.gep(partials, f32, index))});
    }
    Value total = loop.getRegionIterArg(0);
    for (auto [valid, x] : loaded)
      total = combine(total, arith::SelectOp::create(kb, valid, x, identity));
    scf::YieldOp::create(kb, total);
  }
  Value shared = LLVM::AddressOfOp::create(kb, sharedMemory);
  LLVM::StoreOp::create(
      kb, loop.getResult(0),
      kb.gep(shared, f32, kb.add(kb.mul(warp, kb.i32(columns)), lane)));
  gpu::BarrierOp::create(kb);
  kb.ifThen(kb.andi(kb.eq(warp, kb.i32(0)), inside), [&] {
    Value total;
    for (int64_t w = 0; w < warps; ++w) {
      Value x = LLVM::LoadOp::create(
          kb, f32, kb.gep(shared, f32, kb.add(kb.i32(w * columns), lane)));
      total = total ? combine(total, x) : x;
    }
    Value index = arith::AddIOp::create(
        kb, arith::MulIOp::create(kb, kb.wide(batch), kb.wide(n)),
        kb.wide(col));
    LLVM::StoreOp::create(kb, total, kb.gep(output, f32, index));
  });
  gpu::ReturnOp::create(kb);
}

void mlir::coda::buildRowMergeKernel(OpBuilder &b, Location loc,
                                     const KernelPlan &plan,
                                     const KernelABI &abi, FunctionType type,
                                     StringRef name) {
  GemmOp op = plan.op;
  EpilogueDims dims(op);
  std::optional<RowStatistics> statistics = RowStatistics::get(op, dims);
  assert(statistics && "row partials of an epilogue without row statistics");
  auto kernel = gpu::GPUFuncOp::create(b, loc, name, type);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  constexpr int64_t threads = KernelABI::kRowMergeThreads;
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&kernel.front());
  KernelBuilder kb(loc, b);
  KernelValues values;
  bindKernelParams(kernel.front(), abi, values);
  Type f32 = kb.getF32Type();
  Value row =
      kb.add(kb.mul(kb.index32(gpu::BlockIdOp::create(kb, gpu::Dimension::x)),
                    kb.i32(threads)),
             kb.index32(gpu::ThreadIdOp::create(kb, gpu::Dimension::x)));
  Value batch = kb.index32(gpu::BlockIdOp::create(kb, gpu::Dimension::y));
  kb.ifThen(kb.ult(row, values.m), [&] {
    // Each reduction's partial results of the row, [batch][tile][row]: the
    // first tile's, then one every M elements, combined in tile order.
    int64_t tileN = plan.tile.tileN;
    Value tiles = countColumnTiles(kb, values, tileN);
    auto load = [&](Value scratch, Value tile) {
      Value index = getRowPartialIndex(kb, values, tiles, batch, tile, row);
      return LLVM::LoadOp::create(kb, f32, kb.gep(scratch, f32, index))
          .getResult();
    };
    // Tile t's columns inside the output.
    auto columns = [&](Value tile) {
      return countTileColumns(kb, values, tileN, kb.mul(tile, kb.i32(tileN)));
    };
    // Builds a loop over tiles [from, tiles) carrying `init`, whose body
    // gives the next values from the current ones and the tile.
    auto overTiles =
        [&](Value from, ValueRange init,
            function_ref<SmallVector<Value>(ValueRange, Value)> body) {
          auto loop = scf::ForOp::create(kb, from, tiles, kb.i32(1), init);
          OpBuilder::InsertionGuard inner(kb);
          kb.setInsertionPointToStart(loop.getBody());
          scf::YieldOp::create(
              kb, body(loop.getRegionIterArgs(), loop.getInductionVar()));
          return loop.getResults();
        };
    Value count = arith::UIToFPOp::create(kb, f32, values.n);
    ArrayRef<RowReduceOp> reductions = statistics->getReductions();
    IRMapping mapping;
    for (auto [k, reduce] : llvm::enumerate(reductions)) {
      RowReduceOp reduction = reduce;
      ReductionKind kind = reduction.getKind();
      Value scratch = values.rowPartials[k];
      int64_t centeredOn = statistics->getCenteredOn(k);
      if (statistics->getShift(k) >= 0)
        continue; // merged with its shift below
      if (centeredOn < 0) {
        Value total =
            overTiles(kb.i32(0), kb.f32(getReductionIdentity(kind)),
                      [&](ValueRange carried, Value tile) {
                        return SmallVector<Value>{buildReductionCombine(
                            kb, loc, kind, carried[0], load(scratch, tile))};
                      })[0];
        if (reductionDividesByCount(kind))
          total = arith::DivFOp::create(kb, total, count);
        mapping.map(reduction.getResult(), total);
        continue;
      }
      RowReduceOp centered = reductions[centeredOn];
      Value pairs = values.rowPartials[centeredOn];
      if (statistics->getCentering(centeredOn) ==
          RowStatistics::Centering::Square) {
        // Chan's merge of (columns, mean, sum of squared deviations), tile
        // by tile.
        Value zero = kb.f32(0.0);
        ValueRange merged = overTiles(
            kb.i32(0), {zero, zero, zero}, [&](ValueRange carried, Value tile) {
              Value n = carried[0], mean = carried[1], m2 = carried[2];
              Value c = columns(tile);
              Value total = arith::AddFOp::create(kb, n, c);
              Value delta =
                  arith::SubFOp::create(kb, load(scratch, tile), mean);
              Value share = arith::DivFOp::create(kb, c, total);
              Value weight = arith::MulFOp::create(kb, n, share);
              Value spread = arith::MulFOp::create(
                  kb, arith::MulFOp::create(kb, delta, delta), weight);
              return SmallVector<Value>{
                  total,
                  arith::AddFOp::create(
                      kb, mean, arith::MulFOp::create(kb, delta, share)),
                  arith::AddFOp::create(
                      kb, m2,
                      arith::AddFOp::create(kb, load(pairs, tile), spread))};
            });
        Value m2 = merged[2];
        if (reductionDividesByCount(centered.getKind()))
          m2 = arith::DivFOp::create(kb, m2, count);
        mapping.map(reduction.getResult(), merged[1]);
        mapping.map(centered.getResult(), m2);
        continue;
      }
      // A softmax's running maximum and its sum of exponentials, rescaled
      // to each new maximum, from the first tile's.
      Value zeroTile = kb.i32(0);
      ValueRange merged = overTiles(
          kb.i32(1), {load(scratch, zeroTile), load(pairs, zeroTile)},
          [&](ValueRange carried, Value tile) {
            Value top = load(scratch, tile);
            Value highest = buildReductionCombine(kb, loc, ReductionKind::Max,
                                                  carried[0], top);
            auto rescale = [&](Value sum, Value max) {
              return arith::MulFOp::create(
                  kb, sum,
                  math::ExpOp::create(kb,
                                      arith::SubFOp::create(kb, max, highest)));
            };
            Value sum = rescale(carried[1], carried[0]);
            Value tileSum = rescale(load(pairs, tile), top);
            return SmallVector<Value>{highest,
                                      arith::AddFOp::create(kb, sum, tileSum)};
          });
      mapping.map(reduction.getResult(), merged[0]);
      mapping.map(centered.getResult(), merged[1]);
    }
    // The epilogue's ops on the statistics, their inputs read at the row.
    Value column = kb.i32(0);
    for (Operation *inner : statistics->getMergeOps()) {
      for (Value operand : inner->getOperands()) {
        auto arg = dyn_cast<BlockArgument>(operand);
        if (!arg || mapping.contains(arg))
          continue;
        unsigned i = arg.getArgNumber() - 1;
        Value input = values.inputs[i];
        if (auto tensor =
                dyn_cast<RankedTensorType>(op.getInputs()[i].getType())) {
          Type elementType = tensor.getElementType();
          Value index =
              getLinearIndex(kb, values, dims.getMask(arg), batch, row, column);
          input = LLVM::LoadOp::create(kb, elementType,
                                       kb.gep(input, elementType, index));
          if (elementType != f32)
            input = arith::ExtFOp::create(kb, f32, input);
        }
        mapping.map(arg, input);
      }
      if (auto detach = dyn_cast<DetachOp>(inner))
        mapping.map(detach.getResult(), mapping.lookup(detach.getInput()));
      else if (auto round = dyn_cast<RoundOp>(inner))
        mapping.map(round.getResult(),
                    buildRounding(kb, round.getLoc(),
                                  mapping.lookup(round.getInput()),
                                  round.getTo()));
      else
        kb.clone(*inner, mapping);
    }
    for (auto [i, value] : llvm::enumerate(op.getYield().getValues())) {
      if (!statistics->isMerged(i))
        continue;
      Type elementType = getElementType(op.getResult(i).getType());
      Value x = mapping.lookup(value);
      if (x.getType() != elementType)
        x = arith::TruncFOp::create(kb, elementType, x);
      Value index = getLinearIndex(kb, values, op.getResultDimsAt(i).getMask(),
                                   batch, row, column);
      LLVM::StoreOp::create(kb, x,
                            kb.gep(values.outputs[i], elementType, index));
    }
  });
  gpu::ReturnOp::create(kb);
}
