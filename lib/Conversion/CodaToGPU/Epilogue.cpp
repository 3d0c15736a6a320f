//===- Epilogue.cpp - the epilogue walk over the thread's slots -----------===//
//
// Runs the region of a coda.tile_epilogue on the accumulator fragment each
// thread holds after the main loop, and writes every output element once
// (see EpilogueLowering.h for the slots). Values are built on demand, slot by
// slot in store order, by the epilogue patterns of each op family; this file
// holds the walk, the slots' coordinates and addresses, the accumulator (with
// alpha and C) and the inputs.
//
// Outputs are written column group by column group: the 8 slots of a row in
// one 32-column group, which one Philox call serves (the 8 columns 32q + 8j'
// + 2(l % 4) + {0, 1}, j' = 0..3, that coda.dropout's definition groups) and
// which the 4 lanes of a quad (l / 4 equal) hold as 4 pairs each. The loads
// of a step (a group at one row slot) are issued three steps ahead, so that
// their latency hides behind the arithmetic in between (EpilogueMemory.cpp).
//
// The epilogue is built twice: a warp whose rows and tile columns are all
// inside the output, with N a multiple of 8 and every tensor 16-byte aligned
// (decided by a warp vote, so that ptxas sees a uniform branch) runs a copy
// without bounds or alignment checks; the others check every access. Every
// address is a row slot's address, computed once, plus a constant. Inputs
// the region does not read are neither loaded nor prefetched.
//
// Under row partials (row statistics merged after the GEMM), the walk also
// combines each row reduction's input group by group as it goes, and the
// tile's partial results are written at the end; the outputs computed from
// the statistics are left to the merge kernel.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::coda;

Type mlir::coda::getElementType(Type tensorType) {
  return cast<RankedTensorType>(tensorType).getElementType();
}

SmallVector<EpilogueTensor> mlir::coda::getTensors(EpilogueOpInterface op,
                                                   int64_t biasInput,
                                                   const KernelValues &values,
                                                   const EpilogueDims &dims) {
  SmallVector<EpilogueTensor> tensors;
  for (auto [i, pointer] : llvm::enumerate(values.outputs))
    tensors.push_back({pointer, getElementType(op.getEpilogueOutputType(i)),
                       op.getResultDimsAt(i).getMask(), /*isOutput=*/true});
  if (Type c = op.getEpilogueCType())
    tensors.push_back({values.c, getElementType(c),
                       op.getOutputSpaceDims().getMask(), /*isOutput=*/false});
  for (unsigned i = 0, e = op.getNumEpilogueInputs(); i < e; ++i) {
    BlockArgument arg = op.getInputArg(i);
    Type type = op.getEpilogueInputType(i);
    bool inAccumulators =
        static_cast<int64_t>(i) == biasInput && arg.hasOneUse();
    // An input that spans n mod p is read element by element
    // (EpilogueBuilder::loadPeriodic).
    if (isa<RankedTensorType>(type) && !arg.use_empty() && !inAccumulators &&
        !op.getInputDimsAt(i).isPeriodic())
      tensors.push_back({values.inputs[i], getElementType(type),
                         dims.getMask(arg), /*isOutput=*/false});
  }
  return tensors;
}

Value mlir::coda::getLinearIndex(KernelBuilder &b, const KernelValues &values,
                                 unsigned mask, Value batch, Value row,
                                 Value col, unsigned period) {
  Value index;
  auto append = [&](Value coord, Value size) {
    index = index ? b.add(b.mul(index, b.wide(size)), b.wide(coord))
                  : b.wide(coord);
  };
  if (mask & DimsAttr::kB)
    append(batch, values.batchCount);
  if (mask & DimsAttr::kM)
    append(row, values.m);
  if (period)
    append(b.andi(col, b.i32(period - 1)), b.i32(period));
  else if (mask & DimsAttr::kHalfN)
    append(b.shru(col, b.i32(1)), b.shru(values.n, b.i32(1)));
  else if (mask & DimsAttr::kHalves)
    // The pair's column in the output's first half (storeHalves).
    append(b.shru(col, b.i32(1)), values.n);
  else if (mask & DimsAttr::kN)
    append(col, values.n);
  return index;
}

Value mlir::coda::countColumnTiles(KernelBuilder &b, const KernelValues &values,
                                   int64_t tileN) {
  return b.divu(b.add(values.n, b.i32(tileN - 1)), b.i32(tileN));
}

