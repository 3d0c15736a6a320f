"""Writes the PTX of every gpu.binary (format=isa) in an MLIR file to
DIR/<binary>.ptx and prints the names written.

  extract_ptx.py INPUT.mlir DIR
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import coda_gpu  # noqa: E402


def main():
    source, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    with open(source) as f:
        binaries = coda_gpu.extract_ptx(f.read())
    for name, ptx in sorted(binaries.items()):
        with open(os.path.join(out_dir, name + '.ptx'), 'w') as f:
            f.write(ptx)
        print(name)


if __name__ == '__main__':
    main()
