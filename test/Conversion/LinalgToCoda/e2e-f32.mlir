// End to end: the same programs run on the CPU as written and after raising
// (the raised ones through coda's reference lowering); every printed result
// must agree to f32 rounding. The contractions and reductions sum in the same
// order either way, so what differs is only how the raised activations order
// their arithmetic.
//
// REQUIRES: mlir-runner
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg | FileCheck %s
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.linalg
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.raised
// RUN: %python %testlib/compare_memref_prints.py %t.linalg %t.raised --rtol 1e-5 --atol 1e-6
// Outlined into programs (one function per coda.gemm, called where it was),
// the raised functions compute the same.
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg --coda-outline-programs --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.outlined
// RUN: %python %testlib/compare_memref_prints.py %t.raised %t.outlined --rtol 0 --atol 0

// Every program became one coda.gemm and nothing of it is left in linalg.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK:         coda.activation gelu_tanh
// CHECK-NOT:     linalg.
// CHECK-LABEL: func.func @linear_residual_layernorm
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK-NOT:     linalg.
// CHECK-LABEL: func.func @attention_scores_softmax
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK-NOT:     linalg.
// CHECK-LABEL: func.func @relu_and_bias_grad
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK:         coda.activation relu
// CHECK-NOT:     linalg.
// The gate and up projections of a gated MLP (two nn.Linear of one input,
// torch-mlir's transposes, SiLU as x * sigmoid(x)) are one GEMM over their
// weights interleaved.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-NOT:     linalg.
// CHECK:         tensor.insert_slice %{{.*}}[0, 0] [12, 8] [2, 1] : tensor<12x8xf32> into tensor<24x8xf32>
// CHECK-NEXT:    tensor.insert_slice %{{.*}}[1, 0] [12, 8] [2, 1] : tensor<12x8xf32> into tensor<24x8xf32>
// CHECK-NEXT:    coda.gemm {{.*}} transpose_b : tensor<6x8xf32>, tensor<24x8xf32> -> (tensor<6x12xf32> [m, n/2])
// CHECK:           coda.partner
// CHECK:           coda.activation silu
// CHECK-NOT:     coda.gemm
// CHECK-NOT:     linalg.
// A normalization before a product, of dynamic sizes, as beta minus the
// negated scaled x, over B as [K, N]: the product reads x, and rstd and
// B beta are an [m] and an [n] input of its epilogue.
// CHECK-LABEL: func.func @dynamic_affine_norm
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x?xf32>
// CHECK:         coda.gemm %[[X]], %{{.*}} ins(%{{.*}} : tensor<?xf32> [m], %{{.*}} : tensor<?xf32> [n]) : tensor<?x?xf32>, tensor<?x?xf32>
// Linear, a norm, Linear, a centring and column scale, Linear: the second
// folds through the first folded product.
// CHECK-LABEL: func.func @chained_norms
// CHECK:         %[[G1:.*]] = coda.gemm %arg0
// CHECK:         coda.gemm %[[G1]]
// CHECK-LABEL: func.func @main

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>

// nn.Linear + GELU (the tanh form as HuggingFace's gelu_new spells it), in the
// shape torch-mlir gives it; the pre-activation is returned as well.
func.func @linear_gelu(%x: tensor<6x8xf32>, %w: tensor<12x8xf32>, %bias: tensor<12xf32>)
    -> (tensor<6x12xf32>, tensor<6x12xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<8x12xf32>
  %wt = linalg.transpose ins(%w : tensor<12x8xf32>) outs(%e0 : tensor<8x12xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<6x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x12xf32>) -> tensor<6x12xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<6x8xf32>, tensor<8x12xf32>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %pre = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<6x12xf32>, tensor<12xf32>) outs(%e1 : tensor<6x12xf32>) {
  ^bb0(%in: f32, %b: f32, %out: f32):
    %s = arith.addf %in, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x12xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<6x12xf32>) outs(%e1 : tensor<6x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %three = arith.constant 3.000000e+00 : f32
    %c = arith.constant 4.471500e-02 : f32
    %k = arith.constant 0.797884583 : f32
    %x3 = math.powf %in, %three : f32
    %t0 = arith.mulf %x3, %c : f32
    %t1 = arith.addf %in, %t0 : f32
    %t2 = arith.mulf %t1, %k : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %t3, %one : f32
    %h = arith.mulf %in, %half : f32
    %r = arith.mulf %h, %t4 : f32
    linalg.yield %r : f32
  } -> tensor<6x12xf32>
  return %y, %pre : tensor<6x12xf32>, tensor<6x12xf32>
}

