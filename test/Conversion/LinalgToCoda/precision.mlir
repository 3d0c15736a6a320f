// RUN: coda-opt %s --coda-raise-linalg --split-input-file | FileCheck %s --check-prefixes=CHECK,EXACT
// RUN: coda-opt %s --coda-raise-linalg="low-precision-epilogue=true" --split-input-file | FileCheck %s --check-prefixes=CHECK,NARROW
// RUN: coda-opt %s --coda-raise-linalg="low-precision-epilogue=true explain" --split-input-file -verify-diagnostics > /dev/null

// By default the raising only fuses what the f32 epilogue computes exactly:
// bf16/f16 operands widened to f32, f32 arithmetic, a rounding to bf16/f16
// (coda.round; the last one becomes the output's element type), and the
// bf16/f16 arithmetic whose results f32 gives exactly once rounded (+, -, *,
// /, sqrt, comparisons). Other bf16/f16 math (erf, exp, ...) stays in linalg.
// With low-precision-epilogue=true it is fused too, computed in f32 and
// rounded once at the output.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// A bf16 model as torch-mlir lowers it: the matmul accumulates in f32 and is
// rounded to bf16; bias and GELU then compute in bf16. The GELU's 1/sqrt(2)
// rounded to bf16 (0.70703125) is 6e-4 away from gelu_erf's, so the formula
// is fused as written rather than raised to coda.activation. Exactly, the
// bias joins the epilogue (a bf16 addition) and the erf in bf16 stays.
// CHECK-LABEL: func.func @bf16_linear_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[BIAS:.*]]: tensor<16xbf16>)
// EXACT:         %[[G:.*]] = coda.gemm %[[X]], %[[W]] ins(%[[BIAS]] : tensor<16xbf16> [n]) : tensor<4x8xbf16>, tensor<8x16xbf16> -> (tensor<4x16xbf16> [m, n]) {
// EXACT-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// EXACT-NEXT:      %[[R:.*]] = coda.round %[[ACC]] to bf16
// EXACT-NEXT:      %[[S:.*]] = arith.addf %[[R]], %[[B]] : f32
// EXACT-NEXT:      coda.yield %[[S]] : f32
// EXACT:         linalg.generic
// EXACT-SAME:      ins(%[[G]] : tensor<4x16xbf16>)
// EXACT:           math.erf %{{.*}} : bf16
// NARROW-NOT:    linalg.
// NARROW:        %[[G:.*]] = coda.gemm %[[X]], %[[W]] ins(%[[BIAS]] : tensor<16xbf16> [n]) : tensor<4x8xbf16>, tensor<8x16xbf16> -> (tensor<4x16xbf16> [m, n]) {
// NARROW-NEXT:   ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// NARROW-NEXT:     %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// NARROW:          %[[K:.*]] = arith.constant 0.70703125 : f32
// NARROW-NEXT:     %[[T:.*]] = arith.mulf %[[S]], %[[K]] : f32
// NARROW-NEXT:     math.erf %[[T]] : f32
// NARROW-NOT:      coda.activation
// NARROW:          coda.yield
// NARROW-NOT:    linalg.
func.func @bf16_linear_gelu(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %bias: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  %b = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %bias : tensor<4x16xbf16>, tensor<16xbf16>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%in: bf16, %v: bf16, %o: bf16):
    %r = arith.addf %in, %v : bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<4x16xbf16>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %half = arith.constant 5.000000e-01 : bf16
    %one = arith.constant 1.000000e+00 : bf16
    %rsqrt2 = arith.constant 7.070310e-01 : bf16
    %s = arith.mulf %in, %rsqrt2 : bf16
    %erf = math.erf %s : bf16
    %p = arith.addf %erf, %one : bf16
    %h = arith.mulf %in, %half : bf16
    %r = arith.mulf %h, %p : bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  return %g : tensor<4x16xbf16>
}

// -----

// f16 operands, an f32 epilogue, an f16 result: exact either way.
// CHECK-LABEL: func.func @f16_output
// CHECK:         coda.gemm
// CHECK-SAME:      : tensor<4x8xf16>, tensor<8x16xf16> -> (tensor<4x16xf16> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[R:.*]] = coda.activation sigmoid %[[ACC]]
// CHECK-NEXT:      coda.yield %[[R]] : f32
// CHECK-NOT:     linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f16_output(%x: tensor<4x8xf16>, %w: tensor<8x16xf16>) -> tensor<4x16xf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xf16>, tensor<8x16xf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %eh = tensor.empty() : tensor<4x16xf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%eh : tensor<4x16xf16>) {
  ^bb0(%in: f32, %o: f16):
    %one = arith.constant 1.000000e+00 : f32
    %n = arith.negf %in : f32
    %ex = math.exp %n : f32
    %d = arith.addf %one, %ex : f32
    %s = arith.divf %one, %d : f32
    %r = arith.truncf %s : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x16xf16>
  return %y : tensor<4x16xf16>
}

