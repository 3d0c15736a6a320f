# REQUIRES: cuda-gpu, numpy, torch
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %testlib %coda_src
#
# The python package on PyTorch tensors: an epilogue in the DSL compiled by
# coda.Program, run on the current stream on bf16 CUDA tensors, against fp64
# numpy; and the errors it raises for bad source and bad tensors.

import ctypes
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[2], "python"))
import numpy as np
import torch

import coda
import coda_ref as ref
from coda_examples import EXAMPLES

source = open(os.path.join(sys.argv[2], "examples", "mlp_up.coda")).read()
program = coda.Program(source)
assert program.kernel_shape is None
assert [a["name"] for a in program.arguments] == ["a", "b", "bias", "residual", "rs", "alpha"]
assert [o["name"] for o in program.outputs] == ["output", "pre", "dbias"]
# An input that spans n mod p says so (its period), one that spans n 0.
periodic = coda.Program("EPILOGUE p(f: f32[N % 8], g: f32[N]) {\n  output = input * f * g;\n}\n")
assert [a["period"] for a in periodic.arguments] == [0, 0, 8, 0], periodic.arguments

rng = np.random.default_rng(12)
arrays, scalars = EXAMPLES["mlp_up"].inputs(rng, 300, 264, 136)
dev = {name: torch.from_numpy(value).cuda() for name, value in arrays.items()}
bf16 = {name: dev[name].to(torch.bfloat16) for name in ("a", "b", "residual")}
outs = program(bf16["a"], bf16["b"], bias=dev["bias"], residual=bf16["residual"], rs=dev["rs"],
               alpha=scalars["alpha"])
torch.cuda.synchronize()
# The tile rule: one wave of 6 tiles of 256 or 192 columns, 9 of 128 or 15
# of 64; the 64-column tiles spread the work over the most SMs.
assert program.kernel_shape == (128, 64, "cooperative", 1, 8), program.kernel_shape
want = EXAMPLES["mlp_up"].reference(arrays, scalars, 0)
for name, tol in EXAMPLES["mlp_up"].tolerances.items():
    ref.check(f"mlp_up {name}", outs[name].float().cpu().numpy(), want[name], tol)


def check_pinned(label, shape, **options):
    """Runs the program under pinned kernel-shape options; checks the shape
    its kernel reports and the outputs."""
    pinned = coda.Program(source, **options)
    outs_p = pinned(bf16["a"], bf16["b"], bias=dev["bias"], residual=bf16["residual"], rs=dev["rs"],
                    alpha=scalars["alpha"])
    torch.cuda.synchronize()
    assert pinned.kernel_shape == shape, pinned.kernel_shape
    for name, tol in EXAMPLES["mlp_up"].tolerances.items():
        ref.check(f"mlp_up {label} {name}", outs_p[name].float().cpu().numpy(), want[name], tol)


# Pinning the cluster size and the tile order keeps the tile rule's width.
check_pinned("in clusters", (128, 64, "cooperative", 2, 4), cluster_m=2, group_rows=4)
# The shape reports the schedule the kernel was compiled with.
check_pinned("under ping-pong", (128, 128, "pingpong", 1, 8), schedule="pingpong", tile_m=128, tile_n=128)

# Operands that TMA cannot read where they are: K = 45 (90-byte rows) and A
# starting 2 bytes past a 16-byte boundary. The runtime stages them into rows
# 16 bytes apart on the stream, also under CUDA graph capture.
odd, odd_scalars = EXAMPLES["mlp_up"].inputs(rng, 300, 264, 45)
odd_dev = {name: torch.from_numpy(value).cuda() for name, value in odd.items()}
flat = torch.empty(300 * 45 + 1, device="cuda", dtype=torch.bfloat16)
odd_a = flat[1:].view(300, 45)
odd_a.copy_(odd_dev["a"])
assert odd_a.data_ptr() % 16 != 0
odd_args = dict(bias=odd_dev["bias"], residual=odd_dev["residual"].to(torch.bfloat16),
                rs=odd_dev["rs"], alpha=odd_scalars["alpha"])
odd_b = odd_dev["b"].to(torch.bfloat16)
odd_want = EXAMPLES["mlp_up"].reference(odd, odd_scalars, 0)
odd_outs = program(odd_a, odd_b, **odd_args)
torch.cuda.synchronize()
for name, tol in EXAMPLES["mlp_up"].tolerances.items():
    ref.check(f"mlp_up staged {name}", odd_outs[name].float().cpu().numpy(), odd_want[name], tol)
