//===- Epilogue.cpp - the coda.gemm region on accumulator registers -------===//
//
// Runs the epilogue of a coda.gemm on the accumulator fragment each thread
// holds after the main loop, and writes every output element once.
//
// A consumer thread holds 2 rows of each of its m64nN wgmma fragments
// (h = 2i + h': rows r + 64i + 8h') and N / 4 columns (c = 2j + e: columns
// 8j + 2(l % 4) + e) of its warpgroup's accumulator. The epilogue is built on demand, slot by
// slot in store order: an epilogue value is computed at a slot when an
// output first needs it there, and once per distinct slot along the dims it
// varies along (EpilogueDims), so a bias is loaded once per column slot, a
// per-row value once per row slot, a scalar once, and few values are live at
// a time. Dropout draws one Philox call per 8 elements: the 8 columns
// 32q + 8j' + 2(l % 4) + {0, 1} (j' = 0..3) of one row that coda.dropout's
// definition groups are exactly 8 slots of one thread. Row reductions combine
// the thread's columns, then the 4 lanes that share a row (N must fit one
// tile). Column reductions combine the thread's rows, then the 8 lanes that
// share a column, and each warp adds its partial result to the f32 output
// with an atomic (the runtime initializes it, see KernelABI.h).
//
// Columns 2j and 2j + 1 of a row are adjacent in memory: tensors that span n
// are loaded and stored a pair at a time (one 4-byte access for 16-bit
// types, 8 bytes for f32) when both are inside the output and the address is
// aligned, else element by element.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Builds the epilogue of one kernel.
class EpilogueBuilder {
public:
  EpilogueBuilder(KernelBuilder &b, const KernelPlan &plan,
                  const KernelValues &values, ValueRange accumulators);

  void build();

private:
  int64_t numRowSlots() const { return 2 * plan.getFragments(); }
  int64_t numColSlots() const { return plan.tile.tileN / 4; }

  /// Whether the slot is inside the output, along the dims of `mask`.
  Value inBounds(unsigned mask, int64_t h, int64_t c);
  /// The element offset of the slot in a dense tensor spanning `mask`.
  Value linearIndex(unsigned mask, int64_t h, int64_t c);
  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output).
  Value loadSlot(Value pointer, Type elementType, unsigned mask, int64_t h,
                 int64_t c);
  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output); along n, a pair of slots at a time.
  Value loadInput(Value pointer, Type elementType, unsigned mask, int64_t h,
                  int64_t c);
  /// Stores the slot of the output spanning `mask`, if this thread writes it.
  void storeSlot(Value value, Value pointer, Type elementType, unsigned mask,
                 int64_t h, int64_t c);
  /// Stores slots c and c + 1 (c even) of an output spanning n, if this
  /// thread writes them.
  void storePair(Value first, Value second, Value pointer, Type elementType,
                 unsigned mask, int64_t h, int64_t c);
  /// Whether slots c and c + 1 (c even) of a tensor spanning `mask` (with n)
  /// are both inside the output and their address is aligned to a pair.
  Value pairFits(Value pointer, Type elementType, unsigned mask, int64_t h,
                 int64_t c);
  /// Combines column slot `c` of column reduction `op` over the block's rows
  /// into the f32 output spanning `mask`, atomically.
  void accumulateColumn(ColReduceOp op, Value pointer, unsigned mask,
                        int64_t c);

  /// The epilogue value `v` at row slot `h`, column slot `c`, built the first
  /// time it is asked for.
  Value at(Value v, int64_t h, int64_t c);
  Value computeAccumulator(int64_t h, int64_t c);
  Value computeRowReduce(RowReduceOp op, int64_t h);
  Value computeDropout(DropoutOp op, int64_t h, int64_t c);
  /// Clones `inner` at the slot and records all its results there.
  void computeElementwise(Operation &inner, int64_t h, int64_t c);

  KernelBuilder &b;
  const KernelPlan &plan;
  const KernelValues &values;
  SmallVector<Value> accumulators;
  GemmOp op;
  EpilogueDims dims;
  /// The output rows and columns of the thread's slots (i32).
  SmallVector<Value> rows, cols;
  /// Epilogue values built so far, by (value, row slot, column slot); a
  /// value that does not vary along m (n) is kept at row (column) slot 0.
  llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, Value> built;
  /// Pairs of slots loaded so far, by (pointer, row slot, even column slot).
  llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, std::pair<Value, Value>>
      pairs;
  /// Whether N is even (then pairs of an even column are aligned in any
  /// tensor that spans n), and whether a pointer is aligned to a pair.
  Value nIsEven;
  llvm::DenseMap<Value, Value> pairAligned;
  /// The Philox words of each (dropout, row slot, 32-column group).
  llvm::DenseMap<std::tuple<Operation *, int64_t, int64_t>,
                 std::array<Value, 4>>
      dropoutWords;
};

} // namespace

