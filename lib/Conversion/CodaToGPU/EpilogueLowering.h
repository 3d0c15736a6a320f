//===- EpilogueLowering.h - epilogues on accumulator registers --*- C++ -*-===//
//
// Internal to the GPU lowering: how coda-lower-tile-epilogues runs the region
// of a coda.tile_epilogue on the accumulator fragment each consumer thread
// holds. EpilogueBuilder (Epilogue.cpp) walks the thread's slots and owns the
// loads and stores (EpilogueMemory.cpp); each family of epilogue ops is
// lowered by an EpiloguePattern in a file of its own (ElementwisePatterns,
// DropoutPatterns, ReductionPatterns), so that a new op family is a new
// pattern file and its test.
//
// A consumer thread holds 2 rows of each of its m64nN wgmma fragments
// (h = 2i + h': rows r + 64i + 8h') and N / 4 columns (c = 2j + e: columns
// 8j + 2(l % 4) + e) of its warpgroup's accumulator: its slots. With an
// accumulator [m, n/2], each column j of the product is output columns 2j
// (the product) and 2j + 1 (zero): the thread has twice the column slots,
// c = 4j + 2e + f for output column 16j + 4(l % 4) + 2e + f, in runs of 4
// contiguous columns. An epilogue
// value is built at a slot when an output first needs it there, once per
// distinct slot along the dims it varies along (EpilogueDims), so a bias is
// loaded once per column slot, a per-row value once per row slot, a scalar
// once, and few values are live at a time.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELOWERING_H
#define CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELOWERING_H

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"

#include <memory>

namespace mlir::coda {

class EpilogueBuilder;

/// Lowers one family of epilogue ops onto the thread's slots.
class EpiloguePattern {
public:
  virtual ~EpiloguePattern() = default;
  /// Builds the results of `op` at row slot h, column slot c (both 0 along
  /// a dim the results do not vary along) and records them with
  /// EpilogueBuilder::define; fails, building nothing, if the pattern does
  /// not lower `op`.
  virtual LogicalResult buildValue(Operation *op, int64_t h, int64_t c,
                                   EpilogueBuilder &builder) const {
    return failure();
  }
  /// Writes output `i`, which receives `value`, at the 8 column slots of
  /// column group `group` and row slot h; fails, building nothing, if the
  /// pattern does not write such an output (the builder then stores it).
  virtual LogicalResult buildOutput(unsigned i, Value value, int64_t group,
                                    int64_t h, EpilogueBuilder &builder) const {
    return failure();
  }
};

/// The patterns of an epilogue lowering, tried in order.
using EpiloguePatterns = SmallVector<std::unique_ptr<EpiloguePattern>>;

/// coda.dropout, and a sum with a dropout's result (DropoutPatterns.cpp).
void populateDropoutPatterns(EpiloguePatterns &patterns);
/// coda.row_reduce, coda.col_reduce and coda.group_reduce
/// (ReductionPatterns.cpp).
void populateReductionPatterns(EpiloguePatterns &patterns);
/// Under row partials (ReductionPatterns.cpp): `partial` (null at the first
/// column group) combined with the thread's slots of column group `group` at
/// row slot h of `reduce`'s input.
Value accumulateRowPartial(RowReduceOp reduce, int64_t group, int64_t h,
                           Value partial, EpilogueBuilder &builder);
/// The tile's partial result of a row: the thread's `partial` of a reduction
/// of `kind` combined with its quad's.
Value combineRowAcrossQuad(ReductionKind kind, Value partial,
                           EpilogueBuilder &builder);
/// The tile's sum over row slot h of centering(x - shift), for x the input
/// of `shiftReduce` (a centered reduction's values, RowStatistics), combined
/// across the quad.
Value sumCenteredRow(RowReduceOp shiftReduce,
                     RowStatistics::Centering centering, Value shift, int64_t h,
                     EpilogueBuilder &builder);
/// Writes `total`, the tile's partial result of row slot h, into `scratch`
/// (KernelABI's RowPartials: at [batch][column tile][row]), from lane 0 of
/// the quad, for rows inside M.
void storeRowPartial(Value scratch, int64_t h, Value total,
                     EpilogueBuilder &builder);
/// coda.partner and coda.coord (PositionPatterns.cpp).
void populatePositionPatterns(EpiloguePatterns &patterns);
/// coda.activation, coda.activation_derivative and every scalar arith and
/// math op (ElementwisePatterns.cpp), products with an accumulator
/// [m, n/2]'s absent columns first; it lowers any op of those dialects, so
/// it comes last.
void populateElementwisePatterns(EpiloguePatterns &patterns);

/// Builds the epilogue of one coda.tile_epilogue for the calling thread.
class EpilogueBuilder {
public:
  /// `interior`: the caller has checked that the consumer's rows and the
  /// tile's columns are inside the output, N is a multiple of 8 and every
  /// tensor is 16-byte aligned (isInterior); then no access needs a check.
  /// `statistics`: under row partials, the epilogue's row statistics (null
  /// otherwise).
  EpilogueBuilder(KernelBuilder &b, TileEpilogueOp op,
                  const KernelValues &values, ValueRange accumulators,
                  bool interior, const EpiloguePatterns &patterns,
                  const RowStatistics *statistics);