odd_graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(odd_graph):
    odd_static = program(odd_a, odd_b, **odd_args)
for tensor in odd_static.values():
    tensor.fill_(float("nan"))
odd_graph.replay()
torch.cuda.synchronize()
for name, tol in EXAMPLES["mlp_up"].tolerances.items():
    ref.check(f"mlp_up staged, graph replay {name}", odd_static[name].float().cpu().numpy(),
              odd_want[name], tol)

# A second call reuses the compiled kernel and writes into given outputs: the
# same values, except that the column sum (f32 atomics) may add in another order.
given = {name: torch.full_like(t, float("nan")) for name, t in outs.items()}
program(bf16["a"], bf16["b"], bias=dev["bias"], residual=bf16["residual"], rs=dev["rs"],
        alpha=scalars["alpha"], out=given)
torch.cuda.synchronize()
for name in ("output", "pre"):
    assert torch.equal(given[name], outs[name]), f"{name}: second launch differs"
ref.check("dbias again", given["dbias"].cpu().numpy(), outs["dbias"].cpu().numpy(), "f32")

# Under CUDA graph capture the launch (and the zeroing of the column sum's
# output) is recorded with its arguments; replays read new data from the same
# tensors. Two replays: a column sum that were not zeroed again would double.
static = {"a": bf16["a"].clone(), "b": bf16["b"].clone(), "bias": dev["bias"].clone(),
          "residual": bf16["residual"].clone(), "rs": dev["rs"].clone()}
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    captured = program(static["a"], static["b"], bias=static["bias"], residual=static["residual"],
                       rs=static["rs"], alpha=scalars["alpha"])
arrays3, _ = EXAMPLES["mlp_up"].inputs(rng, 300, 264, 136)
for name, tensor in static.items():
    tensor.copy_(torch.from_numpy(arrays3[name]))
for _ in range(2):
    graph.replay()
torch.cuda.synchronize()
want3 = EXAMPLES["mlp_up"].reference(arrays3, scalars, 0)
for name, tol in EXAMPLES["mlp_up"].tolerances.items():
    ref.check(f"mlp_up replayed {name}", captured[name].float().cpu().numpy(), want3[name], tol)

# autotune=True times the candidate kernel shapes at the first call of each
# problem shape and runs the fastest. The tuning runs write scratch outputs:
# here the output is the residual itself (in place) on a problem shape the
# program has not seen, and the result is still the reference's.
tuned = coda.Program(source, autotune=True)
arrays2, scalars2 = EXAMPLES["mlp_up"].inputs(rng, 301, 264, 136)
dev2 = {name: torch.from_numpy(value).cuda() for name, value in arrays2.items()}
in_place = dev2["residual"].to(torch.bfloat16)
want2 = EXAMPLES["mlp_up"].reference(arrays2, scalars2, 0)
outs2 = tuned(dev2["a"].to(torch.bfloat16), dev2["b"].to(torch.bfloat16), bias=dev2["bias"],
              residual=in_place, rs=dev2["rs"], alpha=scalars2["alpha"], out={"output": in_place})
torch.cuda.synchronize()
assert outs2["output"].data_ptr() == in_place.data_ptr()
assert tuned.kernel_shape in {(128, 256, "cooperative", 1, 8), (128, 192, "cooperative", 1, 8),
                              (128, 128, "cooperative", 1, 8), (128, 64, "cooperative", 1, 8),
                              (256, 128, "cooperative", 1, 8), (128, 128, "pingpong", 1, 8),
                              (128, 192, "pingpong", 1, 8),
                              (128, 64, "cooperative", 2, 8), (128, 64, "cooperative", 1, 16)}, \
    tuned.kernel_shape
print("autotuned:", tuned.kernel_shape)
for name, tol in EXAMPLES["mlp_up"].tolerances.items():
    ref.check(f"mlp_up autotuned in place {name}", outs2[name].float().cpu().numpy(), want2[name],
              tol)
try:
    coda.Program(source, autotune=True, tile_n=128)
    raise AssertionError("autotune was accepted with a pinned tile width")
except coda.CodaError as error:
    assert "autotune chooses the kernel shape itself" in str(error), str(error)
    print("refused:", str(error).splitlines()[0])