// nn.Linear + residual + LayerNorm as torch-mlir decomposes it: keepdim row
// sums into [M, 1], broadcast back with (d0, 0), x^2 as math.fpowi.
func.func @linear_residual_layernorm(%x: tensor<6x8xf32>, %w: tensor<16x8xf32>,
    %bias: tensor<16xf32>, %res: tensor<6x16xf32>, %gamma: tensor<16xf32>,
    %beta: tensor<16xf32>) -> tensor<6x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %n = arith.constant 1.600000e+01 : f32
  %eps = arith.constant 9.99999974E-6 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%e0 : tensor<8x16xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<6x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x16xf32>) -> tensor<6x16xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<6x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<6x16xf32>) -> tensor<6x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<6x16xf32>, tensor<16xf32>) outs(%e1 : tensor<6x16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.addf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<6x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %res : tensor<6x16xf32>, tensor<6x16xf32>) outs(%e1 : tensor<6x16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %one = arith.constant 1.000000e+00 : f32
    %m = arith.mulf %in_0, %one : f32
    %s = arith.addf %in, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x16xf32>
  %ek = tensor.empty() : tensor<6x1xf32>
  %zk = linalg.fill ins(%zero : f32) outs(%ek : tensor<6x1xf32>) -> tensor<6x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<6x16xf32>) outs(%zk : tensor<6x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<6x1xf32>
  %mean = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<6x1xf32>) outs(%ek : tensor<6x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %n : f32
    linalg.yield %d : f32
  } -> tensor<6x1xf32>
  %xm = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %mean : tensor<6x16xf32>, tensor<6x1xf32>) outs(%e1 : tensor<6x16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.subf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<6x16xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xm : tensor<6x16xf32>) outs(%e1 : tensor<6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c2 = arith.constant 2 : i64
    %p = math.fpowi %in, %c2 : f32, i64
    linalg.yield %p : f32
  } -> tensor<6x16xf32>
  %vsum = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<6x16xf32>) outs(%zk : tensor<6x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<6x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%vsum : tensor<6x1xf32>) outs(%ek : tensor<6x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.divf %in, %n : f32
    %ve = arith.addf %v, %eps : f32
    %rs = math.rsqrt %ve : f32
    linalg.yield %rs : f32
  } -> tensor<6x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xm, %rstd, %gamma, %beta : tensor<6x16xf32>, tensor<6x1xf32>, tensor<16xf32>, tensor<16xf32>)
      outs(%e1 : tensor<6x16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %g: f32, %bb: f32, %out: f32):
    %t = arith.mulf %in, %in_0 : f32
    %o = arith.mulf %t, %g : f32
    %o2 = arith.addf %o, %bb : f32
    linalg.yield %o2 : f32
  } -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// Scaled attention scores + softmax in named ops, as StableHLO lowers
