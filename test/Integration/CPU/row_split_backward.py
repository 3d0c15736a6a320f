# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src %coda_obj/bin %t | FileCheck %s
#
# The row split of a derived program: the backward of a LayerNorm and of an
# RMSNorm (@f_backward_saved, on the accumulator of the GEMM that produces
# the output's gradient), whose rows the GPU runtime splits as the forward's
# when they are too wide for a cluster of tiles. The gradient's second
# reduction reads the first (mean(g gamma (h - mu) ...) scales h - mu inside
# the next mean); the split separates it into reductions of the row's values
# only (separateRowReductions), which are row statistics; the gradient of the
# bf16 output arrives rounded to bf16, which the split saves (split_rounded)
# instead of the f32 accumulator. Its outputs are the unsplit backward's, up
# to the float rounding of the separated sums, and as close to the float64
# reference, at N = 5000 and a ragged M.

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch

from coda.reference import ReferenceProgram

TOOLS, SCRATCH = sys.argv[2], sys.argv[3]
PROGRAMS = {
    "layernorm": """
EPILOGUE layernorm(bias: f32[N], residual: bf16[M, N], gamma: f32[N], beta: f32[N])
    -> (output: bf16[M, N]) {
  h = input + bias + residual;
  d = h - row_mean(h);
  output = d * rsqrt(row_mean(d * d) + 1e-5) * gamma + beta;
}
""",
    "rmsnorm": """
EPILOGUE rmsnorm(residual: bf16[M, N], gamma: f32[N]) -> (output: bf16[M, N]) {
  h = input + residual;
  output = h * rsqrt(row_mean(h * h) + 1e-6) * gamma;
}
""",
}


def derive_backward(name, source):
    """The module of the program and its derived programs, with the
    accumulator saved (coda-opt --coda-derive-backward=accumulator=saved)."""
    os.makedirs(SCRATCH, exist_ok=True)
    path = os.path.join(SCRATCH, name + ".coda")
    with open(path, "w") as f:
        f.write(source)
    imported = subprocess.run([os.path.join(TOOLS, "coda-translate"), "--import-epilogue", path],
                              check=True, capture_output=True, text=True).stdout
    return subprocess.run([os.path.join(TOOLS, "coda-opt"),
                           "--coda-derive-backward=accumulator=saved"], input=imported,
                          check=True, capture_output=True, text=True).stdout


M, K, N = 37, 64, 5000
torch.manual_seed(0)
for name, source in PROGRAMS.items():
    module = derive_backward(name, source)
    function = name + "_backward_saved"
    backward = ReferenceProgram(module, function=function)
    exact = ReferenceProgram(module, function=function, widen_to_f64=True)
    statistics = ReferenceProgram(module, function=function, derive="row_statistics")
    apply = ReferenceProgram(module, function=function, derive="row_apply")
    saving = ReferenceProgram(module, function=name + "_saving")
    # The forward's saved values, then the next layer's gradient [M, K] and
    # its weight [K, N] (the dgrad GEMM whose accumulator is the gradient).
    x, w = torch.randn(M, K).bfloat16(), (torch.randn(N, K) / 8).bfloat16()
    inputs = {"bias": torch.randn(N), "residual": torch.randn(M, N).bfloat16(),
              "gamma": torch.randn(N), "beta": torch.randn(N)}
    inputs = {arg["name"]: inputs[arg["name"]] for arg in saving.arguments
              if arg["role"] == "input"}
    saved = saving(x, w, inputs=inputs)
    inputs.update({k: v for k, v in saved.items() if k.startswith("saved_")})
    grad, w_next = torch.randn(M, K).bfloat16(), (torch.randn(K, N) / 8).bfloat16()
    want = backward(grad, w_next, inputs=inputs)
    reference = exact(grad.double(), w_next.double(),
                      inputs={k: v.double() for k, v in inputs.items()})
    split = statistics(grad, w_next, inputs=inputs)
    got = apply(grad, w_next, inputs=dict(inputs, **split))

    def error(out, k):
        return ((out[k].double() - reference[k]).abs().max() / reference[k].abs().max()).item()

    close = all(error(got, k) <= 2 * error(want, k) + 1e-3 for k in want)
    print(f"{name}: {sorted(split)} -> {sorted(got)}, as close to float64 as unsplit {close}, "
          f"non-zero {all(v.count_nonzero().item() > 0 for v in got.values())}")
    print(f"  grad_acc error {error(got, 'grad_acc'):.1e} (unsplit {error(want, 'grad_acc'):.1e})")
# CHECK: layernorm: ['split_rounded', 'split_row0', 'split_row1', 'split_row2'] -> ['grad_acc', 'grad_beta', 'grad_bias', 'grad_gamma', 'grad_residual'], as close to float64 as unsplit True, non-zero True
# CHECK: rmsnorm: ['split_rounded', 'split_row0'] -> ['grad_acc', 'grad_gamma', 'grad_residual'], as close to float64 as unsplit True, non-zero True
