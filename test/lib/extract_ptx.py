"""Writes the PTX of every gpu.binary (format=isa) in an MLIR file to
DIR/<binary>.ptx and prints the names written.

  extract_ptx.py INPUT.mlir DIR
"""

import os
import re
import sys


def extract_ptx(mlir_text):
    """The PTX of every gpu.binary (format=isa), by binary name."""
    out = {}
    pattern = re.compile(r'gpu\.binary @(\w+)\s.*?assembly = "(.*?)"', re.S)
    for name, escaped in pattern.findall(mlir_text):
        # gpu.binary escapes bytes as \XX hex pairs.
        out[name] = re.sub(r'\\([0-9A-Fa-f]{2})',
                           lambda m: chr(int(m.group(1), 16)), escaped)
    return out


def main():
    source, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    with open(source) as f:
        binaries = extract_ptx(f.read())
    for name, ptx in sorted(binaries.items()):
        with open(os.path.join(out_dir, name + '.ptx'), 'w') as f:
            f.write(ptx)
        print(name)


if __name__ == '__main__':
    main()
