// RUN: coda-opt %s --coda-raise-linalg | FileCheck %s

// An epilogue value that code left in linalg (or a return) also reads becomes
// an extra output of the coda.gemm: it is written once, as the un-raised
// program wrote it, and the consumers that can fuse still do.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// The pre-activation is saved for the backward pass and also goes through
// GELU: both are outputs.
// CHECK-LABEL: func.func @saved_pre_activation
// CHECK:         %[[G:.*]]:2 = coda.gemm
// CHECK-SAME:      -> (tensor<4x16xf32> [m, n], tensor<4x16xbf16> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[PRE:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:      %[[Y:.*]] = coda.activation gelu_erf %[[PRE]]
// CHECK-NEXT:      coda.yield %[[PRE]], %[[Y]] : f32, f32
// CHECK:         return %[[G]]#1, %[[G]]#0
func.func @saved_pre_activation(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %bias: tensor<16xf32>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %pre = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %v: f32, %o: f32):
    %s = arith.addf %x, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %eb = tensor.empty() : tensor<4x16xbf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<4x16xf32>) outs(%eb : tensor<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %s = arith.mulf %x, %rsqrt2 : f32
    %erf = math.erf %s : f32
    %p = arith.addf %erf, %one : f32
    %h = arith.mulf %x, %half : f32
    %r = arith.mulf %h, %p : f32
    %t = arith.truncf %r : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x16xbf16>
  return %y, %pre : tensor<4x16xbf16>, tensor<4x16xf32>
}

// The GEMM result feeds an op that cannot fuse (it reads loop indices) placed
// between two that can: the result becomes an output that op reads, and the
// fused chain goes on around it.
// CHECK-LABEL: func.func @intermediate_used_twice
// CHECK:         %[[G:.*]]:2 = coda.gemm
// CHECK-SAME:      -> (tensor<4x16xf32> [m, n], tensor<4x16xf32> [m, n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK:           %[[S:.*]] = arith.mulf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:      %[[R:.*]] = coda.activation relu %[[S]]
// CHECK-NEXT:      coda.yield %[[S]], %[[R]] : f32, f32
// CHECK:         %[[MASKED:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[G]]#0 : tensor<4x16xf32>)
// CHECK:           linalg.index
// CHECK:         return %[[G]]#1, %[[MASKED]]
func.func @intermediate_used_twice(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 1.250000e-01 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %scale : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    %r = arith.select %keep, %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %relu, %masked : tensor<4x16xf32>, tensor<4x16xf32>
}

// Only shape queries read the intermediates: they become sizes of A and B,
// and no output is added for them.
// CHECK-LABEL: func.func @shape_queries
// CHECK-SAME:    (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<8x?xf32>)
// CHECK:         %[[G:.*]] = coda.gemm
// CHECK-SAME:      -> (tensor<?x?xf32> [m, n])
// CHECK-DAG:     %[[M:.*]] = tensor.dim %[[A]], %{{.*}} : tensor<?x8xf32>
// CHECK-DAG:     %[[N:.*]] = tensor.dim %[[B]], %{{.*}} : tensor<8x?xf32>
// CHECK:         return %[[G]], %[[M]], %[[N]]
func.func @shape_queries(%a: tensor<?x8xf32>, %b: tensor<8x?xf32>) -> (tensor<?x?xf32>, index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.000000e+00 : f32
  %m = tensor.dim %a, %c0 : tensor<?x8xf32>
  %n = tensor.dim %b, %c1 : tensor<8x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x?xf32>) outs(%acc : tensor<?x?xf32>) -> tensor<?x?xf32>
  %rows = tensor.dim %mm, %c0 : tensor<?x?xf32>
  %cols = tensor.dim %mm, %c1 : tensor<?x?xf32>
  %e2 = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.tanh %x : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %y, %rows, %cols : tensor<?x?xf32>, index, index
}

