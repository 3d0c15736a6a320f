// RUN: coda-opt %s --coda-raise-linalg --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-raise-linalg=explain --split-input-file -verify-diagnostics > /dev/null

// Consumers that cannot join the epilogue stay exactly as they were and read
// the coda.gemm's output instead; with `explain`, a remark says why. One case
// per reason.

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A causal mask reads the loop indices.
// CHECK-LABEL: func.func @causal_mask
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @causal_mask(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads loop indices (linalg.index)}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    %ninf = arith.constant 0xFF800000 : f32
    %r = arith.select %keep, %x, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A scalar taken from the GEMM result cannot be an input of the same GEMM.
// CHECK-LABEL: func.func @depends_on_result
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @depends_on_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %c0 = arith.constant 0 : index
  %s = tensor.extract %mm[%c0, %c0] : tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads a value computed from the GEMM result or by an op with side effects}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.subf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Writing the result transposed is not elementwise.
// CHECK-LABEL: func.func @transposed_result
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @transposed_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<16x4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %et = tensor.empty() : tensor<16x4xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: a result is not laid out in [b, m, n] order}}
  %y = linalg.generic {indexing_maps = [#id, #tr], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%et : tensor<16x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %x : f32
    linalg.yield %r : f32
  } -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Pooling the first row (a CLS token) reads one row of the result.
// CHECK-LABEL: func.func @first_row
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @first_row(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<1x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<1x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads an epilogue value at 0, not elementwise}}
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e1 : tensor<1x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.tanh %x : f32
    linalg.yield %r : f32
  } -> tensor<1x16xf32>
  return %y : tensor<1x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A result that drops a parallel loop keeps only some of its elements.
// CHECK-LABEL: func.func @partial_result
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @partial_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: a result does not span every parallel loop}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e4 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Two loops along n: the outer product of each row with itself.
// CHECK-LABEL: func.func @outer_product
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @outer_product(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e3 = tensor.empty() : tensor<4x16x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: two loops run along the same output dim}}
  %y = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (i, j, k)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm, %mm : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e3 : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %x2: f32, %o: f32):
    %r = arith.mulf %x, %x2 : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  return %y : tensor<4x16x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A sum over every element is neither a row nor a column reduction.
// CHECK-LABEL: func.func @total_sum
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @total_sum(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<f32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reduces over something other than exactly n (a row reduction) or m (a column reduction)}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %y : tensor<f32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A minimum reduction.
// CHECK-LABEL: func.func @row_min
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @row_min(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  %inf = arith.constant 0x7F800000 : f32
  %i4 = linalg.fill ins(%inf : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: is not a sum (arith.addf) or maximum (arith.maximumf) reduction}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%i4 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.minimumf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A reduction whose result is indexed by the reduced loop.
// CHECK-LABEL: func.func @row_sum_indexed_by_reduction
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @row_sum_indexed_by_reduction(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: a result is indexed by a loop that is not an output dimension of the GEMM}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// The running sum is used for something else than the next step: a second
// reduction (a maximum of the running sums) reads it. (A use that no result
// needs does not count: outputs.mlir, @unread_index.)
// CHECK-LABEL: func.func @running_sum_reused
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @running_sum_reused(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: uses the running value of its reduction other than to combine it with the next element}}
  %y:2 = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z4, %z4 : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32, %p: f32):
    %r = arith.addf %x, %o : f32
    %q = arith.maximumf %r, %p : f32
    linalg.yield %r, %q : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %y#0, %y#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A column sum added to an existing gradient: the start is not the identity.
// CHECK-LABEL: func.func @accumulated_bias_grad
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @accumulated_bias_grad(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %grad: tensor<16xf32>) -> tensor<16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: starts a column reduction from a value other than its identity (0 for a sum, -inf for a maximum)}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%grad : tensor<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A column sum is complete only after all rows: it cannot be scaled in the epilogue.
// CHECK-LABEL: func.func @scaled_bias_grad
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK-SAME:      -> (tensor<16xf32> [n])
// CHECK:         coda.col_reduce sum
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[G]]
func.func @scaled_bias_grad(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e16 = tensor.empty() : tensor<16xf32>
  %z16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<16xf32>) -> tensor<16xf32>
  %db = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%z16 : tensor<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads a column reduction, which is complete only after every row: it can only be an output}}
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%db : tensor<16xf32>) outs(%e16 : tensor<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %h = arith.constant 2.500000e-01 : f32
    %r = arith.mulf %x, %h : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// The relu mask saved for the backward pass is i1.
// CHECK-LABEL: func.func @relu_mask
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @relu_mask(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xi1> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %em = tensor.empty() : tensor<4x16xi1>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: its tensor of i1 is read outside the epilogue, and coda.gemm outputs are f32, bf16 or f16}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%em : tensor<4x16xi1>) {
  ^bb0(%x: f32, %o: i1):
    %r = arith.cmpf ogt, %x, %zero : f32
    linalg.yield %r : i1
  } -> tensor<4x16xi1>
  return %y : tensor<4x16xi1>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A boolean mask is no epilogue input.
