"""Normalizations at model widths on the H200: the GEMM that produces the
residual stream with its norm in the epilogue, next to cuBLAS, eager PyTorch,
torch.compile and (when importable) quack's norm kernel after the GEMM.

One process, bf16, M = 8192 tokens, CUDA-event medians with L2 flushed:

  out-proj + bias + residual + LayerNorm, writing h = x W^T + b + r and
  LayerNorm(h) (with its mean and rstd, which the backward reads), at
  GPT-2's 768, BERT-large's 1024, 4096 and 8192 (K = N; coda runs the
  program's row split: the GEMM writing its accumulator and row statistics,
  then the epilogue on them):
    gemm          cuBLAS GEMM alone (F.linear, no bias)
    eager         F.linear(x, W, b) + r, then F.layer_norm
    compile       torch.compile of eager
    coda          the program (LayerNorm of the f32 h): its row split saves
                  the f32 accumulator
    coda_rounded  the same program with h = bf16(...), a LayerNorm of h as
                  written, as PyTorch's: its row split saves h in bf16
    coda_stats    coda's kernel writing h, mean and rstd only (LayerNorm's
                  statistics for the next GEMM to apply: per-tile means and
                  squared deviations, Chan-merged after it)
    peer_quack    cuBLAS GEMM with the bias and residual (addmm), then
                  quack's layernorm_fwd
  out-proj + residual + RMSNorm at 4096 (LLaMA-7B), writing h and RMSNorm(h):
    the same, with quack's rmsnorm_fwd(residual=...) taking the residual add
  the norm's backward in the epilogue of the dgrad GEMM that produces its
  output's gradient (fc1's, dY [M, 4 width] times W1 [4 width, width]):
  nn.ResidualNormMLP's backward program (backward_saved of the projection's
  LayerNorm at 768, 1024 and 4096, RMSNorm at 4096), writing the gradients of
  h (the accumulator's and the residual's), of the bias, gamma and beta:
    gemm          the cuBLAS dgrad GEMM alone
    eager         the GEMM, then aten's LayerNorm backward (RMSNorm's in
                  torch ops), the gradient of h added, the bias's summed
    compile       torch.compile of eager
    coda          the program: its row split past one tile (the GEMM writing
                  its accumulator and the rows' separated reductions, then
                  the epilogue on them)
    coda_exchange the program with its tile pinned: a cluster of tiles
                  exchanging each row's partial reductions, twice
  RMSNorm(h) W_qkv^T after out-proj + residual, at 2048 and 4096 (QKV of
  3 x width columns; the normalization folded into the QKV GEMM as
  coda-raise-linalg folds it):
    gemms         the two cuBLAS GEMMs alone
    qkv_gemm      the QKV GEMM alone
    eager         F.linear + r, RMSNorm, F.linear
    compile       torch.compile of eager
    coda_norm     coda's out-proj program writing h and RMSNorm(h), then
                  coda's GEMM on RMSNorm(h)
    coda_folded   coda's out-proj kernel writing h and rstd (no normalized
                  tensor), W_qkv scaled by gamma, then the QKV GEMM on h
                  with rstd applied in its epilogue
    coda_folded_qkv  that QKV kernel alone
    outproj_gemm  the out-proj's cuBLAS GEMM alone
    coda_stats    coda's out-proj kernel writing h and rstd alone (the rstd
                  a row statistic: per-tile partial sums, merged after it)

Each fused result is checked against the unfused math first. Writes
norms.json and norms.md to $OUT (or --out); --only runs the rows whose name
holds its text.

    python3 bench/norms.py [--out DIR] [--m 8192] [--peers DIR] [--only TEXT]
"""

import importlib
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench, load_coda, load_peers, parse_arguments, rel, report  # noqa: E402

coda = load_coda()

