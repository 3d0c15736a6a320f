"""Gated and rotary epilogues on the H200: coda's fused kernels next to cuBLAS,
eager PyTorch, torch.compile and (when importable) CODA-kernels and quack.

One process, bf16, M = 8192 tokens, CUDA-event medians with L2 flushed
(triton.testing.do_bench):

  LLaMA-7B gate/up (4096 -> 2 x 11008), SwiGLU:
    gemm          cuBLAS GEMM of the stacked weight alone ([M, 22016])
    eager         F.linear, then silu(gate) * up
    compile       torch.compile of eager
    coda          coda's fused kernel: one GEMM over interleaved gate/up
                  rows, silu(gate) * up written [M, 11008]
    coda_pre      the same, also writing the pre-activation (for a backward)
    peer_coda     CODA-kernels' gemm_swiglu (stores pre- and post-activation)
    peer_quack    quack's gemm_act(activation="swiglu", store_preact=True)
  LLaMA-7B QKV + RoPE (4096 -> 3 x 4096, 32 heads of 128, rotate-half on Q
  and K from position ids, V untouched):
    gemm, eager (HF's rotate_half), compile, coda (examples/rope.coda:
    inverse frequencies and signs per column, [N]), coda_periodic (the 64
    frequencies of a head and its signs repeated along the row, [N % 64]
    and [N % 128]: one sine and cosine per 4 columns of a 256-wide tile),
    coda_table (Hugging Face's cos/sin per token, [M, N % 64])

Each fused result is checked against the unfused math first. Writes
gated.json and gated.md to $OUT (or --out).

    python3 bench/gated.py [--out DIR] [--m 8192]
"""

import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, bench, load_coda, load_peers, parse_arguments, rel, report  # noqa: E402

coda = load_coda()

SWIGLU = """
EPILOGUE swiglu -> (output: bf16[M, N/2]) {
  output = silu(input) * partner(input, 1);
}
"""
SWIGLU_PRE = """
EPILOGUE swiglu_pre -> (output: bf16[M, N/2], pre: bf16[M, N]) {
  output = silu(input) * partner(input, 1);
  pre = input;
}
"""
GEMM = "EPILOGUE gemm { output = input; }"


def swiglu_eager(x, w):
    g, u = F.linear(x, w).chunk(2, dim=-1)
    return F.silu(g) * u


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


ROPE_PERIODIC = """
EPILOGUE rope_periodic(pos: f32[M], inv_freq: f32[N % 64], sign: f32[N % 128], rotated: f32[N])
    -> (output: bf16[M, N]) {
  angle = pos * inv_freq;
  turned = input * cos(angle) + partner(input, 64) * sign * sin(angle);
  output = input + rotated * (turned - input);
}
"""
ROPE_TABLE = """
EPILOGUE rope_table(cosine: bf16[M, N % 64], sine: bf16[M, N % 64], sign: f32[N % 128],
                    rotated: f32[N]) -> (output: bf16[M, N]) {
  turned = input * cosine + partner(input, 64) * sign * sine;
  output = input + rotated * (turned - input);
}
"""


def rope_eager(x, w, cos, sin, heads, head_dim):
    q, k, v = F.linear(x, w).split(heads * head_dim, dim=-1)
    m = x.shape[0]
    q = q.view(m, heads, head_dim)
    k = k.view(m, heads, head_dim)
    q = q * cos[:, None] + rotate_half(q) * sin[:, None]
    k = k * cos[:, None] + rotate_half(k) * sin[:, None]
    return torch.cat((q.reshape(m, -1), k.reshape(m, -1), v), dim=-1)


