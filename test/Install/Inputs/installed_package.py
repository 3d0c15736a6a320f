"""Imports coda as pip installed it (argv[1] is the installation folder) and
runs a program on the CPU reference with the library the package carries."""

import os
import subprocess
import sys

import torch

import coda
from coda.reference import ReferenceProgram
from coda.runtime import CodaError, _find_library

site = os.path.realpath(sys.argv[1])
package = os.path.dirname(os.path.realpath(coda.__file__))
assert package.startswith(site), (package, site)
print("package:", package)
print("reference library:", _find_library("coda_reference", "CODA_REFERENCE_LIBRARY"))
print("runtime library:", _find_library("coda_runtime", "CODA_RUNTIME_LIBRARY"))

torch.manual_seed(0)
M, K, N = 5, 7, 6
source = "EPILOGUE linear(bias: f32[N]) {\n  output = relu(input + bias);\n}\n"
program = ReferenceProgram(source, dtype="f32")
a, b, bias = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
got = program(a, b, bias=bias)["output"]
want = torch.relu(a.double() @ b.double().T + bias.double())
error = (got.double() - want).abs().max().item()
print(f"reference run: max error {error:.1e}, {'ok' if error < 1e-4 else 'WRONG'}")

# A fresh interpreter each: the library and torch are loaded once per process.
missing_library = """
import coda.reference
try:
    coda.reference.ReferenceProgram("EPILOGUE e() { output = input; }", dtype="f32")
except coda.CodaError as error:
    print("missing library:", error)
"""
missing_torch = """
import sys
sys.modules["torch"] = None  # as if PyTorch were not installed
try:
    import coda.nn
except ImportError as error:
    print("missing torch:", error)
"""
env = dict(os.environ, CODA_REFERENCE_LIBRARY=os.path.join(site, "nowhere", "libcoda_reference.so"))
for script, environment in ((missing_library, env), (missing_torch, os.environ)):
    sys.stdout.flush()
    subprocess.run([sys.executable, "-c", script], env=environment, check=True)
