# REQUIRES: cuda-gpu, numpy, torch
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %coda_src
#
# Training through coda's derived backward on bf16 CUDA tensors: coda.nn.MLP
# (fc1's epilogue gradient in fc2's dgrad GEMM), coda.nn.OutProjection (its
# weight stored [out, in] or [in, out]), coda.nn.Linear,
# coda.nn.ResidualNormMLP and coda.nn.RMSNormRotaryQKV, forward and backward,
# against
# PyTorch autograd of the unfused math in float64 on the same bf16 values
# (coda's dropout mask regenerated from the seed), on ragged shapes, with
# every tensor PyTorch allocates (the kernels' outputs included) filled with
# NaN first. Then the same MLP under torch.compile(fullgraph=True) and
# replayed in a CUDA graph.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks

import coda.nn
from coda.autograd import draw_seed
from coda.dropout import dropout_mask, dropout_threshold

checks.poison_allocations()
failures = []
cuda = torch.device("cuda")


def report(what, got, want, tolerance=2e-2):
    checks.report(failures, what, got, want, tolerance)


def mask(seed, rows, cols, p):
    keep = dropout_mask(seed, (rows, cols), p)
    scale = 65536 / (65536 - dropout_threshold(p))
    return torch.from_numpy(keep).to(cuda, torch.float64) * scale


def check_module(name, module, reference, inputs, manual_seed, draws=0):
    """Runs `module` forward and backward on bf16 `inputs` (a dict of
    keyword inputs after x) and `reference` (float64 math on copies) with the
    seeds the module draws after torch.manual_seed(manual_seed): `draws` of
    them in one draw, as a module call draws its dropout seeds, in the order
    it uses them; compares outputs and every gradient."""
    inputs = {k: v.detach().requires_grad_() for k, v in inputs.items()}
    torch.manual_seed(manual_seed)
    y = module(**inputs)
    grad = torch.randn_like(y)
    y.backward(grad)
    torch.manual_seed(manual_seed)
    seeds = [int(seed) for seed in draw_seed(cuda, draws)] if draws else []
    params = {n: p.detach().double().requires_grad_() for n, p in module.named_parameters()}
    wide = {k: v.detach().double().requires_grad_() for k, v in inputs.items()}
    y_ref = reference(params, seeds, **wide)
    y_ref.backward(grad.double())
    report(f"{name} output", y, y_ref)
    for k, v in inputs.items():
        report(f"{name} grad {k}", v.grad, wide[k].grad)
    for n, p in module.named_parameters():
        report(f"{name} grad {n}", p.grad, params[n].grad)


