// RUN: coda-opt %s --coda-derive-backward -split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward=accumulator=saved -split-input-file | FileCheck %s --check-prefix=SAVED
// RUN: coda-opt %s --coda-derive-backward="accumulator=saved next-weight=nk" -split-input-file | FileCheck %s --check-prefix=SAVED-NK

// Recompute (the default): @f_backward runs the forward GEMM again, takes the
// gradient of the [m, n] output as an input and returns the gradient of the
// accumulator and of the [n] bias, the bias's summed over m. GELU's backward
// multiplies the incoming gradient by its derivative at the recomputed
// pre-activation (coda.activation_derivative, which each target builds from
// the activation's own primitives); the forward activation itself is not
// needed.
// CHECK-LABEL: func.func @bias_gelu_backward
// CHECK-SAME:    (%[[A:[a-z0-9_]+]]: tensor<?x768xbf16>, %[[B:[a-z0-9_]+]]: tensor<3072x768xbf16>,
// CHECK-SAME:     %[[BIAS:[a-z0-9_]+]]: tensor<3072xf32> {coda.name = "bias"},
// CHECK-SAME:     %[[GRAD:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "grad_output"})
// CHECK-SAME:    -> (tensor<?x3072xbf16> {coda.name = "grad_acc"}, tensor<3072xf32> {coda.name = "grad_bias"})
// CHECK:         %[[R:.*]]:2 = coda.gemm %[[A]], %[[B]] transpose_b
// CHECK-SAME:      ins(%[[BIAS]] : tensor<3072xf32> [n], %[[GRAD]] : tensor<?x3072xbf16> [m, n])
// CHECK-SAME:      : tensor<?x768xbf16>, tensor<3072x768xbf16>
// CHECK-SAME:      -> (tensor<?x3072xbf16> [m, n], tensor<3072xf32> [n])
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[BV:.*]]: f32, %[[G:.*]]: f32):
// CHECK:           %[[PRE:.*]] = arith.addf %[[ACC]], %[[BV]] : f32
// CHECK-NOT:       coda.activation gelu_tanh
// CHECK:           %[[D:.*]] = coda.activation_derivative gelu_tanh %[[PRE]]
// CHECK-NEXT:      %[[DPRE:.*]] = arith.mulf %[[G]], %[[D]] : f32
// CHECK-NEXT:      %[[DBIAS:.*]] = coda.col_reduce sum %[[DPRE]]
// CHECK-NEXT:      coda.yield %[[DPRE]], %[[DBIAS]] : f32, f32
// CHECK:         return %[[R]]#0, %[[R]]#1 : tensor<?x3072xbf16>, tensor<3072xf32>
// CHECK-LABEL: func.func @bias_gelu_grad_a
// CHECK-LABEL: func.func @bias_gelu_grad_b
func.func @bias_gelu(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                     %bias: tensor<3072xf32> {coda.name = "bias"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b ins(%bias : tensor<3072xf32> [n])
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %1 = arith.addf %acc, %b : f32
    %2 = coda.activation gelu_tanh %1
    coda.yield %2 : f32
  }
  return %0 : tensor<?x3072xbf16>
}

// -----

