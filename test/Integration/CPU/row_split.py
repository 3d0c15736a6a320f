# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# The row split (deriveRowSplit, what the GPU runtime launches for rows too
# wide for a cluster of tiles): @f_row_statistics writes the accumulator and
# the row reductions, @f_row_apply runs the epilogue on them. On the CPU
# reference the two give the forward's outputs bit for bit, here at N = 5000
# (wider than the GPU's clusters hold) and a ragged M: a LayerNorm after
# bias, dropout and residual (two reductions, the variance centered on the
# mean), a softmax (a sum of exponentials shifted by the row maximum), an
# RMSNorm, an RMSNorm beside a softmax and its log-sum-exp (whose repeated
# maximum and sum are saved once), a LayerNorm of f16 operands, and a
# LayerNorm of h rounded to its type (bf16(...), f16(...)), which the split
# saves in that type instead of the f32 accumulator, into the program's
# output h (the application writes the rest).

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch

from coda.reference import ReferenceProgram

PROGRAMS = {
    "layernorm": """
EPILOGUE layernorm(bias: f32[N], residual: {t}[M, N], gamma: f32[N], beta: f32[N])
    -> (output: {t}[M, N], h: {t}[M, N]) {
  h = dropout(input + bias, 0.1) + residual;
  d = h - row_mean(h);
  output = d * rsqrt(row_mean(d * d) + 1e-5) * gamma + beta;
}
""",
    "softmax": """
EPILOGUE softmax() -> (output: {t}[M, N]) {
  e = exp(input - row_max(input));
  output = e / row_sum(e);
}
""",
    "norms": """
EPILOGUE norms(residual: {t}[M, N], gamma: f32[N])
    -> (rms: {t}[M, N], softmax: f32[M, N], lse: f32[M]) {
  x = input + residual;
  rms = x * rsqrt(row_mean(x * x) + 1e-6) * gamma;
  e = exp(input - row_max(input));
  softmax = e / row_sum(e);
  lse = row_max(input) + log(row_sum(e));
}
""",
    "rounded": """
EPILOGUE rounded(bias: f32[N], residual: {t}[M, N], gamma: f32[N], beta: f32[N])
    -> (output: {t}[M, N], h: {t}[M, N]) {
  h = {t}(input + bias + residual);
  d = h - row_mean(h);
  output = d * rsqrt(row_mean(d * d) + 1e-5) * gamma + beta;
}
""",
    "rmsnorm": """
EPILOGUE rmsnorm(gamma: f32[N]) -> (output: {t}[M, N]) {
  output = input * rsqrt(row_mean(input * input) + 1e-6) * gamma;
}
""",
}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
M, K, N = 37, 64, 5000
torch.manual_seed(0)
for name, dtype in (("layernorm", "bf16"), ("softmax", "bf16"), ("rmsnorm", "bf16"),
                    ("norms", "bf16"), ("layernorm", "f16"), ("rounded", "bf16"),
                    ("rounded", "f16")):
    source = PROGRAMS[name].replace("{t}", dtype)
    forward = ReferenceProgram(source, dtype=dtype)
    statistics = ReferenceProgram(source, dtype=dtype, derive="row_statistics")
    apply = ReferenceProgram(source, dtype=dtype, derive="row_apply")
    t = DTYPES[dtype]
    a = torch.randn(M, K).to(t)
    b = (torch.randn(N, K) / 8).to(t)
    inputs = {"bias": torch.randn(N), "residual": torch.randn(M, N).to(t),
              "gamma": torch.randn(N), "beta": torch.randn(N)}
    inputs = {arg["name"]: inputs[arg["name"]] for arg in forward.arguments
              if arg["role"] == "input" and arg["name"] != "seed"}
    want = forward(a, b, seed=7, inputs=inputs)
    saved = statistics(a, b, seed=7, inputs=inputs)
    kept = {k: str(v.dtype).replace("torch.", "") for k, v in saved.items() if v.dim() == 2}
    applied = apply(a, b, seed=7, inputs=dict(inputs, **saved))
    # The program's outputs: the application's, and one the statistics wrote
    # (a rounded h, named as the output).
    got = dict(applied, **{k: v for k, v in saved.items() if k in want})
    same = sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)
    print(f"{name} {dtype}: {sorted(saved)} ({kept}) -> {sorted(applied)}, bit-identical {same}, "
          f"non-zero {all(v.count_nonzero().item() > 0 for v in got.values())}")
# CHECK: layernorm bf16: ['split_acc', 'split_row0', 'split_row1'] ({'split_acc': 'float32'}) -> ['h', 'output'], bit-identical True, non-zero True
# CHECK: softmax bf16: ['split_acc', 'split_row0', 'split_row1'] ({'split_acc': 'float32'}) -> ['output'], bit-identical True, non-zero True
# CHECK: rmsnorm bf16: ['split_acc', 'split_row0'] ({'split_acc': 'float32'}) -> ['output'], bit-identical True, non-zero True
# CHECK: norms bf16: ['split_acc', 'split_row0', 'split_row1', 'split_row2'] ({'split_acc': 'float32'}) -> ['lse', 'rms', 'softmax'], bit-identical True, non-zero True
# CHECK: layernorm f16: ['split_acc', 'split_row0', 'split_row1'] ({'split_acc': 'float32'}) -> ['h', 'output'], bit-identical True, non-zero True
# CHECK: rounded bf16: ['h', 'split_row0', 'split_row1'] ({'h': 'bfloat16'}) -> ['output'], bit-identical True, non-zero True
# CHECK: rounded f16: ['h', 'split_row0', 'split_row1'] ({'h': 'float16'}) -> ['output'], bit-identical True, non-zero True

# The float64 reference (widened) rounds as the f32 program does: through f32.
WIDE = """
EPILOGUE wide(residual: f32[M, N]) -> (output: f32[M, N], x: f32[M, N]) {
  x = input + residual;
  output = bf16(x);
}
"""
wide = ReferenceProgram(WIDE, dtype="f32", widen_to_f64=True)
a, b = torch.randn(M, K, dtype=torch.float64), torch.randn(N, K, dtype=torch.float64) / 8
got = wide(a, b, inputs={"residual": torch.randn(M, N, dtype=torch.float64)})
print("widened bf16(x):", torch.equal(got["output"], got["x"].float().bfloat16().double()),
      bool((got["output"] != got["x"]).any()))
# CHECK: widened bf16(x): True True
