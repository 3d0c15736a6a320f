//===- KernelABI.h - how coda's GPU kernels are launched --------*- C++ -*-===//
//
// The contract between the kernels that coda-to-gpu generates and the runtime
// that loads and launches them (CUDA Driver API). coda-to-gpu records it as a
// `coda.kernel_abi` dictionary on each generated gpu.module and on the host
// declaration of the program it replaces (which survives gpu-module-to-binary);
// KernelABI reads and writes that dictionary.
//
// Launching a kernel described by a KernelABI:
//
//  - Load the PTX (or cubin) of the gpu.binary named `module`, get the entry
//    `kernel` (the PTX `.entry` of that name).
//  - Grid: (min(units, clusters) * clusterM * clusterN, 1, 1) (getGridDims),
//    where units = getNumUnits (without clusters, the tiles: ceildiv(M,
//    tileM) * ceildiv(N, tileN) * batch, batch = 1 for an unbatched GEMM)
//    and clusters is how many clusters of the kernel run at once (without
//    clusters, the device's SM count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_
//    COUNT; else cuOccupancyMaxActiveClusters). The kernel is persistent:
//    cluster c computes units c, c + clusters, ... (it reads the unit count
//    from M, N and the batch count), so any grid of at least one cluster is
//    correct; one block per SM is the fast one (a block takes most of an
//    SM's shared memory and registers). Skip the launch when M or N is 0;
//    the tile count must fit an i32.
//  - Block: `blockDims` threads (the kernel's warpgroup roles assume exactly
//    that many; the PTX declares them as `.maxntid`).
//  - Dynamic shared memory: `sharedMemoryBytes`. Above 48 KiB, first raise
//    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it.
//  - Parameters, in the order of `params`; `kernelParams[i]` points at:
//      TensorMap: a CUtensorMap (128 bytes, 64-byte aligned) passed by value.
//                 Build it with cuTensorMapEncodeTiled over the program
//                 argument `index` as a dense row-major tensor: rank = the
//                 tensor's rank, dims innermost first (the tensor's shape
//                 reversed), strides of the outer dims in bytes, box = `box`
//                 (innermost first), element strides 1, no interleave,
//                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
//                 (out-of-bounds elements read as zero: this is how ragged M,
//                 N and K are handled), any L2 promotion. With `halves` (B
//                 under b_halves), B [N, K] is described as rank 3 instead,
//                 its two halves' rows interleaved: dims (K, 2, N / 2),
//                 strides (N / 2 rows, 1 row) in bytes, box = `box` (3
//                 dims); N is even.
//      GlobalPtr: a CUdeviceptr to the dense row-major tensor of program
//                 argument `index` (A/B/C/input roles) or program result
//                 `index` (output role), which the kernel reads or writes
//                 element by element with bounds checks.
//      AtomicPtr: a CUdeviceptr to the dense row-major f32 tensor of program
//                 result `index` (a column reduction), which every row block
//                 combines its partial result into with atomics: fill it with
//                 `fill` (0 for sums and means, -inf for maxima) before each
//                 launch.
//      Partials:  a CUdeviceptr to f32 scratch of getPartialRows(M, batch) x
//                 N, dense row-major, for column reduction output `index`
//                 under a deterministic plan: each warp of every tile writes
//                 its partial result of the tile's columns into its own row
//                 (every row is written). After the kernel, launch the
//                 kernel `merge` of the same module on the same stream, with
//                 parameters (the scratch, the output's CUdeviceptr, rows
//                 per output batch as i32, N as i32), a grid of
//                 (ceildiv(N, kMergeColumns), output batches, 1) and blocks
//                 of kMergeThreads: it combines the rows of each batch in a
//                 fixed order into the output, which it writes whole (no
//                 fill). The result is bit-identical from run to run.
//      RowPartials: a CUdeviceptr to f32 scratch of getRowPartialCount(M, N,
//                 batch) elements for row reduction `index` (in the
//                 epilogue's order) of a kernel whose row reductions are row
//                 statistics (RowStatistics.h): each tile writes its partial
//                 result of each of its rows at [batch][column tile][row]
//                 (every element is written). The kernel does not write the
//                 outputs computed from them. After the kernel, launch the
//                 kernel `merge` (the same for every RowPartials parameter)
//                 of the same module on the same stream, with the kernel's
//                 own parameters, a grid of (ceildiv(M, kRowMergeThreads),
//                 batch count, 1) and blocks of kRowMergeThreads: it combines
//                 each row's partial results in tile order (bit-identical
//                 from run to run) and writes those outputs.
//      F32, I64:  the scalar program argument `index` (alpha, beta, scalar
//                 epilogue inputs; a dropout seed is i64).
//      I32:       a size of the GEMM: M, N, K or the batch count (1 when
//                 unbatched).
//  - Requirements the runtime must check before launching (the compiler
//    rejects them when the sizes are static): every tensor passed as a
//    TensorMap must have a 16-byte aligned base and rows (and batch strides)
//    that are a multiple of 16 bytes long (cuTensorMapEncodeTiled refuses
//    others); when `maxN` is not 0 (row reductions are fused), N must not
//    exceed it (the kernel traps if it does, rather than computing a wrong
//    answer). With K = 0 the kernel reads neither tensor map: encode any
//    valid one (a dim of 0 is not encodable).
//
// Kernel parameter order (the `params` list): the tensor maps of A and B,
// C's pointer, alpha, beta (each when present), one parameter per epilogue
// input (a pointer for a tensor, the value for a scalar), one pointer per
// output, then M, N, K and the batch count.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_KERNEL_KERNELABI_H
#define CODA_KERNEL_KERNELABI_H

