// RUN: coda-opt %s --coda-plan-kernels=tile-n=256 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels=tile-n=256 --coda-to-gpu --coda-lower-tile-epilogues | grep -c 'llvm.load .*-> f32' | FileCheck %s --check-prefix=SHARED
// RUN: sed 's/64/16/g' %s | coda-opt --coda-plan-kernels=tile-n=256 --coda-to-gpu --coda-lower-tile-epilogues | grep -c 'llvm.load .*-> f32' | FileCheck %s --check-prefix=GROUP
// RUN: sed 's/64/32/g' %s | coda-opt --coda-plan-kernels=tile-n=256 --coda-to-gpu --coda-lower-tile-epilogues | grep -c 'llvm.load .*-> f32' | FileCheck %s --check-prefix=UNSHARED
// RUN: sed 's/64/4/g' %s | coda-opt --coda-plan-kernels=tile-n=256 --coda-to-gpu --coda-lower-tile-epilogues | grep -c 'llvm.load .*-> f32' | FileCheck %s --check-prefix=UNSHARED
//
// An input that spans n mod p is read element by element at column
// n & (p - 1). A thread of a 256-wide tile has 64 column slots, each loading
// its element in the checked copy of the epilogue; in the interior copy the
// slots whole periods apart share one load (and what is computed from it):
// 16 loads for p = 64 (one per slot of the first period), 32 for p = 16
// (shared within each group of 32 columns), none shared for p = 32 (that
// would hold them across the whole tile) or p < 8.

// CHECK-LABEL: gpu.func @periodic
// CHECK:         arith.andi %{{.*}}, %c63_i32{{.*}} : i32
// CHECK:         llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.cos.approx.ftz.f"
// SHARED: 80
// GROUP: 96
// UNSHARED: 128
func.func @periodic(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>, %f: tensor<64xf32>)
    -> tensor<?x?xbf16> {
  %0 = coda.gemm %a, %b transpose_b ins(%f : tensor<64xf32> [n mod 64]) : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = math.cos %x : f32
    %2 = arith.mulf %acc, %1 : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<?x?xbf16>
}
