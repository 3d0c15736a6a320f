# REQUIRES: cuda-gpu, numpy, torch
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %testlib %coda_src
#
# Column reductions merged in a fixed order (deterministic=True): each warp
# writes its partial result and a merge kernel combines them. On ragged
# shapes, cooperative and ping-pong, unbatched and batched, sum, max and mean:
# the outputs (poisoned with NaN first) match float64 references, and the
# reductions are bit-identical over repeated launches and CUDA graph replays.
# coda.Program follows torch.use_deterministic_algorithms unless told.

import os
import sys

# torch.use_deterministic_algorithms(True) below asks this of cuBLAS.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[2], "python"))
import numpy as np
import torch

import coda
import coda.nn
import coda_ref as ref
from coda_examples import EXAMPLES

source = open(os.path.join(sys.argv[2], "examples", "mlp_up.coda")).read()
rng = np.random.default_rng(29)
example = EXAMPLES["mlp_up"]


def poisoned(outs):
    return {name: torch.full_like(t, float("nan")) for name, t in outs.items()}


def launch(program, args, out=None):
    return program(args["a"], args["b"], bias=args["bias"], residual=args["residual"],
                   rs=args["rs"], alpha=args["alpha"], out=out)


for m, n, k in ((300, 264, 136), (4097, 770, 64), (8192, 3072, 768)):
    arrays, scalars = example.inputs(rng, m, n, k)
    dev = {name: torch.from_numpy(value).cuda() for name, value in arrays.items()}
    args = {name: dev[name].to(torch.bfloat16) for name in ("a", "b", "residual")}
    args.update(bias=dev["bias"], rs=dev["rs"], alpha=scalars["alpha"])
    want = example.reference(arrays, scalars, 0)
    for options in ({}, {"schedule": "pingpong", "tile_m": 128, "tile_n": 128}):
        label = f"M={m} N={n} K={k} {options.get('schedule', 'cooperative')}"
        program = coda.Program(source, deterministic=True, **options)
        assert program.deterministic
        first = launch(program, args, out=poisoned(launch(program, args)))
        torch.cuda.synchronize()
        for name, tol in example.tolerances.items():
            ref.check(f"{label} {name}", first[name].float().cpu().numpy(), want[name], tol)
        again = launch(program, args, out=poisoned(first))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = launch(program, args)
        for _ in range(2):
            captured["dbias"].fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(captured["dbias"], first["dbias"]), f"{label}: replay differs"
        assert torch.equal(again["dbias"], first["dbias"]), f"{label}: second launch differs"
        print(f"{label}: dbias bit-identical over 4 launches")

# Batched: a [b, n] output per reduction, sum, max and mean.
BATCHED = '''
func.func @batched(%a: tensor<?x?x?xbf16>, %b: tensor<?x?xbf16>)
    -> (tensor<?x?x?xbf16> {coda.name = "output"}, tensor<?x?xf32> {coda.name = "sum"},
        tensor<?x?xf32> {coda.name = "max"}, tensor<?x?xf32> {coda.name = "mean"}) {
  %o:4 = coda.gemm %a, %b transpose_b : tensor<?x?x?xbf16>, tensor<?x?xbf16>
      -> (tensor<?x?x?xbf16> [b, m, n], tensor<?x?xf32> [b, n], tensor<?x?xf32> [b, n],
          tensor<?x?xf32> [b, n]) {
  ^bb0(%acc: f32):
    %s = coda.col_reduce sum %acc
    %x = coda.col_reduce max %acc
    %u = coda.col_reduce mean %acc
    coda.yield %acc, %s, %x, %u : f32, f32, f32, f32
  }
  return %o#0, %o#1, %o#2, %o#3
      : tensor<?x?x?xbf16>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}'''
a = ref.round_to(rng.standard_normal((3, 333, 72)), "bf16")
b = ref.round_to(rng.standard_normal((200, 72)), "bf16")
acc = a @ b.T
batched = coda.Program(BATCHED, deterministic=True)
ta = torch.from_numpy(a).to(torch.bfloat16).cuda()
tb = torch.from_numpy(b).to(torch.bfloat16).cuda()
got = batched(ta, tb, out=poisoned(batched(ta, tb)))
twice = batched(ta, tb)
torch.cuda.synchronize()
for name, want in (("sum", acc.sum(axis=1)), ("max", acc.max(axis=1)), ("mean", acc.mean(axis=1))):
    ref.check(f"batched {name}", got[name].cpu().numpy(), want, "f32")
    assert torch.equal(got[name], twice[name]), f"batched {name} differs"

# The default follows torch.use_deterministic_algorithms, and so do the
# programs of coda.nn: an MLP's bias gradients (column sums in the backward
# kernels) are bit-identical over two backward passes of the same batch.
assert not coda.Program(source).deterministic
torch.use_deterministic_algorithms(True)
assert coda.Program(source).deterministic
assert not coda.Program(source, deterministic=False).deterministic
torch.manual_seed(0)
mlp = coda.nn.MLP(256, 1024, dropout=0.0, device="cuda", dtype=torch.bfloat16)
x = torch.randn(4000, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
grads = []
for _ in range(2):
    mlp.zero_grad(set_to_none=True)
    mlp(x).float().square().sum().backward()
    grads.append([mlp.fc1.bias.grad.clone(), mlp.fc2.bias.grad.clone()])
torch.cuda.synchronize()
assert all(torch.equal(g0, g1) for g0, g1 in zip(*grads)), "bias gradients differ"
torch.use_deterministic_algorithms(False)
print("deterministic: ok")
