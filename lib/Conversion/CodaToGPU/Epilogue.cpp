//===- Epilogue.cpp - the coda.gemm region on accumulator registers -------===//
//
// Runs the epilogue of a coda.gemm on the accumulator fragment each thread
// holds after the main loop, and writes every output element once.
//
// A consumer thread holds 2 rows of each of its m64nN wgmma fragments
// (h = 2i + h': rows r + 64i + 8h') and N / 4 columns (c = 2j + e: columns
// 8j + 2(l % 4) + e) of its warpgroup's accumulator. The epilogue is built on
// demand, slot by slot in store order: an epilogue value is computed at a slot
// when an output first needs it there, and once per distinct slot along the
// dims it varies along (EpilogueDims), so a bias is loaded once per column
// slot, a per-row value once per row slot, a scalar once, and few values are
// live at a time. Dropout draws one Philox call per 8 elements: the 8 columns
// 32q + 8j' + 2(l % 4) + {0, 1} (j' = 0..3) of one row that coda.dropout's
// definition groups are exactly 8 slots of one thread. Row reductions combine
// the thread's columns, then the 4 lanes that share a row (N must fit one
// tile). Column reductions combine the thread's rows, then the 8 lanes that
// share a column, and each warp adds its partial result to the f32 output
// with an atomic (the runtime initializes it, see KernelABI.h).
//
// Tensors that span n are read and written a column group at a time: the 8
// slots of a row in one 32-column group, which the 4 lanes of a quad (l / 4
// equal) hold as 4 pairs each (columns 32g + 8j' + 2(l % 4) + {0, 1}). Each
// pair of adjacent columns is read with one access (4 or 8 bytes) when inside
// the tensor and aligned, else element by element; the loads of a step (a
// group at one row slot) are issued three steps ahead, so that their latency
// hides behind the arithmetic in between. For 16-bit outputs with
// epilogue-vector-bytes = 16, the quad regroups its pairs by shuffles (a
// 4 x 4 transpose of 32-bit words) so that lane t writes the 16 contiguous
// bytes of columns 32g + 8t .. 32g + 8t + 7 when the whole group is inside
// the output and aligned; otherwise, and for f32, pair by pair. dropout(x) + y
// selects between x * scale + y and y, which saves the product's own
// instruction (the sum contracts into an fma).
//
// The epilogue is built twice: a warp whose rows and tile columns are all
// inside the output, with N a multiple of 8 and every tensor 16-byte aligned
// (decided by a warp vote, so that ptxas sees a uniform branch) runs a copy
// without bounds or alignment checks; the others check every access. Every
// address is a row slot's address, computed once, plus a constant. Three K
// steps before a tile's main loop ends, the consumer warpgroup prefetches its
// rows of the tensors read along m and n into L2, a 128-byte line per thread
// at a time (buildEpiloguePrefetch). Inputs the region does not read are
// neither loaded nor prefetched.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/EpilogueMath.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Builds the epilogue of one kernel.
class EpilogueBuilder {
public:
  /// `interior`: the caller has checked that the consumer's rows and the
  /// tile's columns are inside the output, N is a multiple of 8 and every
  /// tensor is 16-byte aligned (isInterior); then no access needs a check.
  EpilogueBuilder(KernelBuilder &b, TileEpilogueOp op,
                  const KernelValues &values, ValueRange accumulators,
                  bool interior);

  /// Whether the calling consumer's part of the tile is interior (see the
  /// constructor).
  static Value isInterior(KernelBuilder &b, TileEpilogueOp op,
                          const KernelValues &values);

  void build();

private:
  int64_t numRowSlots() const { return 2 * (plan.getConsumerRows() / 64); }
  int64_t numColSlots() const { return plan.getTileN() / 4; }

