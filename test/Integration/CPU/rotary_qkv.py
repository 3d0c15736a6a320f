# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# coda.nn.RMSNormRotaryQKV: RMSNorm, the Q, K and V projections and the
# rotary embedding (rotate-half) in one program, the norm folded into the
# product. Against the unfused math (nn.RMSNorm, three nn.Linear, Hugging
# Face's rotate-half with its default frequencies) in float64, forward and
# every gradient, with grouped key and value heads and positions that are
# not 0, 1, ...; gradcheck on the CPU reference; under
# torch.compile(fullgraph=True); and the errors a user sees. The same with
# QK-norm, against Qwen3's attention written out.

import contextlib
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks

import coda.nn

torch.manual_seed(0)
failures = []


def report(what, got, want, tolerance=1e-7):
    error = ((got - want).norm() / want.norm()).item()
    if not error < tolerance:
        failures.append(f"{what}: relative error {error:.2e}")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def unfused(module, x, positions):
    """The module's math as a Hugging Face LLaMA attention computes it."""
    b, s, _ = x.shape
    d = module.head_dim
    n = module.norm(x)
    heads = [p(n).view(b, s, -1, d).transpose(1, 2)
             for p in (module.q_proj, module.k_proj, module.v_proj)]
    inv = 1.0 / (module.theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
    angles = positions[..., None].float() * inv
    angles = torch.cat((angles, angles), dim=-1).to(x.dtype)[:, None]
    q, k, v = heads
    return (q * angles.cos() + rotate_half(q) * angles.sin(),
            k * angles.cos() + rotate_half(k) * angles.sin(), v)


B, S, WIDTH = 2, 5, 24
module = coda.nn.RMSNormRotaryQKV(WIDTH, heads=4, kv_heads=2, head_dim=8, eps=1e-6,
                                  theta=500.0).double()
with torch.no_grad():
    module.norm.weight.uniform_(0.5, 1.5)
x = torch.randn(B, S, WIDTH, dtype=torch.float64, requires_grad=True)
positions = torch.tensor([[3, 4, 5, 6, 7], [0, 2, 9, 1, 30]])
got, want = module(x, positions), unfused(module, x, positions)
for name, g, w in zip("qkv", got, want):
    assert g.shape == w.shape, (name, g.shape, w.shape)
    report(f"forward {name}", g, w)
print("shapes", [tuple(t.shape) for t in got])
# CHECK: shapes [(2, 4, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8)]
grads = [torch.randn_like(t) for t in got]
params = [x, module.norm.weight, module.q_proj.weight, module.k_proj.weight,
          module.v_proj.weight]
for name, g, w in zip(["x", "gamma", "q", "k", "v"],
                      torch.autograd.grad(got, params, grads),
                      torch.autograd.grad(want, params, grads)):
    report(f"gradient of {name}", g, w)
print("float64: forward and gradients")
# CHECK: float64: forward and gradients

small = coda.nn.RMSNormRotaryQKV(8, heads=2, head_dim=4).double()
xs = torch.randn(1, 3, 8, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda t: small(t, torch.arange(3)), (xs,))
print("gradcheck: ok")
# CHECK: gradcheck: ok

# The norm's weight and the three projections under gradcheck too (the
# stacked, scaled operand and rstd have backward functions of their own), as
# torch.func.functional_call passes them: the operand made again in the
# backward from the weights the forward read, not the module's own.
names = ["norm.weight", "q_proj.weight", "k_proj.weight", "v_proj.weight"]
weights = [(torch.rand(8, dtype=torch.float64) + 0.5).requires_grad_()] + [
    torch.randn(8, 8, dtype=torch.float64, requires_grad=True) for _ in range(3)]


def functional(t, *ws):
    return torch.func.functional_call(small, dict(zip(names, ws)), (t, torch.arange(3)))


assert torch.autograd.gradcheck(functional, (xs, *weights))
results = []
for hooks in (contextlib.nullcontext(),
              torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)):
    with hooks:
        out = functional(xs, *weights)
    results.append(torch.autograd.grad(sum(o.square().sum() for o in out), [xs, *weights]))
for name, made, kept in zip(["x"] + names, *results):
    report(f"functional_call: gradient of {name}, the operand made again", made, kept)
print("gradcheck of the weights: ok")
# CHECK: gradcheck of the weights: ok

# Under inference mode first (a validation pass), then in training: the
# module's tables stay usable for autograd; an x of [s, width] takes
# positions of [1, s].
with torch.inference_mode():
    module(x.detach(), positions)
