# REQUIRES: cuda-gpu, torch
# RUN: rm -rf %t.cache
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %coda_src
#
# The first forward of a coda module compiles the kernels of its later
# forward programs and of its backward on background threads
# (coda.autograd._compile_ahead), beside its first one: once
# they are done, the backward compiles nothing (no kernel is added to the
# empty disk cache it started with) for coda.nn.Linear, MLP (weights stored
# [out, in] and [in, out], dropout), GatedMLP and ResidualNormMLP (LayerNorm,
# RMSNorm with a gated MLP), each on shapes of its own. A second forward of
# the same problem submits nothing. Then coda.Program.prepare on operands,
# and what it refuses.

import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch

import coda.autograd
import coda.nn

cuda, bf16 = torch.device("cuda"), torch.bfloat16
cache = os.environ["CODA_CACHE_DIR"]
failures = []


def kernels():
    """The kernels compiled so far in this process (and its empty cache)."""
    return len([f for f in os.listdir(cache) if f.endswith(".ptx")]) if os.path.isdir(cache) else 0


def check(name, module, rows, width, kernels_launched, **inputs):
    """`module`'s first forward on `rows` x `width` compiles (itself and on
    the threads) exactly the `kernels_launched` kernels that its forward and
    backward launch and no other (a kernel compiled ahead for a wrong shape
    would be one more), and its backward none."""
    x = torch.randn(rows, width, device=cuda, dtype=bf16, requires_grad=True)
    before = kernels()
    y = module(x, **inputs)
    concurrent.futures.wait(coda.autograd._compiling)
    ahead = kernels()
    y.backward(torch.randn_like(y))
    torch.cuda.synchronize()
    after = kernels()
    submitted = len(coda.autograd._ahead)
    module(x, **inputs)
    again = len(coda.autograd._ahead) - submitted
    print(f"{name}: {ahead - before} kernels compiled by the forward, {after - ahead} more by "
          f"the backward, {again} submitted again")
    if after != ahead or ahead - before != kernels_launched or again:
        failures.append(name)
    for p in module.parameters():
        if p.grad is None or not torch.isfinite(p.grad.float()).all():
            failures.append(f"{name}: the gradient of a parameter")


torch.manual_seed(0)
gelu = "EPILOGUE g(bias: bf16[N]) {\n  output = gelu(input + bias);\n}\n"
# The kernels each module launches: Linear's forward, epilogue gradient,
# grad_a and grad_b; an MLP's fc1 (saving) and fc2, fc2's grad_b (its
# epilogue gradient needs no kernel), fc1's epilogue gradient on fc2's dgrad,
# fc1's grad_a and grad_b; a ResidualNormMLP's projection, MLP and their
# backward, less the kernels the modules before it compiled (the same
# programs).
check("Linear gelu", coda.nn.Linear(72, 200, epilogue=gelu, device=cuda, dtype=bf16), 131, 72,
      4)
for layout, rows in (("nk", 157), ("kn", 163)):
    mlp = coda.nn.MLP(96, 320, dropout=0.1, weight_layout=layout, device=cuda, dtype=bf16)
    check(f"MLP {layout}", mlp, rows, 96, 6,
          residual=torch.randn(rows, 96, device=cuda, dtype=bf16))
check("GatedMLP", coda.nn.GatedMLP(104, 288, device=cuda, dtype=bf16), 149, 104, 6)
for norm, gated, rows, launched in (("layernorm", False, 139, 7), ("rmsnorm", True, 151, 6)):
    block = coda.nn.ResidualNormMLP(112, 112, 352, norm=norm, gated=gated, dropout=0.1,
                                    device=cuda, dtype=bf16)
    check(f"ResidualNormMLP {norm}", block, rows, 112, launched,
          residual=torch.randn(rows, 112, device=cuda, dtype=bf16))

# Program.prepare on operands: the kernel its calls on them use, compiled
# once; what it refuses, with the reason.
# A program no module above compiled (Linear's forward is this one's
# kernel on other sizes: the tile rule may give it the same shape).
program = coda.Program(gelu.replace("gelu(", "silu("))
a, b = torch.randn(97, 40, device=cuda, dtype=bf16), torch.randn(56, 40, device=cuda, dtype=bf16)
before = kernels()
program.prepare(a.shape, b)
program(a, b, bias=torch.randn(56, device=cuda, dtype=bf16))
if kernels() != before + 1:
    failures.append(f"prepare then call: {kernels() - before} kernels compiled")
for args, expected in (
        ((a,), "prepare takes both operands, a and b, or neither"),
        (((0, 40), b), "batch, m, n and k must be at least 1, got 1, 0, 56 and 40"),
):
    try:
        program.prepare(*args)
        failures.append(f"prepare{args} was accepted")
    except coda.CodaError as error:
        print("refused:", error)
        if expected not in str(error):
            failures.append(f"prepare{args}: {error}")
try:
    coda.Program(gelu, autotune=True).prepare(a, b)
    failures.append("prepare of an autotuned program was accepted")
except coda.CodaError as error:
    print("refused:", error)
    if "an autotuned program compiles its kernels at the first launch" not in str(error):
        failures.append(f"autotuned prepare: {error}")
print(f"{len(failures)} failed: {failures}" if failures else "all passed")
sys.exit(1 if failures else 0)
