# REQUIRES: numpy
# RUN: %python %s %testlib
#
# coda.dropout on the CPU reference path: p = 0 is the identity, p = 1 gives
# zeros, a fixed seed gives a fixed mask equal to the Philox-4x32-10 definition
# (computed independently in numpy, itself checked against the Random123
# known-answer vectors), about p of the elements are dropped, kept ones are
# scaled by 65536 / (65536 - t), and streams and seeds give independent masks.

import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_test import random, run_program

# Philox itself, against the Random123 known-answer vectors.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
for counter, key, expected in KAT:
    got = tuple(int(w) for w in ref.philox4x32(*[np.uint64(c) for c in counter], *key))
    assert got == expected, f"philox {counter} {key}: {got} != {expected}"

PROGRAM = """
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %seed: i64 {{coda.name = "seed"}})
    -> (tensor<?x?xf32> {{coda.name = "output"}}, tensor<?x?xf32> {{coda.name = "second"}}) {{
  %0, %1 = coda.gemm %a, %b ins(%seed : i64)
      : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n], tensor<?x?xf32> [m, n]) {{
  ^bb0(%acc: f32, %s: i64):
    %d = coda.dropout %acc, %s {{p = {P} : f32}}
    %e = coda.dropout %acc, %s {{p = {P} : f32, stream = 1 : i32}}
    coda.yield %d, %e : f32, f32
  }}
  return %0, %1 : tensor<?x?xf32>, tensor<?x?xf32>
}}
"""

rng = np.random.default_rng(5)
M, N, K = 301, 259, 3
a = random(rng, M, K)
b = random(rng, K, N)
acc = a.astype(np.float64) @ b.astype(np.float64)
assert np.all(acc != 0)


def run(p, seed):
    outs = run_program(PROGRAM.format(P=repr(float(p))), {"a": a, "b": b},
                       ["output", "second"], seed=seed)
    return outs["output"], outs["second"]


# p = 0: identity (bit-exact up to the f32 GEMM).
out, _ = run(0.0, 1)
ref.check("p=0 identity", out, acc, "f32")

# p = 1: every element dropped, exactly zero.
out, _ = run(1.0, 1)
assert np.all(out == 0.0), "p=1 must give zeros"
print("p=1 zeros: ok")

for p, seed in [(0.1, 7), (0.5, 0xDEADBEEF12345678), (0.9, 3)]:
    out, second = run(p, seed)
    kept = out != 0
    t = ref.dropout_threshold(p)
    want_kept = ref.dropout_bits(seed, 0, 0, *np.meshgrid(np.arange(M), np.arange(N), indexing="ij")) >= t
    assert np.array_equal(kept, want_kept), f"p={p} seed={seed}: mask differs from the Philox definition"
    # Kept elements scaled by 65536 / (65536 - t), rounded to f32.
    scale = float(np.float32(65536.0 / (65536.0 - t)))
    ref.check(f"p={p} kept values", out[kept], acc[kept] * scale, "f32")
    # About p of the elements are dropped (5 standard deviations).
    dropped = 1.0 - kept.mean()
    sigma = np.sqrt(p * (1 - p) / kept.size)
    assert abs(dropped - t / 65536.0) < 5 * sigma, f"p={p}: dropped {dropped}"
    print(f"p={p} seed={seed:#x}: mask matches Philox, dropped {dropped:.4f}")
    # Stream 1 is another mask, also as defined.
    want_second = ref.dropout_bits(seed, 1, 0, *np.meshgrid(np.arange(M), np.arange(N), indexing="ij")) >= t
    assert np.array_equal(second != 0, want_second), "stream 1 mask differs"
    assert not np.array_equal(kept, second != 0), "streams 0 and 1 gave the same mask"

# A fixed seed gives a fixed mask; another seed another one.
first, _ = run(0.5, 42)
again, _ = run(0.5, 42)
other, _ = run(0.5, 43)
assert np.array_equal(first, again), "same seed, different results"
assert not np.array_equal(first != 0, other != 0), "different seeds, same mask"
print("determinism: ok")
