// RUN: coda-opt %s --coda-to-linalg --canonicalize --cse | coda-opt --coda-raise-linalg | FileCheck %s

// coda's own reference lowering is linalg on tensors too: raising it gives
// back the coda.gemm it came from, up to the order of the outputs and to C
// with alpha and beta, which come back as epilogue arithmetic. (The bf16
// residual is widened by the lowering and read narrow again.)

// CHECK-LABEL: func.func @batched_shared_b
// CHECK-SAME:    (%[[A:.*]]: tensor<4x?x?xf32>, %[[B:.*]]: tensor<?x?xf32>, %[[V:.*]]: tensor<4x?xf32>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[A]], %[[B]] transpose_a ins(%[[V]] : tensor<4x?xf32> [b, n])
// CHECK-SAME:      : tensor<4x?x?xf32>, tensor<?x?xf32> -> (tensor<4x?x?xf32> [b, m, n], tensor<4x?xf32> [b, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[X:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT:      %[[R:.*]] = coda.activation relu %[[S]]
// CHECK-NEXT:      %[[CS:.*]] = coda.col_reduce max %[[R]]
// CHECK-NEXT:      coda.yield %[[R]], %[[CS]] : f32, f32
// CHECK-NOT:     linalg.
func.func @batched_shared_b(%a: tensor<4x?x?xf32>, %b: tensor<?x?xf32>, %v: tensor<4x?xf32>)
    -> (tensor<4x?x?xf32>, tensor<4x?xf32>) {
  %0, %1 = coda.gemm %a, %b transpose_a ins(%v : tensor<4x?xf32> [b, n])
      : tensor<4x?x?xf32>, tensor<?x?xf32> -> (tensor<4x?x?xf32> [b, m, n], tensor<4x?xf32> [b, n]) {
  ^bb0(%acc: f32, %x: f32):
    %s = arith.addf %acc, %x : f32
    %r = coda.activation relu %s
    %cs = coda.col_reduce max %r
    coda.yield %r, %cs : f32, f32
  }
  return %0, %1 : tensor<4x?x?xf32>, tensor<4x?xf32>
}

// CHECK-LABEL: func.func @mlp_up
// CHECK-SAME:    (%[[X:.*]]: tensor<?x768xbf16>, %[[W:.*]]: tensor<3072x768xbf16>, %[[BIAS:.*]]: tensor<3072xf32>, %[[RES:.*]]: tensor<?x3072xbf16>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[X]], %[[W]] transpose_b ins(%[[BIAS]] : tensor<3072xf32> [n], %[[RES]] : tensor<?x3072xbf16> [m, n])
// CHECK-SAME:      -> (tensor<?x3072xf32> [m, n], tensor<3072xf32> [n], tensor<?x3072xbf16> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT:      %[[PRE:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:      %[[G:.*]] = coda.activation gelu_tanh %[[PRE]]
// CHECK-NEXT:      %[[OUT:.*]] = arith.addf %[[G]], %[[R]] : f32
// CHECK-NEXT:      %[[DB:.*]] = coda.col_reduce sum %[[ACC]]
// CHECK-NEXT:      coda.yield %[[PRE]], %[[DB]], %[[OUT]] : f32, f32, f32
// CHECK-NOT:     linalg.
func.func @mlp_up(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                  %bias: tensor<3072xf32>, %res: tensor<?x3072xbf16>)
    -> (tensor<?x3072xbf16>, tensor<?x3072xf32>, tensor<3072xf32>) {
  %out, %pre, %dbias = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<3072xf32> [n], %res : tensor<?x3072xbf16> [m, n])
      : tensor<?x768xbf16>, tensor<3072x768xbf16>
      -> (tensor<?x3072xbf16> [m, n], tensor<?x3072xf32> [m, n], tensor<3072xf32> [n]) {
  ^bb0(%acc: f32, %b: f32, %r: f32):
    %1 = arith.addf %acc, %b : f32
    %2 = coda.activation gelu_tanh %1
    %3 = arith.addf %2, %r : f32
    %4 = coda.col_reduce sum %acc
    coda.yield %3, %1, %4 : f32, f32, f32
  }
  return %out, %pre, %dbias : tensor<?x3072xbf16>, tensor<?x3072xf32>, tensor<3072xf32>
}

// CHECK-LABEL: func.func @scaled_layernorm
// CHECK-SAME:    (%[[A:.*]]: tensor<?x?xf16>, %[[B:.*]]: tensor<?x?xf16>, %[[C:.*]]: tensor<?x?xf32>, %[[ALPHA:.*]]: f32, %[[BETA:.*]]: f32, %[[GAMMA:.*]]: tensor<?xf32>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[ALPHA]] : f32, %[[C]] : tensor<?x?xf32> [m, n], %[[BETA]] : f32, %{{.*}} : f32, %[[GAMMA]] : tensor<?xf32> [n])
// CHECK-SAME:      -> (tensor<?xf32> [m], tensor<?x?xf16> [m, n]) {
// CHECK:           coda.row_reduce sum
// CHECK:           coda.row_reduce sum
// CHECK:           math.rsqrt
// CHECK:           coda.yield
// CHECK-NOT:     linalg.
func.func @scaled_layernorm(%a: tensor<?x?xf16>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>,
                            %alpha: f32, %beta: f32, %gamma: tensor<?xf32>)
    -> (tensor<?x?xf16>, tensor<?xf32>) {
  %y, %mean = coda.gemm %a, %b c(%c : tensor<?x?xf32>) alpha(%alpha) beta(%beta)
      ins(%gamma : tensor<?xf32> [n])
      : tensor<?x?xf16>, tensor<?x?xf16> -> (tensor<?x?xf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %g: f32):
    %mu = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mu : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %ve = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %ve : f32
    %n = arith.mulf %d, %rstd : f32
    %o = arith.mulf %n, %g : f32
    coda.yield %o, %mu : f32, f32
  }
  return %y, %mean : tensor<?x?xf16>, tensor<?xf32>
}
