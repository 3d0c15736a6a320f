"""fp64 references for coda programs, written independently of the compiler.

Rounding to the 16-bit operand types, coda's dropout (from the python package),
the activations, and helpers that compare outputs. Tests
import this module (lit substitutes %testlib for its folder).
"""

import numpy as np

# ---------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------


def round_bf16(x):
    """Rounds float32 values to bf16 (nearest even), returned as float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(x), np.nan, out)


def round_to(x, dtype):
    """Rounds to the operand type named `dtype` ("bf16", "f16", "f32")."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    return x.astype(np.float64)


# ---------------------------------------------------------------------------
# Dropout: the definition shipped in the python package (python/coda).
# ---------------------------------------------------------------------------

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from coda.dropout import (dropout, dropout_bits, dropout_mask,  # noqa: E402,F401
                          dropout_threshold, philox4x32)


# ---------------------------------------------------------------------------
# Activations (fp64)
# ---------------------------------------------------------------------------


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def relu(x):
    return np.maximum(x, 0.0)


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

# Relative-norm tolerance of an output rounded to each type, with fp32 math;
# "tf32" is an f32 output of a GEMM of f32 operands on tensor cores.
TOLERANCE = {"f32": 1e-5, "bf16": 4e-3, "f16": 6e-4, "tf32": 2e-3}


def rel_error(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} != expected {want.shape}")
    if not np.all(np.isfinite(got)):
        raise AssertionError("output holds NaN or Inf")
    denom = max(np.linalg.norm(want), 1e-30)
    return float(np.linalg.norm(got - want) / denom)


def check(name, got, want, dtype):
    err = rel_error(got, want)
    tol = TOLERANCE[dtype]
    status = "ok" if err <= tol else "FAIL"
    print(f"{name}: rel error {err:.3e} (tolerance {tol:.0e}) {status}")
    if err > tol:
        raise SystemExit(1)
