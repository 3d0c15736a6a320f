#!/bin/bash
# Kernel-shape work on a GPU machine, in one run: correctness of every kernel
# shape (test/Integration/GPU/fused_kernels.py through coda.Program), then
# coda's GEMM and fused chain under several shapes next to cuBLAS and eager
# PyTorch (bench/bench.py). Prepare on the build host, from the worktree:
#
#   scripts/device-kit.sh
#   P=<checkout copied to the GPU machine>/.carry/perf
#   mkdir -p $P/tree/python/coda $P/tree/test/lib $P/tree/test/Integration/GPU $P/tree/bench
#   cp .carry/kit.tar.xz bench/perf-run.sh $P/
#   cp python/coda/*.py $P/tree/python/coda/ && cp test/lib/*.py $P/tree/test/lib/
#   cp test/Integration/GPU/fused_kernels.py $P/tree/test/Integration/GPU/ && cp bench/bench.py $P/tree/bench/
#
# and run `bash .carry/perf/perf-run.sh` on the GPU machine, with .carry/perf
# copied along.
# CONFIGS (bench.py --configs) picks the shapes to time.
cd "$(dirname "$0")/../.."
P=.carry/perf
CONFIGS=${CONFIGS:-"default:;coop256x128:tile_m=256,tile_n=128;pp128x128:schedule=pingpong,tile_m=128,tile_n=128;pp128x192:schedule=pingpong,tile_m=128,tile_n=192"}
tar -xJf $P/kit.tar.xz -C $P || exit 1
cp -r $P/tree/. .
export CODA_RUNTIME_LIBRARY=$PWD/$P/kit/lib/libcoda_runtime.so
export LD_LIBRARY_PATH=$PWD/$P/kit/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 CODA_CACHE_DIR=/tmp/coda-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
T0=$(date +%s)
timeout 150 python3 test/Integration/GPU/fused_kernels.py > $OUT/fused.log 2>&1
echo "fused_kernels rc=$? ($(( $(date +%s) - T0 )) s)"
echo "ok rows: $(grep -c " ok$" $OUT/fused.log), failing rows:"
grep -E "FAIL|exception|Error|Traceback" $OUT/fused.log | head -20
grep -E " ms " $OUT/fused.log
T1=$(date +%s)
timeout 65 python3 bench/bench.py --baselines gemm,eager --max-autotune '' --rep-ms 60 \
  --configs "$CONFIGS" > $OUT/bench.log 2>&1
echo "bench rc=$? ($(( $(date +%s) - T1 )) s)"
grep -E "FAILED|Error" $OUT/bench.log | head
cat $OUT/bench.md 2>/dev/null || tail -20 $OUT/bench.log