LAYERNORM = """
EPILOGUE residual_layernorm(bias: f32[N], residual: bf16[M, N], gamma: f32[N], beta: f32[N])
    -> (h: bf16[M, N], output: bf16[M, N], mean: f32[M], rstd: f32[M]) {
  h = input + bias + residual;
  mean = row_mean(h);
  d = h - mean;
  rstd = rsqrt(row_mean(d * d) + 1e-5);
  output = d * rstd * gamma + beta;
}
"""
RMSNORM = """
EPILOGUE residual_rmsnorm(residual: bf16[M, N], gamma: f32[N])
    -> (h: bf16[M, N], output: bf16[M, N], rstd: f32[M]) {
  h = input + residual;
  rstd = rsqrt(row_mean(h * h) + 1e-6);
  output = h * rstd * gamma;
}
"""
LAYERNORM_ROUNDED = LAYERNORM.replace("h = input + bias + residual;",
                                      "h = bf16(input + bias + residual);")
LAYERNORM_STATS = """
EPILOGUE residual_layernorm_stats(bias: f32[N], residual: bf16[M, N])
    -> (h: bf16[M, N], mean: f32[M], rstd: f32[M]) {
  h = input + bias + residual;
  mean = row_mean(h);
  d = h - mean;
  rstd = rsqrt(row_mean(d * d) + 1e-5);
}
"""
GEMM = "EPILOGUE gemm { output = input; }"
RMS_STATS = """
EPILOGUE residual_rms_stats(residual: bf16[M, N]) -> (h: bf16[M, N], rstd: f32[M]) {
  h = input + residual;
  rstd = rsqrt(row_mean(h * h) + 1e-6);
}
"""
ROW_SCALED = """
EPILOGUE row_scaled(rstd: f32[M]) -> (output: bf16[M, N]) {
  output = input * rstd;
}
"""


def layernorm_eager(x, w, b, r, gamma, beta):
    h = F.linear(x, w, b) + r
    return h, F.layer_norm(h, h.shape[-1:], gamma.to(h.dtype), beta.to(h.dtype), eps=1e-5)


def rmsnorm_eager(x, w, r, gamma):
    h = F.linear(x, w) + r
    hf = h.float()
    return h, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma).to(h.dtype)


def norm_backward_eager(norm, g, w1, saved, b, r, gamma, beta, mean, rstd, grad_h):
    """The eager backward: dgrad GEMM, the norm's backward, grad_h added."""
    dy = g @ w1
    h = saved + r if b is None else saved + b + r
    n = h.shape[-1]
    if norm == "layernorm":
        dh, dgamma, dbeta = torch.ops.aten.native_layer_norm_backward(
            dy, h, [n], mean[:, None], rstd[:, None], gamma, beta, [True, True, True])
    else:
        xhat = h.float() * rstd[:, None]
        gdy = dy.float() * gamma
        dh = (rstd[:, None] * (gdy - xhat * (gdy * xhat).mean(-1, keepdim=True))).bfloat16()
        dgamma, dbeta = (dy.float() * xhat).sum(0), None
    dh = dh + grad_h
    return dh, dh.float().sum(0), dgamma, dbeta