# A module of several programs: `function` picks the one that is compiled and
# run, whichever comes last.
TWO = """
func.func @{0}(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xf32> {{
  %0 = coda.gemm %a, %b transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xf32> [m, n]) {{
  ^bb0(%acc: f32):
    %y = {1}
    coda.yield %y : f32
  }}
  return %0 : tensor<?x?xf32>
}}"""
two = (TWO.format("doubled", "arith.addf %acc, %acc : f32") +
       TWO.format("negated", "arith.negf %acc : f32"))
acc = ref.round_to(arrays["a"], "bf16") @ ref.round_to(arrays["b"], "bf16").T
for name, sign in (("doubled", 2), ("negated", -1)):
    chosen = coda.Program(two, function=name)
    got = chosen(bf16["a"], bf16["b"])["result0"]
    torch.cuda.synchronize()
    ref.check(f"function={name}", got.cpu().numpy(), sign * acc, "f32")

# Outputs that copy an operand: a residual, an f32 tensor, an [N] vector.
copies = coda.Program("""
EPILOGUE copies(bias: f32[N], x: f32[M, N]) -> (output: bf16[M, N], y: f32[M, N], v: f32[N]) {
  output = residual;
  y = x * 1;
  v = bias;
}""")
x = torch.from_numpy(EXAMPLES["mlp_up"].inputs(rng, 300, 264, 136)[0]["residual"]).cuda()
got = copies(bf16["a"], bf16["b"], bias=dev["bias"], x=x, residual=bf16["residual"])
torch.cuda.synchronize()
assert torch.equal(got["output"], bf16["residual"]), "output = residual differs"
assert torch.equal(got["y"], x), "y = x * 1 differs"
assert torch.equal(got["v"], dev["bias"]), "v = bias differs"
print("copies: ok")

# Outputs whose rows do not start on 16-byte boundaries: an odd N (1001, rows
# 2002 bytes long) and an output of N = 1000 that starts 2 bytes past a
# 16-byte boundary, inside a NaN-filled buffer whose elements around it must
# stay NaN. Each lane writes the aligned 16 bytes around its chunk.
head = coda.Program("EPILOGUE head(bias: f32[N]) { output = input + bias; }")
for n_head, offset in ((1001, 0), (1000, 1)):
    ha = ref.round_to(rng.standard_normal((333, 64)), "bf16")
    hb = ref.round_to(rng.standard_normal((n_head, 64)) / 8, "bf16")
    hbias = rng.standard_normal(n_head).astype(np.float32)
    buffer = torch.full((333 * n_head + 2 * offset + 8,), float("nan"), device="cuda",
                        dtype=torch.bfloat16)
    view = buffer[offset:offset + 333 * n_head].view(333, n_head)
    got = head(torch.from_numpy(ha).to(torch.bfloat16).cuda(),
               torch.from_numpy(hb).to(torch.bfloat16).cuda(),
               bias=torch.from_numpy(hbias).cuda(), out={"output": view})["output"]
    torch.cuda.synchronize()
    assert got.data_ptr() == view.data_ptr()
    ref.check(f"N = {n_head}, output offset {2 * offset} bytes", got.float().cpu().numpy(),
              ha @ hb.T + hbias, "bf16")
    rest = torch.cat([buffer[:offset], buffer[offset + 333 * n_head:]])
    assert torch.isnan(rest.float()).all(), "an element around the output was written"

# Epilogue inputs named like the call's own parameters go in `inputs`.
named = coda.Program("EPILOGUE named(a: f32[N], c: f32) { output = input * a + c; }")
got = named(bf16["a"], bf16["b"], inputs={"a": dev["bias"], "c": 0.5})["output"]
torch.cuda.synchronize()
ref.check("inputs named a and c", got.float().cpu().numpy(),
          acc * arrays["bias"][None, :] + 0.5, "bf16")
try:
    copies(bf16["a"], bf16["b"], bias=dev["bias"], x=x, residual=bf16["residual"], inputs={"x": x})
    raise AssertionError("an input given twice was accepted")
except coda.CodaError as error:
    assert str(error) == "epilogue input 'x' was given twice", str(error)
    print("refused:", error)

# Errors: a DSL error names the line and column; tensors are checked.
try:
    coda.Program("EPILOGUE {\n  output = gelu(input;\n}\n")
    raise AssertionError("a syntax error was accepted")
