"""An LM head's cross-entropy, forward and backward, without its logits:
coda.nn.linear_cross_entropy against PyTorch (the logits as Hugging Face's
models compute them: the head's bf16 GEMM, then F.cross_entropy in float32),
torch.compile of the same, and Liger-Kernel's fused linear cross-entropy
when installed, in one process on the same inputs. Shapes: LLaMA-1B's head
(8192 x 2048 -> 32000) and GPT-2's (8192 x 768 -> 50257), bf16. Times are
CUDA-event medians with L2 flushed (triton.testing.do_bench) of the loss and
the gradients of x and the weight; peak memory is what the step allocates
beyond its inputs. The cuBLAS GEMM of the head's shape is the unit.
Before timing, each variant's loss and gradients are compared with eager's.

    python3 bench/cross_entropy.py [--shapes llama1b,gpt2]
"""

import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda.nn  # noqa: E402
from common import run_shapes  # noqa: E402

SHAPES = {"llama1b": (8192, 2048, 32000), "gpt2": (8192, 768, 50257)}


def eager(x, w, target):
    return F.cross_entropy((x @ w.T).float(), target)


def variants():
    found = {"eager": eager, "torch.compile": torch.compile(eager),
             "coda": coda.nn.linear_cross_entropy}
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
        found["liger"] = lambda x, w, t: liger_fused_linear_cross_entropy(x, w, t)
    except ImportError:
        pass
    return found


def step(fn, x, w, target):
    x.grad = w.grad = None
    loss = fn(x, w, target)
    loss.backward()
    return loss


def measure(name, m, k, v):
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16).requires_grad_()
    w = (torch.randn(v, k, device="cuda") / k**0.5).bfloat16().requires_grad_()
    target = torch.randint(0, v, (m,), device="cuda")
    gemm = do_bench(lambda: x @ w.T)
    rows = []
    reference = None
    for label, fn in variants().items():
        loss = step(fn, x, w, target)
        got = (loss.detach().double(), x.grad.double(), w.grad.double())
        if reference is None:
            reference = got
        errors = [((g - r).norm() / r.norm()).item() for g, r in zip(got, reference)]
        forward = do_bench(lambda: fn(x, w, target))
        both = do_bench(lambda: step(fn, x, w, target))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(fn, x, w, target)
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**30
        rows.append(dict(shape=name, variant=label, forward_ms=forward, step_ms=both,
                         gemm_ms=gemm, peak_gib=peak, errors=errors))
        print(f"{name} {label}: forward {forward:.3f} ms, forward+backward {both:.3f} ms "
              f"({both / gemm:.2f} GEMMs), peak {peak:.2f} GiB, errors vs eager "
              + " ".join(f"{e:.1e}" for e in errors), flush=True)
    return rows


if __name__ == "__main__":
    run_shapes("cross_entropy", SHAPES, measure,
               [("peak GiB", lambda r: f"{r['peak_gib']:.2f}")])
