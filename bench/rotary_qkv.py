"""A LLaMA attention's input, forward and backward: the input RMSNorm, the
Q, K and V projections and the rotary embedding (rotate-half) of the
queries and keys. coda.nn.RMSNormRotaryQKV (the norm folded into one QKV
GEMM, the rotation in its epilogue; backward, the inverse rotation times
rstd in a kernel without a product, then the gradients of x and of the
stacked weight) against Hugging Face's modules in eager mode
(LlamaRMSNorm, three nn.Linear, apply_rotary_pos_emb), torch.compile of
the same, and Liger-Kernel's RMSNorm and rotary kernels around the same
projections when installed, in one process on the same inputs. Shapes:
LLaMA-1B's layer (width 2048, 16 heads of 128) and LLaMA-7B's (4096, 32),
4 sequences of 2048 tokens, bf16; and the same with QK-norm (Qwen3's
attention: each query and key head normalized by an RMSNorm of its own
before the rotation; coda's module with qk_norm=True, in the same kernel); coda's
module also rotating by the cos/sin tables instead of positions. Times are CUDA-event medians with L2
flushed (triton.testing.do_bench) of q, k, v and, with the backward, the
gradients of x, the norm's weight and the three projection weights; the
cuBLAS GEMM of the QKV shape is the unit. Before timing, each variant's
outputs and gradients are compared with eager's.

    python3 bench/rotary_qkv.py [--shapes llama1b,llama7b]
"""

import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda.nn  # noqa: E402
from common import run_shapes  # noqa: E402

# The same layers with QK-norm (Qwen3's attention: an RMSNorm of each query
# and key head before the rotation).
SHAPES = {"llama1b": (2048, 16), "llama7b": (4096, 32), "qk_norm_1b": (2048, 16, True),
          "qk_norm_7b": (4096, 32, True)}
BATCH, CONTEXT, HEAD_DIM = 4, 2048, 128


def hf_layer(width, heads):
    """Hugging Face's modules of a LLaMA attention's input."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=width, num_attention_heads=heads,
                         num_key_value_heads=heads, max_position_embeddings=CONTEXT)
    return LlamaRMSNorm(width, config.rms_norm_eps), LlamaRotaryEmbedding(config), config


def variants(module, cos, sin):
    """Each variant as a function of x and the positions; the others take
    the rotary tables computed once (a model computes them once a step for
    all its layers)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    norm = module.norm
    qk_norms = (module.q_norm, module.k_norm) if module.qk_eps is not None else None

    def eager(x, positions, rope=apply_rotary_pos_emb, norm=norm):
        b, s, _ = x.shape
        n = norm(x)
        q, k, v = (p(n).view(b, s, -1, HEAD_DIM)
                   for p in (module.q_proj, module.k_proj, module.v_proj))
        if qk_norms:
            q, k = qk_norms[0](q), qk_norms[1](k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = rope(q, k, cos, sin)
        return q, k, v

    found = {"eager": eager, "torch.compile": torch.compile(eager), "coda": module,
             # Rotated by the model's cos and sin (as coda.patch does for
             # scaled rotary embeddings) in place of positions.
             "coda, cos/sin tables": lambda x, p: module(x, position_embeddings=(cos, sin))}
    try:
        from liger_kernel.transformers.rms_norm import LigerRMSNorm
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        liger_norm = LigerRMSNorm(norm.weight.shape[0], norm.variance_epsilon).cuda().bfloat16()
        liger_norm.weight = norm.weight
        found["liger"] = lambda x, p: eager(x, p, liger_rotary_pos_emb, liger_norm)
    except ImportError:
        pass
    return found


def measure(name, width, heads, qk_norm=False):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch.manual_seed(0)
    norm, rotary, config = hf_layer(width, heads)
    module = coda.nn.RMSNormRotaryQKV(width, heads, eps=config.rms_norm_eps,
                                      theta=config.rope_parameters["rope_theta"],
                                      qk_norm=qk_norm)
    module.norm = norm
    module.eps = norm.variance_epsilon
    if qk_norm:
        # Qwen3's per-head norms are LLaMA's RMSNorm over head_dim columns.
        module.q_norm = LlamaRMSNorm(HEAD_DIM, module.qk_eps)
        module.k_norm = LlamaRMSNorm(HEAD_DIM, module.qk_eps)
    module = module.cuda().bfloat16()
    with torch.no_grad():
        for p in [norm.weight] + ([module.q_norm.weight, module.k_norm.weight] if qk_norm else []):
            p.uniform_(0.5, 1.5)
    x = torch.randn(BATCH, CONTEXT, width, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    positions = torch.arange(CONTEXT, device="cuda")[None]
    cos, sin = rotary.cuda()(x, positions)
    params = [x, norm.weight, module.q_proj.weight, module.k_proj.weight, module.v_proj.weight]
    if qk_norm:
        params += [module.q_norm.weight, module.k_norm.weight]
    grads = [torch.randn(BATCH, h, CONTEXT, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
             for h in (heads, heads, heads)]
    wqkv = torch.cat([p.detach() for p in params[2:5]])
    x2 = x.detach().reshape(-1, width)
    gemm = do_bench(lambda: x2 @ wqkv.T)

    def step(fn):
        for p in params:
            p.grad = None
        outputs = fn(x, positions)
        torch.autograd.backward(outputs, grads)
        return outputs

    rows, reference = [], None
    for label, fn in variants(module, cos, sin).items():
        outputs = step(fn)
        got = [t.detach().double() for t in outputs] + [p.grad.double() for p in params]
        if reference is None:
            reference = got
        errors = [((g - r).norm() / r.norm()).item() for g, r in zip(got, reference)]
        if max(errors) > 0.05:
            names = ["q", "k", "v", "x", "norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm"]
            print("errors", {n: f"{e:.1e}" for n, e in zip(names, errors)}, flush=True)
        with torch.no_grad():
            forward = do_bench(lambda: fn(x, positions))
        both = do_bench(lambda: step(fn))
        rows.append(dict(shape=name, variant=label, forward_ms=forward, step_ms=both,
                         gemm_ms=gemm, max_error=max(errors)))
        print(f"{name} {label}: forward {forward:.3f} ms ({forward / gemm:.2f} GEMMs), "
              f"forward+backward {both:.3f} ms ({both / gemm:.2f} GEMMs), largest error vs "
              f"eager {max(errors):.1e}", flush=True)
    return rows


if __name__ == "__main__":
    run_shapes("rotary_qkv", SHAPES, measure,
               [("forward in GEMMs", lambda r: f"{r['forward_ms'] / r['gemm_ms']:.2f}")])
