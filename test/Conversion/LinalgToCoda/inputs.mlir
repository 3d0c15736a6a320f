// RUN: coda-opt %s --coda-raise-linalg | FileCheck %s

// What consumers read from outside becomes an epilogue input spanning the
// dims it is read along; size-1 dims are folded away and tensors without
// other dims are read as scalars.

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @input_forms
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[COL:.*]]: tensor<1x16xbf16>, %[[ROW:.*]]: tensor<4x1xf16>, %[[ROWV:.*]]: tensor<4xf32>, %[[T:.*]]: tensor<f32>, %[[S:.*]]: f32, %[[ONE:.*]]: tensor<1x1xf32>)
// CHECK-DAG:     %[[COLV:.*]] = tensor.collapse_shape %[[COL]] {{\[\[}}0, 1]] : tensor<1x16xbf16> into tensor<16xbf16>
// CHECK-DAG:     %[[ROWC:.*]] = tensor.collapse_shape %[[ROW]] {{\[\[}}0, 1]] : tensor<4x1xf16> into tensor<4xf16>
// CHECK-DAG:     %[[TS:.*]] = tensor.extract %[[T]][] : tensor<f32>
// CHECK-DAG:     %[[OS:.*]] = tensor.extract %[[ONE]][%{{.*}}, %{{.*}}] : tensor<1x1xf32>
// CHECK:         coda.gemm %[[A]], %[[B]]
// CHECK-SAME:      ins(%[[COLV]] : tensor<16xbf16> [n], %[[ROWC]] : tensor<4xf16> [m], %[[ROWV]] : tensor<4xf32> [m], %[[TS]] : f32, %[[S]] : f32, %[[OS]] : f32)
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[VC:.*]]: f32, %[[VR:.*]]: f32, %[[VRV:.*]]: f32, %[[VT:.*]]: f32, %[[VS:.*]]: f32, %[[VO:.*]]: f32):
// CHECK-NEXT:      %[[X0:.*]] = arith.addf %[[ACC]], %[[VC]] : f32
// CHECK-NEXT:      %[[X1:.*]] = arith.mulf %[[X0]], %[[VR]] : f32
// CHECK-NEXT:      %[[X2:.*]] = arith.subf %[[X1]], %[[VRV]] : f32
// CHECK-NEXT:      %[[X3:.*]] = arith.mulf %[[X2]], %[[VT]] : f32
// CHECK-NEXT:      %[[X4:.*]] = arith.addf %[[X3]], %[[VS]] : f32
// CHECK-NEXT:      %[[X5:.*]] = arith.divf %[[X4]], %[[VO]] : f32
// CHECK-NEXT:      coda.yield %[[X5]] : f32
func.func @input_forms(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %col: tensor<1x16xbf16>,
    %row: tensor<4x1xf16>, %rowv: tensor<4xf32>, %t: tensor<f32>, %s: f32, %one: tensor<1x1xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>,
                                        affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> ()>,
                                        affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (0, 0)>, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %col, %row, %rowv, %t, %s, %one : tensor<4x16xf32>, tensor<1x16xbf16>, tensor<4x1xf16>, tensor<4xf32>, tensor<f32>, f32, tensor<1x1xf32>)
      outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %c: bf16, %r: f16, %rv: f32, %tv: f32, %sv: f32, %ov: f32, %o: f32):
    %cf = arith.extf %c : bf16 to f32
    %rf = arith.extf %r : f16 to f32
    %0 = arith.addf %x, %cf : f32
    %1 = arith.mulf %0, %rf : f32
    %2 = arith.subf %1, %rv : f32
    %3 = arith.mulf %2, %tv : f32
    %4 = arith.addf %3, %sv : f32
    %5 = arith.divf %4, %ov : f32
    linalg.yield %5 : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A residual computed after the matmul, by independent code, is moved before
// the coda.gemm; one input read twice is passed once.
// CHECK-LABEL: func.func @late_residual
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[H:.*]]: tensor<4x16xf32>)
// CHECK:         %[[RES:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[H]] : tensor<4x16xf32>)
// CHECK:           math.tanh
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[RES]] : tensor<4x16xf32> [m, n])
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT:      %[[X:.*]] = arith.addf %[[ACC]], %[[R]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[X]], %[[R]] : f32
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @late_residual(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %h: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %er = tensor.empty() : tensor<4x16xf32>
  %res = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4x16xf32>) outs(%er : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = math.tanh %x : f32
    linalg.yield %t : f32
  } -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %res, %res : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %r: f32, %r2: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    %p = arith.mulf %s, %r2 : f32
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A bf16 residual widened to f32 only to be added (aten.to before aten.add):
// coda.gemm widens its inputs itself, so the bf16 tensor is the input and the
// widening goes away.
// CHECK-LABEL: func.func @widened_residual
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<8x16xbf16>, %[[RES:.*]]: tensor<4x16xbf16>)
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm %[[A]], %[[B]] ins(%[[RES]] : tensor<4x16xbf16> [m, n])
// CHECK-NOT:     linalg.
func.func @widened_residual(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %res: tensor<4x16xbf16>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %wide = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%res : tensor<4x16xbf16>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x16xf32>
  %y = linalg.add ins(%mm, %wide : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
