# REQUIRES: numpy
# RUN: %python %s %testlib
#
# Every DSL builtin and operand kind through coda-run on the CPU reference
# path, against fp64 numpy: bf16, f16 and f32 operands, all four layouts,
# ragged shapes, alpha/beta/C, scalar/[M]/[N]/[M, N] operands, several outputs,
# group reductions over ragged last groups.

import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

PROGRAM = """
EPILOGUE builtins(v: f32[N], r: {T}[M, N], w: f32[M], s: f32)
    -> (o1: f32[M, N], o2: f32[M, N], o3: f32[M, N], o4: f32[M, N], o5: f32[M, N],
        o6: {T}[M, N], o7: f32[M, N], sums: f32[M], cols: f32[N]) {{
  x = input * s + v;                      # scalar and [N] operands
  p = abs(x) + 1;                         # positive, for log/sqrt/rsqrt/pow
  o1 = gelu(x) + gelu_erf(x) + relu(x) + silu(x) + sigmoid(x);
  o2 = tanh(x) + exp(-p) + log(p) + sqrt(p) + rsqrt(p);
  o3 = min(x, w) + max(x, r) + clamp(x, -0.5, 0.5);
  o4 = pow(p, 3) + pow(p, 0.5) - -x / 2;
  o5 = x - row_mean(x) + row_max(x) - row_sum(x) / 8;
  o6 = x * w + r;                         # [M] and [M, N] operands, output in {T}
  o7 = group_mean(x, 8) * x + group_max(x, 4) - group_sum(x, 16) + group_sum(w, 2);
  sums = row_sum(r);
  cols = col_sum(x);
}}
"""



def group(reduce, x, width):
    """`reduce` of x over each element's group of `width` columns (the last
    group of a ragged row holds the columns there are)."""
    out = np.empty_like(x)
    for start in range(0, x.shape[1], width):
        part = x[:, start:start + width]
        out[:, start:start + width] = reduce(part, axis=1, keepdims=True)
    return out


rng = np.random.default_rng(4)
cases = [("bf16", "mk", "nk", 37, 50, 24, False), ("f16", "km", "kn", 19, 64, 33, True),
         ("f32", "mk", "kn", 65, 17, 8, True), ("bf16", "km", "nk", 8, 40, 71, False)]
with tempfile.TemporaryDirectory() as folder:
    for dtype, la, lb, m, n, k, with_c in cases:
        path = os.path.join(folder, f"builtins_{dtype}.coda")
        open(path, "w").write(PROGRAM.format(T=dtype))
        a = random(rng, *((k, m) if la == "km" else (m, k)))
        b = random(rng, *((n, k) if lb == "nk" else (k, n)))
        arrays = {"a": a, "b": b, "v": random(rng, n), "r": random(rng, m, n), "w": random(rng, m)}
        if with_c:
            arrays["c"] = random(rng, m, n)
        outputs = ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "sums", "cols"]
        outs = run_program(path, arrays, outputs, scalars={"s": 0.5},
                           alpha=1.5 if with_c else None, beta=-0.25 if with_c else None,
                           extra=["--dtype", dtype, "--layout-a", la, "--layout-b", lb])
        ra, rb = ref.round_to(a, dtype), ref.round_to(b, dtype)
        acc = (ra.T if la == "km" else ra) @ (rb if lb == "kn" else rb.T)
        if with_c:
            acc = 1.5 * acc - 0.25 * ref.round_to(arrays["c"], dtype)
        r = ref.round_to(arrays["r"], dtype)
        w = arrays["w"].astype(np.float64)[:, None]
        x = acc * 0.5 + arrays["v"]
        p = np.abs(x) + 1
        want = {
            "o1": ref.gelu_tanh(x) + ref.gelu_erf(x) + ref.relu(x) + ref.silu(x) + ref.sigmoid(x),
            "o2": np.tanh(x) + np.exp(-p) + np.log(p) + np.sqrt(p) + 1 / np.sqrt(p),
            "o3": np.minimum(x, w) + np.maximum(x, r) + np.clip(x, -0.5, 0.5),
            "o4": p ** 3 + p ** 0.5 + x / 2,
            "o5": x - x.mean(1, keepdims=True) + x.max(1, keepdims=True) - x.sum(1, keepdims=True) / 8,
            "o6": x * w + r,
            "o7": (group(np.mean, x, 8) * x + group(np.max, x, 4) - group(np.sum, x, 16)
                   + group(np.sum, np.broadcast_to(w, x.shape), 2)),
            "sums": r.sum(axis=1),
            "cols": x.sum(axis=0),
        }
        for name, value in want.items():
            tol = dtype if name == "o6" else "f32"
            ref.check(f"{dtype} A {la} B {lb} {m}x{n}x{k}{' C' if with_c else ''} {name}",
                      outs[name], value, tol)

