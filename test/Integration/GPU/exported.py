# REQUIRES: cuda-gpu, numpy, frontend-exporters
# RUN: env CODA_CACHE_DIR=%t.cache %python %s %testlib %S/../../Conversion/LinalgToCoda/Inputs/export.py
#
# What PyTorch's and JAX's exporters emit, raised and outlined, on the GPU:
# every outlined program (one per GEMM: a linear layer with bias and exact
# GELU, an output projection with bias, residual and LayerNorm or RMSNorm,
# attention scores with their softmax, a gated MLP's gate and up projections
# as one gated GEMM, and the normalizations folded into the product after
# them: RMSNorm and LayerNorm before a linear layer, and an output
# projection's residual and RMSNorm before the next one, two GEMMs of which
# the first writes the row statistics the second reads), exported at ragged
# shapes (M = 333, N = 136 over two tiles, so that the row reductions span a
# cluster), runs as a fused kernel: coda-run --device cuda --check poisons
# its outputs with NaN and compares each with the CPU reference on fresh
# random inputs. Then each export runs whole: coda-run --entry runs its host
# code, each program it calls launched on the GPU, and --check runs it again
# with the programs on the CPU reference.
#
# In place of export.py, a folder of modules exported and raised elsewhere
# (<frontend>-<case>.mlir, as this script writes them) runs on a GPU machine
# that has neither the exporters nor coda-opt.

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import numpy as np
from check_entry import signature
from coda_test import random, run_program

EXPORT = sys.argv[2]
SIZE = "--size=M=333,K=72,N=136,M2=333,N2=40"
CASES = ["linear_gelu", "residual_layernorm", "residual_rmsnorm", "scores_softmax", "gated",
         "rmsnorm_linear", "layernorm_linear", "residual_rmsnorm_linear"]
# A function: its name, arguments, results and body. A program is one that
# computes a coda.gemm and calls nothing (the raised function itself, when
# it is one GEMM, or an outlined one).
FUNCTION = re.compile(r"^  func\.func @(\w+)\((.*?)\) -> (.*?) \{$(.*?)^  \}$", re.M | re.S)
ARGUMENT = re.compile(r"%arg(\d+): ([^,{]+?)(?: \{coda\.name = \"(\w+)\"\})?(?:, |$)")
RESULT = re.compile(r"(tensor<[^>]+>)(?: \{coda\.name = \"(\w+)\"\})?")


def programs(module):
    """(name, {argument name: numpy array or scalar}, [output names]) of each
    program in `module`, its arguments named as coda-run binds them."""
    for name, arguments, results, body in FUNCTION.findall(module):
        if "coda.gemm" not in body or "call @" in body:
            continue
        arrays = {}
        for number, type, given in ARGUMENT.findall(arguments):
            number = int(number)
            key = given or ("a", "b")[number] if number < 2 else given or f"arg{number}"
            if type.startswith("tensor<"):
                dims = [int(d) for d in type[len("tensor<"):].split("x")[:-1]]
                arrays[key] = random(rng, *dims)
            else:
                # A scalar computed outside the epilogue (an i1 widened to
                # i64): the value a guard such as JAX's N - ddof > 0 has.
                arrays[key] = 1
        outputs = [given or f"result{i}" for i, (_, given) in enumerate(RESULT.findall(results))]
        yield name, arrays, outputs


rng = np.random.default_rng(29)
folder = tempfile.mkdtemp()
checked = entries = 0
for frontend in ["torch", "jax"]:
    for case in CASES:
        path = os.path.join(folder, f"{frontend}-{case}.mlir")
        if os.path.isdir(EXPORT):
            raised = open(os.path.join(EXPORT, f"{frontend}-{case}.mlir")).read()
        else:
            exported = subprocess.run([sys.executable, EXPORT, frontend, case, SIZE],
                                      capture_output=True, text=True, check=True).stdout
            raised = subprocess.run(["coda-opt", "--coda-raise-linalg",
                                     "--coda-outline-programs"], input=exported,
                                    capture_output=True, text=True, check=True).stdout
        with open(path, "w") as f:
            f.write(raised)
        found = list(programs(raised))
        assert found, f"{frontend} {case}: no program in\n{raised}"
        for name, arrays, outputs in found:
            tensors = {k: v for k, v in arrays.items() if isinstance(v, np.ndarray)}
            scalars = {k: v for k, v in arrays.items() if not isinstance(v, np.ndarray)}
            run_program(path, tensors, outputs, scalars=scalars, device="cuda",
                        extra=["--function", name, "--check"])
            checked += 1
            print(f"{frontend} {case} {name}: {', '.join(outputs)} match the CPU reference")
        shapes, results = signature(raised, case)
        cmd = ["coda-run", path, "--entry", case, "--device", "cuda", "--check"]
        for i, shape in enumerate(shapes):
            np.save(os.path.join(folder, f"in{i}.npy"), random(rng, *shape))
            cmd.append(f"--arg=arg{i}={folder}/in{i}.npy")
        cmd += [f"--out=result{i}={folder}/out{i}.npy" for i in range(results)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}"
        print(f"{frontend} {case} whole: {done.stdout.splitlines()[0]}")
        entries += 1
# Per frontend: one program per case, two for the output projection before a
# normalized product.
assert checked == 2 * (len(CASES) + 1), checked
assert entries == 2 * len(CASES), entries
print(f"{checked} programs, {entries} exports run whole")
