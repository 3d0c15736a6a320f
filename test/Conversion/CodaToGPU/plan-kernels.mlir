// The first stage of the GPU lowering: coda-plan-kernels gives every coda
// program's coda.gemm the kernel plan coda-to-gpu builds. What the options
// leave open is chosen per GEMM; the plan prints and parses back.
// RUN: coda-opt %s --coda-plan-kernels | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels="schedule=pingpong cluster-m=2 group-rows=4 fast-activations=1 seed-in-memory=1" | FileCheck %s --check-prefix=PINNED
// RUN: coda-opt %s --coda-plan-kernels | coda-opt | FileCheck %s

// A bias added to the accumulator and only stored starts the accumulators;
// the default tile is 128 x 256 with as many stages as fit beside the bias
// buffers. Under ping-pong the bias stays in the epilogue.
// CHECK-LABEL: func.func @bias
// CHECK: coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 256, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16, bias_input = 0, chunked_loads = true>
// PINNED-LABEL: func.func @bias
// PINNED: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 7, schedule = pingpong, cluster_m = 2, group_rows = 4, epilogue_vector_bytes = 16, chunked_loads = true, fast_activations = true, seed_in_memory = true>
func.func @bias(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>, %bias: tensor<3072xf32>) -> tensor<?x3072xbf16> {
  %o = coda.gemm %x, %w transpose_b ins(%bias : tensor<3072xf32> [n]) : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    coda.yield %s : f32
  }
  return %o : tensor<?x3072xbf16>
}

// Dropout reads its [m, n] inputs a pair at a time (no chunked_loads), and
// the bias it follows stays in the epilogue.
// CHECK-LABEL: func.func @dropout_residual
// CHECK: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 256, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @dropout_residual(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>, %bias: tensor<3072xf32>, %r: tensor<?x3072xbf16>, %seed: i64) -> tensor<?x3072xbf16> {
  %o = coda.gemm %x, %w transpose_b ins(%bias : tensor<3072xf32> [n], %r : tensor<?x3072xbf16> [m, n], %seed : i64) : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %res: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.dropout %0, %s {p = 0.1 : f32}
    %2 = arith.addf %1, %res : f32
    coda.yield %2 : f32
  }
  return %o : tensor<?x3072xbf16>
}

// A row reduction over N <= 128 takes a 128-column tile.
// CHECK-LABEL: func.func @row_max
// CHECK: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 7, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @row_max(%x: tensor<?x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<?xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %m = coda.row_reduce max %acc
    coda.yield %m : f32
  }
  return %o : tensor<?xf32>
}

// Rows that are not a multiple of 16 bytes (K = 100 bf16 elements, 200
// bytes) plan as any others: the runtime stages such operands into rows 16
// bytes apart for TMA (test/Integration/GPU/errors.test runs them).
// CHECK-LABEL: func.func @unaligned_rows
// CHECK: #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 256,
func.func @unaligned_rows(%a: tensor<?x100xbf16>, %b: tensor<?x100xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x100xbf16>, tensor<?x100xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}