  /// Whether the slot is inside the output, along the dims of `mask`; null
  /// when that needs no check.
  Value inBounds(unsigned mask, int64_t h, int64_t c);
  /// `x` at the slot if it is inside the output along `mask`, else `other`.
  Value selectInBounds(unsigned mask, int64_t h, int64_t c, Value x,
                       Value other);
  /// The element offset of row slot h, column `col`, in a dense tensor
  /// spanning `mask`.
  Value linearIndex(unsigned mask, int64_t h, Value col);
  /// The address of the slot in `pointer`'s tensor: its row slot's address
  /// (built once, at the top of the epilogue) plus a constant.
  Value slotAddress(Value pointer, Type elementType, int64_t h, int64_t c);
  /// The address of this lane's 16-byte chunk of column group `group` (the
  /// columns it writes after the quad transpose) at row slot h.
  Value chunkAddress(Value pointer, Type elementType, int64_t h, int64_t group);
  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output).
  Value loadSlot(Value pointer, Type elementType, unsigned mask, int64_t h,
                 int64_t c);
  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output); along n, from its column group (loadGroup).
  Value loadInput(Value pointer, Type elementType, unsigned mask, int64_t h,
                  int64_t c);
  /// The 4 pairs (raw, see packPair) of column group `group` at row slot h
  /// of a tensor spanning n, issued the first time they are asked for
  /// (issueGroup).
  SmallVector<Value, 4> loadGroup(Value pointer, Type elementType,
                                  unsigned mask, int64_t h, int64_t group);
  /// Issues the loads of column group `group` at row slot h of a tensor
  /// spanning n, once: with KernelPlan::chunkedLoads, for a 16-bit tensor
  /// spanning m and n, this lane's 16-byte chunk where the group fits, which
  /// loadGroup regroups into the lane's pairs; else the pairs themselves (a
  /// vector along n is read once per group for all rows, and measured
  /// slower as chunks).
  void issueGroup(Value pointer, Type elementType, unsigned mask, int64_t h,
                  int64_t group);
  /// Loads the pair of slots c, c + 1 (c even), raw; zero outside.
  Value loadPair(Value pointer, Type elementType, unsigned mask, int64_t h,
                 int64_t c);
  /// Stores the 8 slots `group` of row slot h of an output spanning n.
  void storeGroup(ArrayRef<Value> slots, Value pointer, Type elementType,
                  unsigned mask, int64_t h, int64_t group);
  /// Issues the loads of column group `group` at row slot h of every tensor
  /// input that spans n (and of C); those that do not span m at h = 0.
  void prefetchGroup(int64_t group, int64_t h);
  /// Whether 16-bit outputs are written 16 bytes per lane.
  bool usesChunks(Type elementType) const {
    return plan.getEpilogueVectorBytes() == 16 &&
           elementType.getIntOrFloatBitWidth() == 16;
  }
  /// Whether the quad's whole column group `group` at row slot h is inside
  /// the output and its 16-byte chunks are aligned (the same for the 4 lanes
  /// of a quad); null in an interior tile, where it is.
  Value groupFits(Value pointer, unsigned mask, int64_t h, int64_t group);
  /// A pair of f32 values in the element type, as one value: an i32 for
  /// 16-bit types, a vector<2xf32> for f32; and back.
  Value packPair(Value first, Value second, Type elementType);
  std::pair<Value, Value> unpackPair(Value raw, Type elementType);
  /// The 4 x 4 transpose of 32-bit words across the 4 lanes of a quad: word
  /// j of lane t becomes word t of lane j.
  SmallVector<Value> transposeQuad(ArrayRef<Value> words);
  /// Whether `pointer` (a tensor input, C or an output) is aligned to
  /// `bytes` (4, 8 or 16).
  Value isAligned(Value pointer, int64_t bytes);
  /// Stores the slot of the output spanning `mask`, if this thread writes it.
  void storeSlot(Value value, Value pointer, Type elementType, unsigned mask,
                 int64_t h, int64_t c);
  /// Builds `wide` (one access for several slots) where `fits` holds (null:
  /// everywhere), else `narrow`; for an output that does not span m, only in
  /// the lanes that hold row 0.
  void storeWide(unsigned mask, Value fits, function_ref<void()> wide,
                 function_ref<void()> narrow);
  /// Stores slots c and c + 1 (c even) of an output spanning n, if this
  /// thread writes them.
  void storePair(Value first, Value second, Value pointer, Type elementType,
                 unsigned mask, int64_t h, int64_t c);
  /// Whether slots c and c + 1 (c even) of a tensor spanning `mask` (with n)
  /// are both inside the output and their address is aligned to a pair;
  /// null in an interior tile, where they are.
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
  /// The 16 random bits that decide `dropout` at the slot.
  Value dropoutBits(DropoutOp dropout, int64_t h, int64_t c);
  /// Clones `inner` at the slot and records all its results there.
  void computeElementwise(Operation &inner, int64_t h, int64_t c);

  KernelBuilder &b;
  TileEpilogueOp op;
  KernelPlanAttr plan;
  const KernelValues &values;
  SmallVector<Value> accumulators;
  EpilogueDims dims;
  /// The addition of the bias the accumulators start at (see
  /// KernelPlan::biasAdd), or null.
  Operation *biasAdd = nullptr;
  bool interior;
  /// The output rows and columns of the thread's slots (i32).
  SmallVector<Value> rows, cols;
  /// Epilogue values built so far, by (value, row slot, column slot); a
  /// value that does not vary along m (n) is kept at row (column) slot 0.
  llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, Value> built;
  /// Column groups loaded so far, by (pointer, row slot, group): their pairs,
  /// or the 16-byte chunk and whether it fits (null in an interior tile)
  /// until they are regrouped at their first use.
  struct LoadedGroup {
    SmallVector<Value, 4> pairs;
    Value chunk, fits;
  };
  llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, LoadedGroup> loadedGroups;
  /// Whether N is even (then pairs of an even column are aligned in any
  /// tensor that spans n) and a multiple of 8 (then 16-bit chunks of 8
  /// columns are), and whether a pointer is aligned, by (pointer, bytes).
  Value nIsEven, nIsMultipleOf8;
  llvm::DenseMap<std::pair<Value, int64_t>, Value> aligned;
  /// How each tensor (by pointer) is addressed: its dims, the address of its
  /// slot 0 at each row slot (column 2(l % 4)), and for 16-bit tensors that
  /// span n, of this lane's first chunk (column 8(l % 4)).
  struct Addresses {
    unsigned mask = 0;
    SmallVector<Value> rows, chunks;
  };
  llvm::DenseMap<Value, Addresses> addresses;
  /// The Philox words of each (dropout, row slot, 32-column group).
  llvm::DenseMap<std::tuple<Operation *, int64_t, int64_t>,
                 std::array<Value, 4>>
      dropoutWords;
};

} // namespace

