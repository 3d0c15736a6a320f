// RUN: coda-opt %s --coda-raise-linalg | FileCheck %s
// RUN: coda-opt %s --coda-raise-linalg --coda-to-linalg | FileCheck %s --check-prefix=LOWERED
// Outlined, every raised GEMM is a program the GPU lowering builds a kernel
// for; the functions that held one call it.
// RUN: coda-opt %s --coda-raise-linalg --coda-outline-programs --coda-plan-kernels --coda-to-gpu \
// RUN:   | FileCheck %s --check-prefix=GPU
// GPU-DAG: gpu.func @linear_gelu(
// GPU-DAG: gpu.func @linear_residual_layernorm_gemm(
// GPU-DAG: gpu.func @attention_softmax(
// GPU-DAG: call @linear_residual_layernorm_gemm(

// Transformer MLP pieces as torch-mlir lowers them to linalg on tensors
// (torch-backend-to-linalg-on-tensors, dynamic batch): nn.Linear is a
// linalg.transpose of the weight and a matmul into a zero fill; elementwise
// ops are generics that broadcast with (d1) or, for keepdim results, (d0, 0),
// and size their outputs with tensor.dim; aten.add multiplies by alpha = 1.

// LOWERED-NOT: coda.
// LOWERED-LABEL: func.func @linear_gelu
// LOWERED-LABEL: func.func @linear_residual_layernorm
// LOWERED-LABEL: func.func @attention_softmax

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
#map2 = affine_map<(d0, d1) -> (d0, 0)>

// nn.Linear(768, 3072) + nn.GELU() (erf form).
// CHECK-LABEL: func.func @linear_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<?x768xf32>, %[[W:.*]]: tensor<3072x768xf32>, %[[BIAS:.*]]: tensor<3072xf32>)
// CHECK-NOT:     linalg.
// CHECK:         %[[Y:.*]] = coda.gemm %[[X]], %[[W]] transpose_b ins(%[[BIAS]] : tensor<3072xf32> [n])
// CHECK-SAME:      : tensor<?x768xf32>, tensor<3072x768xf32> -> (tensor<?x3072xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// CHECK:           %[[ALPHA:.*]] = arith.mulf %[[B]], %{{.*}} : f32
// CHECK-NEXT:      %[[PRE:.*]] = arith.addf %[[ACC]], %[[ALPHA]] : f32
// CHECK-NEXT:      %[[G:.*]] = coda.activation gelu_erf %[[PRE]]
// CHECK-NEXT:      coda.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[Y]]
func.func @linear_gelu(%x: tensor<?x768xf32>, %w: tensor<3072x768xf32>, %bias: tensor<3072xf32>) -> tensor<?x3072xf32> {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<768x3072xf32>
  %transposed = linalg.transpose ins(%w : tensor<3072x768xf32>) outs(%0 : tensor<768x3072xf32>) permutation = [1, 0]
  %dim = tensor.dim %x, %c0 : tensor<?x768xf32>
  %1 = tensor.empty(%dim) : tensor<?x3072xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<?x3072xf32>) -> tensor<?x3072xf32>
  %3 = linalg.matmul ins(%x, %transposed : tensor<?x768xf32>, tensor<768x3072xf32>) outs(%2 : tensor<?x3072xf32>) -> tensor<?x3072xf32>
  %dim_0 = tensor.dim %3, %c0 : tensor<?x3072xf32>
  %4 = tensor.empty(%dim_0) : tensor<?x3072xf32>
  %5 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%3, %bias : tensor<?x3072xf32>, tensor<3072xf32>) outs(%4 : tensor<?x3072xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %cst_1 = arith.constant 1.000000e+00 : f32
    %8 = arith.mulf %in_1, %cst_1 : f32
    %9 = arith.addf %in, %8 : f32
    linalg.yield %9 : f32
  } -> tensor<?x3072xf32>
  %dim_2 = tensor.dim %5, %c0 : tensor<?x3072xf32>
  %6 = tensor.empty(%dim_2) : tensor<?x3072xf32>
  %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%5 : tensor<?x3072xf32>) outs(%6 : tensor<?x3072xf32>) {
  ^bb0(%in: f32, %out: f32):
    %cst_3 = arith.constant 0.000000e+00 : f32
    %cst_4 = arith.constant 2.000000e+00 : f32
    %8 = arith.subf %in, %cst_3 : f32
    %9 = math.sqrt %cst_4 : f32
    %10 = arith.divf %8, %9 : f32
    %11 = math.erf %10 : f32
    %cst_5 = arith.constant 1.000000e+00 : f32
    %12 = arith.addf %cst_5, %11 : f32
    %cst_6 = arith.constant 5.000000e-01 : f32
    %13 = arith.mulf %cst_6, %12 : f32
    %14 = arith.mulf %in, %13 : f32
    linalg.yield %14 : f32
  } -> tensor<?x3072xf32>
  return %7 : tensor<?x3072xf32>
}