#include "coda/Kernel/KernelShape.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace mlir::coda {

/// What a kernel parameter holds.
enum class KernelParamKind : uint32_t {
  /// A CUtensorMap passed by value (a grid-constant kernel parameter).
  TensorMap,
  /// A 64-bit device pointer to a dense row-major tensor.
  GlobalPtr,
  /// A 64-bit device pointer to an f32 output the kernel accumulates into
  /// with atomics; the runtime fills it with `KernelParam::fill` first.
  AtomicPtr,
  /// A 64-bit device pointer to f32 scratch for the partial results of a
  /// column reduction, which the kernel `KernelParam::merge` combines into
  /// the output after the launch.
  Partials,
  /// A 64-bit device pointer to f32 scratch for the per-tile partial results
  /// of a row reduction, which the kernel `KernelParam::merge` combines
  /// after the launch.
  RowPartials,
  /// A 32-bit float.
  F32,
  /// A 64-bit integer.
  I64,
  /// A 32-bit integer.
  I32,
};

/// What a kernel parameter stands for in the program.
enum class KernelParamRole : uint32_t {
  A,
  B,
  C,
  Alpha,
  Beta,
  /// An epilogue input.
  Input,
  /// An output.
  Output,
  /// The partial results of a row reduction.
  RowReduction,
  M,
  N,
  K,
  Batch,
};

/// The spelling of `kind` in the ABI dictionary ("tensor_map", "global_ptr",
/// "atomic_ptr", "partials", "row_partials", "f32", "i64", "i32").
llvm::StringRef stringifyKernelParamKind(KernelParamKind kind);
/// The spelling of `role` in the ABI dictionary ("a", "b", "c", "alpha",
/// "beta", "input", "output", "row_reduction", "m", "n", "k", "batch").
llvm::StringRef stringifyKernelParamRole(KernelParamRole role);

/// One kernel parameter.
struct KernelParam {
  KernelParamKind kind;
  KernelParamRole role;
  /// The program argument (A, B, C, alpha, beta, inputs), program result
  /// (outputs) or row reduction this parameter is made from; -1 for the
  /// sizes.
  int64_t index = -1;
  /// For TensorMap parameters: the box, in elements, innermost dim first.
  llvm::SmallVector<int64_t> box;
  /// For AtomicPtr parameters: the value the runtime fills the output with
  /// before the launch.
  std::optional<double> fill;
  /// For Partials and RowPartials parameters: the entry name of the merge
  /// kernel.
  std::string merge = {};
  /// For the TensorMap of B under b_halves: B [N, K] read as its halves'
  /// rows interleaved (a rank-3 tensor map; see above).
  bool halves = false;
};

