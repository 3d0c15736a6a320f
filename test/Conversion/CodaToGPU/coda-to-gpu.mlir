// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu --coda-lower-tile-epilogues --cse | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu --coda-lower-tile-epilogues > %t.mlir
// RUN: %python %testlib/kernel_memory.py %t.mlir | FileCheck %s --check-prefix=MEMORY
// Only tensors spanning m and n are prefetched into L2, not the [n] bias.
// RUN: FileCheck %s --check-prefix=NOPREFETCH < %t.mlir
// NOPREFETCH-NOT: prefetch
// One Philox call per 8 dropout decisions: 2 rows x 2 groups of 32 columns
// per thread at tile-n=64, 4 groups at tile-n=128; 2 mului_extended a round,
// in each of the epilogue's two copies (interior tiles and the others).
// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu --coda-lower-tile-epilogues | grep -c arith.mului_extended | FileCheck %s --check-prefix=PHILOX64
// RUN: coda-opt %s --coda-plan-kernels=tile-n=128 --coda-to-gpu --coda-lower-tile-epilogues | grep -c arith.mului_extended | FileCheck %s --check-prefix=PHILOX128

// The program becomes a host declaration carrying the ABI, and a gpu.module
// with one kernel of 384 threads (a producer and two consumer warpgroups).
// CHECK-LABEL: func.func private @mlp(
// CHECK-SAME:    tensor<3072xf32> {coda.name = "bias"}
// CHECK-SAME:    -> (tensor<?x3072xbf16> {coda.name = "output"})
// CHECK-SAME:    attributes {coda.kernel_abi = {block = array<i64: 384, 1, 1>, cluster_m = 1 : i64, group_rows = 8 : i64, kernel = "mlp", max_n = 0 : i64, module = "mlp_kernels",
// CHECK-SAME:    params = [{box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"},
// CHECK-SAME:              {box = array<i64: 64, 64>, index = 1 : i64, kind = "tensor_map", role = "b"},
// CHECK-SAME:              {index = 2 : i64, kind = "global_ptr", role = "input"},
// CHECK-SAME:              {index = 3 : i64, kind = "i64", role = "input"},
// CHECK-SAME:              {index = 0 : i64, kind = "global_ptr", role = "output"},
// CHECK-SAME:              {index = -1 : i64, kind = "i32", role = "m"}, {index = -1 : i64, kind = "i32", role = "n"},
// CHECK-SAME:              {index = -1 : i64, kind = "i32", role = "k"}, {index = -1 : i64, kind = "i32", role = "batch"}],
// CHECK-SAME:    shared_memory_bytes = 196736 : i64, tile = array<i64: 128, 64, 64>}}
// CHECK:       gpu.module @mlp_kernels attributes {coda.kernel_abi = {
// CHECK:         llvm.mlir.global external @coda_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK:         gpu.func @mlp(%[[A:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr, %[[BIAS:.*]]: !llvm.ptr<1>, %[[SEED:.*]]: i64, %[[OUT:.*]]: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel
// CHECK-SAME:      known_block_size = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32

// Thread 0 sets up a full (one arrival) and an empty (the 256 consumer
// threads) mbarrier per stage: 6 stages of 128 x 64 A and 64 x 64 B.
// CHECK:         %[[TID:.*]] = arith.index_castui %thread_id_x
// CHECK:         %[[WG:.*]] = arith.divui %[[TID]], %c128_i32
// CHECK-COUNT-12: nvvm.mbarrier.init %{{.*}}, %c{{1|256}}_i32
// CHECK:         nvvm.fence.mbarrier.init
// CHECK:         gpu.barrier
// CHECK:         %[[BLOCK:.*]] = arith.index_castui %block_id_x
// CHECK:         %[[GRID:.*]] = arith.index_castui %grid_dim_x

// Warpgroup 0 produces: its budget drops to 40 registers, thread 0 walks
// the block's tiles (blockIdx.x, then every gridDim.x-th) and their K steps,
// waits for each slot to be empty, arms its full barrier and loads A and B.
// CHECK:         %[[PRODUCER:.*]] = arith.cmpi eq, %[[WG]], %c0_i32
// CHECK:         scf.if %[[PRODUCER]] {
// CHECK-NEXT:      nvvm.setmaxregister decrease 40
// CHECK:           scf.for %{{.*}} = %[[BLOCK]] to %{{.*}} step %[[GRID]] iter_args(
// CHECK:             scf.for
// CHECK:               nvvm.mbarrier.try_wait.parity
// CHECK:               nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c24576_i32
// CHECK:               nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[A]], %{{.*}}, box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK:               nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[B]], %{{.*}}, box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr

