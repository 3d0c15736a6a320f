# REQUIRES: cuda-gpu, numpy
# RUN: env CODA_CACHE_DIR=%t.cache %python %s %testlib
#
# The fused GPU kernel on 200 random problems: bf16, f16 and f32 (tf32)
# operands, all four layouts of A and B (the one layout tf32 supports for
# f32), ragged M, N and K (not multiples of
# the 128 x N x 64 tile; in half the cases rows of A and B that are not a
# multiple of 16 bytes, which the runtime stages for TMA), every input kind ([n] bias, [m, n] residual, [m]
# scale, scalars), alpha/beta/C, dropout, outputs with their own dtypes, and in
# half the cases a column sum (with f32 atomics, or in every other one of them
# merged in a fixed order under --deterministic).
# Each run goes through coda-run --device cuda --check: outputs are poisoned
# with NaN before the launch and compared with the CPU reference; every output
# is also compared with an fp64 numpy reference, and the dropout mask must be
# bit-identical to the definition. `sweep.py TESTLIB I/N` runs the problems
# whose index is I modulo N (the same problems as the whole sweep draws), so
# that a slow tool (compute-sanitizer racecheck) can run the sweep in shards.

import sys

sys.path.insert(0, sys.argv[1])
shard, shards = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "0/1").split("/"))
if not 0 <= shard < shards:
    sys.exit(f"shard {shard}/{shards}: expected I/N with 0 <= I < N")
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

PROGRAM = """
func.func @sweep(%a: tensor<?x?x{T}>, %b: tensor<?x?x{T}>, {C_ARG}
                 %bias: tensor<?xf32> {{coda.name = "bias"}},
                 %res: tensor<?x?x{T}> {{coda.name = "residual"}},
                 %rs: tensor<?xf32> {{coda.name = "rs"}},
                 %gain: f32 {{coda.name = "gain"}},
                 %seed: i64 {{coda.name = "seed"}})
    -> (tensor<?x?x{T}> {{coda.name = "output"}}, tensor<?x?xf32> {{coda.name = "pre"}},
        tensor<?x?xf32> {{coda.name = "drop"}}{COLSUM_RESULT}) {{
  %0, %1, %2{COLSUM_VALUE} = coda.gemm %a, %b {LAYOUT} {C_CLAUSE}
      ins(%bias : tensor<?xf32> [n], %res : tensor<?x?x{T}> [m, n],
          %rs : tensor<?xf32> [m], %gain : f32, %seed : i64)
      : tensor<?x?x{T}>, tensor<?x?x{T}>
      -> (tensor<?x?x{T}> [m, n], tensor<?x?xf32> [m, n], tensor<?x?xf32> [m, n]{COLSUM_DIMS}) {{
  ^bb0(%acc: f32, %bv: f32, %r: f32, %s: f32, %g: f32, %sd: i64):
    %x = arith.mulf %acc, %g : f32
    %pre = arith.addf %x, %bv : f32
    %act = coda.activation {ACT} %pre
    %d = coda.dropout %act, %sd {{p = {P} : f32}}
    %y = arith.mulf %d, %s : f32
    %out = arith.addf %y, %r : f32
    %drop = coda.dropout %pre, %sd {{p = {P} : f32, stream = 1 : i32}}
    {COLSUM_OP}
    coda.yield %out, %pre, %drop{COLSUM_YIELD}
  }}
  return %0, %1, %2{COLSUM_VALUE} : tensor<?x?x{T}>, tensor<?x?xf32>, tensor<?x?xf32>{COLSUM_TYPE}
}}
"""

ACTIVATIONS = {"gelu_tanh": ref.gelu_tanh, "gelu_erf": ref.gelu_erf,
               "relu": ref.relu, "silu": ref.silu, "sigmoid": ref.sigmoid}
DTYPES = ["bf16", "f16", "f32"]

rng = np.random.default_rng(2026)


