// RUN: coda-opt %s --coda-plan-kernels=deterministic=1 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=ATOMIC
// RUN: coda-opt %s --coda-plan-kernels="deterministic=1 schedule=pingpong" --coda-to-gpu | FileCheck %s --check-prefix=PINGPONG

// Under a deterministic plan a column reduction's output parameter is a
// partials scratch (one row per consumer warp of each tile) with a merge
// kernel of its own in the module, and the epilogue stores each warp's
// partial result there instead of adding it to the output atomically; the
// merge kernel combines rows w, w + 8, ... eight loads at a time, then the
// 8 warps' results through shared memory in warp order.
// CHECK:       params = [{{.*}}{index = 0 : i64, kind = "global_ptr", role = "output"},
// CHECK-SAME:    {index = 1 : i64, kind = "partials", merge = "grads_merge1", role = "output"},
// CHECK-SAME:    {index = 2 : i64, kind = "partials", merge = "grads_merge2", role = "output"}
// CHECK:       gpu.module @grads_kernels
// CHECK:         llvm.mlir.global internal @coda_merge_smem() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<256 x f32>
// CHECK:         gpu.func @grads(
// CHECK-NOT:       llvm.atomicrmw
// CHECK:         gpu.func @grads_merge1(%[[PARTIALS:.*]]: !llvm.ptr<1>, %[[OUT:.*]]: !llvm.ptr<1>, %[[ROWS:.*]]: i32, %[[N:.*]]: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK:           %[[FOR:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64_i32 iter_args(%[[ACC:.*]] = %cst) -> (f32)
// CHECK-COUNT-8:     llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK-COUNT-8:     arith.addf
// CHECK:           llvm.store %[[FOR]], %{{.*}} : f32, !llvm.ptr<3>
// CHECK:           gpu.barrier
// CHECK-COUNT-8:   llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK:           llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// CHECK:         gpu.func @grads_merge2(
// CHECK:           arith.maximumf

// By default the warps add their partial results to the output with f32
// atomics (which the runtime fills first), and there is no merge kernel.
// ATOMIC:      {fill = 0.000000e+00 : f64, index = 1 : i64, kind = "atomic_ptr", role = "output"},
// ATOMIC-SAME: {fill = 0xFFF0000000000000 : f64, index = 2 : i64, kind = "atomic_ptr", role = "output"}
// ATOMIC:      llvm.atomicrmw fadd
// ATOMIC-NOT:  gpu.func @grads_merge

// Under ping-pong each consumer owns a tile: 4 warps, and so 4 partial rows,
// per tile.
// PINGPONG:    kind = "partials", merge = "grads_merge1"
// PINGPONG:    schedule = "pingpong"
// PINGPONG:    coda.tile_epilogue
// PINGPONG-SAME: schedule = pingpong{{.*}}deterministic = true>
func.func @grads(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %x: tensor<?x?xbf16> {coda.name = "x"})
    -> (tensor<?x?xbf16> {coda.name = "dx"}, tensor<?xf32> {coda.name = "dbias"},
        tensor<?xf32> {coda.name = "colmax"}) {
  %o:3 = coda.gemm %a, %b transpose_b ins(%x : tensor<?x?xbf16> [m, n])
      : tensor<?x?xbf16>, tensor<?x?xbf16>
      -> (tensor<?x?xbf16> [m, n], tensor<?xf32> [n], tensor<?xf32> [n]) {
  ^bb0(%acc: f32, %xv: f32):
    %0 = arith.mulf %acc, %xv : f32
    %1 = coda.col_reduce sum %0
    %2 = coda.col_reduce max %acc
    coda.yield %0, %1, %2 : f32, f32, f32
  }
  return %o#0, %o#1, %o#2 : tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
}
