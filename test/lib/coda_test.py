"""Runs coda programs with coda-run on numpy data, for the end-to-end tests.

    outs = run_program(PROGRAM_TEXT, {"a": a, "b": b, "bias": bias},
                       outputs=["output"], seed=3)

writes the arrays to .npy files in a fresh folder, runs coda-run on the
program (MLIR text or a path), and returns the outputs as float64 arrays.
"""

import os
import subprocess
import tempfile

import numpy as np

ROLE_FLAGS = ("a", "b", "c")


def run_program(program, arrays, outputs, seed=None, alpha=None, beta=None,
                scalars=None, device="cpu", extra=(), expect_failure=False):
    scalars = scalars or {}
    with tempfile.TemporaryDirectory() as folder:
        if os.path.exists(str(program)):
            path = str(program)
        else:
            path = os.path.join(folder, "program.mlir")
            with open(path, "w") as f:
                f.write(program)
        cmd = ["coda-run", path, "--device", device]
        for name, array in arrays.items():
            file = os.path.join(folder, name + ".npy")
            np.save(file, np.ascontiguousarray(array, dtype=np.float32))
            if name in ROLE_FLAGS:
                cmd += ["--" + name, file]
            else:
                cmd += ["--arg", f"{name}={file}"]
        for name, value in scalars.items():
            cmd += ["--arg", f"{name}={value!r}"]
        if seed is not None:
            cmd += ["--seed", str(seed)]
        if alpha is not None:
            cmd += ["--alpha", repr(float(alpha))]
        if beta is not None:
            cmd += ["--beta", repr(float(beta))]
        files = {}
        for name in outputs:
            files[name] = os.path.join(folder, name + ".out.npy")
            cmd += ["--out", f"{name}={files[name]}"]
        cmd += list(extra)
        result = subprocess.run(cmd, capture_output=True, text=True)
        if expect_failure:
            if result.returncode == 0:
                raise AssertionError("coda-run succeeded but should have failed")
            return result.stderr
        if result.returncode != 0:
            raise AssertionError(f"coda-run failed ({result.returncode}):\n"
                                 f"{' '.join(cmd)}\n{result.stdout}{result.stderr}")
        return {name: np.load(file).astype(np.float64)
                for name, file in files.items()}


def random(rng, *shape):
    """Standard normal float32 values, bounded away from zero (no exact zeros)."""
    x = rng.standard_normal(shape).astype(np.float32)
    return np.where(np.abs(x) < 1e-3, np.float32(0.5), x)


def write_program(folder, name, text):
    """The DSL source `text` as <folder>/<name>.coda; its path."""
    path = os.path.join(folder, name + ".coda")
    with open(path, "w") as f:
        f.write(text)
    return path
