// Host code that launches coda programs: an MLP whose two GEMMs are
// programs, with work of the host's own between them (h halved) and scalars
// it passes in (the second program's scale and dropout seed). coda-run
// --entry mlp compiles @mlp for the host and launches @fc1 and @fc2.
#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @fc1(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>,
               %bias: tensor<96xf32> {coda.name = "bias"})
    -> (tensor<?x96xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b ins(%bias : tensor<96xf32> [n])
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    %g = coda.activation gelu_tanh %s
    coda.yield %g : f32
  }
  return %0 : tensor<?x96xbf16>
}

func.func @fc2(%h: tensor<?x96xbf16>, %w: tensor<64x96xbf16>,
               %residual: tensor<?x64xbf16> {coda.name = "residual"},
               %scale: f32 {coda.name = "scale"},
               %seed: i64 {coda.name = "seed"})
    -> (tensor<?x64xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %h, %w transpose_b
      ins(%residual : tensor<?x64xbf16> [m, n], %scale : f32, %seed : i64)
      : tensor<?x96xbf16>, tensor<64x96xbf16> -> (tensor<?x64xbf16> [m, n]) {
  ^bb0(%acc: f32, %r: f32, %c: f32, %s: i64):
    %scaled = arith.mulf %acc, %c : f32
    %d = coda.dropout %scaled, %s {p = 0.25 : f32}
    %y = arith.addf %d, %r : f32
    coda.yield %y : f32
  }
  return %0 : tensor<?x64xbf16>
}

func.func @mlp(%x: tensor<?x64xbf16>, %w1: tensor<96x64xbf16>,
               %b1: tensor<96xf32>, %w2: tensor<64x96xbf16>)
    -> (tensor<?x64xbf16>, tensor<?x96xbf16>) {
  %h = call @fc1(%x, %w1, %b1)
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<96xf32>) -> tensor<?x96xbf16>
  %c0 = arith.constant 0 : index
  %m = tensor.dim %h, %c0 : tensor<?x96xbf16>
  %e = tensor.empty(%m) : tensor<?x96xbf16>
  %half = arith.constant 5.000000e-01 : bf16
  %hs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<?x96xbf16>) outs(%e : tensor<?x96xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %p = arith.mulf %in, %half : bf16
    linalg.yield %p : bf16
  } -> tensor<?x96xbf16>
  %scale = arith.constant 1.500000e+00 : f32
  %seed = arith.constant 7 : i64
  %y = call @fc2(%hs, %w2, %x, %scale, %seed)
      : (tensor<?x96xbf16>, tensor<64x96xbf16>, tensor<?x64xbf16>, f32, i64) -> tensor<?x64xbf16>
  return %y, %h : tensor<?x64xbf16>, tensor<?x96xbf16>
}
