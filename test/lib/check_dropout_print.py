"""Checks a printed dropout result against coda's dropout definition.

Reads the output of printMemrefF32 for an [M, N] memref on stdin and checks
that element (m, n) is dropout(1, P0) + 4 * dropout(1, P1), with streams 0 and
1 and the seed on the command line, using the definition in python/coda.

    ... | check_dropout_print.py SEED P0 P1
"""

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from coda.dropout import dropout  # noqa: E402

seed, p0, p1 = int(sys.argv[1], 0), float(sys.argv[2]), float(sys.argv[3])
text = sys.stdin.read()
rows, cols = (int(s) for s in re.search(r"sizes = \[(\d+), (\d+)\]", text).groups())
values = np.array([float(v) for v in re.findall(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?",
                                                text[text.index("data ="):])])
if values.size != rows * cols:
    sys.exit(f"read {values.size} values for a {rows}x{cols} memref")
ones = np.ones((rows, cols))
expected = dropout(ones, p0, seed, stream=0) + 4 * dropout(ones, p1, seed, stream=1)
got = values.reshape(rows, cols)
bad = np.argwhere(np.abs(got - expected) > 1e-4 * np.maximum(1.0, np.abs(expected)))
if bad.size:
    m, n = bad[0]
    sys.exit(f"element ({m}, {n}): expected {expected[m, n]}, got {got[m, n]}")
print(f"ok: {rows}x{cols} elements, stream 0 kept {int((dropout(ones, p0, seed) != 0).sum())}")
