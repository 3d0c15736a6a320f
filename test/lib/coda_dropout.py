"""coda's dropout, as docs/dsl.md defines it, in plain Python.

`keep(seed, stream, p, b, m, n)` says whether coda.dropout keeps the element
at (b, m, n); `scale(p)` is the factor a kept element is multiplied by. Run as
a script, it checks a printed dropout mask (see test/Frontend/dropout-mask.test).
"""

import math
import re
import struct
import sys

MASK32 = 0xFFFFFFFF


def to_f32(x):
    """Rounds a Python float to the nearest f32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def philox4x32_10(counter, key):
    """Philox-4x32 with 10 rounds (Salmon et al., SC'11) on four and two
    32-bit words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round in range(10):
        if round:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32,
                          (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
    return c0, c1, c2, c3


def threshold(p):
    """t = round(p * 65536), p taken as an f32, halves rounded away from 0."""
    return int(math.floor(to_f32(p) * 65536.0 + 0.5))


def keep(seed, stream, p, b, m, n):
    """Whether dropout `stream` with probability `p` keeps element (b, m, n)
    for the 64-bit `seed`."""
    group = (n >> 5) * 4 + ((n >> 1) & 3)
    words = philox4x32_10((group, m, stream, b),
                          (seed & MASK32, (seed >> 32) & MASK32))
    bits = (words[(n >> 3) & 3] >> (16 * (n & 1))) & 0xFFFF
    return bits >= threshold(p)


def scale(p):
    """The factor of kept elements, 65536 / (65536 - t) rounded to f32."""
    t = threshold(p)
    return to_f32(65536.0 / (65536.0 - t)) if t < 65536 else 0.0


def main():
    # Checks, for the output of printMemrefF32 on stdin, that element (m, n) is
    #   dropout(1, P0) + 4 * dropout(1, P1)
    # with streams 0 and 1 and the seed given on the command line.
    seed, p0, p1 = int(sys.argv[1], 0), float(sys.argv[2]), float(sys.argv[3])
    text = sys.stdin.read()
    sizes = [int(s) for s in
             re.search(r"sizes = \[(\d+), (\d+)\]", text).groups()]
    values = [float(v) for v in
              re.findall(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?",
                         text[text.index("data ="):])]
    rows, cols = sizes
    assert len(values) == rows * cols, (len(values), rows, cols)
    kept = 0
    for m in range(rows):
        for n in range(cols):
            expected = (keep(seed, 0, p0, 0, m, n) * scale(p0) +
                        4 * keep(seed, 1, p1, 0, m, n) * scale(p1))
            got = values[m * cols + n]
            if abs(got - expected) > 1e-4 * max(1.0, abs(expected)):
                sys.exit(f"element ({m}, {n}): expected {expected}, got {got}")
            kept += keep(seed, 0, p0, 0, m, n)
    print(f"ok: {rows}x{cols} elements, stream 0 kept {kept}")


if __name__ == "__main__":
    main()