except coda.CodaError as error:
    assert "epilogue:2:" in str(error), str(error)
    print("syntax error:", str(error).splitlines()[0])
try:
    program(dev["a"], bf16["b"], bias=dev["bias"], residual=bf16["residual"], rs=dev["rs"], alpha=1.0)
    raise AssertionError("an f32 tensor was accepted as a bf16 operand")
except coda.CodaError as error:
    assert "must be torch.bfloat16" in str(error), str(error)
# The runtime checks shapes before it launches anything.
def refused(expected, **overrides):
    args = dict(bias=dev["bias"], residual=bf16["residual"], rs=dev["rs"], alpha=1.0)
    a, b = overrides.pop("a", bf16["a"]), overrides.pop("b", bf16["b"])
    args.update(overrides)
    try:
        program(a, b, **args)
    except coda.CodaError as error:
        assert expected in str(error), str(error)
        print("refused:", str(error).splitlines()[0])
        return
    raise AssertionError(f"launched, expected an error containing {expected!r}")


refused("output 'pre' must have", out={"pre": torch.empty(3, 3, device="cuda")})
refused("'bias' has shape [7], but for M = 300, N = 264 it must be [264] (M is from 'a'",
        bias=dev["bias"][:7].contiguous())
refused("K = 0 is not supported on the GPU",
        a=torch.empty(300, 0, device="cuda", dtype=torch.bfloat16),
        b=torch.empty(264, 0, device="cuda", dtype=torch.bfloat16))
refused("output 'dbias' is not empty for M = 0, N = 264",
        a=torch.empty(0, 136, device="cuda", dtype=torch.bfloat16),
        residual=torch.empty(0, 264, device="cuda", dtype=torch.bfloat16),
        rs=torch.empty(0, device="cuda"))
refused("'residual' must be a CUDA tensor", residual=bf16["residual"].cpu())
refused("'bias' must be a CUDA tensor", bias=0.5)
refused("'residual' must be contiguous",
        residual=torch.empty(264, 300, device="cuda", dtype=torch.bfloat16).t())
refused("'rs' has 4 dims; at most 3 are supported", rs=dev["rs"].view(1, 1, 1, -1))
refused("'pre' must be torch.float32, got torch.bfloat16",
        out={"pre": torch.empty(300, 264, device="cuda", dtype=torch.bfloat16)})
refused("the program has no epilogue inputs named ['extra']", extra=1.0)
# An output may be an epilogue input's own bytes (in place, above), but
# overlaps none otherwise: the kernels read their inputs as memory no output
# writes.
shifted = torch.empty(300 * 264 + 8, device="cuda", dtype=torch.bfloat16)
refused("output 'output' overlaps 'residual' in memory: an output may be an epilogue input or C",
        residual=shifted[8:].view(300, 264).copy_(bf16["residual"]),
        out={"output": shifted[:300 * 264].view(300, 264)})
under_a = torch.empty(300 * 264 + 300 * 136, device="cuda", dtype=torch.bfloat16)
refused("output 'output' overlaps 'a' in memory",
        a=under_a[:300 * 136].view(300, 136).copy_(bf16["a"]),
        out={"output": under_a[100:100 + 300 * 264].view(300, 264)})
pre = torch.empty(300, 264, device="cuda")
refused("outputs 'output' and 'pre' overlap in memory: each output needs its own",
        out={"pre": pre, "output": pre.view(-1).view(torch.bfloat16)[:300 * 264].view(300, 264)})
refused("'alpha' = 1e+39 is out of the range of f32 (at most 3.40282347e38 in magnitude)",
        alpha=1e39)
try:
    program(bf16["a"], bf16["b"], bias=dev["bias"], residual=bf16["residual"], alpha=1.0)
    raise AssertionError("launched without an input")
except coda.CodaError as error:
    assert str(error) == "missing epilogue input 'rs'", str(error)
if torch.cuda.device_count() > 1:
    refused("'b' is on cuda:1, but the program runs on cuda:0", b=bf16["b"].to("cuda:1"))
# The C API refuses a tensor rank outside 0..3 (the python layer refuses it
# first; call the library directly).
from coda import runtime as rt  # noqa: E402

import struct  # noqa: E402


def packed(values, outputs):
    """The C API's arguments for (data, rank, shape[3], f32, i64) values and
    (data, rank, shape[3]) outputs: each array and its length."""
    return (struct.pack("@" + rt._VALUE * len(values), *sum(values, ())), len(values),
            struct.pack("@" + rt._TENSOR * len(outputs), *sum(outputs, ())), len(outputs))


