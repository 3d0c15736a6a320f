#!/usr/bin/env bash
# The main job: compile an example epilogue program (by default the paper's,
# examples/paper.coda) and run it on random data, on the GPU when there is one,
# otherwise on the CPU reference path; then check the result against fp64 numpy.
#   scripts/demo.sh [PROGRAM] [M N K]
set -euo pipefail
cd "$(dirname "$0")/.."
program=${1:-examples/paper.coda}
m=${2:-256} n=${3:-768} k=${4:-512}
python=.venv/bin/python
[ -x "$python" ] || python=python3

device=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  device=cuda
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$work" "$m" "$n" "$k" <<'PY'
import sys
import numpy as np
folder, m, n, k = sys.argv[1], *map(int, sys.argv[2:])
rng = np.random.default_rng(0)
np.save(f"{folder}/a.npy", rng.standard_normal((m, k), dtype=np.float32))
np.save(f"{folder}/b.npy", (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32))
np.save(f"{folder}/residual.npy", rng.standard_normal((m, n), dtype=np.float32))
PY

echo "demo: running $program on $device (M=$m N=$n K=$k)"
build/bin/coda-run "$program" --device "$device" --seed 2024 \
  --a "$work/a.npy" --b "$work/b.npy" --arg residual="$work/residual.npy" \
  --out output="$work/output.npy"

"$python" - "$work" <<'PY'
import sys
sys.path.insert(0, "test/lib")
import numpy as np
import coda_ref as ref
folder = sys.argv[1]
a, b = ref.round_bf16(np.load(f"{folder}/a.npy")), ref.round_bf16(np.load(f"{folder}/b.npy"))
residual = ref.round_bf16(np.load(f"{folder}/residual.npy"))
want = ref.dropout(ref.gelu_tanh(a @ b.T), 0.1, 2024) + residual
got = np.load(f"{folder}/output.npy")
ref.check("demo: output vs fp64 numpy", got, want, "bf16")
dropped = np.mean(ref.dropout(np.ones_like(want), 0.1, 2024) == 0)
print(f"demo: dropout kept {1 - dropped:.3%} of the elements (p = 0.1)")
PY
