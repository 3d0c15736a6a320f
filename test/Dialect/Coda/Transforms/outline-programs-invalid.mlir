// RUN: coda-opt %s --coda-outline-programs -verify-diagnostics

// A coda.gemm in a nested module is not outlined into the outer one.
module {
  module @inner {
    func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) -> tensor<?x128xf32> {
      %t = arith.mulf %x, %x : tensor<?x64xf32>
      // expected-error @+1 {{cannot be outlined: it is not in a function of the module the pass runs on}}
      %o = coda.gemm %t, %w transpose_b : tensor<?x64xf32>, tensor<128x64xf32> -> (tensor<?x128xf32> [m, n]) {
      ^bb0(%acc: f32):
        coda.yield %acc : f32
      }
      return %o : tensor<?x128xf32>
    }
  }
}