// Dropout's backward applies the forward's mask (the same seed, p and
// stream) to the incoming gradient; the residual's gradient (in the
// residual's type) is the incoming gradient, and the seed takes none.
// CHECK-LABEL: func.func @dropout_residual_backward
// CHECK-SAME:    (%{{[a-z0-9_]+}}: tensor<?x768xbf16>, %{{[a-z0-9_]+}}: tensor<3072x768xbf16>,
// CHECK-SAME:     %[[RES:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "residual"},
// CHECK-SAME:     %[[SEED:[a-z0-9_]+]]: i64 {coda.name = "seed"},
// CHECK-SAME:     %[[GRAD:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "grad_output"})
// CHECK-SAME:    -> (tensor<?x3072xbf16> {coda.name = "grad_acc"}, tensor<?x3072xbf16> {coda.name = "grad_residual"})
// CHECK:         coda.gemm
// CHECK-SAME:      ins(%[[RES]] : tensor<?x3072xbf16> [m, n], %[[SEED]] : i64, %[[GRAD]] : tensor<?x3072xbf16> [m, n])
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[R:.*]]: f32, %[[SD:.*]]: i64, %[[G:.*]]: f32):
// CHECK-NOT:       coda.dropout %[[ACC]]
// CHECK:           %[[DACC:.*]] = coda.dropout %[[G]], %[[SD]] {p = 2.500000e-01 : f32, stream = 3 : i32}
// CHECK-NEXT:      coda.yield %[[DACC]], %[[G]] : f32, f32
func.func @dropout_residual(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                            %res: tensor<?x3072xbf16> {coda.name = "residual"},
                            %seed: i64 {coda.name = "seed"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b ins(%res : tensor<?x3072xbf16> [m, n], %seed : i64)
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %r: f32, %sd: i64):
    %1 = coda.dropout %acc, %sd {p = 0.25 : f32, stream = 3 : i32}
    %2 = arith.addf %1, %r : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<?x3072xbf16>
}

// -----

// A per-row [m] scale's gradient is the row sum of its adjoint, an f32 [m]
// output.
// CHECK-LABEL: func.func @row_scale_backward
// CHECK-SAME:    %[[SCALE:[a-z0-9_]+]]: tensor<512xf32> {coda.name = "scale"}
// CHECK-SAME:    %[[GRAD:[a-z0-9_]+]]: tensor<512x3072xbf16> {coda.name = "grad_output"}
// CHECK-SAME:    -> (tensor<512x3072xbf16> {coda.name = "grad_acc"}, tensor<512xf32> {coda.name = "grad_scale"})
// CHECK:         coda.gemm
// CHECK-SAME:      -> (tensor<512x3072xbf16> [m, n], tensor<512xf32> [m])
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[S:.*]]: f32, %[[G:.*]]: f32):
// CHECK-DAG:       %[[DACC:.*]] = arith.mulf %[[G]], %[[S]] : f32
// CHECK-DAG:       %[[DS:.*]] = arith.mulf %[[G]], %[[ACC]] : f32
// CHECK:           %[[DSCALE:.*]] = coda.row_reduce sum %[[DS]]
// CHECK-NEXT:      coda.yield %[[DACC]], %[[DSCALE]] : f32, f32
func.func @row_scale(%x: tensor<512x768xbf16>, %w: tensor<3072x768xbf16>,
                     %scale: tensor<512xf32> {coda.name = "scale"})
    -> (tensor<512x3072xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b ins(%scale : tensor<512xf32> [m])
      : tensor<512x768xbf16>, tensor<3072x768xbf16> -> (tensor<512x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %s: f32):
    %1 = arith.mulf %acc, %s : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<512x3072xbf16>
}

// -----

// A row reduction's adjoint is a row reduction again: y = x - mean(x) gives
// grad_x = g - mean(g). The [m] output (the row mean) takes no gradient.
// CHECK-LABEL: func.func @center_backward
// CHECK-SAME:    (%{{[a-z0-9_]+}}: tensor<?x768xbf16>, %{{[a-z0-9_]+}}: tensor<768x3072xbf16>,
// CHECK-SAME:     %{{[a-z0-9_]+}}: tensor<?x3072xf32> {coda.name = "grad_output"})
// CHECK-SAME:    -> (tensor<?x3072xbf16> {coda.name = "grad_acc"}) attributes {coda.derived_from = @center} {
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[G:.*]]: f32):
// CHECK:           %[[NEG:.*]] = arith.negf %[[G]] : f32
// CHECK:           %[[MEAN:.*]] = coda.row_reduce mean %[[NEG]]
// CHECK:           %[[DACC:.*]] = arith.addf %[[G]], %[[MEAN]] : f32
// CHECK-NEXT:      coda.yield %[[DACC]] : f32
func.func @center(%x: tensor<?x768xbf16>, %w: tensor<768x3072xbf16>)
    -> (tensor<?x3072xf32> {coda.name = "output"}, tensor<?xf32> {coda.name = "mean"}) {
  %0, %1 = coda.gemm %x, %w
      : tensor<?x768xbf16>, tensor<768x3072xbf16> -> (tensor<?x3072xf32> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %mu = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mu : f32
    coda.yield %d, %mu : f32, f32
  }
  return %0, %1 : tensor<?x3072xf32>, tensor<?xf32>
}

