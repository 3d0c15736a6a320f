// A gated activation's gradient beside an accumulator [m, n/2], written in
// halves (column 2j at j, 2j + 1 at N / 2 + j), as bf16 and as f32.
func.func @g(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %s: tensor<?x?xbf16> {coda.name = "saved"})
    -> (tensor<?x?xbf16> {coda.name = "output"}, tensor<?x?xf32> {coda.name = "wide"}) {
  %0:2 = coda.gemm %a, %b accumulator [m, n/2] ins(%s : tensor<?x?xbf16> [m, n]) : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n halves], tensor<?x?xf32> [m, n halves]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = coda.partner %acc xor 1
    %2 = arith.addf %acc, %1 : f32
    %3 = arith.mulf %2, %x : f32
    coda.yield %3, %3 : f32, f32
  }
  return %0#0, %0#1 : tensor<?x?xbf16>, tensor<?x?xf32>
}
