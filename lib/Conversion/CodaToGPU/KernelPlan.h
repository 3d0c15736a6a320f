//===- KernelPlan.h - the shape of one generated GEMM kernel ----*- C++ -*-===//
//
// Internal to coda-to-gpu. A KernelPlan fixes how one coda.gemm runs on an
// sm_90a GPU: the block tile, how A and B travel (TMA boxes into 128-byte
// swizzled shared memory, read by wgmma through matrix descriptors), the
// pipeline depth and the shared memory it takes. Building one checks that the
// GEMM can run that way and reports, in plain words, why not.
//
// Kernel structure (persistent and warp-specialized; one block per SM):
//  - three warpgroups of 128 threads. Warpgroup 0 is the producer: it lowers
//    its register budget (setmaxnreg) and one of its threads issues the TMA
//    loads of every tile the block computes, K step after K step, into a
//    ring of `stages` shared-memory slots. Warpgroups 1 and 2 are the
//    consumers: they raise their register budget, multiply the slots with
//    asynchronous wgmma instructions into fp32 accumulator registers, and run
//    the epilogue of each tile on those registers;
//  - each slot has a "full" mbarrier (armed with the TMA byte count,
//    completed by the TMA unit) and an "empty" mbarrier (every consumer
//    thread that read the slot arrives once its wgmmas have retired); the
//    producer refills a slot as soon as it is empty, so it loads the next
//    tile's first K steps while the consumers run the epilogue;
//  - the blocks walk the output tiles persistently (tile = blockIdx.x, then
//    every gridDim.x-th), in a grouped order (the raster): `groupRows` row
//    blocks at a time, column by column, so that the blocks running at once
//    share A and B tiles in L2;
//  - with cluster-m = 2 the blocks run in clusters of two that walk units of
//    two vertically adjacent tiles (the block of rank r takes row block
//    2u + r): their B tile is the same, and each block loads half of its
//    boxes into both blocks' slots (TMA multicast). A slot is then written
//    by both producers, so its empty barrier counts the consumer threads of
//    both blocks (each thread arrives in one of them);
//  - with cluster-n = R > 1 (row reductions over rows wider than a tile) the
//    blocks run in clusters of R that walk row blocks, the block of rank r
//    taking the row block's column block r; each row reduction of the
//    epilogue combines the thread's columns and its quad's (as in one
//    tile), then exchanges the row's partial result with the other blocks
//    through distributed shared memory (RowExchangeLayout) and combines the
//    R partial results in rank order, so that every block of the row gets
//    the same, deterministic, result;
//  - a consumer warpgroup holds `consumerRows` (64 or 128) rows of a tile as
//    one or two m64nNk16 (m64nNk8 for tf32) wgmma D fragments: lane l of warp
//    v holds rows 64i + 16v + l/4 + {0, 8} of fragment i, columns
//    8j + 2(l%4) + {0, 1} for every j. Cooperative: both consumers share a
//    tile, consumer c taking rows [c * consumerRows, (c+1) * consumerRows).
//    Ping-pong: each consumer computes whole tiles, taking every other tile
//    of the block, so that one's epilogue overlaps the other's main loop;
//  - the epilogue runs the coda.gemm region on the accumulator registers and
//    writes each output element once (bounds checks only in the last row and
//    column of tiles); the consumers prefetch the tile's C and residual-like
//    inputs into L2 three K steps before the tile's main loop ends.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H
#define CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Kernel/KernelABI.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::coda {

/// The tunable part of the kernel (coda-to-gpu's options): the kernel shape
/// and the epilogue's stores. A value of 0 (or no schedule) lets
/// KernelPlan::build choose.
struct TileConfig : KernelShape {
  /// The widest epilogue store to a 16-bit output per lane: 16 (a chunk of
  /// 8 columns, regrouped within each quad of lanes) or 4 (a pair).
  int64_t epilogueVectorBytes = 0;
};

