# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %coda_src/examples/train.py --steps 2 --layers 1 --width 32 --context 16 --out %t.png | FileCheck %s --check-prefix=TRAIN
# RUN: %python -c "import sys; sys.exit(open(sys.argv[1], 'rb').read(8) != b'\x89PNG\r\n\x1a\n')" %t.png
#
# coda.patch on the CPU reference, in float32: a nanoGPT-style GPT (the one
# examples/train.py trains) and an nn.Sequential MLP patched in place keep
# their parameters and state_dict, and compute the losses and gradients of
# the eager model; what it cannot fuse it leaves alone and says why.

import copy
import io
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
import torch
from torch import nn

import coda
from train import GPT

torch.manual_seed(0)
failures = []


def close(what, got, want, tolerance=1e-4):
    error = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
    if not error < tolerance:
        failures.append(f"{what}: relative error {error:.2e}")


def check_step(label, eager, fused, x, y):
    """One step on x, y gives `fused` (eager, patched) eager's loss and
    every gradient."""
    want, got = eager(x, y), fused(x, y)
    close(f"loss, {label}", got, want, 1e-5)
    want.backward()
    got.backward()
    for (name, p), q in zip(eager.named_parameters(), fused.parameters()):
        close(f"gradient of {name}, {label}", q.grad, p.grad)


eager = GPT(context=16, layers=2, heads=2, d=32)
fused = copy.deepcopy(eager)
report = coda.patch(fused)
print(report)
# CHECK: coda.patch: 2 modules replaced
# CHECK-NEXT: blocks.0: block: attention output projection + dropout + residual + ln_2 in one kernel, MLP (gelu_erf) + residual as coda's fused MLP
# CHECK-NEXT: blocks.1: block:
if list(eager.state_dict()) != list(fused.state_dict()):
    failures.append("state_dict keys changed")
for (name, p), q in zip(eager.named_parameters(), fused.parameters()):
    if not torch.equal(p, q):
        failures.append(f"parameter {name} changed")

idx = torch.randint(0, 256, (3, 16))
targets = torch.randint(0, 256, (3, 16))
for mode in ("train", "eval"):
    eager.train(mode == "train")
    fused.train(mode == "train")
    want, got = eager(idx, targets), fused(idx, targets)
    close(f"{mode} loss", got, want, 1e-5)
eager.train()
fused.train()
eager(idx, targets).backward()
fused(idx, targets).backward()
for (name, p), q in zip(eager.named_parameters(), fused.parameters()):
    close(f"gradient of {name}", q.grad, p.grad)

# An optimizer step on the patched model moves the tensors its kernels read.
optimizer = torch.optim.SGD(fused.parameters(), lr=0.1)
before = fused(idx, targets).item()
optimizer.step()
if not fused(idx, targets).item() < before:
    failures.append("an SGD step did not lower the patched model's loss")

# A vocabulary that is not a multiple of 8: the head (tied to the token
# embedding) runs on coda's GEMM too, with the eager model's loss and
# gradients.
eager = GPT(vocab=250, context=16, layers=1, heads=2, d=32)
fused = copy.deepcopy(eager)
print(coda.patch(fused))
# CHECK: coda.patch: 2 modules replaced
# CHECK-NEXT: blocks.0: block:
# CHECK-NEXT: head: linear 32 -> 250 (no bias): coda's GEMM (a width not a multiple of 8, which cuBLAS runs several times slower)
odd = torch.randint(0, 250, (3, 16))
check_step("vocabulary 250", eager, fused, odd, odd)

# A block whose ln_2 has no bias keeps it as PyTorch's, between the output
# projection's kernel and the MLP's, with the eager model's loss and
# gradients.
eager = GPT(context=16, layers=1, heads=2, d=32)
eager.blocks[0].ln_2 = nn.LayerNorm(32, bias=False)
fused = copy.deepcopy(eager)
print(coda.patch(fused))
# CHECK: coda.patch: 1 modules replaced
# CHECK-NEXT: blocks.0: block: attention output projection + dropout + residual in one kernel, MLP (gelu_erf) + residual as coda's fused MLP
check_step("ln_2 without a bias", eager, fused, idx, targets)

