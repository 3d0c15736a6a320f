#!/usr/bin/env bash
# Sets up a Debian 12 machine to build and test coda, idempotently:
#  - installs the Debian packages coda builds with (LLVM/MLIR 22.1.8, cmake, ninja, g++)
#    and clang-format (the formatting check),
#  - creates .venv with numpy (the end-to-end tests compare against numpy),
#    setuptools (pip install ./python, tested),
#    torch (the python package's autograd tests), transformers (coda.patch
#    on Hugging Face models built from a config), and iree-base-compiler,
#    iree-turbine and jax (the frontends' exporters, whose IR the raising
#    tests run on),
#  - configures the build in build/ and builds the tools,
#  - builds the libFuzzer targets (the DSL, coda IR through the pipelines)
#    with clang, AddressSanitizer and UndefinedBehaviorSanitizer in
#    build-fuzz/, which the tests run.
# Run it again at any time; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ python3 python3-venv zlib1g-dev libzstd-dev
          llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-format
          clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import numpy, setuptools" 2>/dev/null; then
  echo "setup: creating .venv with numpy and setuptools"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q numpy "setuptools>=70.1"
fi
# pip install, resuming an interrupted download (torch's CUDA libraries are
# several hundred MB a wheel) rather than failing the setup.
pip_install() {
  .venv/bin/python -m pip install -q --retries 10 --resume-retries 20 "$@"
}
# PyTorch: the python package's modules and autograd ops, tested on the CPU
# reference (torch.autograd.gradcheck in float64).
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch into .venv"
  pip_install torch
fi
# transformers: coda.patch on Hugging Face models (test/Integration/CPU/hf_models.py).
if ! .venv/bin/python -c "import transformers" 2>/dev/null; then
  echo "setup: installing transformers into .venv"
  pip_install transformers
fi
# The GPU machines' transformers (5.17, whose modules take the cache as
# past_key_values) in a folder of its own, which hf_models.py runs under too
# (PYTHONPATH): pinned with the versions of what it needs that the latest
# release's differ from.
if [ ! -d .venv/transformers-5.17/transformers ]; then
  echo "setup: installing transformers 5.17 into .venv/transformers-5.17"
  pip_install --no-deps --target .venv/transformers-5.17 \
    transformers==5.17.0 huggingface-hub==1.33.0 httpx httpcore h11 anyio sniffio certifi idna
fi

# The frontends' own exporters (test/Conversion/LinalgToCoda/exported.test):
# PyTorch through iree-turbine (torch-mlir) and JAX through StableHLO, lowered
# to linalg by IREE's compiler tools.
if ! .venv/bin/python -c "import iree.turbine, iree.compiler, jax" 2>/dev/null; then
  echo "setup: installing iree-base-compiler, iree-turbine and jax into .venv"
  pip_install iree-base-compiler==3.13.0 iree-turbine==3.9.0 \
    jax==0.10.2 jaxlib==0.10.2
fi

# The fuzzer: its own build, of the front-end and the dialect only.
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B build-fuzz \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python" \
    -DCODA_ENABLE_FUZZERS=ON
fi
cmake --build build-fuzz --target coda-dsl-fuzzer coda-ir-fuzzer

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python"
fi
cmake -S . -B build -DCODA_FUZZER_DIR="$PWD/build-fuzz/bin" > /dev/null
cmake --build build