/// How one GEMM operand (A or B) is loaded and read.
struct OperandPlan {
  /// Whether K is the operand's contiguous dim in memory (A stored [M, K],
  /// B stored [N, K]); otherwise M (A) or N (B) is.
  bool kMajor = true;
  /// Whether the operand has a batch dim.
  bool batched = false;
  /// B under b_halves: each box reads half its rows from each half of B,
  /// interleaved (a rank-3 tensor map, KernelABI.h), into the shared memory
  /// rows a box of B's interleaved rows would fill.
  bool halves = false;
  /// The tile's extent along M (A) or N (B).
  int64_t extent = 0;
  /// The tile's extent along K.
  int64_t tileK = 0;
  int64_t elementBytes = 0;
  /// The blocks of a cluster that share the operand's tile (B under a
  /// cluster along M), each loading its share of the boxes into all of them.
  int64_t multicast = 1;

  /// TMA boxes per stage: `multicast` boxes of [extent / multicast rows x
  /// tileK] when K-major, else extent / 64 boxes of [tileK rows x 64].
  int64_t getNumBoxes() const {
    return kMajor ? multicast : extent / getSwizzleElems();
  }
  /// The rows (K-major) or columns (MN-major) of the tile one box covers.
  int64_t getBoxExtent() const { return extent / getNumBoxes(); }
  /// The box, innermost dim first (a batch dim adds a trailing 1; halves
  /// split the rows into [2 x rows / 2]).
  SmallVector<int64_t> getBox() const;
  /// Bytes of 64 rows (A) or columns (B) of one stage: 64 swizzled rows of
  /// 128 bytes when K-major, one box when MN-major.
  int64_t getRowBlockBytes() const { return kMajor ? 64 * 128 : getBoxBytes(); }
  /// Bytes of one box in shared memory.
  int64_t getBoxBytes() const { return getStageBytes() / getNumBoxes(); }
  /// Bytes of one stage of this operand in shared memory.
  int64_t getStageBytes() const { return extent * tileK * elementBytes; }
  /// The elements of one 128-byte swizzled row.
  int64_t getSwizzleElems() const { return 128 / elementBytes; }
};

/// The suspend-time hint of an mbarrier wait, in nanoseconds.
constexpr int64_t kWaitTicks = 10000000;

/// The shared memory where the blocks of a cluster along N exchange their
/// row reductions' partial results: two slots, used in turn by successive
/// exchanges, each holding `clusterN` x `tileM` f32 (at [r][row], rank r's
/// partial result for the tile's row), then one mbarrier per slot. Each
/// thread that holds a row's partial result after its quad's combine (lane
/// 0 of the quad) writes it into slot s of every block of the cluster and
/// arrives on each block's barrier s (release, cluster scope); each reads
/// the R partial results of its rows from its own block's slot once the
/// barrier's phase completes.
struct RowExchangeLayout {
  int64_t clusterN = 1, tileM = 0;

  /// Arrivals that complete one phase of a barrier: every quad leader of
  /// the two consumer warpgroups (8 per warp) of every block.
  int64_t getArrivals() const { return clusterN * 8 * 8; }
  int64_t getSlotBytes() const { return clusterN * tileM * 4; }
  int64_t getBarrierOffset(int64_t slot) const {
    return 2 * getSlotBytes() + 8 * slot;
  }
  int64_t getBytes() const { return clusterN > 1 ? getBarrierOffset(2) : 0; }
};

/// Everything coda-to-gpu decides about the kernel of one coda.gemm.
struct KernelPlan {
  /// One producer and two consumer warpgroups.
  static constexpr int64_t kConsumers = 2;
  static constexpr int64_t kThreads = 128 * (1 + kConsumers);
  /// Register budgets after setmaxnreg, the producer's and the consumers':
  /// 128 * 40 + 256 * 232 registers fit the 64 Ki of an SM, and so do
  /// 128 * 24 + 256 * 240, which consumers of more than 128 accumulator
  /// registers (ping-pong 128 x 192) take so as not to spill (see
  /// getProducerRegisters).
  static constexpr int64_t kProducerRegisters = 40;
  static constexpr int64_t kConsumerRegisters = 232;
  static constexpr int64_t kLeanProducerRegisters = 24;
  static constexpr int64_t kWideConsumerRegisters = 240;
  /// Accumulator registers per consumer thread: at most 128 under the
  /// cooperative schedule, 192 under ping-pong (KernelPlan::build).
  static constexpr int64_t kMaxAccumulators = 128;
  static constexpr int64_t kMaxPingpongAccumulators = 192;
  /// Shared memory a block may use on sm_90a (227 KiB).
  static constexpr int64_t kMaxSharedMemoryBytes = 232448;

