# REQUIRES: numpy
# RUN: %python %s %testlib %coda_src/examples
#
# Every example epilogue (examples/*.coda) through coda-run on the CPU
# reference path, on a ragged shape, against fp64 numpy.

import glob
import os
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_examples import EXAMPLES
from coda_test import run_program

rng = np.random.default_rng(9)
files = sorted(glob.glob(os.path.join(sys.argv[2], "*.coda")))
assert {os.path.basename(f)[:-5] for f in files} == set(EXAMPLES), "an example has no reference"
for path in files:
    name = os.path.basename(path)[:-5]
    case = EXAMPLES[name]
    arrays, scalars = case.inputs(rng, 77, 96, 40)
    outs = run_program(path, arrays, list(case.tolerances), seed=11,
                       scalars=scalars, alpha=None)
    for output, want in case.reference(arrays, scalars, 11).items():
        ref.check(f"{name} {output}", outs[output], want, case.tolerances[output])
