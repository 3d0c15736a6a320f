# REQUIRES: cuda-gpu, numpy
# RUN: env CODA_CACHE_DIR=%t.cache %python %s %testlib %coda_src/examples
#
# Every example epilogue (examples/*.coda) as one fused kernel on the GPU, on a
# ragged shape: coda-run --device cuda --check poisons the outputs with NaN and
# compares them with the CPU reference; here they are also compared with fp64
# numpy.

import glob
import os
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np
import coda_ref as ref
from coda_examples import EXAMPLES
from coda_test import run_program

rng = np.random.default_rng(10)
for path in sorted(glob.glob(os.path.join(sys.argv[2], "*.coda"))):
    name = os.path.basename(path)[:-5]
    case = EXAMPLES[name]
    arrays, scalars = case.inputs(rng, 333, 96, 200)  # row reductions need N <= 128
    outs = run_program(path, arrays, list(case.tolerances), seed=11, scalars=scalars,
                       device="cuda", extra=["--check"])
    for output, want in case.reference(arrays, scalars, 11).items():
        ref.check(f"{name} {output}", outs[output], want, case.tolerances[output])
