// RUN: not coda-opt %s --coda-to-gpu=chip=sm_80 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not coda-opt %s --coda-to-gpu=tile-n=96 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not coda-opt %s --coda-to-gpu=stages=1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not coda-opt %s --coda-to-gpu="tile-n=256 stages=5" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: coda-opt %s --coda-to-gpu="tile-n=256 stages=4" | FileCheck %s --check-prefix=FITS

// CHIP: error: 'coda.gemm' op cannot run on chip 'sm_80': the GPU lowering emits wgmma and TMA instructions, which need chip sm_90a
// TILE: error: 'coda.gemm' op tile-n must be 64, 128 or 256, got 96
// STAGES: error: 'coda.gemm' op stages must be at least 2 (one slot is refilled while the next is read), got 1
// SMEM: error: 'coda.gemm' op needs 245840 bytes of shared memory per block (5 stages of 49152 bytes), more than the 232448 bytes sm_90a gives a block; use fewer stages or a smaller tile-n
// FITS: shared_memory_bytes = 196672 : i64

func.func @gemm(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}
