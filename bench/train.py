"""The training step of a whole model on the GPU, in one process: eager
PyTorch, torch.compile, coda (coda.patch) and coda under torch.compile
(each also with CUDA graphs: torch.compile's mode="reduce-overhead", or
without torch.compile the whole step captured in one graph), on
the nanoGPT-style GPT of examples/train.py (bfloat16 parameters, AdamW), on
Hugging Face's GPT2LMHeadModel built from a config (--model gpt2; with
--vocab 50257, GPT-2's unpadded vocabulary), its BertForMaskedLM (--model
bert; masked-LM loss over every token), or its LlamaForCausalLM
(--model llama), where Liger-Kernel's apply_liger_kernel_to_llama is a
variant too ("liger", when liger_kernel is importable, and "liger+graphs";
it patches transformers' LLaMA classes, so it runs last). The causal LMs are called
with use_cache=False, as training loops call them (no key and value cache);
every Hugging Face model's SDPA attention runs without a mask, also while a
step is captured (coda.unmasked_attention: the batches are whole sequences).
For each: step time and tokens/s (CUDA events over timed steps after
warm-up), the host's time to enqueue a step (the step is host-bound where
the two are equal), the first step's time (compiles included: coda's
kernels not in its disk cache, $CODA_CACHE_DIR, and torch.compile's graphs),
peak memory, and where the step's CUDA time goes (torch.profiler
over a few steps: GEMMs (cuBLAS), coda's fused kernels, attention, and the
rest: the memory-bound operators a fused epilogue is meant to remove);
--chart PATH also draws them as an SVG bar chart.

    python bench/train.py [--layers 12 --width 768 --heads 12 --batch 8 --context 1024]
    python bench/train.py --model llama --layers 8 --width 2048 --heads 16 --batch 4 \
        --context 2048 --vocab 32000 --variants eager,compile,coda,liger
    python bench/train.py --model gpt2 --layers 12 --width 768 --heads 12 --batch 8 \
        --context 1024 --vocab 50257 --variants eager,compile,coda
    python bench/train.py --model bert --layers 24 --width 1024 --heads 16 --batch 16 \
        --context 512 --vocab 30522 --variants eager,compile,coda
"""

import argparse
import copy
import cProfile
import math
import os
import pstats
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import coda  # noqa: E402
from common import graphed  # noqa: E402
from train import GPT  # noqa: E402

# Kernel names by what they do: coda's are named after their programs.
_CODA = re.compile(r"^(fc1|fc2|out_projection|linear|dense|gated|cross_entropy|projection_\w+"
                   r"|rmsnorm_\w+|scaled_weight_gradient)(_\w+)?$")
_GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|gemv|splitk", re.I)
_ATTENTION = re.compile(r"flash|fmha|attention|sdpa", re.I)


# The kinds of CUDA time (category's answers), with their names and colors in
# the chart.
_KINDS = (("gemm", "GEMMs (cuBLAS)", "#4c78a8"), ("coda", "coda kernels", "#f58518"),
          ("attention", "attention", "#54a24b"), ("other", "other kernels", "#9d9d9d"))


def category(name):
    if _CODA.match(name):
        return "coda"
    if _ATTENTION.search(name):
        return "attention"
    if _GEMM.search(name):
        return "gemm"
    return "other"


class LMLoss(torch.nn.Module):
    """A Hugging Face language model called as the GPT is: (tokens, labels)
    -> loss. A causal LM is called with use_cache=False, as training loops
    call it: by default its layers would build a key and value cache (a
    copy of each layer's keys and values) that training never reads."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.options = {"use_cache": False} if type(model).__name__.endswith(
            ("ForCausalLM", "LMHeadModel")) else {}

    def forward(self, x, y):
        return self.model(input_ids=x, labels=y, **self.options).loss


def llama(args):
    """LlamaForCausalLM of the arguments' sizes (intermediate 2.75 x width,
    as LLaMA-1B's 5632 for 2048), SDPA attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=args.width, intermediate_size=args.width * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads, vocab_size=args.vocab,
                         max_position_embeddings=args.context, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def gpt2(args):
    """Hugging Face's GPT2LMHeadModel of the arguments' sizes (its dropouts
    at 0.1, SDPA attention); --vocab 50257 is GPT-2's unpadded vocabulary."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=args.vocab, n_positions=args.context, n_embd=args.width,
                        n_layer=args.layers, n_head=args.heads, attn_implementation="sdpa")
    return GPT2LMHeadModel(config)


def bert(args):
    """Hugging Face's BertForMaskedLM of the arguments' sizes (intermediate
    4 x width, its dropouts at 0.1, SDPA attention); BERT-large is 24 layers
    of width 1024 and 16 heads, vocabulary 30522."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=args.vocab, hidden_size=args.width,
                        num_hidden_layers=args.layers, num_attention_heads=args.heads,
                        intermediate_size=4 * args.width, max_position_embeddings=args.context,
                        attn_implementation="sdpa")
    return BertForMaskedLM(config)


