"""The data of the host-function tests (host-mlp.mlir, host-graph.mlir): their
inputs (37 rows, a ragged M), the host's own step between its programs, and
comparisons.

    host_mlp.py inputs DIR        x, w1, b1, w2 (.npy, random, non-zero)
    host_mlp.py halve IN OUT      what @mlp does to h between its programs
    host_mlp.py same A B          A and B hold the same values (exit 1 if not)
    host_mlp.py bf16-math X GOT   GOT is tanh(x) / sqrt(x^2 + 1) of X within the
                                  rounding of its five bf16 ops (exit 1 if not)
    host_mlp.py chain DIR GOT     GOT is host-graph.mlir's @chain of DIR's
                                  inputs (xg, w1g..w4g) within bf16's rounding
                                  (exit 1 if not)
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
        np.save(f"{folder}/xg.npy", r.standard_normal((37, 64)).astype(np.float32))
        for i, shape in enumerate([(96, 64), (128, 96), (96, 128), (48, 96)]):
            np.save(f"{folder}/w{i + 1}g.npy", (r.standard_normal(shape) / 8).astype(np.float32))
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
    elif command == "chain":
        folder, got = sys.argv[2], np.load(sys.argv[3]).astype(np.float64)
        a, w = np.load(f"{folder}/xg.npy").astype(np.float64), {}
        for i in range(1, 5):
            w[i] = np.load(f"{folder}/w{i}g.npy").astype(np.float64)
        want = np.tanh(a @ w[1].T @ w[2].T) @ w[3].T @ w[4].T
        error = np.linalg.norm(got - want) / np.linalg.norm(want)
        if got.shape != want.shape or not error < 2e-2:
            sys.exit(f"the chain is {got.shape}, {error:.3g} from float64 (relative)")
        print(f"chain within {error:.2g} of float64 (relative)")


if __name__ == "__main__":
    main()
