// A coda.gemm amid host code, not a program of its own (coda-raise-linalg
// leaves it so; coda-outline-programs makes it one).
func.func @unoutlined(%x: tensor<?x64xf32>, %w: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %0 = coda.gemm %x, %w transpose_b : tensor<?x64xf32>, tensor<96x64xf32> -> (tensor<?x96xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %1 = arith.addf %0, %0 : tensor<?x96xf32>
  return %1 : tensor<?x96xf32>
}
