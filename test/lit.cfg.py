# -*- Python -*-
# lit configuration for coda's test suite.

import importlib.util
import os
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "CODA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".coda", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.coda_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# In a CODA_ENABLE_FUZZERS build the tools have AddressSanitizer but libMLIR.so
# does not; LLVM's allocators then poison memory that uninstrumented code
# uses. Manual poisoning is turned off (no effect on other builds).
config.environment["ASAN_OPTIONS"] = "allow_user_poisoning=0"
llvm_config.use_default_substitutions()

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%coda_src", config.coda_src_root))
config.substitutions.append(("%coda_obj", config.coda_obj_root))
config.substitutions.append(
    ("%testlib", os.path.join(config.coda_src_root, "test", "lib")))

tool_dirs = [config.coda_tools_dir, config.llvm_tools_dir]
# The fuzzers of a fuzzing build of its own (CODA_FUZZER_DIR), found after
# this build's tools.
fuzzer_dir = getattr(config, "coda_fuzzer_dir", "")
if fuzzer_dir and os.path.isdir(fuzzer_dir):
    tool_dirs.append(fuzzer_dir)
tools = [
    "coda-opt",
    ToolSubst("coda-lsp-server", unresolved="ignore"),
    ToolSubst("coda-run", unresolved="ignore"),
    ToolSubst("coda-translate", unresolved="ignore"),
    ToolSubst("coda-dsl-fuzzer", unresolved="ignore"),
    ToolSubst("coda-ir-fuzzer", unresolved="ignore"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.coda_tools_dir, append_path=True)
# `not` and the other LLVM test utilities.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# mlir-runner: CPU end-to-end tests JIT-run the output of coda-cpu-pipeline
# with MLIR's runner and its printing utilities (%mlir_runner_utils).
runner = shutil.which("mlir-runner", path=config.llvm_tools_dir)
runner_libs = [os.path.join(config.llvm_tools_dir, "..", "lib", lib)
               for lib in ("libmlir_runner_utils.so",
                           "libmlir_c_runner_utils.so")]
if runner and all(os.path.exists(lib) for lib in runner_libs):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_runner_utils", ",".join(runner_libs)))
    config.substitutions.append(("%mlir_runner", runner))

# coda-dsl-fuzzer, coda-ir-fuzzer: the build has the libFuzzer targets
# (CODA_ENABLE_FUZZERS), or was given a fuzzing build's (CODA_FUZZER_DIR).
for fuzzer in ("coda-dsl-fuzzer", "coda-ir-fuzzer"):
    if any(os.path.exists(os.path.join(d, fuzzer)) for d in tool_dirs):
        config.available_features.add(fuzzer)

# numpy: the end-to-end tests compare against fp64 numpy references.
# %python (from llvm_config) is the interpreter running lit.
if subprocess.call([sys.executable, "-c", "import numpy"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("numpy")

# torch: tests that run programs through coda.Program (python/coda) hand it
# PyTorch tensors. Looked up, not imported (importing torch takes seconds).
if importlib.util.find_spec("torch"):
    config.available_features.add("torch")
# transformers: coda.patch on Hugging Face models built from a config.
if importlib.util.find_spec("transformers"):
    config.available_features.add("transformers")
# The GPU machines' transformers release (5.17), which scripts/setup.sh puts
# beside the latest in its own folder, for PYTHONPATH: coda.patch must
# recognize its modules too.
transformers_517 = os.path.join(sys.prefix, "transformers-5.17")
if os.path.isdir(os.path.join(transformers_517, "transformers")):
    config.available_features.add("transformers-5.17")
    config.substitutions.append(("%transformers_517", transformers_517))

# frontend-exporters: PyTorch's (iree-turbine, torch-mlir) and JAX's exporters
# and IREE's compiler tools, which lower what they export to linalg
# (test/Conversion/LinalgToCoda/exported.test).
if all(importlib.util.find_spec(name) for name in ("iree", "jax")) and \
        importlib.util.find_spec("iree.turbine") and importlib.util.find_spec("iree.compiler"):
    config.available_features.add("frontend-exporters")

# clang-format: the sources' formatting is checked (test/format.test).
if shutil.which("clang-format"):
    config.available_features.add("clang-format")

# ptxas: PTX produced by the GPU pipeline is assembled for sm_90a.
if config.ptxas_executable and os.path.exists(config.ptxas_executable):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas_executable))
    config.substitutions.append(
        ("%cuda_toolkit",
         os.path.dirname(os.path.dirname(config.ptxas_executable))))

# downstream-build: the install test builds a project against the install
# tree (slow); CODA_DOWNSTREAM_TEST=0 skips it.
if shutil.which("cmake") and os.environ.get("CODA_DOWNSTREAM_TEST", "1") == "1":
    config.available_features.add("downstream-build")

# cuda-gpu: an NVIDIA GPU and its driver are present. Tests that launch
# kernels say `REQUIRES: cuda-gpu`. CODA_GPU_TESTS=0 turns them off, =1 on.
def has_cuda_gpu():
    forced = os.environ.get("CODA_GPU_TESTS")
    if forced is not None:
        return forced == "1"
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout

if has_cuda_gpu():
    config.available_features.add("cuda-gpu")