Value mlir::coda::getRowPartialIndex(KernelBuilder &b,
                                     const KernelValues &values, Value tiles,
                                     Value batch, Value tile, Value row) {
  Value rows = arith::MulIOp::create(
      b, b.wide(b.add(b.mul(batch, tiles), tile)), b.wide(values.m));
  return arith::AddIOp::create(b, rows, b.wide(row));
}

Value mlir::coda::countTileColumns(KernelBuilder &b, const KernelValues &values,
                                   int64_t tileN, Value first) {
  Value columns =
      arith::MinUIOp::create(b, b.i32(tileN), b.sub(values.n, first));
  return arith::UIToFPOp::create(b, b.getF32Type(), columns);
}

/// Whether the integer `x` (i32 or i64) is a multiple of `k` (a power of 2).
static Value isMultipleOf(KernelBuilder &b, Value x, int64_t k) {
  auto constant = [&](int64_t value) {
    return arith::ConstantIntOp::create(b, x.getType(), value);
  };
  return b.eq(b.andi(x, constant(k - 1)), constant(0));
}

/// Whether `pointer` is aligned to `bytes` (a power of 2).
static Value isAlignedTo(KernelBuilder &b, Value pointer, int64_t bytes) {
  return isMultipleOf(b, LLVM::PtrToIntOp::create(b, b.getI64Type(), pointer),
                      bytes);
}

Value EpilogueBuilder::isInterior(KernelBuilder &b, TileEpilogueOp op,
                                  const KernelValues &values) {
  KernelPlanAttr plan = op.getPlan();
  auto notAfter = [&](Value last, Value size) {
    return b.cmp(arith::CmpIPredicate::ule, last, size);
  };
  // With an accumulator [m, n/2], the tile's output columns start at
  // 2 colBase and are twice tile_n.
  int64_t widen = op.getAccumulatorHalfN() ? 2 : 1;
  Value interior = b.andi(
      notAfter(b.add(values.rowBase, b.i32(plan.getConsumerRows())), values.m),
      notAfter(
          b.mul(b.add(values.colBase, b.i32(plan.getTileN())), b.i32(widen)),
          values.n));
  interior = b.andi(interior, isMultipleOf(b, values.n, 8));
  for (const EpilogueTensor &tensor :
       getTensors(op, plan.getBiasInput(), values, EpilogueDims(op)))
    interior = b.andi(interior, isAlignedTo(b, tensor.pointer, 16));
  // The same for the whole warp; a vote says so to ptxas, which then keeps
  // the epilogue's shuffles out of divergence handling.
  return NVVM::VoteSyncOp::create(
      b, b.getI1Type(), b.i32(-1), interior,
      NVVM::VoteSyncKindAttr::get(b.getContext(), NVVM::VoteSyncKind::all));
}

