// RUN: coda-opt %s -canonicalize | FileCheck %s

// Unused epilogue inputs are dropped, together with their block arguments and dims.
// CHECK-LABEL: func.func @unused_inputs
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<8x4xbf16>, %[[U:.*]]: tensor<4xf32>, %[[V:.*]]: tensor<4xf32>, %[[S:.*]]: f32)
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[V]] : tensor<4xf32> [m])
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[X:.*]]: f32):
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @unused_inputs(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %u: tensor<4xf32>,
                         %v: tensor<4xf32>, %s: f32) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b ins(%u : tensor<4xf32> [n], %v : tensor<4xf32> [m], %s : f32)
      : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32, %y: f32, %z: f32):
    %r = arith.addf %acc, %y : f32
    coda.yield %r : f32
  }
  return %0 : tensor<4x4xf32>
}

// An alpha that is the constant 1 is dropped; other alphas stay.
// CHECK-LABEL: func.func @unit_alpha
// CHECK:         coda.gemm %{{[a-z0-9]+}}, %{{[a-z0-9]+}} :
// CHECK:         coda.gemm %{{[a-z0-9]+}}, %{{[a-z0-9]+}} alpha(%{{[a-z0-9]+}}) :
func.func @unit_alpha(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %0 = coda.gemm %a, %b alpha(%one) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %1 = coda.gemm %a, %b alpha(%two) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// Dropout with p = 0 is the identity; the then-unused seed input goes too.
// A tiny p that still rounds to a non-zero threshold stays.
// CHECK-LABEL: func.func @dropout_zero
// CHECK:         coda.gemm %{{[a-z0-9]+}}, %{{[a-z0-9]+}} ins(%{{[a-z0-9]+}} : i64)
// CHECK-NOT:     coda.dropout %{{.*}} {p = 0.000000e+00 : f32}
// CHECK:         %[[D:.*]] = coda.dropout %{{.*}} {p = 9.99999974E-6 : f32}
// CHECK-NEXT:    coda.yield %[[D]]
func.func @dropout_zero(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %seed: i64) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b ins(%seed : i64) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %s: i64):
    %d = coda.dropout %acc, %s {p = 0.0 : f32}
    %e = coda.dropout %d, %s {p = 1.0e-5 : f32}
    coda.yield %e : f32
  }
  return %0 : tensor<4x4xf32>
}
