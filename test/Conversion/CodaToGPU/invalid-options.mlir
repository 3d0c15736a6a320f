// RUN: not coda-opt %s --coda-plan-kernels=chip=sm_80 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not coda-opt %s --coda-plan-kernels=tile-n=96 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not coda-opt %s --coda-plan-kernels=stages=1 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not coda-opt %s --coda-plan-kernels="tile-n=256 stages=5" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not coda-opt %s --coda-plan-kernels="tile-n=256 stages=1000000000000000" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=SMEM-HUGE
// RUN: coda-opt %s --coda-plan-kernels="tile-n=256 stages=4" --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=FITS
// RUN: not coda-opt %s --coda-plan-kernels=tile-m=64 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=COOP
// RUN: not coda-opt %s --coda-plan-kernels="schedule=pingpong tile-m=256" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=PINGPONG
// RUN: not coda-opt %s --coda-plan-kernels="tile-m=256 tile-n=256" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=REGISTERS
// RUN: not coda-opt %s --coda-plan-kernels="tile-m=128 tile-n=256 schedule=pingpong" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=REGISTERS-PINGPONG
// RUN: not coda-opt %s --coda-plan-kernels=epilogue-vector-bytes=8 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=VECTOR
// RUN: not coda-opt %s --coda-plan-kernels=schedule=fast --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not coda-opt %s --coda-plan-kernels="tile-n=128 cluster-n=1" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not coda-opt %s --coda-plan-kernels=cluster-n=17 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CLUSTER-N
// RUN: not coda-opt %s --coda-plan-kernels=cluster-n=2 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CLUSTER-N-UNUSED
// RUN: not coda-opt %s --coda-plan-kernels="cluster-n=2 cluster-m=2" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CLUSTER-BOTH
// RUN: not coda-opt %s --coda-plan-kernels="cluster-n=2 schedule=pingpong" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CLUSTER-PINGPONG
// RUN: not coda-opt %s --coda-plan-kernels=cluster-m=4 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not coda-opt %s --coda-plan-kernels="cluster-m=2 group-rows=3" --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=GROUP-ODD
// RUN: not coda-opt %s --coda-plan-kernels=group-rows=2048 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=GROUP-BIG
// RUN: not coda-opt %s --coda-plan-kernels=group-rows=-1 --coda-to-gpu --coda-lower-tile-epilogues 2>&1 | FileCheck %s --check-prefix=GROUP-NEG

// CHIP: error: 'coda.gemm' op cannot run on chip 'sm_80': the GPU lowering emits wgmma and TMA instructions, which need chip sm_90a
// TILE: error: 'coda.gemm' op tile-n must be 64, 128, 192 or 256, got 96
// STAGES: error: 'coda.gemm' op stages must be at least 2 (one slot is refilled while the next is read), got 1
// SMEM: error: 'coda.gemm' op 5 stages of 49152 bytes, with their mbarriers, bias buffers and row exchange, need more than the 232448 bytes of shared memory sm_90a gives a block; use fewer stages or a smaller tile
// SMEM-HUGE: error: 'coda.gemm' op 1000000000000000 stages of 49152 bytes, with their mbarriers, bias buffers and row exchange, need more than the 232448 bytes of shared memory sm_90a gives a block; use fewer stages or a smaller tile
// FITS: shared_memory_bytes = 196672 : i64
// COOP: error: 'coda.gemm' op tile-m must be 128 or 256 with the cooperative schedule (two consumer warpgroups share a tile), got 64
// PINGPONG: error: 'coda.gemm' op tile-m must be 64 or 128 with the ping-pong schedule (each consumer warpgroup computes whole tiles), got 256
// REGISTERS: error: 'coda.gemm' op a 256 x 256 tile gives each consumer warpgroup 128 x 256 accumulators, 256 registers per thread; at most 128 fit under the cooperative schedule (use a smaller tile-m or tile-n)
// REGISTERS-PINGPONG: error: 'coda.gemm' op a 128 x 256 tile gives each consumer warpgroup 128 x 256 accumulators, 256 registers per thread; at most 192 fit under the ping-pong schedule (use a smaller tile-m or tile-n)
// VECTOR: error: 'coda.gemm' op epilogue-vector-bytes must be 4 or 16, got 8
// SCHEDULE: error: coda-plan-kernels: schedule must be 'cooperative' or 'pingpong' (or empty to choose per GEMM), got 'fast'
// CLUSTER: error: 'coda.gemm' op cluster-m must be 1 or 2, got 4
// GROUP-ODD: error: 'coda.gemm' op group-rows must be a multiple of cluster-m (2) between 1 and 1024, got 3
// GROUP-BIG: error: 'coda.gemm' op group-rows must be a multiple of cluster-m (1) between 1 and 1024, got 2048
// GROUP-NEG: error: 'coda.gemm' op group-rows must be a multiple of cluster-m (1) between 1 and 1024, got -1
// ROWS: error: 'coda.gemm' op cannot fuse a row reduction on the GPU: a whole row must fit the tiles of one cluster along N, but N = 200 is more than tile-n x cluster-n = 128 x 1; tile-n can be up to 256 and cluster-n up to 16, rows of up to 4096 columns (row statistics, whose results no element of the row needs, are merged after the GEMM for rows of any width unless cluster-n is pinned)
// CLUSTER-N: error: 'coda.gemm' op cluster-n must be between 1 and 16, got 17
// CLUSTER-N-UNUSED: error: 'coda.gemm' op cluster-n = 2 spans a row with a cluster of blocks for row reductions, but this epilogue has none; use cluster-n = 1
// CLUSTER-BOTH: error: 'coda.gemm' op cluster-n = 2 and cluster-m = 2 cannot be combined: a cluster spans either a row or a column of tiles
// CLUSTER-PINGPONG: error: 'coda.gemm' op cluster-n = 2 needs the cooperative schedule: both consumer warpgroups take part in each row exchange of a tile

func.func @gemm(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// The row's elements need its mean: the row must fit a cluster of tiles.
func.func @row_centered(%a: tensor<?x64xbf16>, %b: tensor<200x64xbf16>) -> tensor<?x200xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<200x64xbf16> -> (tensor<?x200xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = coda.row_reduce mean %acc
    %d = arith.subf %acc, %s : f32
    coda.yield %d : f32
  }
  return %o : tensor<?x200xf32>
}
