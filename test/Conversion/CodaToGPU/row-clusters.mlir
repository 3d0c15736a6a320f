// Row reductions that the row's elements need (not row statistics, which
// row-statistics.mlir merges after the GEMM) over rows wider than a tile:
// the plan puts the tiles of a row in one cluster along N (128-column tiles up to 8 of them, 256-column
// ones past that), the kernel walks row blocks with the block of rank r on
// column block r, and each row reduction of the epilogue exchanges its
// rows' partial results across the cluster: every quad leader stores into
// each block's slot through mapa and arrives on that block's barrier with a
// cluster-scope release, waits on its own, and combines the 6 blocks'
// partial results in rank order.
// RUN: coda-opt %s --coda-plan-kernels | FileCheck %s --check-prefix=PLAN
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu | FileCheck %s --check-prefix=KERNEL
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=EXCHANGE

// PLAN-LABEL: func.func @layernorm
// PLAN: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 6, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16, cluster_n = 6>

// KERNEL-LABEL: gpu.module @layernorm_kernels
// KERNEL-SAME: cluster_n = 6 : i64
// KERNEL-SAME: max_n = 768 : i64
// The row exchange's two barriers count 64 quad leaders of 6 blocks.
// KERNEL: nvvm.mbarrier.init %{{.*}}, %c384_i32
// KERNEL: nvvm.mbarrier.init %{{.*}}, %c384_i32
// KERNEL: nvvm.cluster.arrive
// KERNEL: nvvm.cluster.wait
// KERNEL: coda.tile_epilogue {{.*}} exchange(%{{.*}} : !llvm.ptr<3>, %{{.*}})
// KERNEL: nvvm.cluster.arrive
// KERNEL: nvvm.cluster.wait

// EXCHANGE-LABEL: gpu.func @layernorm
// EXCHANGE: nvvm.read.ptx.sreg.cluster.ctarank
// EXCHANGE-COUNT-6: nvvm.mbarrier.arrive %{{.*}} {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// EXCHANGE: nvvm.mbarrier.try_wait.parity
// EXCHANGE-NEXT: nvvm.fence.sc.cluster
// EXCHANGE: gpu.shuffle idx
func.func @layernorm(%x: tensor<?x64xbf16>, %w: tensor<768x64xbf16>, %g: tensor<768xf32>) -> (tensor<?x768xbf16>, tensor<?xf32>) {
  %o:2 = coda.gemm %x, %w transpose_b ins(%g : tensor<768xf32> [n]) : tensor<?x64xbf16>, tensor<768x64xbf16> -> (tensor<?x768xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %gamma: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %y = arith.mulf %d, %var : f32
    %z = arith.mulf %y, %gamma : f32
    coda.yield %z, %var : f32, f32
  }
  return %o#0, %o#1 : tensor<?x768xbf16>, tensor<?xf32>
}

// 3000 columns: 12 tiles of 256.
// PLAN-LABEL: func.func @wide
// PLAN: tile_n = 256, {{.*}} cluster_n = 12>
func.func @wide(%x: tensor<?x64xbf16>, %w: tensor<3000x64xbf16>) -> tensor<?x3000xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<3000x64xbf16> -> (tensor<?x3000xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = coda.row_reduce sum %acc
    %d = arith.subf %acc, %s : f32
    coda.yield %d : f32
  }
  return %o : tensor<?x3000xf32>
}

// A dynamic N keeps one 128-column tile; the runtime sizes the cluster for
// each problem.
// PLAN-LABEL: func.func @dynamic
// PLAN: tile_n = 128, {{.*}} epilogue_vector_bytes = 16>
func.func @dynamic(%x: tensor<?x64xbf16>, %w: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = coda.row_reduce max %acc
    %d = arith.subf %acc, %s : f32
    coda.yield %d : f32
  }
  return %o : tensor<?x?xf32>
}