// A row reduction returned keepdim as [M, 1] and a column sum as [N]: outputs
// spanning [m] and [n].
// CHECK-LABEL: func.func @reductions_as_outputs
// CHECK:         %[[G:.*]]:3 = coda.gemm
// CHECK-SAME:      -> (tensor<4x16xf32> [m, n], tensor<4xf32> [m], tensor<16xf32> [n]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[MAX:.*]] = coda.row_reduce max %[[ACC]]
// CHECK-NEXT:      %[[SUM:.*]] = coda.col_reduce sum %[[ACC]]
// CHECK-NEXT:      coda.yield %[[ACC]], %[[MAX]], %[[SUM]] : f32, f32, f32
// CHECK:         %[[MAX2D:.*]] = tensor.expand_shape %[[G]]#1 {{\[\[}}0, 1]] output_shape [4, 1]
// CHECK:         return %[[G]]#0, %[[MAX2D]], %[[G]]#2
func.func @reductions_as_outputs(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x1xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ek = tensor.empty() : tensor<4x1xf32>
  %mk = linalg.fill ins(%ninf : f32) outs(%ek : tensor<4x1xf32>) -> tensor<4x1xf32>
  %max = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%mk : tensor<4x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  %sum = linalg.reduce ins(%mm : tensor<4x16xf32>) outs(%zc : tensor<16xf32>) dimensions = [0]
    (%x: f32, %o: f32) {
      %r = arith.addf %x, %o : f32
      linalg.yield %r : f32
    }
  return %mm, %max, %sum : tensor<4x16xf32>, tensor<4x1xf32>, tensor<16xf32>
}

// A row sum that starts from a bias per row adds it after reducing.
// CHECK-LABEL: func.func @row_sum_from_init
// CHECK-SAME:    %[[INIT:[a-z0-9]+]]: tensor<4xf32>)
// CHECK:         coda.gemm %{{.*}}, %{{.*}} ins(%[[INIT]] : tensor<4xf32> [m])
// CHECK-SAME:      -> (tensor<4xf32> [m]) {
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[I:.*]]: f32):
// CHECK-NEXT:      %[[SUM:.*]] = coda.row_reduce sum %[[ACC]]
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[I]], %[[SUM]] : f32
// CHECK-NEXT:      coda.yield %[[R]] : f32
func.func @row_sum_from_init(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %sum = linalg.reduce ins(%mm : tensor<4x16xf32>) outs(%init : tensor<4xf32>) dimensions = [1]
    (%x: f32, %o: f32) {
      %r = arith.addf %x, %o : f32
      linalg.yield %r : f32
    }
  return %sum : tensor<4xf32>
}

// A tensor of i1 that only the epilogue reads (a compare, then a select, as
// StableHLO's erfc expansion writes them) is computed in it and written
// nowhere.
// CHECK-LABEL: func.func @predicate_inside
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK:           %[[C:.*]] = arith.cmpf ogt
// CHECK:           arith.select %[[C]]
// CHECK-NOT:     linalg.
func.func @predicate_inside(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %ei = tensor.empty() : tensor<4x16xi1>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %pos = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%ei : tensor<4x16xi1>) {
  ^bb0(%x: f32, %o: i1):
    %c = arith.cmpf ogt, %x, %zero : f32
    linalg.yield %c : i1
  } -> tensor<4x16xi1>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%pos, %mm : tensor<4x16xi1>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: i1, %x: f32, %o: f32):
    %s = arith.mulf %x, %x : f32
    %r = arith.select %p, %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A row mean kept as [M, 1] and read through a tensor.collapse_shape, an