// CHECK-LABEL: func.func @given_mask
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @given_mask(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %mask: tensor<4x16xi1>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads a tensor of i1; epilogue inputs are f32, bf16 or f16}}
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %mask : tensor<4x16xf32>, tensor<4x16xi1>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %m: i1, %o: f32):
    %r = arith.select %m, %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A residual stored [N, M].
// CHECK-LABEL: func.func @transposed_residual
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @transposed_residual(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %res: tensor<16x4xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: an operand is not laid out in [b, m, n] order}}
  %y = linalg.generic {indexing_maps = [#id, #tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %res : tensor<4x16xf32>, tensor<16x4xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %r0: f32, %o: f32):
    %r = arith.addf %x, %r0 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Reading the first of two stacked biases reads a slice.
// CHECK-LABEL: func.func @first_of_two_biases
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @first_of_two_biases(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %biases: tensor<2x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: an operand (tensor<2x16xf32>) is read at index 0 only along dim 0, which is not of size 1}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (0, d1)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %biases : tensor<4x16xf32>, tensor<2x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %v: f32, %o: f32):
    %r = arith.addf %x, %v : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// An operand read at a computed index.
// CHECK-LABEL: func.func @strided_operand
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @strided_operand(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %v: tensor<8xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: an operand is indexed by d1 floordiv 2; only loops, and 0 along a dim of size 1, are supported}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1 floordiv 2)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %v : tensor<4x16xf32>, tensor<8xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %w: f32, %o: f32):
    %r = arith.addf %x, %w : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// f64 arithmetic.
// CHECK-LABEL: func.func @double_precision
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @double_precision(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: computes on f64; the epilogue computes in f32}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.extf %x : f32 to f64
    %s = arith.mulf %d, %d : f64
    %r = arith.truncf %s : f64 to f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// An f64 constant in f64 arithmetic (an f64 constant only rounded to f32
// is that f32 constant: outputs.mlir).
// CHECK-LABEL: func.func @double_constant
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @double_constant(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: uses a constant of type f64; the epilogue computes in f32}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 3.000000e+00 : f64
    %w = arith.extf %x : f32 to f64
    %p = arith.mulf %w, %c : f64
    %r = arith.truncf %p : f64 to f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// An index constant.
// CHECK-LABEL: func.func @index_constant
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @index_constant(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: uses a constant that is neither a float nor a signless integer}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 3 : index
    %i = arith.index_cast %c : index to i32
    %f = arith.sitofp %i : i32 to f32
    %r = arith.mulf %x, %f : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A scale given as an f16 scalar.
// CHECK-LABEL: func.func @half_scale
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @half_scale(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: f16) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads the scalar f16 from outside; a scalar epilogue input is f32, i64 or i1}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.extf %s : f16 to f32
    %r = arith.mulf %x, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A scale read from a 0-d tensor inside the body.
// CHECK-LABEL: func.func @extract_in_body
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @extract_in_body(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %scale: tensor<f32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: computes 'tensor.extract'; an epilogue runs scalar arith and math ops}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = tensor.extract %scale[] : tensor<f32>
    %r = arith.mulf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Rounding to an fp8 type.
// CHECK-LABEL: func.func @fp8_output
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @fp8_output(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: rounds f32 to f8E4M3FN; the epilogue rounds f32 to bf16 or f16}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.truncf %x : f32 to f8E4M3FN
    %r = arith.extf %t : f8E4M3FN to f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Rounding to nearest, ties away from zero.
// CHECK-LABEL: func.func @round_away
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @round_away(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: rounds with a mode other than to-nearest-even, which is how coda.gemm writes its outputs}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x to_nearest_away : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// A row sum accumulated in bf16.
// CHECK-LABEL: func.func @bf16_row_sum
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @bf16_row_sum(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xbf16>
  %zb = arith.constant 0.000000e+00 : bf16
  %z4 = linalg.fill ins(%zb : bf16) outs(%e4 : tensor<4xbf16>) -> tensor<4xbf16>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reduces in bf16; the epilogue reduces in f32}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z4 : tensor<4xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    %r = arith.addf %t, %o : bf16
    linalg.yield %r : bf16
  } -> tensor<4xbf16>
  return %y : tensor<4xbf16>
}

// -----

