"""Runs a host function with coda-run --entry in two modules (as exported,
and after coda-raise-linalg and coda-outline-programs) on the same random
inputs, and checks that every result agrees.

    check_entry.py BEFORE.mlir AFTER.mlir FUNCTION [--rtol R] [--atol A]
        [-- CODA-RUN FLAGS OF THE SECOND RUN...]

The inputs (normal, non-zero) are shaped from FUNCTION's signature in
BEFORE (static sizes; a dynamic size is 9). Prints the programs AFTER
launched; exits 1 on a mismatch.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def signature(text, function):
    """The shapes of `function`'s tensor arguments and its result count."""
    match = re.search(r"func\.func (?:public |private )?@" + re.escape(function) +
                      r"\((.*?)\)\s*(?:->\s*(\(.*?\)|[^{]*?))?\s*(?:attributes .*?)?\{",
                      text, re.S)
    if not match:
        sys.exit(f"no function @{function}")
    shapes = []
    for dims in re.findall(r"tensor<([^>]*)>", match.group(1)):
        sizes = dims.split("x")[:-1]
        shapes.append(tuple(9 if s == "?" else int(s) for s in sizes))
    results = len(re.findall(r"tensor<", match.group(2) or ""))
    return shapes, results


def run(module, function, folder, tag, shapes, results, extra):
    cmd = ["coda-run", module, "--entry", function, *extra]
    cmd += [f"--arg=arg{i}={folder}/in{i}.npy" for i in range(len(shapes))]
    cmd += [f"--out=result{i}={folder}/{tag}{i}.npy" for i in range(results)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout, [np.load(f"{folder}/{tag}{i}.npy") for i in range(results)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("function")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    shapes, results = signature(open(args.before).read(), args.function)
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as folder:
        for i, shape in enumerate(shapes):
            value = rng.standard_normal(shape).astype(np.float32)
            value[value == 0] = 0.5
            np.save(os.path.join(folder, f"in{i}.npy"), value)
        _, want = run(args.before, args.function, folder, "before", shapes, results, [])
        report, got = run(args.after, args.function, folder, "after", shapes, results, args.extra)
        for i, (g, w) in enumerate(zip(got, want)):
            if not np.allclose(g, w, rtol=args.rtol, atol=args.atol):
                sys.exit(f"{args.function}: result{i} differs by {np.abs(g - w).max():.3g}")
        print(report.splitlines()[0])
        print(f"{args.function}: {results} result(s) agree")


if __name__ == "__main__":
    main()
