# REQUIRES: cuda-gpu, numpy
# RUN: env CODA_CACHE_DIR=%t.cache %python %s %testlib
#
# Pair and position epilogues as fused kernels on the GPU, on ragged shapes
# (N not a multiple of 8, so that border tiles take the checked path):
# gated outputs of the even columns ([M, N/2], bf16 and f32, with and
# without the pre-activation), partners at every distance from 1 to 64 (in
# the thread's fragment, and one shuffle away for 2 and 4), coordinates, and
# both rotary embeddings, inputs that repeat along the row (N % p: a rotary
# embedding's frequencies or cos/sin table), reductions over groups of
# columns (per-head statistics). coda-run --device cuda --check poisons the outputs
# with NaN and compares them with the CPU reference; here they are also
# compared with fp64 numpy.

import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program, write_program

rng = np.random.default_rng(23)
folder = tempfile.mkdtemp()


def program(name, text):
    return write_program(folder, name, text)


def partner(x, d):
    n = x.shape[1]
    p = np.arange(n) ^ d
    return np.where(p < n, x[:, np.minimum(p, n - 1)], 0)


def gemm(arrays):
    return ref.round_bf16(arrays["a"]) @ ref.round_bf16(arrays["b"]).T


GATED = program("gated", """
EPILOGUE gated(bias: f32[N]) -> (swiglu: bf16[M, N/2], geglu: f32[M, N/2], pre: bf16[M, N]) {
  x = input + bias;
  swiglu = silu(x) * partner(x, 1);
  geglu = gelu(x) * partner(x, 1);
  pre = x;
}
""")
SWIGLU_ONLY = program("swiglu", """
EPILOGUE swiglu -> (output: bf16[M, N/2]) {
  output = silu(input) * partner(input, 1);
}
""")
DISTANCES = program("distances", """
EPILOGUE distances -> (output: f32[M, N]) {
  output = input + 2 * partner(input, 1) + 3 * partner(input, 2) + 5 * partner(input, 4)
         + 7 * partner(input, 8) + 11 * partner(input, 32) + 13 * partner(input, 64)
         + row() * 0.001 + col() * 0.01;
}
""")
ROPE = """
EPILOGUE rope(pos: f32[M], inv_freq: f32[N], sign: f32[N]) -> (output: bf16[M, N]) {
  angle = pos * inv_freq;
  output = input * cos(angle) + partner(input, D) * sign * sin(angle);
}
"""