// -----

// A matmul that accumulates in bf16: raised, and summed in f32, only with
// low-precision-epilogue=true.
// CHECK-LABEL: func.func @bf16_accumulator
// EXACT:         linalg.matmul
// EXACT-NOT:     coda.gemm
// NARROW:        coda.gemm
// NARROW-SAME:     : tensor<4x8xbf16>, tensor<8x16xbf16> -> (tensor<4x16xbf16> [m, n])
func.func @bf16_accumulator(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.000000e+00 : bf16
  %e = tensor.empty() : tensor<4x16xbf16>
  %acc = linalg.fill ins(%zero : bf16) outs(%e : tensor<4x16xbf16>) -> tensor<4x16xbf16>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %mm : tensor<4x16xbf16>
}

// -----

// Clearing the sign bit of a bf16 value has no meaning once the value is
// computed in f32.
// CHECK-LABEL: func.func @bf16_sign_bit
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[G]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @bf16_sign_bit(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: bitcasts a narrow float, which has no f32 equivalent}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %mask = arith.constant 32767 : i16
    %t = arith.truncf %in : f32 to bf16
    %i = arith.bitcast %t : bf16 to i16
    %a = arith.andi %i, %mask : i16
    %r = arith.bitcast %a : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Rounding to bf16 and back in the middle of a computation is coda.round;
// with low-precision-epilogue=true the value goes on unrounded.
// CHECK-LABEL: func.func @round_trip_bf16
// CHECK:         coda.gemm
// CHECK-NEXT:    ^bb0
// EXACT-NEXT:      %[[R:.*]] = coda.round %{{.*}} to bf16
// EXACT-NEXT:      coda.yield %[[R]] : f32
// NARROW-NOT:      coda.round
// CHECK-NOT:     linalg.
func.func @round_trip_bf16(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// torch-mlir's elementwise ops of a bf16 model compute in bf16, each result
// rounded: an addition in bf16 is the f32 addition of the operands rounded to
// bf16 (f32 carries more than twice bf16's precision, so the two roundings
// give the one), so it is fused exactly: the product rounded (coda.round),
// the f32 sum, rounded as the output is written.
// CHECK-LABEL: func.func @bf16_arithmetic
// CHECK:         coda.gemm
// CHECK-SAME:      -> (tensor<4x16xbf16> [m, n])
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// EXACT-NEXT:      %[[R:.*]] = coda.round %[[ACC]] to bf16
// EXACT-NEXT:      %[[S:.*]] = arith.addf %[[R]], %[[B]] : f32
// NARROW-NEXT:     %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:      coda.yield %[[S]] : f32
// CHECK-NOT:     linalg.
func.func @bf16_arithmetic(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %bias : tensor<4x16xbf16>, tensor<16xbf16>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%x: bf16, %v: bf16, %o: bf16):
    %r = arith.addf %x, %v : bf16
    linalg.yield %r : bf16
  } -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Adding a bf16 bias in bf16 (rather than widening it) rounds the sum to
// bf16, which is then widened for an f32 output.
// CHECK-LABEL: func.func @bf16_bias
// CHECK:         coda.gemm
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// EXACT-NEXT:      %[[R:.*]] = coda.round %[[ACC]] to bf16
// EXACT-NEXT:      %[[S:.*]] = arith.addf %[[R]], %[[B]] : f32
// EXACT-NEXT:      %[[T:.*]] = coda.round %[[S]] to bf16
// EXACT-NEXT:      coda.yield %[[T]] : f32
// NARROW-NEXT:     %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// NARROW-NEXT:     coda.yield %[[S]] : f32
// CHECK-NOT:     linalg.
func.func @bf16_bias(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xbf16>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<4x16xf32>, tensor<16xbf16>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %v: bf16, %o: f32):
    %t = arith.truncf %x : f32 to bf16
    %s = arith.addf %t, %v : bf16
    %r = arith.extf %s : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
