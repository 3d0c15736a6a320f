# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src
#
# What the first forward of a coda module hands to the compile threads on the
# GPU (coda.autograd._compile_ahead: its later forward programs and its
# backward, each a derived program on operand shapes) is exactly what its
# forward and backward then launch, less the first launch: checked on the CPU
# reference, where the same functions work out the jobs, by recording every
# program the module runs (derived program and operand shapes) in a training
# step. For coda.nn.Linear, OutProjection, MLP (weights [out, in] and [in,
# out], dropout, output dropout), GatedMLP, ResidualNormMLP (LayerNorm;
# RMSNorm with a gated MLP, also folded into its product), RMSNormRotaryQKV
# (by positions and by cos/sin tables) and linear_cross_entropy, with some
# parameters frozen; nothing is handed over with gradients disabled.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch

import coda.autograd as autograd
import coda.nn

torch.manual_seed(0)
failures = []
submitted = []
launched = []


def record_jobs(call, jobs, like, *args):
    submitted.extend((key, derive, tuple(a), tuple(b)) for key, derive, a, b in jobs(like, *args))


real_run = autograd._run


def record_run(key, derive, a, b, *rest):
    launched.append((key, derive, tuple(a.shape), tuple(b.shape)))
    return real_run(key, derive, a, b, *rest)


autograd._compile_ahead = record_jobs
autograd._run = record_run


def check(name, step):
    submitted.clear()
    launched.clear()
    step().sum().backward()
    first, rest = launched[0], launched[1:]
    extra = [job for job in submitted if job not in rest]
    missed = [launch for launch in rest if launch not in submitted]
    print(f"{name}: {len(launched)} programs run, {len(submitted)} handed over ahead")
    if extra or missed or first in submitted:
        failures.append(f"{name}: handed over but not run {extra}, run but not handed over "
                        f"{missed}")


f64 = dict(dtype=torch.float64)
x = torch.randn(13, 24, **f64, requires_grad=True)
r = torch.randn(13, 24, **f64)
check("Linear gelu", lambda: coda.nn.Linear(24, 40, epilogue="EPILOGUE g(bias: f32[N]) {\n"
                                            "  output = gelu(input + bias);\n}\n", **f64)(x))
check("OutProjection kn", lambda: coda.nn.OutProjection(24, 24, weight_layout="kn", **f64)(
    x, residual=r))
for layout in ("nk", "kn"):
    mlp = coda.nn.MLP(24, 56, dropout=0.1, output_dropout=0.2, weight_layout=layout, **f64)
    check(f"MLP {layout}", lambda: mlp(x, residual=r))
mlp = coda.nn.MLP(24, 56, **f64)
mlp.fc1.requires_grad_(False)
check("MLP, fc1 frozen", lambda: mlp(x.detach(), residual=r))
check("GatedMLP", lambda: coda.nn.GatedMLP(24, 40, **f64)(x))
for norm, gated in (("layernorm", False), ("rmsnorm", True)):
    block = coda.nn.ResidualNormMLP(24, 24, 48, norm=norm, gated=gated, dropout=0.1, **f64)
    check(f"ResidualNormMLP {norm}", lambda: block(x, residual=r))
folded = coda.nn.ResidualNormMLP(24, 24, 48, norm="rmsnorm", gated=True, bias=False,
                                 fold_norm=True, **f64)
check("ResidualNormMLP, the RMSNorm folded", lambda: folded(x, residual=r))
folded.proj.weight.requires_grad_(False)
folded.mlp.gate_proj.weight.requires_grad_(False)
folded.mlp.up_proj.weight.requires_grad_(False)
check("ResidualNormMLP, the RMSNorm folded, projections frozen", lambda: folded(x, residual=r))
qkv = coda.nn.RMSNormRotaryQKV(24, heads=3, kv_heads=1, head_dim=8, **f64)
positions = torch.arange(13)
check("RMSNormRotaryQKV", lambda: sum(t.sum() for t in qkv(x, positions)))
tables = tuple(torch.rand(13, 8, **f64) for _ in range(2))
check("RMSNormRotaryQKV by tables",
      lambda: sum(t.sum() for t in qkv(x, position_embeddings=tables)))
for p in (qkv.q_proj, qkv.k_proj, qkv.v_proj):
    p.requires_grad_(False)
check("RMSNormRotaryQKV, projections frozen", lambda: sum(t.sum() for t in qkv(x, positions)))
qkv.requires_grad_(False)
check("RMSNormRotaryQKV, x's gradient only", lambda: sum(t.sum() for t in qkv(x, positions)))
head = torch.randn(37, 24, **f64, requires_grad=True)
target = torch.randint(0, 37, (13,))
check("linear_cross_entropy", lambda: coda.nn.linear_cross_entropy(x, head, target))

submitted.clear()
with torch.no_grad():
    coda.nn.MLP(24, 56, **f64)(x, residual=r)
if submitted:
    failures.append(f"handed over with gradients disabled: {submitted}")
print(f"{len(failures)} failed: {failures}" if failures else "all passed")
sys.exit(1 if failures else 0)
