// Row statistics (row reductions whose results no element of the row needs,
// and the outputs computed from them) over rows wider than a tile, or of a
// dynamic width: no cluster along N and no limit on N (max_n = 0). Each
// tile combines its columns of each row, then its quad's lanes, and lane 0
// of the quad writes the tile's partial result at [batch][column tile][row]
// of the reduction's scratch (a row_partials parameter); the kernel does
// not compute or write the outputs that depend on them. The row merge
// kernel, on the kernel's own parameters, combines each row's partial
// results in tile order, divides a mean by N, runs the epilogue's ops on
// the statistics (reading inputs along m at the row) and writes those
// outputs.
// RUN: coda-opt %s --coda-plan-kernels | FileCheck %s --check-prefix=PLAN
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu | FileCheck %s --check-prefix=KERNEL
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=LOWER

// A residual's RMSNorm statistic over 3000 columns: 12 tiles of 256.
// PLAN-LABEL: func.func @rms
// PLAN: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 256, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>}

// KERNEL-LABEL: gpu.module @rms_kernels
// KERNEL-SAME: max_n = 0 : i64
// KERNEL-SAME: {index = 0 : i64, kind = "row_partials", merge = "rms_row_merge", role = "row_reduction"}
// KERNEL: gpu.func @rms(%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[SCRATCH:.*]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: i32, %{{[a-z0-9]+}}: i32, %{{[a-z0-9]+}}: i32, %{{[a-z0-9]+}}: i32)
// KERNEL-NOT: nvvm.cluster.arrive
// KERNEL: coda.tile_epilogue {{.*}} outs(%{{.*}}, %{{.*}} : !llvm.ptr<1>, !llvm.ptr<1>) row_partials(%[[SCRATCH]] : !llvm.ptr<1>)
// KERNEL: gpu.func @rms_row_merge(%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[RSTD:[a-z0-9]+]]: !llvm.ptr<1>, %[[PARTIALS:[a-z0-9]+]]: !llvm.ptr<1>, %[[M:[a-z0-9]+]]: i32, %[[N:[a-z0-9]+]]: i32, %{{[a-z0-9]+}}: i32, %{{[a-z0-9]+}}: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// KERNEL: scf.if
// The 12 tiles' partial sums, in order.
// KERNEL: %[[TILES:.*]] = arith.divui
// KERNEL: %[[COUNT:.*]] = arith.uitofp %[[N]]
// KERNEL: %[[SUM:.*]] = scf.for %{{.*}} = %{{.*}} to %[[TILES]] step
// KERNEL: llvm.getelementptr %[[PARTIALS]]
// KERNEL: arith.addf
// KERNEL: %[[MEAN:.*]] = arith.divf %[[SUM]], %[[COUNT]]
// KERNEL: %[[EPS:.*]] = arith.constant 9.99999997E-7 : f32
// KERNEL: %[[V:.*]] = arith.addf %[[MEAN]], %[[EPS]]
// KERNEL: %[[R:.*]] = math.rsqrt %[[V]]
// KERNEL: %[[AT:.*]] = llvm.getelementptr %[[RSTD]]
// KERNEL: llvm.store %[[R]], %[[AT]] : f32, !llvm.ptr<1>

// The kernel stores the tile's partial sums (never the mean or the rstd):
// a quad's combine, then lane 0 of the quad writes, rows inside M only.
// LOWER-LABEL: gpu.func @rms(
// LOWER-NOT: math.rsqrt
// LOWER: gpu.shuffle xor %{{.*}}, %c1_i32
// LOWER: gpu.shuffle xor %{{.*}}, %c2_i32
// LOWER: scf.if
// LOWER: llvm.getelementptr %arg5
// LOWER: llvm.store {{.*}} : f32, !llvm.ptr<1>
// LOWER-NOT: math.rsqrt
// LOWER-LABEL: gpu.func @rms_row_merge(
// LOWER: math.rsqrt
func.func @rms(%x: tensor<?x64xbf16>, %w: tensor<3000x64xbf16>, %r: tensor<?x3000xbf16>) -> (tensor<?x3000xbf16>, tensor<?xf32>) {
  %o:2 = coda.gemm %x, %w transpose_b ins(%r : tensor<?x3000xbf16> [m, n]) : tensor<?x64xbf16>, tensor<3000x64xbf16> -> (tensor<?x3000xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %res: f32):
    %h = arith.addf %acc, %res : f32
    %sq = arith.mulf %h, %h : f32
    %ms = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-6 : f32
    %v = arith.addf %ms, %eps : f32
    %rstd = math.rsqrt %v : f32
    coda.yield %h, %rstd : f32, f32
  }
  return %o#0, %o#1 : tensor<?x3000xbf16>, tensor<?xf32>
}

