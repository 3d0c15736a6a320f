"""The data of the host-function tests (host-mlp.mlir): its inputs (37 rows,
a ragged M), the host's own step between its programs, and comparisons.

    host_mlp.py inputs DIR        x, w1, b1, w2 (.npy, random, non-zero)
    host_mlp.py halve IN OUT      what @mlp does to h between its programs
    host_mlp.py same A B          A and B hold the same values (exit 1 if not)
    host_mlp.py bf16-math X GOT   GOT is tanh(x) / sqrt(x^2 + 1) of X within the
                                  rounding of its five bf16 ops (exit 1 if not)
"""
import sys

import numpy as np


def main():
    command = sys.argv[1]
    if command == "inputs":
        folder = sys.argv[2]
        r = np.random.default_rng(3)
        np.save(f"{folder}/x.npy", r.standard_normal((37, 64)).astype(np.float32))
        np.save(f"{folder}/w1.npy", (r.standard_normal((96, 64)) / 8).astype(np.float32))
        np.save(f"{folder}/b1.npy", r.standard_normal((96,)).astype(np.float32))
        np.save(f"{folder}/w2.npy", (r.standard_normal((64, 96)) / 8).astype(np.float32))
        np.save(f"{folder}/w1_rows95.npy", np.ones((95, 64), np.float32))
        np.save(f"{folder}/r36.npy", np.ones((36, 96), np.float32))
        np.save(f"{folder}/x4.npy", r.standard_normal((2, 3, 4, 5)).astype(np.float32))
    elif command == "halve":
        np.save(sys.argv[3], np.load(sys.argv[2]) * 0.5)
    elif command == "same":
        a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
        if a.shape != b.shape or not np.array_equal(a, b):
            sys.exit(f"{sys.argv[2]} and {sys.argv[3]} differ")
        print(f"same {a.shape}, {np.count_nonzero(a)} non-zero")
    elif command == "bf16-math":
        x, got = np.load(sys.argv[2]).astype(np.float64), np.load(sys.argv[3])
        want = np.tanh(x) / np.sqrt(x * x + 1)
        worst = np.max(np.abs(got - want) / (np.abs(want) + 1e-3))
        if not worst < 2 ** -5:
            sys.exit(f"bf16 math differs by {worst:.3g} (relative)")
        print(f"bf16 math within {worst:.2g} (relative)")


if __name__ == "__main__":
    main()
