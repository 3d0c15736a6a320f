// A program graph: an output projection adding its residual and writing its
// rows' RMSNorm rstd, the next projection reading h with the norm folded in
// (rstd times each row: docs/raising.md), then a GELU projection of that.
// The coda.gemm ops sit in the function; reading it outlines each.
func.func @block(%o: tensor<?x64xbf16>, %wo: tensor<96x64xbf16>,
                 %r: tensor<?x96xbf16>, %wq: tensor<128x96xbf16>,
                 %w3: tensor<48x128xbf16>)
    -> (tensor<?x48xbf16>, tensor<?x96xbf16>) {
  %h:2 = coda.gemm %o, %wo transpose_b ins(%r : tensor<?x96xbf16> [m, n])
      : tensor<?x64xbf16>, tensor<96x64xbf16>
      -> (tensor<?x96xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %res: f32):
    %hv = arith.addf %acc, %res : f32
    %sq = arith.mulf %hv, %hv : f32
    %ms = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-6 : f32
    %v = arith.addf %ms, %eps : f32
    %rstd = math.rsqrt %v : f32
    coda.yield %hv, %rstd : f32, f32
  }
  %q = coda.gemm %h#0, %wq transpose_b ins(%h#1 : tensor<?xf32> [m])
      : tensor<?x96xbf16>, tensor<128x96xbf16> -> (tensor<?x128xbf16> [m, n]) {
  ^bb0(%acc: f32, %rs: f32):
    %s = arith.mulf %acc, %rs : f32
    coda.yield %s : f32
  }
  %z = coda.gemm %q, %w3 transpose_b
      : tensor<?x128xbf16>, tensor<48x128xbf16> -> (tensor<?x48xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %g = coda.activation gelu_erf %acc
    coda.yield %g : f32
  }
  return %z, %h#0 : tensor<?x48xbf16>, tensor<?x96xbf16>
}

// Four GEMMs in a chain: the third's output takes the first's bytes in the
// workspace, which nothing reads after the second.
func.func @chain(%x: tensor<?x64xbf16>, %w1: tensor<96x64xbf16>,
                 %w2: tensor<128x96xbf16>, %w3: tensor<96x128xbf16>,
                 %w4: tensor<48x96xbf16>) -> tensor<?x48xbf16> {
  %a = coda.gemm %x, %w1 transpose_b
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %b = coda.gemm %a, %w2 transpose_b
      : tensor<?x96xbf16>, tensor<128x96xbf16> -> (tensor<?x128xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %t = math.tanh %acc : f32
    coda.yield %t : f32
  }
  %c = coda.gemm %b, %w3 transpose_b
      : tensor<?x128xbf16>, tensor<96x128xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %d = coda.gemm %c, %w4 transpose_b
      : tensor<?x96xbf16>, tensor<48x96xbf16> -> (tensor<?x48xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %d : tensor<?x48xbf16>
}

// Not graphs: host code between the programs, an argument returned, a value
// returned twice.
func.func @scaled(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>) -> tensor<?x96xbf16> {
  %y = coda.gemm %x, %w transpose_b
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %c0 = arith.constant 0 : index
  %m = tensor.dim %y, %c0 : tensor<?x96xbf16>
  %e = tensor.empty(%m) : tensor<?x96xbf16>
  %z = linalg.add ins(%y, %y : tensor<?x96xbf16>, tensor<?x96xbf16>)
      outs(%e : tensor<?x96xbf16>) -> tensor<?x96xbf16>
  return %z : tensor<?x96xbf16>
}

func.func @passthrough(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>)
    -> (tensor<?x96xbf16>, tensor<?x64xbf16>) {
  %y = coda.gemm %x, %w transpose_b
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %y, %x : tensor<?x96xbf16>, tensor<?x64xbf16>
}

func.func @twice(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>)
    -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %y = coda.gemm %x, %w transpose_b
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %y, %y : tensor<?x96xbf16>, tensor<?x96xbf16>
}
