// RUN: coda-opt %s --coda-plan-kernels=tile-n=128 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s

// How A and B are loaded (TMA boxes, in elements, innermost first) and read
// by wgmma for each operand layout and element type. K-major operands are one
// [tileK x rows] box per stage; MN-major ones are boxes of 64 elements (128
// bytes, the swizzle width) by tileK rows, read with the transpose flag.

// A [M, K], B [N, K]: both K-major.
// CHECK-LABEL: func.func private @nt_bf16
// CHECK-SAME:    {box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"}
// CHECK-SAME:    {box = array<i64: 64, 128>, index = 1 : i64, kind = "tensor_map", role = "b"}
// CHECK-LABEL: gpu.func @nt_bf16
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
func.func @nt_bf16(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// A [M, K], B [K, N]: B is N-major, two boxes of 64 columns per stage.
// CHECK-LABEL: func.func private @nn_f16
// CHECK-SAME:    {box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"}
// CHECK-SAME:    {box = array<i64: 64, 64>, index = 1 : i64, kind = "tensor_map", role = "b"}
// CHECK-LABEL: gpu.func @nn_f16
// CHECK-SAME:    (%[[A:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr,
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[A]], %{{.*}}, box[%[[K:.*]], %{{.*}}]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[B]], %{{.*}}, box[%{{.*}}, %[[K]]]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[B]], %{{.*}}, box[%{{.*}}, %[[K]]]
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
func.func @nn_f16(%a: tensor<?x64xf16>, %b: tensor<64x?xf16>) -> tensor<?x?xf16> {
  %o = coda.gemm %a, %b : tensor<?x64xf16>, tensor<64x?xf16> -> (tensor<?x?xf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf16>
}

// A [K, M], B [N, K]: A is M-major, two boxes of 64 rows per stage.
// CHECK-LABEL: func.func private @tt_bf16
// CHECK-SAME:    {box = array<i64: 64, 64>, index = 0 : i64, kind = "tensor_map", role = "a"}
// CHECK-SAME:    {box = array<i64: 64, 128>, index = 1 : i64, kind = "tensor_map", role = "b"}
// CHECK-LABEL: gpu.func @tt_bf16
// CHECK:         nvvm.wgmma.mma_async {{.*}}, A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
func.func @tt_bf16(%a: tensor<64x?xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xbf16> {
  %o = coda.gemm %a, %b transpose_a transpose_b : tensor<64x?xbf16>, tensor<?x64xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xbf16>
}

// f32 operands are multiplied as tf32, 32 elements (128 bytes) of K a stage.
// CHECK-LABEL: func.func private @nt_tf32
// CHECK-SAME:    {box = array<i64: 32, 128>, index = 0 : i64, kind = "tensor_map", role = "a"}
// CHECK-SAME:    {box = array<i64: 32, 128>, index = 1 : i64, kind = "tensor_map", role = "b"}
// CHECK-SAME:    tile = array<i64: 128, 128, 32>
// CHECK-LABEL: gpu.func @nt_tf32
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 8>, D[<f32>, <zero>], A[<tf32>, <one>, <row>], B[<tf32>, <one>, <col>]
func.func @nt_tf32(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xf32>, tensor<?x64xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// A batched operand is a rank-3 tensor map with a box of one batch, loaded
// at the tile's batch (tile / tiles per batch); a shared operand keeps rank 2.
// CHECK-LABEL: func.func private @batched
// CHECK-SAME:    {box = array<i64: 64, 128, 1>, index = 0 : i64, kind = "tensor_map", role = "a"}
// CHECK-SAME:    {box = array<i64: 64, 128>, index = 1 : i64, kind = "tensor_map", role = "b"}
// CHECK-LABEL: gpu.func @batched
// CHECK-SAME:    (%[[A:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[BATCHES:.*]]: i32)
// CHECK:         %[[TILES:.*]] = arith.muli %[[PER_BATCH:.*]], %[[BATCHES]] : i32
// CHECK:         scf.for %[[TILE:.*]] = %{{.*}} to %[[TILES]]
// CHECK:           %[[BATCH:.*]] = arith.divui %[[TILE]], %[[PER_BATCH]]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[A]], %{{.*}}, box[%{{.*}}, %{{.*}}, %[[BATCH]]]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[B]], %{{.*}}, box[%{{.*}}, %{{.*}}] :
func.func @batched(%a: tensor<?x?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?x?xbf16> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?x?xbf16> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?x?xbf16>
}