# A program's name is its own: epilogues named after the C library's functions
# that their code calls (the JIT links against it) compute what they say.
NAMED = {"expf": ("exp(input / 4)", lambda acc: np.exp(acc / 4)),
         "logf": ("log(abs(input) + 1)", lambda acc: np.log(np.abs(acc) + 1)),
         "exp2f": ("sigmoid(input)", ref.sigmoid),
         "tanhf": ("gelu(input)", ref.gelu_tanh)}
with tempfile.TemporaryDirectory() as folder:
    for name, (expression, formula) in NAMED.items():
        path = os.path.join(folder, name + ".coda")
        open(path, "w").write(f"EPILOGUE {name} {{ output = {expression}; }}")
        a, b = random(rng, 21, 13), random(rng, 30, 13)
        outs = run_program(path, {"a": a, "b": b}, ["output"], extra=["--dtype", "f32"])
        acc = ref.round_to(a, "f32") @ ref.round_to(b, "f32").T
        ref.check(f"EPILOGUE {name}", outs["output"], formula(acc), "f32")

# Outputs that copy an operand (the copy folds away: the output returns the
# operand's buffer), and epilogue operands named like the GEMM's a, b, alpha.
COPIES = """
EPILOGUE copies(a: f32[N], alpha: f32, x: f32[M, N]) -> (output: bf16[M, N], y: f32[M, N],
                                                         v: f32[N], w: f32[M, N]) {
  output = residual;
  y = x * 1;
  v = a;
  w = input * a + b * alpha;
}
"""
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "copies.coda")
    open(path, "w").write(COPIES)
    m, n, k = 19, 24, 16
    ga, gb = random(rng, m, k), random(rng, n, k)
    vec, mat = random(rng, n), random(rng, m, n)
    x, residual = random(rng, m, n), random(rng, m, n)
    np.save(os.path.join(folder, "vec.npy"), vec)
    np.save(os.path.join(folder, "mat.npy"), mat)
    outs = run_program(path, {"a": ga, "b": gb, "x": x, "residual": residual},
                       ["output", "y", "v", "w"], alpha=2.0, scalars={"alpha": 0.5},
                       extra=["--dtype", "f32", "--arg", f"a={folder}/vec.npy",
                              "--arg", f"b={folder}/mat.npy"])
    acc = 2.0 * (ref.round_to(ga, "f32") @ ref.round_to(gb, "f32").T)
    ref.check("copies output", outs["output"], ref.round_to(residual, "bf16"), "f32")
    ref.check("copies y", outs["y"], x.astype(np.float64), "f32")
    ref.check("copies v", outs["v"], vec.astype(np.float64), "f32")
    ref.check("copies w", outs["w"], acc * vec + mat * 0.5, "f32")

# bf16(x) and f16(x): the f32 value rounded to nearest even, the number it then
# is (compared bit for bit with the rounding of the f32 value the program also
# writes); what follows computes on it (a LayerNorm of the rounded h).
ROUNDED = """
EPILOGUE rounded(r: bf16[M, N]) -> (x: f32[M, N], xb: f32[M, N], xh: f32[M, N], ln: f32[M, N]) {
  x = input * 3 + r;
  xb = bf16(x);
  xh = f16(x);
  d = xb - row_mean(xb);
  ln = d * rsqrt(row_mean(d * d) + 1e-5);
}
"""
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "rounded.coda")
    open(path, "w").write(ROUNDED)
    a, b, r = random(rng, 29, 16), random(rng, 45, 16), random(rng, 29, 45)
    outs = run_program(path, {"a": a, "b": b, "r": r}, ["x", "xb", "xh", "ln"],
                       extra=["--dtype", "bf16"])
    x = outs["x"].astype(np.float32)
    for name, want in (("xb", ref.round_bf16(x)), ("xh", ref.round_to(x, "f16"))):
        if not np.array_equal(outs[name].astype(np.float64), want) or np.array_equal(want, x):
            sys.exit(f"{name}: not x rounded to nearest even")
    xb = ref.round_bf16(x)
    d = xb - xb.mean(1, keepdims=True)
    ref.check("a LayerNorm of bf16(x)", outs["ln"], d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5),
              "f32")
