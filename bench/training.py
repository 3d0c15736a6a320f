"""A Transformer MLP trained with coda.nn.MLP next to eager PyTorch and torch.compile.

y = fc2(dropout(gelu_tanh(fc1(x)), 0.1)) + x, bf16, M = 8192 tokens, for
GPT-2 (768 -> 3072 -> 768) and BERT-L (1024 -> 4096 -> 1024): forward, and
forward + backward (the gradients of x and of every parameter), in one
process on the same inputs, CUDA-event medians with L2 flushed between runs
(triton.testing.do_bench): launched from Python, and replayed from a CUDA
graph (what the GPU itself takes, without the host's launch costs). Then what
each of coda's kernels costs next to the cuBLAS GEMM of the same size, both
replayed from CUDA graphs:

  fc1 saving      fc1 GEMM + bias + GELU + dropout, writing h and the accumulator
  fc2             fc2 GEMM + bias + residual
  fc2 dgrad+fc1'  grad_y * W2 with fc1's epilogue gradient (GELU', the mask, db1)
  grad W2/x/W1    the operand gradients, as coda GEMMs

and the fc2 dgrad kernel and the whole forward + backward again under
torch.use_deterministic_algorithms(True), where db1 is merged in a fixed order
by a second kernel instead of with f32 atomics (the cost of determinism).

The gated MLP of LLaMA, y = down(silu(gate(x)) * up(x)), as coda.nn.GatedMLP
(--gated, for LLaMA-1B 2048 -> 5632 and LLaMA-7B 4096 -> 11008): the same
rows, and its kernels

  gate/up saving  the gate and up GEMM (2 H columns) + SwiGLU, writing h and
                  the accumulator
  down            the down projection
  down dgrad+act' grad_y * W_down with SwiGLU's gradient (accumulator [m, n/2])
  grad W_down/x/W_gate,up  the operand gradients, as coda GEMMs

Before timing, coda's module is checked against the eager one with the same
parameters and dropout off (relative error). Writes training.json and
training.md to $OUT.

    python3 bench/training.py [--shapes gpt2,bertL] [--gated llama1b,llama7b]
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda.nn  # noqa: E402
from coda.autograd import draw_seed, run  # noqa: E402
from common import graphed  # noqa: E402

M = 8192
P = 0.1
SHAPES = {"gpt2": (768, 3072), "bertL": (1024, 4096)}
GATED_SHAPES = {"llama1b": (2048, 5632), "llama7b": (4096, 11008)}


class EagerMLP(nn.Module):
    """The same MLP in PyTorch: the reference every speedup is relative to."""

    def __init__(self, d, h, p):
        super().__init__()
        self.fc1, self.fc2, self.p = nn.Linear(d, h), nn.Linear(h, d), p

    def forward(self, x, residual):
        h = F.dropout(F.gelu(self.fc1(x), approximate="tanh"), self.p, self.training)
        return self.fc2(h) + residual


class EagerGatedMLP(nn.Module):
    """LLaMA's MLP in PyTorch (Hugging Face's LlamaMLP)."""

    def __init__(self, d, h):
        super().__init__()
        self.gate_proj = nn.Linear(d, h, bias=False)
        self.up_proj = nn.Linear(d, h, bias=False)
        self.down_proj = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def deterministic(fn):
    """`fn`, called under torch.use_deterministic_algorithms(True): coda's
    program families then load their deterministic programs. PyTorch's own
    filling of every new tensor with NaN in that mode is left off, so that
    the difference is coda's."""
    def call():
        fill = torch.utils.deterministic.fill_uninitialized_memory
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
        try:
            return fn()
        finally:
            torch.use_deterministic_algorithms(False)
            torch.utils.deterministic.fill_uninitialized_memory = fill
    return call


def bench(fn, grads=()):
    return do_bench(fn, warmup=25, rep=200, grad_to_none=list(grads))