// nn.Linear(3072, 768) + residual + nn.LayerNorm(768), with the decomposition
// of native_layer_norm: keepdim sums into [?, 1], pow(x, 2) as math.fpowi. The
// mean is also returned, as [?, 1]: it becomes an [m] output expanded back.
// CHECK-LABEL: func.func @linear_residual_layernorm
// CHECK-SAME:    (%[[H:.*]]: tensor<?x3072xf32>, %[[W:.*]]: tensor<768x3072xf32>, %[[BIAS:.*]]: tensor<768xf32>, %[[RES:.*]]: tensor<?x768xf32>, %[[GAMMA:.*]]: tensor<768xf32>, %[[BETA:.*]]: tensor<768xf32>)
// CHECK-NOT:     linalg.
// CHECK:         %[[R:.*]]:2 = coda.gemm %[[H]], %[[W]] transpose_b
// CHECK-SAME:      ins(%[[BIAS]] : tensor<768xf32> [n], %[[RES]] : tensor<?x768xf32> [m, n], %[[GAMMA]] : tensor<768xf32> [n], %[[BETA]] : tensor<768xf32> [n])
// CHECK-SAME:      -> (tensor<?xf32> [m], tensor<?x768xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32, %[[RS:.*]]: f32, %[[G:.*]]: f32, %[[BT:.*]]: f32):
// CHECK-NEXT:      %[[PRE:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:      %[[Z:.*]] = arith.addf %[[PRE]], %[[RS]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = coda.row_reduce sum %[[Z]]
// CHECK:           %[[MEAN:.*]] = arith.divf %[[SUM]], %{{.*}} : f32
// CHECK:           %[[XM:.*]] = arith.subf %[[Z]], %[[MEAN]] : f32
// CHECK:           %[[SQ:.*]] = math.fpowi %[[XM]], %{{.*}} : f32, i64
// CHECK:           %[[VSUM:.*]] = coda.row_reduce sum %[[SQ]]
// CHECK:           %[[RSTD:.*]] = math.rsqrt
// CHECK:           %[[N:.*]] = arith.mulf %[[XM]], %[[RSTD]] : f32
// CHECK:           %[[NG:.*]] = arith.mulf %[[N]], %[[G]] : f32
// CHECK:           %[[Y:.*]] = arith.addf %[[NG]], %[[BT]] : f32
// CHECK:           coda.yield %[[MEAN]], %[[Y]] : f32, f32
// CHECK:         %[[MEAN2D:.*]] = tensor.expand_shape %[[R]]#0 {{\[\[}}0, 1]] output_shape [%{{.*}}, 1] : tensor<?xf32> into tensor<?x1xf32>
// CHECK:         return %[[R]]#1, %[[MEAN2D]]
func.func @linear_residual_layernorm(%h: tensor<?x3072xf32>, %w: tensor<768x3072xf32>,
    %bias: tensor<768xf32>, %res: tensor<?x768xf32>, %gamma: tensor<768xf32>,
    %beta: tensor<768xf32>) -> (tensor<?x768xf32>, tensor<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.000000e+00 : f32
  %cst_n = arith.constant 7.680000e+02 : f32
  %eps = arith.constant 9.99999974E-6 : f32
  %0 = tensor.empty() : tensor<3072x768xf32>
  %wt = linalg.transpose ins(%w : tensor<768x3072xf32>) outs(%0 : tensor<3072x768xf32>) permutation = [1, 0]
  %dim = tensor.dim %h, %c0 : tensor<?x3072xf32>
  %1 = tensor.empty(%dim) : tensor<?x768xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<?x768xf32>) -> tensor<?x768xf32>
  %mm = linalg.matmul ins(%h, %wt : tensor<?x3072xf32>, tensor<3072x768xf32>) outs(%2 : tensor<?x768xf32>) -> tensor<?x768xf32>
  %b = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%mm, %bias : tensor<?x768xf32>, tensor<768xf32>) outs(%1 : tensor<?x768xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.addf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<?x768xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%b, %res : tensor<?x768xf32>, tensor<?x768xf32>) outs(%1 : tensor<?x768xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.addf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<?x768xf32>
  %e1 = tensor.empty(%dim) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%r : tensor<?x768xf32>) outs(%f1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %mean = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<?x1xf32>) outs(%e1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %cst_n : f32
    linalg.yield %d : f32
  } -> tensor<?x1xf32>
  %xm = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%r, %mean : tensor<?x768xf32>, tensor<?x1xf32>) outs(%1 : tensor<?x768xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.subf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<?x768xf32>
  %sq = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%xm : tensor<?x768xf32>) outs(%1 : tensor<?x768xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c2 = arith.constant 2 : i64
    %p = math.fpowi %in, %c2 : f32, i64
    linalg.yield %p : f32
  } -> tensor<?x768xf32>
  %vsum = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<?x768xf32>) outs(%f1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %rstd = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%vsum : tensor<?x1xf32>) outs(%e1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.divf %in, %cst_n : f32
    %ve = arith.addf %v, %eps : f32
    %rs = math.rsqrt %ve : f32
    linalg.yield %rs : f32
  } -> tensor<?x1xf32>
  %y = linalg.generic {indexing_maps = [#map, #map2, #map1, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%xm, %rstd, %gamma, %beta : tensor<?x768xf32>, tensor<?x1xf32>, tensor<768xf32>, tensor<768xf32>) outs(%1 : tensor<?x768xf32>) {
  ^bb0(%in: f32, %in_0: f32, %g: f32, %bb: f32, %out: f32):
    %n = arith.mulf %in, %in_0 : f32
    %o = arith.mulf %n, %g : f32
    %o2 = arith.addf %o, %bb : f32
    linalg.yield %o2 : f32
  } -> tensor<?x768xf32>
  return %y, %mean : tensor<?x768xf32>, tensor<?x1xf32>
}

