# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src
#
# The backward programs coda derives, checked by torch.autograd.gradcheck in
# float64 on the CPU reference (every float widened to f64): every example
# program and every DSL builtin, ragged shapes, gradients of A, B and every
# tensor input; then coda.nn.Linear against PyTorch autograd of the unfused
# math in float32, and the errors a user sees.

import glob
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
from coda import CodaError
from coda.autograd import ProgramFamily, run
from coda.nn import Linear

torch.manual_seed(0)
M, K, N = 5, 7, 6
failures = []


def check(name, source, shapes=None, seed=1234):
    """gradcheck of every [m, n] output of `source` w.r.t. A, B and its
    tensor inputs."""
    family = ProgramFamily(source)
    program = family.program("", torch.device("cpu"), torch.float64)
    a = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
    b = torch.randn(N, K, dtype=torch.float64, requires_grad=True)
    names, tensors, scalar_names = [], [], []
    for arg in program.arguments:
        if arg["role"] == "input" and arg["type"] != "i64" and not arg["tensor"]:
            scalar_names.append(arg["name"])  # a scalar: a constant of the step
        if arg["role"] != "input" or not arg["tensor"]:
            continue
        shape = [size for bit, size in ((2, M), (1, N)) if arg["dims"] & bit]
        names.append(arg["name"])
        tensors.append(torch.randn(shape, dtype=torch.float64, requires_grad=True))
    full = [i for i, output in enumerate(program.outputs) if output["dims"] == 3]

    def f(a, b, *tensors):
        outputs = run(family.key, "", a, b, list(tensors), ",".join(names),
                      [0.7] * len(scalar_names), ",".join(scalar_names), seed)
        return tuple(outputs[i] for i in full)

    try:
        ok = torch.autograd.gradcheck(f, (a, b, *tensors), raise_exception=False)
    except CodaError as error:
        ok = False
        print(f"{name}: {error}")
    print(f"{name}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(name)


# Every example program.
examples = sorted(glob.glob(os.path.join(sys.argv[1], "examples", "*.coda")))
assert examples, "no examples found"
for path in examples:
    check(os.path.basename(path), open(path).read())

# Every builtin, on values inside its domain (p > 0), through an [n] and an
# [m, n] input so that both reductions of the input gradients run.
BUILTINS = {
    "gelu": "gelu(x)", "gelu_erf": "gelu_erf(x)", "relu": "relu(x)", "silu": "silu(x)",
    "sigmoid": "sigmoid(x)", "tanh": "tanh(x)", "exp": "exp(x)", "log": "log(p)",
    "sqrt": "sqrt(p)", "rsqrt": "rsqrt(p)", "abs": "abs(x)", "min": "min(x, r)",
    "max": "max(x, r)", "clamp": "clamp(x, -0.5, 0.5)", "pow": "pow(p, 3) + pow(p, 0.5)",
    "neg_div": "-x / p", "row_sum": "x * row_sum(x)", "row_max": "x - row_max(x)",
    "row_mean": "x - row_mean(x)", "dropout": "dropout(x, 0.3)",
    "per_row": "x * w",
}
for name, expression in BUILTINS.items():
    source = (f"EPILOGUE {name}(v: f32[N], r: f32[M, N], w: f32[M]) {{\n"
              f"  x = input + v;\n  p = x * x + 1;\n  output = {expression} + r;\n}}\n")
    check("builtin " + name, source)

# coda.nn.Linear in float32 on the CPU reference against PyTorch autograd.
lin = Linear(K, N, epilogue="EPILOGUE mlp(bias: f32[N]) {\n  output = gelu(input + bias);\n}\n")
x = torch.randn(3, M, K, requires_grad=True)
y = lin(x)
g = torch.randn_like(y)
y.backward(g)
xr = x.detach().clone().requires_grad_()
wr = lin.weight.detach().clone().requires_grad_()
br = lin.bias.detach().clone().requires_grad_()
yr = torch.nn.functional.gelu(xr @ wr.T + br, approximate="tanh")
yr.backward(g)
for what, got, want in (("output", y, yr), ("grad x", x.grad, xr.grad),
                        ("grad weight", lin.weight.grad, wr.grad),
                        ("grad bias", lin.bias.grad, br.grad)):
    error = ((got - want).norm() / want.norm()).item()
    print(f"Linear {what}: relative error {error:.2e}")
    if not error < 1e-5:
        failures.append("Linear " + what)
assert list(lin.state_dict()) == ["weight", "bias"]

# A program whose epilogue has no derivative is refused with the op named.
family = ProgramFamily("""
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %1 = math.sin %acc : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x?xf32>
}
""")
a = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
b = torch.randn(N, K, dtype=torch.float64)
out = run(family.key, "", a, b, [], "", [], "", 0)[0]
try:
    out.sum().backward()
    failures.append("no error for math.sin")
except CodaError as error:
    print(f"math.sin: {error}")
    if "'math.sin' op has no derivative" not in str(error):
        failures.append("message for math.sin")

print(f"{len(failures)} failed: {failures}" if failures else "all passed")
sys.exit(1 if failures else 0)