EpilogueBuilder::EpilogueBuilder(KernelBuilder &b, TileEpilogueOp op,
                                 const KernelValues &values,
                                 ValueRange accumulators, bool interior,
                                 const EpiloguePatterns &patterns,
                                 const RowStatistics *statistics)
    : b(b), op(op), plan(op.getPlan()), values(values),
      accumulators(accumulators.begin(), accumulators.end()), dims(op),
      interior(interior), halfN(op.getAccumulatorHalfN()), patterns(patterns),
      statistics(statistics) {
  if (plan.getBiasInput() >= 0)
    biasAdd = *op.getAccumulator().user_begin();
  if (halfN)
    absentZero = b.f32(0.0);
  if (plan.getClusterN() > 1)
    for (auto reduce : op.getEpilogueBlock().getOps<RowReduceOp>())
      if (dims.getMask(reduce.getInput()) & DimsAttr::kN)
        rowExchanges.push_back(reduce);
  // Row r + 64i + 8h' of fragment i of warp v, lane l: r = 16v + l / 4.
  Value rowInFragment =
      b.add(b.mul(values.warp, b.i32(16)), b.divu(values.lane, b.i32(4)));
  Value firstRow = b.add(values.rowBase, rowInFragment);
  for (int64_t h = 0; h < numRowSlots(); ++h)
    rows.push_back(b.add(firstRow, b.i32(64 * (h / 2) + 8 * (h % 2))));
  // Column 8j + 2(l % 4) + e for slot c = 2j + e; with an accumulator
  // [m, n/2], 16j + 4(l % 4) + 2e + f from 2 colBase for slot 4j + 2e + f.
  Value quad = b.remu(values.lane, b.i32(4));
  Value firstCol =
      halfN ? b.add(b.mul(values.colBase, b.i32(2)), b.mul(quad, b.i32(4)))
            : b.add(values.colBase, b.mul(quad, b.i32(2)));
  for (int64_t c = 0; c < numColSlots(); ++c)
    cols.push_back(b.add(firstCol, b.i32(slotOffset(c))));
  // The alignment facts are built here, at the epilogue's top level, so
  // that every access may use them (unused ones fold away).
  nIsEven = isMultipleOf(b, values.n, 2);
  nIsMultipleOf8 = isMultipleOf(b, values.n, 8);
  // Lane t's chunk starts at column 8t = firstCol + 6t.
  Value chunkShift = b.wide(b.mul(b.remu(values.lane, b.i32(4)), b.i32(6)));
  for (const EpilogueTensor &tensor :
       getTensors(op, plan.getBiasInput(), values, dims)) {
    Value pointer = tensor.pointer;
    for (int64_t bytes : {4, 8, 16})
      aligned[{pointer, bytes}] = isAlignedTo(b, pointer, bytes);
    Addresses &entry = addresses[pointer];
    entry.mask = tensor.mask;
    for (int64_t h = 0; h < numRowSlots(); ++h) {
      Value row = b.gep(pointer, tensor.elementType,
                        linearIndex(tensor.mask, h, cols[0]));
      entry.rows.push_back(row);
      if ((tensor.mask & DimsAttr::kN) &&
          tensor.elementType.getIntOrFloatBitWidth() == 16)
        entry.chunks.push_back(b.gep(row, tensor.elementType, chunkShift));
    }
  }
}

