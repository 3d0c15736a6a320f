// RUN: coda-opt %s --coda-raise-linalg --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-raise-linalg=explain --split-input-file -verify-diagnostics > /dev/null

// Contractions coda.gemm does not compute exactly are left as they are; with
// `explain`, a remark says why.

// CHECK-LABEL: func.func @integer_matmul
// CHECK:         linalg.matmul
// CHECK-NOT:     coda.gemm
func.func @integer_matmul(%a: tensor<4x8xi8>, %b: tensor<8x16xi8>, %c: tensor<4x16xi32>) -> tensor<4x16xi32> {
  // expected-remark @+1 {{not raised to coda.gemm: the body is not 'out + a * b' in floating point}}
  %r = linalg.matmul ins(%a, %b : tensor<4x8xi8>, tensor<8x16xi8>) outs(%c : tensor<4x16xi32>) -> tensor<4x16xi32>
  return %r : tensor<4x16xi32>
}

// -----

// CHECK-LABEL: func.func @mixed_operand_types
// CHECK:         linalg.matmul
func.func @mixed_operand_types(%a: tensor<4x8xbf16>, %b: tensor<8x16xf16>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: coda.gemm multiplies two bf16, f16 or f32 matrices of one element type}}
  %r = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xf16>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Summing bf16 products in bf16 rounds after every addition; coda.gemm sums
// in f32 (low-precision-epilogue=true accepts that).
// CHECK-LABEL: func.func @bf16_accumulator
// CHECK:         linalg.matmul
func.func @bf16_accumulator(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %c: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  // expected-remark @+1 {{not raised to coda.gemm: accumulates in bf16; coda.gemm accumulates in f32}}
  %r = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%c : tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %r : tensor<4x16xbf16>
}

// -----

// CHECK-LABEL: func.func @two_contraction_dims
// CHECK:         linalg.generic
func.func @two_contraction_dims(%a: tensor<4x8x2xf32>, %b: tensor<8x2x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: coda.gemm needs exactly one M, one N and one K loop and at most one batch loop}}
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k, l) -> (m, k, l)>, affine_map<(m, n, k, l) -> (k, l, n)>, affine_map<(m, n, k, l) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : tensor<4x8x2xf32>, tensor<8x2x16xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// (A B)^T written directly: the result is [N, M].
// CHECK-LABEL: func.func @transposed_result
// CHECK:         linalg.matmul
func.func @transposed_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<16x4xf32>) -> tensor<16x4xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: the result is not written as [M, N], batch first}}
  %r = linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (n, m)>]
      ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<16x4xf32>) -> tensor<16x4xf32>
  return %r : tensor<16x4xf32>
}

// -----

// A batch_matmul of two operands broadcast along the batch.
// CHECK-LABEL: func.func @batch_of_neither_operand
// CHECK:         linalg.batch_matmul
func.func @batch_of_neither_operand(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %ea = tensor.empty() : tensor<2x4x8xf32>
  %ab = linalg.broadcast ins(%a : tensor<4x8xf32>) outs(%ea : tensor<2x4x8xf32>) dimensions = [0]
  %eb = tensor.empty() : tensor<2x8x16xf32>
  %bb = linalg.broadcast ins(%b : tensor<8x16xf32>) outs(%eb : tensor<2x8x16xf32>) dimensions = [0]
  // expected-remark @+1 {{not raised to coda.gemm: neither A nor B reads loop 0 of the result: an operand is broadcast along it}}
  %r = linalg.batch_matmul ins(%ab, %bb : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%c : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// A batch that is not A's first dim.
// CHECK-LABEL: func.func @batch_inside_a
// CHECK:         linalg.generic
func.func @batch_inside_a(%a: tensor<4x2x8xf32>, %b: tensor<2x8x16xf32>, %c: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: A is not read as [M, K] or [K, M], batch first}}
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (m, b, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x2x8xf32>, tensor<2x8x16xf32>) outs(%c : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// CHECK-LABEL: func.func @batch_inside_b
// CHECK:         linalg.generic
func.func @batch_inside_b(%a: tensor<2x4x8xf32>, %b: tensor<8x2x16xf32>, %c: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: B is not read as [K, N] or [N, K], batch first}}
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, b, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<2x4x8xf32>, tensor<8x2x16xf32>) outs(%c : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// A row vector broadcast into A: no dim of A runs along M.
// CHECK-LABEL: func.func @broadcast_row_as_a
// CHECK:         linalg.matmul
func.func @broadcast_row_as_a(%v: tensor<8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %ea = tensor.empty() : tensor<4x8xf32>
  %a = linalg.broadcast ins(%v : tensor<8xf32>) outs(%ea : tensor<4x8xf32>) dimensions = [0]
  // expected-remark @+1 {{not raised to coda.gemm: neither A nor B reads loop 0 of the result: an operand is broadcast along it}}
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @on_buffers
// CHECK:         linalg.matmul
func.func @on_buffers(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // expected-remark @+1 {{not raised to coda.gemm: works on buffers; contractions on tensors are raised}}
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// A "contraction" that also reduces over M.
// CHECK-LABEL: func.func @reduces_over_m
// CHECK:         linalg.generic
func.func @reduces_over_m(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-remark @+1 {{not raised to coda.gemm: coda.gemm reduces over K only}}
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
