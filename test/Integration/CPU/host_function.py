# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# coda.HostFunction: a function of a module that calls coda programs, run
# from python on PyTorch tensors. On CPU tensors every program runs on the
# CPU reference; the results are bit-identical to running the programs one
# by one (coda.reference.ReferenceProgram) with the host's own step in
# PyTorch between them, on a ragged M (37 rows). The launch callback that
# CUDA tensors take is run here with the reference programs in place of the
# GPU's, so that its packing of arguments and outputs is checked too. A
# program graph (three GEMMs passing h, its rows' rstd and a projection
# along, with no host code) runs its calls in turn, the values between them
# in a workspace: bit-identical to its programs run one by one. Then the
# errors a user sees.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch

import coda
from coda.reference import ReferenceProgram

source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs", "host-mlp.mlir")).read()
errors_source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs",
                                  "host-errors.mlir")).read()
torch.manual_seed(0)
x = torch.randn(37, 64).bfloat16()
w1 = (torch.randn(96, 64) / 8).bfloat16()
b1 = torch.randn(96)
w2 = (torch.randn(64, 96) / 8).bfloat16()

fc1 = ReferenceProgram(source, function="fc1")
fc2 = ReferenceProgram(source, function="fc2")
h_ref = fc1(x, w1, bias=b1)["output"]
y_ref = fc2(h_ref * 0.5, w2, residual=x, scale=1.5, seed=7)["output"]
assert h_ref.count_nonzero() > 0 and y_ref.count_nonzero() > 0

mlp = coda.HostFunction(source, "mlp")
print([p["name"] for p in mlp.programs], mlp.arguments[0], mlp.results[1])
# CHECK: ['fc1', 'fc2'] (torch.bfloat16, [-1, 64]) (torch.bfloat16, [-1, 96])
y, h = mlp(x, w1, b1, w2)
print("reference launches:", torch.equal(h, h_ref), torch.equal(y, y_ref), y.dtype, list(y.shape))
# CHECK: reference launches: True True torch.bfloat16 [37, 64]

# Arguments in another float type are converted to the declared one.
y32, _ = mlp(x.float(), w1.float(), b1, w2.float())
print("converted:", torch.equal(y32, y_ref))
# CHECK: converted: True

# The callback path, with the reference programs standing in for the GPU's.
mlp._program = lambda index, device: ReferenceProgram(source,
                                                     function=mlp.programs[index]["name"])
y_cb, h_cb = mlp._run(torch, [x, w1, b1, w2], torch.device("cpu"), callback=True)
print("callback launches:", torch.equal(h_cb, h_ref), torch.equal(y_cb, y_ref))
# CHECK: callback launches: True True


# A function that is a program itself: the host function of its name launches
# it, under the name the program source gives it.
fc1_host = coda.HostFunction(source, "fc1")
fc1_host._program = lambda index, device: ReferenceProgram(
    fc1_host._program_source, function=fc1_host.programs[index]["name"])
(h_program,) = fc1_host._run(torch, [x, w1, b1], torch.device("cpu"), callback=True)
print("program entry:", fc1_host.programs[0]["name"], torch.equal(h_program, h_ref))
# CHECK: program entry: fc1_program True

# A program graph: three coda.gemm ops in one function, outlined when read.
graph_source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs",
                                 "host-graph.mlir")).read()
block = coda.HostFunction(graph_source, "block")
def spell(value):
    return " ".join(map(str, value))


print("graph:", ", ".join(f"{call['program']}({', '.join(map(spell, call['arguments']))})"
                          for call in block.graph["calls"]),
      "->", ", ".join(map(spell, block.graph["results"])))
# CHECK: graph: block_gemm(argument 0, argument 1, argument 2), block_gemm_0(call 0 0, argument 3, call 0 1), block_gemm_1(call 1 0, argument 4) -> call 2 0, call 0 0
o = torch.randn(37, 64).bfloat16()
wo = (torch.randn(96, 64) / 8).bfloat16()
r = torch.randn(37, 96).bfloat16()
wq = (torch.randn(128, 96) / 8).bfloat16()
w3 = (torch.randn(48, 128) / 8).bfloat16()
z, h_graph = block(o, wo, r, wq, w3)
stage = [ReferenceProgram(block._program_source, function=name)
         for name in ("block_gemm", "block_gemm_0", "block_gemm_1")]
