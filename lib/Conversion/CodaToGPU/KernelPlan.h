//===- KernelPlan.h - the shape of one generated GEMM kernel ----*- C++ -*-===//
//
// Internal to coda-to-gpu. A KernelPlan fixes how one coda.gemm runs on an
// sm_90a GPU: the block tile, how A and B travel (TMA boxes into 128-byte
// swizzled shared memory, read by wgmma through matrix descriptors), the
// pipeline depth and the shared memory it takes. Building one checks that the
// GEMM can run that way and reports, in plain words, why not.
//
// Kernel structure (one block computes a tileM x tileN tile of the output):
//  - two warpgroups of 128 threads; warpgroup w owns rows [64w, 64w + 64) of
//    the tile and keeps their fp32 accumulator in registers as the
//    m64nNk16 (m64nNk8 for tf32) wgmma D fragment: lane l of warp v holds
//    rows 16v + l/4 + {0, 8}, columns 8j + 2(l%4) + {0, 1} for every j;
//  - `stages` shared-memory slots, each holding one K step of A and B, with a
//    "full" mbarrier (armed with the TMA byte count, completed by the TMA
//    unit) and an "empty" mbarrier (every thread arrives once the wgmma
//    that read the slot has retired); thread 0 issues the TMA loads;
//  - the main loop waits for a slot, issues its wgmmas asynchronously, keeps
//    one wgmma group in flight (wait 1), and refills the slot the previous
//    group read;
//  - the epilogue runs the coda.gemm region on the accumulator registers and
//    writes each output element once, with bounds checks.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H
#define CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H

#include "coda/Dialect/Coda/IR/CodaOps.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"

namespace mlir::coda {

/// The tunable part of the kernel shape (coda-to-gpu's options).
struct TileConfig {
  /// Output columns per block: 64, 128 or 256.
  int64_t tileN;
  /// Shared-memory pipeline depth (K steps in flight): at least 2.
  int64_t stages;
};

/// How one GEMM operand (A or B) is loaded and read.
struct OperandPlan {
  /// Whether K is the operand's contiguous dim in memory (A stored [M, K],
  /// B stored [N, K]); otherwise M (A) or N (B) is.
  bool kMajor = true;
  /// Whether the operand has a batch dim.
  bool batched = false;
  /// The tile's extent along M (A) or N (B).
  int64_t extent = 0;
  /// The tile's extent along K.
  int64_t tileK = 0;
  int64_t elementBytes = 0;

  /// TMA boxes per stage: one box of [extent rows x tileK] when K-major,
  /// else extent / 64 boxes of [tileK rows x 64].
  int64_t getNumBoxes() const {
    return kMajor ? 1 : extent / getSwizzleElems();
  }
  /// The box, innermost dim first (a batch dim adds a trailing 1).
  SmallVector<int64_t> getBox() const;
  /// Bytes of one box in shared memory.
  int64_t getBoxBytes() const { return getStageBytes() / getNumBoxes(); }
  /// Bytes of one stage of this operand in shared memory.
  int64_t getStageBytes() const { return extent * tileK * elementBytes; }
  /// The elements of one 128-byte swizzled row.
  int64_t getSwizzleElems() const { return 128 / elementBytes; }
};

/// Everything coda-to-gpu decides about the kernel of one coda.gemm.
struct KernelPlan {
  static constexpr int64_t kTileM = 128;
  static constexpr int64_t kWarpgroups = 2;
  static constexpr int64_t kThreads = 128 * kWarpgroups;
  /// Shared memory a block may use on sm_90a (227 KiB).
  static constexpr int64_t kMaxSharedMemoryBytes = 232448;

  GemmOp op;
  TileConfig tile;
  /// The element type of A and B.
  Type elementType;
  /// The K extent of one stage (128 bytes of elements) and of one wgmma.
  int64_t tileK = 0, mmaK = 0;
  OperandPlan a, b;
  /// Whether the epilogue has row reductions (then N must fit one tile).
  bool hasRowReduction = false;

  /// Checks that `op` can run as a kernel of this shape on `chip`, emitting
  /// an error on `op` otherwise.
  static FailureOr<KernelPlan> build(GemmOp op, const TileConfig &tile,
                                     StringRef chip);

  /// Bytes of one pipeline stage (A and B).
  int64_t getStageBytes() const {
    return a.getStageBytes() + b.getStageBytes();
  }
  /// Offset of the mbarriers in shared memory (after the operand stages).
  int64_t getBarrierOffset() const { return tile.stages * getStageBytes(); }
  /// Dynamic shared memory of one block: the stages, then a full and an empty
  /// mbarrier (8 bytes each) per stage.
  int64_t getSharedMemoryBytes() const {
    return getBarrierOffset() + 16 * tile.stages;
  }
  /// The wgmma element type of A and B.
  NVVM::WGMMATypes getMmaType() const;
};

/// The values of the kernel that the main loop and the epilogue share. All
/// integers are i32.
struct KernelValues {
  Value threadId, lane, warp, warpgroup;
  Value blockX, blockY, blockZ;
  /// The first output row and column of the block's tile.
  Value rowBase, colBase;
  /// The sizes M, N, K and the batch count.
  Value m, n, k, batchCount;
  /// The base of dynamic shared memory (!llvm.ptr<3>).
  Value sharedMemory;
  /// Kernel parameters: the tensor maps of A and B (generic pointers), C's
  /// pointer, alpha and beta (null when absent), one per epilogue input and
  /// one pointer per output.
  Value tensorMapA, tensorMapB, c, alpha, beta;
  SmallVector<Value> inputs, outputs;
};

/// Builds the TMA/wgmma main loop; returns the accumulator of the calling
/// thread's warpgroup (an LLVM struct of tileN / 2 f32).
Value buildMainloop(OpBuilder &b, Location loc, const KernelPlan &plan,
                    const KernelValues &values);

/// Builds the epilogue: runs the coda.gemm region on every accumulator
/// element the thread holds and stores the outputs.
void buildEpilogue(OpBuilder &b, Location loc, const KernelPlan &plan,
                   const KernelValues &values, Value accumulator);

} // namespace mlir::coda

#endif // CODA_LIB_CONVERSION_CODATOGPU_KERNELPLAN_H
