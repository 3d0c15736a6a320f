# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# coda.nn.ResidualNormMLP, the second half of a pre-norm Transformer block in
# three programs (the output projection writing h = dropout(x W^T + b) +
# residual and norm(h), then an MLP on norm(h) with h as its residual), whose
# backward puts the projection's epilogue gradient (the norm's backward) on
# fc1's dgrad GEMM: gradcheck in float64 on the CPU reference for LayerNorm
# and RMSNorm, the plain and the gated MLP, with and without biases, with
# dropout in the projection and in the MLP; then in float32 against PyTorch
# autograd of the unfused math, in eval mode, under
# torch.compile(fullgraph=True), and the errors a user sees.

import contextlib
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks
import torch.nn.functional as F

import coda.nn

torch.manual_seed(0)
M, K, D, H = 7, 12, 10, 18
failures = []


def report(what, got, want, tolerance):
    error = ((got - want).norm() / want.norm()).item()
    if not error < tolerance:
        failures.append(f"{what}: relative error {error:.2e}")


def linear(module, layer, x):
    """`layer` of `module` on x, its weight stored as the module's
    weight_layout says."""
    weight = layer.weight.t() if module.weight_layout == "kn" else layer.weight
    return F.linear(x, weight, layer.bias)


def unfused(module, x, residual):
    """The module's math as PyTorch's modules compute it (no dropout)."""
    h = linear(module, module.proj, x) + residual
    n = module.norm(h)
    mlp = module.mlp
    if isinstance(mlp, coda.nn.GatedMLP):
        return h + mlp.down_proj(F.silu(mlp.gate_proj(n)) * mlp.up_proj(n))
    return h + linear(module, mlp.fc2, F.gelu(linear(module, mlp.fc1, n), approximate="tanh"))


def randomize_norm(module):
    """Norm parameters away from their initial 1 and 0, so that their
    gradients are checked against something."""
    with torch.no_grad():
        module.norm.weight.uniform_(0.5, 1.5)
        if getattr(module.norm, "bias", None) is not None:
            module.norm.bias.uniform_(-0.5, 0.5)


# (norm, gated, bias, weight layout): "kn" stores the weights [in, out], as
# GPT-2's Conv1D.
CONFIGS = [("layernorm", False, True, "nk"), ("layernorm", False, False, "nk"),
           ("rmsnorm", True, False, "nk"), ("rmsnorm", False, True, "nk"),
           ("layernorm", False, True, "kn")]

# gradcheck in float64, every parameter, the input and the residual, with
# dropout in the projection (p) and in the MLP (after fc1 and after fc2):
# the seeds are drawn again from the same generator state at each call.
for norm, gated, bias, layout in CONFIGS:
    for p in (0.0, 0.3):
        module = coda.nn.ResidualNormMLP(K, D, H, norm=norm, gated=gated, bias=bias, dropout=p,
                                         mlp_dropout=0.0 if gated else p,
                                         output_dropout=0.0 if gated else p,
                                         dtype=torch.float64, weight_layout=layout)
        randomize_norm(module)
        names = [name for name, _ in module.named_parameters()]
        x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
        r = torch.randn(M, D, dtype=torch.float64, requires_grad=True)

        def f(x, r, *params):
            torch.manual_seed(11)
            return torch.func.functional_call(module, dict(zip(names, params)), (x, r))

        ok = torch.autograd.gradcheck(f, (x, r, *module.parameters()), raise_exception=False)
        if not ok:
            failures.append(f"gradcheck {norm} gated={gated} bias={bias} {layout} dropout={p}")
print("gradcheck: done")
# CHECK: gradcheck: done

# float32 against the unfused math: outputs and every gradient; eval mode.
for norm, gated, bias, layout in CONFIGS:
    label = f"{norm} gated={gated} bias={bias} {layout}"
    module = coda.nn.ResidualNormMLP(K, D, H, norm=norm, gated=gated, bias=bias,
                                     weight_layout=layout)
    randomize_norm(module)
    x = torch.randn(2, M, K, requires_grad=True)
    r = torch.randn(2, M, D, requires_grad=True)
    y = module(x, r)
    report(f"{label} output", y, unfused(module, x, r), 1e-5)
    inputs = [x, r, *module.parameters()]
    grads = torch.autograd.grad(y.square().sum(), inputs)
    wants = torch.autograd.grad(unfused(module, x, r).square().sum(), inputs)
    for i, (got, want) in enumerate(zip(grads, wants)):
        report(f"{label} gradient {i}", got, want, 1e-5)
    report(f"{label} eval", module.eval()(x, r), unfused(module, x, r), 1e-5)
print("float32: done")
# CHECK: float32: done

# torch.compile(fullgraph=True): no graph break; forward and backward as in
# eager mode.
module = coda.nn.ResidualNormMLP(K, D, H, norm="rmsnorm", gated=True, bias=False)
randomize_norm(module)
compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
x = torch.randn(M, K, requires_grad=True)
r = torch.randn(M, D)
results = []
for run in (module, compiled):
    x.grad = None
    module.zero_grad()
    run(x, r).square().sum().backward()
    results.append([x.grad.clone(), module.norm.weight.grad.clone(), module.proj.weight.grad.clone()])
for what, got, want in zip(("x", "norm weight", "proj weight"), results[1], results[0]):
    report(f"compiled gradient of {what}", got, want, 1e-6)
print("compiled: done")
# CHECK: compiled: done