_HF_MODELS = {"llama": llama, "gpt2": gpt2, "bert": bert}


def hf_model(args, build):
    """The Hugging Face model `build` makes of the arguments, its attention
    unmasked (coda.unmasked_attention: this script's batches are whole
    sequences, and a model called without a mask under CUDA graph capture or
    torch.compile would otherwise attend through a dense one), wrapped as
    LMLoss, in bf16 on the GPU. Every variant, eager ones included, runs it."""
    return LMLoss(coda.unmasked_attention(build(args))).cuda().to(torch.bfloat16)


def step_fn(model, optimizer, x, y):
    def step():
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss
    return step


def graphed_step_fn(model, optimizer, x, y, warmup=3):
    """The whole training step (forward, backward, the optimizer's update)
    captured in one CUDA graph, without torch.compile (common.graphed: after
    `warmup` eager steps on a side stream, which compile coda's kernels and
    make its cached tensors). The step sets the gradients to None before its
    backward, so the captured one makes them in the graph's memory and each
    replay rewrites them. Dropout masks are drawn again at each replay
    (PyTorch's generator, coda's seeds drawn on the GPU)."""
    step, losses = step_fn(model, optimizer, x, y), []

    def kept():
        losses[:] = [step()]

    # thread_local: coda's compile threads may still load modules.
    replay = graphed(kept, warmup, capture_error_mode="thread_local")
    # The last call was the captured one: its loss is the one each replay
    # writes.
    loss = losses[0]

    def run():
        replay()
        return loss
    return run


def measure(name, model, x, y, warmup, steps, profiled, host_profile):
    graphed = name.endswith("graphs") and "compile" not in name
    # capturable: the fused update reads its step count on the GPU, as a
    # captured update must.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=graphed)
    # The first step compiles (coda's kernels missing from its disk cache,
    # torch.compile's graphs; a captured step's warm-up and capture): its
    # time to the GPU's finish, in seconds.
    torch.cuda.synchronize()
    # A captured step's activations are allocated as it is captured, in the
    # graph's memory, which its replays reuse: its peak is taken from here.
    torch.cuda.reset_peak_memory_stats()
    first = time.perf_counter()
    step = (graphed_step_fn if graphed else step_fn)(model, optimizer, x, y)
    step()
    torch.cuda.synchronize()
    first = time.perf_counter() - first
    for _ in range(warmup - 1):
        step()
    torch.cuda.synchronize()
    if not graphed:
        torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    enqueue = time.perf_counter()
    for _ in range(steps):
        loss = step()
    # The host's time to enqueue a step: the step is host-bound when it is
    # the step's time.
    host = (time.perf_counter() - enqueue) * 1000 / steps
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / steps
    if host_profile:
        # The backward on this thread, not on autograd's device thread, which
        # cProfile would not see.
        with torch.autograd.set_multithreading_enabled(False):
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(profiled):
                step()
            torch.cuda.synchronize()
            profiler.disable()
        print(f"{name}: the host's time by function over {profiled} steps")
        for order in ("tottime", "cumulative"):
            pstats.Stats(profiler).sort_stats(order).print_stats(host_profile)
    peak = torch.cuda.max_memory_allocated() / 2**30
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(profiled):
            step()
        torch.cuda.synchronize()
    shares = {kind: 0.0 for kind, _, _ in _KINDS}
    kernels = []
    for event in prof.key_averages():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            shares[category(event.key)] += event.device_time_total / 1000 / profiled
            kernels.append((event.device_time_total / 1000 / profiled, event.count / profiled,
                            event.key))
    return {"name": name, "ms": ms, "host": host, "first": first, "peak": peak,
            "loss": loss.item(), **shares, "kernels": sorted(kernels, reverse=True)}


