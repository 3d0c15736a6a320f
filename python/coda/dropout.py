"""coda's dropout, exactly as compiled programs compute it (see docs/design.md).

    keep = dropout_mask(seed, (M, N), p)             # bool [M, N]
    y = dropout(x, p, seed)                          # float64, inverted dropout

The element (b, m, n) of stream s is kept iff its 16 random bits are >= t, with
t = round(p * 65536); kept elements are scaled by f32(65536 / (65536 - t)).
"""

import operator

import numpy as np

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox-4x32-10 on arrays of 32-bit counters (as uint64) and a 2x32-bit key.

    Returns the four 32-bit output words as uint64 arrays.
    """
    c = [np.asarray(v, dtype=np.uint64) & np.uint64(_MASK32) for v in (c0, c1, c2, c3)]
    k0, k1 = int(k0) & _MASK32, int(k1) & _MASK32
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
        p0 = np.uint64(_M0) * c[0]
        p1 = np.uint64(_M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(_MASK32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(_MASK32)
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
    return c


def dropout_threshold(p):
    """t = round(p * 65536) for p given as an f32 (ties away from zero)."""
    try:
        p = float(np.float32(p))
    except (TypeError, ValueError):
        raise TypeError(f"dropout probability must be a number, got {p!r}") from None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    return int(np.floor(p * 65536.0 + 0.5))


def _integer(name, value, low, high):
    """`value` as an int in [low, high), or a ValueError/TypeError that says
    what would be legal (a float, a string or a bool is not an integer)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if not low <= value < high:
        raise ValueError(f"{name} must be in [{low}, {high - 1}], got {value}")
    return value


def _seed(seed):
    """A 64-bit seed, signed or unsigned, as the unsigned value of its bits."""
    return _integer("seed", seed, -(1 << 63), 1 << 64) & 0xFFFFFFFFFFFFFFFF


def _rows(shape, first_row):
    """(M, N) and the first row of a mask, checked: Philox counts rows and
    column groups in 32 bits."""
    try:
        m, n = shape
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (M, N), got {shape!r}") from None
    m = _integer("M", m, 0, 1 << 32)
    n = _integer("N", n, 0, 1 << 32)
    first_row = _integer("first_row", first_row, 0, 1 << 32)
    if first_row + m > 1 << 32:
        raise ValueError(f"rows first_row .. first_row + M - 1 = {first_row} .. "
                         f"{first_row + m - 1} must be below 2^32")
    return m, n, first_row


def dropout_bits(seed, stream, batch, rows, cols):
    """The 16 random bits (as uint64) drawn for elements (batch, rows, cols)."""
    seed = _seed(seed)
    stream = _integer("stream", stream, 0, 1 << 32)
    batch = _integer("batch", batch, 0, 1 << 32)
    rows = np.asarray(rows, dtype=np.uint64)
    cols = np.asarray(cols, dtype=np.uint64)
    rows, cols = np.broadcast_arrays(rows, cols)
    group = ((cols >> np.uint64(5)) << np.uint64(2)) | ((cols >> np.uint64(1)) & np.uint64(3))
    fill = np.zeros_like(rows)
    words = philox4x32(group, rows, fill + np.uint64(stream), fill + np.uint64(batch),
                       seed & _MASK32, seed >> 32)
    word = np.choose(((cols >> np.uint64(3)) & np.uint64(3)).astype(np.int64), words)
    return (word >> ((cols & np.uint64(1)) << np.uint64(4))) & np.uint64(0xFFFF)


def dropout_mask(seed, shape, p, stream=0, batch=0, first_row=0):
    """The keep mask (bool array of `shape` = (M, N)) of one dropout: rows
    first_row .. first_row + M - 1 of its output."""
    m, n, first_row = _rows(shape, first_row)
    rows, cols = np.meshgrid(np.arange(first_row, first_row + m), np.arange(n), indexing="ij")
    return dropout_bits(seed, stream, batch, rows, cols) >= dropout_threshold(p)


def dropout(x, p, seed, stream=0, batch=0, first_row=0):
    """Applies coda's inverted dropout to a 2-D array holding rows first_row ..
    of the output; returns float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D array [M, N], got {x.ndim} dims")
    t = dropout_threshold(p)
    if t >= 65536:
        return np.zeros_like(x)
    scale = float(np.float32(65536.0 / (65536.0 - t)))
    return np.where(dropout_mask(seed, x.shape, p, stream, batch, first_row), x * scale, 0.0)