// -----

// A group reduction's adjoint is the same group reduction of the gradient:
// y = x - group_mean(x, 64) gives grad_x = g - group_mean(g, 64).
// CHECK-LABEL: func.func @head_center_backward
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %[[G:.*]]: f32):
// CHECK:           %[[NEG:.*]] = arith.negf %[[G]] : f32
// CHECK:           %[[MEAN:.*]] = coda.group_reduce mean %[[NEG]] width 64
// CHECK:           %[[DACC:.*]] = arith.addf %[[G]], %[[MEAN]] : f32
// CHECK-NEXT:      coda.yield %[[DACC]] : f32
func.func @head_center(%x: tensor<?x768xbf16>, %w: tensor<768x3072xbf16>)
    -> (tensor<?x3072xf32> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w
      : tensor<?x768xbf16>, tensor<768x3072xbf16> -> (tensor<?x3072xf32> [m, n]) {
  ^bb0(%acc: f32):
    %mu = coda.group_reduce mean %acc width 64
    %d = arith.subf %acc, %mu : f32
    coda.yield %d : f32
  }
  return %0 : tensor<?x3072xf32>
}

// -----

// Rounding (coda.round) passes the gradient through, as PyTorch's casts do:
// y = bf16(acc) * 3 gives grad_acc = 3 g, with no rounding in the backward.
// CHECK-LABEL: func.func @rounded_backward
// CHECK:         ^bb0(%{{.*}}: f32, %[[G:.*]]: f32):
// CHECK-NOT:       coda.round
// CHECK:           %[[D:.*]] = arith.mulf %[[G]], %{{.*}} : f32
// CHECK-NOT:       coda.round
// CHECK:           coda.yield %[[D]] : f32
func.func @rounded(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>)
    -> (tensor<?x256xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %r = coda.round %acc to bf16
    %c = arith.constant 3.0 : f32
    %y = arith.mulf %r, %c : f32
    coda.yield %y : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// Outputs that span [m] (row statistics) take no gradient: an op without a
// derivative that only they read is not differentiated, and is dropped from
// the backward with everything else no gradient needs.
// CHECK-LABEL: func.func @statistic_backward
// CHECK-SAME:    %{{[a-z0-9_]+}}: tensor<?x256xbf16> {coda.name = "grad_result0"})
// CHECK-SAME:    -> (tensor<?x256xbf16> {coda.name = "grad_acc"})
// CHECK:         ^bb0(%{{.*}}: f32, %[[G:.*]]: f32):
// CHECK-NEXT:      coda.yield %[[G]] : f32
func.func @statistic(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>)
    -> (tensor<?x256xbf16>, tensor<?xf32>) {
  %0, %1 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %s = math.sin %acc : f32
    %r = coda.row_reduce max %s
    coda.yield %acc, %r : f32, f32
  }
  return %0, %1 : tensor<?x256xbf16>, tensor<?xf32>
}

// -----

// Operand gradients in the layouts A and B are stored in (M = 128, N = 256,
// K = 64): grad_a in A's shape and type, grad_b in B's shape and type.