namespace {
/// A tensor the epilogue reads or writes: its pointer, element type and dims.
struct EpilogueTensor {
  Value pointer;
  Type elementType;
  unsigned mask;
  bool isOutput;
};
} // namespace

/// The element type of a tensor type.
static Type getElementType(Type tensorType) {
  return cast<RankedTensorType>(tensorType).getElementType();
}

/// The outputs, C and the tensor inputs of the kernel that the epilogue of
/// `op` reads (a bias the accumulators start at, epilogue input
/// `biasInput`, is not).
static SmallVector<EpilogueTensor> getTensors(EpilogueOpInterface op,
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
    if (isa<RankedTensorType>(type) && !arg.use_empty() && !inAccumulators)
      tensors.push_back({values.inputs[i], getElementType(type),
                         dims.getMask(arg), /*isOutput=*/false});
  }
  return tensors;
}

/// The element offset of (batch, row, col) in a dense tensor spanning `mask`.
static Value getLinearIndex(KernelBuilder &b, const KernelValues &values,
                            unsigned mask, Value batch, Value row, Value col) {
  Value index;
  auto append = [&](Value coord, Value size) {
    index = index ? b.add(b.mul(index, b.wide(size)), b.wide(coord))
                  : b.wide(coord);
  };
  if (mask & DimsAttr::kB)
    append(batch, values.batchCount);
  if (mask & DimsAttr::kM)
    append(row, values.m);
  if (mask & DimsAttr::kN)
    append(col, values.n);
  return index;
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
  Value interior = b.andi(
      notAfter(b.add(values.rowBase, b.i32(plan.getConsumerRows())), values.m),
      notAfter(b.add(values.colBase, b.i32(plan.getTileN())), values.n));
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
                                 ValueRange accumulators, bool interior)
    : b(b), op(op), plan(op.getPlan()), values(values),
      accumulators(accumulators.begin(), accumulators.end()), dims(op),
      interior(interior) {
  if (plan.getBiasInput() >= 0)
    biasAdd = *op.getAccumulator().user_begin();
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

Value EpilogueBuilder::selectInBounds(unsigned mask, int64_t h, int64_t c,
                                      Value x, Value other) {
  Value inside = inBounds(mask, h, c);
  return inside ? arith::SelectOp::create(b, inside, x, other) : x;
}

Value EpilogueBuilder::slotAddress(Value pointer, Type elementType, int64_t h,
                                   int64_t c) {
  // Slot c is 8(c / 2) + c % 2 columns right of slot 0; a tensor that does
  // not span n has one element per row.
  const Addresses &entry = addresses.find(pointer)->second;
  int64_t offset = (entry.mask & DimsAttr::kN) ? 8 * (c / 2) + c % 2 : 0;
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

Value EpilogueBuilder::loadSlot(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  Type f32 = b.getF32Type();
  auto load = [&]() -> Value {
    Value element = LLVM::LoadOp::create(
        b, elementType, slotAddress(pointer, elementType, h, c));
    if (elementType == f32)
      return element;
    return arith::ExtFOp::create(b, f32, element);
  };
  Value inside = inBounds(mask, h, c);
  if (!inside)
    return load();
  return b.ifThenElse(inside, f32, load, [&] { return b.f32(0.0); });
}

Value EpilogueBuilder::isAligned(Value pointer, int64_t bytes) {
  return aligned.lookup({pointer, bytes});
}

Value EpilogueBuilder::pairFits(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  if (interior)
    return Value();
  Value fits = b.andi(
      b.andi(nIsEven,
             isAligned(pointer, 2 * elementType.getIntOrFloatBitWidth() / 8)),
      b.ult(b.add(cols[c], b.i32(1)), values.n));
  if (mask & DimsAttr::kM)
    fits = b.andi(fits, b.ult(rows[h], values.m));
  return fits;
}

Value EpilogueBuilder::groupFits(Value pointer, unsigned mask, int64_t h,
                                 int64_t group) {
  if (interior)
    return Value();
  Value lastColumn = b.add(values.colBase, b.i32(32 * group + 31));
  Value fits = b.andi(b.andi(nIsMultipleOf8, isAligned(pointer, 16)),
                      b.ult(lastColumn, values.n));
  if (mask & DimsAttr::kM)
    fits = b.andi(fits, b.ult(rows[h], values.m));
  return fits;
}

Value EpilogueBuilder::packPair(Value first, Value second, Type elementType) {
  Type f32 = b.getF32Type();
  Value vector = LLVM::UndefOp::create(b, VectorType::get({2}, f32));
  vector = LLVM::InsertElementOp::create(b, vector, first, b.i32(0));
  vector = LLVM::InsertElementOp::create(b, vector, second, b.i32(1));
  if (elementType.isF32())
    return vector;
  vector =
      arith::TruncFOp::create(b, VectorType::get({2}, elementType), vector);
  return LLVM::BitcastOp::create(b, b.getI32Type(), vector);
}

std::pair<Value, Value> EpilogueBuilder::unpackPair(Value raw,
                                                    Type elementType) {
  Type f32 = b.getF32Type();
  if (elementType.isBF16()) {
    // A bf16 is the high half of the f32 of the same value: one instruction
    // per element (the extension of a vector moves the high half down first).
    Value low = b.shl(raw, b.i32(16));
    Value high = b.andi(raw, b.i32(0xFFFF0000));
    return {LLVM::BitcastOp::create(b, f32, low),
            LLVM::BitcastOp::create(b, f32, high)};
  }
  Value vector = raw;
  if (!elementType.isF32()) {
    vector = LLVM::BitcastOp::create(b, VectorType::get({2}, elementType), raw);
    vector = arith::ExtFOp::create(b, VectorType::get({2}, f32), vector);
  }
  return {LLVM::ExtractElementOp::create(b, vector, b.i32(0)),
          LLVM::ExtractElementOp::create(b, vector, b.i32(1))};
}

SmallVector<Value> EpilogueBuilder::transposeQuad(ArrayRef<Value> words) {
  // Two exchanges of half the words: with lane t ^ 2 the words j whose bit 1
  // differs from t's (a transpose of 2 x 2 blocks), then with lane t ^ 1 the
  // words whose bit 0 differs from t's (a transpose within the blocks).
  SmallVector<Value> w(words.begin(), words.end());
  for (int64_t bit : {1, 0}) {
    int64_t stride = int64_t{1} << bit;
    Value high =
        b.eq(b.andi(b.shru(values.lane, b.i32(bit)), b.i32(1)), b.i32(1));
    auto select = [&](Value cond, Value x, Value y) -> Value {
      return arith::SelectOp::create(b, cond, x, y);
    };
    SmallVector<Value> next(4);
    // Words j and j + stride (bit `bit` of j clear) trade places with the
    // partner: a lane with the bit clear sends j + stride and keeps j.
    for (int64_t j = 0; j < 4; ++j) {
      if (j & stride)
        continue;
      Value sent = select(high, w[j], w[j + stride]);
      Value received =
          gpu::ShuffleOp::create(b, sent, static_cast<int32_t>(stride), 32,
                                 gpu::ShuffleMode::XOR)
              .getShuffleResult();
      next[j] = select(high, received, w[j]);
      next[j + stride] = select(high, w[j + stride], received);
    }
    w = std::move(next);
  }
  return w;
}

Value EpilogueBuilder::loadPair(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  Type rawType = elementType.isF32()
                     ? Type(VectorType::get({2}, b.getF32Type()))
                     : Type(b.getI32Type());
  auto load = [&]() -> Value {
    return LLVM::LoadOp::create(b, rawType,
                                slotAddress(pointer, elementType, h, c));
  };
  Value fits = pairFits(pointer, elementType, mask, h, c);
  if (!fits)
    return load();
  return b.ifThenElse(fits, rawType, load, [&] {
    return packPair(loadSlot(pointer, elementType, mask, h, c),
                    loadSlot(pointer, elementType, mask, h, c + 1),
                    elementType);
  });
}

void EpilogueBuilder::issueGroup(Value pointer, Type elementType, unsigned mask,
                                 int64_t h, int64_t group) {
  auto [it, inserted] =
      loadedGroups.try_emplace(std::make_tuple(pointer, h, group));
  if (!inserted)
    return;
  LoadedGroup &loaded = it->second;
  if (!plan.getChunkedLoads() || !usesChunks(elementType) ||
      !(mask & DimsAttr::kM)) {
    for (int64_t j = 0; j < 4; ++j)
      loaded.pairs.push_back(
          loadPair(pointer, elementType, mask, h, 8 * group + 2 * j));
    return;
  }
  // One 16-byte access per lane instead of four 4-byte ones: each warp
  // instruction then reads 64 contiguous bytes of each of its 8 rows.
  auto chunkType = VectorType::get({4}, b.getI32Type());
  auto load = [&]() -> Value {
    return LLVM::LoadOp::create(b, chunkType,
                                chunkAddress(pointer, elementType, h, group));
  };
  auto zero = [&]() -> Value { return LLVM::ZeroOp::create(b, chunkType); };
  loaded.fits = groupFits(pointer, mask, h, group);
  loaded.chunk =
      loaded.fits ? b.ifThenElse(loaded.fits, chunkType, load, zero) : load();
}

SmallVector<Value, 4> EpilogueBuilder::loadGroup(Value pointer,
                                                 Type elementType,
                                                 unsigned mask, int64_t h,
                                                 int64_t group) {
  issueGroup(pointer, elementType, mask, h, group);
  LoadedGroup &loaded =
      loadedGroups.find(std::make_tuple(pointer, h, group))->second;
  if (!loaded.pairs.empty())
    return loaded.pairs;
  // Regrouped here, at the first use, so that the shuffles wait for the
  // chunk only when its values are needed: lane t's word j holds the pair
  // that lane j uses at j' = t (the store's transpose, inverted).
  SmallVector<Value> words;
  for (int64_t j = 0; j < 4; ++j)
    words.push_back(LLVM::ExtractElementOp::create(b, loaded.chunk, b.i32(j)));
  SmallVector<Value> pairs = transposeQuad(words);
  for (int64_t j = 0; j < 4; ++j) {
    if (loaded.fits)
      pairs[j] = b.ifThenElse(
          loaded.fits, b.getI32Type(), [&] { return pairs[j]; },
          [&] {
            return loadPair(pointer, elementType, mask, h, 8 * group + 2 * j);
          });
    loaded.pairs.push_back(pairs[j]);
  }
  return loaded.pairs;
}

Value EpilogueBuilder::loadInput(Value pointer, Type elementType, unsigned mask,
                                 int64_t h, int64_t c) {
  if (!(mask & DimsAttr::kN))
    return loadSlot(pointer, elementType, mask, h, c);
  Value raw = loadGroup(pointer, elementType, mask, h, c / 8)[(c % 8) / 2];
  auto [first, second] = unpackPair(raw, elementType);
  return c % 2 ? second : first;
}

void EpilogueBuilder::prefetchGroup(int64_t group, int64_t h) {
  for (const EpilogueTensor &tensor :
       getTensors(op, plan.getBiasInput(), values, dims)) {
    unsigned mask = tensor.mask;
    if (!tensor.isOutput && (mask & DimsAttr::kN) &&
        ((mask & DimsAttr::kM) || h == 0))
      issueGroup(tensor.pointer, tensor.elementType, mask, h, group);
  }
}

void EpilogueBuilder::storePair(Value first, Value second, Value pointer,
                                Type elementType, unsigned mask, int64_t h,
                                int64_t c) {
  storeWide(
      mask, pairFits(pointer, elementType, mask, h, c),
      [&] {
        LLVM::StoreOp::create(b, packPair(first, second, elementType),
                              slotAddress(pointer, elementType, h, c));
      },
      [&] {
        storeSlot(first, pointer, elementType, mask, h, c);
        storeSlot(second, pointer, elementType, mask, h, c + 1);
      });
}

void EpilogueBuilder::storeWide(unsigned mask, Value fits,
                                function_ref<void()> wide,
                                function_ref<void()> narrow) {
  // An output that does not span m is written by the lanes that hold row 0
  // (see storeSlot, which checks that itself).
  Value owner = (mask & DimsAttr::kM) ? Value() : b.eq(rows[0], b.i32(0));
  if (!fits)
    return owner ? b.ifThen(owner, wide) : wide();
  if (owner)
    fits = b.andi(fits, owner);
  auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  wide();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  narrow();
}

void EpilogueBuilder::storeGroup(ArrayRef<Value> slots, Value pointer,
                                 Type elementType, unsigned mask, int64_t h,
                                 int64_t group) {
  auto storePairs = [&] {
    for (int64_t j = 0; j < 4; ++j)
      storePair(slots[2 * j], slots[2 * j + 1], pointer, elementType, mask, h,
                8 * group + 2 * j);
  };
  if (!usesChunks(elementType))
    return storePairs();
  SmallVector<Value> words;
  for (int64_t j = 0; j < 4; ++j)
    words.push_back(packPair(slots[2 * j], slots[2 * j + 1], elementType));
  SmallVector<Value> transposed = transposeQuad(words);
  auto storeChunk = [&] {
    auto chunkType = VectorType::get({4}, b.getI32Type());
    Value chunk = LLVM::UndefOp::create(b, chunkType);
    for (int64_t j = 0; j < 4; ++j)
      chunk = LLVM::InsertElementOp::create(b, chunk, transposed[j], b.i32(j));
    LLVM::StoreOp::create(b, chunk,
                          chunkAddress(pointer, elementType, h, group));
  };
  storeWide(mask, groupFits(pointer, mask, h, group), storeChunk, storePairs);
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
    LLVM::StoreOp::create(b, element, slotAddress(pointer, elementType, h, c));
  };
  if (cond)
    b.ifThen(cond, store);
  else
    store();
}

void EpilogueBuilder::accumulateColumn(ColReduceOp reduce, Value pointer,
                                       unsigned mask, int64_t c) {
  ReductionKind kind = reduce.getKind();
  Value identity = b.f32(getReductionIdentity(kind));
  auto combine = [&](Value x, Value y) {
    return buildReductionCombine(b, b.getLoc(), kind, x, y);
  };
  // The thread's rows, then the 8 lanes l ^ 4k that hold the warp's other
  // rows of this column.
  Value total;
  for (int64_t h = 0; h < numRowSlots(); ++h) {
    Value x = selectInBounds(DimsAttr::kM, h, c, at(reduce.getInput(), h, c),
                             identity);
    total = total ? combine(total, x) : x;
  }
  for (int32_t offset : {4, 8, 16})
    total = combine(total, gpu::ShuffleOp::create(b, total, offset, 32,
                                                  gpu::ShuffleMode::XOR)
                               .getShuffleResult());
  // A mean sums each element divided by M.
  if (reductionDividesByCount(kind))
    total = arith::DivFOp::create(
        b, total, arith::UIToFPOp::create(b, b.getF32Type(), values.m));
  Value writes = b.ult(values.lane, b.i32(4));
  if (Value inside = inBounds(DimsAttr::kN, 0, c))
    writes = b.andi(writes, inside);
  b.ifThen(writes, [&] {
    LLVM::AtomicRMWOp::create(b, getReductionAtomicOp(kind),
                              slotAddress(pointer, b.getF32Type(), 0, c), total,
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
    auto type = dyn_cast<RankedTensorType>(op.getEpilogueInputType(i));
    result =
        type ? loadInput(values.inputs[i], type.getElementType(), mask, h, c)
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
  if (Type cType = op.getEpilogueCType()) {
    Value cValue = loadInput(values.c, getElementType(cType),
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
    return reductionScalesUniformValue(kind) ? arith::MulFOp::create(b, x, n)
                                             : x;
  }
  auto combine = [&](Value x, Value y) {
    return buildReductionCombine(b, b.getLoc(), kind, x, y);
  };
  Value identity = b.f32(getReductionIdentity(kind));
  Value total;
  for (int64_t c = 0; c < numColSlots(); ++c) {
    Value x = selectInBounds(DimsAttr::kN, h, c, at(input, h, c), identity);
    total = total ? combine(total, x) : x;
  }
  // The lanes l ^ 1, l ^ 2 and l ^ 3 hold the rest of the row.
  for (int32_t offset : {1, 2})
    total = combine(total, gpu::ShuffleOp::create(b, total, offset, 32,
                                                  gpu::ShuffleMode::XOR)
                               .getShuffleResult());
  if (reductionDividesByCount(kind))
    total = arith::DivFOp::create(b, total, n);
  return total;
}

Value EpilogueBuilder::computeDropout(DropoutOp dropout, int64_t h, int64_t c) {
  return buildDropoutApply(b, b.getLoc(), at(dropout.getInput(), h, c),
                           dropoutBits(dropout, h, c), dropout.getThreshold());
}

Value EpilogueBuilder::dropoutBits(DropoutOp dropout, int64_t h, int64_t c) {
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
  return buildDropoutSlice(b, b.getLoc(), it->second,
                           b.i32(8 * ((c / 2) % 4) + c % 2));
}

/// The activations' exp2 and division as single approximate instructions
/// (ex2.approx.ftz, div.approx.ftz: within 2 ulp, a denormal input or result
/// flushed to zero) instead of libdevice's and the IEEE division's sequences;
/// with `fast`, GELU(tanh), SiLU and sigmoid on tanh.approx.f32 (relative
/// error up to 2^-11, as cuBLASLt's fused GELU) instead.
static ActivationPrimitives buildGpuActivationPrimitives(bool fast) {
  ActivationPrimitives primitives{
      [](OpBuilder &b, Location loc, Value t) -> Value {
        return LLVM::CallIntrinsicOp::create(
                   b, loc, t.getType(),
                   b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"), t)
            .getResult(0);
      },
      [](OpBuilder &b, Location loc, Value p, Value q) -> Value {
        return LLVM::CallIntrinsicOp::create(
                   b, loc, p.getType(),
                   b.getStringAttr("llvm.nvvm.div.approx.ftz.f"),
                   ValueRange{p, q})
            .getResult(0);
      }};
  if (fast)
    primitives.fastTanh = [](OpBuilder &b, Location loc, Value t) -> Value {
      return LLVM::InlineAsmOp::create(
                 b, loc, t.getType(), ValueRange{t}, "tanh.approx.f32 $0, $1;",
                 "=f,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
                 LLVM::TailCallKind::None, /*asm_dialect=*/nullptr,
                 /*operand_attrs=*/nullptr)
          .getResult(0);
    };
  return primitives;
}

/// The GPU's activation primitives (buildGpuActivationPrimitives), built once.
static const ActivationPrimitives &getGpuActivationPrimitives(bool fast) {
  static const ActivationPrimitives exact = buildGpuActivationPrimitives(false);
  static const ActivationPrimitives fastTanh =
      buildGpuActivationPrimitives(true);
  return fast ? fastTanh : exact;
}

void EpilogueBuilder::computeElementwise(Operation &inner, int64_t h,
                                         int64_t c) {
  // The accumulators started at the bias: they hold the sum.
  if (&inner == biasAdd) {
    built[std::make_tuple(inner.getResult(0), h, c)] =
        LLVM::ExtractValueOp::create(b, accumulators[h / 2],
                                     4 * (c / 2) + 2 * (h % 2) + c % 2);
    return;
  }
  // dropout(x) + y selects between the sum and y rather than between the
  // product and 0: its product and sum contract into one fma.
  if (auto add = dyn_cast<arith::AddFOp>(inner)) {
    for (int i : {0, 1}) {
      auto dropout = add->getOperand(i).getDefiningOp<DropoutOp>();
      if (!dropout)
        continue;
      built[std::make_tuple(add.getResult(), h, c)] = buildDropoutApplyAdd(
          b, b.getLoc(), at(dropout.getInput(), h, c),
          dropoutBits(dropout, h, c), dropout.getThreshold(),
          at(add->getOperand(1 - i), h, c));
      return;
    }
  }
  SmallVector<Value> operands;
  for (Value operand : inner.getOperands())
    operands.push_back(at(operand, h, c));
  SmallVector<Value> results;
  if (auto act = dyn_cast<ActivationOp>(inner)) {
    results.push_back(
        buildActivation(b, b.getLoc(), act.getKind(), operands[0],
                        getGpuActivationPrimitives(plan.getFastActivations())));
  } else if (auto act = dyn_cast<ActivationDerivativeOp>(inner)) {
    results.push_back(buildActivationDerivative(
        b, b.getLoc(), act.getKind(), operands[0],
        getGpuActivationPrimitives(plan.getFastActivations())));
  } else {
    IRMapping mapping;
    mapping.map(inner.getOperands(), operands);
    llvm::append_range(results, b.clone(inner, mapping)->getResults());
  }
  for (auto [result, value] : llvm::zip(inner.getResults(), results))
    built[std::make_tuple(result, h, c)] = value;
}

void EpilogueBuilder::build() {
  // Column group by column group (the 8 slots one Philox call serves), row
  // slot by row slot, every output that spans them: values that vary only
  // along n (a bias) and a row's Philox words die after their group, and the
  // accumulator registers free up group by group. The inputs of the step
  // (group, row slot) three steps ahead are loaded before a step is computed.
  ValueRange yielded = op.getYield().getValues();
  int64_t groups = numColSlots() / 8, steps = groups * numRowSlots();
  constexpr int64_t kPrefetchSteps = 3;
  auto prefetchStep = [&](int64_t step) {
    if (step < steps)
      prefetchGroup(step / numRowSlots(), step % numRowSlots());
  };
  for (int64_t step = 0; step < kPrefetchSteps; ++step)
    prefetchStep(step);
  for (int64_t group = 0; group < groups; ++group) {
    for (int64_t h = 0; h < numRowSlots(); ++h) {
      prefetchStep(group * numRowSlots() + h + kPrefetchSteps);
      for (auto [i, value] : llvm::enumerate(yielded)) {
        unsigned mask = op.getResultDimsAt(i).getMask();
        if ((!(mask & DimsAttr::kM) && h != 0) ||
            (!(mask & DimsAttr::kN) && group != 0))
          continue;
        if (auto reduce = value.getDefiningOp<ColReduceOp>()) {
          for (int64_t c = 8 * group; c < 8 * group + 8; ++c)
            accumulateColumn(reduce, values.outputs[i], mask, c);
          continue;
        }
        Type type = getElementType(op.getEpilogueOutputType(i));
        if (!(mask & DimsAttr::kN)) {
          storeSlot(at(value, h, 0), values.outputs[i], type, mask, h, 0);
          continue;
        }
        SmallVector<Value> slots;
        for (int64_t c = 8 * group; c < 8 * group + 8; ++c)
          slots.push_back(at(value, h, c));
        storeGroup(slots, values.outputs[i], type, mask, h, group);
      }
    }
  }
}

/// `accumulators` through an empty inline asm that LLVM cannot see through:
/// otherwise it hoists the arithmetic both copies of the epilogue do on them
/// alike (an activation of the accumulator, say) above the branch between
/// the copies, where all of it is live at once and spills. Emits no
/// instruction but the copies that give values used twice their own
/// registers, there rather than at the next use (a wgmma's).
static SmallVector<Value> hideFromHoisting(KernelBuilder &b,
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

void mlir::coda::lowerTileEpilogue(RewriterBase &rewriter, TileEpilogueOp op) {
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
  values.threadId = arith::IndexCastUIOp::create(
      b, b.getI32Type(), gpu::ThreadIdOp::create(b, gpu::Dimension::x));
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
  // Interior tiles (all but the last row and column of tiles, for aligned
  // tensors) run a copy of the epilogue without bounds or alignment checks.
  auto ifOp = scf::IfOp::create(b, EpilogueBuilder::isInterior(b, op, values),
                                /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  EpilogueBuilder(b, op, values, op.getAccumulators(), /*interior=*/true)
      .build();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  EpilogueBuilder(b, op, values, hideFromHoisting(b, op.getAccumulators()),
                  /*interior=*/false)
      .build();
  rewriter.eraseOp(op);
}

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
                                       const KernelValues &values) {
  KernelBuilder b(loc, builder);
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
  Value cols = arith::MinUIOp::create(b, b.i32(plan.tile.tileN),
                                      b.sub(values.n, values.colBase));
  for (const EpilogueTensor &tensor : tensors) {
    int64_t bytes = tensor.elementType.getIntOrFloatBitWidth() / 8;
    int64_t linesPerRow = llvm::divideCeil(plan.tile.tileN * bytes, 128);
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
