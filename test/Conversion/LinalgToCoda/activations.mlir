// RUN: coda-opt %s --coda-raise-linalg | FileCheck %s

// Activation spellings. A formula of one value is raised to coda.activation
// when it computes the activation's definition (the EpilogueMath expansion)
// up to f32 rounding; anything else stays as arith/math in the epilogue,
// where it still computes exactly what it did.

#id = affine_map<(d0, d1) -> (d0, d1)>

// GELU as 0.5 x (1 + erf(x * 0.70710677)), the f32-rounded 1/sqrt(2).
// CHECK-LABEL: func.func @gelu_erf_scaled
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation gelu_erf %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @gelu_erf_scaled(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %h = arith.mulf %half, %x : f32
    %s = arith.mulf %x, %rsqrt2 : f32
    %erf = math.erf %s : f32
    %p = arith.addf %erf, %one : f32
    %r = arith.mulf %h, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// GELU through the complementary error function, x * erfc(-x / sqrt(2)) / 2.
// CHECK-LABEL: func.func @gelu_erfc
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation gelu_erf %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @gelu_erfc(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %sqrt2 = arith.constant 1.41421354 : f32
    %n = arith.negf %x : f32
    %s = arith.divf %n, %sqrt2 : f32
    %c = math.erfc %s : f32
    %h = arith.mulf %x, %half : f32
    %r = arith.mulf %h, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// tanh GELU with x^3 as math.fpowi and sqrt(2/pi) rounded to f32.
// CHECK-LABEL: func.func @gelu_tanh_fpowi
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation gelu_tanh %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @gelu_tanh_fpowi(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %three = arith.constant 3 : i64
    %c = arith.constant 4.471500e-02 : f32
    %k = arith.constant 0.797884583 : f32
    %one = arith.constant 1.000000e+00 : f32
    %half = arith.constant 5.000000e-01 : f32
    %x3 = math.fpowi %x, %three : f32, i64
    %t0 = arith.mulf %x3, %c : f32
    %t1 = arith.addf %x, %t0 : f32
    %t2 = arith.mulf %k, %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %one, %t3 : f32
    %t5 = arith.mulf %half, %t4 : f32
    %r = arith.mulf %x, %t5 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// torch-mlir's tanh GELU scales by 0.7977240352174656 where sqrt(2/pi) is
// 0.7978845608: up to ~1e-4 away from gelu_tanh, so it is fused as written.
// CHECK-LABEL: func.func @gelu_tanh_torch_mlir
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NOT:       coda.activation
// CHECK:           math.fpowi %[[ACC]]
// CHECK:           math.tanh
// CHECK-NOT:       coda.activation
// CHECK:           coda.yield
func.func @gelu_tanh_torch_mlir(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %three = arith.constant 3 : i64
    %c = arith.constant 4.471500e-02 : f32
    %k = arith.constant 0.797724068 : f32
    %one = arith.constant 1.000000e+00 : f32
    %half = arith.constant 5.000000e-01 : f32
    %x3 = math.fpowi %x, %three : f32, i64
    %t0 = arith.mulf %x3, %c : f32
    %t1 = arith.addf %x, %t0 : f32
    %t2 = arith.mulf %k, %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %one, %t3 : f32
    %t5 = arith.mulf %half, %t4 : f32
    %r = arith.mulf %x, %t5 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// sigmoid as 0.5 tanh(x / 2) + 0.5.
// CHECK-LABEL: func.func @sigmoid_from_tanh
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation sigmoid %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @sigmoid_from_tanh(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %h = arith.mulf %x, %half : f32
    %t = math.tanh %h : f32
    %s = arith.mulf %t, %half : f32
    %r = arith.addf %s, %half : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// silu as x / (1 + exp(-x)).
// CHECK-LABEL: func.func @silu_divide
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation silu %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @silu_divide(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %one = arith.constant 1.000000e+00 : f32
    %n = arith.negf %x : f32
    %ex = math.exp %n : f32
    %d = arith.addf %one, %ex : f32
    %r = arith.divf %x, %d : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// x * sigmoid(1.702 x) ("quick GELU") is no activation of coda's, but the
// sigmoid inside it is.
// CHECK-LABEL: func.func @quick_gelu
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[S:.*]] = arith.mulf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:      %[[SIG:.*]] = coda.activation sigmoid %[[S]]
// CHECK-NEXT:      %[[R:.*]] = arith.mulf %[[ACC]], %[[SIG]] : f32
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @quick_gelu(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %one = arith.constant 1.000000e+00 : f32
    %k = arith.constant 1.702000e+00 : f32
    %s = arith.mulf %x, %k : f32
    %n = arith.negf %s : f32
    %ex = math.exp %n : f32
    %d = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %d : f32
    %r = arith.mulf %x, %sig : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// relu as StableHLO spells it: maximum(x, 0).
// CHECK-LABEL: func.func @relu_maximum
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation relu %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @relu_maximum(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %x, %zero0 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// maxnumf(x, 0) maps NaN to 0 where relu keeps NaN: not raised.
// CHECK-LABEL: func.func @relu_maxnum
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[R:.*]] = arith.maxnumf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @relu_maxnum(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %r = arith.maxnumf %x, %zero0 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// x > 0 ? x : 0 with an ordered compare also maps NaN to 0 (torch-mlir's
// unordered ugt keeps it, and is relu).
// CHECK-LABEL: func.func @relu_ordered_select
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK:           arith.cmpf ogt, %[[ACC]]
// CHECK-NEXT:      %[[R:.*]] = arith.select
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @relu_ordered_select(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %c = arith.cmpf ogt, %x, %zero0 : f32
    %r = arith.select %c, %x, %zero0 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// leaky relu is no activation of coda's.
// CHECK-LABEL: func.func @leaky_relu
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NOT:       coda.activation
// CHECK:           coda.yield
func.func @leaky_relu(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %slope = arith.constant 0.00999999977 : f32
    %c = arith.cmpf ugt, %x, %zero0 : f32
    %l = arith.mulf %x, %slope : f32
    %r = arith.select %c, %x, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// relu clamped to the f16 maximum agrees with relu up to 65504: its relu is
// raised, the clamp stays.
// CHECK-LABEL: func.func @relu_clamped
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[R:.*]] = coda.activation relu %[[ACC]]
// CHECK-NEXT:      %[[Y:.*]] = arith.minimumf %[[R]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @relu_clamped(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %cap = arith.constant 6.550400e+04 : f32
    %m = arith.maximumf %x, %zero0 : f32
    %r = arith.minimumf %m, %cap : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A threshold above 0 (x < 0.005 ? 0 : x, NaN kept) is no relu: not raised.
// CHECK-LABEL: func.func @relu_threshold
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NOT:       coda.activation
// CHECK:           coda.yield
func.func @relu_threshold(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %t = arith.constant 5.000000e-03 : f32
    %c = arith.cmpf olt, %x, %t : f32
    %r = arith.select %c, %zero0, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// Nor is one at 1e-30, which only the smallest inputs see.
// CHECK-LABEL: func.func @relu_tiny_threshold
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NOT:       coda.activation
// CHECK:           coda.yield
func.func @relu_tiny_threshold(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %zero0 = arith.constant 0.000000e+00 : f32
    %t = arith.constant 1.000000e-30 : f32
    %c = arith.cmpf olt, %x, %t : f32
    %r = arith.select %c, %zero0, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// GELU whose erfc is computed piecewise, 1 - erf(z) below |z| = 2 and
// erfc(z) above, as an expansion into two approximations on either side of a
// bound is (StableHLO's chlo.erfc lowering, exported.test). A piecewise
// formula is compared with a smooth activation on a dense grid besides the
// probes; this one is the activation to f32 precision everywhere.
// CHECK-LABEL: func.func @gelu_erfc_piecewise
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[Y:.*]] = coda.activation gelu_erf %[[ACC]]
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @gelu_erfc_piecewise(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %two = arith.constant 2.000000e+00 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %n = arith.negf %x : f32
    %s = arith.mulf %n, %rsqrt2 : f32
    %abs = math.absf %s : f32
    %near = arith.cmpf olt, %abs, %two : f32
    %erf = math.erf %s : f32
    %low = arith.subf %one, %erf : f32
    %high = math.erfc %s : f32
    %c = arith.select %near, %low, %high : f32
    %h = arith.mulf %x, %half : f32
    %r = arith.mulf %h, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A piecewise formula that is GELU on one side of a bound and not on the
// other (x itself above 1): the grid sees the difference, and the select
// stays, choosing between x and its GELU part, which is raised.
// CHECK-LABEL: func.func @gelu_cut_at_one
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[G:.*]] = coda.activation gelu_erf %[[ACC]]
// CHECK:           %[[R:.*]] = arith.select %{{.*}}, %[[ACC]], %[[G]] : f32
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @gelu_cut_at_one(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %s = arith.mulf %x, %rsqrt2 : f32
    %erf = math.erf %s : f32
    %p = arith.addf %erf, %one : f32
    %h = arith.mulf %x, %half : f32
    %gelu = arith.mulf %h, %p : f32
    %above = arith.cmpf ogt, %x, %one : f32
    %r = arith.select %above, %x, %gelu : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