torch.autograd.grad(module(x, positions)[0].sum(), x)
flat = module(x[0], positions[:1])
report("x of [s, width]", flat[0], want[0][0])
print("inference mode, then training: ok")
# CHECK: inference mode, then training: ok

compiled = torch.compile(module, fullgraph=True)
for name, g, w in zip("qkv", compiled(x, positions), want):
    report(f"torch.compile {name}", g, w)
print("torch.compile: ok")
# CHECK: torch.compile: ok

# A module whose first call is traced by torch.compile (a model patched, then
# compiled): its program family (here of a QK-norm epsilon no module above
# has) exists before the trace calls it.
first = coda.nn.RMSNormRotaryQKV(module.norm.weight.shape[0], module.heads,
                                 head_dim=module.head_dim, qk_norm=True, qk_eps=1.25e-5,
                                 dtype=torch.float64)
torch.compile(first, fullgraph=True, backend="aot_eager")(x.detach(), positions)
print("compiled at its first call: ok")
# CHECK: compiled at its first call: ok

for args, kwargs in (((24, 4, 2, 6), {}), ((24, 3, 2, 8), {}),
                     ((24, 4, 2, 8), {"inv_freq": torch.ones(8)})):
    try:
        coda.nn.RMSNormRotaryQKV(*args, **kwargs)
        failures.append(f"no error for {args} {kwargs}")
    except ValueError as error:
        print(error)
# CHECK: head_dim must be a power of 2 (rotate-half pairs columns head_dim / 2 apart within a head), got 6
# CHECK: heads (3) must be a multiple of kv_heads (2)
# CHECK: inv_freq has shape (8,); expected (4,), one frequency per pair of a head

# Frequencies given (a scaled rotary embedding's) replace theta's.
scaled = coda.nn.RMSNormRotaryQKV(WIDTH, heads=4, kv_heads=2, head_dim=8, eps=1e-6,
                                  inv_freq=torch.tensor([1.0, 0.5, 0.01, 0.001])).double()
scaled.load_state_dict(module.state_dict())
inv = torch.tensor([1.0, 0.5, 0.01, 0.001], dtype=torch.float64)
angles = positions[..., None].double() * inv
angles = torch.cat((angles, angles), dim=-1)[:, None]
q = module.q_proj(module.norm(x)).view(B, S, -1, 8).transpose(1, 2)
report("inv_freq given", scaled(x, positions)[0],
       q * angles.cos() + rotate_half(q) * angles.sin())

