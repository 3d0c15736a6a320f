# REQUIRES: numpy
# RUN: %python %s %coda_src | FileCheck %s
#
# coda.dropout_mask and coda.dropout refuse what is not a mask's description,
# saying what would be legal: shapes of two non-negative integers, integer
# seeds of 64 bits (signed or unsigned), streams, batches and rows that fit
# Philox's 32-bit counters, p in [0, 1]. Nothing is rounded or wrapped.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import numpy as np
from coda.dropout import dropout, dropout_mask

# Seeds given as the signed and the unsigned value of the same bits agree,
# and numpy integers are integers.
assert (dropout_mask(-1, (3, 40), 0.5) == dropout_mask(2**64 - 1, (3, 40), 0.5)).all()
assert (dropout_mask(np.int64(7), (np.int32(3), 40), 0.5) == dropout_mask(7, (3, 40), 0.5)).all()
assert dropout_mask(7, (0, 5), 0.5).shape == (0, 5)
print("valid: ok")
# CHECK: valid: ok

CASES = [
    ("float shape", lambda: dropout_mask(1, (2.5, 3), 0.1)),
    ("negative dim", lambda: dropout_mask(1, (-2, 3), 0.1)),
    ("three dims", lambda: dropout_mask(1, (2, 3, 4), 0.1)),
    ("float seed", lambda: dropout_mask(1.5, (2, 3), 0.1)),
    ("string seed", lambda: dropout_mask("1", (2, 3), 0.1)),
    ("bool seed", lambda: dropout_mask(True, (2, 3), 0.1)),
    ("seed too large", lambda: dropout_mask(2**64, (2, 3), 0.1)),
    ("stream too large", lambda: dropout_mask(1, (2, 3), 0.1, stream=2**32)),
    ("negative batch", lambda: dropout_mask(1, (2, 3), 0.1, batch=-1)),
    ("rows past 2^32", lambda: dropout_mask(1, (2, 3), 0.1, first_row=2**32 - 1)),
    ("p above 1", lambda: dropout_mask(1, (2, 3), 1.5)),
    ("p a string", lambda: dropout_mask(1, (2, 3), "a")),
    ("x of 3 dims", lambda: dropout(np.ones((2, 3, 4)), 0.1, 1)),
]
for label, call in CASES:
    try:
        call()
        print(f"{label}: accepted")
    except (TypeError, ValueError) as error:
        print(f"{label}: {type(error).__name__}: {error}")
# CHECK-NEXT: float shape: TypeError: M must be an integer, got 2.5
# CHECK-NEXT: negative dim: ValueError: M must be in [0, 4294967295], got -2
# CHECK-NEXT: three dims: ValueError: shape must be (M, N), got (2, 3, 4)
# CHECK-NEXT: float seed: TypeError: seed must be an integer, got 1.5
# CHECK-NEXT: string seed: TypeError: seed must be an integer, got '1'
# CHECK-NEXT: bool seed: TypeError: seed must be an integer, got True
# CHECK-NEXT: seed too large: ValueError: seed must be in [-9223372036854775808, 18446744073709551615], got 18446744073709551616
# CHECK-NEXT: stream too large: ValueError: stream must be in [0, 4294967295], got 4294967296
# CHECK-NEXT: negative batch: ValueError: batch must be in [0, 4294967295], got -1
# CHECK-NEXT: rows past 2^32: ValueError: rows first_row .. first_row + M - 1 = 4294967295 .. 4294967296 must be below 2^32
# CHECK-NEXT: p above 1: ValueError: dropout probability must be in [0, 1], got 1.5
# CHECK-NEXT: p a string: TypeError: dropout probability must be a number, got 'a'
# CHECK-NEXT: x of 3 dims: ValueError: x must be a 2-D array [M, N], got 3 dims