M, D, H = 333, 136, 520  # ragged M; rows of 16-byte multiples for TMA
p = 0.1
# The second MLP also drops out fc2's output before the residual add, with
# the second seed it draws; the third's activation is an expression (CLIP's
# QuickGELU).
ACTIVATIONS = {"gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
               "relu": torch.relu, "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t)}
for activation, q in (("gelu", 0.0), ("relu", 0.3), ("quick_gelu", 0.0)):
    mlp = coda.nn.MLP(D, H, activation=activation, dropout=p, output_dropout=q,
                      device=cuda, dtype=torch.bfloat16)

    def mlp_reference(w, seeds, x, residual, activation=activation, q=q):
        h = ACTIVATIONS[activation](x @ w["fc1.weight"].T + w["fc1.bias"])
        # fc1's output is bf16 in memory: the reference rounds it alike.
        h = (h * mask(seeds[0], x.shape[0], H, p)).to(torch.bfloat16).double()
        y = h @ w["fc2.weight"].T + w["fc2.bias"]
        return (y * mask(seeds[1], x.shape[0], D, q) if q else y) + residual

    check_module(f"MLP {activation} q={q}", mlp, mlp_reference,
                 {"x": torch.randn(M, D, device=cuda, dtype=torch.bfloat16),
                  "residual": torch.randn(M, D, device=cuda, dtype=torch.bfloat16)}, 21,
                 draws=2 if q else 1)

# With dropout, the epilogue gradient runs as its own kernel; without, the
# derivation finds grad_acc and the residual's gradient to be the output's
# and the bias's its column sum, and nothing is launched for them.
# The weight stored [in, out] (Hugging Face's Conv1D, as coda.patch runs
# GPT-2's output projections) is read as stored.
for q, layout in ((p, "nk"), (0.0, "nk"), (p, "kn")):
    proj = coda.nn.OutProjection(H, D, dropout=q, device=cuda, dtype=torch.bfloat16,
                                 weight_layout=layout)
    check_module(f"OutProjection p={q} {layout}", proj,
                 lambda w, seeds, x, residual, q=q, layout=layout: (
                     (x @ (w["weight"].T if layout == "nk" else w["weight"]) + w["bias"])
                     * (mask(seeds[0], x.shape[0], D, q) if q else 1) + residual),
                 {"x": torch.randn(M, H, device=cuda, dtype=torch.bfloat16),
                  "residual": torch.randn(M, D, device=cuda, dtype=torch.bfloat16)}, 22,
                 draws=1 if q else 0)

# Gated MLPs: the gate and up projections one GEMM, their gradient on the
# down projection's dgrad GEMM with an accumulator [m, n/2] (2 H = 1040
# output columns, ragged in its 128-column tiles).
for activation, residual, hidden in (("silu", False, H), ("gelu", True, H)):
    gated = coda.nn.GatedMLP(D, hidden, activation=activation, device=cuda, dtype=torch.bfloat16)

    def gated_reference(w, seeds, x, residual=None, activation=activation):
        act = (torch.nn.functional.silu if activation == "silu"
               else lambda t: torch.nn.functional.gelu(t, approximate="tanh"))
        # The gate and up projections are bf16 in memory (the saved
        # accumulator), and so is the gated product.
        gate = (x @ w["gate_proj.weight"].T).to(torch.bfloat16).double()
        up = (x @ w["up_proj.weight"].T).to(torch.bfloat16).double()
        h = (act(gate) * up).to(torch.bfloat16).double()
        y = h @ w["down_proj.weight"].T
        return y if residual is None else y + residual

    inputs = {"x": torch.randn(M, D, device=cuda, dtype=torch.bfloat16)}
    if residual:
        inputs["residual"] = torch.randn(M, D, device=cuda, dtype=torch.bfloat16)
    check_module(f"GatedMLP {activation}{' + residual' if residual else ''} H={hidden}", gated,
                 gated_reference, inputs, 25)

lin = coda.nn.Linear(D, H, epilogue="EPILOGUE up(bias: f32[N]) { output = silu(input + bias); }",
                     device=cuda, dtype=torch.bfloat16)
check_module("Linear silu", lin,
             lambda w, seeds, x: torch.nn.functional.silu(x @ w["weight"].T + w["bias"]),
             {"x": torch.randn(3, 111, D, device=cuda, dtype=torch.bfloat16)}, 23)

# coda.patch puts a linear layer of a width that cuBLAS runs slowly (1001
# outputs: an unpadded vocabulary's head) on coda's GEMM.
head = torch.nn.Linear(D, 1001, device=cuda, dtype=torch.bfloat16)
coda.patch(head)
check_module("patched linear 136 -> 1001", head,
             lambda w, seeds, x: x @ w["weight"].T + w["bias"],
             {"x": torch.randn(M, D, device=cuda, dtype=torch.bfloat16)}, 24)

# torch.compile(fullgraph=True) with the inductor: the coda ops stay whole,
# the seed is drawn in the graph (PyTorch's generator, as eager with
# fallback_random).
torch._inductor.config.fallback_random = True
mlp = coda.nn.MLP(D, H, dropout=p, output_dropout=p, device=cuda, dtype=torch.bfloat16)
compiled = torch.compile(mlp, fullgraph=True)
x = torch.randn(M, D, device=cuda, dtype=torch.bfloat16)
grad = torch.randn(M, D, device=cuda, dtype=torch.bfloat16)
results = []
for module in (mlp, compiled):
    xi = x.clone().requires_grad_()
    torch.manual_seed(5)
    y = module(xi, residual=x)
    y.backward(grad)
    results.append((y.detach(), xi.grad))
report("compiled MLP output", results[1][0], results[0][0], 1e-3)
report("compiled MLP grad x", results[1][1], results[0][1], 1e-3)

# A CUDA graph of forward and backward: each replay draws a new seed in the
# graph, so a new mask; the module without dropout replays exactly.
for p_graph in (0.0, p):
    mlp = coda.nn.MLP(D, H, dropout=p_graph, device=cuda, dtype=torch.bfloat16)
    xg = torch.randn(M, D, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(mlp, (xg,))
    outs = []
    for _ in range(2):
        y = graphed(xg)
        y.backward(grad)
        outs.append(y.detach().clone())
    eager = mlp(xg).detach()
    if p_graph == 0.0:
        report("CUDA graph MLP output", outs[0], eager, 1e-6)
    elif torch.equal(outs[0], outs[1]) or not torch.isfinite(outs[1]).all():
        failures.append("CUDA graph replays: the same mask twice")
    else:
        print("CUDA graph replays: a new mask each")

# coda.nn.ResidualNormMLP: the output projection writing h and norm(h), then
# the MLP on norm(h) with h as its residual, the norm's backward on fc1's
# dgrad GEMM (a row reduction across a cluster of blocks and the norm
# parameters' column sums in one kernel; on the GPU the row split of both,
# the backward's reductions separated): GPT-2's LayerNorm block half at its
# width, LLaMA's RMSNorm with the gated MLP at 2048 (also folded into the
# gate and up projections' product, fold_norm, and so at an odd hidden
# width) and a LayerNorm 5000 wide
# (past a cluster's 4096 columns), over ragged rows.
import torch.nn.functional as F  # noqa: E402


def unfused(params, gated, norm, eps, x, residual):
    h = F.linear(x, params["proj.weight"], params.get("proj.bias")) + residual
    if norm == "layernorm":
        n = F.layer_norm(h, h.shape[-1:], params["norm.weight"], params.get("norm.bias"), eps)
    else:
        n = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + eps) * params["norm.weight"]
    if gated:
        g = F.silu(F.linear(n, params["mlp.gate_proj.weight"])) * F.linear(
            n, params["mlp.up_proj.weight"])
        return h + F.linear(g, params["mlp.down_proj.weight"])
    a = F.gelu(F.linear(n, params["mlp.fc1.weight"], params["mlp.fc1.bias"]), approximate="tanh")
    return h + F.linear(a, params["mlp.fc2.weight"], params["mlp.fc2.bias"])


torch.manual_seed(5)
for label, norm, gated, bias, rows, width, hidden, fold in [
        ("GPT-2 LayerNorm + MLP", "layernorm", False, True, 1000, 768, 3072, False),
        ("LLaMA RMSNorm + gated MLP", "rmsnorm", True, False, 777, 2048, 5632, False),
        ("LLaMA RMSNorm folded into the gated MLP", "rmsnorm", True, False, 777, 2048, 5632,
         True),
        # The gate and up weights read as halves, the gradient of each pair
        # written in halves: an odd hidden width (the second half's pairs
        # start at odd columns) in ragged tiles.
        ("RMSNorm folded into a gated MLP of odd width", "rmsnorm", True, False, 300, 512, 261,
         True),
        ("LayerNorm past the widest cluster", "layernorm", False, True, 300, 5000, 256, False)]:
    eps = 1e-5 if norm == "layernorm" else 1e-6
    module = coda.nn.ResidualNormMLP(width, width, hidden, norm=norm, eps=eps, gated=gated,
                                     bias=bias, device=cuda, dtype=torch.bfloat16,
                                     fold_norm=fold)
    with torch.no_grad():
        module.norm.weight.uniform_(0.5, 1.5)
        if bias:
            module.norm.bias.uniform_(-0.5, 0.5)
            module.proj.bias.uniform_(-0.5, 0.5)
    x = torch.randn(rows, width, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn(rows, width, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    y = module(x, r)
    grad = torch.randn_like(y)
    y.backward(grad)
    params = {n: p.detach().double().requires_grad_() for n, p in module.named_parameters()}
    wide = [t.detach().double().requires_grad_() for t in (x, r)]
    want = unfused(params, gated, norm, eps, *wide)
    want.backward(grad.double())
    report(f"{label} output", y, want)
    report(f"{label} grad x", x.grad, wide[0].grad)
    report(f"{label} grad residual", r.grad, wide[1].grad)
    for name, p in module.named_parameters():
        report(f"{label} grad {name}", p.grad, params[name].grad)

# coda.nn.RMSNormRotaryQKV: the input RMSNorm folded into the QKV product,
# the rotary embedding in its epilogue; forward and every gradient (the
# inverse rotation times rstd and rstd's gradient from the output in one
# kernel without a product, then x's and the norm weight's gradients on one
# GEMM and the weights' on another; with QK-norm, each head's RMSNorm in the
# epilogue and the derived backward with the GEMM recomputed) against float64
# math on the same bf16 values, over ragged token counts, positions that
# restart per sequence and grouped key and value heads; also rotated by cos
# and sin tables given (a model's position_embeddings), and with biases of
# the projections.


def rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def rotary_unfused(params, module, x, positions, tables=None):
    b, s, _ = x.shape
    d = module.head_dim
    n = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + module.eps) * params["norm.weight"]
    q, k, v = (F.linear(n, params[f"{name}.weight"], params.get(f"{name}.bias"))
               .view(b, s, -1, d).transpose(1, 2) for name in ("q_proj", "k_proj", "v_proj"))
    if module.qk_eps is not None:
        # QK-norm (Qwen3's): an RMSNorm of each query and key head.
        q, k = (t * torch.rsqrt(t.square().mean(-1, keepdim=True) + module.qk_eps)
                * params[f"{name}.weight"] for t, name in ((q, "q_norm"), (k, "k_norm")))
    if tables is None:
        inv = 1.0 / (module.theta ** (torch.arange(0, d, 2, dtype=torch.float64, device=cuda) / d))
        angles = positions[..., None].double() * inv
        angles = torch.cat((angles, angles), dim=-1)[:, None]
        cos, sin = angles.cos(), angles.sin()
    else:
        cos, sin = (t.double()[:, None] for t in tables)
    return (q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v)


for label, width, heads, kv_heads, head_dim, batch, tokens, qk_norm, by_tables, bias in [
        ("LLaMA-1B QKV + RoPE", 2048, 16, 16, 128, 3, 333, False, False, False),
        ("grouped QKV + RoPE, 64-wide heads", 576, 9, 3, 64, 2, 517, False, False, False),
        ("Qwen3-style QK-norm + RoPE, grouped", 1024, 16, 8, 128, 2, 301, True, False, False),
        ("QK-norm + RoPE, 64-wide heads", 576, 9, 3, 64, 3, 129, True, False, False),
        # The model's own cos and sin (scaled: yarn's attention scaling).
        ("LLaMA-1B QKV + RoPE by cos/sin tables", 2048, 16, 8, 128, 3, 333, False, True, False),
        ("QK-norm + RoPE by cos/sin tables, 64-wide heads", 576, 9, 3, 64, 2, 517, True, True,
         False),
        # Biases of the projections (Qwen2's), added before the rotation.
        ("Qwen2-style QKV + biases + RoPE", 896, 14, 2, 64, 2, 301, False, False, True),
        ("QKV + biases + QK-norm by cos/sin tables", 1024, 16, 8, 64, 3, 129, True, True, True)]:
    module = coda.nn.RMSNormRotaryQKV(width, heads, kv_heads, head_dim, eps=1e-5,
                                      qk_norm=qk_norm, bias=bias, device=cuda,
                                      dtype=torch.bfloat16)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.uniform_(-1, 1)
    x = torch.randn(batch, tokens, width, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.stack([torch.arange(tokens, device=cuda) + 7 * i for i in range(batch)])
    tables = None
    if by_tables:
        half = torch.rand(batch, tokens, head_dim // 2, device=cuda) * 100
        tables = tuple((f(torch.cat((half, half), dim=-1)) * 1.2).to(torch.bfloat16)
                       for f in (torch.cos, torch.sin))
        got = module(x, position_embeddings=tables)
    else:
        got = module(x, positions)
    grads = [torch.randn_like(t) for t in got]
    torch.autograd.backward(got, grads)
    params = {n: p.detach().double().requires_grad_() for n, p in module.named_parameters()}
    wide = x.detach().double().requires_grad_()
    want = rotary_unfused(params, module, wide, positions, tables)
    torch.autograd.backward(want, [g.double() for g in grads])
    for name, g, w in zip("qkv", got, want):
        report(f"{label} {name}", g, w)
    report(f"{label} grad x", x.grad, wide.grad)
    for name, p in module.named_parameters():
        report(f"{label} grad {name}", p.grad, params[name].grad)

print(f"{len(failures)} failed: {failures}" if failures else "all passed")
sys.exit(1 if failures else 0)