// Attention scores q @ k^T / 8 and aten._softmax over the last dim, decomposed
// into amax (a maximumf reduction from -inf), sub, exp, sum and div.
// CHECK-LABEL: func.func @attention_softmax
// CHECK-SAME:    (%[[Q:.*]]: tensor<?x64xf32>, %[[K:.*]]: tensor<128x64xf32>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[Q]], %[[K]] transpose_b : tensor<?x64xf32>, tensor<128x64xf32> -> (tensor<?x128xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[S:.*]] = arith.divf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:      %[[MAX:.*]] = coda.row_reduce max %[[S]]
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[S]], %[[MAX]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = coda.row_reduce sum %[[E]]
// CHECK-NEXT:      %[[P:.*]] = arith.divf %[[E]], %[[SUM]] : f32
// CHECK-NEXT:      coda.yield %[[P]] : f32
// CHECK-NOT:     linalg.
func.func @attention_softmax(%q: tensor<?x64xf32>, %k: tensor<128x64xf32>) -> tensor<?x128xf32> {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %cst_8 = arith.constant 8.000000e+00 : f32
  %0 = tensor.empty() : tensor<64x128xf32>
  %kt = linalg.transpose ins(%k : tensor<128x64xf32>) outs(%0 : tensor<64x128xf32>) permutation = [1, 0]
  %dim = tensor.dim %q, %c0 : tensor<?x64xf32>
  %1 = tensor.empty(%dim) : tensor<?x128xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<?x128xf32>) -> tensor<?x128xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<?x64xf32>, tensor<64x128xf32>) outs(%2 : tensor<?x128xf32>) -> tensor<?x128xf32>
  %scaled = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<?x128xf32>) outs(%1 : tensor<?x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %cst_8 : f32
    linalg.yield %d : f32
  } -> tensor<?x128xf32>
  %e1 = tensor.empty(%dim) : tensor<?x1xf32>
  %m1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %max = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%scaled : tensor<?x128xf32>) outs(%m1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<?x1xf32>
  %sub = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%scaled, %max : tensor<?x128xf32>, tensor<?x1xf32>) outs(%1 : tensor<?x128xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %d = arith.subf %in, %in_0 : f32
    linalg.yield %d : f32
  } -> tensor<?x128xf32>
  %exp = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%sub : tensor<?x128xf32>) outs(%1 : tensor<?x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  } -> tensor<?x128xf32>
  %z1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<?x128xf32>) outs(%z1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<?x1xf32>
  %p = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<?x128xf32>, tensor<?x1xf32>) outs(%1 : tensor<?x128xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %d = arith.divf %in, %in_0 : f32
    linalg.yield %d : f32
  } -> tensor<?x128xf32>
  return %p : tensor<?x128xf32>
}