# With dropout the output projection draws coda's mask in training; in
# eval mode the patched model computes the eager one's loss.
eager = GPT(context=16, layers=1, heads=2, d=32, dropout=0.2)
fused = copy.deepcopy(eager)
coda.patch(fused)
eager.eval()
fused.eval()
close("eval loss with dropout", fused(idx, targets), eager(idx, targets), 1e-5)
fused.train()
if not torch.isfinite(fused(idx, targets)):
    failures.append("training loss with dropout is not finite")

# A deep copy of the patched model (an EMA's copy, say) is the model copied
# as it was, then patched: its forwards hold its own children, its losses are
# the original's until its parameters change, and changing them leaves the
# original as it was. A patched module inside it is not copied alone, and no
# patched module pickles (its patched forward holds the original's children,
# which a copy's would run): a clear error; the state_dict saves as before.
fused.eval()
want = fused(idx, targets).item()
twin = copy.deepcopy(fused)
if twin(idx, targets).item() != want or "forward" not in vars(twin.blocks[0]):
    failures.append("the deep copy of a patched model is not patched or does not compute as "
                    "the model")
with torch.no_grad():
    for parameter in twin.parameters():
        parameter.mul_(0.5)
if twin(idx, targets).item() == want or fused(idx, targets).item() != want:
    failures.append("the deep copy of a patched model computes with the original's parameters")
swa = torch.optim.swa_utils.AveragedModel(fused)
if swa(idx, targets).item() != want:
    failures.append("an AveragedModel (EMA) of a patched model does not compute as the model")
fused.train()
print("deepcopy of the patched model: ok")
# CHECK: deepcopy of the patched model: ok
for what, act in (("deepcopy", lambda m: copy.deepcopy(m.blocks[0])),
                  ("torch.save", lambda m: torch.save(m, io.BytesIO()))):
    try:
        act(fused)
        failures.append(f"{what} of a patched module did not refuse")
    except TypeError as error:
        print(what, error)
# CHECK: deepcopy Block was patched by coda.patch, whose forward holds this module's own children: a copy would run the original's. Copy the whole model (copy.deepcopy of the model coda.patch was given patches the copy), copy or save it before coda.patch, or save its state_dict
# CHECK: torch.save Block was patched by coda.patch
torch.save(fused.state_dict(), io.BytesIO())
module = coda.nn.MLP(8, 16, dropout=0.0)
x = torch.randn(3, 8)
want = module(x)
buffer = io.BytesIO()
torch.save(module, buffer)
buffer.seek(0)
loaded = torch.load(buffer, weights_only=False)
twin = copy.deepcopy(module)
with torch.no_grad():
    twin.fc1.weight.mul_(2)
close("coda.nn.MLP saved whole and loaded", loaded(x), want, 1e-6)
close("coda.nn.MLP's original after its copy changed", module(x), want, 1e-6)
if torch.allclose(twin(x), want):
    failures.append("a copy of coda.nn.MLP did not compute with its own parameters")
print("copies: done")
# CHECK: copies: done

# Under torch.autocast (bf16 on the CPU) with float32 parameters, as mixed
# precision trains: the patched GPT's GEMMs take their operands in bf16 as
# F.linear's do, and its loss and float32 gradients are the eager model's
# under autocast within bf16's rounding.
for mlp in ("gelu", "swiglu"):
    eager = GPT(context=16, layers=2, heads=2, d=32, mlp=mlp) if mlp == "swiglu" else \
        GPT(context=16, layers=2, heads=2, d=32)
    fused = copy.deepcopy(eager)
    coda.patch(fused)
    losses = []
    for model in (eager, fused):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            losses.append(model(idx, targets))
        losses[-1].backward()
    close(f"autocast loss, {mlp}", losses[1], losses[0], 1e-3)
    for (name, p), q in zip(eager.named_parameters(), fused.parameters()):
        if q.grad is None or q.grad.dtype != torch.float32:
            failures.append(f"autocast {mlp}: {name}'s gradient is not float32")
        else:
            close(f"autocast gradient of {name}, {mlp}", q.grad, p.grad, 2e-2)