def launch_raw(handle, values, outputs):
    """coda_program_launch: its status."""
    return rt._library().coda_program_launch(handle, *packed(values, outputs), None)


NO_TENSOR = (0, 0, 0, 0, 0)
assert launch_raw(program._handle,
                  [(0, 4, 0, 0, 0, 0.0, 0)] + [NO_TENSOR + (0.0, 0)] * (len(program.arguments) - 1),
                  [NO_TENSOR] * len(program.outputs)) != 0
message = rt._library().coda_last_error().decode()
assert message == "'a' has rank 4; coda tensors have rank 0 to 3", message
print("refused:", message)

# A null pointer for an input that is not empty.
dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
given = {"a": bf16["a"], "b": bf16["b"], "bias": dev["bias"], "residual": bf16["residual"],
         "rs": dev["rs"]}
valid_values = [program._tensor_fields(arg, given[arg["name"]], dtypes[arg["type"]]) + (0.0, 0)
                if arg["tensor"] else NO_TENSOR + (1.0, 0) for arg in program.arguments]
values = list(valid_values)
values[3] = (0,) + values[3][1:]
assert launch_raw(program._handle, values,
                  [program._tensor_fields(output, outs[output["name"]], dtypes[output["type"]])
                   for output in program.outputs]) != 0
message = rt._library().coda_last_error().decode()
assert message == "'residual' is a null pointer", message
print("refused:", message)

# The runtime leaves a thread's current CUDA context as it found it: a launch
# (and the compile and load of its first) from a thread that has none.
import threading  # noqa: E402

cuda = ctypes.CDLL("libcuda.so.1")
fresh = coda.Program("EPILOGUE tripled { output = input * 3; }")
tripled = torch.empty(300, 264, dtype=torch.bfloat16, device="cuda")
seen = {}


def bare_thread():
    current = ctypes.c_void_p()
    cuda.cuCtxGetCurrent(ctypes.byref(current))
    seen["before"] = current.value
    args = [fresh._tensor_fields(fresh.arguments[i], operand, torch.bfloat16) + (0.0, 0)
            for i, operand in enumerate((bf16["a"], bf16["b"]))]
    result = [fresh._tensor_fields(fresh.outputs[0], tripled, torch.bfloat16)]
    seen["status"] = launch_raw(fresh._handle, args, result)
    seen["error"] = rt._library().coda_last_error().decode()
    cuda.cuCtxGetCurrent(ctypes.byref(current))
    seen["after"] = current.value


thread = threading.Thread(target=bare_thread)
thread.start()
thread.join()
assert seen["before"] is None and seen["status"] == 0 and seen["after"] is None, seen
torch.cuda.synchronize()
ref.check("launched from a thread without a context", tripled.float().cpu().numpy(), 3 * acc,
          "bf16")

# A seed given as a CUDA int64 tensor is read by the kernel as it starts:
# the same output as the seed given by value, and a CUDA graph that captured
# the call after an increment of the seed draws a new mask at each replay
# (the capture runs nothing: the replays see seeds 42 and 43).
paper = coda.Program(open(os.path.join(sys.argv[2], "examples", "paper.coda")).read())
paper_arrays, _ = EXAMPLES["paper"].inputs(rng, 300, 264, 136)
pdev = {name: torch.from_numpy(value).cuda().to(torch.bfloat16)
        for name, value in paper_arrays.items()}
seed_tensor = torch.tensor([41], dtype=torch.int64, device="cuda")
by_value = paper(pdev["a"], pdev["b"], residual=pdev["residual"], seed=41)["output"]
by_address = paper(pdev["a"], pdev["b"], residual=pdev["residual"], seed=seed_tensor)["output"]
torch.cuda.synchronize()
assert torch.equal(by_value, by_address), "the seed read from memory gave another output"
assert torch.equal(paper(pdev["a"], pdev["b"], residual=pdev["residual"],
                         seed=torch.tensor(41))["output"], by_value), "a CPU tensor seed differs"
pingpong = coda.Program(open(os.path.join(sys.argv[2], "examples", "paper.coda")).read(),
                        schedule="pingpong", tile_m=128, tile_n=128)
