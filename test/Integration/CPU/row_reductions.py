# REQUIRES: numpy
# RUN: %python %s %testlib
#
# Row reductions on the CPU reference path: a LayerNorm epilogue (mean and
# variance over n, rsqrt, gamma/beta vectors along n, mean and rstd kept as [m]
# outputs) and a softmax over each row (row max, exp, row sum).

import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

LAYERNORM = """
func.func @f(%a: tensor<?x?xf16>, %b: tensor<?x?xf16>,
             %res: tensor<?x?xf16> {coda.name = "residual"},
             %gamma: tensor<?xf32> {coda.name = "gamma"}, %beta: tensor<?xf32> {coda.name = "beta"})
    -> (tensor<?x?xf16> {coda.name = "output"}, tensor<?xf32> {coda.name = "mean"},
        tensor<?xf32> {coda.name = "rstd"}) {
  %0, %1, %2 = coda.gemm %a, %b
      ins(%res : tensor<?x?xf16> [m, n], %gamma : tensor<?xf32> [n], %beta : tensor<?xf32> [n])
      : tensor<?x?xf16>, tensor<?x?xf16> -> (tensor<?x?xf16> [m, n], tensor<?xf32> [m], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %r: f32, %g: f32, %bt: f32):
    %x = arith.addf %acc, %r : f32
    %mu = coda.row_reduce mean %x
    %d = arith.subf %x, %mu : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %ve = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %ve : f32
    %n = arith.mulf %d, %rstd : f32
    %y = arith.mulf %n, %g : f32
    %z = arith.addf %y, %bt : f32
    coda.yield %z, %mu, %rstd : f32, f32, f32
  }
  return %0, %1, %2 : tensor<?x?xf16>, tensor<?xf32>, tensor<?xf32>
}
"""

SOFTMAX = """
func.func @f(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %scale: f32 {coda.name = "scale"})
    -> (tensor<?x?xf32> {coda.name = "output"}, tensor<?xf32> {coda.name = "rowmax"}) {
  %0, %1 = coda.gemm %a, %b transpose_b ins(%scale : f32)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xf32> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %s: f32):
    %x = arith.mulf %acc, %s : f32
    %mx = coda.row_reduce max %x
    %d = arith.subf %x, %mx : f32
    %e = math.exp %d : f32
    %sum = coda.row_reduce sum %e
    %p = arith.divf %e, %sum : f32
    coda.yield %p, %mx : f32, f32
  }
  return %0, %1 : tensor<?x?xf32>, tensor<?xf32>
}
"""

rng = np.random.default_rng(3)
for m, n, k in [(17, 96, 40), (64, 33, 9)]:
    a, b, res = random(rng, m, k), random(rng, k, n), random(rng, m, n)
    gamma, beta = random(rng, n), random(rng, n)
    outs = run_program(LAYERNORM, {"a": a, "b": b, "residual": res, "gamma": gamma, "beta": beta},
                       ["output", "mean", "rstd"])
    x = ref.round_to(a, "f16") @ ref.round_to(b, "f16") + ref.round_to(res, "f16")
    mu = x.mean(axis=1)
    var = ((x - mu[:, None]) ** 2).mean(axis=1)
    rstd = 1.0 / np.sqrt(var + 1e-5)
    want = (x - mu[:, None]) * rstd[:, None] * gamma[None, :] + beta[None, :]
    ref.check(f"layernorm {m}x{n}x{k}", outs["output"], want, "f16")
    ref.check(f"mean {m}x{n}x{k}", outs["mean"], mu, "f32")
    ref.check(f"rstd {m}x{n}x{k}", outs["rstd"], rstd, "f32")

    b2 = random(rng, n, k)
    outs = run_program(SOFTMAX, {"a": a, "b": b2}, ["output", "rowmax"], scalars={"scale": 0.125})
    x = 0.125 * (ref.round_bf16(a) @ ref.round_bf16(b2).T)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref.check(f"softmax {m}x{n}x{k}", outs["output"], e / e.sum(axis=1, keepdims=True), "f32")
    ref.check(f"rowmax {m}x{n}x{k}", outs["rowmax"], x.max(axis=1), "f32")
    assert np.allclose(outs["output"].sum(axis=1), 1.0, atol=1e-5)