print("autocast: done")
# CHECK: autocast: done

# Standalone nn.Sequential MLPs, one with dropout after its second
# projection (in fc2's epilogue); one with an activation coda has no
# epilogue for is left.
model = nn.Sequential(nn.Sequential(nn.Linear(8, 32), nn.GELU(approximate="tanh"),
                                    nn.Linear(32, 8)),
                      nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8),
                                    nn.Dropout(0.1)),
                      nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(), nn.Linear(16, 8)),
                      nn.Linear(8, 13))
reference = copy.deepcopy(model)
print(coda.patch(model))
# CHECK: coda.patch: 3 modules replaced
# CHECK-NEXT: 0: MLP (gelu) as coda's fused MLP
# CHECK-NEXT: 1: MLP (gelu_erf, dropout 0.1) as coda's fused MLP
# CHECK-NEXT: 3: linear 8 -> 13: coda's GEMM
# CHECK-NEXT: left as is: 2: activation LeakyReLU has no coda epilogue

# MLP modules left as they are, each with its reason.
def holder(**children):
    module = nn.Module()
    for name, child in children.items():
        setattr(module, name, child)
    return module


left = nn.ModuleDict({
    "no_activation": holder(c_fc=nn.Linear(8, 16), c_proj=nn.Linear(16, 8)),
    "one_bias": holder(c_fc=nn.Linear(8, 16), act=nn.GELU(), c_proj=nn.Linear(16, 8, bias=False)),
    "unchained": holder(c_fc=nn.Linear(8, 16), act=nn.GELU(), c_proj=nn.Linear(24, 8)),
    "gated_biases": holder(gate_proj=nn.Linear(8, 16), up_proj=nn.Linear(8, 16),
                           down_proj=nn.Linear(16, 8), act_fn=nn.SiLU()),
})
print(coda.patch(left))
# CHECK: coda.patch: 0 modules replaced
# CHECK-NEXT: left as is: no_activation: an MLP without an activation module (gelu or act or activation)
# CHECK-NEXT: left as is: one_bias: one projection has a bias and the other not
# CHECK-NEXT: left as is: unchained: the projections' sizes do not chain
# CHECK-NEXT: left as is: gated_biases: a gated MLP with biases

x = torch.randn(5, 8, requires_grad=True)
model.eval()
reference.eval()
close("nn.Sequential MLP", model[0](x), reference[0](x))
close("nn.Sequential MLP with dropout, eval", model[1](x), reference[1](x))
x2 = x.detach().clone().requires_grad_()
close("linear 8 -> 13", model[3](x), reference[3](x2))
model[3](x).square().sum().backward()
reference[3](x2).square().sum().backward()
close("linear 8 -> 13: gradient of x", x.grad, x2.grad)
close("linear 8 -> 13: gradient of the weight", model[3].weight.grad, reference[3].weight.grad)
close("linear 8 -> 13: gradient of the bias", model[3].bias.grad, reference[3].bias.grad)
x.grad = None
model.train()
y = model[1](x)
y.sum().backward()
if not (torch.isfinite(y).all() and torch.isfinite(x.grad).all()):
    failures.append("the MLP with dropout after fc2 does not train")

# At exit, before the interpreter's finalization, coda releases its programs;
# a call after that (from a later exit handler) is an error, not a crash.
from coda.runtime import _release_live_programs  # noqa: E402

_release_live_programs()
try:
    model[0](x)
    failures.append("a released program ran")
except coda.CodaError as error:
    print("after release:", error)
# CHECK: after release: the program was released: the interpreter is exiting

print("failures:", failures or "none")
# CHECK: failures: none
# TRAIN: coda.patch: 1 modules replaced
# TRAIN: step    2/2
# TRAIN: loss curves
