"""coda's fused GEMM + epilogue kernels next to cuBLAS, eager PyTorch and torch.compile.

One process, the same bf16 inputs for everyone, M = 8192 tokens, CUDA-event
medians with L2 flushed between runs (triton.testing.do_bench), for the
Transformer shapes (K -> N) of ../shared/bench (GPT-2, BERT-L, LLaMA-7B):

  gemm        cuBLAS GEMM alone (F.linear)
  eager       the chain: bias + GELU(tanh) + dropout(0.1) + residual, eager
  lt          cuBLASLt bias+GELU (torch._addmm_activation) + eager dropout and residual
  inductor    torch.compile (default) of the chain
  ma          torch.compile max-autotune-no-cudagraphs of the chain (every shape unless --max-autotune
              names fewer, while the run is within --budget-s)
  coda_gemm   coda's kernel with the identity epilogue
  coda        coda's fused kernel for the whole chain

Before timing, coda's outputs are checked against PyTorch (relative error of
the GEMM alone; the fused chain against the unfused math with coda's own mask).
Writes bench.json, bench.md (the table) and bench.png (bar chart) to $OUT.

    python3 bench/bench.py [--shapes gpt2_fc1,...] [--max-autotune gpt2_fc1,...]
        [--baselines gemm,eager,lt,inductor] [--configs NAME:KEY=VALUE,...;...]

--configs compiles coda's kernels under several configurations (the options of
coda.Program: tile_m, tile_n, stages, schedule, cluster_m, group_rows,
fast_activations), each timed as coda_gemm[NAME] and coda[NAME]; the first is
the one the ratios use. Default: the compiler's choice ("default:").
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda  # noqa: E402

M = 8192
SHAPES = {"gpt2_fc1": (768, 3072), "gpt2_fc2": (3072, 768), "bertL_fc1": (1024, 4096),
          "llama7b_up": (4096, 11008), "llama7b_down": (11008, 4096)}

FUSED = """
func.func @chain(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>,
                 %bias: tensor<?xbf16> {coda.name = "bias"},
                 %res: tensor<?x?xbf16> {coda.name = "residual"},
                 %seed: i64 {coda.name = "seed"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<?xbf16> [n], %res : tensor<?x?xbf16> [m, n], %seed : i64)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {p = 0.1 : f32}
    %3 = arith.addf %2, %r : f32
    coda.yield %3 : f32
  }
  return %0 : tensor<?x?xbf16>
}
"""

GEMM = """
func.func @gemm(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xbf16>
}
"""


def chain(X, W, bias, R):
    return F.dropout(F.gelu(F.linear(X, W, bias), approximate="tanh"), 0.1, training=True) + R


def chain_lt(X, W, bias, R):
    h = torch._addmm_activation(bias, X, W.t(), use_gelu=True)
    return F.dropout(h, 0.1, training=True) + R


REP_MS = 300


def bench(fn):
    return do_bench(fn, warmup=50, rep=REP_MS, return_mode="median")  # ms


def host_time(fn, calls=2000):
    """What `fn` costs the host per call (us), the GPU kept ahead of it: the
    mean over `calls` back-to-back calls after a warm-up."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def describe_host(host_us):
    return ", ".join(f"{name} {us:.1f} us" for name, us in host_us.items())


def describe_shape(shape):
    """A kernel_shape as "128x256 cooperative group 8" (" cluster 2" when clustered)."""
    tile_m, tile_n, schedule, cluster_m, group_rows = shape
    return (f"{tile_m}x{tile_n} {schedule}" + (f" cluster {cluster_m}" if cluster_m > 1 else "")
            + f" group {group_rows}")


def parse_configs(text):
    """"name:key=value,...;..." -> [(name, {key: value})]."""
    configs = []
    for item in text.split(";"):
        name, _, options = item.partition(":")
        kwargs = {}
        for option in filter(None, options.split(",")):
            key, _, value = option.partition("=")
            kwargs[key] = value if key == "schedule" else int(value)
        configs.append((name, kwargs))
    return configs