for m, n, k in ((333, 390, 200), (129, 1000, 72), (520, 264, 64)):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k)),
              "bias": random(rng, n)}
    x = gemm(arrays) + arrays["bias"]
    outs = run_program(GATED, arrays, ["swiglu", "geglu", "pre"], device="cuda",
                       extra=["--check"])
    ref.check(f"swiglu {m}x{n}x{k}", outs["swiglu"], ref.silu(x[:, 0::2]) * x[:, 1::2], "bf16")
    ref.check(f"geglu {m}x{n}x{k}", outs["geglu"], ref.gelu_tanh(x[:, 0::2]) * x[:, 1::2], "f32")
    ref.check(f"pre {m}x{n}x{k}", outs["pre"], x, "bf16")
    del arrays["bias"]
    acc = gemm(arrays)
    outs = run_program(SWIGLU_ONLY, arrays, ["output"], device="cuda", extra=["--check"])
    ref.check(f"swiglu alone {m}x{n}x{k}", outs["output"],
              ref.silu(acc[:, 0::2]) * acc[:, 1::2], "bf16")
    outs = run_program(DISTANCES, arrays, ["output"], device="cuda", extra=["--check"])
    want = acc + sum(w * partner(acc, d) for w, d in ((2, 1), (3, 2), (5, 4), (7, 8),
                                                     (11, 32), (13, 64)))
    want = want + np.arange(m)[:, None] * 0.001 + np.arange(n)[None, :] * 0.01
    ref.check(f"partners and coordinates {m}x{n}x{k}", outs["output"], want, "f32")

    # Rotary embeddings: interleaved pairs (distance 1) and rotate-half of
    # 128-column heads (distance 64), positions of ragged sequences.
    for d in (1, 64):
        column = np.arange(n) % (2 * d if d > 1 else 128)
        exponent = (column % d if d > 1 else column // 2) / 64.0
        inv_freq = (10000.0 ** -exponent).astype(np.float32)
        first = column < d if d > 1 else column % 2 == 0
        sign = np.where(first, -1.0, 1.0).astype(np.float32)
        pos = (np.arange(m) % 300).astype(np.float32)
        rope = {**arrays, "pos": pos, "inv_freq": inv_freq, "sign": sign}
        outs = run_program(program(f"rope{d}", ROPE.replace("D)", f"{d})")), rope, ["output"], device="cuda",
                           extra=["--check"])
        angle = (pos[:, None] * inv_freq[None, :]).astype(np.float32).astype(np.float64)
        want = acc * np.cos(angle) + partner(acc, d) * sign * np.sin(angle)
        ref.check(f"rope distance {d} {m}x{n}x{k}", outs["output"], want, "bf16")

# Inputs that repeat along the row (`N % p`): the rotary embedding from the
# 64 inverse frequencies of a 128-column head and its sign, V's columns
# (past 2 x 128) left as they are; from a cos/sin table per row; and
# periods that do not divide the tile (4, 256).
PERIODIC = program("periodic", """
EPILOGUE periodic(pos: f32[M], inv_freq: f32[N % 64], sign: f32[N % 128], rotated: f32[N],
                  cos_t: bf16[M, N % 64], sin_t: bf16[M, N % 64], t4: f32[N % 4],
                  t256: bf16[N % 256]) -> (rope: bf16[M, N], table: f32[M, N]) {
  angle = pos * inv_freq;
  turned = input * cos(angle) + partner(input, 64) * sign * sin(angle);
  rope = input + rotated * (turned - input);
  table = input * cos_t + partner(input, 64) * sign * sin_t + t4 * t256;
}
""")

for m, n, k in ((333, 390, 200), (129, 1000, 72), (520, 256, 64)):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k))}
    acc = gemm(arrays)
    column = np.arange(n)
    pos = (np.arange(m) % 300).astype(np.float32)
    inv_freq = (10000.0 ** -(np.arange(64) / 64.0)).astype(np.float32)
    sign = np.where(np.arange(128) < 64, -1.0, 1.0).astype(np.float32)
    arrays.update(pos=pos, inv_freq=inv_freq, sign=sign,
                  rotated=(column < 256).astype(np.float32),
                  cos_t=random(rng, m, 64), sin_t=random(rng, m, 64), t4=random(rng, 4),
                  t256=random(rng, 256))
    outs = run_program(PERIODIC, arrays, ["rope", "table"], device="cuda", extra=["--check"])
    angle = (pos[:, None] * inv_freq[column % 64][None, :]).astype(np.float32).astype(np.float64)
    turned = acc * np.cos(angle) + partner(acc, 64) * sign[column % 128] * np.sin(angle)
    want = np.where(column < 256, turned, acc)
    ref.check(f"periodic rope {m}x{n}x{k}", outs["rope"], want, "bf16")
    cos_t, sin_t = (ref.round_bf16(arrays[t]) for t in ("cos_t", "sin_t"))
    want = (acc * cos_t[:, column % 64] + partner(acc, 64) * sign[column % 128] * sin_t[:, column % 64]
            + arrays["t4"][column % 4] * ref.round_bf16(arrays["t256"])[column % 256])
    ref.check(f"periodic table {m}x{n}x{k}", outs["table"], want, "f32")

# Group reductions (per-head statistics): QK-norm's mean of squares over
# 128-column heads, and groups of 64, 8, 4 and 2 columns; the last group of
# each ragged N is partial.
GROUPS = program("groups", """
EPILOGUE groups(weight: f32[N]) -> (normed: bf16[M, N], stats: f32[M, N]) {
  normed = input * rsqrt(group_mean(input * input, 128) + 1e-6) * weight;
  stats = group_max(input, 64) + group_sum(input, 4) - group_mean(input, 2)
        + 0.5 * group_sum(input, 8);
}
""")


def group(reduce, x, width):
    out = np.empty_like(x)
    for start in range(0, x.shape[1], width):
        out[:, start:start + width] = reduce(x[:, start:start + width], axis=1, keepdims=True)
    return out


for m, n, k in ((333, 390, 200), (129, 1000, 72), (520, 256, 64)):
    arrays = {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k)),
              "weight": random(rng, n)}
    acc = gemm(arrays)
    outs = run_program(GROUPS, arrays, ["normed", "stats"], device="cuda", extra=["--check"])
    want = acc / np.sqrt(group(np.mean, acc * acc, 128) + 1e-6) * arrays["weight"]
    ref.check(f"group norm {m}x{n}x{k}", outs["normed"], want, "bf16")
    want = (group(np.max, acc, 64) + group(np.sum, acc, 4) - group(np.mean, acc, 2)
            + 0.5 * group(np.sum, acc, 8))
    ref.check(f"group statistics {m}x{n}x{k}", outs["stats"], want, "f32")

# An odd N cannot be split into pairs for an [M, N/2] output.
arrays = {"a": random(rng, 64, 64), "b": random(rng, 129, 64)}
error = run_program(SWIGLU_ONLY, arrays, ["output"], device="cuda", expect_failure=True)
print(error.strip().splitlines()[-1])
assert "needs an even N" in error, error
print("all passed")