// Two statistics of a batched GEMM over a dynamic N: a row's log-sum of
// exponentials shifted by an input along [b, m], and its maximum, in bf16.
// The merge reads the input at the row and narrows the maximum to bf16.
// PLAN-LABEL: func.func @lse
// PLAN: tile_n = 256, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>}
// KERNEL-LABEL: gpu.module @lse_kernels
// KERNEL-SAME: max_n = 0 : i64
// KERNEL-SAME: {index = 0 : i64, kind = "row_partials", merge = "lse_row_merge", role = "row_reduction"}, {index = 1 : i64, kind = "row_partials", merge = "lse_row_merge", role = "row_reduction"}
// KERNEL: gpu.func @lse_row_merge(%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %[[SHIFT:.*]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[EXPS:.*]]: !llvm.ptr<1>, %[[MAXES:.*]]: !llvm.ptr<1>,
// KERNEL: scf.for
// KERNEL: llvm.getelementptr %[[EXPS]]
// KERNEL: arith.addf
// KERNEL: scf.for
// KERNEL: llvm.getelementptr %[[MAXES]]
// KERNEL: arith.maximumf
// KERNEL: %[[LOG:.*]] = math.log
// KERNEL: %[[AT:.*]] = llvm.getelementptr %[[SHIFT]]
// KERNEL: %[[RAW:.*]] = llvm.load %[[AT]] : !llvm.ptr<1> -> bf16
// KERNEL: %[[SHIFTED:.*]] = arith.extf %[[RAW]] : bf16 to f32
// KERNEL: arith.subf %[[LOG]], %[[SHIFTED]]
// KERNEL: arith.truncf %{{.*}} : f32 to bf16
func.func @lse(%x: tensor<?x?x64xbf16>, %w: tensor<?x64xbf16>, %s: tensor<?x?xbf16>) -> (tensor<?x?xf32>, tensor<?x?xbf16>) {
  %o:2 = coda.gemm %x, %w transpose_b ins(%s : tensor<?x?xbf16> [b, m]) : tensor<?x?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [b, m], tensor<?x?xbf16> [b, m]) {
  ^bb0(%acc: f32, %shift: f32):
    %e = math.exp %acc : f32
    %sum = coda.row_reduce sum %e
    %mx = coda.row_reduce max %acc
    %l = math.log %sum : f32
    %lse = arith.subf %l, %shift : f32
    coda.yield %lse, %mx : f32, f32
  }
  return %o#0, %o#1 : tensor<?x?xf32>, tensor<?x?xbf16>
}

