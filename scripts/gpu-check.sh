#!/usr/bin/env bash
# On a GPU machine, with the kit from scripts/device-kit.sh unpacked in
# .carry/kit: runs the GPU tests (lit, REQUIRES: cuda-gpu), compute-sanitizer
# memcheck on a ragged fused run, and a first timing of the fused kernel.
# Logs go to ${OUT:-.}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}
kit=.carry/kit
export PATH="$PWD/$kit/bin:$PATH" LD_LIBRARY_PATH="$PWD/$kit/lib"
export CODA_CACHE_DIR=$(mktemp -d)
nvidia-smi -L

echo "== lit: test/Integration/GPU"
CODA_LIT_ARGS=-a $kit/run-lit.sh test/Integration/GPU 2>&1 | tee "$out/gpu-lit.log" |
  grep -E "^(PASS|FAIL|UNSUPPORTED|XFAIL)|Passed|Failed|worst"

work=$(mktemp -d)
python3 - "$work" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(1)
for name, shape in {"a_small": (333, 200), "b_small": (517, 200), "r_small": (333, 517),
                    "a": (8192, 768), "b": (3072, 768), "r": (8192, 3072)}.items():
    scale = 1 / np.sqrt(shape[1]) if name.startswith("b") else 1
    np.save(f"{d}/{name}.npy", (rng.standard_normal(shape) * scale).astype(np.float32))
PY

echo "== compute-sanitizer memcheck (M 333, N 517, K 200, paper epilogue)"
compute-sanitizer --tool memcheck --leak-check full coda-run examples/paper.mlir --device cuda \
  --a "$work/a_small.npy" --b "$work/b_small.npy" --arg residual="$work/r_small.npy" --seed 5 \
  2>&1 | tee "$out/memcheck.log" | tail -4

echo "== timing (M 8192, K 768, N 3072, paper epilogue), cold and cached"
for run in cold cached; do
  coda-run examples/paper.mlir --device cuda --bench 50 --seed 5 \
    --a "$work/a.npy" --b "$work/b.npy" --arg residual="$work/r.npy" 2>&1 | tee -a "$out/timing.log"
done
