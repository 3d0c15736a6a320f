// RUN: coda-opt %s | coda-opt | FileCheck %s
// RUN: coda-opt %s --mlir-print-op-generic | coda-opt | FileCheck %s
// RUN: coda-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC: "coda.gemm"
// GENERIC-SAME: input_dims = [#coda.dims<[n]>, #coda.dims<[m, n]>, #coda.dims<[m]>, #coda.dims<[]>, #coda.dims<[]>]
// GENERIC-SAME: result_dims = [#coda.dims<[m, n]>, #coda.dims<[m, n]>, #coda.dims<[n]>]
// GENERIC-SAME: transpose_b
// GENERIC: "coda.activation"(%{{[a-z0-9_#]+}}) <{kind = #coda<activation gelu_tanh>}>
// GENERIC: "coda.col_reduce"(%{{[a-z0-9_#]+}}) <{kind = #coda<reduction sum>}>

// CHECK-LABEL: func.func @mlp_up
// CHECK:       coda.gemm %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}} transpose_b
// CHECK-SAME:    ins(%{{[a-z0-9_#]+}} : tensor<3072xf32> [n], %{{[a-z0-9_#]+}} : tensor<?x3072xbf16> [m, n], %{{[a-z0-9_#]+}} : tensor<?xf32> [m], %{{[a-z0-9_#]+}} : f32, %{{[a-z0-9_#]+}} : i64)
// CHECK-SAME:    : tensor<?x768xbf16>, tensor<3072x768xbf16>
// CHECK-SAME:    -> (tensor<?x3072xbf16> [m, n], tensor<?x3072xf32> [m, n], tensor<3072xf32> [n])
// CHECK:       ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32, %[[RES:.*]]: f32, %[[RS:.*]]: f32, %[[ALPHA:.*]]: f32, %[[SEED:.*]]: i64):
// CHECK:         %[[PRE:.*]] = arith.addf
// CHECK:         %[[G:.*]] = coda.activation gelu_tanh %[[PRE]]
// CHECK:         %[[D:.*]] = coda.dropout %[[G]], %[[SEED]] {p = 1.000000e-01 : f32, stream = 1 : i32}
// CHECK:         %[[DB:.*]] = coda.col_reduce sum %[[ACC]]
// CHECK:         coda.yield %{{[a-z0-9_#]+}}, %[[PRE]], %[[DB]] : f32, f32, f32
func.func @mlp_up(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                  %bias: tensor<3072xf32>, %res: tensor<?x3072xbf16>,
                  %rs: tensor<?xf32>, %alpha: f32, %seed: i64)
    -> (tensor<?x3072xbf16>, tensor<?x3072xf32>, tensor<3072xf32>) {
  %out, %pre, %dbias = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<3072xf32> [n], %res : tensor<?x3072xbf16> [m, n],
          %rs : tensor<?xf32> [m], %alpha : f32, %seed : i64)
      : tensor<?x768xbf16>, tensor<3072x768xbf16>
      -> (tensor<?x3072xbf16> [m, n], tensor<?x3072xf32> [m, n], tensor<3072xf32> [n]) {
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: f32, %a: f32, %sd: i64):
    %0 = arith.mulf %acc, %a : f32
    %1 = arith.addf %0, %b : f32
    %2 = coda.activation gelu_tanh %1
    %3 = coda.dropout %2, %sd {p = 0.1 : f32, stream = 1 : i32}
    %4 = arith.mulf %3, %s : f32
    %5 = arith.addf %4, %r : f32
    %6 = coda.col_reduce sum %acc
    coda.yield %5, %1, %6 : f32, f32, f32
  }
  return %out, %pre, %dbias : tensor<?x3072xbf16>, tensor<?x3072xf32>, tensor<3072xf32>
}