# LLaMA's block with its RMSNorm folded into the gate and up projections'
# product (fold_norm=True: no kernel applies the norm, rstd in PyTorch):
# gradcheck in float64, the unfused math in float32 (eval mode runs the
# module's unfolded programs), and torch.compile(fullgraph=True).
folded = coda.nn.ResidualNormMLP(K, D, H, norm="rmsnorm", gated=True, bias=False,
                                 dtype=torch.float64, fold_norm=True)
randomize_norm(folded)
names = [name for name, _ in folded.named_parameters()]
x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
r = torch.randn(M, D, dtype=torch.float64, requires_grad=True)
if not torch.autograd.gradcheck(
        lambda x, r, *params: torch.func.functional_call(folded, dict(zip(names, params)), (x, r)),
        (x, r, *folded.parameters()), raise_exception=False):
    failures.append("gradcheck of the folded norm")
folded = coda.nn.ResidualNormMLP(K, D, H, norm="rmsnorm", gated=True, bias=False, fold_norm=True)
randomize_norm(folded)
x = torch.randn(2, M, K, requires_grad=True)
r = torch.randn(2, M, D, requires_grad=True)
y = folded(x, r)
report("folded output", y, unfused(folded, x, r), 1e-5)
inputs = [x, r, *folded.parameters()]
for i, (got, want) in enumerate(zip(torch.autograd.grad(y.square().sum(), inputs),
                                    torch.autograd.grad(unfused(folded, x, r).square().sum(),
                                                        inputs))):
    report(f"folded gradient {i}", got, want, 1e-5)
report("folded eval", folded.eval()(x, r), unfused(folded, x, r), 1e-5)
folded.train()
compiled = torch.compile(folded, fullgraph=True, backend="aot_eager")
results = []
for run in (folded, compiled):
    results.append(torch.autograd.grad(run(x, r).square().sum(), inputs))
for i, (got, want) in enumerate(zip(*results)):
    report(f"folded, compiled gradient {i}", got, want, 1e-6)
try:
    coda.nn.ResidualNormMLP(K, D, H, norm="layernorm", fold_norm=True)
    failures.append("no error for a LayerNorm folded")
except ValueError as error:
    print(error)
print("folded norm: done")
# CHECK: fold_norm needs an RMSNorm, a gated MLP and neither biases nor dropout (LLaMA's block)
# CHECK: folded norm: done

# A gated MLP's stacked gate and up weights are made again in the backward,
# not held from the forward (the allocations still live after a forward of
# 4 tokens are far below one copy, 4 MiB), alone and after the projection,
# with the gradients of the module computed as they were.
for label, module, inputs in (
        ("gated MLP", coda.nn.GatedMLP(512, 1024), (torch.randn(4, 512),)),
        ("after the projection",
         coda.nn.ResidualNormMLP(512, 512, 1024, norm="rmsnorm", gated=True, bias=False),
         (torch.randn(4, 512), torch.randn(4, 512))),
        ("the norm folded",
         coda.nn.ResidualNormMLP(512, 512, 1024, norm="rmsnorm", gated=True, bias=False,
                                 fold_norm=True),
         (torch.randn(4, 512), torch.randn(4, 512)))):
    y, held = checks.held_after(lambda: module(*inputs))
    if not held < 2**20:
        failures.append(f"{label}: {held} bytes held after the forward")
    y.square().sum().backward()
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        # Under other saved-tensor hooks the stacked weight is saved as it is.
        module(*inputs).square().sum().backward()
    for i, (got, p) in enumerate(zip(grads, module.parameters())):
        report(f"{label}: gradient {i}, the weights made again", got, p.grad, 1e-6)
# Made from the weights the forward read: torch.func.functional_call swaps
# other weights in for the forward and the module's own back before the
# backward.
module = coda.nn.GatedMLP(16, 32)
swapped = {name: (torch.randn_like(p) * 0.3).requires_grad_()
           for name, p in module.named_parameters()}
x = torch.randn(8, 16, requires_grad=True)
results = []
for hooks in (contextlib.nullcontext(),
              torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)):
    with hooks:
        y = torch.func.functional_call(module, swapped, (x,))
    results.append(torch.autograd.grad(y.square().sum(), [x, *swapped.values()]))
for i, (got, want) in enumerate(zip(*results)):
    report(f"functional_call: gradient {i}", got, want, 1e-6)
print("stacked weights made again: done")
# CHECK: stacked weights made again: done

# In bf16 and f16 the projection normalizes h as written, rounded to its
# type, as PyTorch's modules normalize the h they are given; in f32 and
# f64 as computed.
for dtype in ("bf16", "f16", "f32"):
    source = coda.nn.ResidualNormMLP(K, D, H)._proj.source(dtype)
    print(dtype, next(line.strip() for line in source.splitlines() if line.strip().startswith("h =")))
# CHECK: bf16 h = bf16(input + bias + residual);
# CHECK: f16 h = f16(input + bias + residual);
# CHECK: f32 h = input + bias + residual;

try:
    coda.nn.ResidualNormMLP(K, D, H, norm="batchnorm")
    failures.append("no error for an unknown norm")
except ValueError as error:
    print(error)
# CHECK: unknown norm 'batchnorm'; expected layernorm or rmsnorm

try:
    coda.nn.ResidualNormMLP(K, D, H, gated=True, weight_layout="kn")
    failures.append("no error for a gated MLP stored [in, out]")
except ValueError as error:
    print(error)
# CHECK: a gated MLP's weights are stored [out, in] (weight_layout='nk')

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("residual norm MLP: ok")
# CHECK: residual norm MLP: ok