h_stage, rstd_stage = stage[0](o, wo, input0=r).values()
q_stage = stage[1](h_stage, wq, input0=rstd_stage)["output"]
z_stage = stage[2](q_stage, w3)["output"]
print("graph on the reference:", torch.equal(h_graph, h_stage), torch.equal(z, z_stage),
      list(z.shape), z.dtype, z.count_nonzero().item() > 0)
# CHECK: graph on the reference: True True [37, 48] torch.bfloat16 True
h64 = o.double() @ wo.double().T + r.double()
rstd64 = (h64.bfloat16().double().pow(2).mean(1) + 1e-6).rsqrt()
z64 = torch.nn.functional.gelu(((h64.bfloat16().double() @ wq.double().T) * rstd64[:, None])
                               .bfloat16().double() @ w3.double().T)
print("graph against float64:", ((z.double() - z64).norm() / z64.norm()).item() < 2e-2)
# CHECK: graph against float64: True
# The launch callback runs a graph's calls too.
block._program = lambda index, device: ReferenceProgram(
    block._program_source, function=block.programs[index]["name"])
z_cb, h_cb = block._run(torch, [o, wo, r, wq, w3], torch.device("cpu"), callback=True)
print("graph callback:", torch.equal(z_cb, z), torch.equal(h_cb, h_graph))
# CHECK: graph callback: True True
# Functions that are not graphs run as host code, and say why.
for name in ("scaled", "passthrough", "twice"):
    function = coda.HostFunction(graph_source, name)
    print(f"{name}:", function.graph, function.graph_violation)
# CHECK: scaled: None 'arith.constant' at module:73:9 is not a call of a coda program
# CHECK: passthrough: None result #1 is an argument
# CHECK: twice: None result #1 returns a value returned before
(scaled,) = coda.HostFunction(graph_source, "scaled")(o, wo)
print("host code:", torch.equal(scaled, (o.float() @ wo.float().T).bfloat16() * 2))
# CHECK: host code: True


def expect_error(what, call):
    try:
        call()
    except Exception as error:
        print(f"{what}: {str(error).splitlines()[0]}")
        return
    print(f"{what}: no error")


expect_error("count", lambda: mlp(x, w1, b1))
# CHECK: count: 'mlp' takes 4 arguments, got 3
expect_error("shape", lambda: mlp(x, w1[:95], b1, w2))
# CHECK: shape: argument #1 of 'mlp' must have shape [96, 64], got [95, 64]
expect_error("devices", lambda: mlp(x, w1, b1, w2.to("meta")))
# CHECK: devices: the arguments must be tensors on one device, got ['cpu', 'meta']
expect_error("not a tensor", lambda: mlp(x, w1, b1, 2.0))
# CHECK: not a tensor: argument #3 of 'mlp' must be a tensor, got float
expect_error("rank", lambda: coda.HostFunction(errors_source, "rank4"))
# CHECK: rank: argument #0 of 'rank4' is tensor<2x3x4x5xf32>; the C API and python take tensors of rank 0 to 3
expect_error("function", lambda: coda.HostFunction(source, "nope"))
# CHECK: function: the module has no function named 'nope' with a body
expect_error("scalar", lambda: coda.HostFunction(errors_source, "with_scalar"))
# CHECK: scalar: argument #1 of 'with_scalar' is f32; a host function takes and returns ranked tensors of f32, f16 or bf16
mismatched = coda.HostFunction(errors_source, "mismatched")
expect_error("launch", lambda: mismatched(x, w1, torch.ones(36, 96).bfloat16()))
# CHECK: launch: the call of 'add_residual' (#0) in 'mismatched': 'residual' has shape [36, 96], but for M = 37, N = 96 it must be [37, 96]
two_launches = coda.HostFunction(errors_source, "two_launches")
expect_error("host launch", lambda: two_launches(x, w1, torch.ones(36, 96).bfloat16()))
# CHECK: host launch: 'add_residual': 'residual' has shape [36, 96], but for M = 37, N = 96 it must be [37, 96]
# A failing launch callback's exception is what the call raises; here the
# first of the two launches fails, and the second still runs memory-safe.


def first_fails(index, device):
    if index == 0:
        raise ValueError("no GPU here")
    return ReferenceProgram(source, function=mlp.programs[index]["name"])


mlp._program = first_fails
expect_error("callback", lambda: mlp._run(torch, [x, w1, b1, w2], torch.device("cpu"),
                                          callback=True))
# CHECK: callback: no GPU here
expect_error("graph plan", lambda: block(o, wo, r[:36], wq, w3))
# CHECK: graph plan: the call of 'block_gemm' (#0) in 'block': 'input0' has shape [36, 96], but for M = 37, N = 96 it must be [37, 96]