  GemmOp op;
  /// The tile shape, with every choice made.
  TileConfig tile;
  /// When the epilogue adds a vector along n (a bias) to the accumulator and
  /// uses the accumulator nowhere else (no alpha, no C): that addition, and
  /// the index of the vector among the GEMM's inputs. The consumers then
  /// start each tile's accumulators at the bias (the first wgmma adds to
  /// them), and the epilogue reads the sum from the accumulators.
  Operation *biasAdd = nullptr;
  int64_t biasInput = -1;
  /// Whether the epilogue reads 16-bit tensors that span m and n (a
  /// residual, C) 16 bytes per lane, regrouped by the quad transpose, rather
  /// than a 4-byte pair at a time: unless the region has dropout or a
  /// reduction and reads the accumulator (a kernel without its product
  /// holds no accumulator fragments, and waits on its loads). Without them
  /// the epilogue waits on its loads (a residual
  /// added 2.5-4% faster on fc1 and BERT-L, after bias + GELU 2-3%);
  /// dropout's Philox makes it bound by its instructions, and the transpose's
  /// cost more than the fewer loads save (the paper's chain 2% slower;
  /// docs/performance.md); beside a reduction's partial sums the regrouping
  /// spilled registers (examples/mlp_up.coda).
  bool chunkedLoads = false;
  /// Rows of a tile each consumer warpgroup holds (64 or 128), as
  /// consumerRows / 64 wgmma fragments.
  int64_t consumerRows = 0;
  /// See TileConfig::epilogueVectorBytes.
  int64_t epilogueVectorBytes = 16;
  /// The chip the kernel is generated for.
  std::string chip;
  /// The element type of A and B.
  Type elementType;
  /// The K extent of one stage (128 bytes of elements) and of one wgmma.
  int64_t tileK = 0, mmaK = 0;
  OperandPlan a, b;
  /// Whether the epilogue reads the accumulator (or alpha and C, which it
  /// holds). One that does not, as the derived backward of an epilogue
  /// linear in the accumulator whose slopes do not depend on it (a rotation
  /// times a detached row scale), needs no product: the kernel then runs no
  /// main loop, only the epilogue of each tile.
  bool readsAccumulator = true;
  /// Whether the epilogue has row reductions (then N must fit the tiles of
  /// one cluster, unless they are merged from partial results).
  bool hasRowReduction = false;
  /// Whether the row reductions are row statistics (RowStatistics) that
  /// each tile writes its partial results of, which a merge kernel combines
  /// after the GEMM (KernelABI's `row_partials`): without a cluster along N,
  /// for rows of any width.
  bool rowPartials = false;
  /// Whether GELU(tanh), SiLU and sigmoid run on tanh.approx.f32
  /// (coda-to-gpu's fast-activations).
  bool fastActivations = false;
  /// Whether the dropout seed's parameter is its global address, read as the
  /// kernel starts (coda-to-gpu's seed-in-memory).
  bool seedInMemory = false;
  /// Whether column reductions write each warp's partial result for a
  /// merge kernel (KernelABI's `partials`) instead of adding it to the
  /// output with f32 atomics (coda-plan-kernels' deterministic).
  bool deterministic = false;

  /// The name of the attribute that holds a coda.gemm's plan.
  static constexpr StringLiteral kAttrName = "coda.kernel_plan";

  /// Chooses what `tile` leaves open and checks that `op` can run as a
  /// kernel of that shape on `chip`, emitting an error on `op` otherwise.
  static FailureOr<KernelPlan> build(GemmOp op, const TileConfig &tile,
                                     StringRef chip);
  /// The plan of `op` that its kernel_plan attribute fixes, checked as a
  /// chosen one is; an error on `op` when it has none or it cannot run.
  static FailureOr<KernelPlan> get(GemmOp op);
  /// The plan's choices, as `op`'s kernel_plan attribute holds them.
  KernelPlanAttr getAttr() const;

