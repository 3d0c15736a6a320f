// A GEMM with the identity epilogue, A as [M, K] and B as [K, N].
func.func @plain(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xbf16>
}