EpilogueBuilder::EpilogueBuilder(KernelBuilder &b, const KernelPlan &plan,
                                 const KernelValues &values,
                                 ValueRange accumulators)
    : b(b), plan(plan), values(values),
      accumulators(accumulators.begin(), accumulators.end()), op(plan.op),
      dims(op) {
  // Row r + 64i + 8h' of fragment i of warp v, lane l: r = 16v + l / 4.
  Value rowInFragment =
      b.add(b.mul(values.warp, b.i32(16)), b.divu(values.lane, b.i32(4)));
  Value firstRow = b.add(values.rowBase, rowInFragment);
  for (int64_t h = 0; h < numRowSlots(); ++h)
    rows.push_back(b.add(firstRow, b.i32(64 * (h / 2) + 8 * (h % 2))));
  // Column 8j + 2(l % 4) + e for slot c = 2j + e.
  Value firstCol =
      b.add(values.colBase, b.mul(b.remu(values.lane, b.i32(4)), b.i32(2)));
  for (int64_t c = 0; c < numColSlots(); ++c)
    cols.push_back(b.add(firstCol, b.i32(8 * (c / 2) + c % 2)));
}

Value EpilogueBuilder::inBounds(unsigned mask, int64_t h, int64_t c) {
  Value inside;
  auto conjoin = [&](Value cond) {
    inside = inside ? b.andi(inside, cond) : cond;
  };
  if (mask & DimsAttr::kM)
    conjoin(b.ult(rows[h], values.m));
  if (mask & DimsAttr::kN)
    conjoin(b.ult(cols[c], values.n));
  return inside;
}

Value EpilogueBuilder::linearIndex(unsigned mask, int64_t h, int64_t c) {
  Value index;
  auto append = [&](Value coord, Value size) {
    index = index ? b.add(b.mul(index, b.wide(size)), b.wide(coord))
                  : b.wide(coord);
  };
  if (mask & DimsAttr::kB)
    append(values.batch, values.batchCount);
  if (mask & DimsAttr::kM)
    append(rows[h], values.m);
  if (mask & DimsAttr::kN)
    append(cols[c], values.n);
  return index;
}

Value EpilogueBuilder::loadSlot(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  Type f32 = b.getF32Type();
  auto load = [&]() -> Value {
    Value element = LLVM::LoadOp::create(
        b, elementType, b.gep(pointer, elementType, linearIndex(mask, h, c)));
    if (elementType == f32)
      return element;
    return arith::ExtFOp::create(b, f32, element);
  };
  Value inside = inBounds(mask, h, c);
  if (!inside)
    return load();
  return b.ifThenElse(inside, f32, load, [&] { return b.f32(0.0); });
}

Value EpilogueBuilder::pairFits(Value pointer, Type elementType,
                                unsigned mask, int64_t h, int64_t c) {
  int64_t pairBytes = 2 * elementType.getIntOrFloatBitWidth() / 8;
  if (!nIsEven)
    nIsEven = b.eq(b.andi(values.n, b.i32(1)), b.i32(0));
  Value &aligned = pairAligned[pointer];
  if (!aligned) {
    Value address = LLVM::PtrToIntOp::create(b, b.getI64Type(), pointer);
    aligned = b.eq(b.andi(address, b.i64(pairBytes - 1)), b.i64(0));
  }
  Value fits = b.andi(b.andi(nIsEven, aligned),
                      b.ult(b.add(cols[c], b.i32(1)), values.n));
  if (mask & DimsAttr::kM)
    fits = b.andi(fits, b.ult(rows[h], values.m));
  return fits;
}

