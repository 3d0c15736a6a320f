# REQUIRES: cuda-gpu, numpy, torch
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %testlib %coda_src
#
# Row reductions over rows wider than a tile on the GPU: as the program's row
# split (the runtime's choice for rows that need a cluster of tiles), and,
# with the kernel shape pinned, as fused kernels whose cluster of blocks
# along N exchange their rows' partial results. LayerNorm (with its mean and rstd), RMSNorm,
# softmax and log-sum-exp at widths from 2 tiles to 16 (129 to 4096 columns,
# ragged M, N not a multiple of 8 in places), bf16 and f16, against fp64
# numpy; coda-run --check poisons the outputs with NaN and compares them with
# the CPU reference. Then: a cluster wider than the row (blocks past the last
# column), results identical bit for bit from run to run, rows past the
# widest cluster (4104 and 10000 columns) through the row split (the GEMM
# writing its accumulator and row statistics, then the epilogue on them),
# a reduction of values scaled by another separated for the split, the
# error for a program that cannot be split, row statistics merged after
# the GEMM at any width, and the
# derived backward of residual + LayerNorm at GPT-2's width against fp64
# autograd.

import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[2], "python"))
import numpy as np
import coda_ref as ref
from coda_test import random, run_program, write_program

rng = np.random.default_rng(29)
folder = tempfile.mkdtemp()


def program(name, text):
    return write_program(folder, name, text)


LAYERNORM = os.path.join(sys.argv[2], "examples", "residual_layernorm.coda")
NORMS = program("norms", """
EPILOGUE norms(residual: bf16[M, N], gamma: f32[N])
    -> (rms: bf16[M, N], softmax: f32[M, N], lse: f32[M]) {
  x = input + residual;
  rms = x * rsqrt(row_mean(x * x) + 1e-6) * gamma;
  e = exp(input - row_max(input));
  softmax = e / row_sum(e);
  lse = row_max(input) + log(row_sum(e));
}
""")


def gemm(arrays, dtype):
    return ref.round_to(arrays["a"], dtype) @ ref.round_to(arrays["b"], dtype).T


def case(m, n, k, dtype="bf16", extra=()):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k)),
              "bias": random(rng, n), "residual": random(rng, m, n),
              "gamma": random(rng, n), "beta": random(rng, n)}
    flags = ["--check", "--dtype", dtype, *extra]
    what = f"{m}x{n}x{k} {dtype}{' ' + ' '.join(extra) if extra else ''}"
    acc = gemm(arrays, dtype)
    residual = ref.round_bf16(arrays["residual"])

    outs = run_program(LAYERNORM, arrays, ["output", "mean", "rstd"], device="cuda",
                       extra=flags)
    x = acc + arrays["bias"] + residual
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    ref.check(f"layernorm {what}", outs["output"],
              (x - mean) * rstd * arrays["gamma"] + arrays["beta"], "bf16")
    ref.check(f"layernorm mean {what}", outs["mean"], mean[:, 0], "f32")
    ref.check(f"layernorm rstd {what}", outs["rstd"], rstd[:, 0], "f32")

    norms = {key: arrays[key] for key in ("a", "b", "residual", "gamma")}
    outs = run_program(NORMS, norms, ["rms", "softmax", "lse"], device="cuda", extra=flags)
    x = acc + residual
    ref.check(f"rmsnorm {what}", outs["rms"],
              x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * arrays["gamma"],
              "bf16")
    e = np.exp(acc - acc.max(axis=1, keepdims=True))
    ref.check(f"softmax {what}", outs["softmax"], e / e.sum(axis=1, keepdims=True), "f32")
    ref.check(f"log-sum-exp {what}", outs["lse"],
              acc.max(axis=1) + np.log(e.sum(axis=1)), "f32")
    return arrays, flags


# Clusters of 2, 6 and 8 128-column tiles, 12 and 16 256-column ones.
for m, n, k, dtype in ((333, 129, 64, "bf16"), (1000, 768, 136, "bf16"),
                       (257, 1001, 200, "f16"), (300, 3000, 64, "bf16"),
                       (130, 4096, 72, "bf16")):
    case(m, n, k, dtype)

# A cluster of 8 over 6 tiles' worth of columns: the last two blocks hold no
# column and take part in the exchanges. Pinned 256-column tiles in clusters
# of 3 over 700 columns.
case(200, 700, 64, extra=("--cluster-n", "8"))
case(200, 700, 64, extra=("--tile-n", "256"))

# The same inputs give the same bits: each block combines the cluster's
# partial results in rank order, with no atomics.
arrays, flags = case(520, 1024, 64)
first = run_program(LAYERNORM, arrays, ["output", "mean", "rstd"], device="cuda",
                    extra=flags[1:])
