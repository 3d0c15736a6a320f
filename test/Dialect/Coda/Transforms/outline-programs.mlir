// RUN: coda-opt %s --coda-outline-programs --split-input-file | FileCheck %s
// With report, a remark on each op left around the calls that computes a
// tensor.
// RUN: coda-opt %s --coda-outline-programs=report --split-input-file -verify-diagnostics > /dev/null
// Every function it makes is a coda program, which coda-derive-backward takes.
// RUN: coda-opt %s --coda-outline-programs --split-input-file \
// RUN:   | coda-opt --split-input-file --coda-derive-backward | FileCheck %s --check-prefix=DERIVED
// DERIVED-DAG: func.func @mlp_gemm_backward(
// DERIVED-DAG: func.func @two_gemm_0_backward(
// DERIVED-DAG: func.func @two_gemm_1_backward(

// A coda.gemm amid other ops (as coda-raise-linalg leaves one) becomes a
// program of its own, named after its function, called where it was: its
// operands in order, epilogue inputs named input<i> (an i64 that seeds a
// dropout: seed), its single result output.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:      %[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<128x64xf32>, %[[BIAS:.*]]: tensor<128xf32>, %[[SEED:.*]]: i64)
// CHECK:         %[[T:.*]] = arith.mulf
// CHECK:         %[[Y:.*]] = call @mlp_gemm(%[[T]], %[[W]], %[[BIAS]], %[[SEED]])
// CHECK-NOT:     coda.gemm
// CHECK:         return %[[Y]]
// CHECK-LABEL: func.func @mlp_gemm(
// CHECK-SAME:      %{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<128x64xf32>, %{{.*}}: tensor<128xf32> {coda.name = "input0"}, %{{.*}}: i64 {coda.name = "seed"})
// CHECK-SAME:      -> (tensor<?x128xf32> {coda.name = "output"})
// CHECK-NEXT:    %[[G:.*]] = coda.gemm
// CHECK:           coda.dropout
// CHECK:         return %[[G]]
func.func @mlp(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>, %bias: tensor<128xf32>, %seed: i64) -> tensor<?x128xf32> {
  // expected-remark @+1 {{left outside the coda programs: compiled with the rest of the function, not fused into a GEMM}}
  %t = arith.mulf %x, %x : tensor<?x64xf32>
  %o = coda.gemm %t, %w transpose_b ins(%bias : tensor<128xf32> [n], %seed : i64) : tensor<?x64xf32>, tensor<128x64xf32> -> (tensor<?x128xf32> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.dropout %0, %s {p = 0.1 : f32}
    coda.yield %1 : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

// Two GEMMs of one function, the name @two_gemm already taken, a value that
// feeds two operands (an argument each), several results (output<i>), and a
// GEMM in a loop body. A program stays as it is.
// CHECK-LABEL: func.func @two_gemm(
// CHECK-LABEL: func.func @two(
// CHECK:         %[[P:.*]]:2 = call @two_gemm_0(%{{.*}}, %{{.*}}, %{{.*}}) :
// CHECK:         scf.for
// CHECK:           call @two_gemm_1(%[[P]]#1, %{{.*}})
// CHECK-LABEL: func.func @two_gemm_0(
// CHECK-SAME:      %{{.*}}: tensor<?x128xf32> {coda.name = "input0"})
// CHECK-SAME:      -> (tensor<?x128xf32> {coda.name = "output0"}, tensor<?x128xf32> {coda.name = "output1"})
// CHECK-LABEL: func.func @two_gemm_1(
// CHECK-LABEL: func.func @program(
// CHECK-NEXT:    coda.gemm
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      coda.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @two_gemm() {
  return
}
func.func @two(%x: tensor<?x128xf32>, %w: tensor<128x128xf32>, %n: index) -> tensor<?x128xf32> {
  %p:2 = coda.gemm %x, %w transpose_b ins(%x : tensor<?x128xf32> [m, n]) : tensor<?x128xf32>, tensor<128x128xf32> -> (tensor<?x128xf32> [m, n], tensor<?x128xf32> [m, n]) {
  ^bb0(%acc: f32, %r: f32):
    %0 = arith.addf %acc, %r : f32
    coda.yield %0, %acc : f32, f32
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %y = scf.for %i = %c0 to %n step %c1 iter_args(%acc0 = %p#0) -> tensor<?x128xf32> {
    %q = coda.gemm %p#1, %w transpose_b : tensor<?x128xf32>, tensor<128x128xf32> -> (tensor<?x128xf32> [m, n]) {
    ^bb0(%acc: f32):
      coda.yield %acc : f32
    }
    scf.yield %q : tensor<?x128xf32>
  }
  return %y : tensor<?x128xf32>
}
func.func @program(%x: tensor<?x128xf32>, %w: tensor<128x128xf32>) -> tensor<?x128xf32> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x128xf32>, tensor<128x128xf32> -> (tensor<?x128xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}
