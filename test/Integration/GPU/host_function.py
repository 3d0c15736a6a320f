# REQUIRES: cuda-gpu, torch
# RUN: %python %s %coda_src | FileCheck %s
#
# coda.HostFunction on CUDA tensors: the host code runs on the CPU and each
# program it calls as its fused kernel on the GPU (arguments copied there,
# outputs back); the results, on the GPU, are checked against an fp64
# computation of the same MLP with coda's dropout mask, on a ragged M and
# fresh random non-zero inputs (an element a kernel missed would hold what
# torch.empty left there and show as a mismatch). A program graph (three
# GEMMs passing h and its rows' rstd along, no host code) runs whole in one
# call of the GPU runtime on the current stream, nothing copied: checked
# against fp64 with the memory its results and workspace take poisoned with
# NaN first, and captured in a CUDA graph.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import numpy as np
import torch

import coda

source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs", "host-mlp.mlir")).read()
torch.manual_seed(1)
M = 333
x = torch.randn(M, 64, device="cuda").bfloat16()
w1 = (torch.randn(96, 64, device="cuda") / 8).bfloat16()
b1 = torch.randn(96, device="cuda")
w2 = (torch.randn(64, 96, device="cuda") / 8).bfloat16()

mlp = coda.HostFunction(source, "mlp")
y, h = mlp(x, w1, b1, w2)
print(y.device.type, h.device.type, list(y.shape), list(h.shape))
# CHECK: cuda cuda [333, 64] [333, 96]

xd, w1d, b1d, w2d = (t.double().cpu() for t in (x, w1, b1, w2))
acc1 = xd @ w1d.T + b1d
h_ref = 0.5 * acc1 * (1 + torch.tanh(0.7978845608028654 * (acc1 + 0.044715 * acc1 ** 3)))
mask = torch.from_numpy(coda.dropout_mask(7, (M, 64), 0.25).astype(np.float64))
y_ref = (h.double().cpu() * 0.5) @ w2d.T * 1.5 * mask / 0.75 + xd


def error(got, want):
    return ((got.double().cpu() - want).norm() / want.norm()).item()


print(f"h {error(h, h_ref) < 1e-2}, y {error(y, y_ref) < 1e-2}")
# CHECK: h True, y True


# A program graph on the GPU: the caching allocator hands the graph the NaN
# blocks freed here, for its results and its workspace.
graph_source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs",
                                  "host-graph.mlir")).read()
block = coda.HostFunction(graph_source, "block")
o = torch.randn(M, 64, device="cuda").bfloat16()
wo = (torch.randn(96, 64, device="cuda") / 8).bfloat16()
r = torch.randn(M, 96, device="cuda").bfloat16()
wq = (torch.randn(128, 96, device="cuda") / 8).bfloat16()
w3 = (torch.randn(48, 128, device="cuda") / 8).bfloat16()
torch.cuda.synchronize()
for size in (M * 48, M * 96, 1 << 20):
    torch.full((size,), float("nan"), device="cuda", dtype=torch.bfloat16)
z, h_graph = block(o, wo, r, wq, w3)
od, wod, rd, wqd, w3d = (t.double().cpu() for t in (o, wo, r, wq, w3))
h64 = od @ wod.T + rd
rstd64 = (h64.pow(2).mean(1) + 1e-6).rsqrt()
z64 = torch.nn.functional.gelu((h64 @ wqd.T) * rstd64[:, None] @ w3d.T)
print(f"graph: h {error(h_graph, h64) < 1e-2}, z {error(z, z64) < 2e-2}, "
      f"finite {bool(z.isfinite().all() and h_graph.isfinite().all())}, {z.device.type}")
# CHECK: graph: h True, z True, finite True, cuda

# On a side stream, and captured in a CUDA graph and replayed on new inputs.
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    z_side, _ = block(o, wo, r, wq, w3)
torch.cuda.current_stream().wait_stream(stream)
cuda_graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(cuda_graph):
    z_captured, _ = block(o, wo, r, wq, w3)
o.copy_(torch.randn(M, 64, device="cuda").bfloat16())
cuda_graph.replay()
z_eager, _ = block(o, wo, r, wq, w3)
print("side stream:", torch.equal(z_side, z), "replayed:", torch.equal(z_captured, z_eager))
# CHECK: side stream: True replayed: True

# The runtime's graph API directly (coda_graph_load): a program is a graph of
# one call, bit-identical to the launch the MLP's host code made; what is not
# a graph is refused, saying why.
from coda.host import _DeviceGraph

(h_direct,) = _DeviceGraph(torch, source, "fc1", x.device).run(torch, [x, w1, b1],
                                                                [torch.bfloat16])
print("program as a graph:", torch.equal(h_direct, h))
# CHECK: program as a graph: True
# A negative size given to the C API is refused, not planned.
import ctypes
from coda import runtime as coda_runtime
from coda.reference import _Tensor, _Value

graph = _DeviceGraph(torch, graph_source, "block", x.device)
values = (_Value * 5)(*[_Value(_Tensor(0, 2, (ctypes.c_int64 * 3)(-1, 64, 0)), 0.0, 0)] * 5)
results = (_Tensor * 2)()
workspace = ctypes.c_uint64()
lib = coda_runtime._library()
if lib.coda_graph_plan(graph._handle, values, 5, results, 2, ctypes.byref(workspace)) != 0:
    print("negative:", lib.coda_last_error().decode())
# CHECK: negative: argument #0 of 'block' has a negative size: [-1, 64]
for name in ("scaled", "nope"):
    try:
        _DeviceGraph(torch, graph_source, name, x.device)
    except coda.CodaError as e:
        print(f"{name}:", str(e).splitlines()[0])
# CHECK: scaled: program:{{[0-9]+}}:{{[0-9]+}}: error: 'scaled' is not a program graph (a function whose body is calls of coda programs): 'arith.constant' at program:{{[0-9]+}}:{{[0-9]+}} is not a call of a coda program
# CHECK: nope: {{.*}}error: no function named 'nope'
