//===- TileChoice.cpp - the kernel shape of a problem ---------------------===//

#include "coda/Runtime/Runtime.h"

#include "coda/Kernel/KernelABI.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::coda;

/// The rows of the tile rule's tiles.
static constexpr int64_t kTileM = 128;

/// The shape of `tileM` x `tileN` tiles under `schedule`, its other choices
/// left to the compiler.
static KernelShape getTileShape(int64_t tileM, int64_t tileN,
                                Schedule schedule) {
  KernelShape shape;
  shape.tileM = tileM;
  shape.tileN = tileN;
  shape.schedule = schedule;
  return shape;
}

/// The waves of persistent blocks (or clusters) a cooperative kernel of
/// 128 x `tileN` tiles in clusters of `clusterM` takes for `problem` on
/// `multiprocessors` SMs.
static int64_t getWaves(const ProblemShape &problem, int multiprocessors,
                        int64_t tileN, int64_t clusterM) {
  KernelABI kernel;
  kernel.tileM = kTileM;
  kernel.tileN = tileN;
  kernel.clusterM = clusterM;
  int64_t units = kernel.getNumUnits(problem.m, problem.n, problem.batch);
  int64_t concurrent = std::max<int64_t>(multiprocessors / clusterM, 1);
  return llvm::divideCeilSigned(units, concurrent);
}

int64_t mlir::coda::chooseTileN(const ProblemShape &problem,
                                int multiprocessors) {
  // Relative work per output column of a tile of each width, measured on the
  // H200 (docs/performance.md, "Tile width and wave quantization"): a
  // narrower tile reloads A more often and issues narrower wgmmas, and pays
  // off only where it fills more of the GPU (a weight gradient whose output
  // is fewer tiles than SMs).
  struct Width {
    int64_t tileN;
    double efficiency;
  };
  constexpr Width kWidths[] = {
      {256, 1.0}, {192, 0.85}, {128, 0.77}, {64, 0.51}};
  auto cost = [&](const Width &width) {
    int64_t waves =
        getWaves(problem, multiprocessors, width.tileN, /*clusterM=*/1);
    return static_cast<double>(waves) * width.tileN / width.efficiency;
  };
  const Width *best = &kWidths[0];
  for (const Width &width : kWidths)
    if (cost(width) < cost(*best))
      best = &width;
  return best->tileN;
}

KernelShape mlir::coda::chooseRuleShape(const ProblemShape &problem,
                                        int multiprocessors,
                                        bool lightEpilogue) {
  // Measured on GPT-2's fc1 (M = 8192, K = 768, N = 3072): bias + GELU 75.5
  // -> 67.1 us, its saving program 84.6 -> 77.3, the GEMM alone even; at
  // K = 3072 and over N = 4096 (22 columns of 192-column tiles, the last a
  // third full) ping-pong lost (docs/performance.md).
  constexpr int64_t kPingpongMaxK = 1024, kPingpongTileN = 192,
                    kPingpongTilesPerSM = 4;
  if (lightEpilogue && problem.k <= kPingpongMaxK &&
      problem.n % kPingpongTileN == 0 &&
      llvm::divideCeilSigned(problem.m, kTileM) * problem.batch *
              (problem.n / kPingpongTileN) >=
          kPingpongTilesPerSM * multiprocessors)
    return getTileShape(kTileM, kPingpongTileN, Schedule::Pingpong);
  // From K = 4096 on (LLaMA's), clusters of two in groups of 16 row blocks
  // were 1.5-3% faster for the GEMM alone and 0.5-2% for the fused chain; at
  // K = 768-3072 clusters cost the chain up to 3% (docs/performance.md).
  constexpr int64_t kClusteredK = 4096;
  int64_t tileN = chooseTileN(problem, multiprocessors);
  KernelShape shape = getCooperativeShape(tileN);
  if (problem.k < kClusteredK)
    return shape;
  // Only where the pairs of row blocks take no more waves than the blocks
  // alone: a cluster whose unit reaches below the last row block idles one
  // block, and a single row block would idle one of every cluster.
  if (llvm::divideCeilSigned(problem.m, kTileM) >= 2 &&
      getWaves(problem, multiprocessors, tileN, 2) <=
          getWaves(problem, multiprocessors, tileN, 1)) {
    shape.clusterM = 2;
    shape.groupRows = 16;
  }
  return shape;
}

KernelShape mlir::coda::chooseRowClusterShape(KernelShape pinned, int64_t n) {
  constexpr int64_t kNarrowTileN = 128, kWideTileN = 256;
  if (pinned.clusterN || (!pinned.tileN && n <= kNarrowTileN))
    return pinned;
  if (!pinned.tileN)
    pinned.tileN = n <= kNarrowTileN * KernelShape::kPortableClusterSize
                       ? kNarrowTileN
                       : kWideTileN;
  // Past the widest cluster, the launch says how wide a row may be.
  pinned.clusterN = std::clamp<int64_t>(llvm::divideCeilSigned(n, pinned.tileN),
                                        1, KernelShape::kMaxClusterN);
  return pinned;
}

KernelShape mlir::coda::getCooperativeShape(int64_t tileN) {
  // 256 columns is the compiler's own default: the empty shape, whose kernel
  // prepare() compiles, rather than a second copy of it.
  KernelShape shape;
  if (tileN != KernelShape::kDefaultTileN)
    shape.tileN = tileN;
  return shape;
}

SmallVector<KernelShape>
mlir::coda::getTuningCandidates(const KernelShape &ruleShape) {
  auto clustered = [](KernelShape clusters) {
    clusters.clusterM = 2;
    return clusters;
  };
  // Groups of 16 row blocks: 1-3% faster than 8 on LLaMA up in some runs
  // (docs/performance.md).
  auto grouped = [](KernelShape groups) {
    groups.groupRows = 16;
    return groups;
  };
  SmallVector<KernelShape> candidates = {ruleShape};
  for (const KernelShape &other :
       {getCooperativeShape(256), getCooperativeShape(192),
        getCooperativeShape(128), getCooperativeShape(64),
        getTileShape(256, 128, Schedule::Cooperative),
        getTileShape(128, 128, Schedule::Pingpong),
        getTileShape(128, 192, Schedule::Pingpong), clustered(ruleShape),
        grouped(ruleShape)})
    if (other.describe() != ruleShape.describe())
      candidates.push_back(other);
  return candidates;
}