// The sum of a row sum (x.sum(1).sum(0)) reduces a reduction: the row sum
// joins the epilogue, the total stays outside.
// CHECK-LABEL: func.func @sum_sum
// CHECK:         %[[G:.*]] = coda.gemm {{.*}} -> (tensor<4x{{.*}}f32> [m])
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]]
func.func @sum_sum(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<f32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z4 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: a result spans neither m nor n (it reduces a reduction)}}
  %all = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%rows : tensor<4xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %all : tensor<f32>
}

// -----

// The same with the unit dims kept (keepdim=True).
// CHECK-LABEL: func.func @sum_sum_keepdim
// CHECK:         %[[G:.*]] = coda.gemm {{.*}} -> (tensor<4x{{.*}}f32> [m])
// CHECK:         tensor.expand_shape %[[G]]
// CHECK:         linalg.generic
func.func @sum_sum_keepdim(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<1x1xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4x1xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z4 : tensor<4x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %e0 = tensor.empty() : tensor<1x1xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<1x1xf32>) -> tensor<1x1xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: a result spans neither m nor n (it reduces a reduction)}}
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%rows : tensor<4x1xf32>) outs(%z0 : tensor<1x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<1x1xf32>
  return %all : tensor<1x1xf32>
}

// -----

// A gate projection and an up projection of one input stay two GEMMs when the
// up projection's result is read elsewhere too.
// CHECK-LABEL: func.func @gated_up_read_twice
// CHECK-COUNT-2: coda.gemm
func.func @gated_up_read_twice(%x: tensor<4x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not made one gated GEMM with the product of the same A that it reads: the up projection's result is read elsewhere too}}
  %g = linalg.matmul ins(%x, %wg : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = linalg.matmul ins(%x, %wu : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = linalg.mul ins(%g, %u : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h, %u : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A bias of the gate projection spans n, which the interleaved GEMM's
// columns would not match.
// CHECK-LABEL: func.func @gated_with_bias
// CHECK-COUNT-2: coda.gemm
func.func @gated_with_bias(%x: tensor<4x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>, %bias: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not made one gated GEMM with the product of the same A that it reads: its epilogue input #0 spans n, which the interleaved GEMM's columns would not match}}
  %g = linalg.matmul ins(%x, %wg : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = linalg.matmul ins(%x, %wu : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %gb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g, %bias : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %h = linalg.mul ins(%gb, %u : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

// The up projection's result rounded to bf16 before the product: the gated
// GEMM would read it unrounded (only with low-precision-epilogue=true).
// CHECK-LABEL: func.func @gated_up_rounded
// CHECK-COUNT-2: coda.gemm
func.func @gated_up_rounded(%x: tensor<4x8xbf16>, %wg: tensor<8x16xbf16>, %wu: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not made one gated GEMM with the product of the same A that it reads: the up projection's result is rounded to bf16 before the product, which the fused epilogue would not do (low-precision-epilogue=true allows it)}}
  %g = linalg.matmul ins(%x, %wg : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = linalg.matmul ins(%x, %wu : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ub = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%u : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x16xbf16>
  %h = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g, %ub : tensor<4x16xf32>, tensor<4x16xbf16>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: bf16, %o: f32):
    %w = arith.extf %b : bf16 to f32
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

// A tensor of i1 (a compare) feeds a select in the epilogue; also returned,
// it stays outside: coda.gemm writes no i1.
// CHECK-LABEL: func.func @predicate_read_outside
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[G]]
// CHECK-SAME:      tensor<4x16xi1>
func.func @predicate_read_outside(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xi1>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %ei = tensor.empty() : tensor<4x16xi1>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: its tensor of i1 is read outside the epilogue, and coda.gemm outputs are f32, bf16 or f16}}
  %pos = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%ei : tensor<4x16xi1>) {
  ^bb0(%x: f32, %o: i1):
    %c = arith.cmpf ogt, %x, %zero : f32
    linalg.yield %c : i1
  } -> tensor<4x16xi1>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads a tensor of i1; epilogue inputs are f32, bf16 or f16}}
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%pos, %mm : tensor<4x16xi1>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: i1, %x: f32, %o: f32):
    %r = arith.select %p, %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y, %pos : tensor<4x16xf32>, tensor<4x16xi1>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// Adding the square result to its own transpose reads it along both dims in
// one loop.
// CHECK-LABEL: func.func @plus_transpose
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK:         linalg.generic
// CHECK-SAME:      %[[G]], %[[G]]
func.func @plus_transpose(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%acc : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  // expected-remark @+1 {{not fused into the coda.gemm epilogue: reads epilogue values along mismatching dims}}
  %y = linalg.generic {indexing_maps = [#id, #tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %mm : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e2 : tensor<8x8xf32>) {
  ^bb0(%x: f32, %t: f32, %o: f32):
    %r = arith.addf %x, %t : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
