// RUN: coda-opt %s --coda-raise-linalg --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-raise-linalg=explain --split-input-file -verify-diagnostics > /dev/null
// RUN: coda-opt %s --coda-raise-linalg="fold-norms=false" --split-input-file | FileCheck %s --check-prefix=KEPT

// A normalization before a product folds into it: the product reads the
// tensor before the normalization, the weights are scaled along K by the
// normalization's column factor (gamma), and its row factor (rstd) and its
// other terms apply to the accumulator. The normalized operand is not
// computed any more. With `explain`, a remark says why one is not folded.

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>

// RMSNorm(x) W^T as torch-mlir writes it: rstd [M, 1] from the mean of
// squares, x * rstd, * gamma, W transposed.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-SAME:    %[[X:.*]]: tensor<16x8xf32>, %[[W:.*]]: tensor<6x8xf32>, %[[GAMMA:.*]]: tensor<8xf32>
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[GAMMA]] : tensor<6x8xf32>, tensor<8xf32>)
// CHECK:         %[[RSTD:.*]] = tensor.collapse_shape
// CHECK:         %[[Y:.*]] = coda.gemm %[[X]], %[[SCALED]] transpose_b ins(%[[RSTD]] : tensor<16xf32> [m])
// CHECK-NEXT:    ^bb0(%[[ACC:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[R]], %[[ACC]]
// CHECK-NEXT:      coda.yield %[[P]]
// CHECK-NOT:     linalg.
// CHECK:         return %[[Y]]
// KEPT-LABEL: func.func @rmsnorm
// KEPT-SAME:    %[[X:.*]]: tensor<16x8xf32>, %[[W:.*]]: tensor<6x8xf32>, %[[GAMMA:.*]]: tensor<8xf32>
// KEPT:         %[[N:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[GAMMA]] : tensor<16x8xf32>, tensor<8xf32>)
// KEPT:         coda.gemm %[[N]], %[[W]] transpose_b : tensor<16x8xf32>, tensor<6x8xf32>
func.func @rmsnorm(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %gamma: tensor<8xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %eps = arith.constant 1.000000e-06 : f32
  %k = arith.constant 8.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %e1 = tensor.empty() : tensor<16x1xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x1xf32>) -> tensor<16x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x8xf32>) outs(%z1 : tensor<16x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %sq, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ss : tensor<16x1xf32>) outs(%e1 : tensor<16x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %mean = arith.divf %in, %k : f32
    %v = arith.addf %mean, %eps : f32
    %r = math.rsqrt %v : f32
    linalg.yield %r : f32
  } -> tensor<16x1xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled, %gamma : tensor<16x8xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %g : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %et = tensor.empty() : tensor<8x6xf32>
  %wt = linalg.transpose ins(%w : tensor<6x8xf32>) outs(%et : tensor<8x6xf32>) permutation = [1, 0]
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  %y = linalg.matmul ins(%normed, %wt : tensor<16x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// LayerNorm(x) W^T + b in one elementwise op: (x - mean) / sqrt(var + eps)
// * gamma + beta. Its terms: rstd x gamma, -mean rstd gamma and beta, so the
// epilogue takes rstd and -mean rstd along m, and W gamma and W beta along n.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME:    %[[X:[^:]*]]: tensor<32x8xf32>
// CHECK-COUNT-2: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:         coda.gemm %[[X]], %{{.*}} transpose_b ins(%{{.*}} : tensor<32xf32> [m], %{{.*}} : tensor<32xf32> [m], %{{.*}} : tensor<6xf32> [n], %{{.*}} : tensor<6xf32> [n], %{{.*}} : tensor<6xf32> [n])
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @layernorm(%x: tensor<32x8xf32>, %w: tensor<6x8xf32>, %b: tensor<6xf32>,
                     %mean: tensor<32x1xf32>, %var: tensor<32x1xf32>,
                     %gamma: tensor<8xf32>, %beta: tensor<8xf32>) -> tensor<32x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %eps = arith.constant 1.000000e-05 : f32
  %e = tensor.empty() : tensor<32x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #rows, #cols, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %var, %gamma, %beta : tensor<32x8xf32>, tensor<32x1xf32>, tensor<32x1xf32>, tensor<8xf32>, tensor<8xf32>)
      outs(%e : tensor<32x8xf32>) {
  ^bb0(%in: f32, %mu: f32, %v: f32, %g: f32, %be: f32, %out: f32):
    %c = arith.subf %in, %mu : f32
    %ve = arith.addf %v, %eps : f32
    %sd = math.sqrt %ve : f32
    %n = arith.divf %c, %sd : f32
    %s = arith.mulf %n, %g : f32
    %r = arith.addf %s, %be : f32
    linalg.yield %r : f32
  } -> tensor<32x8xf32>
  %eo = tensor.empty() : tensor<32x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<32x6xf32>) -> tensor<32x6xf32>
  %mm = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<32x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<32x6xf32>) -> tensor<32x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<32x6xf32>, tensor<6xf32>) outs(%eo : tensor<32x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  } -> tensor<32x6xf32>
  return %y : tensor<32x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// The normalized operand is also returned: it is written anyway, so the
