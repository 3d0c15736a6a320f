func.func @rms(%x: tensor<?x64xbf16>, %w: tensor<8192x64xbf16>, %r: tensor<?x8192xbf16>) -> (tensor<?x8192xbf16>, tensor<?xf32>) {
  %o:2 = coda.gemm %x, %w transpose_b ins(%r : tensor<?x8192xbf16> [m, n]) : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %res: f32):
    %h = arith.addf %acc, %res : f32
    %sq = arith.mulf %h, %h : f32
    %ms = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-6 : f32
    %v = arith.addf %ms, %eps : f32
    %rstd = math.rsqrt %v : f32
    coda.yield %h, %rstd : f32, f32
  }
  return %o#0, %o#1 : tensor<?x8192xbf16>, tensor<?xf32>
}

func.func @lse(%x: tensor<?x768xbf16>, %w: tensor<50257x768xbf16>) -> tensor<?xbf16> {
  %o = coda.gemm %x, %w transpose_b : tensor<?x768xbf16>, tensor<50257x768xbf16> -> (tensor<?xbf16> [m]) {
  ^bb0(%acc: f32):
    %mx = coda.row_reduce max %acc
    %d = arith.subf %acc, %mx : f32
    %e = math.exp %d : f32
    %sum = coda.row_reduce sum %e
    %l = math.log %sum : f32
    %lse = arith.addf %mx, %l : f32
    coda.yield %lse : f32
  }
  return %o : tensor<?xbf16>
}

func.func @layernorm(%x: tensor<?x64xbf16>, %w: tensor<8192x64xbf16>, %b: tensor<8192xf32>, %r: tensor<?x8192xbf16>) -> (tensor<?x8192xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %o:3 = coda.gemm %x, %w transpose_b ins(%b : tensor<8192xf32> [n], %r : tensor<?x8192xbf16> [m, n]) : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n], tensor<?xf32> [m], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %bias: f32, %res: f32):
    %s = arith.addf %acc, %bias : f32
    %h = arith.addf %s, %res : f32
    %mean = coda.row_reduce mean %h
    %d = arith.subf %h, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %v = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %v : f32
    coda.yield %h, %mean, %rstd : f32, f32, f32
  }
  return %o#0, %o#1, %o#2 : tensor<?x8192xbf16>, tensor<?xf32>, tensor<?xf32>
}