again = run_program(LAYERNORM, arrays, ["output", "mean", "rstd"], device="cuda",
                    extra=flags[1:])
for name in first:
    assert np.array_equal(first[name], again[name]), f"{name} differs between runs"
print("deterministic: 3 outputs identical across runs")

# Past 16 tiles of 256 columns, the runtime launches the row split: the
# GEMM writes its accumulator (f32) and its row reductions as row
# statistics, merged after it, then a kernel with no product runs the
# epilogue on them. Pinned 256-column tiles too.
for m, n, k, extra in ((64, 4104, 64, ()), (257, 10000, 72, ()), (130, 4104, 64,
                                                                  ("--tile-n", "256"))):
    case(m, n, k, extra=extra)
print("row split: LayerNorm, RMSNorm, softmax and log-sum-exp past 4096 columns")

# A LayerNorm of h rounded to bf16 (what PyTorch normalizes) at 768, 4104 and
# 10000 columns, where the split saves the rounded h in bf16 instead of the
# f32 accumulator.
ROUNDED = program("rounded", """
EPILOGUE rounded(bias: f32[N], residual: bf16[M, N], gamma: f32[N], beta: f32[N])
    -> (h: bf16[M, N], output: bf16[M, N]) {
  h = bf16(input + bias + residual);
  d = h - row_mean(h);
  output = d * rsqrt(row_mean(d * d) + 1e-5) * gamma + beta;
}
""")
for m, n, k in ((1000, 768, 136), (130, 4104, 64), (64, 10000, 72)):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k)),
              "bias": random(rng, n), "residual": random(rng, m, n),
              "gamma": random(rng, n), "beta": random(rng, n)}
    outs = run_program(ROUNDED, arrays, ["h", "output"], device="cuda",
                       extra=["--check", "--dtype", "bf16"])
    h = ref.round_bf16(gemm(arrays, "bf16") + arrays["bias"] + ref.round_bf16(arrays["residual"]))
    d = h - h.mean(axis=1, keepdims=True)
    ref.check(f"rounded h {m}x{n}x{k}", outs["h"], h, "bf16")
    ref.check(f"layernorm of rounded h {m}x{n}x{k}", outs["output"],
              d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * arrays["gamma"]
              + arrays["beta"], "bf16")
print("rounded: a LayerNorm of bf16(h) in a cluster and through the split")

# A reduction of values scaled by another reduction is separated into
# reductions of the row's values (mean(x max(x)) = max(x) mean(x)), which
# the split merges after the GEMM; a function of such values (an
# exponential) no merge of per-tile results computes, which the launch says.
SEPARATED = program("separated", """
EPILOGUE separated() -> (output: f32[M, N]) {
  output = input - row_mean(input * row_max(input)) / row_max(input);
}
""")
arrays = {"a": random(rng, 64, 64), "b": random(rng, 4104, 64) / np.float32(8)}
outs = run_program(SEPARATED, arrays, ["output"], device="cuda", extra=["--check"])
acc = gemm(arrays, "bf16")
ref.check("separated 64x4104x64", outs["output"], acc - acc.mean(axis=1, keepdims=True), "f32")
SCALED = program("scaled", """
EPILOGUE scaled() -> (output: f32[M, N]) {
  output = input / row_sum(exp(input * row_max(input)));
}
""")
error = run_program(SCALED, {"a": random(rng, 64, 64), "b": random(rng, 4104, 64)}, ["output"],
                    device="cuda", expect_failure=True)
print(error.strip().splitlines()[-1])
assert "wider than a cluster of its GPU kernel's tiles holds, and cannot be split" in error, error
assert "a row reduction reads another in a way no merge" in error, error

# Row statistics (no element of the row needs them) at any width: each tile
# writes its partial results and a merge kernel combines them in tile order
# and computes the outputs from them. An RMSNorm's rstd beside its residual
# sum, a log-sum-exp shifted by an input along m, a row maximum in bf16, and
# two reductions centered on an earlier one, which each tile centers on its
# own mean or maximum: a LayerNorm's mean and rstd (Chan's merge of the
# tiles' means and sums of squared deviations) and a log-sum-exp shifted by
# the row's maximum (the tiles' sums rescaled to the running maximum). Over 1
# to 257 tiles (N up to 65536 and GPT-2's vocabulary, 50257), ragged M, bf16
# and f16; bit for bit the same from run to run.
STATS = program("stats", """
EPILOGUE stats(residual: bf16[M, N], shift: f32[M])
    -> (h: bf16[M, N], rstd: f32[M], lse: f32[M], top: bf16[M], mean: f32[M],
        lnrstd: f32[M], maxlse: f32[M]) {
  h = input + residual;
  rstd = rsqrt(row_mean(h * h) + 1e-6);
  lse = log(row_sum(exp(input - shift))) + shift;
  top = row_max(input);
  mean = row_mean(h);
  d = h - mean;
  lnrstd = rsqrt(row_mean(d * d) + 1e-5);
  maxlse = row_max(input) + log(row_sum(exp(input - row_max(input))));
}
""")
STATS_OUTPUTS = ["h", "rstd", "lse", "top", "mean", "lnrstd", "maxlse"]