def norm_backward(res, norm, width, m):
    """The norm's backward in fc1's dgrad epilogue against eager, compile
    and cuBLAS (see the module's description)."""
    _projection_norm = importlib.import_module(coda.__name__ + ".nn")._projection_norm
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    layernorm = norm == "layernorm"
    source = _projection_norm(norm, 1e-5, layernorm, layernorm, 0.0).source("bf16")
    split = coda.Program(source, derive="backward_saved")
    exchange = coda.Program(source, derive="backward_saved", tile_n=128 if width <= 1024 else 256)
    k = 4 * width
    g = torch.randn(m, k, **bf16)
    w1 = torch.randn(k, width, **bf16) / k ** 0.5
    saved = torch.randn(m, width, **bf16)
    r = torch.randn(m, width, **bf16)
    grad_h = torch.randn(m, width, **bf16)
    gamma = torch.randn(width, **bf16)
    b, beta = (torch.randn(width, **bf16), torch.randn(width, **bf16)) if layernorm else (None, None)
    h = (saved.float() + r.float() + (b.float() if layernorm else 0)).bfloat16().float()
    mean = h.mean(-1) if layernorm else None
    var = ((h - mean[:, None]) ** 2).mean(-1) if layernorm else (h * h).mean(-1)
    rstd = torch.rsqrt(var + 1e-5)
    inputs = dict(residual=r, gamma=gamma, saved_acc=saved, grad_h=grad_h)
    if layernorm:
        inputs.update(bias=b, beta=beta, saved_row0=mean, saved_row1=var)
    else:
        inputs.update(saved_row0=var)

    def eager():
        return norm_backward_eager(norm, g, w1, saved, b, r, gamma, beta, mean, rstd, grad_h)

    want = eager()
    for name, program in (("", split), ("_exchange", exchange)):
        got = program(g, w1, **inputs)
        res[f"{norm}_backward{width}{name}_error"] = rel(got["grad_acc"], want[0])
        res[f"{norm}_backward{width}{name}_gamma_error"] = rel(got["grad_gamma"], want[2])
    compiled = torch.compile(norm_backward_eager)
    res["rows"][f"{norm}_backward_{width}"] = {
        "gemm": bench(lambda: g @ w1),
        "eager": bench(eager),
        "compile": bench(lambda: compiled(norm, g, w1, saved, b, r, gamma, beta, mean, rstd,
                                          grad_h)),
        "coda": bench(lambda: split(g, w1, **inputs)),
        "coda_exchange": bench(lambda: exchange(g, w1, **inputs)),
    }


