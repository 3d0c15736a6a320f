// The paper's epilogue, written directly in coda IR:
//
//   EPILOGUE {
//     output = gelu(input);
//     output = dropout(output, 0.1);
//     output = output + residual;
//   }
//
// for bf16 operands, A as [M, K] and B as an nn.Linear weight [N, K].
func.func @epilogue(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                    %residual: tensor<?x?xbf16> {coda.name = "residual"},
                    %seed: i64 {coda.name = "seed"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %output = coda.gemm %a, %b transpose_b
      ins(%residual : tensor<?x?xbf16> [m, n], %seed : i64)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%input: f32, %r: f32, %s: i64):
    %0 = coda.activation gelu_tanh %input
    %1 = coda.dropout %0, %s {p = 0.1 : f32}
    %2 = arith.addf %1, %r : f32
    coda.yield %2 : f32
  }
  return %output : tensor<?x?xbf16>
}
