"""Trains a small GPT on Python's standard-library sources (byte-level
tokens, nothing downloaded), in eager PyTorch and on coda side by side: the
same initialization, the same batches, the same optimizer. coda's model is
the eager one's copy put on coda kernels by coda.patch. Prints both losses
and tokens/s as it goes and writes a PNG of both loss curves.

With --mlp swiglu the blocks have LLaMA's gated MLP (coda.nn.GatedMLP once
patched) in place of GPT-2's.

On a GPU the models train in bfloat16 on coda's fused kernels; without one,
in float32 on coda's CPU reference (slow: it is the reference lowering, the
check of the kernels' semantics, not a fast CPU path).

    python examples/train.py [--steps 300] [--mlp swiglu] [--out train_loss.png]
"""

import argparse
import copy
import glob
import math
import os
import struct
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import coda  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.dropout = heads, dropout

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for y in self.c_attn(x).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(b, t, c)))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc, self.gelu, self.c_proj = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class SwiGLU(nn.Module):
    """LLaMA's gated MLP: down(silu(gate(x)) * up(x)), hidden 8/3 d rounded
    up to a multiple of 8, no biases."""

    def __init__(self, d):
        super().__init__()
        hidden = -(-8 * d // 3 // 8) * 8
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, d, heads, dropout, mlp="gelu"):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d), CausalSelfAttention(d, heads, dropout)
        self.ln_2, self.mlp = nn.LayerNorm(d), (SwiGLU(d) if mlp == "swiglu" else MLP(d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A nanoGPT-style GPT: token and position embeddings, pre-norm blocks,
    a final LayerNorm and a head tied to the token embedding. mlp="swiglu"
    gives its blocks LLaMA's gated MLP in place of GPT-2's."""

    def __init__(self, vocab=256, context=128, layers=4, heads=4, d=128, dropout=0.0,
                 mlp="gelu"):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, dropout, mlp) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / (math.sqrt(2 * layers) if "c_proj" in name else 1))
            elif "bias" in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def corpus(limit_bytes):
    """The standard library's Python sources, as bytes (at most limit_bytes)."""
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
    data = bytearray()
    for path in files:
        with open(path, "rb") as f:
            data += f.read()
        if len(data) >= limit_bytes:
            break
    return torch.frombuffer(data[:limit_bytes], dtype=torch.uint8).long()


def write_png(path, curves, width=720, height=400):
    """A line chart of `curves` ({label: (rgb, values)}) as a PNG, drawn here
    (no plotting library needed): white background, grey axes."""
    pixels = [[(255, 255, 255)] * width for _ in range(height)]
    left, right, top, bottom = 50, width - 20, 20, height - 40
    values = [v for _, series in curves.values() for v in series]
    low, high = min(values), max(values)
    steps = max(len(series) for _, series in curves.values())
    for x in range(left, right + 1):
        pixels[bottom][x] = (128, 128, 128)
    for y in range(top, bottom + 1):
        pixels[y][left] = (128, 128, 128)

    def point(i, v):
        x = left + (right - left) * i / max(steps - 1, 1)
        y = bottom - (bottom - top) * (v - low) / max(high - low, 1e-9)
        return x, y

    for color, series in curves.values():
        for i in range(1, len(series)):
            (x0, y0), (x1, y1) = point(i - 1, series[i - 1]), point(i, series[i])
            n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            for s in range(n + 1):
                x, y = round(x0 + (x1 - x0) * s / n), round(y0 + (y1 - y0) * s / n)
                for dy in (0, 1):
                    if top <= y + dy <= bottom:
                        pixels[y + dy][x] = color
    raw = b"".join(b"\0" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height,
                                                                   8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=None,
                        help="tokens per sequence (default 256 on a GPU, 64 on the CPU)")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu",
                        help="the blocks' MLP: GPT-2's, or LLaMA's gated one")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="train_loss.png")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    context = args.context or (256 if cuda else 64)
    layers = args.layers or (6 if cuda else 2)
    width = args.width or (384 if cuda else 64)
    torch.manual_seed(args.seed)
    data = corpus(8 << 20 if cuda else 1 << 20)
    split = int(0.95 * len(data))
    eager = GPT(context=context, layers=layers, heads=args.heads, d=width,
                mlp=args.mlp).to(device, dtype)
    fused = copy.deepcopy(eager)
    report = coda.patch(fused)
    print(report)
    models = {"eager": eager, "coda": fused}
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=args.lr, weight_decay=0.1)
                  for k, m in models.items()}
    # A linear warm-up of the learning rate over the first steps.
    warmup = max(1, min(30, args.steps // 10))
    schedules = {k: torch.optim.lr_scheduler.LambdaLR(o, lambda i: min(1.0, (i + 1) / warmup))
                 for k, o in optimizers.items()}
    losses = {k: [] for k in models}
    # Step time after the first steps, which compile coda's programs.
    timed_from = min(10, args.steps // 2)
    seconds = {k: 0.0 for k in models}
    batches = torch.Generator().manual_seed(args.seed)
    print(f"{device} {dtype}: {layers} layers, width {width}, {args.batch} x {context} "
          f"tokens per step, {len(data) / 1e6:.1f} MB of text")
    for step in range(args.steps):
        starts = torch.randint(0, split - context - 1, (args.batch,), generator=batches)
        x = torch.stack([data[s:s + context] for s in starts]).to(device)
        y = torch.stack([data[s + 1:s + context + 1] for s in starts]).to(device)
        for name, model in models.items():
            if cuda:
                torch.cuda.synchronize()
            begin = time.perf_counter()
            loss = model(x, y)
            optimizers[name].zero_grad(set_to_none=True)
            loss.backward()
            optimizers[name].step()
            schedules[name].step()
            losses[name].append(loss.item())
            if step >= timed_from:
                seconds[name] += time.perf_counter() - begin
        if step % 10 == 0 or step == args.steps - 1:
            timed = args.batch * context * (step + 1 - timed_from)
            rates = "  ".join(
                f"{k} {losses[k][-1]:.3f}"
                + (f" ({timed / seconds[k]:,.0f} tok/s)" if seconds[k] else "")
                for k in models)
            print(f"step {step + 1:4d}/{args.steps}  {rates}", flush=True)
    tail = max(1, min(50, args.steps // 4))
    mean = {k: sum(v[-tail:]) / tail for k, v in losses.items()}
    print(f"mean loss over the last {tail} steps: eager {mean['eager']:.4f}, "
          f"coda {mean['coda']:.4f}")
    write_png(args.out, {"eager": ((31, 119, 180), losses["eager"]),
                         "coda": ((255, 127, 14), losses["coda"])})
    print(f"loss curves (eager blue, coda orange): {args.out}")
    return 0 if math.isfinite(mean["coda"]) else 1


if __name__ == "__main__":
    sys.exit(main())
