// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: not coda-opt %s --coda-plan-kernels=tile-n=192 --coda-to-gpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: sed s/width.128/width\ 512/ %s | not coda-opt --coda-plan-kernels --coda-to-gpu 2>&1 | FileCheck %s --check-prefix=WIDEST
//
// Reductions over groups of columns on the accumulator registers (QK-norm's
// mean of squares per 128-column head): each lane combines its 32 slots of
// the group, then the 3 other lanes of its quad (shuffles xor 1 and 2); no
// shuffle reaches another quad. A mean divides by 128 in an interior tile,
// by the group's columns inside the output (min(128, N - its first column))
// in a tile that may leave it.

// CHECK-LABEL: gpu.func @groups
// CHECK-NOT:     gpu.shuffle  xor %{{.*}}, %c{{(4|8|16)}}_i32{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    arith.constant 2 : i32
// CHECK-NEXT:    arith.constant 32 : i32
// CHECK-NEXT:    gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    arith.constant 128 : i32
// CHECK-NEXT:    arith.uitofp
// CHECK-NEXT:    arith.divf
// CHECK-NOT:     gpu.shuffle  xor %{{.*}}, %c{{(4|8|16)}}_i32{{.*}} : f32
// CHECK:         arith.minui %c128_i32{{.*}}, %{{.*}} : i32
// CHECK-NOT:     gpu.shuffle  xor %{{.*}}, %c{{(4|8|16)}}_i32{{.*}} : f32
// CHECK:         gpu.return
// TILE: error: 'coda.group_reduce' op reduces over groups of 128 columns, which the GPU lowering reads from the same tile: tile-n must be a multiple of 128, got 192
// WIDEST: error: 'coda.group_reduce' op reduces over groups of 512 columns, which the GPU lowering reads from the same tile: tile-n must be a multiple of 512, got 256 (the widest tile is 256 columns)
func.func @groups(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>, %w: tensor<?xf32>)
    -> tensor<?x?xbf16> {
  %0 = coda.gemm %a, %b transpose_b ins(%w : tensor<?xf32> [n])
      : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %g: f32):
    %sq = arith.mulf %acc, %acc : f32
    %ms = coda.group_reduce mean %sq width 128
    %eps = arith.constant 1.0e-6 : f32
    %v = arith.addf %ms, %eps : f32
    %r = math.rsqrt %v : f32
    %s = arith.mulf %r, %g : f32
    %1 = arith.mulf %acc, %s : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x?xbf16>
}
