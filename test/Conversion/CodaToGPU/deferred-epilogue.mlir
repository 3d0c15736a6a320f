// RUN: coda-opt %s --coda-to-gpu=tile-n=128 | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu | FileCheck %s --check-prefix=WIDE

// A cooperative kernel whose accumulators fit twice in a consumer's registers
// (128 x 128 tiles: 64 per thread) defers each tile's epilogue. A consumer
// issues the tile's first K steps (stages - 3 = 4 of the 7) without waiting
// for their wgmmas, prefetches the tile's residual rows into L2, runs the
// previous tile's epilogue on the accumulators carried from the last
// iteration while the tensor cores multiply, then retires the issued steps,
// releases their slots but the last, and runs the rest of the main loop. The
// last tile's epilogue follows the tile loop.
// CHECK-LABEL: gpu.func @chain
// CHECK:         nvvm.setmaxregister increase 232
// CHECK:         %[[TILES:.*]]:4 = scf.for %[[TILE:.*]] = %[[BLOCK:[^ ]*]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %c0_i32{{.*}}, %{{.*}} = %c0_i32{{.*}}, %[[PREV:.*]] = %c0_i32{{.*}}, %[[PENDING:.*]] = %{{.*}}) -> (i32, i32, i32, !llvm.struct<
// CHECK:           %[[ISSUED:.*]] = arith.minui %{{.*}}, %c4_i32
// CHECK:           nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:       nvvm.wgmma.wait.group.sync.aligned
// CHECK:           scf.for %{{.*}} = %c1_i32{{.*}} to %[[ISSUED]]
// CHECK:             nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:         nvvm.wgmma.wait.group.sync.aligned
// CHECK:           nvvm.cp.async.bulk.prefetch
// CHECK:           %[[LATER:.*]] = arith.cmpi ne, %[[TILE]], %[[BLOCK]]
// CHECK:           scf.if %[[LATER]] {
// CHECK:             nvvm.vote.sync  all
// CHECK:             llvm.extractvalue %[[PENDING]]
// CHECK:             llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<1>
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           scf.for %{{.*}} = %c1_i32{{.*}} to %[[ISSUED]]
// CHECK:             nvvm.mbarrier.arrive
// CHECK:           scf.for %{{.*}} = %[[ISSUED]] to
// CHECK:             nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             nvvm.mbarrier.arrive
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           scf.yield %{{.*}}, %{{.*}}, %[[TILE]], %{{.*}} :
// CHECK:         %[[ANY:.*]] = arith.cmpi ult, %[[BLOCK]], %{{.*}}
// CHECK:         scf.if %[[ANY]] {
// CHECK:           nvvm.vote.sync  all
// CHECK:           llvm.extractvalue %[[TILES]]#3
// CHECK:         gpu.return

// 128 x 256 tiles (128 accumulator registers per thread) run the epilogue
// right after their main loop.
// WIDE-LABEL: gpu.func @chain
// WIDE:         scf.for
// WIDE:           nvvm.wgmma.wait.group.sync.aligned 1
// WIDE:           scf.for
// WIDE:             nvvm.wgmma.wait.group.sync.aligned 1
// WIDE:           nvvm.wgmma.wait.group.sync.aligned 0
// WIDE:           nvvm.vote.sync  all
// WIDE-NOT:     nvvm.vote.sync
// WIDE:         gpu.return
func.func @chain(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>,
                 %bias: tensor<?xbf16> {coda.name = "bias"},
                 %res: tensor<?x?xbf16> {coda.name = "residual"},
                 %seed: i64 {coda.name = "seed"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<?xbf16> [n], %res : tensor<?x?xbf16> [m, n], %seed : i64)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {p = 0.1 : f32}
    %3 = arith.addf %2, %r : f32
    coda.yield %3 : f32
  }
  return %0 : tensor<?x?xbf16>
}
