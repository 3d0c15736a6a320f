"""Reference semantics of coda's epilogue ops in numpy, for the tests that
check generated code against them (dropout masks must match bit for bit)."""

import numpy as np

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def _mulhilo(a, b):
    """The high and low 32-bit words of a * b for uint64 arrays of 32-bit
    values (split so that no product exceeds 64 bits)."""
    lo16, hi16 = b & 0xFFFF, b >> 16
    p_lo, p_hi = a * lo16, a * hi16
    low = (p_lo + (p_hi << 16)) & _MASK32
    high = (p_hi + (p_lo >> 16)) >> 16
    return high & _MASK32, low


def philox4x32_10(counter, key):
    """Philox-4x32-10 of four counter word arrays and two key words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & _MASK32 for c in counter)
    k0, k1 = (np.uint64(k & _MASK32) for k in key)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(_W0)) & np.uint64(_MASK32)
            k1 = (k1 + np.uint64(_W1)) & np.uint64(_MASK32)
        hi0, lo0 = _mulhilo(np.uint64(_M0), c0)
        hi1, lo1 = _mulhilo(np.uint64(_M1), c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def dropout_bits(seed, stream, batch, rows, cols):
    """The 16 random bits coda.dropout draws for elements (batch, row, col),
    broadcast over the given integer arrays."""
    batch, rows, cols = np.broadcast_arrays(
        np.asarray(batch, dtype=np.uint64), np.asarray(rows, dtype=np.uint64),
        np.asarray(cols, dtype=np.uint64))
    group = ((cols >> 5) << 2) | ((cols >> 1) & 3)
    words = philox4x32_10(
        (group, rows, np.full_like(rows, stream), batch),
        (seed & _MASK32, (seed >> 32) & _MASK32))
    index = (cols >> 3) & 3
    word = np.choose(index.astype(np.int64), words)
    return (word >> ((cols & 1) << 4)) & 0xFFFF


def dropout_keep(seed, stream, p, batch, rows, cols):
    """Whether coda.dropout keeps each element, and the scale of kept ones."""
    threshold = int(round(p * 65536))
    keep = dropout_bits(seed, stream, batch, rows, cols) >= threshold
    scale = 65536.0 / (65536 - threshold) if threshold < 65536 else 0.0
    return keep, scale
