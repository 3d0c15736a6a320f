// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: not coda-opt %s --coda-plan-kernels=tile-n=192 --coda-to-gpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: sed s/xor.64/xor\ 256/ %s | not coda-opt --coda-plan-kernels --coda-to-gpu 2>&1 | FileCheck %s --check-prefix=WIDEST
//
// Partner columns, coordinates and an output of the even columns on the
// accumulator registers: distance 1 and 64 in the thread's own fragment,
// distance 2 one shuffle; sine and cosine as the approximate instructions
// after a reduction by 2 pi; the even columns written 8 bytes per lane (4
// bf16 after the quad's transpose) where the group is inside the output.

// CHECK-LABEL: gpu.func @positions
// CHECK-DAG:     gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-DAG:     math.roundeven
// CHECK-DAG:     llvm.call_intrinsic "llvm.nvvm.sin.approx.ftz.f"
// CHECK-DAG:     llvm.store %{{.*}} : vector<2xi32>, !llvm.ptr<1>
// TILE: error: 'coda.partner' op pairs columns 64 apart, which the GPU lowering reads from the same tile: tile-n must be a multiple of 128, got 192
// WIDEST: error: 'coda.partner' op pairs columns 256 apart, which the GPU lowering reads from the same tile: tile-n must be a multiple of 512, got 256 (the widest tile is 256 columns)
func.func @positions(%a: tensor<?x64xbf16>, %b: tensor<512x64xbf16>, %pos: tensor<?xf32>)
    -> (tensor<?x256xbf16>, tensor<?x512xf32>) {
  %0:2 = coda.gemm %a, %b transpose_b ins(%pos : tensor<?xf32> [m])
      : tensor<?x64xbf16>, tensor<512x64xbf16> -> (tensor<?x256xbf16> [m, n/2], tensor<?x512xf32> [m, n]) {
  ^bb0(%acc: f32, %p: f32):
    %up = coda.partner %acc xor 1
    %g = coda.activation silu %acc
    %gated = arith.mulf %g, %up : f32
    %half = coda.partner %acc xor 64
    %near = coda.partner %acc xor 2
    %col = coda.coord n
    %angle = arith.mulf %p, %col : f32
    %s = math.sin %angle : f32
    %1 = arith.mulf %half, %s : f32
    %2 = arith.addf %1, %near : f32
    coda.yield %gated, %2 : f32, f32
  }
  return %0#0, %0#1 : tensor<?x256xbf16>, tensor<?x512xf32>
}