/// Everything the runtime needs to launch one generated kernel.
struct KernelABI {
  /// The name of the dictionary attribute that holds the ABI.
  static constexpr llvm::StringLiteral kAttrName = "coda.kernel_abi";

  /// The gpu.module (later gpu.binary) that holds the kernel.
  std::string module;
  /// The kernel's entry name.
  std::string kernel;
  /// Threads per block.
  std::array<int64_t, 3> blockDims = {1, 1, 1};
  /// Output rows and columns per block, and the K step of the main loop.
  int64_t tileM = 0, tileN = 0, tileK = 0;
  /// Dynamic shared memory per block, in bytes.
  int64_t sharedMemoryBytes = 0;
  /// The largest N the kernel supports; 0 when there is no limit.
  int64_t maxN = 0;
  /// Blocks per cluster along M and along N (one of them 1): the kernel must
  /// be launched in clusters of clusterM * clusterN blocks along the grid's
  /// x, on a grid of whole clusters (a cluster of more than 8 blocks is a
  /// non-portable size, which the kernel must be allowed first).
  int64_t clusterM = 1, clusterN = 1;
  /// Row blocks per group of the kernel's tile order (informational: the
  /// launch does not depend on it).
  int64_t groupRows = 1;
  /// How the consumer warpgroups share the tiles (informational).
  Schedule schedule = Schedule::Cooperative;
  llvm::SmallVector<KernelParam> params;

  /// Threads per block of a merge kernel (see Partials) and the output
  /// columns each block combines: 8 warps, each combining every 8th row of
  /// 32 columns, whose partial results warp 0 then combines in warp order.
  static constexpr int64_t kMergeThreads = 256, kMergeColumns = 32;
  /// Rows of a Partials scratch for a GEMM of the given sizes: the tiles
  /// along M, times the consumer warps that share a tile (8, or 4 under
  /// ping-pong), times the batch count.
  int64_t getPartialRows(int64_t m, int64_t batch) const;
  /// Threads per block of a row merge kernel (see RowPartials), a row each.
  static constexpr int64_t kRowMergeThreads = 128;
  /// Elements of a RowPartials scratch for a GEMM of the given sizes: the
  /// tiles along N times M times the batch count.
  int64_t getRowPartialCount(int64_t m, int64_t n, int64_t batch) const;

  /// The number of output tiles of a GEMM of the given sizes (batch = 1 when
  /// unbatched).
  int64_t getNumTiles(int64_t m, int64_t n, int64_t batch) const;
  /// Blocks per cluster.
  int64_t getClusterSize() const { return clusterM * clusterN; }
  /// The number of units the clusters walk: clusterM vertically adjacent
  /// tiles each, or a whole row block under a cluster along N (the tiles
  /// themselves without clusters).
  int64_t getNumUnits(int64_t m, int64_t n, int64_t batch) const;
  /// The grid for a GEMM of the given sizes when at most `clusters`
  /// clusters of the kernel run at once (one block per SM).
  std::array<int64_t, 3> getGridDims(int64_t m, int64_t n, int64_t batch,
                                     int64_t clusters) const;

  /// The shape the kernel was compiled for, less its stages (which the ABI
  /// does not record).
  KernelShape getShape() const;

  /// The ABI as a dictionary attribute.
  DictionaryAttr toAttr(MLIRContext *context) const;
  /// Reads an ABI dictionary; std::nullopt when it is malformed.
  static std::optional<KernelABI> fromAttr(DictionaryAttr attr);
};

} // namespace mlir::coda

#endif // CODA_KERNEL_KERNELABI_H