// epsilon given in f64 and rounded in the body (torch-mlir's LayerNorm), and
// a predicate computed outside (JAX's variance guard) all run in the
// epilogue: the reshape is read through, the epsilon is its f32 constant,
// the i1 scalar goes in as an i64.
// CHECK-LABEL: func.func @keepdim_statistics
// CHECK-NOT:     linalg.
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         %[[GUARD:.*]] = arith.extui %{{.*}} : i1 to i64
// CHECK:         coda.gemm %{{.*}}, %{{.*}} ins(%[[GUARD]] : i64) : tensor<4x8xf32>, tensor<8x16xf32> -> (tensor<4x16xf32> [m, n])
// CHECK:           %[[MEAN:.*]] = coda.row_reduce sum
// CHECK:           arith.constant 9.99999974E-6 : f32
// CHECK:           arith.trunci %{{.*}} : i64 to i1
// CHECK-NOT:     linalg.
func.func @keepdim_statistics(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %flag: i1) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %eps = arith.constant 1.000000e-05 : f64
  %e = tensor.empty() : tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%z1 : tensor<4x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<4x1xf32>
  %flat = tensor.collapse_shape %sum [[0, 1]] : tensor<4x1xf32> into tensor<4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %flat : tensor<4x16xf32>, tensor<4xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    %t = arith.truncf %eps : f64 to f32
    %r = arith.addf %d, %t : f32
    %k = arith.select %flag, %r, %d : f32
    linalg.yield %k : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// Scalars computed from constants in single-element tensors (JAX's variance:
// N - ddof from the constant ddof, and its N - ddof > 0 guard) are folded
// before the raising: the epilogue divides by the constant and selects on a
// constant, with no scalar inputs and nothing left outside it.
// CHECK-LABEL: func.func @constant_scalars
// CHECK-NOT:     linalg.
// CHECK-NOT:     tensor.extract
// CHECK:         coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> (tensor<4x16xf32> [m, n])
// CHECK:           arith.constant 1.600000e+01 : f32
// CHECK:           arith.constant true
// CHECK-NOT:     linalg.
// CHECK-NOT:     arith.constant dense
func.func @constant_scalars(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %n = arith.constant 1.600000e+01 : f32
  %ddof = arith.constant dense<0> : tensor<i32>
  %e = tensor.empty() : tensor<4x16xf32>
  %e0 = tensor.empty() : tensor<f32>
  %b0 = tensor.empty() : tensor<i1>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ddof_f = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%ddof : tensor<i32>) outs(%e0 : tensor<f32>) {
  ^bb0(%i: i32, %o: f32):
    %f = arith.sitofp %i : i32 to f32
    linalg.yield %f : f32
  } -> tensor<f32>
  %count = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%ddof_f : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%d: f32, %o: f32):
    %c = arith.subf %n, %d : f32
    linalg.yield %c : f32
  } -> tensor<f32>
  %guard = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%count : tensor<f32>) outs(%b0 : tensor<i1>) {
  ^bb0(%c: f32, %o: i1):
    %g = arith.cmpf ogt, %c, %zero : f32
    linalg.yield %g : i1
  } -> tensor<i1>
  %c_s = tensor.extract %count[] : tensor<f32>
  %g_s = tensor.extract %guard[] : tensor<i1>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.divf %x, %c_s : f32
    %k = arith.select %g_s, %q, %x : f32
    linalg.yield %k : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A reduction with a second result that nothing reads (torch's max.dim:
// the maximum and its index, from linalg.index): the index is not computed,
// and the maximum fuses.
// CHECK-LABEL: func.func @unread_index
// CHECK-NOT:     linalg.
// CHECK:         coda.gemm
// CHECK:           %[[MAX:.*]] = coda.row_reduce max
// CHECK:           arith.subf %{{.*}}, %[[MAX]]
// CHECK-NOT:     linalg.
func.func @unread_index(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ev = tensor.empty() : tensor<4xf32>
  %ei = tensor.empty() : tensor<4xi64>
  %v0 = linalg.fill ins(%ninf : f32) outs(%ev : tensor<4xf32>) -> tensor<4xf32>
  %i0 = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<4x16xf32>) outs(%v0, %i0 : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%x: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %n = arith.maximumf %x, %m : f32
    %gt = arith.cmpf ogt, %x, %m : f32
    %k = arith.select %gt, %ji, %i : i64
    linalg.yield %n, %k : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %max#0 : tensor<4x16xf32>, tensor<4xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
