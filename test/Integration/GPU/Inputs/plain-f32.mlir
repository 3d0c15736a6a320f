// A GEMM with the identity epilogue, f32 operands, B as [K, N].
func.func @plain(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>)
    -> (tensor<?x?xf32> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