def main():
    args = parse_arguments()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m, k, inter = args.m, 4096, 11008
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "m": m, "rows": {}}

    t = time.time()
    programs = {name: coda.Program(source) for name, source in
                (("swiglu", SWIGLU), ("swiglu_pre", SWIGLU_PRE), ("gemm", GEMM),
                 ("rope", open(os.path.join(HERE, "..", "examples", "rope.coda")).read()),
                 ("rope_periodic", ROPE_PERIODIC), ("rope_table", ROPE_TABLE))}
    for program in programs.values():
        program.prepare()
    res["compile_s"] = time.time() - t

    # SwiGLU: gate_proj and up_proj weights, stacked for PyTorch, interleaved
    # row by row for coda.
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    wg = torch.randn(inter, k, device=dev, dtype=torch.bfloat16) / k ** 0.5
    wu = torch.randn(inter, k, device=dev, dtype=torch.bfloat16) / k ** 0.5
    stacked = torch.cat((wg, wu))
    interleaved = torch.stack((wg, wu), dim=1).reshape(2 * inter, k)
    want = swiglu_eager(x, stacked)
    got = programs["swiglu"](x, interleaved)["output"]
    res["swiglu_error"] = rel(got, want)
    got_pre = programs["swiglu_pre"](x, interleaved)
    res["swiglu_pre_error"] = rel(got_pre["output"], want)
    compiled = torch.compile(swiglu_eager)
    rows = {
        "gemm": bench(lambda: F.linear(x, stacked)),
        "eager": bench(lambda: swiglu_eager(x, stacked)),
        "compile": bench(lambda: compiled(x, stacked)),
        "coda_gemm": bench(lambda: programs["gemm"](x, stacked)),
        "coda": bench(lambda: programs["swiglu"](x, interleaved)),
        "coda_pre": bench(lambda: programs["swiglu_pre"](x, interleaved)),
    }
    found = load_peers(args.peers)
    if "peer_coda" in found:
        cgf = found["peer_coda"]
        res["peer_coda_error"] = rel(cgf.gemm_swiglu(x, interleaved.t())[1], want)
        rows["peer_coda"] = bench(lambda: cgf.gemm_swiglu(x, interleaved.t()))
    if "peer_quack" in found:
        qgi = found["peer_quack"]
        peer = lambda: qgi.gemm_act(x, interleaved.t(), activation="swiglu",  # noqa: E731
                                    store_preact=True)
        res["peer_quack_error"] = rel(peer()[1], want)
        rows["peer_quack"] = bench(peer)
    res["rows"]["llama7b_gateup_swiglu"] = rows

    # QKV + RoPE: 32 heads of 128, positions of 4 sequences of m / 4.
    heads, head_dim = 32, 128
    wqkv = torch.randn(3 * heads * head_dim, k, device=dev, dtype=torch.bfloat16) / k ** 0.5
    pos = (torch.arange(m, device=dev) % (m // 4)).float()
    inv = 10000.0 ** (-torch.arange(0, head_dim, 2, device=dev).float() / head_dim)
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)
    n = 3 * heads * head_dim
    column = torch.arange(n, device=dev)
    qk = column < 2 * heads * head_dim
    inv_freq = torch.where(qk, inv[(column % head_dim) % (head_dim // 2)], 0.0)
    sign = torch.where(qk, torch.where(column % head_dim < head_dim // 2, -1.0, 1.0), 0.0)
    want = rope_eager(x, wqkv, cos, sin, heads, head_dim)
    rope = lambda: programs["rope"](x, wqkv, pos=pos, inv_freq=inv_freq,  # noqa: E731
                                    sign=sign)["output"]
    res["rope_error"] = rel(rope(), want)
    rotated = qk.float()
    periodic = lambda: programs["rope_periodic"](  # noqa: E731
        x, wqkv, pos=pos, inv_freq=inv, sign=sign[:head_dim].contiguous(),
        rotated=rotated)["output"]
    res["rope_periodic_error"] = rel(periodic(), want)
    half_cos, half_sin = cos[:, :head_dim // 2].contiguous(), sin[:, :head_dim // 2].contiguous()
    table = lambda: programs["rope_table"](  # noqa: E731
        x, wqkv, cosine=half_cos, sine=half_sin, sign=sign[:head_dim].contiguous(),
        rotated=rotated)["output"]
    res["rope_table_error"] = rel(table(), want)
    compiled_rope = torch.compile(rope_eager)
    res["rows"]["llama7b_qkv_rope"] = {
        "gemm": bench(lambda: F.linear(x, wqkv)),
        "eager": bench(lambda: rope_eager(x, wqkv, cos, sin, heads, head_dim)),
        "compile": bench(lambda: compiled_rope(x, wqkv, cos, sin, heads, head_dim)),
        "coda_gemm": bench(lambda: programs["gemm"](x, wqkv)),
        "coda": bench(rope),
        "coda_periodic": bench(periodic),
        "coda_table": bench(table),
    }

    report(args.out, "gated", res,
           f"{res['device']}, torch {res['torch']}, {res['date']}, M = {m}, bf16, ms "
           f"(cold compile of 6 programs: {res['compile_s']:.1f} s)")


if __name__ == "__main__":
    main()
