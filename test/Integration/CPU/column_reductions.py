# REQUIRES: numpy
# RUN: %python %s %testlib
#
# Column reductions on the CPU reference path: the bias gradient (sum over m of
# the GEMM result) as an [n] output next to the main output, column max and
# mean, and a batched GEMM whose column sums are per batch ([b, n]).

import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

COLUMNS = """
func.func @f(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16> {coda.name = "output"}, tensor<?xf32> {coda.name = "dbias"},
        tensor<?xf32> {coda.name = "colmax"}, tensor<?xf32> {coda.name = "colmean"}) {
  %0, %1, %2, %3 = coda.gemm %a, %b transpose_a
      : tensor<?x?xbf16>, tensor<?x?xbf16>
      -> (tensor<?x?xbf16> [m, n], tensor<?xf32> [n], tensor<?xf32> [n], tensor<?xf32> [n]) {
  ^bb0(%acc: f32):
    %r = coda.activation relu %acc
    %s = coda.col_reduce sum %acc
    %mx = coda.col_reduce max %r
    %mn = coda.col_reduce mean %acc
    coda.yield %r, %s, %mx, %mn : f32, f32, f32, f32
  }
  return %0, %1, %2, %3 : tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}
"""

BATCHED = """
func.func @f(%a: tensor<?x?x?xf32>, %b: tensor<?x?xf32>, %bias: tensor<?xf32> {coda.name = "bias"})
    -> (tensor<?x?x?xf32> {coda.name = "output"}, tensor<?x?xf32> {coda.name = "dbias"}) {
  %0, %1 = coda.gemm %a, %b ins(%bias : tensor<?xf32> [n])
      : tensor<?x?x?xf32>, tensor<?x?xf32> -> (tensor<?x?x?xf32> [b, m, n], tensor<?x?xf32> [b, n]) {
  ^bb0(%acc: f32, %bv: f32):
    %x = arith.addf %acc, %bv : f32
    %s = coda.col_reduce sum %x
    coda.yield %x, %s : f32, f32
  }
  return %0, %1 : tensor<?x?x?xf32>, tensor<?x?xf32>
}
"""

rng = np.random.default_rng(7)
for m, n, k in [(45, 31, 20), (200, 8, 16)]:
    a, b = random(rng, k, m), random(rng, k, n)
    outs = run_program(COLUMNS, {"a": a, "b": b}, ["output", "dbias", "colmax", "colmean"])
    acc = ref.round_bf16(a).T @ ref.round_bf16(b)
    ref.check(f"relu {m}x{n}x{k}", outs["output"], np.maximum(acc, 0), "bf16")
    ref.check(f"dbias {m}x{n}x{k}", outs["dbias"], acc.sum(axis=0), "f32")
    ref.check(f"colmax {m}x{n}x{k}", outs["colmax"], np.maximum(acc, 0).max(axis=0), "f32")
    ref.check(f"colmean {m}x{n}x{k}", outs["colmean"], acc.mean(axis=0), "f32")

a, b, bias = random(rng, 3, 21, 10), random(rng, 10, 13), random(rng, 13)
outs = run_program(BATCHED, {"a": a, "b": b, "bias": bias}, ["output", "dbias"])
x = a.astype(np.float64) @ b.astype(np.float64) + bias
ref.check("batched output", outs["output"], x, "f32")
ref.check("batched dbias", outs["dbias"], x.sum(axis=1), "f32")
