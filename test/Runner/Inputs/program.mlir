// A program with every kind of argument, for the coda-run error tests.
func.func @prog(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                %bias: tensor<?xf32> {coda.name = "bias"},
                %gain: f32 {coda.name = "gain"},
                %salt: i64 {coda.name = "salt"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b ins(%bias : tensor<?xf32> [n], %gain : f32, %salt : i64)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %bv: f32, %g: f32, %s: i64):
    %x = arith.addf %acc, %bv : f32
    %y = arith.mulf %x, %g : f32
    %d = coda.dropout %y, %s {p = 0.5 : f32}
    coda.yield %d : f32
  }
  return %0 : tensor<?x?xbf16>
}
