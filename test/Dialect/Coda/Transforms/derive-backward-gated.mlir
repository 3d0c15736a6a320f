// RUN: coda-opt %s --coda-derive-backward=accumulator=saved -split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="accumulator=saved next-weight=nk" -split-input-file | FileCheck %s --check-prefix=NK

// A gated activation (SwiGLU over interleaved gate and up columns) written
// N / 2 wide: its gradient arrives as the next layer's dgrad GEMM, N / 2 =
// 128 columns, which @f_backward_saved runs with an accumulator [m, n/2]
// (the gradient at the even columns, zero at the odd ones). The sweep of
// the adjoint table gives the gradient of both columns of each pair: at the
// gate column g * up * silu'(gate), and, through the partner's adjoint (the
// partner again), g * silu(gate) at the up column.
// CHECK-LABEL: func.func @swiglu_saving
// CHECK-SAME:    -> (tensor<?x128xbf16> {coda.name = "output"}, tensor<?x256xbf16> {coda.name = "saved_acc"})
// CHECK:         coda.gemm {{.*}} -> (tensor<?x128xbf16> [m, n/2], tensor<?x256xbf16> [m, n])
// CHECK-LABEL: func.func @swiglu_backward_saved
// CHECK-SAME:    (%[[DY:[a-z0-9_]+]]: tensor<?x?xbf16>, %[[WN:[a-z0-9_]+]]: tensor<?x128xbf16>,
// CHECK-SAME:     %[[SAVED:[a-z0-9_]+]]: tensor<?x256xbf16> {coda.name = "saved_acc"})
// CHECK-SAME:    -> (tensor<?x256xbf16> {coda.name = "grad_acc"})
// CHECK:         coda.gemm %[[DY]], %[[WN]] accumulator [m, n/2] ins(%[[SAVED]] : tensor<?x256xbf16> [m, n])
// CHECK-SAME:      -> (tensor<?x256xbf16> [m, n])
// CHECK:         ^bb0(%[[GACC:.*]]: f32, %[[S:.*]]: f32):
// CHECK-NEXT:      %[[G:.*]] = coda.round %[[GACC]] to bf16
// CHECK-DAG:       %[[UP:.*]] = coda.partner %[[S]] xor 1
// CHECK-DAG:       %[[SILU:.*]] = coda.activation silu %[[S]]
// CHECK-DAG:       %[[DSILU:.*]] = coda.activation_derivative silu %[[S]]
// CHECK-DAG:       %[[GUP:.*]] = arith.mulf %[[G]], %[[UP]] : f32
// CHECK-DAG:       %[[GGATE:.*]] = arith.mulf %[[G]], %[[SILU]] : f32
// CHECK-DAG:       %[[DGATE:.*]] = arith.mulf %[[GUP]], %[[DSILU]] : f32
// CHECK-DAG:       %[[DUP:.*]] = coda.partner %[[GGATE]] xor 1
// CHECK:           %[[D:.*]] = arith.addf %[[DGATE]], %[[DUP]] : f32
// CHECK-NEXT:      coda.yield %[[D]] : f32
// CHECK-LABEL: func.func @swiglu_grad_a
// CHECK-SAME:    (%{{.*}}: tensor<?x256xbf16> {coda.name = "grad_acc"}, %{{.*}}: tensor<256x64xbf16> {coda.name = "b"})
// NK-LABEL: func.func @swiglu_backward_saved_nk
// NK-SAME:    (%[[DY:[a-z0-9_]+]]: tensor<?x?xbf16>, %[[WN:[a-z0-9_]+]]: tensor<128x?xbf16>,
// NK:         coda.gemm %[[DY]], %[[WN]] transpose_b accumulator [m, n/2]
func.func @swiglu(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>)
    -> (tensor<?x128xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %g = coda.activation silu %acc
    %1 = arith.mulf %g, %up : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x128xbf16>
}

// -----

// An [m, n] output beside the gated one takes its gradient as an input,
// whichever comes first; the GEMM's accumulator is the gated output's.
// CHECK-LABEL: func.func @gated_and_pre_backward_saved
// CHECK-SAME:    %{{.*}}: tensor<?x256xbf16> {coda.name = "saved_acc"}, %{{.*}}: tensor<?x256xf32> {coda.name = "grad_pre"})
// CHECK:         coda.gemm {{.*}} accumulator [m, n/2]
func.func @gated_and_pre(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>)
    -> (tensor<?x256xf32> {coda.name = "pre"}, tensor<?x128xbf16> {coda.name = "output"}) {
  %0:2 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x256xf32> [m, n], tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %g = coda.activation gelu_tanh %acc
    %1 = arith.mulf %g, %up : f32
    coda.yield %acc, %1 : f32, f32
  }
  return %0#0, %0#1 : tensor<?x256xf32>, tensor<?x128xbf16>
}

// -----

// With the gate and up weights as B's two halves (b_halves), the saving
// program reads B so too; the gradient of each pair is written in halves
// ([m, n halves]), the order of B's rows, so that the operand gradients read
// B (and write B's gradient) as stored, with no b_halves of their own.
// CHECK-LABEL: func.func @halves_saving
// CHECK:         coda.gemm {{.*}} transpose_b b_halves : {{.*}} -> (tensor<?x128xbf16> [m, n/2], tensor<?x256xbf16> [m, n])
// CHECK-LABEL: func.func @halves_backward_saved
// CHECK:         coda.gemm {{.*}} accumulator [m, n/2] ins({{.*}} : tensor<?x256xbf16> [m, n])
// CHECK-SAME:      -> (tensor<?x256xbf16> [m, n halves])
// CHECK-LABEL: func.func @halves_grad_a
// CHECK:         coda.gemm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x256xbf16>, tensor<256x64xbf16> -> (tensor<?x64xbf16> [m, n])
// CHECK-LABEL: func.func @halves_grad_b
// CHECK:         coda.gemm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} transpose_a : tensor<?x256xbf16>, tensor<?x64xbf16> -> (tensor<256x64xbf16> [m, n])
func.func @halves(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>)
    -> (tensor<?x128xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b transpose_b b_halves : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %g = coda.activation silu %acc
    %1 = arith.mulf %g, %up : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x128xbf16>
}
