// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels="tile-n=64 schedule=pingpong" --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=PINGPONG
// RUN: coda-opt %s --coda-plan-kernels="tile-m=256 tile-n=64" --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=TWO-FRAGMENTS
// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu --coda-lower-tile-epilogues > %t.mlir
// RUN: %python %testlib/kernel_memory.py %t.mlir | FileCheck %s --check-prefix=MEMORY

// A bias added to an accumulator that nothing else reads, the sum only
// stored (a linear layer), starts the accumulators: warp 1 of the producer warpgroup loads each tile's bias as
// f32 into one of two shared-memory buffers (tile-n f32 each, after the
// stages), a tile ahead; each consumer thread reads its columns from the
// buffer, builds its accumulators from them and releases the buffer, and its
// first wgmma accumulates onto them. The epilogue reads the sum from the
// accumulators and loads no bias.
// CHECK-LABEL: func.func private @linear(
// CHECK-SAME:    shared_memory_bytes = 197280 : i64, tile = array<i64: 128, 64, 64>}}

// The barriers: a full and an empty one per stage, then a full one (32
// loader lanes) and an empty one (256 consumer threads) per bias buffer.
// CHECK:         gpu.func @linear(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[BIAS:.*]]: !llvm.ptr<1>,
// CHECK-COUNT-16: nvvm.mbarrier.init %{{.*}}, %c{{1|256}}_i32
// CHECK-NEXT:    arith.constant
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c{{32|256}}_i32
// CHECK:         nvvm.fence.mbarrier.init

// The loader: every tile of the block, its bias buffer's empty barrier, two
// columns per lane (lane l: columns l and l + 32 of the tile) from global
// memory, stored as f32, then its arrival on the full barrier.
// CHECK:         nvvm.setmaxregister  decrease 40
// CHECK:         %[[LOADER:.*]] = arith.cmpi eq, %{{.*}}, %c1_i32
// CHECK-NEXT:    scf.if %[[LOADER]] {
// CHECK:           scf.for
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK:             llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK:             llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK:             llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK:             nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>

// The consumers: the buffer's full barrier, 8 pairs of columns (tile-n = 64),
// the accumulators through the empty inline asm that gives each its own
// register, the buffer released, and the first wgmma accumulating (scale-d 1).
// CHECK:         nvvm.setmaxregister  increase 232
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-8:   llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK:           llvm.inline_asm "", "=f,=f,
// CHECK:           nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK:           nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK-NOT:       D[<f32>, <zero>]
// The epilogue stores without loading from the bias.
// CHECK:           nvvm.vote.sync
// CHECK-NOT:       llvm.load {{.*}}!llvm.ptr<1>
// CHECK:           gpu.return

// Under ping-pong (and with two fragments per consumer) ptxas would serialize
// the wgmmas that start from the bias: it stays in the epilogue.
// PINGPONG-LABEL: gpu.func @linear(
// PINGPONG-COUNT-16: nvvm.mbarrier.init %{{.*}}, %c{{1|128}}_i32
// PINGPONG-NEXT:  nvvm.fence.mbarrier.init
// PINGPONG:       nvvm.wgmma.mma_async {{.*}}, D[<f32>, <zero>]
// TWO-FRAGMENTS-LABEL: gpu.func @linear(
// TWO-FRAGMENTS:       nvvm.wgmma.mma_async {{.*}}, D[<f32>, <zero>]

// MEMORY: linear: loads input#2; stores output#0
func.func @linear(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                  %bias: tensor<3072xf32> {coda.name = "bias"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %out = coda.gemm %x, %w transpose_b ins(%bias : tensor<3072xf32> [n])
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %0 = arith.addf %acc, %b : f32
    coda.yield %0 : f32
  }
  return %out : tensor<?x3072xbf16>
}

// Before more epilogue arithmetic the bias stays in the epilogue (measured
// faster): no bias buffers, the first wgmma starts at zero.
// CHECK-LABEL: func.func private @mlp(
// CHECK-SAME:    shared_memory_bytes = 196736 : i64
// CHECK:         gpu.func @mlp(
// CHECK-COUNT-16: nvvm.mbarrier.init %{{.*}}, %c{{1|256}}_i32
// CHECK-NEXT:    nvvm.fence.mbarrier.init
// CHECK:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// MEMORY: mlp: loads input#2; stores output#0
func.func @mlp(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
               %bias: tensor<3072xf32> {coda.name = "bias"},
               %seed: i64 {coda.name = "seed"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %out = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<3072xf32> [n], %seed : i64)
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {p = 0.1 : f32}
    coda.yield %2 : f32
  }
  return %out : tensor<?x3072xbf16>
}