// Reductions centered on an earlier one. A LayerNorm's statistics: each tile
// writes its own mean (its sum over the columns inside the output divided
// by their count) and the sum of its values' squared deviations from it;
// the merge runs Chan's merge over the tiles (count, mean, M2), and divides
// M2 by N for the variance.
// KERNEL-LABEL: gpu.module @layernorm_kernels
// KERNEL: gpu.func @layernorm_row_merge(%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[MEANOUT:[a-z0-9]+]]: !llvm.ptr<1>, %[[RSTDOUT:[a-z0-9]+]]: !llvm.ptr<1>, %[[MEANS:[a-z0-9]+]]: !llvm.ptr<1>, %[[M2S:[a-z0-9]+]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: i32, %[[N:[a-z0-9]+]]: i32,
// KERNEL: %[[COUNT:.*]] = arith.uitofp %[[N]]
// KERNEL: %[[MERGED:.*]]:3 = scf.for {{.*}} iter_args(%[[SEEN:.*]] = %{{.*}}, %[[MEAN:.*]] = %{{.*}}, %[[M2:.*]] = %{{.*}}) -> (f32, f32, f32)
// KERNEL: %[[COLS:.*]] = arith.uitofp
// KERNEL: %[[TOTAL:.*]] = arith.addf %[[SEEN]], %[[COLS]]
// KERNEL: llvm.getelementptr %[[MEANS]]
// KERNEL: %[[DELTA:.*]] = arith.subf %{{.*}}, %[[MEAN]]
// KERNEL: %[[SHARE:.*]] = arith.divf %[[COLS]], %[[TOTAL]]
// KERNEL: llvm.getelementptr %[[M2S]]
// KERNEL: scf.yield %[[TOTAL]]
// KERNEL: %[[VAR:.*]] = arith.divf %[[MERGED]]#2, %[[COUNT]]
// KERNEL: math.rsqrt
// KERNEL: llvm.getelementptr %[[MEANOUT]]
// KERNEL: llvm.store %[[MERGED]]#1
// The tile centers its values on its own mean: the quad's sum divided by the
// tile's columns inside N, then the squares of the differences.
// LOWER-LABEL: gpu.func @layernorm(
// LOWER-NOT: math.rsqrt
// LOWER: arith.minui
// LOWER: arith.uitofp
// LOWER: %[[TILEMEAN:.*]] = arith.divf
// LOWER: %[[D:.*]] = arith.subf %{{.*}}, %[[TILEMEAN]]
// LOWER: arith.mulf %[[D]], %[[D]]
// LOWER-LABEL: gpu.func @layernorm_row_merge(
func.func @layernorm(%x: tensor<?x64xbf16>, %w: tensor<3000x64xbf16>) -> (tensor<?x3000xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %o:3 = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<3000x64xbf16> -> (tensor<?x3000xbf16> [m, n], tensor<?xf32> [m], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %v = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %v : f32
    coda.yield %acc, %mean, %rstd : f32, f32, f32
  }
  return %o#0, %o#1, %o#2 : tensor<?x3000xbf16>, tensor<?xf32>, tensor<?xf32>
}

// A log-sum-exp shifted by the row's maximum: each tile writes its maximum
// and its sum of exponentials of the values less it; the merge starts from
// the first tile's pair and rescales both sums to each new maximum.
// KERNEL-LABEL: gpu.module @max_lse_kernels
// KERNEL: gpu.func @max_lse_row_merge(
// KERNEL: %[[MERGED:.*]]:2 = scf.for %{{.*}} = %c1_i32 to {{.*}} iter_args(%[[TOP:.*]] = %{{.*}}, %[[SUM:.*]] = %{{.*}}) -> (f32, f32)
// KERNEL: %[[HIGHEST:.*]] = arith.maximumf %[[TOP]]
// KERNEL: arith.subf %[[TOP]], %[[HIGHEST]]
// KERNEL: math.exp
// KERNEL: math.exp
// KERNEL: scf.yield %[[HIGHEST]]
// KERNEL: math.log %[[MERGED]]#1
// KERNEL: arith.addf %[[MERGED]]#0
// LOWER-LABEL: gpu.func @max_lse(
// LOWER: %[[SHUFFLED:.*]], %{{.*}} = gpu.shuffle xor %{{.*}}, %c2_i32
// LOWER-NEXT: %[[TILEMAX:.*]] = arith.maximumf %{{.*}}, %[[SHUFFLED]]
// LOWER: %[[D:.*]] = arith.subf %{{.*}}, %[[TILEMAX]]
// LOWER-NEXT: math.exp %[[D]]
func.func @max_lse(%x: tensor<?x768xbf16>, %w: tensor<50257x768xbf16>) -> tensor<?xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x768xbf16>, tensor<50257x768xbf16> -> (tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %mx = coda.row_reduce max %acc
    %d = arith.subf %acc, %mx : f32
    %e = math.exp %d : f32
    %s = coda.row_reduce sum %e
    %l = math.log %s : f32
    %lse = arith.addf %mx, %l : f32
    coda.yield %lse : f32
  }
  return %o : tensor<?xf32>
}

// A row reduction the row's elements need is exchanged across a cluster
// (row-clusters.mlir), and so are row statistics under a pinned cluster;
// rows of one static tile need no merge.
// PLAN-LABEL: func.func @one_tile
// PLAN: tile_n = 128, stages = 7, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>}
// KERNEL-LABEL: gpu.module @one_tile_kernels
// KERNEL-SAME: max_n = 128 : i64
// KERNEL-NOT: row_partials
// KERNEL: gpu.func @one_tile(
// KERNEL-NOT: gpu.func @one_tile_row_merge
func.func @one_tile(%x: tensor<?x64xbf16>, %w: tensor<100x64xbf16>) -> tensor<?xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<100x64xbf16> -> (tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %s = coda.row_reduce sum %acc
    coda.yield %s : f32
  }
  return %o : tensor<?xf32>
}