// CHECK-LABEL: func.func @layernorm
// CHECK:       coda.gemm %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}} c(%{{[a-z0-9_#]+}} : tensor<?x?xf32>) alpha(%{{[a-z0-9_#]+}}) beta(%{{[a-z0-9_#]+}})
// CHECK-SAME:    -> (tensor<?x?xf16> [m, n], tensor<?xf32> [m])
// CHECK:         coda.row_reduce mean
// CHECK:         coda.row_reduce max
// CHECK:         coda.row_reduce sum
func.func @layernorm(%a: tensor<?x?xf16>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>,
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
    %mx = coda.row_reduce max %sq
    %sum = coda.row_reduce sum %mx
    %eps = arith.constant 1.0e-5 : f32
    %ve = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %ve : f32
    %n = arith.mulf %d, %rstd : f32
    %o = arith.mulf %n, %g : f32
    %o2 = arith.addf %o, %sum : f32
    coda.yield %o2, %mu : f32, f32
  }
  return %y, %mean : tensor<?x?xf16>, tensor<?xf32>
}

// CHECK-LABEL: func.func @batched
// CHECK:       coda.gemm %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}} transpose_a
// CHECK-SAME:    ins(%{{[a-z0-9_#]+}} : tensor<4x?xf32> [b, n])
// CHECK-SAME:    -> (tensor<4x?x?xf32> [b, m, n], tensor<4x?xf32> [b, n])
func.func @batched(%a: tensor<4x?x?xf32>, %b: tensor<?x?xf32>, %v: tensor<4x?xf32>)
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

// CHECK-LABEL: func.func @activations
// CHECK:         coda.activation gelu_erf
// CHECK:         coda.activation silu
// CHECK:         coda.activation sigmoid
// CHECK:         coda.activation_derivative gelu_tanh
func.func @activations(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    %1 = coda.activation gelu_erf %acc
    %2 = coda.activation silu %1
    %3 = coda.activation sigmoid %2
    %4 = coda.activation_derivative gelu_tanh %3
    coda.yield %4 : f32
  }
  return %0 : tensor<8x32xf32>
}

// An accumulator [m, n/2]: B has N / 2 = 16 columns, the outputs 32.
// CHECK-LABEL: func.func @accumulator_half_n
// CHECK:         coda.gemm %{{.*}}, %{{.*}} transpose_b accumulator [m, n/2] ins(%{{.*}} : tensor<8x32xbf16> [m, n]) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xbf16> [m, n])
func.func @accumulator_half_n(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>, %s: tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  %0 = coda.gemm %a, %b transpose_b accumulator [m, n/2] ins(%s : tensor<8x32xbf16> [m, n]) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = coda.partner %x xor 1
    %2 = arith.mulf %acc, %1 : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<8x32xbf16>
}

// B in halves (b_halves: op(B)'s column pairs are B's rows j and N / 2 + j),
// and an output stored in halves beside an accumulator [m, n/2].
// CHECK-LABEL: func.func @halves
// CHECK:         coda.gemm %{{.*}}, %{{.*}} transpose_b b_halves : tensor<8x16xbf16>, tensor<32x16xbf16> -> (tensor<8x16xbf16> [m, n/2], tensor<8x32xbf16> [m, n])
// CHECK:         coda.gemm %{{.*}}, %{{.*}} transpose_b accumulator [m, n/2] ins(%{{.*}} : tensor<8x32xbf16> [m, n]) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xbf16> [m, n halves])
func.func @halves(%a: tensor<8x16xbf16>, %b: tensor<32x16xbf16>, %w: tensor<16x16xbf16>) -> (tensor<8x16xbf16>, tensor<8x32xbf16>) {
  %0:2 = coda.gemm %a, %b transpose_b b_halves : tensor<8x16xbf16>, tensor<32x16xbf16> -> (tensor<8x16xbf16> [m, n/2], tensor<8x32xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %1 = coda.partner %acc xor 1
    %2 = arith.mulf %acc, %1 : f32
    coda.yield %2, %acc : f32, f32
  }
  %3 = coda.gemm %a, %w transpose_b accumulator [m, n/2] ins(%0#1 : tensor<8x32xbf16> [m, n]) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xbf16> [m, n halves]) {
  ^bb0(%acc: f32, %x: f32):
    %4 = coda.partner %x xor 1
    %5 = arith.mulf %acc, %4 : f32
    coda.yield %5 : f32
  }
  return %0#0, %3 : tensor<8x16xbf16>, tensor<8x32xbf16>
}