// A [M, K], B [K, N]: grad_a = grad_acc B^T, grad_b = A^T grad_acc.
// CHECK-LABEL: func.func @nn_grad_a
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"}, %[[B:[a-z0-9_]+]]: tensor<64x256xbf16> {coda.name = "b"})
// CHECK-SAME:    -> (tensor<128x64xbf16> {coda.name = "grad_a"})
// CHECK:         coda.gemm %[[GACC]], %[[B]] transpose_b :
// CHECK-SAME:      -> (tensor<128x64xbf16> [m, n])
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      coda.yield %[[ACC]] : f32
// CHECK-LABEL: func.func @nn_grad_b
// CHECK-SAME:    (%[[A:[a-z0-9_]+]]: tensor<128x64xbf16> {coda.name = "a"}, %[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"})
// CHECK-SAME:    -> (tensor<64x256xbf16> {coda.name = "grad_b"})
// CHECK:         coda.gemm %[[A]], %[[GACC]] transpose_a :
// CHECK-SAME:      -> (tensor<64x256xbf16> [m, n])
// CHECK:         ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:      coda.yield %[[ACC]] : f32
func.func @nn(%a: tensor<128x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<128x256xbf16> {
  %0 = coda.gemm %a, %b : tensor<128x64xbf16>, tensor<64x256xbf16> -> (tensor<128x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<128x256xbf16>
}

// -----

// A [M, K], B [N, K]: grad_a = grad_acc B, grad_b = grad_acc^T A.
// CHECK-LABEL: func.func @nt_grad_a
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"}, %[[B:[a-z0-9_]+]]: tensor<256x64xbf16> {coda.name = "b"})
// CHECK-SAME:    -> (tensor<128x64xbf16> {coda.name = "grad_a"})
// CHECK:         coda.gemm %[[GACC]], %[[B]] :
// CHECK-SAME:      -> (tensor<128x64xbf16> [m, n])
// CHECK-LABEL: func.func @nt_grad_b
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"}, %[[A:[a-z0-9_]+]]: tensor<128x64xbf16> {coda.name = "a"})
// CHECK-SAME:    -> (tensor<256x64xbf16> {coda.name = "grad_b"})
// CHECK:         coda.gemm %[[GACC]], %[[A]] transpose_a :
// CHECK-SAME:      -> (tensor<256x64xbf16> [m, n])
func.func @nt(%a: tensor<128x64xbf16>, %b: tensor<256x64xbf16>) -> tensor<128x256xbf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<128x64xbf16>, tensor<256x64xbf16> -> (tensor<128x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<128x256xbf16>
}

// -----

// A [K, M], B [K, N]: grad_a = B grad_acc^T, grad_b = A grad_acc.
// CHECK-LABEL: func.func @tn_grad_a
// CHECK-SAME:    (%[[B:[a-z0-9_]+]]: tensor<64x256xbf16> {coda.name = "b"}, %[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"})
// CHECK-SAME:    -> (tensor<64x128xbf16> {coda.name = "grad_a"})
// CHECK:         coda.gemm %[[B]], %[[GACC]] transpose_b :
// CHECK-SAME:      -> (tensor<64x128xbf16> [m, n])
// CHECK-LABEL: func.func @tn_grad_b
// CHECK-SAME:    (%[[A:[a-z0-9_]+]]: tensor<64x128xbf16> {coda.name = "a"}, %[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"})
// CHECK-SAME:    -> (tensor<64x256xbf16> {coda.name = "grad_b"})
// CHECK:         coda.gemm %[[A]], %[[GACC]] :
// CHECK-SAME:      -> (tensor<64x256xbf16> [m, n])
func.func @tn(%a: tensor<64x128xbf16>, %b: tensor<64x256xbf16>) -> tensor<128x256xbf16> {
  %0 = coda.gemm %a, %b transpose_a : tensor<64x128xbf16>, tensor<64x256xbf16> -> (tensor<128x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<128x256xbf16>
}

// -----

// A [K, M], B [N, K]: grad_a = B^T grad_acc^T, grad_b = grad_acc^T A^T.
// CHECK-LABEL: func.func @tt_grad_a
// CHECK-SAME:    (%[[B:[a-z0-9_]+]]: tensor<256x64xbf16> {coda.name = "b"}, %[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"})
// CHECK-SAME:    -> (tensor<64x128xbf16> {coda.name = "grad_a"})
// CHECK:         coda.gemm %[[B]], %[[GACC]] transpose_a transpose_b :
// CHECK-SAME:      -> (tensor<64x128xbf16> [m, n])
// CHECK-LABEL: func.func @tt_grad_b
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<128x256xbf16> {coda.name = "grad_acc"}, %[[A:[a-z0-9_]+]]: tensor<64x128xbf16> {coda.name = "a"})
// CHECK-SAME:    -> (tensor<256x64xbf16> {coda.name = "grad_b"})
// CHECK:         coda.gemm %[[GACC]], %[[A]] transpose_a transpose_b :
// CHECK-SAME:      -> (tensor<256x64xbf16> [m, n])
func.func @tt(%a: tensor<64x128xbf16>, %b: tensor<256x64xbf16>) -> tensor<128x256xbf16> {
  %0 = coda.gemm %a, %b transpose_a transpose_b : tensor<64x128xbf16>, tensor<256x64xbf16> -> (tensor<128x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<128x256xbf16>
}

// -----

// accumulator=saved: @layer_saving is the forward that also writes its
// accumulator (in the operand type); @layer_backward_saved runs on the
// accumulator of dY [M, ?] * W_next [?, N] (no transposes), the gradient of
// the first [m, n] output, which it rounds to that output's type (bf16) as
// the gradient arrives in PyTorch, and recomputes the forward epilogue from
// saved_acc. The gradient of the other [m, n] output is an input.
// SAVED-LABEL: func.func @layer_saving
// SAVED-SAME:    (%[[X:[a-z0-9_]+]]: tensor<?x768xbf16>, %[[W:[a-z0-9_]+]]: tensor<3072x768xbf16>, %[[BIAS:[a-z0-9_]+]]: tensor<3072xf32> {coda.name = "bias"})
// SAVED-SAME:    -> (tensor<?x3072xbf16> {coda.name = "output"}, tensor<?x3072xf32> {coda.name = "pre"}, tensor<?x3072xbf16> {coda.name = "saved_acc"})
// SAVED:         coda.gemm %[[X]], %[[W]] transpose_b ins(%[[BIAS]] : tensor<3072xf32> [n])
// SAVED-SAME:      -> (tensor<?x3072xbf16> [m, n], tensor<?x3072xf32> [m, n], tensor<?x3072xbf16> [m, n])
// SAVED:         ^bb0(%[[ACC:.*]]: f32, %[[BV:.*]]: f32):
// SAVED:           %[[PRE:.*]] = arith.addf %[[ACC]], %[[BV]] : f32
// SAVED:           %[[OUT:.*]] = coda.activation gelu_tanh %[[PRE]]
// SAVED:           coda.yield %[[OUT]], %[[PRE]], %[[ACC]] : f32, f32, f32
// SAVED-LABEL: func.func @layer_backward_saved
// SAVED-SAME:    (%[[DY:[a-z0-9_]+]]: tensor<?x?xbf16>, %[[WN:[a-z0-9_]+]]: tensor<?x3072xbf16>,
// SAVED-SAME:     %[[BIAS:[a-z0-9_]+]]: tensor<3072xf32> {coda.name = "bias"},
// SAVED-SAME:     %[[SAVED:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "saved_acc"},
// SAVED-SAME:     %[[GPRE:[a-z0-9_]+]]: tensor<?x3072xf32> {coda.name = "grad_pre"})
// SAVED-SAME:    -> (tensor<?x3072xbf16> {coda.name = "grad_acc"}, tensor<3072xf32> {coda.name = "grad_bias"})
// SAVED:         coda.gemm %[[DY]], %[[WN]] ins(%[[BIAS]] : tensor<3072xf32> [n], %[[SAVED]] : tensor<?x3072xbf16> [m, n], %[[GPRE]] : tensor<?x3072xf32> [m, n])
// SAVED-SAME:      : tensor<?x?xbf16>, tensor<?x3072xbf16>
// SAVED-SAME:      -> (tensor<?x3072xbf16> [m, n], tensor<3072xf32> [n])
// SAVED:         ^bb0(%[[GACC:.*]]: f32, %[[BV:.*]]: f32, %[[SACC:.*]]: f32, %[[GP:.*]]: f32):
// SAVED-NEXT:      %[[GOUT:.*]] = coda.round %[[GACC]] to bf16
// SAVED:           %[[PRE:.*]] = arith.addf %[[SACC]], %[[BV]] : f32
// SAVED:           %[[T:.*]] = arith.mulf %[[GOUT]], %{{.*}} : f32
// SAVED-NEXT:      %[[DPRE:.*]] = arith.addf %[[GP]], %[[T]] : f32
// SAVED-NEXT:      %[[DBIAS:.*]] = coda.col_reduce sum %[[DPRE]]
// SAVED-NEXT:      coda.yield %[[DPRE]], %[[DBIAS]] : f32, f32
// With the next layer's weight stored [N, K] (Hugging Face's Conv1D stores
// its weight [in, out]), the program reads it so, transposed.
// SAVED-NK-LABEL: func.func @layer_backward_saved_nk
// SAVED-NK-SAME:    (%[[DY:[a-z0-9_]+]]: tensor<?x?xbf16>, %[[WN:[a-z0-9_]+]]: tensor<3072x?xbf16>,
// SAVED-NK:         coda.gemm %[[DY]], %[[WN]] transpose_b ins(
// SAVED-NK-SAME:      : tensor<?x?xbf16>, tensor<3072x?xbf16>
// SAVED-NK-NOT:   func.func @layer_backward_saved(
// Where no GEMM produces the output's gradient, the same epilogue gradient
// from the saved accumulator, every output's gradient an input: the GEMM's
// operands are the forward's, and its accumulator is not read.
// SAVED-LABEL: func.func @layer_backward_from_saved
// SAVED-SAME:    (%[[X:[a-z0-9_]+]]: tensor<?x768xbf16>, %[[W:[a-z0-9_]+]]: tensor<3072x768xbf16>,
// SAVED-SAME:     %[[BIAS:[a-z0-9_]+]]: tensor<3072xf32> {coda.name = "bias"},
// SAVED-SAME:     %[[SAVED:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "saved_acc"},
// SAVED-SAME:     %[[GOUT:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "grad_output"},
// SAVED-SAME:     %[[GPRE:[a-z0-9_]+]]: tensor<?x3072xf32> {coda.name = "grad_pre"})
// SAVED-SAME:    -> (tensor<?x3072xbf16> {coda.name = "grad_acc"}, tensor<3072xf32> {coda.name = "grad_bias"})
// SAVED:         coda.gemm %[[X]], %[[W]] transpose_b ins(%[[BIAS]] : tensor<3072xf32> [n], %[[SAVED]] : tensor<?x3072xbf16> [m, n], %[[GOUT]] : tensor<?x3072xbf16> [m, n], %[[GPRE]] : tensor<?x3072xf32> [m, n])
// SAVED:         ^bb0(%[[ACC:.*]]: f32, %[[BV:.*]]: f32, %[[SACC:.*]]: f32, %[[G:.*]]: f32, %[[GP:.*]]: f32):
// SAVED-NOT:       %[[ACC]]
// SAVED:           %[[PRE:.*]] = arith.addf %[[SACC]], %[[BV]] : f32
// SAVED-NOT:       %[[ACC]]
// SAVED:           coda.col_reduce sum
// SAVED-LABEL: func.func @layer_grad_a
// SAVED-LABEL: func.func @layer_grad_b

// In recompute mode, the gradients of both [m, n] outputs are inputs.
// CHECK-LABEL: func.func @layer_backward
// CHECK-SAME:    %{{[a-z0-9_]+}}: tensor<?x3072xbf16> {coda.name = "grad_output"}, %{{[a-z0-9_]+}}: tensor<?x3072xf32> {coda.name = "grad_pre"})
func.func @layer(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
                 %bias: tensor<3072xf32> {coda.name = "bias"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}, tensor<?x3072xf32> {coda.name = "pre"}) {
  %0, %1 = coda.gemm %x, %w transpose_b ins(%bias : tensor<3072xf32> [n])
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n], tensor<?x3072xf32> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %2 = arith.addf %acc, %b : f32
    %3 = coda.activation gelu_tanh %2
    coda.yield %3, %2 : f32, f32
  }
  return %0, %1 : tensor<?x3072xbf16>, tensor<?x3072xf32>
}

// -----

// A saved accumulator saves the row statistics its epilogue gradient reads:
// RMSNorm's mean of squares is an [m] output of @f_saving (saved_row0) and an
// [m] input of @f_backward_saved, whose only row reduction is the norm's
// adjoint (row_reduce of the gradient). The max that only the [m] output
// `peak` reads is not saved.
// SAVED-LABEL: func.func @rms_saving
// SAVED-SAME:    -> (tensor<?x256xbf16> {coda.name = "normed"}, tensor<?xf32> {coda.name = "peak"}, tensor<?x256xbf16> {coda.name = "saved_acc"}, tensor<?xf32> {coda.name = "saved_row0"})
// SAVED:           %[[MS:.*]] = coda.row_reduce mean
// SAVED:           coda.yield %{{.*}}, %{{.*}}, %{{.*}}, %[[MS]] : f32, f32, f32, f32
// SAVED-LABEL: func.func @rms_backward_saved
// SAVED-SAME:     %{{[a-z0-9_]+}}: tensor<?x256xbf16> {coda.name = "saved_acc"}, %[[ROW:[a-z0-9_]+]]: tensor<?xf32> {coda.name = "saved_row0"})
// SAVED:         ins(%{{.*}} : tensor<256xf32> [n], %{{.*}} : tensor<?x256xbf16> [m, n], %[[ROW]] : tensor<?xf32> [m])
// SAVED:         ^bb0(%[[G:.*]]: f32, %[[GAMMA:.*]]: f32, %[[SACC:.*]]: f32, %[[MS:.*]]: f32):
// SAVED:           %[[V:.*]] = arith.addf %[[MS]], %{{.*}} : f32
// SAVED-NEXT:      %[[RSTD:.*]] = math.rsqrt %[[V]] : f32
// SAVED:           coda.row_reduce mean
// SAVED-NOT:       coda.row_reduce
// SAVED:           coda.yield
func.func @rms(%x: tensor<?x64xbf16>, %w: tensor<256x64xbf16>,
               %gamma: tensor<256xf32> {coda.name = "gamma"})
    -> (tensor<?x256xbf16> {coda.name = "normed"}, tensor<?xf32> {coda.name = "peak"}) {
  %0, %1 = coda.gemm %x, %w transpose_b ins(%gamma : tensor<256xf32> [n])
      : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x256xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %g: f32):
    %sq = arith.mulf %acc, %acc : f32
    %ms = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-06 : f32
    %v = arith.addf %ms, %eps : f32
    %rstd = math.rsqrt %v : f32
    %n0 = arith.mulf %acc, %rstd : f32
    %n = arith.mulf %n0, %g : f32
    %peak = coda.row_reduce max %acc
    coda.yield %n, %peak : f32, f32
  }
  return %0, %1 : tensor<?x256xbf16>, tensor<?xf32>
}