# QK-norm (Qwen3's attention): each query and key head normalized over its
# head_dim columns before the rotation, in the same program.
def unfused_qk_norm(module, x, positions):
    b, s, _ = x.shape
    d = module.head_dim
    n = module.norm(x)
    q = module.q_norm(module.q_proj(n).view(b, s, -1, d)).transpose(1, 2)
    k = module.k_norm(module.k_proj(n).view(b, s, -1, d)).transpose(1, 2)
    v = module.v_proj(n).view(b, s, -1, d).transpose(1, 2)
    inv = 1.0 / (module.theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
    angles = positions[..., None].float() * inv
    angles = torch.cat((angles, angles), dim=-1).to(x.dtype)[:, None]
    return (q * angles.cos() + rotate_half(q) * angles.sin(),
            k * angles.cos() + rotate_half(k) * angles.sin(), v)


qk = coda.nn.RMSNormRotaryQKV(WIDTH, heads=4, kv_heads=2, head_dim=8, eps=1e-6, theta=500.0,
                              qk_norm=True, qk_eps=1e-5).double()
with torch.no_grad():
    for norm in (qk.norm, qk.q_norm, qk.k_norm):
        norm.weight.uniform_(0.5, 1.5)
print(sorted(qk.state_dict()))
# CHECK: ['k_norm.weight', 'k_proj.weight', 'norm.weight', 'q_norm.weight', 'q_proj.weight', 'v_proj.weight']
got, want = qk(x, positions), unfused_qk_norm(qk, x, positions)
for name, g, w in zip("qkv", got, want):
    report(f"QK-norm forward {name}", g, w)
params = [x, qk.norm.weight, qk.q_proj.weight, qk.k_proj.weight, qk.v_proj.weight,
          qk.q_norm.weight, qk.k_norm.weight]
for name, g, w in zip(["x", "gamma", "q", "k", "v", "q_norm", "k_norm"],
                      torch.autograd.grad(got, params, grads),
                      torch.autograd.grad(want, params, grads)):
    report(f"QK-norm gradient of {name}", g, w)
small = coda.nn.RMSNormRotaryQKV(8, heads=2, head_dim=4, qk_norm=True).double()
with torch.no_grad():
    small.q_norm.weight.uniform_(0.5, 1.5)
assert torch.autograd.gradcheck(lambda t, wq: small(t, torch.arange(3)),
                                (xs, small.q_norm.weight))
for name, g, w in zip("qkv", torch.compile(qk, fullgraph=True)(x, positions), want):
    report(f"QK-norm torch.compile {name}", g, w)
# Modules of one head width share their programs: each trains right after the
# other has, step after step (the backward reads the accumulator its forward
# saved).
for step in range(2):
    for width, heads in ((WIDTH, 4), (2 * WIDTH, 8)):
        layer = coda.nn.RMSNormRotaryQKV(width, heads=heads, kv_heads=heads // 2, head_dim=8,
                                         theta=500.0, qk_norm=True, qk_eps=1e-5).double()
        xw = torch.randn(B, S, width, dtype=torch.float64, requires_grad=True)
        out, ref = layer(xw, positions), unfused_qk_norm(layer, xw, positions)
        weights = [xw, layer.q_proj.weight, layer.q_norm.weight]
        for name, g, w in zip(["x", "q", "q_norm"],
                              torch.autograd.grad(out, weights, [torch.ones_like(t) for t in out]),
                              torch.autograd.grad(ref, weights, [torch.ones_like(t) for t in ref])):
            report(f"QK-norm width {width} step {step} gradient of {name}", g, w)
print(qk.extra_repr())
# CHECK: heads=4, kv_heads=2, head_dim=8, theta=500.0, qk_norm=True, qk_eps=1e-05
print("QK-norm: forward, gradients, gradcheck, torch.compile")
# CHECK: QK-norm: forward, gradients, gradcheck, torch.compile

# The model's own cos and sin of each token (Hugging Face's
# position_embeddings), as a rotary scaling with an attention scaling makes
# them (yarn's: both times 1.3), angles of no formula: the module rotates by
# the tables, with and without QK-norm.
angles = torch.rand(B, S, 4, dtype=torch.float64) * 30
emb = torch.cat((angles, angles), dim=-1)
tables = (emb.cos() * 1.3, emb.sin() * 1.3)


def by_tables(m, x, qk_norm):
    n = m.norm(x)
    q, k, v = (p(n).view(B, S, -1, 8) for p in (m.q_proj, m.k_proj, m.v_proj))
    if qk_norm:
        q, k = m.q_norm(q), m.k_norm(k)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    c, s = (t[:, None] for t in tables)
    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s, v


for what, m, params in (("", module, [x, module.norm.weight, module.q_proj.weight,
                                      module.k_proj.weight]),
                        ("QK-norm ", qk, [x, qk.norm.weight, qk.k_proj.weight, qk.q_norm.weight,
                                          qk.k_norm.weight])):
    got, want = m(x, position_embeddings=tables), by_tables(m, x, bool(what))
    for name, g, w in zip("qkv", got, want):
        report(f"{what}tables forward {name}", g, w)
    for i, (g, w) in enumerate(zip(torch.autograd.grad(got, params, grads),
                                   torch.autograd.grad(want, params, grads))):
        report(f"{what}tables gradient of parameter {i}", g, w)
# Biases of the projections (Qwen2's attention), added before the rotation:
# rstd then takes its gradient in coda's backward, from the saved accumulator.
biased = coda.nn.RMSNormRotaryQKV(WIDTH, heads=4, kv_heads=2, head_dim=8, eps=1e-6,
                                  theta=500.0, bias=True).double()
biased.load_state_dict({**module.state_dict(), **{
    f"{p}.bias": torch.randn(n, dtype=torch.float64) for p, n in
    (("q_proj", 32), ("k_proj", 16), ("v_proj", 16))}})
print(biased.extra_repr())
# CHECK: heads=4, kv_heads=2, head_dim=8, theta=500.0, bias=True
print(sorted(biased.state_dict()))
# CHECK: ['k_proj.bias', 'k_proj.weight', 'norm.weight', 'q_proj.bias', 'q_proj.weight', 'v_proj.bias', 'v_proj.weight']
params = [x, biased.norm.weight, biased.q_proj.weight, biased.q_proj.bias, biased.k_proj.bias,
          biased.v_proj.bias]
for what, got, want in (("positions", biased(x, positions), unfused(biased, x, positions)),
                        ("tables", biased(x, position_embeddings=tables),
                         by_tables(biased, x, False))):
    for name, g, w in zip("qkv", got, want):
        report(f"bias, {what}: forward {name}", g, w)
    for i, (g, w) in enumerate(zip(torch.autograd.grad(got, params, grads),
                                   torch.autograd.grad(want, params, grads))):
        report(f"bias, {what}: gradient of parameter {i}", g, w)
small = coda.nn.RMSNormRotaryQKV(8, heads=2, head_dim=4, bias=True).double()
assert torch.autograd.gradcheck(lambda t, b: small(t, torch.arange(3)), (xs, small.q_proj.bias))
# An x of [s, width] takes tables of [1, s, head_dim], as positions of [1, s].
flat = module(x[0], position_embeddings=tuple(t[:1] for t in tables))
report("tables, x of [s, width]", flat[0], module(x, position_embeddings=tables)[0][0])
small = coda.nn.RMSNormRotaryQKV(8, heads=2, head_dim=4).double()
small_tables = tuple(t.cos() for t in (torch.rand(1, 3, 4, dtype=torch.float64),) * 2)
assert torch.autograd.gradcheck(lambda t: small(t, position_embeddings=small_tables), (xs,))
try:
    small(xs)
    failures.append("no error without positions")
except TypeError as error:
    print(error)
# CHECK: RMSNormRotaryQKV needs the tokens' positions, or their position_embeddings (cos, sin)
print("position_embeddings, biases: forward, gradients, gradcheck")
# CHECK: position_embeddings, biases: forward, gradients, gradcheck

# The stacked and scaled weights are made again in the backward, not held
# from the forward (the allocations still live after a forward of 8 tokens
# are far below one copy of the weights, 6 MiB), and the gradients are the
# unfused math's; a weight modified in place in between is an error.
wide = coda.nn.RMSNormRotaryQKV(512, heads=8, head_dim=64).double()
tokens = torch.randn(1, 8, 512, dtype=torch.float64, requires_grad=True)
out, held = checks.held_after(lambda: wide(tokens, torch.arange(8)[None]))
assert held < 2**20, f"{held} bytes held after the forward"
params = [tokens, wide.norm.weight, wide.q_proj.weight]
grads = [torch.randn_like(t) for t in out]
for i, (g, w) in enumerate(zip(torch.autograd.grad(out, params, grads),
                               torch.autograd.grad(unfused(wide, tokens, torch.arange(8)[None]),
                                                   params, grads))):
    report(f"weights made again: gradient {i}", g, w)
out = wide(tokens, torch.arange(8)[None])
with torch.no_grad():
    wide.k_proj.weight.mul_(2)
try:
    sum(t.sum() for t in out).backward()
    failures.append("no error for a weight modified between the forward and the backward")
except RuntimeError as error:
    print(error)
# CHECK: a weight was modified in place between the forward and the backward: the stacked weight that coda makes again for the backward would not be the forward's (update parameters after the backward, as optimizers do)

# The three projections' weights are consecutive rows of one buffer, also
# after a conversion (.double() above): the GEMM reads them stacked as they
# lie. A weight given storage of its own is copied at each call instead,
# with the same results.
weights = (wide.q_proj.weight, wide.k_proj.weight, wide.v_proj.weight)
stacked = coda.nn._stacked_rows(weights)
if stacked is None or stacked.data_ptr() != weights[0].data_ptr():
    failures.append("the projections' weights are not one buffer")
# A conversion to what they are leaves them where they are; share_memory()
# moves their buffer whole into shared memory.
addresses = [w.data_ptr() for w in weights]
wide.to(torch.float64)
if [w.data_ptr() for w in weights] != addresses:
    failures.append("the projections' weights moved by a conversion that changes nothing")
wide.share_memory()
if not all(w.is_shared() for w in weights) or coda.nn._stacked_rows(weights) is None:
    failures.append("the projections' weights apart or not shared after share_memory()")
before = [t.detach().clone() for t in wide(tokens, torch.arange(8)[None])]
with torch.no_grad():
    wide.v_proj.weight.data = wide.v_proj.weight.data.clone()
if coda.nn._stacked_rows(weights) is not None:
    failures.append("weights apart read as one buffer")
if not all(torch.equal(got, want) for got, want in zip(wide(tokens, torch.arange(8)[None]),
                                                        before)):
    failures.append("the projections apart give other results")
print("projections in one buffer, and apart: done")
# CHECK: projections in one buffer, and apart: done

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("rotary qkv: ok")
# CHECK: rotary qkv: ok