Value EpilogueBuilder::loadInput(Value pointer, Type elementType,
                                 unsigned mask, int64_t h, int64_t c) {
  if (!(mask & DimsAttr::kN))
    return loadSlot(pointer, elementType, mask, h, c);
  int64_t even = c & ~int64_t{1};
  auto key = std::make_tuple(pointer, h, even);
  auto it = pairs.find(key);
  if (it == pairs.end()) {
    Type f32 = b.getF32Type();
    auto ifOp = scf::IfOp::create(b, TypeRange{f32, f32},
                                  pairFits(pointer, elementType, mask, h, even),
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value vector = LLVM::LoadOp::create(
          b, VectorType::get({2}, elementType),
          b.gep(pointer, elementType, linearIndex(mask, h, even)));
      if (!elementType.isF32())
        vector = arith::ExtFOp::create(b, VectorType::get({2}, f32), vector);
      scf::YieldOp::create(
          b, ValueRange{LLVM::ExtractElementOp::create(b, vector, b.i32(0)),
                        LLVM::ExtractElementOp::create(b, vector, b.i32(1))});
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(
          b, ValueRange{loadSlot(pointer, elementType, mask, h, even),
                        loadSlot(pointer, elementType, mask, h, even + 1)});
    }
    it = pairs
             .try_emplace(key, std::make_pair(ifOp.getResult(0),
                                              ifOp.getResult(1)))
             .first;
  }
  return c == even ? it->second.first : it->second.second;
}

void EpilogueBuilder::storePair(Value first, Value second, Value pointer,
                                Type elementType, unsigned mask, int64_t h,
                                int64_t c) {
  Value fits = pairFits(pointer, elementType, mask, h, c);
  // An output that does not span m is written by the thread that holds
  // row 0 (see storeSlot).
  if (!(mask & DimsAttr::kM))
    fits = b.andi(fits, b.eq(rows[0], b.i32(0)));
  auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  Type f32 = b.getF32Type();
  auto vectorType = VectorType::get({2}, f32);
  Value vector = LLVM::UndefOp::create(b, vectorType);
  vector = LLVM::InsertElementOp::create(b, vector, first, b.i32(0));
  vector = LLVM::InsertElementOp::create(b, vector, second, b.i32(1));
  if (!elementType.isF32())
    vector = arith::TruncFOp::create(b, VectorType::get({2}, elementType),
                                     vector);
  LLVM::StoreOp::create(b, vector,
                        b.gep(pointer, elementType, linearIndex(mask, h, c)));
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  storeSlot(first, pointer, elementType, mask, h, c);
  storeSlot(second, pointer, elementType, mask, h, c + 1);
}

void EpilogueBuilder::storeSlot(Value value, Value pointer, Type elementType,
                                unsigned mask, int64_t h, int64_t c) {
  Value cond = inBounds(mask, h, c);
  auto conjoin = [&](Value more) { cond = cond ? b.andi(cond, more) : more; };
  // An output that does not span m (n) is uniform along it: only the
  // threads that hold row 0 (column 0) of the output write it.
  if (!(mask & DimsAttr::kM))
    conjoin(b.eq(rows[0], b.i32(0)));
  if (!(mask & DimsAttr::kN))
    conjoin(b.eq(cols[0], b.i32(0)));
  auto store = [&] {
    Value element = value;
    if (elementType != element.getType())
      element = arith::TruncFOp::create(b, elementType, element);
    LLVM::StoreOp::create(b, element,
                          b.gep(pointer, elementType, linearIndex(mask, h, c)));
  };
  if (cond)
    b.ifThen(cond, store);
  else
    store();
}