// Inputs that repeat along the row: 64 columns read at n mod 64, a table of
// 128 columns per row.
// CHECK-LABEL: func.func @periodic_inputs
// CHECK:         coda.gemm %{{.*}}, %{{.*}} ins(%{{.*}} : tensor<64xf32> [n mod 64], %{{.*}} : tensor<?x128xbf16> [m, n mod 128]) : tensor<?x16xbf16>, tensor<16x?xbf16> -> (tensor<?x?xbf16> [m, n])
func.func @periodic_inputs(%a: tensor<?x16xbf16>, %b: tensor<16x?xbf16>, %f: tensor<64xf32>, %t: tensor<?x128xbf16>) -> tensor<?x?xbf16> {
  %0 = coda.gemm %a, %b ins(%f : tensor<64xf32> [n mod 64], %t : tensor<?x128xbf16> [m, n mod 128]) : tensor<?x16xbf16>, tensor<16x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32, %y: f32):
    %1 = arith.mulf %acc, %x : f32
    %2 = arith.addf %1, %y : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<?x?xbf16>
}

// A gated output of the even columns, partner columns and coordinates.
// CHECK-LABEL: func.func @positions
// CHECK:         coda.gemm {{.*}} -> (tensor<4x8x16xbf16> [b, m, n/2], tensor<4x8x32xf32> [b, m, n])
// CHECK:         coda.partner %{{.*}} xor 1
// CHECK:         coda.partner %{{.*}} xor 64
// CHECK:         coda.coord m
// CHECK:         coda.coord n
// CHECK:         coda.coord b
func.func @positions(%a: tensor<4x8x16xbf16>, %b: tensor<16x32xbf16>) -> (tensor<4x8x16xbf16>, tensor<4x8x32xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<4x8x16xbf16>, tensor<16x32xbf16> -> (tensor<4x8x16xbf16> [b, m, n/2], tensor<4x8x32xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %half = coda.partner %acc xor 64
    %row = coda.coord m
    %col = coda.coord n
    %batch = coda.coord b
    %1 = arith.mulf %up, %half : f32
    %2 = arith.addf %row, %col : f32
    %3 = arith.addf %2, %batch : f32
    coda.yield %1, %3 : f32, f32
  }
  return %0#0, %0#1 : tensor<4x8x16xbf16>, tensor<4x8x32xf32>
}

// Reductions over groups of columns (per-head statistics).
// CHECK-LABEL: func.func @groups
// CHECK:         coda.group_reduce mean %{{.*}} width 128
// CHECK:         coda.group_reduce max %{{.*}} width 8
func.func @groups(%a: tensor<8x16xbf16>, %b: tensor<16x256xbf16>) -> tensor<8x256xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x256xbf16> -> (tensor<8x256xf32> [m, n]) {
  ^bb0(%acc: f32):
    %sq = arith.mulf %acc, %acc : f32
    %ms = coda.group_reduce mean %sq width 128
    %mx = coda.group_reduce max %acc width 8
    %1 = arith.addf %ms, %mx : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<8x256xf32>
}

// A value rounded to a 16-bit type, kept as f32.
// CHECK-LABEL: func.func @rounded
// CHECK:         coda.round %{{.*}} to bf16
// CHECK:         coda.round %{{.*}} to f16
func.func @rounded(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    %r = coda.round %acc to bf16
    %s = coda.round %r to f16
    coda.yield %s : f32
  }
  return %0 : tensor<8x32xf32>
}

// A value the backward's derivation does not differentiate through.
// CHECK-LABEL: func.func @detached
// CHECK:         coda.detach %{{.*}}
func.func @detached(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8xf32> [m]) {
  ^bb0(%acc: f32):
    %max = coda.row_reduce max %acc
    %shift = coda.detach %max
    %d = arith.subf %acc, %shift : f32
    %e = math.exp %d : f32
    %sum = coda.row_reduce sum %e
    coda.yield %sum : f32
  }
  return %0 : tensor<8xf32>
}