def main():
    args = parse_arguments()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = args.m
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "m": m, "rows": {}}
    programs = {name: coda.Program(source) for name, source in
                (("layernorm", LAYERNORM), ("layernorm_rounded", LAYERNORM_ROUNDED),
                 ("layernorm_stats", LAYERNORM_STATS),
                 ("rmsnorm", RMSNORM), ("gemm", GEMM),
                 ("rms_stats", RMS_STATS), ("row_scaled", ROW_SCALED))}
    quack = load_peers(args.peers).get("peer_quack_norm")
    bf16 = dict(device=dev, dtype=torch.bfloat16)
    f32 = dict(device=dev, dtype=torch.float32)

    for width in (768, 1024, 4096, 8192):
        if args.only not in f"outproj_residual_layernorm_{width}":
            continue
        x = torch.randn(m, width, **bf16)
        w = torch.randn(width, width, **bf16) / width ** 0.5
        r = torch.randn(m, width, **bf16)
        b, gamma, beta = (torch.randn(width, **f32) for _ in range(3))
        want_h, want = layernorm_eager(x, w, b.bfloat16(), r, gamma, beta)
        got = programs["layernorm"](x, w, bias=b, residual=r, gamma=gamma, beta=beta)
        res[f"layernorm{width}_error"] = rel(got["output"], want)
        res[f"layernorm{width}_h_error"] = rel(got["h"], want_h)
        rounded = programs["layernorm_rounded"](x, w, bias=b, residual=r, gamma=gamma, beta=beta)
        res[f"layernorm{width}_rounded_error"] = rel(rounded["output"], want)
        stats = programs["layernorm_stats"](x, w, bias=b, residual=r)
        res[f"layernorm{width}_rstd_error"] = rel(stats["rstd"], got["rstd"])
        compiled = torch.compile(layernorm_eager)
        row = {
            "gemm": bench(lambda: F.linear(x, w)),
            "eager": bench(lambda: layernorm_eager(x, w, b.bfloat16(), r, gamma, beta)),
            "compile": bench(lambda: compiled(x, w, b.bfloat16(), r, gamma, beta)),
            "coda_gemm": bench(lambda: programs["gemm"](x, w)),
            "coda": bench(lambda: programs["layernorm"](x, w, bias=b, residual=r,
                                                        gamma=gamma, beta=beta)),
            "coda_rounded": bench(lambda: programs["layernorm_rounded"](
                x, w, bias=b, residual=r, gamma=gamma, beta=beta)),
            "coda_stats": bench(lambda: programs["layernorm_stats"](x, w, bias=b, residual=r)),
        }
        if quack:
            def peer():
                h = torch.addmm(r, x, w.t()) + b.bfloat16()
                return h, quack.layernorm_fwd(h, gamma, beta, eps=1e-5,
                                              return_rstd=True, return_mean=True)
            res[f"layernorm{width}_peer_quack_error"] = rel(peer()[1][0], want)
            row["peer_quack"] = bench(peer)
        res["rows"][f"outproj_residual_layernorm_{width}"] = row

    width = 4096
    if args.only in "outproj_residual_rmsnorm_4096":
        x = torch.randn(m, width, **bf16)
        w = torch.randn(width, width, **bf16) / width ** 0.5
        r = torch.randn(m, width, **bf16)
        gamma = torch.randn(width, **f32)
        want_h, want = rmsnorm_eager(x, w, r, gamma)
        got = programs["rmsnorm"](x, w, residual=r, gamma=gamma)
        res["rmsnorm4096_error"] = rel(got["output"], want)
        compiled = torch.compile(rmsnorm_eager)
        row = {
            "gemm": bench(lambda: F.linear(x, w)),
            "eager": bench(lambda: rmsnorm_eager(x, w, r, gamma)),
            "compile": bench(lambda: compiled(x, w, r, gamma)),
            "coda": bench(lambda: programs["rmsnorm"](x, w, residual=r, gamma=gamma)),
        }
        if quack:
            def peer():
                return quack.rmsnorm_fwd(F.linear(x, w), gamma, residual=r, eps=1e-6,
                                         store_rstd=True)
            res["rmsnorm4096_peer_quack_error"] = rel(peer()[0], want)
            row["peer_quack"] = bench(peer)
        res["rows"]["outproj_residual_rmsnorm_4096"] = row

    for norm, width in (("layernorm", 768), ("layernorm", 1024), ("layernorm", 4096),
                        ("rmsnorm", 4096)):
        if args.only in f"{norm}_backward_{width}":
            norm_backward(res, norm, width, m)

    for width in (2048, 4096):
        if args.only not in f"rmsnorm_qkv_{width}":
            continue
        x = torch.randn(m, width, **bf16)
        wo = torch.randn(width, width, **bf16) / width ** 0.5
        wqkv = torch.randn(3 * width, width, **bf16) / width ** 0.5
        r = torch.randn(m, width, **bf16)
        gamma = torch.randn(width, **f32)

        def eager(x, wo, r, gamma, wqkv):
            _, normed = rmsnorm_eager(x, wo, r, gamma)
            return F.linear(normed, wqkv)

        def unfolded():
            got = programs["rmsnorm"](x, wo, residual=r, gamma=gamma)
            return programs["gemm"](got["output"], wqkv)["output"]

        def folded():
            stats = programs["rms_stats"](x, wo, residual=r)
            scaled = (wqkv * gamma).bfloat16()
            return programs["row_scaled"](stats["h"], scaled, rstd=stats["rstd"])["output"]

        want = eager(x, wo, r, gamma, wqkv)
        res[f"rmsnorm_qkv{width}_unfolded_error"] = rel(unfolded(), want)
        res[f"rmsnorm_qkv{width}_folded_error"] = rel(folded(), want)
        h = programs["rms_stats"](x, wo, residual=r)
        scaled = (wqkv * gamma).bfloat16()
        compiled = torch.compile(eager)
        res["rows"][f"rmsnorm_qkv_{width}"] = {
            "gemms": bench(lambda: F.linear(F.linear(x, wo), wqkv)),
            "qkv_gemm": bench(lambda: F.linear(x, wqkv)),
            "eager": bench(lambda: eager(x, wo, r, gamma, wqkv)),
            "compile": bench(lambda: compiled(x, wo, r, gamma, wqkv)),
            "coda_norm": bench(unfolded),
            "coda_folded": bench(folded),
            "coda_folded_qkv": bench(lambda: programs["row_scaled"](
                h["h"], scaled, rstd=h["rstd"])),
            "outproj_gemm": bench(lambda: F.linear(x, wo)),
            "coda_stats": bench(lambda: programs["rms_stats"](x, wo, residual=r)),
        }

    report(args.out, "norms", res,
           f"{res['device']}, torch {res['torch']}, {res['date']}, M = {m}, bf16, ms")


if __name__ == "__main__":
    main()