void EpilogueBuilder::accumulateColumn(ColReduceOp reduce, Value pointer,
                                       unsigned mask, int64_t c) {
  ReductionKind kind = reduce.getKind();
  bool isMax = kind == ReductionKind::Max;
  Value identity =
      b.f32(isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  auto combine = [&](Value x, Value y) -> Value {
    if (isMax)
      return arith::MaximumFOp::create(b, x, y);
    return arith::AddFOp::create(b, x, y);
  };
  // The thread's rows, then the 8 lanes l ^ 4k that hold the warp's other
  // rows of this column.
  Value total;
  for (int64_t h = 0; h < numRowSlots(); ++h) {
    Value x = arith::SelectOp::create(b, inBounds(DimsAttr::kM, h, c),
                                      at(reduce.getInput(), h, c), identity);
    total = total ? combine(total, x) : x;
  }
  for (int32_t offset : {4, 8, 16})
    total = combine(total, gpu::ShuffleOp::create(b, total, offset, 32,
                                                  gpu::ShuffleMode::XOR)
                               .getShuffleResult());
  // A mean sums each element divided by M.
  if (kind == ReductionKind::Mean)
    total = arith::DivFOp::create(
        b, total, arith::UIToFPOp::create(b, b.getF32Type(), values.m));
  Value writes =
      b.andi(b.ult(values.lane, b.i32(4)), inBounds(DimsAttr::kN, 0, c));
  b.ifThen(writes, [&] {
    LLVM::AtomicRMWOp::create(
        b, isMax ? LLVM::AtomicBinOp::fmax : LLVM::AtomicBinOp::fadd,
        b.gep(pointer, b.getF32Type(), linearIndex(mask, 0, c)), total,
        LLVM::AtomicOrdering::monotonic);
  });
}

Value EpilogueBuilder::at(Value v, int64_t h, int64_t c) {
  unsigned mask = dims.getMask(v);
  if (!(mask & DimsAttr::kM))
    h = 0;
  if (!(mask & DimsAttr::kN))
    c = 0;
  auto key = std::make_tuple(v, h, c);
  if (Value known = built.lookup(key))
    return known;

  Value result;
  if (v == op.getAccumulator()) {
    result = computeAccumulator(h, c);
  } else if (auto arg = dyn_cast<BlockArgument>(v)) {
    unsigned i = arg.getArgNumber() - 1;
    auto type = dyn_cast<RankedTensorType>(op.getInputs()[i].getType());
    result = type ? loadInput(values.inputs[i], type.getElementType(), mask,
                              h, c)
                  : values.inputs[i];
  } else if (auto reduce = v.getDefiningOp<RowReduceOp>()) {
    result = computeRowReduce(reduce, h);
  } else if (auto dropout = v.getDefiningOp<DropoutOp>()) {
    result = computeDropout(dropout, h, c);
  } else {
    computeElementwise(*v.getDefiningOp(), h, c);
    return built.lookup(key);
  }
  built[key] = result;
  return result;
}

Value EpilogueBuilder::computeAccumulator(int64_t h, int64_t c) {
  // alpha * acc + beta * C, in the reference lowering's order.
  Value acc = LLVM::ExtractValueOp::create(b, accumulators[h / 2],
                                           4 * (c / 2) + 2 * (h % 2) + c % 2);
  if (values.alpha)
    acc = arith::MulFOp::create(b, acc, values.alpha);
  if (Value c0 = op.getC()) {
    Value cValue = loadInput(
        values.c, cast<RankedTensorType>(c0.getType()).getElementType(),
        op.getOutputSpaceDims().getMask(), h, c);
    if (values.beta)
      cValue = arith::MulFOp::create(b, cValue, values.beta);
    acc = arith::AddFOp::create(b, acc, cValue);
  }
  return acc;
}

Value EpilogueBuilder::computeRowReduce(RowReduceOp reduce, int64_t h) {
  ReductionKind kind = reduce.getKind();
  Value input = reduce.getInput();
  Value n = arith::UIToFPOp::create(b, b.getF32Type(), values.n);
  if (!(dims.getMask(input) & DimsAttr::kN)) {
    // Uniform along the row: the max and mean are the value, the sum is the
    // value times N.
    Value x = at(input, h, 0);
    return kind == ReductionKind::Sum ? arith::MulFOp::create(b, x, n) : x;
  }
  auto combine = [&](Value x, Value y) -> Value {
    if (kind == ReductionKind::Max)
      return arith::MaximumFOp::create(b, x, y);
    return arith::AddFOp::create(b, x, y);
  };
  Value identity = b.f32(kind == ReductionKind::Max
                             ? -std::numeric_limits<double>::infinity()
                             : 0.0);
  Value total;
  for (int64_t c = 0; c < numColSlots(); ++c) {
    Value x = arith::SelectOp::create(b, inBounds(DimsAttr::kN, h, c),
                                      at(input, h, c), identity);
    total = total ? combine(total, x) : x;
  }
  // The lanes l ^ 1, l ^ 2 and l ^ 3 hold the rest of the row.
  for (int32_t offset : {1, 2})
    total = combine(total, gpu::ShuffleOp::create(b, total, offset, 32,
                                                  gpu::ShuffleMode::XOR)
                               .getShuffleResult());
  if (kind == ReductionKind::Mean)
    total = arith::DivFOp::create(b, total, n);
  return total;
}

Value EpilogueBuilder::computeDropout(DropoutOp dropout, int64_t h, int64_t c) {
  // Slot c = 2j + e is column 8j + 2(l % 4) + e: the slots c / 8 = q of a row
  // share one Philox call, and the slice each takes depends only on
  // 8(j % 4) + e.
  auto key = std::make_tuple(dropout.getOperation(), h, c / 8);
  auto it = dropoutWords.find(key);
  if (it == dropoutWords.end())
    it = dropoutWords
             .try_emplace(key, buildDropoutWords(
                                   b, b.getLoc(), at(dropout.getSeed(), h, c),
                                   dropout.getStream(), values.batch, rows[h],
                                   cols[c]))
             .first;
  Value bits = buildDropoutSlice(b, b.getLoc(), it->second,
                                 b.i32(8 * ((c / 2) % 4) + c % 2));
  return buildDropoutApply(b, b.getLoc(), at(dropout.getInput(), h, c), bits,
                           dropout.getThreshold());
}

void EpilogueBuilder::computeElementwise(Operation &inner, int64_t h,
                                         int64_t c) {
  SmallVector<Value> operands;
  for (Value operand : inner.getOperands())
    operands.push_back(at(operand, h, c));
  SmallVector<Value> results;
  if (auto act = dyn_cast<ActivationOp>(inner)) {
    results.push_back(
        buildActivation(b, b.getLoc(), act.getKind(), operands[0]));
  } else {
    IRMapping mapping;
    mapping.map(inner.getOperands(), operands);
    llvm::append_range(results, b.clone(inner, mapping)->getResults());
  }
  for (auto [result, value] : llvm::zip(inner.getResults(), results))
    built[std::make_tuple(result, h, c)] = value;
}

void EpilogueBuilder::build() {
  // Group by group of the 8 column slots one Philox call serves, row slot by
  // row slot, a pair of column slots at a time, every output that spans
  // them: values that vary only along n (a bias) and a row's Philox words die
  // after their group, and the accumulator registers free up group by group.
  ValueRange yielded = op.getYield().getValues();
  for (int64_t group = 0; group < numColSlots(); group += 8) {
    for (int64_t h = 0; h < numRowSlots(); ++h) {
     for (int64_t c = group; c < group + 8; c += 2) {
      for (auto [i, value] : llvm::enumerate(yielded)) {
        unsigned mask = op.getResultDimsAt(i).getMask();
        if ((!(mask & DimsAttr::kM) && h != 0) ||
            (!(mask & DimsAttr::kN) && c != 0))
          continue;
        if (auto reduce = value.getDefiningOp<ColReduceOp>()) {
          accumulateColumn(reduce, values.outputs[i], mask, c);
          accumulateColumn(reduce, values.outputs[i], mask, c + 1);
          continue;
        }
        Type type =
            cast<RankedTensorType>(op.getResult(i).getType()).getElementType();
        if (!(mask & DimsAttr::kN)) {
          storeSlot(at(value, h, c), values.outputs[i], type, mask, h, c);
          continue;
        }
        Value first = at(value, h, c);
        storePair(first, at(value, h, c + 1), values.outputs[i], type, mask,
                  h, c);
      }
     }
    }
  }
}

void mlir::coda::buildEpilogue(OpBuilder &builder, Location loc,
                               const KernelPlan &plan,
                               const KernelValues &values,
                               ValueRange accumulators) {
  KernelBuilder b(loc, builder);
  EpilogueBuilder(b, plan, values, accumulators).build();
}
