// A program whose output stores its column pairs in halves, for the coda-run
// error tests.
func.func @halves(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n halves]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xbf16>
}