def aligned(value, dtype):
    """Rounds a contiguous extent up to a multiple of 16 bytes."""
    multiple = 4 if dtype == "f32" else 8
    return max(multiple, (value + multiple - 1) // multiple * multiple)


worst = {}
CASES = 200
for case in range(CASES):
    dtype = DTYPES[case % 3]
    ta, tb = bool(case & 4), bool(case & 8)
    if dtype == "f32":  # tf32 wgmma reads f32 only K-contiguous: A [M, K], B [N, K]
        ta, tb = False, True
    with_c = case % 4 == 1
    act = list(ACTIVATIONS)[case % 5]
    p = [0.0, 0.1, 0.5][case % 3 if case % 7 else 1]
    m, n, k = (int(v) for v in rng.integers(1, 700, size=3))
    # Even cases: rows of 16-byte multiples (the contiguous extents of A and
    # B), which TMA reads where they are; odd ones: any sizes, whose
    # unaligned operands the runtime stages for TMA.
    if case % 2 == 0:
        if not ta:
            k = aligned(k, dtype)
        else:
            m = aligned(m, dtype)
        if tb:
            k = aligned(k, dtype)
        else:
            n = aligned(n, dtype)
    a = random(rng, *((k, m) if ta else (m, k)))
    b = random(rng, *((n, k) if tb else (k, n))) / np.float32(np.sqrt(k))
    c = random(rng, m, n)
    bias, res, rs = random(rng, n), random(rng, m, n), random(rng, m)
    gain, seed = 0.5 + case / CASES, int(rng.integers(0, 2**63))
    colsum, deterministic = case % 4 >= 2, case % 8 >= 6
    layout = " ".join(f for f, on in (("transpose_a", ta), ("transpose_b", tb)) if on)
    program = PROGRAM.format(
        T=dtype, LAYOUT=layout, ACT=act, P=repr(p),
        COLSUM_RESULT=', tensor<?xf32> {coda.name = "colsum"}' if colsum else "",
        COLSUM_VALUE=", %3" if colsum else "",
        COLSUM_DIMS=", tensor<?xf32> [n]" if colsum else "",
        COLSUM_OP="%colsum = coda.col_reduce sum %pre" if colsum else "",
        COLSUM_YIELD=", %colsum : f32, f32, f32, f32" if colsum else " : f32, f32, f32",
        COLSUM_TYPE=", tensor<?xf32>" if colsum else "",
        C_ARG=f"%c: tensor<?x?x{dtype}>, %alpha: f32, %beta: f32," if with_c else "",
        C_CLAUSE=f"c(%c : tensor<?x?x{dtype}>) alpha(%alpha) beta(%beta)" if with_c else "")
    if case % shards != shard:
        continue
    arrays = {"a": a, "b": b, "bias": bias, "residual": res, "rs": rs}
    if with_c:
        arrays["c"] = c
    outs = run_program(program, arrays, ["output", "pre", "drop"] + ["colsum"] * colsum, seed=seed,
                       scalars={"gain": gain}, device="cuda",
                       extra=["--check"] + (["--deterministic"] if deterministic else []),
                       alpha=0.75 if with_c else None, beta=-0.5 if with_c else None)

    ra, rb = ref.round_to(a, dtype), ref.round_to(b, dtype)
    acc = (ra.T if ta else ra) @ (rb.T if tb else rb)
    if with_c:
        acc = 0.75 * acc - 0.5 * ref.round_to(c, dtype)
    pre = acc * np.float64(np.float32(gain)) + bias
    out = ref.dropout(ACTIVATIONS[act](pre), p, seed) * rs[:, None] + ref.round_to(res, dtype)
    name = f"case {case}: {dtype} A {'km' if ta else 'mk'} B {'nk' if tb else 'kn'} " \
           f"{m}x{n}x{k} {act} p={p}{' C' if with_c else ''}" \
           f"{' deterministic' if deterministic else ''}"
    f32_tol = "tf32" if dtype == "f32" else "f32"
    out_tol = "tf32" if dtype == "f32" else dtype
    ref.check(name + " output", outs["output"], out, out_tol)
    ref.check(name + " pre", outs["pre"], pre, f32_tol)
    if colsum:
        ref.check(name + " colsum", outs["colsum"], pre.sum(axis=0), f32_tol)
    keep = ref.dropout_mask(seed, (m, n), p, stream=1) if p > 0 else np.ones((m, n), bool)
    assert np.array_equal(outs["drop"] != 0, keep), name + ": dropout mask differs"
    for key, got, want in (("output", outs["output"], out),
                           ("pre", outs["pre"], pre)):
        worst[(dtype, key)] = max(worst.get((dtype, key), 0.0), ref.rel_error(got, want))

print("worst relative errors:", ", ".join(f"{d} {k} {v:.2e}" for (d, k), v in sorted(worst.items())))