  /// Whether the calling consumer's part of the tile is interior (see the
  /// constructor).
  static Value isInterior(KernelBuilder &b, TileEpilogueOp op,
                          const KernelValues &values);

  /// Builds every output; fails (with an error on the op) if no pattern
  /// lowers one of the epilogue's ops.
  LogicalResult build();

  // For the patterns.

  KernelBuilder &getBuilder() { return b; }
  TileEpilogueOp getOp() { return op; }
  KernelPlanAttr getPlan() const { return plan; }
  const KernelValues &getValues() const { return values; }
  const EpilogueDims &getDims() const { return dims; }
  int64_t numRowSlots() const { return 2 * (plan.getConsumerRows() / 64); }
  int64_t numColSlots() const { return plan.getTileN() / 4 * (halfN ? 2 : 1); }
  /// The zero that an accumulator [m, n/2] holds at the odd output columns
  /// (null without one): no value of the product, so that a product with it
  /// is zero whatever the other factor is (AbsentColumnPattern folds it: an
  /// activation's gradient at a pair's second column, say).
  Value getAbsentZero() const { return absentZero; }
  /// The output row of row slot h and column of column slot c (i32).
  Value getRow(int64_t h) const { return rows[h]; }
  Value getCol(int64_t c) const { return cols[c]; }
  /// The row of row slot h within the tile (i32, below tile_m).
  Value getRowInTile(int64_t h) {
    return b.remu(rows[h], b.i32(plan.getTileM()));
  }
  /// The index (i32) of the next exchange of row partial results across a
  /// cluster along N among all of the block's: each tile makes one per
  /// row reduction of a row-varying value (build() makes them first, in
  /// the region's order, so that both copies of the epilogue make the same
  /// ones), `ordinal * that count + the exchanges so far`.
  Value takeRowExchange();
  /// How many row exchanges the epilogue makes.
  int64_t numRowExchanges() const { return rowExchanges.size(); }

  /// The epilogue value `v` at row slot `h`, column slot `c`, built the first
  /// time it is asked for.
  Value at(Value v, int64_t h, int64_t c);
  /// Records `value` as `result` at the slot (as at() passes it).
  void define(Value result, int64_t h, int64_t c, Value value) {
    built[std::make_tuple(result, h, c)] = value;
  }
  /// Drops the values built so far that vary along n, the column groups
  /// loaded and the shared values, so that each is built again where it is
  /// next asked for. The row reduction of an epilogue that makes one
  /// exchange across a cluster calls it after that exchange: the values of
  /// every slot it summed are then recomputed from the accumulator and
  /// inputs loaded again (from L2) as the outputs need them, rather than
  /// held in registers across the exchange, where they spilled (an RMSNorm's
  /// forward and backward). With two exchanges (LayerNorm's mean and
  /// variance) the inputs would be loaded three times: measured slower at
  /// 768 columns, so those keep their values.
  void forgetValuesAlongN();
  /// Values a pattern builds once per (op, row slot, key) and shares
  /// between slots (a dropout's Philox words per column group, say).
  SmallVector<Value, 4> &getShared(Operation *owner, int64_t h, int64_t key) {
    return shared[std::make_tuple(owner, h, key)];
  }