// -----

// With alpha (acc = alpha op(A) op(B)), the recomputed GEMM and both operand
// gradients take it: grad_a = alpha grad_acc B, grad_b = alpha grad_acc^T A.
// CHECK-LABEL: func.func @scaled_backward
// CHECK-SAME:    (%[[A:[a-z0-9_]+]]: tensor<?x768xbf16>, %[[B:[a-z0-9_]+]]: tensor<3072x768xbf16>, %[[ALPHA:[a-z0-9_]+]]: f32,
// CHECK:         coda.gemm %[[A]], %[[B]] transpose_b alpha(%[[ALPHA]])
// CHECK-LABEL: func.func @scaled_grad_a
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "grad_acc"}, %[[B:[a-z0-9_]+]]: tensor<3072x768xbf16> {coda.name = "b"}, %[[ALPHA:[a-z0-9_]+]]: f32)
// CHECK-SAME:    -> (tensor<?x768xbf16> {coda.name = "grad_a"})
// CHECK:         coda.gemm %[[GACC]], %[[B]] alpha(%[[ALPHA]]) :
// CHECK-LABEL: func.func @scaled_grad_b
// CHECK-SAME:    (%[[GACC:[a-z0-9_]+]]: tensor<?x3072xbf16> {coda.name = "grad_acc"}, %[[A:[a-z0-9_]+]]: tensor<?x768xbf16> {coda.name = "a"}, %[[ALPHA:[a-z0-9_]+]]: f32)
// CHECK-SAME:    -> (tensor<3072x768xbf16> {coda.name = "grad_b"})
// CHECK:         coda.gemm %[[GACC]], %[[A]] transpose_a alpha(%[[ALPHA]]) :