// Warpgroups 1 and 2 consume: 232 registers, the same tiles. The first K
// step starts the accumulator (scale-d 0), then the loop accumulates, keeps
// one wgmma group in flight and releases the previous step's slot; the last
// slot is released after the final wait.
// CHECK:         } else {
// CHECK-NEXT:      nvvm.setmaxregister increase 232
// CHECK:           scf.for %{{.*}} = %[[BLOCK]] to %{{.*}} step %{{.*}} iter_args(
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             llvm.mlir.zero
// CHECK:             scf.for
// CHECK:               nvvm.mbarrier.try_wait.parity
// CHECK:               nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:       nvvm.wgmma.mma_async
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK:               nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:               nvvm.mbarrier.arrive
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.if
// CHECK:               nvvm.mbarrier.arrive

// The epilogue runs on the accumulator registers, loads the [n] bias a pair
// of columns at a time, and stores each element once, converted to bf16, 16
// bytes per lane after a transpose within each quad of lanes. Addresses are
// a row's address plus a constant. A warp whose rows and tile columns are
// inside the output, with N a multiple of 8 and every tensor 16-byte aligned
// (a vote makes that the same for the whole warp), runs a copy without
// checks ...
// CHECK:             %[[INTERIOR:.*]] = nvvm.vote.sync  all %{{.*}}, %{{.*}} -> i1
// CHECK-NEXT:        scf.if %[[INTERIOR]] {
// CHECK-NOT:           scf.if
// CHECK:               llvm.getelementptr %[[OUT]]
// CHECK-NOT:           scf.if
// CHECK:               llvm.load {{.*}} : !llvm.ptr<1> -> vector<2xf32>
// CHECK-NOT:           scf.if
// CHECK:               llvm.extractvalue
// CHECK:               arith.mului_extended
// CHECK:               gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK:               gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK-NOT:           scf.if
// CHECK:               llvm.store %{{.*}}, %{{.*}} : vector<4xi32>, !llvm.ptr<1>
// ... the others check each access. A 16-bit [m, n] output's rows may not
// start on 16-byte boundaries there (an odd N): each lane takes the chunk of
// the lane before (lane 0, lane 3's of the group before) by a shuffle, picks
// the aligned 16 bytes that end in its own chunk by the row's misalignment (a
// funnel shift by 0 or 16 bits), and writes them with one store when they
// are the tile's and inside the output, else element by element; lane 3 of
// the last group writes the tile's last columns. Their accumulators pass
// through an empty inline asm, so that LLVM does not hoist the arithmetic
// both copies share above the branch.
// CHECK:             } else {
// CHECK:               llvm.inline_asm "", "=f,=f,
// CHECK:               scf.if %{{.*}} -> (vector<2xf32>) {
// CHECK:               llvm.ptrtoint
// CHECK:               gpu.shuffle  idx
// CHECK:               llvm.intr.fshr
// CHECK:               scf.if
// CHECK:               llvm.store %{{.*}}, %{{.*}} : vector<4xi32>, !llvm.ptr<1>
// CHECK:             } else {
// CHECK-COUNT-8:       llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr<1>
// CHECK:         gpu.return

// MEMORY: mlp: loads input#2; stores output#0

// PHILOX64: {{^}}160{{$}}
// PHILOX128: {{^}}320{{$}}
func.func @mlp(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
               %bias: tensor<3072xf32> {coda.name = "bias"},
               %seed: i64 {coda.name = "seed"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %out = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<3072xf32> [n], %seed : i64)
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %s: i64):
    // A product, not a sum: a bias added to the accumulator would start the
    // accumulators instead (bias-accumulators.mlir).
    %0 = arith.mulf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {p = 0.1 : f32}
    coda.yield %2 : f32
  }
  return %out : tensor<?x3072xbf16>
}