  /// Bytes of one pipeline stage (A and B).
  int64_t getStageBytes() const {
    return a.getStageBytes() + b.getStageBytes();
  }
  /// The two bias buffers (f32, a tile's columns each) after the operand
  /// stages, when the accumulators start at a bias (loaded by warp 1 of the
  /// producer warpgroup, a tile ahead).
  int64_t getBiasOffset() const { return tile.stages * getStageBytes(); }
  int64_t getBiasBytes() const { return biasAdd ? 2 * tile.tileN * 4 : 0; }
  /// The row exchange of a cluster along N (empty without one), after the
  /// bias buffers.
  RowExchangeLayout getRowExchange() const {
    return {tile.clusterN, tile.tileM};
  }
  int64_t getExchangeOffset() const { return getBiasOffset() + getBiasBytes(); }
  /// Offset of the mbarriers in shared memory (after the operand stages, the
  /// bias buffers and the row exchange).
  int64_t getBarrierOffset() const {
    return getExchangeOffset() + getRowExchange().getBytes();
  }
  /// Dynamic shared memory of one block: the stages, the bias buffers, the
  /// row exchange, then a full and an empty mbarrier (8 bytes each) per
  /// stage and per bias buffer.
  int64_t getSharedMemoryBytes() const {
    return getBarrierOffset() + 16 * tile.stages + (biasAdd ? 32 : 0);
  }
  /// Blocks per cluster.
  int64_t getClusterSize() const { return tile.clusterM * tile.clusterN; }
  /// The widest N the kernel computes: its row reductions combine the tiles
  /// of one cluster, unless they are merged after it (0: any N).
  int64_t getMaxN() const {
    return hasRowReduction && !rowPartials ? tile.tileN * tile.clusterN : 0;
  }
  /// The wgmma element type of A and B.
  NVVM::WGMMATypes getMmaType() const;
  /// Number of m64 wgmma fragments a consumer holds.
  int64_t getFragments() const { return consumerRows / 64; }
  /// Accumulator registers per consumer thread (f32 elements of its
  /// fragments).
  int64_t getAccumulatorRegisters() const {
    return getFragments() * tile.tileN / 2;
  }
  /// Whether a consumer holds more than kMaxAccumulators accumulator
  /// registers per thread; then the producer runs at kLeanProducerRegisters
  /// and the consumers at kWideConsumerRegisters.
  bool hasWideAccumulators() const {
    return getAccumulatorRegisters() > kMaxAccumulators;
  }
  int64_t getProducerRegisters() const {
    return hasWideAccumulators() ? kLeanProducerRegisters : kProducerRegisters;
  }
  int64_t getConsumerRegisters() const {
    return hasWideAccumulators() ? kWideConsumerRegisters : kConsumerRegisters;
  }
  bool isPingpong() const { return *tile.schedule == Schedule::Pingpong; }
  /// Arrivals that release a slot: one per consumer thread that reads it,
  /// those of a cluster spread over its blocks (any of which may multicast
  /// into the slot), so that each block hears from every warp.
  int64_t getSlotReleases() const { return isPingpong() ? 128 : 256; }
};

/// Checks that `op` is the whole body of a coda program in `module` (not in
/// a module nested in it): every operand is an argument of the function,
/// whose body is the op and a return of its results.
LogicalResult checkProgram(GemmOp op, ModuleOp module);

/// The values of the kernel that the main loop and the epilogue share. All
/// integers are i32.
struct KernelValues {
  Value threadId, lane, warp, warpgroup;
  /// The batch of the current tile, and the first output row of the calling
  /// consumer's rows of it and the tile's first output column.
  Value batch, rowBase, colBase;
  /// The sizes M, N, K and the batch count.
  Value m, n, k, batchCount;
  /// The base of dynamic shared memory (!llvm.ptr<3>).
  Value sharedMemory;
  /// Kernel parameters: the tensor maps of A and B (generic pointers), C's
  /// pointer, alpha and beta (null when absent), one per epilogue input and
  /// one pointer per output.
  Value tensorMapA, tensorMapB, c, alpha, beta;
  SmallVector<Value> inputs, outputs;
  /// In a tile's epilogue under a cluster along N: the row exchange
  /// (!llvm.ptr<3>, RowExchangeLayout) and the tiles the block computed
  /// before this one.
  Value exchange, ordinal;
  /// Under row partials (KernelPlan::rowPartials): the f32 scratch of each
  /// row reduction (KernelABI's RowPartials), in the region's order.
  SmallVector<Value> rowPartials;
};