// With a saved accumulator, alpha is already in saved_acc: the backward's
// GEMM (the next layer's dgrad) takes none, the operand gradients do.
// SAVED-LABEL: func.func @scaled_saving
// SAVED-SAME:    %[[ALPHA:[a-z0-9_]+]]: f32)
// SAVED:         coda.gemm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} transpose_b alpha(%[[ALPHA]])
// SAVED-LABEL: func.func @scaled_backward_saved
// SAVED-NOT:     alpha
// SAVED-LABEL: func.func @scaled_backward_from_saved
// SAVED-NOT:     alpha
// SAVED-LABEL: func.func @scaled_grad_a
// SAVED-SAME:    %[[ALPHA:[a-z0-9_]+]]: f32)
// SAVED:         coda.gemm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} alpha(%[[ALPHA]])
// SAVED-LABEL: func.func @scaled_grad_b
// SAVED-SAME:    %[[ALPHA:[a-z0-9_]+]]: f32)
// SAVED:         coda.gemm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} transpose_a alpha(%[[ALPHA]])
func.func @scaled(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>, %alpha: f32)
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b alpha(%alpha)
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %1 = coda.activation relu %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<?x3072xbf16>
}

// -----

// A derived program names its forward (coda.derived_from), and the pass
// derives nothing from a program that has it: the output of one run can be
// compiled, but derives no derivatives of derivatives.
// CHECK-LABEL: func.func @plain_backward
// CHECK-SAME:    attributes {coda.derived_from = @plain}
// CHECK-LABEL: func.func @plain_grad_b
// CHECK-SAME:    attributes {coda.derived_from = @plain}
// CHECK-LABEL: func.func @earlier_backward
// CHECK-SAME:    attributes {coda.derived_from = @earlier}
// CHECK-NOT:     func.func @earlier_backward_
func.func @plain(%x: tensor<?x64xbf16>, %w: tensor<64x256xbf16>) -> tensor<?x256xbf16> {
  %0 = coda.gemm %x, %w : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x256xbf16>
}
func.func @earlier_backward(%x: tensor<?x64xbf16>, %w: tensor<64x256xbf16>) -> tensor<?x256xbf16> attributes {coda.derived_from = @earlier} {
  %0 = coda.gemm %x, %w : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %1 = coda.activation_derivative gelu_tanh %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// An input that spans n mod p, read only through detach: it takes no
// gradient, so the backward has none for it (grad_acc and the row input's).
// CHECK-LABEL: func.func @periodic_backward
// CHECK-SAME:    -> (tensor<?x256xbf16> {coda.name = "grad_acc"}, tensor<?xf32> {coda.name = "grad_pos"})
func.func @periodic(%x: tensor<?x64xbf16>, %w: tensor<64x256xbf16>, %pos: tensor<?xf32> {coda.name = "pos"}, %freq: tensor<64xf32> {coda.name = "freq"}) -> (tensor<?x256xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w ins(%pos : tensor<?xf32> [m], %freq : tensor<64xf32> [n mod 64]) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32, %p: f32, %f: f32):
    %1 = coda.detach %f
    %2 = arith.mulf %p, %1 : f32
    %3 = math.cos %2 : f32
    %4 = arith.mulf %acc, %3 : f32
    coda.yield %4 : f32
  }
  return %0 : tensor<?x256xbf16>
}