  /// Whether the slot is inside the output, along the dims of `mask`; null
  /// when that needs no check.
  Value inBounds(unsigned mask, int64_t h, int64_t c);
  /// Whether output column `col` (i32) of the tile is inside the output;
  /// null in an interior tile, whose columns all are.
  Value columnInBounds(Value col);
  /// `x` at the slot if it is inside the output along `mask`, else `other`.
  Value selectInBounds(unsigned mask, int64_t h, int64_t c, Value x,
                       Value other);
  /// The address of the slot in `pointer`'s tensor: its row slot's address
  /// (built once, at the top of the epilogue) plus a constant.
  Value slotAddress(Value pointer, Type elementType, int64_t h, int64_t c);

private:
  /// The element offset of row slot h, column `col`, in a dense tensor
  /// spanning `mask`.
  Value linearIndex(unsigned mask, int64_t h, Value col);
  /// The address of this lane's 16-byte chunk of column group `group` (the
  /// columns it writes after the quad transpose) at row slot h.
  Value chunkAddress(Value pointer, Type elementType, int64_t h, int64_t group);
  Value computeAccumulator(int64_t h, int64_t c);
  /// Under row partials: writes the tile's partial result of each row
  /// reduction at each row slot, from the thread's `rowPartials` (by
  /// reduction, then row slot; null for centered reductions, whose values
  /// are centered on the tile's own shift here).
  void storeRowPartials(ArrayRef<SmallVector<Value>> rowPartials);