def rel(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def measure(name, d, h):
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    eager = EagerMLP(d, h, P).to(dev, bf16)
    ours = coda.nn.MLP(d, h, dropout=P, device=dev, dtype=bf16)
    ours.load_state_dict(eager.state_dict())
    compiled = torch.compile(eager)
    x = torch.randn(M, d, device=dev, dtype=bf16, requires_grad=True)
    grad = torch.randn(M, d, device=dev, dtype=bf16)

    # Correctness, dropout off: coda's module against the eager one.
    checks = {}
    plain = coda.nn.MLP(d, h, dropout=0.0, device=dev, dtype=bf16)
    plain.load_state_dict(eager.state_dict())
    eager.p = 0.0
    outs = []
    for module in (eager, plain):
        x.grad = None
        for p_ in module.parameters():
            p_.grad = None
        y = module(x, residual=x) if module is plain else module(x, x)
        y.backward(grad)
        outs.append((y.detach(), x.grad.clone(), module.fc1.weight.grad.clone(),
                     module.fc2.weight.grad.clone(), module.fc1.bias.grad.clone()))
    for label, got, want in zip(("y", "grad x", "grad fc1.weight", "grad fc2.weight",
                                 "grad fc1.bias"), outs[1], outs[0]):
        checks[label] = rel(got, want)
    eager.p = P

    params = [x] + list(eager.parameters()) + list(ours.parameters())
    times = {}
    with torch.no_grad():
        times["eager fwd"] = bench(lambda: eager(x, x))
        times["torch.compile fwd"] = bench(lambda: compiled(x, x))
        times["coda fwd"] = bench(lambda: ours(x, residual=x))
    times["eager fwd+bwd"] = bench(lambda: eager(x, x).backward(grad), params)
    times["torch.compile fwd+bwd"] = bench(lambda: compiled(x, x).backward(grad), params)
    times["coda fwd+bwd"] = bench(lambda: ours(x, residual=x).backward(grad), params)
    # Under CUDA graphs, on fresh leaves (whose gradient accumulation is
    # first met on the capture's stream); the gradients accumulate in place,
    # replay after replay.
    eager_g = EagerMLP(d, h, P).to(dev, bf16)
    ours_g = coda.nn.MLP(d, h, dropout=P, device=dev, dtype=bf16)
    eager_g.load_state_dict(eager.state_dict())
    ours_g.load_state_dict(eager.state_dict())
    xg = x.detach().clone().requires_grad_()
    times["eager fwd+bwd graph"] = bench(graphed(lambda: eager_g(xg, xg).backward(grad)))
    times["coda fwd+bwd graph"] = bench(graphed(lambda: ours_g(xg, residual=xg).backward(grad)))
    times["coda fwd+bwd graph, deterministic"] = bench(
        graphed(deterministic(lambda: ours_g(xg, residual=xg).backward(grad))))

    # Each coda kernel next to the cuBLAS GEMM of its size.
    w1, b1, w2, b2 = (t.detach() for t in (ours.fc1.weight, ours.fc1.bias, ours.fc2.weight,
                                           ours.fc2.bias))
    xd, seed = x.detach(), draw_seed(dev)
    up, down = ours._up.key, ours._down[True].key
    hidden, saved = run(up, "saving", xd, w1, [b1], "bias", [], "", seed)
    g1 = run(up, "backward_saved", grad, w2, [saved, b1], "saved_acc,bias", [], "", seed)[0]
    kernels = {
        "fc1 saving": (lambda: run(up, "saving", xd, w1, [b1], "bias", [], "", seed),
                       lambda: F.linear(xd, w1)),
        "fc2": (lambda: run(down, "", hidden, w2, [b2, xd], "bias,residual", [], "", seed),
                lambda: F.linear(hidden, w2)),
        "fc2 dgrad+fc1'": (lambda: run(up, "backward_saved", grad, w2, [saved, b1],
                                       "saved_acc,bias", [], "", seed),
                           lambda: grad @ w2),
        "fc2 dgrad+fc1', deterministic": (
            deterministic(lambda: run(up, "backward_saved", grad, w2, [saved, b1],
                                      "saved_acc,bias", [], "", seed)),
            lambda: grad @ w2),
        **operand_gradients(up, down, grad, hidden, g1, w1, xd, seed, ("W2", "W1")),
    }
    return {"shape": name, "d": d, "h": h, "checks": checks, "ms": times,
            "kernels": time_kernels(kernels)}


def operand_gradients(up, down, grad, hidden, g1, w1, xd, seed, names):
    """The operand gradient GEMMs of an MLP whose up and down families are
    `up` and `down`, beside cuBLAS's: the down and up weights' (`names`) and
    the input's."""
    return {
        f"grad {names[0]}": (lambda: run(down, "grad_b", grad, hidden, [], "", [], "", seed),
                             lambda: grad.T @ hidden),
        "grad x": (lambda: run(up, "grad_a", g1, w1, [], "", [], "", seed), lambda: g1 @ w1),
        f"grad {names[1]}": (lambda: run(up, "grad_b", g1, xd, [], "", [], "", seed),
                             lambda: g1.T @ xd),
    }


def time_kernels(kernels):
    """Each (coda, cuBLAS) pair of `kernels`, replayed from CUDA graphs."""
    return {label: {"coda": bench(graphed(ours_fn)), "cublas": bench(graphed(cublas_fn))}
            for label, (ours_fn, cublas_fn) in kernels.items()}


def measure_gated(name, d, h):
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    eager = EagerGatedMLP(d, h).to(dev, bf16)
    ours = coda.nn.GatedMLP(d, h, device=dev, dtype=bf16)
    ours.load_state_dict(eager.state_dict())
    compiled = torch.compile(eager)
    x = torch.randn(M, d, device=dev, dtype=bf16, requires_grad=True)
    grad = torch.randn(M, d, device=dev, dtype=bf16)

    checks, outs = {}, []
    for module in (eager, ours):
        x.grad = None
        module.zero_grad(set_to_none=True)
        y = module(x)
        y.backward(grad)
        outs.append((y.detach(), x.grad.clone(), module.gate_proj.weight.grad.clone(),
                     module.up_proj.weight.grad.clone(), module.down_proj.weight.grad.clone()))
    for label, got, want in zip(("y", "grad x", "grad gate", "grad up", "grad down"),
                                outs[1], outs[0]):
        checks[label] = rel(got, want)

    params = [x] + list(eager.parameters()) + list(ours.parameters())
    times = {}
    with torch.no_grad():
        times["eager fwd"] = bench(lambda: eager(x))
        times["torch.compile fwd"] = bench(lambda: compiled(x))
        times["coda fwd"] = bench(lambda: ours(x))
    times["eager fwd+bwd"] = bench(lambda: eager(x).backward(grad), params)
    times["torch.compile fwd+bwd"] = bench(lambda: compiled(x).backward(grad), params)
    times["coda fwd+bwd"] = bench(lambda: ours(x).backward(grad), params)
    eager_g = EagerGatedMLP(d, h).to(dev, bf16)
    ours_g = coda.nn.GatedMLP(d, h, device=dev, dtype=bf16)
    eager_g.load_state_dict(eager.state_dict())
    ours_g.load_state_dict(eager.state_dict())
    xg = x.detach().clone().requires_grad_()
    times["eager fwd+bwd graph"] = bench(graphed(lambda: eager_g(xg).backward(grad)))
    times["coda fwd+bwd graph"] = bench(graphed(lambda: ours_g(xg).backward(grad)))

    w1, w2 = ours._programs(False)[2].detach(), ours.down_proj.weight.detach()
    xd, seed = x.detach(), draw_seed(dev)
    up, down = ours._up.key, ours._down[False].key
    hidden, saved = run(up, "saving", xd, w1, [], "", [], "", seed)
    g1 = run(up, "backward_saved", grad, w2, [saved], "saved_acc", [], "", seed)[0]
    kernels = {
        "gate/up saving": (lambda: run(up, "saving", xd, w1, [], "", [], "", seed),
                           lambda: F.linear(xd, w1)),
        "down": (lambda: run(down, "", hidden, w2, [], "", [], "", seed),
                 lambda: F.linear(hidden, w2)),
        "down dgrad+act'": (lambda: run(up, "backward_saved", grad, w2, [saved], "saved_acc",
                                        [], "", seed),
                            lambda: grad @ w2),
        **operand_gradients(up, down, grad, hidden, g1, w1, xd, seed,
                            ("W_down", "W_gate,up")),
    }
    return {"shape": name, "d": d, "h": h, "checks": checks, "ms": times,
            "kernels": time_kernels(kernels)}


def table(results):
    lines = ["| model | eager fwd | compile fwd | coda fwd | eager fwd+bwd | compile fwd+bwd "
             "| coda fwd+bwd | coda vs eager | coda vs compile | eager graph | coda graph "
             "| coda vs eager, graphs |", "|" + "---|" * 12]
    for r in results:
        t = r["ms"]
        lines.append(
            f"| {r['shape']} {r['d']}->{r['h']}->{r['d']} | {t['eager fwd']:.4f} "
            f"| {t['torch.compile fwd']:.4f} | {t['coda fwd']:.4f} | {t['eager fwd+bwd']:.4f} "
            f"| {t['torch.compile fwd+bwd']:.4f} | {t['coda fwd+bwd']:.4f} "
            f"| {t['eager fwd+bwd'] / t['coda fwd+bwd']:.2f}x "
            f"| {t['torch.compile fwd+bwd'] / t['coda fwd+bwd']:.2f}x "
            f"| {t['eager fwd+bwd graph']:.4f} | {t['coda fwd+bwd graph']:.4f} "
            f"| {t['eager fwd+bwd graph'] / t['coda fwd+bwd graph']:.2f}x |")
    lines += ["", "| model | coda fwd+bwd graph | deterministic | cost |", "|---|---|---|---|"]
    for r in results:
        t = r["ms"]
        if "coda fwd+bwd graph, deterministic" not in t:
            continue  # nothing reduced across rows: the same kernels
        lines.append(f"| {r['shape']} | {t['coda fwd+bwd graph']:.4f} "
                     f"| {t['coda fwd+bwd graph, deterministic']:.4f} "
                     f"| {t['coda fwd+bwd graph, deterministic'] / t['coda fwd+bwd graph']:.3f}x |")
    lines += ["", "| model | kernel | coda ms | cuBLAS GEMM ms | ratio |", "|---|---|---|---|---|"]
    for r in results:
        for label, k in r["kernels"].items():
            lines.append(f"| {r['shape']} | {label} | {k['coda']:.4f} | {k['cublas']:.4f} "
                         f"| {k['coda'] / k['cublas']:.2f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--gated", default="")
    args = parser.parse_args()
    results = []
    runs = [(measure, name, SHAPES[name]) for name in args.shapes.split(",") if name]
    runs += [(measure_gated, name, GATED_SHAPES[name]) for name in args.gated.split(",") if name]
    for fn, name, shape in runs:
        start = time.time()
        results.append(fn(name, *shape))
        print(f"{name}: checks {results[-1]['checks']} ({time.time() - start:.0f} s)", flush=True)
    text = table(results)
    print(text)
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(),
                   "torch": torch.__version__, "results": results}, f, indent=1)
    with open(os.path.join(out, "training.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