assert torch.equal(*[pingpong(pdev["a"], pdev["b"], residual=pdev["residual"], seed=seed)["output"]
                    for seed in (41, seed_tensor)]), "the seed read from memory differs under ping-pong"
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    seed_tensor.add_(1)
    replayed = paper(pdev["a"], pdev["b"], residual=pdev["residual"], seed=seed_tensor)["output"]
for seed in (42, 43):
    graph.replay()
    torch.cuda.synchronize()
    ref.check(f"paper replayed with seed {seed}", replayed.float().cpu().numpy(),
              EXAMPLES["paper"].reference(paper_arrays, {}, seed)["output"], "bf16")
# Without a seed, one from PyTorch's default generator: a new mask at each
# call, the same calls again after the same torch.manual_seed.
drawn = []
for _ in range(2):
    torch.manual_seed(7)
    drawn += [paper(pdev["a"], pdev["b"], residual=pdev["residual"])["output"] for _ in range(2)]
torch.cuda.synchronize()
assert not torch.equal(drawn[0], drawn[1]), "two calls without a seed drew the same mask"
assert torch.equal(drawn[0], drawn[2]) and torch.equal(drawn[1], drawn[3]), \
    "torch.manual_seed did not reproduce the masks"
print("seeds drawn from torch's generator: ok")
for bad, expected in ((torch.tensor([1], dtype=torch.int32, device="cuda"),
                       "'seed' must be torch.int64, got torch.int32"),
                      (torch.tensor([1, 2], device="cuda"),
                       "'seed' given as a tensor must have one element, it has 2")):
    try:
        paper(pdev["a"], pdev["b"], residual=pdev["residual"], seed=bad)
        raise AssertionError(f"launched with seed {bad}")
    except coda.CodaError as error:
        assert str(error) == expected, str(error)
        print("refused:", error)


def launch_device_seed(program, values, outputs, address):
    """coda_program_launch_device_seed, as launch_raw: its error or ''."""
    status = rt._library().coda_program_launch_device_seed(
        program._handle, *packed(values, outputs), address, None)
    return rt._library().coda_last_error().decode() if status else ""


paper_values = [program._tensor_fields({"name": name}, pdev[name], torch.bfloat16) + (0.0, 0)
                for name in ("a", "b", "residual")] + [NO_TENSOR + (0.0, 0)]
paper_outputs = [program._tensor_fields({"name": "output"}, by_value, torch.bfloat16)]
for address, expected in ((seed_tensor.data_ptr() + 4,
                           "the dropout seed's device address must be 8-byte aligned"),
                          (0, "coda_program_launch_device_seed: the seed's address is 0")):
    message = launch_device_seed(paper, paper_values, paper_outputs, address)
    assert message == expected, message
    print("refused:", message)
message = launch_device_seed(program, valid_values, [program._tensor_fields(
    output, outs[output["name"]], dtypes[output["type"]]) for output in program.outputs],
    seed_tensor.data_ptr())
assert message == "'mlp_up' has no dropout seed to read from device memory", message
print("refused:", message)

# The C API reads `length` bytes of source, whatever follows them.
text = TWO.format("plain", "arith.addf %acc, %acc : f32").encode()
handle = ctypes.c_void_p()
assert rt._library().coda_program_load(rt._runtime(0), text + b"@@ not coda", len(text), None,
                                       ctypes.byref(handle)) == 0, \
    rt._library().coda_last_error().decode()
rt._library().coda_program_destroy(handle)

# A program outlives the runtime it was loaded into: with the runtime's handle
# destroyed first, it still compiles, loads and launches.
runtime = ctypes.c_void_p()
assert rt._library().coda_runtime_create(0, ctypes.byref(runtime)) == 0
assert rt._library().coda_program_load(runtime, text, len(text), None, ctypes.byref(handle)) == 0
rt._library().coda_runtime_destroy(runtime)
doubled = torch.empty(300, 264, device="cuda")
assert launch_raw(handle, [program._tensor_fields({"name": name}, bf16[name], torch.bfloat16)
                           + (0.0, 0) for name in ("a", "b")],
                  [program._tensor_fields({"name": "result0"}, doubled, torch.float32)]) == 0, \
    rt._library().coda_last_error().decode()
torch.cuda.synchronize()
rt._library().coda_program_destroy(handle)
ref.check("launched after its runtime was destroyed", doubled.cpu().numpy(), 2 * acc, "f32")
print("python api: ok")
