// RUN: coda-opt %s --coda-raise-linalg | FileCheck %s

// Dense layers as stablehlo-legalize-to-linalg lowers JAX/Flax programs (with
// primitive ops): dot_general with preferred_element_type = f32 is a matmul
// or a generic, broadcast_in_dim is linalg.broadcast, elementwise ops are
// named ops (linalg.add, linalg.mul, linalg.map, linalg.elementwise), scalar
// constants are splat tensors, reduce is linalg.reduce.

// jax.nn.gelu(approximate=True) after a bf16 dense layer, converted back to
// bf16: the final cast becomes the output element type.
// CHECK-LABEL: func.func @dense_gelu_bf16
// CHECK-SAME:    (%[[X:.*]]: tensor<8x64xbf16>, %[[W:.*]]: tensor<64x256xbf16>, %[[B:.*]]: tensor<256xf32>)
// CHECK-NOT:     linalg.
// CHECK:         %[[Y:.*]] = coda.gemm %[[X]], %[[W]] ins(%[[B]] : tensor<256xf32> [n])
// CHECK-SAME:      : tensor<8x64xbf16>, tensor<64x256xbf16> -> (tensor<8x256xbf16> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32):
// CHECK-NEXT:      %[[H:.*]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT:      %[[G:.*]] = coda.activation gelu_tanh %[[H]]
// CHECK-NEXT:      coda.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[Y]]
func.func @dense_gelu_bf16(%x: tensor<8x64xbf16>, %w: tensor<64x256xbf16>, %b: tensor<256xf32>) -> tensor<8x256xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant dense<4.471500e-02> : tensor<8x256xf32>
  %c1 = arith.constant dense<0.797884583> : tensor<8x256xf32>
  %one = arith.constant dense<1.000000e+00> : tensor<8x256xf32>
  %half = arith.constant dense<5.000000e-01> : tensor<8x256xf32>
  %e = tensor.empty() : tensor<8x256xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x64xbf16>, tensor<64x256xbf16>) outs(%acc : tensor<8x256xf32>) -> tensor<8x256xf32>
  %bb = linalg.broadcast ins(%b : tensor<256xf32>) outs(%e : tensor<8x256xf32>) dimensions = [0]
  %h = linalg.add ins(%mm, %bb : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %x2 = linalg.mul ins(%h, %h : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %x3 = linalg.mul ins(%x2, %h : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t0 = linalg.mul ins(%x3, %c0 : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t1 = linalg.add ins(%h, %t0 : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t2 = linalg.mul ins(%t1, %c1 : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t3 = linalg.tanh ins(%t2 : tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t4 = linalg.add ins(%t3, %one : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %t5 = linalg.mul ins(%h, %half : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %g = linalg.mul ins(%t5, %t4 : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e : tensor<8x256xf32>) -> tensor<8x256xf32>
  %eb = tensor.empty() : tensor<8x256xbf16>
  %y = linalg.map ins(%g : tensor<8x256xf32>) outs(%eb : tensor<8x256xbf16>)
    (%in: f32, %init: bf16) {
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    }
  return %y : tensor<8x256xbf16>
}

// A dense layer (x @ w^T as a dot_general contracting both dims 1, which
// lowers to a generic), a residual and flax.linen.LayerNorm: reductions into
// [M] broadcast back with linalg.broadcast, 1/N as a splat constant.
// CHECK-LABEL: func.func @dense_residual_layernorm
// CHECK-SAME:    (%[[X:.*]]: tensor<8x32xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[RES:.*]]: tensor<8x64xf32>, %[[GAMMA:.*]]: tensor<64xf32>, %[[BETA:.*]]: tensor<64xf32>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[X]], %[[W]] transpose_b
// CHECK-SAME:      ins(%[[RES]] : tensor<8x64xf32> [m, n], %[[GAMMA]] : tensor<64xf32> [n], %[[BETA]] : tensor<64xf32> [n])
// CHECK-SAME:      -> (tensor<8x64xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[R:.*]]: f32, %[[G:.*]]: f32, %[[BT:.*]]: f32):
// CHECK-NEXT:      %[[Z:.*]] = arith.addf %[[ACC]], %[[R]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = coda.row_reduce sum %[[Z]]
// CHECK-NEXT:      %[[INV:.*]] = arith.constant 1.562500e-02 : f32
// CHECK-NEXT:      %[[MEAN:.*]] = arith.mulf %[[SUM]], %[[INV]] : f32
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[Z]], %[[MEAN]] : f32
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[D]], %[[D]] : f32
// CHECK-NEXT:      %[[VSUM:.*]] = coda.row_reduce sum %[[SQ]]
// CHECK:           %[[RSTD:.*]] = math.rsqrt
// CHECK-NEXT:      %[[N:.*]] = arith.mulf %[[D]], %[[RSTD]] : f32
// CHECK-NEXT:      %[[NG:.*]] = arith.mulf %[[N]], %[[G]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.addf %[[NG]], %[[BT]] : f32
// CHECK-NEXT:      coda.yield %[[Y]] : f32
// CHECK-NOT:     linalg.
func.func @dense_residual_layernorm(%x: tensor<8x32xf32>, %w: tensor<64x32xf32>, %res: tensor<8x64xf32>,
    %gamma: tensor<64xf32>, %beta: tensor<64xf32>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %inv = arith.constant dense<1.562500e-02> : tensor<8xf32>
  %eps = arith.constant dense<9.99999997E-7> : tensor<8xf32>
  %e = tensor.empty() : tensor<8x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<8x32xf32>, tensor<64x32xf32>) outs(%acc : tensor<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x64xf32>
  %z = linalg.add ins(%mm, %res : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.reduce ins(%z : tensor<8x64xf32>) outs(%zr : tensor<8xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %mean = linalg.mul ins(%sum, %inv : tensor<8xf32>, tensor<8xf32>) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %meanb = linalg.broadcast ins(%mean : tensor<8xf32>) outs(%e : tensor<8x64xf32>) dimensions = [1]
  %d = linalg.sub ins(%z, %meanb : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %sq = linalg.mul ins(%d, %d : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %vsum = linalg.reduce ins(%sq : tensor<8x64xf32>) outs(%zr : tensor<8xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %var = linalg.mul ins(%vsum, %inv : tensor<8xf32>, tensor<8xf32>) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %ve = linalg.add ins(%var, %eps : tensor<8xf32>, tensor<8xf32>) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %rs = linalg.rsqrt ins(%ve : tensor<8xf32>) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %rsb = linalg.broadcast ins(%rs : tensor<8xf32>) outs(%e : tensor<8x64xf32>) dimensions = [1]
  %n = linalg.mul ins(%d, %rsb : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %gb = linalg.broadcast ins(%gamma : tensor<64xf32>) outs(%e : tensor<8x64xf32>) dimensions = [0]
  %ng = linalg.mul ins(%n, %gb : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %bb = linalg.broadcast ins(%beta : tensor<64xf32>) outs(%e : tensor<8x64xf32>) dimensions = [0]
  %y = linalg.add ins(%ng, %bb : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// A batched dot_general, a per-batch bias broadcast along M by
// linalg.elementwise's indexing maps, and silu spelled x * logistic(x).
// CHECK-LABEL: func.func @batched_bias_silu
// CHECK-SAME:    (%[[A:.*]]: tensor<2x8x32xf16>, %[[B:.*]]: tensor<2x32x16xf16>, %[[BIAS:.*]]: tensor<2x16xf32>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[BIAS]] : tensor<2x16xf32> [b, n])
// CHECK-SAME:      -> (tensor<2x8x16xf32> [b, m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:      %[[Y:.*]] = coda.activation silu %[[S]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @batched_bias_silu(%a: tensor<2x8x32xf16>, %b: tensor<2x32x16xf16>, %bias: tensor<2x16xf32>) -> tensor<2x8x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant dense<1.000000e+00> : tensor<2x8x16xf32>
  %e = tensor.empty() : tensor<2x8x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mm = linalg.batch_matmul ins(%a, %b : tensor<2x8x32xf16>, tensor<2x32x16xf16>) outs(%acc : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %s = linalg.elementwise kind=#linalg.elementwise_kind<add>
      indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b, n)>, affine_map<(b, m, n) -> (b, m, n)>]
      ins(%mm, %bias : tensor<2x8x16xf32>, tensor<2x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %neg = linalg.negf ins(%s : tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %ex = linalg.exp ins(%neg : tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %den = linalg.add ins(%ex, %one : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %sig = linalg.div ins(%one, %den : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = linalg.mul ins(%s, %sig : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}