def statistics(m, n, k, dtype="bf16"):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k)),
              "residual": random(rng, m, n), "shift": random(rng, m)}
    what = f"{m}x{n}x{k} {dtype}"
    outs = run_program(STATS, arrays, STATS_OUTPUTS, device="cuda",
                       extra=["--check", "--dtype", dtype])
    acc = gemm(arrays, dtype)
    h = acc + ref.round_bf16(arrays["residual"])
    shift = arrays["shift"].astype(np.float64)[:, None]
    ref.check(f"statistics h {what}", outs["h"], h, "bf16")
    ref.check(f"statistics rstd {what}", outs["rstd"],
              1 / np.sqrt((h ** 2).mean(axis=1) + 1e-6), "f32")
    ref.check(f"statistics lse {what}", outs["lse"],
              (np.log(np.exp(acc - shift).sum(axis=1, keepdims=True)) + shift)[:, 0], "f32")
    ref.check(f"statistics max {what}", outs["top"], acc.max(axis=1), "bf16")
    mean = h.mean(axis=1)
    ref.check(f"statistics layernorm mean {what}", outs["mean"], mean, "f32")
    ref.check(f"statistics layernorm rstd {what}", outs["lnrstd"],
              1 / np.sqrt(((h - mean[:, None]) ** 2).mean(axis=1) + 1e-5), "f32")
    top = acc.max(axis=1, keepdims=True)
    ref.check(f"statistics max-shifted lse {what}", outs["maxlse"],
              (top + np.log(np.exp(acc - top).sum(axis=1, keepdims=True)))[:, 0], "f32")
    return arrays, outs


for m, n, k, dtype in ((333, 200, 64, "bf16"), (1000, 1000, 136, "bf16"),
                       (257, 3000, 72, "f16"), (130, 8192, 64, "bf16"),
                       (77, 50257, 64, "bf16"), (64, 65536, 64, "bf16")):
    statistics(m, n, k, dtype)
arrays, first = statistics(300, 5000, 64)
again = run_program(STATS, arrays, STATS_OUTPUTS, device="cuda")
for name in first:
    assert np.array_equal(first[name], again[name]), f"statistics {name} differs between runs"
print("deterministic: the statistics identical across runs")

# The derived backward of residual + LayerNorm (row reductions again, in the
# epilogue gradient's kernel) at GPT-2's width, against fp64 autograd.
import torch  # noqa: E402
from coda.autograd import ProgramFamily, run  # noqa: E402

torch.manual_seed(3)
cuda = torch.device("cuda")
M, N, K = 1000, 768, 136
family = ProgramFamily(open(LAYERNORM).read())
leaves = {"a": torch.randn(M, K), "b": torch.randn(N, K) / K ** 0.5,
          "bias": torch.randn(N), "residual": torch.randn(M, N),
          "gamma": torch.randn(N), "beta": torch.randn(N)}
dtypes = {"a": torch.bfloat16, "b": torch.bfloat16, "residual": torch.bfloat16}
names = ["bias", "residual", "gamma", "beta"]
got = {key: value.to(cuda, dtypes.get(key, torch.float32)).requires_grad_()
       for key, value in leaves.items()}
want = {key: value.to(dtypes.get(key, torch.float32)).double().requires_grad_()
        for key, value in leaves.items()}
out, mean, rstd = run(family.key, "", got["a"], got["b"], [got[n] for n in names],
                      ",".join(names), [], "", torch.tensor(0, device=cuda))
grad = torch.randn(M, N)
out.backward(grad.to(cuda, out.dtype))
x = want["a"] @ want["b"].T + want["bias"] + want["residual"]
y = torch.nn.functional.layer_norm(x, (N,), want["gamma"], want["beta"], eps=1e-5)
y.backward(grad.to(torch.bfloat16).double())
failures = []
for key in leaves:
    error = ((got[key].grad.double().cpu() - want[key].grad).norm()
             / want[key].grad.norm()).item()
    print(f"layernorm backward d{key} {M}x{N}x{K}: relative error {error:.2e}")
    if not error < 2e-2:
        failures.append(key)
assert not failures, failures
print("all passed")
