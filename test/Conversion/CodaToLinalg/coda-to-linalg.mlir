// RUN: coda-opt %s --coda-to-linalg --split-input-file | FileCheck %s

// The contraction reads B transposed ([N, K]) and extends bf16 to f32 before
// multiplying, its sum over K free to be reassociated (vectorized) and
// contracted; the bias is read along n only; the output is rounded to bf16.
// CHECK-DAG: #[[$A_MAP:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$BT_MAP:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$OUT_MAP:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xbf16>, %[[W:.*]]: tensor<32x64xbf16>, %[[BIAS:.*]]: tensor<32xf32>)
// CHECK:         %[[ZERO:.*]] = linalg.fill
// CHECK:         %[[MM:.*]] = linalg.generic {indexing_maps = [#[[$A_MAP]], #[[$BT_MAP]], #[[$OUT_MAP]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[W]] : tensor<?x64xbf16>, tensor<32x64xbf16>) outs(%[[ZERO]] : tensor<?x32xf32>)
// CHECK:           arith.extf
// CHECK:           arith.extf
// CHECK:           %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK:           arith.addf %{{.*}}, %[[P]] fastmath<reassoc,contract> : f32
// CHECK:         %[[ADD:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]], #[[$ID]]]
// CHECK-SAME:      ins(%[[MM]], %[[BIAS]] : tensor<?x32xf32>, tensor<32xf32>)
// CHECK:         %[[GELU:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[ADD]] : tensor<?x32xf32>)
// CHECK:           math.exp2
// CHECK:         %[[OUT:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[GELU]] : tensor<?x32xf32>) outs(%{{.*}} : tensor<?x32xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:         return %[[OUT]]
func.func @bias_gelu(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %bias: tensor<32xf32>) -> tensor<?x32xbf16> {
  %0 = coda.gemm %x, %w transpose_b ins(%bias : tensor<32xf32> [n])
      : tensor<?x64xbf16>, tensor<32x64xbf16> -> (tensor<?x32xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %1 = arith.addf %acc, %b : f32
    %2 = coda.activation gelu_tanh %1
    coda.yield %2 : f32
  }
  return %0 : tensor<?x32xbf16>
}

// -----

// A row reduction reduces over n (the second dim) into an [m] tensor, and the
// mean divides by N; a value that only varies along m stays an [m] tensor.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$VEC:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[$SCALAR:.*]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @row_mean
// CHECK:         %[[N:.*]] = tensor.dim %arg1, %{{.*}} : tensor<?x?xf32>
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?xf32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      outs(%[[INIT]] : tensor<?xf32>)
// CHECK:           arith.addf
// CHECK:         %[[NI:.*]] = arith.index_castui %[[N]] : index to i64
// CHECK:         %[[NF:.*]] = arith.uitofp %[[NI]] : i64 to f32
// CHECK:         %[[MEAN:.*]] = linalg.generic {indexing_maps = [#[[$VEC]], #[[$SCALAR]], #[[$VEC]]], iterator_types = ["parallel"]}
// CHECK-SAME:      ins(%[[SUM]], %[[NF]] : tensor<?xf32>, f32)
// CHECK:           arith.divf
// CHECK:         %[[RS:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[MEAN]] : tensor<?xf32>)
// CHECK:           math.rsqrt
// CHECK:         return %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?xf32>
func.func @row_mean(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %0, %1 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %m = coda.row_reduce mean %acc
    %r = math.rsqrt %m : f32
    %y = arith.mulf %acc, %r : f32
    coda.yield %y, %m : f32, f32
  }
  return %0, %1 : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// A column reduction reduces over m; max starts from -inf.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @col_max
// CHECK:         %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%[[NEG_INF]] : f32)
// CHECK:         linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME:      outs(%[[INIT]] : tensor<?xf32>)
// CHECK:           arith.maximumf
func.func @col_max(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?xf32> {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?xf32> [n]) {
  ^bb0(%acc: f32):
    %m = coda.col_reduce max %acc
    coda.yield %m : f32
  }
  return %0 : tensor<?xf32>
}

// -----

// Dropout reads the element's row and column (linalg.index 0 and 1), and runs
// ten Philox rounds (two 32x32->64 multiplies each).
// CHECK-LABEL: func.func @dropout
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, i64)
// CHECK-DAG:       linalg.index 0
// CHECK-DAG:       linalg.index 1
// CHECK-COUNT-20:  arith.mului_extended
// CHECK:           arith.cmpi uge, %{{.*}}, %c6554_i32
// CHECK:           arith.select
func.func @dropout(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %seed: i64) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b ins(%seed : i64) : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32, %s: i64):
    %d = coda.dropout %acc, %s {p = 0.1 : f32}
    coda.yield %d : f32
  }
  return %0 : tensor<?x?xf32>
}

// -----

// Batched, with A transposed ([batch, K, M]) and B shared by every batch;
// alpha, C and beta form the accumulator before the epilogue.
// CHECK-DAG: #[[$AT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-DAG: #[[$B2:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[$O3:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @batched
// CHECK:         %[[MM:.*]] = linalg.generic {indexing_maps = [#[[$AT]], #[[$B2]], #[[$O3]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[MM]], %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x?x?xf32>, f32, tensor<2x?x?xbf16>, f32)
// CHECK:           arith.mulf
// CHECK:           arith.extf
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @batched(%a: tensor<2x?x?xbf16>, %b: tensor<?x?xbf16>, %c: tensor<2x?x?xbf16>, %alpha: f32, %beta: f32) -> tensor<2x?x?xf32> {
  %0 = coda.gemm %a, %b transpose_a c(%c : tensor<2x?x?xbf16>) alpha(%alpha) beta(%beta)
      : tensor<2x?x?xbf16>, tensor<?x?xbf16> -> (tensor<2x?x?xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<2x?x?xf32>
}