def write_chart(path, title, rows):
    """An SVG bar chart of `rows` (measure's results, eager first): each
    variant's CUDA time per step stacked by kind, its step time marked and
    written beside it with its speed-up over eager."""
    eager = rows[0]["ms"]
    scale_ms = max(max(r["ms"], sum(r[k] for k, _, _ in _KINDS)) for r in rows) * 1.05
    left, width, bar, gap, top = 190, 560, 22, 12, 56
    height = top + len(rows) * (bar + gap) + 60
    x = lambda ms: left + width * ms / scale_ms  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 150}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14">{title}</text>']
    for i, (_, label, color) in enumerate(_KINDS):
        out.append(f'<rect x="{10 + 150 * i}" y="32" width="12" height="12" fill="{color}"/>'
                   f'<text x="{26 + 150 * i}" y="43">{label}</text>')
    step = 10 ** math.floor(math.log10(scale_ms / 2))
    step *= 5 if scale_ms / step > 20 else 2 if scale_ms / step > 8 else 1
    axis = top + len(rows) * (bar + gap)
    for tick in range(0, int(scale_ms / step) + 1):
        ms = tick * step
        out.append(f'<line x1="{x(ms):.1f}" y1="{top - 4}" x2="{x(ms):.1f}" y2="{axis}" '
                   'stroke="#e0e0e0"/>'
                   f'<text x="{x(ms):.1f}" y="{axis + 16}" text-anchor="middle">{ms:g}</text>')
    out.append(f'<text x="{left + width / 2}" y="{axis + 36}" text-anchor="middle">ms per step '
               '(bars: CUDA time by kind; tick and label: the step)</text>')
    for i, r in enumerate(rows):
        y = top + i * (bar + gap)
        out.append(f'<text x="{left - 8}" y="{y + bar * 0.7:.1f}" text-anchor="end">'
                   f'{r["name"]}</text>')
        start = 0.0
        for kind, _, color in _KINDS:
            out.append(f'<rect x="{x(start):.1f}" y="{y}" '
                       f'width="{x(start + r[kind]) - x(start):.1f}" height="{bar}" '
                       f'fill="{color}"/>')
            start += r[kind]
        out.append(f'<line x1="{x(r["ms"]):.1f}" y1="{y - 3}" x2="{x(r["ms"]):.1f}" '
                   f'y2="{y + bar + 3}" stroke="black" stroke-width="2"/>'
                   f'<text x="{x(max(r["ms"], start)) + 6:.1f}" y="{y + bar * 0.7:.1f}">'
                   f'{r["ms"]:.2f} ms ({eager / r["ms"]:.2f}x)</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("gpt", "llama", "gpt2", "bert"), default="gpt")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=256,
                        help="the vocabulary (256 bytes; 50257 is GPT-2's, unpadded)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profiled", type=int, default=3)
    parser.add_argument("--host-profile", type=int, default=0,
                        help="also print each variant's N costliest functions on the host (cProfile), "
                             "by their own time and with their callees")
    parser.add_argument("--caller-thread-backward", action="store_true",
                        help="run every backward on the calling thread "
                             "(torch.autograd.set_multithreading_enabled(False)) rather than on "
                             "autograd's device thread: what the handoff costs a host-bound step")
    parser.add_argument("--chart", metavar="PATH",
                        help="also write the variants' step and CUDA time by kind as an SVG chart")
    parser.add_argument("--kernels", type=int, default=0,
                        help="also list each variant's N costliest kernels per step")
    parser.add_argument("--variants", default="eager,compile,compile+graphs,coda,coda+compile,"
                                              "coda+compile+graphs",
                        help="comma-separated: eager, compile, coda, coda+compile, liger; "
                             "+graphs after any of them (eager+graphs, coda+graphs, "
                             "liger+graphs, ...) runs its step in CUDA graphs (torch.compile's "
                             "reduce-overhead, or without torch.compile the whole step captured "
                             "in one graph); "
                             "coda+unfolded applies LLaMA's post-attention RMSNorm in the output "
                             "projection's kernel rather than folding it into the gate and up "
                             "projections' product (coda.nn.ResidualNormMLP's fold_norm, "
                             "coda.patch's choice)")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.caller_thread_backward:
        torch.autograd.set_multithreading_enabled(False)
    if any(v.startswith("liger") for v in args.variants.split(",")) and args.model != "llama":
        parser.error("the liger variant patches transformers' LLaMA classes: --model llama")
    if args.model in _HF_MODELS:
        base = hf_model(args, _HF_MODELS[args.model])
    else:
        base = GPT(vocab=args.vocab, context=args.context, layers=args.layers, heads=args.heads,
                   d=args.width).cuda().to(torch.bfloat16)
    x = torch.randint(0, args.vocab, (args.batch, args.context), device="cuda")
    y = torch.randint(0, args.vocab, (args.batch, args.context), device="cuda")
    tokens = args.batch * args.context
    print(f"{torch.cuda.get_device_name()}: {args.model}, {args.layers} layers, width {args.width}, "
          f"{args.heads} heads, vocabulary {args.vocab}, {args.batch} x {args.context} tokens per step, "
          "bf16, AdamW")
    rows = []
    # Liger patches transformers' classes for good: it goes last.
    variants = sorted(args.variants.split(","), key=lambda v: v.startswith("liger"))
    for variant in variants:
        if variant.startswith("liger"):
            from liger_kernel.transformers import apply_liger_kernel_to_llama

            apply_liger_kernel_to_llama()
            model = hf_model(args, llama)
            model.load_state_dict(base.state_dict())
        else:
            model = copy.deepcopy(base)
        if variant.startswith("coda"):
            report = coda.patch(model)
            # What went on coda, each description once (a model's blocks
            # share theirs), and what was left, and why.
            kinds = sorted({what for _, what in report.replaced})
            print(f"{variant}: coda.patch replaced {len(report.replaced)} modules: "
                  + "; ".join(kinds))
            for name, why in report.skipped:
                print(f"{variant}: left as is: {name or '<model>'}: {why}")
            if "unfolded" in variant:
                # LLaMA's post-attention RMSNorm applied in the output
                # projection's kernel (coda.nn.ResidualNormMLP's fold_norm off).
                cores = [m._coda_tail for m in model.modules()
                         if getattr(getattr(m, "_coda_tail", None), "fold_norm", False)]
                for core in cores:
                    core.fold_norm = False
                print(f"{variant}: {len(cores)} post-attention norms not folded")
        if "compile" in variant:
            model = torch.compile(model, mode="reduce-overhead" if "graphs" in variant
                                  else None)
        rows.append(measure(variant, model, x, y, args.warmup, args.steps, args.profiled,
                            args.host_profile))
        print(f"{variant}: {rows[-1]['ms']:.2f} ms/step, peak {rows[-1]['peak']:.2f} GiB",
              flush=True)
        del model
        torch.cuda.empty_cache()
    eager = rows[0]["ms"]
    print(f"{'variant':20} {'ms/step':>8} {'host ms':>8} {'tok/s':>10} {'vs eager':>8} {'peak GiB':>8} "
          f"{'first s':>8} {'GEMM ms':>8} {'coda ms':>8} {'attn ms':>8} {'other ms':>8}")
    for r in rows:
        print(f"{r['name']:20} {r['ms']:8.2f} {r['host']:8.2f} {tokens / r['ms'] * 1000:10,.0f} "
              f"{eager / r['ms']:7.2f}x {r['peak']:8.2f} "
              f"{r['first']:8.1f} {r['gemm']:8.2f} {r['coda']:8.2f} "
              f"{r['attention']:8.2f} {r['other']:8.2f}")
    if args.chart:
        write_chart(args.chart, f"{torch.cuda.get_device_name()}: {args.model}, {args.layers} "
                    f"layers, width {args.width}, {args.batch} x {args.context} tokens, bf16", rows)
        print(f"chart: {args.chart}")
    for r in rows if args.kernels else []:
        print(f"{r['name']}: the costliest kernels of a step (ms per step, calls per step, "
              "us per call)")
        for ms, calls, kernel in r["kernels"][:args.kernels]:
            print(f"  {ms:7.3f} {calls:5.0f} {ms / calls * 1000:8.1f}  {kernel[:90]}")


if __name__ == "__main__":
    main()