// dot_general, reduce and broadcast_in_dim: batch_matmul with K stored [b, n, k]
// (a transposing indexing map), linalg.reduce, linalg.broadcast, linalg.sub,
// linalg.exp, linalg.div.
func.func @attention_scores_softmax(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>)
    -> tensor<2x4x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.353553385 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul
      indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                       affine_map<(b, m, n, k) -> (b, n, k)>,
                       affine_map<(b, m, n, k) -> (b, m, n)>]
      ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%acc : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b, m, n)>],
      iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.mulf %in, %scale : f32
    linalg.yield %t : f32
  } -> tensor<2x4x6xf32>
  %er = tensor.empty() : tensor<2x4xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %max = linalg.reduce ins(%scaled : tensor<2x4x6xf32>) outs(%mi : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %maxb = linalg.broadcast ins(%max : tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) dimensions = [2]
  %sub = linalg.sub ins(%scaled, %maxb : tensor<2x4x6xf32>, tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %exp = linalg.exp ins(%sub : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %zi = linalg.fill ins(%zero : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum = linalg.reduce ins(%exp : tensor<2x4x6xf32>) outs(%zi : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %sumb = linalg.broadcast ins(%sum : tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) dimensions = [2]
  %p = linalg.div ins(%exp, %sumb : tensor<2x4x6xf32>, tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %p : tensor<2x4x6xf32>
}

// A layer's forward relu (torch-mlir's compare-and-select) and the bias
// gradient of its pre-activation: a column sum into [N].
func.func @relu_and_bias_grad(%x: tensor<6x8xf32>, %w: tensor<8x12xf32>)
    -> (tensor<6x12xf32>, tensor<12xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<6x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<6x12xf32>) -> tensor<6x12xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<6x8xf32>, tensor<8x12xf32>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<6x12xf32>) outs(%e : tensor<6x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.cmpf ugt, %in, %zero : f32
    %r = arith.select %c, %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<6x12xf32>
  %ec = tensor.empty() : tensor<12xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<12xf32>) -> tensor<12xf32>
  %db = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["reduction", "parallel"]}
      ins(%mm : tensor<6x12xf32>) outs(%zc : tensor<12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<12xf32>
  return %relu, %db : tensor<6x12xf32>, tensor<12xf32>
}

// LLaMA's MLP up to its down projection: silu(x Wg^T) * (x Wu^T).
func.func @gated_mlp(%x: tensor<6x8xf32>, %wg: tensor<12x8xf32>, %wu: tensor<12x8xf32>) -> tensor<6x12xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %et = tensor.empty() : tensor<8x12xf32>
  %wgt = linalg.transpose ins(%wg : tensor<12x8xf32>) outs(%et : tensor<8x12xf32>) permutation = [1, 0]
  %wut = linalg.transpose ins(%wu : tensor<12x8xf32>) outs(%et : tensor<8x12xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<6x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<6x12xf32>) -> tensor<6x12xf32>
  %g = linalg.matmul ins(%x, %wgt : tensor<6x8xf32>, tensor<8x12xf32>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %u = linalg.matmul ins(%x, %wut : tensor<6x8xf32>, tensor<8x12xf32>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %silu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<6x12xf32>) outs(%e : tensor<6x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    %x1 = math.exp %n : f32
    %d = arith.addf %x1, %one : f32
    %sg = arith.divf %one, %d : f32
    %r = arith.mulf %in, %sg : f32
    linalg.yield %r : f32
  } -> tensor<6x12xf32>
  %h = linalg.mul ins(%silu, %u : tensor<6x12xf32>, tensor<6x12xf32>) outs(%e : tensor<6x12xf32>) -> tensor<6x12xf32>
  return %h : tensor<6x12xf32>
}

func.func @dynamic_affine_norm(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>, %rstd: tensor<?x1xf32>,
                               %gamma: tensor<?xf32>, %beta: tensor<?xf32>) -> tensor<?x?xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %x, %c0 : tensor<?x?xf32>
  %k = tensor.dim %x, %c1 : tensor<?x?xf32>
  %n = tensor.dim %w, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %k) : tensor<?x?xf32>
  %normed = linalg.generic {indexing_maps = [#id, #keep, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %gamma, %beta : tensor<?x?xf32>, tensor<?x1xf32>, tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %b: f32, %out: f32):
    %p = arith.mulf %r, %in : f32
    %q = arith.mulf %g, %p : f32
    %nq = arith.negf %q : f32
    %s = arith.subf %b, %nq : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %eo = tensor.empty(%m, %n) : tensor<?x?xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%normed, %w : tensor<?x?xf32>, tensor<?x?xf32>) outs(%acc : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

func.func @chained_norms(%x: tensor<16x8xf32>, %r1: tensor<16x1xf32>, %g1: tensor<8xf32>, %w1: tensor<8x8xf32>,
                         %r2: tensor<16x1xf32>, %g2: tensor<8xf32>, %w2: tensor<8x12xf32>) -> tensor<16x12xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #keep, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r1, %g1 : tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %q = arith.mulf %p, %g : f32
    linalg.yield %q : f32
  } -> tensor<16x8xf32>
  %acc1 = linalg.fill ins(%zero : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y1 = linalg.matmul ins(%a1, %w1 : tensor<16x8xf32>, tensor<8x8xf32>) outs(%acc1 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %a2 = linalg.generic {indexing_maps = [#id, #keep, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y1, %r2, %g2 : tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %c = arith.subf %in, %r : f32
    %q = arith.mulf %c, %g : f32
    linalg.yield %q : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x12xf32>
  %acc2 = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x12xf32>) -> tensor<16x12xf32>
  %y2 = linalg.matmul ins(%a2, %w2 : tensor<16x8xf32>, tensor<8x12xf32>) outs(%acc2 : tensor<16x12xf32>) -> tensor<16x12xf32>
  return %y2 : tensor<16x12xf32>
}

// ---- Driver (helpers in Inputs/e2e-driver.mlir) -----------------------

func.func @main() {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c11 = arith.constant 11 : index
  %c12 = arith.constant 12 : index
  %c13 = arith.constant 13 : index
  %c16 = arith.constant 16 : index

  // Inputs.
  %x = call @matrix(%c6, %c8, %c3, %c5) : (index, index, index, index) -> tensor<?x?xf32>
  %xs = tensor.cast %x : tensor<?x?xf32> to tensor<6x8xf32>
  %w12 = call @matrix(%c12, %c8, %c5, %c7) : (index, index, index, index) -> tensor<?x?xf32>
  %w12s = tensor.cast %w12 : tensor<?x?xf32> to tensor<12x8xf32>
  %w16 = call @matrix(%c16, %c8, %c7, %c2) : (index, index, index, index) -> tensor<?x?xf32>
  %w16s = tensor.cast %w16 : tensor<?x?xf32> to tensor<16x8xf32>
  %wkn = call @matrix(%c8, %c12, %c11, %c3) : (index, index, index, index) -> tensor<?x?xf32>
  %wkns = tensor.cast %wkn : tensor<?x?xf32> to tensor<8x12xf32>
  %res = call @matrix(%c6, %c16, %c13, %c1) : (index, index, index, index) -> tensor<?x?xf32>
  %ress = tensor.cast %res : tensor<?x?xf32> to tensor<6x16xf32>
  %vecs = call @matrix(%c3, %c16, %c5, %c3) : (index, index, index, index) -> tensor<?x?xf32>
  %vs = tensor.cast %vecs : tensor<?x?xf32> to tensor<3x16xf32>
  %bias16 = tensor.extract_slice %vs[0, 0] [1, 16] [1, 1] : tensor<3x16xf32> to tensor<16xf32>
  %gamma = tensor.extract_slice %vs[1, 0] [1, 16] [1, 1] : tensor<3x16xf32> to tensor<16xf32>
  %beta = tensor.extract_slice %vs[2, 0] [1, 16] [1, 1] : tensor<3x16xf32> to tensor<16xf32>
  %bias12 = tensor.extract_slice %vs[0, 2] [1, 12] [1, 1] : tensor<3x16xf32> to tensor<12xf32>
  %q2 = call @matrix(%c8, %c8, %c5, %c2) : (index, index, index, index) -> tensor<?x?xf32>
  %q2s = tensor.cast %q2 : tensor<?x?xf32> to tensor<8x8xf32>
  %q = tensor.expand_shape %q2s [[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
  %k2 = call @matrix(%c12, %c8, %c3, %c7) : (index, index, index, index) -> tensor<?x?xf32>
  %k2s = tensor.cast %k2 : tensor<?x?xf32> to tensor<12x8xf32>
  %k = tensor.expand_shape %k2s [[0, 1], [2]] output_shape [2, 6, 8] : tensor<12x8xf32> into tensor<2x6x8xf32>

  // Programs.
  %y, %pre = call @linear_gelu(%xs, %w12s, %bias12)
      : (tensor<6x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> (tensor<6x12xf32>, tensor<6x12xf32>)
  %ln = call @linear_residual_layernorm(%xs, %w16s, %bias16, %ress, %gamma, %beta)
      : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<6x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %p = call @attention_scores_softmax(%q, %k) : (tensor<2x4x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x6xf32>
  %relu, %db = call @relu_and_bias_grad(%xs, %wkns) : (tensor<6x8xf32>, tensor<8x12xf32>) -> (tensor<6x12xf32>, tensor<12xf32>)
  %wu = call @matrix(%c12, %c8, %c3, %c11) : (index, index, index, index) -> tensor<?x?xf32>
  %wus = tensor.cast %wu : tensor<?x?xf32> to tensor<12x8xf32>
  %gated = call @gated_mlp(%xs, %w12s, %wus) : (tensor<6x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<6x12xf32>
  %rows = call @matrix(%c16, %c8, %c3, %c5) : (index, index, index, index) -> tensor<?x?xf32>
  %rstd2 = call @matrix(%c16, %c1, %c7, %c11) : (index, index, index, index) -> tensor<?x?xf32>
  %rstd = tensor.cast %rstd2 : tensor<?x?xf32> to tensor<?x1xf32>
  %gamma8 = tensor.extract_slice %vs[1, 0] [1, 8] [1, 1] : tensor<3x16xf32> to tensor<8xf32>
  %beta8 = tensor.extract_slice %vs[2, 3] [1, 8] [1, 1] : tensor<3x16xf32> to tensor<8xf32>
  %gamma8d = tensor.cast %gamma8 : tensor<8xf32> to tensor<?xf32>
  %beta8d = tensor.cast %beta8 : tensor<8xf32> to tensor<?xf32>
  %folded = call @dynamic_affine_norm(%rows, %wkn, %rstd, %gamma8d, %beta8d)
      : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x1xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?xf32>

  // Results.
  %y0 = tensor.cast %y : tensor<6x12xf32> to tensor<?x?xf32>
  call @print2d(%y0) : (tensor<?x?xf32>) -> ()
  %pre0 = tensor.cast %pre : tensor<6x12xf32> to tensor<?x?xf32>
  call @print2d(%pre0) : (tensor<?x?xf32>) -> ()
  %ln0 = tensor.cast %ln : tensor<6x16xf32> to tensor<?x?xf32>
  call @print2d(%ln0) : (tensor<?x?xf32>) -> ()
  %p2 = tensor.collapse_shape %p [[0, 1], [2]] : tensor<2x4x6xf32> into tensor<8x6xf32>
  %p0 = tensor.cast %p2 : tensor<8x6xf32> to tensor<?x?xf32>
  call @print2d(%p0) : (tensor<?x?xf32>) -> ()
  %relu0 = tensor.cast %relu : tensor<6x12xf32> to tensor<?x?xf32>
  call @print2d(%relu0) : (tensor<?x?xf32>) -> ()
  %db2 = tensor.expand_shape %db [[0, 1]] output_shape [1, 12] : tensor<12xf32> into tensor<1x12xf32>
  %db0 = tensor.cast %db2 : tensor<1x12xf32> to tensor<?x?xf32>
  call @print2d(%db0) : (tensor<?x?xf32>) -> ()
  %gated0 = tensor.cast %gated : tensor<6x12xf32> to tensor<?x?xf32>
  call @print2d(%gated0) : (tensor<?x?xf32>) -> ()
  call @print2d(%folded) : (tensor<?x?xf32>) -> ()
  %rows16 = tensor.cast %rows : tensor<?x?xf32> to tensor<16x8xf32>
  %rstd16 = tensor.cast %rstd2 : tensor<?x?xf32> to tensor<16x1xf32>
  %w88 = tensor.extract_slice %wkns[0, 0] [8, 8] [1, 1] : tensor<8x12xf32> to tensor<8x8xf32>
  %shift = call @matrix(%c16, %c1, %c5, %c3) : (index, index, index, index) -> tensor<?x?xf32>
  %shift16 = tensor.cast %shift : tensor<?x?xf32> to tensor<16x1xf32>
  %chained = call @chained_norms(%rows16, %rstd16, %gamma8, %w88, %shift16, %beta8, %wkns)
      : (tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<16x1xf32>, tensor<8xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
  %chained0 = tensor.cast %chained : tensor<16x12xf32> to tensor<?x?xf32>
  call @print2d(%chained0) : (tensor<?x?xf32>) -> ()
  return
}