// product keeps reading it.
// CHECK-LABEL: func.func @also_returned
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @also_returned(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>) -> (tensor<16x6xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: the normalized operand is also read by 'func.return'}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y, %normed : tensor<16x6xf32>, tensor<16x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// Fewer rows than output columns: scaling the weights would move more
// elements than writing and reading the normalized operand.
// CHECK-LABEL: func.func @few_rows
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @few_rows(%x: tensor<4x8xf32>, %w: tensor<64x8xf32>, %rstd: tensor<4x1xf32>, %gamma: tensor<8xf32>) -> tensor<4x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %gamma : tensor<4x8xf32>, tensor<4x1xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %q = arith.mulf %p, %g : f32
    linalg.yield %q : f32
  } -> tensor<4x8xf32>
  %eo = tensor.empty() : tensor<4x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-remark @+1 {{normalization not folded into the product: the weights' work it adds (1024 elements) exceeds the normalized operand's write and reads it saves (64)}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<4x8xf32>, tensor<64x8xf32>) outs(%acc : tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// An activation of the normalized value is not affine in x.
// CHECK-LABEL: func.func @activated
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @activated(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: 'math.tanh' of x is not affine in x}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// x enters twice (x * x * rstd): not affine in x.
// CHECK-LABEL: func.func @squared
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @squared(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %p = arith.mulf %sq, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: it reads the normalized tensor more than once}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A second [m, k] tensor added after the normalization is not a row or
// column term.
// CHECK-LABEL: func.func @added_tensor
// CHECK:         linalg.generic
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @added_tensor(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>, %z: tensor<16x8xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%normed, %z : tensor<16x8xf32>, tensor<16x8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: the operand reads a tensor along rows and columns other than the one it normalizes}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%sum, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// One normalized operand read by two products (a Q and a K projection),
// with a dynamic number of rows: both fold, each with its own scaled
// weights, and the operand is not computed.
// CHECK-LABEL: func.func @two_products
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x8xf32>
// CHECK:         coda.gemm %[[X]], %{{.*}} transpose_b ins(%{{.*}} : tensor<?xf32> [m]) : tensor<?x8xf32>, tensor<6x8xf32>
// CHECK:         coda.gemm %[[X]], %{{.*}} transpose_b ins(%{{.*}} : tensor<?xf32> [m]) : tensor<?x8xf32>, tensor<4x8xf32>
// CHECK-NOT:     tensor<?x8xf32>) {
func.func @two_products(%x: tensor<?x8xf32>, %wq: tensor<6x8xf32>, %wk: tensor<4x8xf32>,
                        %rstd: tensor<?x1xf32>, %gamma: tensor<8xf32>) -> (tensor<?x6xf32>, tensor<?x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %gamma : tensor<?x8xf32>, tensor<?x1xf32>, tensor<8xf32>) outs(%e : tensor<?x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %q = arith.mulf %p, %g : f32
    linalg.yield %q : f32
  } -> tensor<?x8xf32>
  %eq = tensor.empty(%m) : tensor<?x6xf32>
  %aq = linalg.fill ins(%zero : f32) outs(%eq : tensor<?x6xf32>) -> tensor<?x6xf32>
  %q = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %wq : tensor<?x8xf32>, tensor<6x8xf32>) outs(%aq : tensor<?x6xf32>) -> tensor<?x6xf32>
  %ek = tensor.empty(%m) : tensor<?x4xf32>
  %ak = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %wk : tensor<?x8xf32>, tensor<4x8xf32>) outs(%ak : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %q, %k : tensor<?x6xf32>, tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A per-row value divided by x is not affine in x.
// CHECK-LABEL: func.func @divided_by_x
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @divided_by_x(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.divf %r, %in : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: x is a divisor}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// x scaled by a per-row value plus a per-column one: that coefficient is
// not a product of a row factor and a column factor.
// CHECK-LABEL: func.func @row_plus_column_scale
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @row_plus_column_scale(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>, %gamma: tensor<8xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %gamma : tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %s = arith.addf %r, %g : f32
    %p = arith.mulf %in, %s : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: it adds or multiplies a value that varies along both rows and columns and is not x}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A product that accumulates into a given tensor: its init is not scaled
// by the normalization's row factor.
// CHECK-LABEL: func.func @accumulated
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @accumulated(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>, %c: tensor<16x6xf32>) -> tensor<16x6xf32> {
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  // expected-remark @+1 {{normalization not folded into the product: the product adds to an initial value other than zero, which the row factor would scale too}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%c : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#cols = affine_map<(d0, d1) -> (d1)>

// Linear, norm, Linear, norm, Linear: the second normalization reads the
// first folded product's result, r1 * (x W1'), and folds through it, its row
// factor r1 r2 on the plain product.
// CHECK-LABEL: func.func @chained
// CHECK-SAME:    %[[X:[^:]*]]: tensor<16x8xf32>
// CHECK:         %[[G1:.*]] = coda.gemm %[[X]], %{{.*}} : tensor<16x8xf32>, tensor<8x8xf32> -> (tensor<16x8xf32> [m, n])
// CHECK:         coda.gemm %[[G1]], %{{.*}} ins(%{{.*}} : tensor<16xf32> [m]) : tensor<16x8xf32>, tensor<8x6xf32>
func.func @chained(%x: tensor<16x8xf32>, %r1: tensor<16x1xf32>, %g1: tensor<8xf32>, %w1: tensor<8x8xf32>,
                   %r2: tensor<16x1xf32>, %g2: tensor<8xf32>, %w2: tensor<8x6xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r1, %g1 : tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %q = arith.mulf %p, %g : f32
    linalg.yield %q : f32
  } -> tensor<16x8xf32>
  %acc1 = linalg.fill ins(%zero : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y1 = linalg.matmul ins(%a1, %w1 : tensor<16x8xf32>, tensor<8x8xf32>) outs(%acc1 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %a2 = linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y1, %r2, %g2 : tensor<16x8xf32>, tensor<16x1xf32>, tensor<8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %g: f32, %out: f32):
    %p = arith.mulf %in, %r : f32
    %q = arith.mulf %p, %g : f32
    linalg.yield %q : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc2 = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  %y2 = linalg.matmul ins(%a2, %w2 : tensor<16x8xf32>, tensor<8x6xf32>) outs(%acc2 : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y2 : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A factor whose ops share operands (s^(2^30) as 30 squarings) is read and
// copied once per op, not once per path.
// CHECK-LABEL: func.func @shared_factor
// CHECK:         linalg.generic
// CHECK-COUNT-30:  arith.mulf
// CHECK-NOT:       arith.mulf
// CHECK:         coda.gemm %arg0
func.func @shared_factor(%x: tensor<16x8xf32>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>, %s: f32) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xf32>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %p0 = arith.addf %s, %r : f32
    %p1 = arith.mulf %p0, %p0 : f32
    %p2 = arith.mulf %p1, %p1 : f32
    %p3 = arith.mulf %p2, %p2 : f32
    %p4 = arith.mulf %p3, %p3 : f32
    %p5 = arith.mulf %p4, %p4 : f32
    %p6 = arith.mulf %p5, %p5 : f32
    %p7 = arith.mulf %p6, %p6 : f32
    %p8 = arith.mulf %p7, %p7 : f32
    %p9 = arith.mulf %p8, %p8 : f32
    %p10 = arith.mulf %p9, %p9 : f32
    %p11 = arith.mulf %p10, %p10 : f32
    %p12 = arith.mulf %p11, %p11 : f32
    %p13 = arith.mulf %p12, %p12 : f32
    %p14 = arith.mulf %p13, %p13 : f32
    %p15 = arith.mulf %p14, %p14 : f32
    %p16 = arith.mulf %p15, %p15 : f32
    %p17 = arith.mulf %p16, %p16 : f32
    %p18 = arith.mulf %p17, %p17 : f32
    %p19 = arith.mulf %p18, %p18 : f32
    %p20 = arith.mulf %p19, %p19 : f32
    %p21 = arith.mulf %p20, %p20 : f32
    %p22 = arith.mulf %p21, %p21 : f32
    %p23 = arith.mulf %p22, %p22 : f32
    %p24 = arith.mulf %p23, %p23 : f32
    %p25 = arith.mulf %p24, %p24 : f32
    %p26 = arith.mulf %p25, %p25 : f32
    %p27 = arith.mulf %p26, %p26 : f32
    %p28 = arith.mulf %p27, %p27 : f32
    %p29 = arith.mulf %p28, %p28 : f32
    %p30 = arith.mulf %p29, %p29 : f32
    %y = arith.divf %in, %p30 : f32
    linalg.yield %y : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0, 0)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A normalization of a bf16 tensor is left as it is: the product would read
// x rounded where the normalization reads it whole.
// CHECK-LABEL: func.func @bf16_normalized
// CHECK:         %[[N:.*]] = linalg.generic
// CHECK:         coda.gemm %[[N]]
func.func @bf16_normalized(%x: tensor<16x8xbf16>, %w: tensor<6x8xf32>, %rstd: tensor<16x1xf32>) -> tensor<16x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %normed = linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : tensor<16x8xbf16>, tensor<16x1xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: bf16, %r: f32, %out: f32):
    %w32 = arith.extf %in : bf16 to f32
    %p = arith.mulf %w32, %r : f32
    linalg.yield %p : f32
  } -> tensor<16x8xf32>
  %eo = tensor.empty() : tensor<16x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%eo : tensor<16x6xf32>) -> tensor<16x6xf32>
  // expected-remark @+1 {{normalization not folded into the product: the normalized tensor is not f32}}
  %y = linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%normed, %w : tensor<16x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<16x6xf32>) -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}
