#!/usr/bin/env bash
# Packs what the GPU tests and benchmarks need on a GPU machine that has no
# LLVM: coda-run, libcoda_runtime.so and libcoda_reference.so (the CPU
# reference, which runs host functions' host code) linked statically
# (CODA_STATIC_TOOLS=ON, built in build-static/), lit, FileCheck/not/count with the one library they load, and
# a lit site configuration that finds them next to it. Writes
# .carry/kit.tar.xz; on the GPU machine:
#   tar -xJf .carry/kit.tar.xz -C .carry && .carry/kit/run-lit.sh test/Integration/GPU
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ ! -f build-static/build.ninja ]; then
  cmake -G Ninja -S . -B build-static -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DCODA_STATIC_TOOLS=ON
fi
cmake --build build-static --target coda-run coda_runtime coda_reference

kit=.carry/kit
rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib" "$kit/test"
strip -o "$kit/bin/coda-run" build-static/bin/coda-run
for library in coda_runtime coda_reference; do
  strip -o "$kit/lib/lib$library.so" build-static/lib/lib$library.so
done
for tool in FileCheck not count split-file; do
  cp /usr/lib/llvm-22/bin/$tool "$kit/bin/"
done
cp -L /lib/x86_64-linux-gnu/libz3.so.4 "$kit/lib/"
cp -r /usr/lib/llvm-22/utils/lit "$kit/lit"
find "$kit/lit" -name __pycache__ -prune -exec rm -rf {} +

# The site configuration: paths relative to the kit, the sources in the repo.
cat > "$kit/test/lit.site.cfg.py" <<'PY'
import os
kit = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
repo = os.path.dirname(os.path.dirname(kit))
config.llvm_tools_dir = os.path.join(kit, "bin")
config.mlir_obj_dir = kit
config.coda_src_root = repo
config.coda_obj_root = kit
config.coda_tools_dir = os.path.join(kit, "bin")
config.ptxas_executable = "/usr/local/cuda/bin/ptxas"
config.host_triple = config.target_triple = "x86_64-unknown-linux-gnu"
config.environment["LD_LIBRARY_PATH"] = os.path.join(kit, "lib")
for library, variable in (("coda_runtime", "CODA_RUNTIME_LIBRARY"),
                          ("coda_reference", "CODA_REFERENCE_LIBRARY")):
    config.environment[variable] = os.path.join(kit, "lib", f"lib{library}.so")
import lit.llvm
lit.llvm.initialize(lit_config, config)
lit_config.load_config(config, os.path.join(repo, "test", "lit.cfg.py"))
PY
cat > "$kit/run-lit.sh" <<'SH'
#!/usr/bin/env bash
# run-lit.sh TEST_PATH... : runs coda's lit tests (paths under test/) with the
# kit; CODA_LIT_ARGS adds lit options (-a shows every test's output).
kit=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$kit/../.." && pwd)
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
args=()
for path in "$@"; do
  rel=${path#test/}
  if [ -d "$repo/test/$rel" ]; then
    mkdir -p "$kit/test/$rel"
  else
    mkdir -p "$kit/test/$(dirname "$rel")"
  fi
  args+=("$kit/test/$rel")
done
exec python3 -c "import sys; sys.path.insert(0, sys.argv.pop(1)); from lit.main import main; main()" \
  "$kit/lit" -sv ${CODA_LIT_ARGS:-} "${args[@]}"
SH
chmod +x "$kit/run-lit.sh"
tar -cJf .carry/kit.tar.xz -C .carry kit
rm -rf "$kit"
ls -la .carry/kit.tar.xz
