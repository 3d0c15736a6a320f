//===- KernelShape.h - the tunable shape of a GEMM kernel -------*- C++ -*-===//
//
// Part of the contract between coda-to-gpu and the runtime (with KernelABI.h):
// the kernel shape a program is compiled for, which coda-to-gpu's and
// coda-gpu-pipeline's options, the runtime's compile options, its C API and
// its cache keys all spell. This header converts it to and from each of
// those forms; nothing else copies its fields one by one.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_KERNEL_KERNELSHAPE_H
#define CODA_KERNEL_KERNELSHAPE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::coda {

/// How the two consumer warpgroups of a kernel share the output tiles.
enum class Schedule {
  /// Both compute one tile, each half of its rows.
  Cooperative,
  /// Each computes whole tiles, every other tile of the block: one runs its
  /// epilogue while the other multiplies.
  Pingpong,
};

/// The name of `schedule` as coda-to-gpu's options, the kernel ABI and the
/// runtime spell it: "cooperative" or "pingpong" (a string literal).
llvm::StringRef getScheduleName(Schedule schedule);

/// The schedule named `name`, if it names one.
std::optional<Schedule> parseScheduleName(llvm::StringRef name);

/// What a coda.partner at `distance` asks of the tile width: a multiple of
/// 2 * distance for distances of 8 or more, whose pair the GPU lowering
/// reads from the same tile; 0 (any width) for 1, 2 and 4, which sit in the
/// thread's fragment or one shuffle away.
int64_t getPartnerTileMultiple(int64_t distance);

/// The kernel shape: what coda-to-gpu's options tile-m, tile-n, stages,
/// schedule, cluster-m, cluster-n and group-rows ask for. A value of 0 (no
/// schedule) lets the compiler choose.
struct KernelShape {
  /// Output rows per tile: 128 or 256 (cooperative), 64 or 128 (ping-pong).
  int64_t tileM = 0;
  /// Output columns per tile: 64, 128, 192 or 256.
  int64_t tileN = 0;
  /// Shared-memory pipeline depth (K steps in flight): at least 2.
  int64_t stages = 0;
  std::optional<Schedule> schedule;
  /// Blocks per cluster, along M: 1 or 2. The blocks of a cluster compute
  /// vertically adjacent tiles, whose B tile is the same: each loads its
  /// share of it into both blocks' shared memory (TMA multicast).
  int64_t clusterM = 0;
  /// Blocks per cluster along N: 1 to kMaxClusterN. The blocks of a cluster
  /// compute the horizontally adjacent tiles of one row block, so that a
  /// row reduction combines the partial results of all of them (through
  /// distributed shared memory): N may then be up to clusterN * tileN.
  int64_t clusterN = 0;
  /// Row blocks per group of the tile order: the blocks walk groupRows row
  /// blocks column by column, then the next groupRows (1: row by row; at
  /// least the number of row blocks: column by column). A multiple of
  /// clusterM.
  int64_t groupRows = 0;

  /// The compiler's choices of the tile and schedule for a shape that leaves
  /// them open, in a program without row reductions.
  static constexpr int64_t kDefaultTileM = 128;
  static constexpr int64_t kDefaultTileN = 256;
  static constexpr Schedule kDefaultSchedule = Schedule::Cooperative;
  /// The largest cluster along N: 16 blocks, a non-portable cluster size
  /// (sm_90 guarantees 8), which the runtime enables for the kernel.
  static constexpr int64_t kMaxClusterN = 16;
  /// The portable cluster size of sm_90.
  static constexpr int64_t kPortableClusterSize = 8;

  /// Whether any part of the shape is fixed.
  bool isPinned() const {
    return tileM || tileN || stages || schedule || clusterM || clusterN ||
           groupRows;
  }

  /// The shape as a cache key: "tileM/tileN/stages/schedule/clusterM/
  /// groupRows/clusterN" (the schedule's name, or empty).
  std::string getKey() const;
  /// The shape of a getKey string, if it is one.
  static std::optional<KernelShape> parseKey(llvm::StringRef key);

  /// "MxN cooperative" or "MxN pingpong" (then " cluster C", " row cluster
  /// R" and " group G" when the shape sets them), with the compiler's defaults
  /// for what the shape leaves open.
  std::string describe() const;

  /// The message for a schedule option that names no schedule.
  static std::string getScheduleError(llvm::StringRef name);

  /// Sets the kernel-shape options of `options` (coda-to-gpu's or
  /// coda-gpu-pipeline's: fields tileM, tileN, stages, schedule (a name),
  /// clusterM, clusterN and groupRows) to this shape.
  template <typename Options> void setOptions(Options &options) const {
    options.tileM = tileM;
    options.tileN = tileN;
    options.stages = stages;
    options.schedule = schedule ? getScheduleName(*schedule).str() : "";
    options.clusterM = clusterM;
    options.clusterN = clusterN;
    options.groupRows = groupRows;
  }

  /// The shape the kernel-shape options of `options` ask for (see
  /// setOptions); none when the schedule option names no schedule.
  template <typename Options>
  static std::optional<KernelShape> fromOptions(const Options &options) {
    KernelShape shape;
    shape.tileM = options.tileM;
    shape.tileN = options.tileN;
    shape.stages = options.stages;
    std::string name = options.schedule;
    if (!name.empty() && !(shape.schedule = parseScheduleName(name)))
      return std::nullopt;
    shape.clusterM = options.clusterM;
    shape.clusterN = options.clusterN;
    shape.groupRows = options.groupRows;
    return shape;
  }
};

} // namespace mlir::coda

#endif // CODA_KERNEL_KERNELSHAPE_H
