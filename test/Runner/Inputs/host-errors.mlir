// Host functions coda-run --entry refuses, or whose launches fail.

func.func @add_residual(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>,
                        %r: tensor<?x96xbf16> {coda.name = "residual"})
    -> (tensor<?x96xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b ins(%r : tensor<?x96xbf16> [m, n])
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> (tensor<?x96xbf16> [m, n]) {
  ^bb0(%acc: f32, %rv: f32):
    %s = arith.addf %acc, %rv : f32
    coda.yield %s : f32
  }
  return %0 : tensor<?x96xbf16>
}

// The residual's rows need not be x's in the types; a launch checks them.
func.func @mismatched(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>,
                      %r: tensor<?x96xbf16>) -> tensor<?x96xbf16> {
  %y = call @add_residual(%x, %w, %r)
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<?x96xbf16>) -> tensor<?x96xbf16>
  return %y : tensor<?x96xbf16>
}

// A host function takes and returns tensors only.
func.func @with_scalar(%x: tensor<?x64xbf16>, %s: f32) -> tensor<?x64xbf16> {
  return %x : tensor<?x64xbf16>
}

// Host code and no program.
func.func @with_tensors(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  return %x : tensor<?x64xbf16>
}

// Two launches of which the first fails: the second's outputs are still
// allocated as their types say, and the first error is the run's.
func.func @two_launches(%x: tensor<?x64xbf16>, %w: tensor<96x64xbf16>,
                        %r: tensor<?x96xbf16>) -> tensor<?x96xbf16> {
  %bad = call @add_residual(%x, %w, %r)
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<?x96xbf16>) -> tensor<?x96xbf16>
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty(%rows) : tensor<?x96xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<?x96xbf16>) -> tensor<?x96xbf16>
  %good = call @add_residual(%x, %w, %z)
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<?x96xbf16>) -> tensor<?x96xbf16>
  return %good : tensor<?x96xbf16>
}

// Rank 4: coda-run takes it; the C API and python (coda_tensor holds three
// sizes) refuse it.
func.func @rank4(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  return %x : tensor<2x3x4x5xf32>
}

// Host code computing in bf16 (each op in f32, rounded to bf16): rsqrt,
// tanh and a product.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @bf16_math(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%rows) : tensor<?x64xbf16>
  %one = arith.constant 1.0 : bf16
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x64xbf16>) outs(%e : tensor<?x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %sq = arith.mulf %in, %in : bf16
    %s = arith.addf %sq, %one : bf16
    %r = math.rsqrt %s : bf16
    %t = math.tanh %in : bf16
    %p = arith.mulf %r, %t : bf16
    linalg.yield %p : bf16
  } -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