/// Binds each argument of `entry`, the entry block of a kernel whose
/// parameters are `abi`'s, to its role in `values` (CodaToGPU.cpp).
void bindKernelParams(Block &entry, const KernelABI &abi, KernelValues &values);

/// Builds, at `b`'s insertion point in a gpu.module, the merge kernel `name`
/// of a column reduction of `kind` (KernelABI's Partials): block (x, y)
/// combines columns 32x .. 32x + 31 of the `rows` partial results of output
/// batch y; warp w combines rows w, w + 8, ... in order, then warp 0 the 8
/// warps' results in warp order, and writes the output. The order depends on
/// the sizes only, so the result is the same from run to run
/// (MergeKernels.cpp).
void buildColumnMergeKernel(OpBuilder &b, Location loc, StringRef name,
                            ReductionKind kind, LLVM::GlobalOp sharedMemory);

/// Builds, at `b`'s insertion point in a gpu.module, the merge kernel `name`
/// of the row statistics of `plan`'s epilogue (KernelABI's RowPartials), on
/// the parameters of the GEMM's kernel (`type`, `abi`): thread t of block
/// (x, y) combines the partial results of row 128x + t of batch y, tile by
/// tile, divides means by N, runs the epilogue's ops on them (RowStatistics)
/// and writes the outputs computed from them (MergeKernels.cpp).
void buildRowMergeKernel(OpBuilder &b, Location loc, const KernelPlan &plan,
                         const KernelABI &abi, FunctionType type,
                         StringRef name);

/// Builds the kernel body after the parameters are bound: the mbarriers, the
/// producer's TMA loop and the consumers' tile loop, whose main loop
/// multiplies the tile and whose epilogue is built by buildEpilogue.
void buildPersistentKernel(OpBuilder &b, Location loc, const KernelPlan &plan,
                           const KernelValues &values);

/// Builds the L2 prefetch of the calling consumer's rows of the tile of
/// every tensor the epilogue reads along m and n (C, a residual), so that the
/// epilogue's loads find them in L2: the 128 threads of the warpgroup take
/// the rows' 128-byte lines in turn, one per-thread prefetch each (a bulk
/// prefetch takes a warp-uniform address, so a row per thread would be
/// issued lane by lane). Nothing for a kernel without a product.
void buildEpiloguePrefetch(OpBuilder &b, Location loc, const KernelPlan &plan,
                           const KernelValues &values);

/// The bias loader's work for one tile (KernelPlan::biasAdd): the calling
/// lane's columns of the tile's bias, as f32 (zero past N), into `buffer`
/// (shared memory, tileN f32).
void buildBiasTileLoad(OpBuilder &b, Location loc, const KernelPlan &plan,
                       const KernelValues &values, Value buffer);

/// The calling consumer's accumulators (`accType` structs, one per fragment)
/// holding the tile's bias at every element, read from `buffer`.
SmallVector<Value> buildBiasAccumulators(OpBuilder &b, Location loc,
                                         const KernelPlan &plan,
                                         const KernelValues &values,
                                         Value buffer, Type accType);

/// Builds the epilogue of one tile as a coda.tile_epilogue: the coda.gemm
/// region on the consumer's accumulators (`accumulators`: its wgmma
/// fragments, LLVM structs of tileN / 2 f32), which coda-lower-tile-epilogues
/// lowers. `ordinal` (i32) counts the tiles the block computed before this
/// one; only a cluster along N uses it (the row exchange's turn).
void buildTileEpilogue(OpBuilder &b, Location loc, const KernelPlan &plan,
                       const KernelValues &values, ValueRange accumulators,
                       Value ordinal);

} // namespace mlir::coda

#endif // CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H
