"""Writes the .npy files the coda-run error tests use into a folder."""
import sys

import numpy as np

folder = sys.argv[1]
np.save(f"{folder}/a.npy", np.ones((4, 8), np.float32))
np.save(f"{folder}/b.npy", np.ones((8, 6), np.float32))
np.save(f"{folder}/b_bad_k.npy", np.ones((7, 6), np.float32))
np.save(f"{folder}/b_rows7.npy", np.ones((7, 8), np.float32))
np.save(f"{folder}/b_cols7.npy", np.ones((8, 7), np.float32))
np.save(f"{folder}/bias.npy", np.ones((6,), np.float32))
np.save(f"{folder}/bias_bad.npy", np.ones((5,), np.float32))
np.save(f"{folder}/matrix.npy", np.ones((4, 6), np.float32))
np.save(f"{folder}/three.npy", np.ones((3,), np.float32))
np.save(f"{folder}/four.npy", np.arange(1, 5, dtype=np.float32))
np.save(f"{folder}/pair.npy", np.tile(np.array([[0, 10]], np.float32), (4, 1)))
np.save(f"{folder}/half.npy", np.ones((4, 8), np.float16))
np.save(f"{folder}/f64.npy", np.ones((4, 8), np.float64))
np.save(f"{folder}/fortran.npy", np.asfortranarray(np.ones((4, 8), np.float32)))
with open(f"{folder}/short.npy", "wb") as f:
    f.write(open(f"{folder}/a.npy", "rb").read()[:-4])
with open(f"{folder}/text.npy", "w") as f:
    f.write("not numpy\n")
with open(f"{folder}/v9.npy", "wb") as f:
    f.write(b"\x93NUMPY\x09\x00\x10\x00{}              \n")
# Headers cut short: a v1.0 header that says it is longer than the file, and
# a v2.0 file that ends inside its 4-byte header length.
with open(f"{folder}/cut_header.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f4'")
with open(f"{folder}/cut_v2.npy", "wb") as f:
    f.write(b"\x93NUMPY\x02\x00\x40\x00")
# A header whose shape overflows 64 bits of bytes, with no data.
with open(f"{folder}/huge.npy", "wb") as f:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952, 8), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())


def write_header(name, header, data=b""):
    """A v1.0 .npy file with `header` (padded as numpy pads it) and `data`."""
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(f"{folder}/{name}", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data)


write_header("no_shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape':", b"\0" * 4)
write_header("empty_descr.npy", "{'fortran_order': False, 'shape': (1,), 'descr':", b"\0" * 4)
write_header("double_quoted.npy", "{'descr': \"<f4\", 'fortran_order': False, 'shape': (1,), }",
             b"\0" * 4)
write_header("maybe_fortran.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }",
             b"\0" * 4)
write_header("twice.npy", "{'descr': '<f4', 'descr': '<f2', 'fortran_order': False, "
             "'shape': (1,), }", b"\0" * 4)
write_header("empty_dim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (8,,32), }",
             b"\0" * 1024)
# Operands whose output space cannot be addressed, or not held in memory.
np.save(f"{folder}/wide_empty.npy", np.zeros((1 << 32, 0), np.float32))
np.save(f"{folder}/column.npy", np.ones((1000000, 1), np.float32))
