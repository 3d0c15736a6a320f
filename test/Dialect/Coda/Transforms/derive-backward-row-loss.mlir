// RUN: coda-opt %s --coda-derive-backward | FileCheck %s
// RUN: not coda-opt %s --coda-derive-backward=accumulator=saved 2>&1 | FileCheck %s --check-prefix=SAVED

// A loss over rows: every output spans [m], so the [m] outputs take
// gradients (grad_lse, grad_picked: each row's total, not one per element).
// A cross-entropy's log-sum-exp, shifted by its row's maximum (detached: the
// shift does not change the result, so no gradient flows through it), and
// the logit of the row's class (detached: a class index takes no gradient).
// The backward recomputes the GEMM and reads the forward's row reductions
// from @f_saving (saved_row0, saved_row1: the maximum and the sum of
// exponentials; not the picked logit's sum, whose value the gradient does not
// read) instead of reducing its rows again: its epilogue is
// elementwise, the logits' gradient grad_picked * onehot + grad_lse / sum *
// exp(acc - max) = grad_lse * softmax, with no row reduction (a row sum
// hands each element the row's total as it is).
// CHECK-LABEL: func.func @cross_entropy_saving
// CHECK-SAME:    -> (tensor<?xf32> {coda.name = "lse"}, tensor<?xf32> {coda.name = "picked"}, tensor<?xf32> {coda.name = "saved_row0"}, tensor<?xf32> {coda.name = "saved_row1"})
// CHECK:         %[[MAX:.*]] = coda.row_reduce max
// CHECK:         %[[SUM:.*]] = coda.row_reduce sum
// CHECK:         %[[PICKED:.*]] = coda.row_reduce sum
// CHECK:         coda.yield %{{.*}}, %[[PICKED]], %[[MAX]], %[[SUM]] :
// CHECK-LABEL: func.func @cross_entropy_backward
// CHECK-SAME:    %{{.*}}: tensor<?xf32> {coda.name = "target"}, %{{.*}}: tensor<?xf32> {coda.name = "saved_row0"}, %{{.*}}: tensor<?xf32> {coda.name = "saved_row1"}, %{{.*}}: tensor<?xf32> {coda.name = "grad_lse"}, %{{.*}}: tensor<?xf32> {coda.name = "grad_picked"})
// CHECK-SAME:    -> (tensor<?x?xbf16> {coda.name = "grad_acc"}, tensor<?xf32> {coda.name = "grad_target"})
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[T:.*]]: f32, %[[RMAX:.*]]: f32, %[[RSUM:.*]]: f32, %[[GLSE:.*]]: f32, %[[GPICKED:.*]]: f32):
// CHECK-NOT:       coda.row_reduce
// CHECK:           %[[SHIFT:.*]] = coda.detach %[[RMAX]]
// CHECK:           %[[D:.*]] = arith.subf %[[ACC]], %[[SHIFT]]
// CHECK:           %[[E:.*]] = math.exp %[[D]]
// CHECK:           %[[ONEHOT:.*]] = arith.maximumf
// CHECK:           %[[GP:.*]] = arith.mulf %[[GPICKED]], %[[ONEHOT]]
// CHECK:           %[[SCALE:.*]] = arith.divf %[[GLSE]], %[[RSUM]]
// CHECK:           %[[GE:.*]] = arith.mulf %[[SCALE]], %[[E]]
// CHECK:           %[[GRAD:.*]] = arith.addf %[[GP]], %[[GE]]
// CHECK-NOT:       coda.row_reduce
// CHECK:           coda.yield %[[GRAD]], %{{.*}} : f32, f32

// SAVED: error: 'coda.gemm' op cannot be differentiated with a saved accumulator: it has no [m, n] output whose gradient a GEMM could produce; a loss over rows (only [m] and [n] outputs) recomputes its GEMM (accumulator=recompute)
func.func @cross_entropy(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %target: tensor<?xf32> {coda.name = "target"}) -> (tensor<?xf32> {coda.name = "lse"}, tensor<?xf32> {coda.name = "picked"}) {
  %0:2 = coda.gemm %x, %w transpose_b ins(%target : tensor<?xf32> [m]) : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?xf32> [m], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %t: f32):
    %max = coda.row_reduce max %acc
    %shift = coda.detach %max
    %d = arith.subf %acc, %shift : f32
    %e = math.exp %d : f32
    %sum = coda.row_reduce sum %e
    %log = math.log %sum : f32
    %lse = arith.addf %shift, %log : f32
    %zero = arith.constant 0.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %col = coda.coord n
    %class = coda.detach %t
    %off = arith.subf %col, %class : f32
    %distance = math.absf %off : f32
    %near = arith.subf %one, %distance : f32
    %onehot = arith.maximumf %zero, %near : f32
    %logit = arith.mulf %acc, %onehot : f32
    %picked = coda.row_reduce sum %logit
    coda.yield %lse, %picked : f32, f32
  }
  return %0#0, %0#1 : tensor<?xf32>, tensor<?xf32>
}
