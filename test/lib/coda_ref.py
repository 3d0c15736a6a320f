"""fp64 references for coda programs, written independently of the compiler.

Rounding to the 16-bit operand types, Philox-4x32-10 and coda's dropout mask,
the activations, and helpers that generate inputs and compare outputs. Tests
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
# Philox-4x32-10 and dropout
# ---------------------------------------------------------------------------

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox-4x32-10 on arrays of uint64 holding 32-bit counters and keys."""
    c = [np.asarray(v, dtype=np.uint64) & MASK32 for v in (c0, c1, c2, c3)]
    k0 = np.uint64(k0 & MASK32)
    k1 = np.uint64(k1 & MASK32)
    for r in range(10):
        if r:
            k0 = np.uint64((int(k0) + W0) & MASK32)
            k1 = np.uint64((int(k1) + W1) & MASK32)
        p0 = np.uint64(M0) * c[0]
        p1 = np.uint64(M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(MASK32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(MASK32)
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def dropout_bits(seed, stream, batch, rows, cols):
    """The 16 random bits coda.dropout draws for elements (batch, row, col)."""
    rows = np.asarray(rows, dtype=np.uint64)
    cols = np.asarray(cols, dtype=np.uint64)
    group = ((cols >> np.uint64(5)) << np.uint64(2)) | ((cols >> np.uint64(1)) & np.uint64(3))
    words = philox4x32(group, rows, np.uint64(stream) + 0 * rows, np.uint64(batch) + 0 * rows,
                       seed & MASK32, (seed >> 32) & MASK32)
    word_index = (cols >> np.uint64(3)) & np.uint64(3)
    word = np.choose(word_index.astype(np.int64), words)
    return (word >> ((cols & np.uint64(1)) << np.uint64(4))) & np.uint64(0xFFFF)


def dropout_threshold(p):
    """t = round(p * 65536), with p an f32, ties away from zero."""
    return int(np.floor(float(np.float32(p)) * 65536.0 + 0.5))


def dropout(x, p, seed, stream=0, batch=0):
    """Applies coda's dropout to a [M, N] array (float64)."""
    m, n = x.shape
    rows, cols = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    bits = dropout_bits(seed, stream, batch, rows, cols)
    t = dropout_threshold(p)
    if t >= 65536:
        return np.zeros_like(x)
    scale = float(np.float32(65536.0 / (65536.0 - t)))
    return np.where(bits >= t, x * scale, 0.0)


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

# Relative-norm tolerance of an output rounded to each type, with fp32 math.
TOLERANCE = {"f32": 1e-5, "bf16": 4e-3, "f16": 6e-4}


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
