"""Compares two runs' printMemrefF32 output, memref by memref.

Usage: compare_memref_prints.py REFERENCE ACTUAL [--rtol R] [--atol A]

Each printed memref must have the same sizes in both files, and every element
must satisfy |actual - reference| <= atol + rtol * |reference| (NaN matches
only NaN). Prints a summary; exits non-zero with the first mismatches listed
when the runs differ, or when either file has no memref at all.
"""

import argparse
import math
import re
import sys

HEADER = re.compile(r"Unranked Memref base@ = \S+ rank = \d+ offset = \d+ "
                    r"sizes = \[([^\]]*)\] strides = \[[^\]]*\] data =")
NUMBER = re.compile(r"-?nan|-?inf|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def parse(path):
    """The (sizes, values) of each memref printed in `path`."""
    text = open(path).read()
    headers = list(HEADER.finditer(text))
    memrefs = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[header.end():end]
        sizes = [int(s) for s in header.group(1).split(",") if s.strip()]
        values = [float(v) for v in NUMBER.findall(body)]
        memrefs.append((sizes, values))
    return memrefs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("actual")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()

    reference, actual = parse(args.reference), parse(args.actual)
    if not reference or not actual:
        sys.exit("no printed memref in %s" %
                 (args.reference if not reference else args.actual))
    if len(reference) != len(actual):
        sys.exit("%d memrefs in the reference, %d in the actual run" %
                 (len(reference), len(actual)))
    failures = []
    compared = 0
    for index, ((ref_sizes, ref), (act_sizes, act)) in enumerate(
            zip(reference, actual)):
        count = math.prod(ref_sizes)
        if ref_sizes != act_sizes or len(ref) != count or len(act) != count:
            sys.exit("memref #%d: sizes %s (%d values) vs %s (%d values)" %
                     (index, ref_sizes, len(ref), act_sizes, len(act)))
        for position, (r, a) in enumerate(zip(ref, act)):
            compared += 1
            if math.isnan(r) or math.isnan(a):
                ok = math.isnan(r) and math.isnan(a)
            else:
                ok = abs(a - r) <= args.atol + args.rtol * abs(r)
            if not ok:
                failures.append("memref #%d element %d: reference %r, actual %r"
                                % (index, position, r, a))
    if failures:
        print("\n".join(failures[:20]))
        sys.exit("%d of %d elements differ (rtol %g, atol %g)" %
                 (len(failures), compared, args.rtol, args.atol))
    print("%d memrefs, %d elements match (rtol %g, atol %g)" %
          (len(reference), compared, args.rtol, args.atol))


if __name__ == "__main__":
    main()
