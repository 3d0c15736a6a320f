# REQUIRES: numpy
# RUN: %python %s %testlib
#
# bias + activation epilogues on the CPU reference path, against fp64 numpy:
# every activation, both layouts of A and B, bf16/f16/f32 operands, ragged M, N, K.

import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

PROGRAM = """
func.func @f(%a: tensor<?x?x{T}>, %b: tensor<?x?x{T}>, %bias: tensor<?xf32> {{coda.name = "bias"}})
    -> (tensor<?x?x{O}> {{coda.name = "output"}}) {{
  %0 = coda.gemm %a, %b {LAYOUT} ins(%bias : tensor<?xf32> [n])
      : tensor<?x?x{T}>, tensor<?x?x{T}> -> (tensor<?x?x{O}> [m, n]) {{
  ^bb0(%acc: f32, %bv: f32):
    %x = arith.addf %acc, %bv : f32
    %y = coda.activation {ACT} %x
    coda.yield %y : f32
  }}
  return %0 : tensor<?x?x{O}>
}}
"""

ACTIVATIONS = {
    "gelu_tanh": ref.gelu_tanh,
    "gelu_erf": ref.gelu_erf,
    "relu": ref.relu,
    "silu": ref.silu,
    "sigmoid": ref.sigmoid,
}

rng = np.random.default_rng(2)
cases = [
    # (dtype, transpose_a, transpose_b, M, N, K, activation)
    ("bf16", False, True, 37, 50, 24, "gelu_tanh"),
    ("bf16", True, False, 65, 33, 17, "gelu_erf"),
    ("f16", False, False, 19, 130, 40, "relu"),
    ("f16", True, True, 8, 9, 71, "silu"),
    ("f32", False, True, 100, 3, 5, "sigmoid"),
]
for dtype, ta, tb, m, n, k, act in cases:
    a = random(rng, *((k, m) if ta else (m, k)))
    b = random(rng, *((n, k) if tb else (k, n)))
    bias = random(rng, n)
    layout = " ".join(name for name, on in (("transpose_a", ta), ("transpose_b", tb)) if on)
    program = PROGRAM.format(T=dtype, O=dtype, LAYOUT=layout, ACT=act)
    out = run_program(program, {"a": a, "b": b, "bias": bias}, ["output"])["output"]
    ra, rb = ref.round_to(a, dtype), ref.round_to(b, dtype)
    acc = (ra.T if ta else ra) @ (rb.T if tb else rb)
    want = ACTIVATIONS[act](acc + bias.astype(np.float64))
    ref.check(f"{act} {dtype} ta={ta} tb={tb} {m}x{n}x{k}", out, want, dtype)
