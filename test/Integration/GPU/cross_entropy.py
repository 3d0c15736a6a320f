# REQUIRES: cuda-gpu, torch
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %coda_src
#
# An LM head's cross-entropy without its logits (coda.nn.linear_cross_entropy)
# on bf16 CUDA tensors: the loss (mean, sum and per row) and the gradients of
# x and of the weight, against PyTorch autograd of F.cross_entropy(x W^T) in
# float64 on the same bf16 values, with rows that ignore_index drops. Shapes:
# LLaMA's vocabulary (32000) and GPT-2's (50257, rows not a multiple of 16
# bytes), and small ragged ones whose rows span one tile or a few, also with
# the logits soft-capped (softcap, Gemma 2's); every
# tensor PyTorch allocates (the kernels' outputs included) filled with NaN
# first.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks
import torch.nn.functional as F

import coda.nn

checks.poison_allocations()
failures = []
cuda = torch.device("cuda")


def report(what, got, want, tolerance):
    checks.report(failures, what, got, want, tolerance)


def check(m, k, v, scale, ignored, softcap=None):
    torch.manual_seed(m * 7 + v)
    x = (torch.randn(m, k, device=cuda) * scale).bfloat16().requires_grad_()
    w = (torch.randn(v, k, device=cuda) / k**0.5).bfloat16().requires_grad_()
    target = torch.randint(0, v, (m,), device=cuda)
    target[torch.randperm(m, device=cuda)[:ignored]] = -100
    what = f"{m}x{k} vocabulary {v}" + (f" soft-capped at {softcap}" if softcap else "")
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()

    def logits64():
        logits = x64 @ w64.T
        return softcap * torch.tanh(logits / softcap) if softcap else logits

    for reduction in ("mean", "sum", "none"):
        loss = coda.nn.linear_cross_entropy(x, w, target, reduction=reduction, softcap=softcap)
        want = F.cross_entropy(logits64(), target, reduction=reduction)
        report(f"{what} loss ({reduction})", loss, want, 2e-3)
    x.grad = w.grad = None
    loss = coda.nn.linear_cross_entropy(x, w, target, softcap=softcap)
    grad = torch.rand((), device=cuda) + 0.5
    loss.backward(grad)
    want = F.cross_entropy(logits64(), target)
    want.backward(grad.double())
    report(f"{what} grad x", x.grad, x64.grad, 2e-2)
    report(f"{what} grad weight", w.grad, w64.grad, 2e-2)


check(333, 72, 517, 1.0, 20)
check(1000, 136, 4097, 3.0, 0)
check(777, 768, 50257, 2.0, 100)
check(1024, 2048, 32000, 1.0, 37)
# Gemma 2's soft-capped logits (here capped at 3, most of them bent), over a
# padded vocabulary and an even one.
check(333, 72, 517, 3.0, 20, softcap=3.0)
check(1000, 256, 4096, 3.0, 9, softcap=30.0)

if failures:
    print("FAILED:", ", ".join(failures))
    sys.exit(1)
print("all passed")