  // Loads and stores (EpilogueMemory.cpp).

  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output).
  Value loadSlot(Value pointer, Type elementType, unsigned mask, int64_t h,
                 int64_t c);
  /// Loads the slot of a tensor spanning `mask` as f32 (zero outside the
  /// output); along n, from its column group (loadGroup).
  Value loadInput(Value pointer, Type elementType, unsigned mask, int64_t h,
                  int64_t c);
  /// Loads the slot of epilogue input `arg`, which spans n mod `period`
  /// (within `mask`), as f32: its column col mod period, whatever the slot's
  /// bounds (the values outside the output are never written).
  Value loadPeriodic(BlockArgument arg, Type elementType, unsigned mask,
                     unsigned period, int64_t h, int64_t c);
  /// The 4 pairs (raw, see packPair) of column group `group` at row slot h
  /// of a tensor spanning n, issued the first time they are asked for
  /// (issueGroup).
  SmallVector<Value, 4> loadGroup(Value pointer, Type elementType,
                                  unsigned mask, int64_t h, int64_t group);
  /// Issues the loads of column group `group` at row slot h of a tensor
  /// spanning n, once: with the plan's chunked_loads, for a 16-bit tensor
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
  /// Stores column group `group` of row slot h of a 16-bit output spanning m
  /// and n whose rows do not start on 16-byte boundaries (an odd N, say):
  /// lane t holds the 8 columns of its chunk (`words`, after the quad
  /// transpose; `previous`, those of the group before, or null), and writes
  /// the aligned 16 bytes that end inside its chunk, made of the previous
  /// chunk's last columns and its own first ones, with one store; element
  /// by element where they leave the tile's columns or the output.
  void storeShiftedChunk(ArrayRef<Value> words, ArrayRef<Value> previous,
                         Value pointer, int64_t h, int64_t group);
  /// Stores the 4 even slots of column group `group` (`evens[j]` is slot
  /// 8 group + 2j) of row slot h of an output spanning n/2: column 2k at
  /// element k.
  void storeEvenColumns(ArrayRef<Value> evens, Value pointer, Type elementType,
                        unsigned mask, int64_t h, int64_t group);
  /// Stores the 8 slots `group` of row slot h of an output spanning [m, n
  /// halves] beside an accumulator [m, n/2]: each pair's first column in
  /// the output's first half, its second in the other, two adjacent pairs
  /// with one access to each half where they fit.
  void storeHalves(ArrayRef<Value> slots, Value pointer, Type elementType,
                   unsigned mask, int64_t h, int64_t group);
  /// Issues the loads of column group `group` at row slot h of every tensor
  /// input that spans n (and of C); those that do not span m at h = 0.
  void prefetchGroup(int64_t group, int64_t h);
  /// Whether 16-bit outputs are written 16 bytes per lane (not with an
  /// accumulator [m, n/2], whose slots are read and written by pairs).
  bool usesChunks(Type elementType) const {
    return !halfN && plan.getEpilogueVectorBytes() == 16 &&
           elementType.getIntOrFloatBitWidth() == 16;
  }
  /// The column offset of slot c from slot 0.
  int64_t slotOffset(int64_t c) const {
    return halfN ? 16 * (c / 4) + c % 4 : 8 * (c / 2) + c % 2;
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
  /// Stores `value` at `address`, truncated to `elementType`, where `cond`
  /// holds (always without one).
  void storeElement(Value value, Value address, Type elementType, Value cond);
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

  KernelBuilder &b;
  TileEpilogueOp op;
  KernelPlanAttr plan;
  const KernelValues &values;
  SmallVector<Value> accumulators;
  EpilogueDims dims;
  bool interior;
  /// Whether the accumulator spans [m, n/2] (see the slots above).
  bool halfN;
  /// See getAbsentZero.
  Value absentZero;
  const EpiloguePatterns &patterns;
  /// Whether an op had no pattern (build then fails).
  bool unlowered = false;
  /// Under row partials: the epilogue's row statistics, whose outputs the
  /// merge kernel writes.
  const RowStatistics *statistics;
  /// The row reductions that exchange partial results across a cluster
  /// along N, and how many have.
  SmallVector<RowReduceOp> rowExchanges;
  int64_t rowExchangesTaken = 0;
  /// The addition of the bias the accumulators start at (see
  /// KernelPlan::biasAdd), or null.
  Operation *biasAdd = nullptr;
  /// The output rows and columns of the thread's slots (i32).
  SmallVector<Value> rows, cols;
  /// Epilogue values built so far, by (value, row slot, column slot); a
  /// value that does not vary along m (n) is kept at row (column) slot 0.
  llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, Value> built;
  /// See getShared.
  llvm::DenseMap<std::tuple<Operation *, int64_t, int64_t>,
                 SmallVector<Value, 4>>
      shared;
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
  /// The chunk words (after the quad transpose) of the group last stored at
  /// each (output, row slot), for storeShiftedChunk's next group.
  llvm::DenseMap<std::pair<Value, int64_t>, SmallVector<Value, 4>> storedChunks;
};

/// A tensor the epilogue reads or writes: its pointer, element type and dims.
struct EpilogueTensor {
  Value pointer;
  Type elementType;
  unsigned mask;
  bool isOutput;
};

/// The element type of a tensor type.
Type getElementType(Type tensorType);

/// The outputs, C and the tensor inputs of the kernel that the epilogue of
/// `op` reads (a bias the accumulators start at, epilogue input
/// `biasInput`, is not).
SmallVector<EpilogueTensor> getTensors(EpilogueOpInterface op,
                                       int64_t biasInput,
                                       const KernelValues &values,
                                       const EpilogueDims &dims);

/// The element offset of (batch, row, col) in a dense tensor spanning `mask`
/// (`row` may be null when it does not span m); with a `period`, of p
/// columns read at col mod p (a power of 2).
Value getLinearIndex(KernelBuilder &b, const KernelValues &values,
                     unsigned mask, Value batch, Value row, Value col,
                     unsigned period = 0);

/// The column tiles of a row, ceil(N / tileN) (i32).
Value countColumnTiles(KernelBuilder &b, const KernelValues &values,
                       int64_t tileN);

/// The element offset, in a RowPartials scratch ([batch][column tile][row],
/// `tiles` column tiles), of column tile `tile`'s partial result of `row` of
/// `batch` (all i32); the kernel writes it and the row merge reads it.
Value getRowPartialIndex(KernelBuilder &b, const KernelValues &values,
                         Value tiles, Value batch, Value tile, Value row);

/// The columns inside the output of the tileN-wide tile that starts at
/// column `first` (i32), as f32: tileN but in the last column tile.
Value countTileColumns(KernelBuilder &b, const KernelValues &values,
                       int64_t tileN, Value first);

/// Replaces `op` by the code that runs its epilogue on every accumulator
/// element the calling thread holds and stores the outputs, with `patterns`;
/// fails, leaving the kernel invalid, if they do not lower one of its ops.
LogicalResult lowerTileEpilogue(RewriterBase &rewriter, TileEpilogueOp op,
                                const EpiloguePatterns &patterns);

/// `accumulators` through an empty inline asm that LLVM cannot see through
/// (see Epilogue.cpp).
SmallVector<Value> hideFromHoisting(KernelBuilder &b, ValueRange accumulators);

} // namespace mlir::coda

#endif // CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELOWERING_H
