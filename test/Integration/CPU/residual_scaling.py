# REQUIRES: numpy
# RUN: %python %s %testlib
#
# Residual adds and GEMM scaling on the CPU reference path: alpha * A B + beta * C
# with C in bf16, a residual [m, n] input, a per-row [m] scale and a scalar input,
# two outputs with their own dtypes (bf16 result and f32 pre-activation).

import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

PROGRAM = """
func.func @f(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %c: tensor<?x?xbf16>,
             %alpha: f32, %beta: f32,
             %res: tensor<?x?xbf16> {coda.name = "residual"},
             %rs: tensor<?xf32> {coda.name = "rs"},
             %gain: f32 {coda.name = "gain"})
    -> (tensor<?x?xbf16> {coda.name = "output"}, tensor<?x?xf32> {coda.name = "pre"}) {
  %0, %1 = coda.gemm %a, %b transpose_b c(%c : tensor<?x?xbf16>) alpha(%alpha) beta(%beta)
      ins(%res : tensor<?x?xbf16> [m, n], %rs : tensor<?xf32> [m], %gain : f32)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n], tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32, %r: f32, %s: f32, %g: f32):
    %pre = arith.mulf %acc, %g : f32
    %x = arith.mulf %pre, %s : f32
    %y = arith.addf %x, %r : f32
    coda.yield %y, %pre : f32, f32
  }
  return %0, %1 : tensor<?x?xbf16>, tensor<?x?xf32>
}
"""

rng = np.random.default_rng(11)
for m, n, k in [(33, 47, 29), (128, 64, 64), (1, 5, 130)]:
    a, b, c = random(rng, m, k), random(rng, n, k), random(rng, m, n)
    res, rs = random(rng, m, n), random(rng, m)
    alpha, beta, gain = 0.75, -1.5, 1.25
    outs = run_program(PROGRAM, {"a": a, "b": b, "c": c, "residual": res, "rs": rs},
                       ["output", "pre"], alpha=alpha, beta=beta,
                       scalars={"gain": gain})
    acc = alpha * (ref.round_bf16(a) @ ref.round_bf16(b).T) + beta * ref.round_bf16(c)
    pre = acc * gain
    want = pre * rs.astype(np.float64)[:, None] + ref.round_bf16(res)
    ref.check(f"output {m}x{n}x{k}", outs["output"], want, "bf16")
    ref.check(f"pre {m}x{n}x{k}", outs["pre"], pre, "f32")
