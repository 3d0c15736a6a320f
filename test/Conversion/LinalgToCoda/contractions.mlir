// RUN: coda-opt %s --coda-raise-linalg --split-input-file | FileCheck %s

// The contraction spellings that become coda.gemm: the named ops, transposing
// indexing maps, a generic, transposes and broadcasts feeding A or B, and
// what the accumulator starts from.

// CHECK-LABEL: func.func @matmul
// CHECK-SAME:    (%[[A:.*]]: tensor<?x?xf32>, %[[B:.*]]: tensor<?x?xf32>)
// CHECK:         %[[R:.*]] = coda.gemm %[[A]], %[[B]] : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      coda.yield %[[ACC]] : f32
// CHECK:         return %[[R]]
func.func @matmul(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%acc : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// CHECK-LABEL: func.func @transposed_operands
// CHECK:         coda.gemm %{{.*}}, %{{.*}} transpose_a transpose_b : tensor<16x8xbf16>, tensor<32x16xbf16>
// CHECK-NOT:     linalg.
func.func @transposed_operands(%a: tensor<16x8xbf16>, %b: tensor<32x16xbf16>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (k, m)>,
                       affine_map<(m, n, k) -> (n, k)>,
                       affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %b : tensor<16x8xbf16>, tensor<32x16xbf16>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A matmul written as a generic, on bf16 operands that it widens to f32; A is
// transposed by a generic and B by linalg.transpose, and both are looked
// through.
// CHECK-LABEL: func.func @generic_matmul
// CHECK-SAME:    (%[[AT:.*]]: tensor<16x8xbf16>, %[[BT:.*]]: tensor<32x16xbf16>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[AT]], %[[BT]] transpose_a transpose_b : tensor<16x8xbf16>, tensor<32x16xbf16> -> (tensor<8x32xf32> [m, n])
// CHECK-NOT:     linalg.
#map_mk = affine_map<(m, n, k) -> (m, k)>
#map_kn = affine_map<(m, n, k) -> (k, n)>
#map_mn = affine_map<(m, n, k) -> (m, n)>
func.func @generic_matmul(%at: tensor<16x8xbf16>, %bt: tensor<32x16xbf16>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<8x16xbf16>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%at : tensor<16x8xbf16>) outs(%ea : tensor<8x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<8x16xbf16>
  %eb = tensor.empty() : tensor<16x32xbf16>
  %b = linalg.transpose ins(%bt : tensor<32x16xbf16>) outs(%eb : tensor<16x32xbf16>) permutation = [1, 0]
  %e = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#map_mk, #map_kn, #map_mn],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%acc : tensor<8x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// torch-mlir's 3-D x 2-D matmul: the weight broadcast to every batch feeds a
// batch_matmul; the broadcast is looked through and the weight shared.
// CHECK-LABEL: func.func @batch_matmul_shared_weight
// CHECK-SAME:    (%[[X:.*]]: tensor<2x5x8xf16>, %[[W:.*]]: tensor<8x12xf16>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[X]], %[[W]] : tensor<2x5x8xf16>, tensor<8x12xf16> -> (tensor<2x5x12xf32> [b, m, n])
func.func @batch_matmul_shared_weight(%x: tensor<2x5x8xf16>, %w: tensor<8x12xf16>) -> tensor<2x5x12xf32> {
  %zero = arith.constant 0.0 : f32
  %ew = tensor.empty() : tensor<2x8x12xf16>
  %wb = linalg.broadcast ins(%w : tensor<8x12xf16>) outs(%ew : tensor<2x8x12xf16>) dimensions = [0]
  %e = tensor.empty() : tensor<2x5x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %r = linalg.batch_matmul ins(%x, %wb : tensor<2x5x8xf16>, tensor<2x8x12xf16>) outs(%acc : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  return %r : tensor<2x5x12xf32>
}

// -----

// Accumulating into a tensor is C with beta = 1.
// CHECK-LABEL: func.func @accumulate_into_c
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[C:.*]]: tensor<4x16xf32>)
// CHECK:         coda.gemm %[[A]], %[[B]] c(%[[C]] : tensor<4x16xf32>) : tensor<4x8xf32>, tensor<8x16xf32> -> (tensor<4x16xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      coda.yield %[[ACC]] : f32
func.func @accumulate_into_c(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// A broadcast bias as the accumulator's init (as some pipelines fold addmm)
// and a non-zero fill are added in the epilogue.
// CHECK-LABEL: func.func @bias_as_init
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[BIAS:.*]]: tensor<16xf32>)
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[BIAS]] : tensor<16xf32> [n])
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:      coda.yield %[[S]] : f32
func.func @bias_as_init(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.broadcast ins(%bias : tensor<16xf32>) outs(%e : tensor<4x16xf32>) dimensions = [0]
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @constant_init
// CHECK:         coda.gemm
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[K:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[K]] : f32
// CHECK-NEXT:      coda.yield %[[S]] : f32
func.func @constant_init(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %k = arith.constant 1.5 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%k : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// A fill with a value from outside is a scalar epilogue input.
// CHECK-LABEL: func.func @scalar_init
// CHECK-SAME:    %[[S:[a-z0-9]+]]: f32)
// CHECK:         coda.gemm %{{.*}}, %{{.*}} ins(%[[S]] : f32)
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT:      arith.addf %[[ACC]], %[[V]] : f32
func.func @scalar_init(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: f32) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%s : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