def rel(got, want):
    got, want = got.double(), want.double()
    return float((got - want).norm() / want.norm())


def check(name, X, W, bias, R, fused, gemm, seed, rows=64):
    """coda's outputs against PyTorch, before anything is timed: the GEMM alone
    everywhere, the fused chain on the first `rows` rows with coda's own mask."""
    want = F.linear(X, W).float()
    gemm_error = rel(gemm(X, W)["output"].float(), want)
    out = fused(X, W, bias=bias, residual=R, seed=seed)["output"][:rows].float()
    keep = torch.from_numpy(coda.dropout_mask(seed, (rows, W.shape[0]), 0.1)).to(out.device)
    h = F.gelu(want[:rows] + bias.float(), approximate="tanh")
    ref = torch.where(keep, h * (65536.0 / (65536 - 6554)), 0.0) + R[:rows].float()
    fused_error = rel(out, ref)
    ok = gemm_error < 8e-3 and fused_error < 8e-3
    print(f"{name}: check gemm rel err {gemm_error:.2e}, fused rel err {fused_error:.2e} "
          f"-> {'ok' if ok else 'FAILED'}", flush=True)
    return {"gemm_rel_error": gemm_error, "fused_rel_error": fused_error, "ok": ok}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--max-autotune", default=",".join(SHAPES))
    parser.add_argument("--budget-s", type=float, default=480)
    parser.add_argument("--baselines", default="gemm,eager,lt,inductor")
    parser.add_argument("--configs", default="default:")
    parser.add_argument("--rep-ms", type=int, default=300)
    args = parser.parse_args()
    global REP_MS
    REP_MS = args.rep_ms
    baselines = args.baselines.split(",")
    configs = parse_configs(args.configs)
    t0 = time.time()
    torch.manual_seed(0)
    dev = "cuda"
    programs = {}
    t = time.time()
    for name, options in configs:
        programs[name] = (coda.Program(FUSED, **options), coda.Program(GEMM, **options))
        for program in programs[name]:
            program.prepare()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "compile_s": time.time() - t,
           "configs": dict(configs), "rows": {}}
    # What a launch of a cached kernel costs the host (coda.Program's argument
    # checks, tensor-map encoding and cuLaunchKernelEx), beside what PyTorch's
    # own calls cost it, on a problem too small for the GPU to be the bottleneck.
    Xs = torch.randn(128, 128, device=dev, dtype=torch.bfloat16)
    Ws = torch.randn(128, 128, device=dev, dtype=torch.bfloat16)
    bs = torch.randn(128, device=dev, dtype=torch.bfloat16)
    Rs = torch.randn(128, 128, device=dev, dtype=torch.bfloat16)
    fused, gemm = programs[configs[0][0]]
    res["host_us"] = {
        "coda_gemm": host_time(lambda: gemm(Xs, Ws)),
        "gemm": host_time(lambda: F.linear(Xs, Ws)),
        "coda": host_time(lambda: fused(Xs, Ws, bias=bs, residual=Rs, seed=1)),
        "eager": host_time(lambda: chain(Xs, Ws, bs, Rs)),
    }
    print(f"compile (cold, both programs of {len(configs)} configs): {res['compile_s']:.2f} s; "
          "host time per launch: " + describe_host(res["host_us"]), flush=True)
    comp = torch.compile(chain)
    os.environ.setdefault("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", "ATEN,TRITON")
    ma = torch.compile(chain, mode="max-autotune-no-cudagraphs")
    for name in args.shapes.split(","):
        K, N = SHAPES[name]
        X = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        W = torch.randn(N, K, device=dev, dtype=torch.bfloat16) / K**0.5
        bias = torch.randn(N, device=dev, dtype=torch.bfloat16)
        R = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
        r = {}
        r["gemm"] = bench(lambda: F.linear(X, W))
        for i, (config, _) in enumerate(configs):
            fused, gemm = programs[config]
            suffix = "" if i == 0 else f"[{config}]"
            r["check" + suffix] = check(name + suffix, X, W, bias, R, fused, gemm, seed=1234)
            r["coda_gemm" + suffix] = bench(lambda: gemm(X, W))
            r["coda" + suffix] = bench(lambda: fused(X, W, bias=bias, residual=R, seed=1234))
            # The kernel shapes the tile rule or autotuning chose.
            r["shape_gemm" + suffix] = describe_shape(gemm.kernel_shape)
            r["shape" + suffix] = describe_shape(fused.kernel_shape)
        if "eager" in baselines:
            r["eager"] = bench(lambda: chain(X, W, bias, R))
        if "lt" in baselines:
            r["lt"] = bench(lambda: chain_lt(X, W, bias, R))
        if "inductor" in baselines:
            r["inductor"] = bench(lambda: comp(X, W, bias, R))
        if name in args.max_autotune.split(",") and time.time() - t0 < args.budget_s:
            ma(X, W, bias, R)
            r["ma"] = bench(lambda: ma(X, W, bias, R))
        flops = 2 * M * N * K
        r["gemm_TFLOPs"] = flops / r["gemm"] / 1e9
        for key in [k for k in r if k.startswith("coda_gemm")]:
            r[key.replace("coda_gemm", "coda_gemm_TFLOPs")] = flops / r[key] / 1e9
        res["rows"][name] = r
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                     if not k.startswith("check")}, flush=True)

    out = os.environ.get("OUT", ".")
    json.dump(res, open(os.path.join(out, "bench.json"), "w"), indent=1)
    cols = ["gemm", "coda_gemm", "coda", "eager", "lt", "inductor", "ma"]
    cols += [f"{c}[{config}]" for config, _ in configs[1:] for c in ("coda_gemm", "coda")]
    lines = [f"{res['device']}, torch {res['torch']}, {res['date']}; ms (median, L2 flushed), M = {M}; "
             f"cold compile of the programs {res['compile_s']:.2f} s; host time per call: "
             + describe_host(res["host_us"]),
             "",
             "| shape (K->N) | " + " | ".join(cols) + " | coda_gemm / gemm throughput | coda / gemm time | eager / coda |",
             "|---" * (len(cols) + 4) + "|"]
    for name, r in res["rows"].items():
        K, N = SHAPES[name]
        cells = [f"{r[c]:.4f}" if c in r else "" for c in cols]
        eager = f"{r['eager'] / r['coda']:.2f}" if "eager" in r else ""
        lines.append(f"| {name} {K}->{N} | " + " | ".join(cells) +
                     f" | {r['gemm'] / r['coda_gemm']:.2f} | {r['coda'] / r['gemm']:.2f}"
                     f" | {eager} |")
    lines.append("")
    for name, r in res["rows"].items():
        suffixes = [(config, "" if i == 0 else f"[{config}]") for i, (config, _) in enumerate(configs)]
        shapes = [f"{config}: GEMM {r['shape_gemm' + suffix]}, chain {r['shape' + suffix]}"
                  for config, suffix in suffixes]
        lines.append(f"- kernel shapes, {name}: " + "; ".join(shapes))
    table = "\n".join(lines)
    open(os.path.join(out, "bench.md"), "w").write(table + "\n")
    print(table)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names = list(res["rows"])
        fig, ax = plt.subplots(figsize=(12, 5))
        width = 0.8 / len(cols)
        for i, c in enumerate(cols):
            ys = [res["rows"][n].get(c, 0) / res["rows"][n]["gemm"] for n in names]
            ax.bar([j + i * width for j in range(len(names))], ys, width, label=c)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
        ax.set_xticklabels([f"{n}\n{SHAPES[n][0]}->{SHAPES[n][1]}" for n in names])
        ax.set_ylabel("time / cuBLAS GEMM alone")
        ax.set_title(f"GEMM + bias + GELU + dropout + residual, M = {M}, bf16 ({res['date']})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "bench.png"), dpi=110)
    except Exception as ex:  # the table is the result; the chart is a view of it
        print("no chart:", ex)


if __name__ == "__main__":
    main()