Value EpilogueBuilder::inBounds(unsigned mask, int64_t h, int64_t c) {
  if (interior)
    return Value();
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

Value EpilogueBuilder::columnInBounds(Value col) {
  return interior ? Value() : b.ult(col, values.n);
}

Value EpilogueBuilder::selectInBounds(unsigned mask, int64_t h, int64_t c,
                                      Value x, Value other) {
  Value inside = inBounds(mask, h, c);
  return inside ? arith::SelectOp::create(b, inside, x, other) : x;
}

Value EpilogueBuilder::slotAddress(Value pointer, Type elementType, int64_t h,
                                   int64_t c) {
  // A tensor that does not span n has one element per row.
  const Addresses &entry = addresses.find(pointer)->second;
  int64_t offset = (entry.mask & DimsAttr::kN) ? slotOffset(c) : 0;
  Value row = entry.rows[h];
  return offset ? b.gep(row, elementType, b.i64(offset)) : row;
}

Value EpilogueBuilder::chunkAddress(Value pointer, Type elementType, int64_t h,
                                    int64_t group) {
  Value chunk = addresses.find(pointer)->second.chunks[h];
  return group ? b.gep(chunk, elementType, b.i64(32 * group)) : chunk;
}

Value EpilogueBuilder::linearIndex(unsigned mask, int64_t h, Value col) {
  return getLinearIndex(b, values, mask, values.batch, rows[h], col);
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

  if (v == op.getAccumulator()) {
    define(v, h, c, computeAccumulator(h, c));
  } else if (auto arg = dyn_cast<BlockArgument>(v)) {
    unsigned i = arg.getArgNumber() - 1;
    auto type = dyn_cast<RankedTensorType>(op.getEpilogueInputType(i));
    DimsAttr inputDims = op.getInputDimsAt(i);
    define(
        v, h, c,
        !type ? values.inputs[i]
        : inputDims.isPeriodic()
            ? loadPeriodic(arg, type.getElementType(), mask,
                           inputDims.getPeriod(), h, c)
            : loadInput(values.inputs[i], type.getElementType(), mask, h, c));
  } else if (v.getDefiningOp() == biasAdd) {
    // The accumulators started at the bias: they hold the sum.
    define(v, h, c,
           LLVM::ExtractValueOp::create(b, accumulators[h / 2],
                                        4 * (c / 2) + 2 * (h % 2) + c % 2));
  } else {
    Operation *inner = v.getDefiningOp();
    if (llvm::none_of(patterns, [&](const auto &pattern) {
          return succeeded(pattern->buildValue(inner, h, c, *this));
        })) {
      // Reported once; the slot gets a placeholder so that the walk ends.
      if (!unlowered)
        inner->emitOpError()
            << "cannot run on the accumulator registers: no epilogue pattern "
               "of the GPU lowering lowers it";
      unlowered = true;
      for (Value result : inner->getResults())
        define(result, h, c, LLVM::PoisonOp::create(b, result.getType()));
    }
  }
  return built.lookup(key);
}

void EpilogueBuilder::forgetValuesAlongN() {
  SmallVector<std::tuple<Value, int64_t, int64_t>> alongN;
  for (const auto &entry : built)
    if (dims.getMask(std::get<0>(entry.first)) & DimsAttr::kN)
      alongN.push_back(entry.first);
  for (const auto &key : alongN)
    built.erase(key);
  loadedGroups.clear();
  shared.clear();
}

Value EpilogueBuilder::computeAccumulator(int64_t h, int64_t c) {
  // With an accumulator [m, n/2], the odd output columns are absent (zero)
  // and the even ones the product's slot c / 2.
  int64_t slot = halfN ? c / 2 : c;
  // alpha * acc + beta * C, in the reference lowering's order.
  Value acc = halfN && c % 2 ? absentZero
                             : LLVM::ExtractValueOp::create(
                                   b, accumulators[h / 2],
                                   4 * (slot / 2) + 2 * (h % 2) + slot % 2)
                                   .getResult();
  if (values.alpha && acc != absentZero)
    acc = arith::MulFOp::create(b, acc, values.alpha);
  if (Type cType = op.getEpilogueCType()) {
    Value cValue = loadInput(values.c, getElementType(cType),
                             op.getOutputSpaceDims().getMask(), h, c);
    if (values.beta)
      cValue = arith::MulFOp::create(b, cValue, values.beta);
    acc = arith::AddFOp::create(b, acc, cValue);
  }
  return acc;
}

void EpilogueBuilder::storeRowPartials(
    ArrayRef<SmallVector<Value>> rowPartials) {
  using Centering = RowStatistics::Centering;
  ArrayRef<RowReduceOp> reductions = statistics->getReductions();
  for (int64_t h = 0; h < numRowSlots(); ++h) {
    // Each reduction's tile result; a shift's is also what its centered
    // reduction's values are centered on: the tile's mean (of the columns
    // inside the output), which the tile writes, or its maximum.
    SmallVector<Value> tileShift(reductions.size());
    for (auto [k, reduce] : llvm::enumerate(reductions)) {
      int64_t shift = statistics->getShift(k);
      Value total;
      if (shift < 0) {
        total = combineRowAcrossQuad(RowReduceOp(reduce).getKind(),
                                     rowPartials[k][h], *this);
        int64_t centered = statistics->getCenteredOn(k);
        if (centered >= 0 &&
            statistics->getCentering(centered) == Centering::Square)
          total = arith::DivFOp::create(
              b, total,
              countTileColumns(b, values, plan.getTileN(), values.colBase));
        tileShift[k] = total;
      } else {
        total = sumCenteredRow(reductions[shift], statistics->getCentering(k),
                               tileShift[shift], h, *this);
      }
      storeRowPartial(values.rowPartials[k], h, total, *this);
    }
  }
}

Value EpilogueBuilder::takeRowExchange() {
  int64_t count = rowExchanges.size();
  return b.add(b.mul(values.ordinal, b.i32(count)), b.i32(rowExchangesTaken++));
}

/// The order in which the walk visits the `groups` column groups of `op`'s
/// tile: in order, except that in an interior tile a group whose slots read
/// a partner's in another group (coda.partner at a distance d >= 32: the
/// group d / 32 away) is visited next to that group, so that the values its
/// partner builds ahead are not held across the groups between them. The
/// bits of a group's index that partners flip become its lowest bits in the
/// order. A checked tile keeps the order: a row that does not start on a 16-
/// byte boundary stores each chunk with the end of the one before it.
static SmallVector<int64_t> getGroupOrder(TileEpilogueOp op, int64_t groups,
                                          bool interior) {
  SmallVector<int64_t> order = llvm::to_vector(llvm::seq<int64_t>(0, groups));
  uint64_t flipped = 0;
  for (auto partner : op.getEpilogueBlock().getOps<PartnerOp>())
    if (partner.getDistance() >= 32)
      flipped |= static_cast<uint64_t>(partner.getDistance() / 32);
  if (!interior || !flipped)
    return order;
  auto key = [&](int64_t group) {
    uint64_t index = group, low = 0, high = 0;
    unsigned lowBits = 0, highBits = 0;
    for (unsigned bit = 0; bit < 64; ++bit) {
      uint64_t value = (index >> bit) & 1;
      if ((flipped >> bit) & 1)
        low |= value << lowBits++;
      else
        high |= value << highBits++;
    }
    return (high << lowBits) | low;
  };
  llvm::stable_sort(order,
                    [&](int64_t x, int64_t y) { return key(x) < key(y); });
  return order;
}

LogicalResult EpilogueBuilder::build() {
  // The row exchanges first, in order (see takeRowExchange).
  for (RowReduceOp reduce : rowExchanges)
    at(reduce.getResult(), 0, 0);

  // Under row partials, each row reduction's partial result of each row
  // slot, combined group by group as the walk computes its input.
  SmallVector<SmallVector<Value>> rowPartials;
  if (statistics)
    rowPartials.assign(statistics->getReductions().size(),
                       SmallVector<Value>(numRowSlots()));

  // Column group by column group (the 8 slots one Philox call serves), row
  // slot by row slot, every output that spans them: values that vary only
  // along n (a bias) and a row's Philox words die after their group, and the
  // accumulator registers free up group by group. The inputs of the step
  // (group, row slot) three steps ahead are loaded before a step is computed.
  ValueRange yielded = op.getYield().getValues();
  int64_t groups = numColSlots() / 8, steps = groups * numRowSlots();
  SmallVector<int64_t> order = getGroupOrder(op, groups, interior);
  constexpr int64_t kPrefetchSteps = 3;
  auto prefetchStep = [&](int64_t step) {
    if (step < steps)
      prefetchGroup(order[step / numRowSlots()], step % numRowSlots());
  };
  for (int64_t step = 0; step < kPrefetchSteps; ++step)
    prefetchStep(step);
  for (int64_t visit = 0; visit < groups; ++visit) {
    int64_t group = order[visit];
    for (int64_t h = 0; h < numRowSlots(); ++h) {
      prefetchStep(visit * numRowSlots() + h + kPrefetchSteps);
      for (unsigned i = 0, e = yielded.size(); i < e; ++i) {
        Value value = yielded[i];
        unsigned mask = op.getResultDimsAt(i).getMask();
        if ((!(mask & DimsAttr::kM) && h != 0) ||
            (!(mask & DimsAttr::kN) && group != 0) ||
            (statistics && statistics->isMerged(i)))
          continue;
        if (llvm::any_of(patterns, [&](const auto &pattern) {
              return succeeded(pattern->buildOutput(i, value, group, h, *this));
            }))
          continue;
        Type type = getElementType(op.getEpilogueOutputType(i));
        if (mask & DimsAttr::kHalfN) {
          // Only the even columns are written (and computed).
          SmallVector<Value> evens;
          for (int64_t c = 8 * group; c < 8 * group + 8; c += 2)
            evens.push_back(at(value, h, c));
          storeEvenColumns(evens, values.outputs[i], type, mask, h, group);
          continue;
        }
        if (!(mask & DimsAttr::kN)) {
          storeSlot(at(value, h, 0), values.outputs[i], type, mask, h, 0);
          continue;
        }
        SmallVector<Value> slots;
        for (int64_t c = 8 * group; c < 8 * group + 8; ++c)
          slots.push_back(at(value, h, c));
        if (mask & DimsAttr::kHalves)
          storeHalves(slots, values.outputs[i], type, mask, h, group);
        else
          storeGroup(slots, values.outputs[i], type, mask, h, group);
      }
      if (statistics)
        for (auto [k, reduce] : llvm::enumerate(statistics->getReductions()))
          if (statistics->getShift(k) < 0)
            rowPartials[k][h] = accumulateRowPartial(reduce, group, h,
                                                     rowPartials[k][h], *this);
    }
  }
  if (statistics)
    storeRowPartials(rowPartials);
  return failure(unlowered);
}

/// `accumulators` through an empty inline asm that LLVM cannot see through:
/// otherwise it hoists the arithmetic both copies of the epilogue do on them
/// alike (an activation of the accumulator, say) above the branch between
/// the copies, where all of it is live at once and spills. Emits no
/// instruction but the copies that give values used twice their own
/// registers, there rather than at the next use (a wgmma's).
SmallVector<Value> mlir::coda::hideFromHoisting(KernelBuilder &b,
                                                ValueRange accumulators) {
  SmallVector<Value> hidden;
  for (Value fragment : accumulators) {
    auto type = cast<LLVM::LLVMStructType>(fragment.getType());
    int64_t size = type.getBody().size();
    SmallVector<Value> elements;
    std::string constraints;
    for (int64_t i = 0; i < size; ++i) {
      elements.push_back(LLVM::ExtractValueOp::create(b, fragment, i));
      constraints += "=f,";
    }
    for (int64_t i = 0; i < size; ++i)
      constraints += std::to_string(i) + (i + 1 < size ? "," : "");
    hidden.push_back(LLVM::InlineAsmOp::create(
                         b, type, elements, b.getStringAttr(""),
                         b.getStringAttr(constraints),
                         /*has_side_effects=*/nullptr,
                         /*is_align_stack=*/nullptr, LLVM::TailCallKindAttr(),
                         /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr)
                         .getResult(0));
  }
  return hidden;
}

LogicalResult mlir::coda::lowerTileEpilogue(RewriterBase &rewriter,
                                            TileEpilogueOp op,
                                            const EpiloguePatterns &patterns) {
  std::optional<RowStatistics> statistics;
  if (!op.getRowPartials().empty())
    statistics = RowStatistics::get(op, EpilogueDims(op));
  if (!op.getRowPartials().empty() && !statistics)
    return op.emitOpError()
           << "has row_partials, but its row reductions are not row "
              "statistics (whose results reach only outputs along [m], "
              "through scalar arith and math ops): they cannot be merged "
              "after the GEMM; drop row_partials and run them in a cluster "
              "along N";
  OpBuilder::InsertionGuard guard(rewriter);
  KernelBuilder b(op.getLoc(), rewriter);
  KernelValues values;
  // The thread's place in its warpgroup, computed once as the kernel starts,
  // beside the main loop's (which cse then merges with these).
  Block &entry =
      op->getParentOfType<FunctionOpInterface>().getFunctionBody().front();
  auto threadId = llvm::find_if(
      entry, [](Operation &inner) { return isa<gpu::ThreadIdOp>(inner); });
  b.setInsertionPoint(&entry, threadId == entry.end()
                                  ? entry.begin()
                                  : threadId->getIterator());
  values.threadId = b.index32(gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  values.lane = b.remu(values.threadId, b.i32(32));
  values.warp = b.remu(b.divu(values.threadId, b.i32(32)), b.i32(4));
  values.warpgroup = b.divu(values.threadId, b.i32(128));
  b.setInsertionPoint(op);
  values.batch = op.getBatch();
  values.rowBase = op.getRow();
  values.colBase = op.getCol();
  values.m = op.getM();
  values.n = op.getN();
  values.batchCount = op.getBatches();
  values.c = op.getC();
  values.alpha = op.getAlpha();
  values.beta = op.getBeta();
  llvm::append_range(values.inputs, op.getInputs());
  llvm::append_range(values.outputs, op.getOutputs());
  llvm::append_range(values.rowPartials, op.getRowPartials());
  values.exchange = op.getExchange();
  values.ordinal = op.getOrdinal();
  // Interior tiles (all but the last row and column of tiles, for aligned
  // tensors) run a copy of the epilogue without bounds or alignment checks.
  auto ifOp = scf::IfOp::create(b, EpilogueBuilder::isInterior(b, op, values),
                                /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  const RowStatistics *merged = statistics ? &*statistics : nullptr;
  if (failed(EpilogueBuilder(b, op, values, op.getAccumulators(),
                             /*interior=*/true, patterns, merged)
                 .build()))
    return failure();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  if (failed(EpilogueBuilder(b, op, values,
                             hideFromHoisting(b, op.getAccumulators()),
                             /*interior=*/false, patterns, merged)
                 .build()))
    return failure();
  rewriter.eraseOp(op);
  return success();
}
