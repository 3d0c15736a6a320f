# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src
#
# The backward programs coda derives, checked by torch.autograd.gradcheck in
# float64 on the CPU reference (every float widened to f64): every example
# program and every DSL builtin, ragged shapes, gradients of A, B and every
# tensor input; the fused MLP (fc1's epilogue gradient on fc2's dgrad GEMM)
# and the output projection; then the coda.nn modules against PyTorch
# autograd of the unfused math in float32 (coda's dropout mask regenerated
# from the seed), in eval mode, under torch.compile(fullgraph=True), and the
# errors a user sees.

import glob
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
from coda import CodaError
import coda.nn
from coda.autograd import ProgramFamily, draw_seed, mlp, run
from coda.dropout import dropout_mask, dropout_threshold
from coda.nn import Linear
from coda.reference import ReferenceProgram

torch.manual_seed(0)
M, K, N = 5, 7, 6
failures = []


def report(what, got, want, tolerance):
    error = ((got - want).norm() / want.norm()).item()
    print(f"{what}: relative error {error:.2e}")
    if not error < tolerance:
        failures.append(what)


def expect_error(what, call, error_type, accepts, failure):
    """`call()` must raise `error_type` with a message `accepts` takes;
    records `failure` when the message is not one."""
    try:
        call()
        failures.append(f"no error for {what}")
    except error_type as error:
        print(f"{what}: {error}")
        if not accepts(str(error)):
            failures.append(failure)


def check(name, source, shapes=None, seed=1234):
    """gradcheck of every [m, n] output of `source` w.r.t. A, B and its
    tensor inputs; of a loss over rows (no [m, n] output), of its [m]
    outputs w.r.t. A and B, through its saving program (its inputs may be
    detached: a class index takes no gradient)."""
    family = ProgramFamily(source)
    program = family.program("", torch.device("cpu"), torch.float64)
    a = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
    b = torch.randn(N, K, dtype=torch.float64, requires_grad=True)
    names, tensors, scalar_names = [], [], []
    for arg in program.arguments:
        if arg["role"] == "input" and arg["type"] != "i64" and not arg["tensor"]:
            scalar_names.append(arg["name"])  # a scalar: a constant of the step
        if arg["role"] != "input" or not arg["tensor"]:
            continue
        # An input of p columns read at n mod p (`N % p`) takes no gradient.
        period = arg.get("period", 0)
        shape = [size for bit, size in ((2, M), (1, period or N)) if arg["dims"] & bit]
        names.append(arg["name"])
        tensors.append(torch.randn(shape, dtype=torch.float64))
        tensors[-1].periodic = bool(period)
    full = [i for i, output in enumerate(program.outputs) if output["dims"] == 3]
    derive = "" if full else "saving"
    if full:
        tensors = [t if t.periodic else t.requires_grad_() for t in tensors]
    else:
        full = [i for i, output in enumerate(program.outputs) if output["dims"] == 2]
    assert full, f"{name}: no output to check"

    def f(a, b, *tensors):
        outputs = run(family.key, derive, a, b, list(tensors), ",".join(names),
                      [0.7] * len(scalar_names), ",".join(scalar_names), torch.tensor(seed))
        return tuple(outputs[i] for i in full)

    try:
        ok = torch.autograd.gradcheck(f, (a, b, *tensors), raise_exception=False)
    except CodaError as error:
        ok = False
        print(f"{name}: {error}")
    print(f"{name}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(name)


# Every example program.
examples = sorted(glob.glob(os.path.join(sys.argv[1], "examples", "*.coda")))
assert examples, "no examples found"
for path in examples:
    source = open(path).read()
    if "N/2]" in source:
        # An output of the even columns has no derived backward yet; the
        # derivation says so rather than dropping its gradient.
        family = ProgramFamily(source)
        a = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
        b = torch.randn(N, K, dtype=torch.float64)
        try:
            out = run(family.key, "", a, b, [], "", [], "", torch.tensor(0))[0]
            if os.path.basename(path) == "swiglu.coda":
                # The gated value of the even columns, N / 2 wide.
                acc = a.detach() @ b.T
                report("swiglu.coda forward", out.detach(),
                       torch.nn.functional.silu(acc[:, 0::2]) * acc[:, 1::2], 1e-12)
            out.sum().backward()
            failures.append(os.path.basename(path) + " (no error)")
        except CodaError as error:
            print(f"{os.path.basename(path)}: {error}")
            if "spans [m, n/2]" not in str(error):
                failures.append(os.path.basename(path))
        continue
    check(os.path.basename(path), open(path).read())

# Every builtin, on values inside its domain (p > 0), through an [n] and an
# [m, n] input so that both reductions of the input gradients run.
BUILTINS = {
    "gelu": "gelu(x)", "gelu_erf": "gelu_erf(x)", "relu": "relu(x)", "silu": "silu(x)",
    "sigmoid": "sigmoid(x)", "tanh": "tanh(x)", "exp": "exp(x)", "log": "log(p)",
    "sqrt": "sqrt(p)", "rsqrt": "rsqrt(p)", "abs": "abs(x)", "min": "min(x, r)",
    "max": "max(x, r)", "clamp": "clamp(x, -0.5, 0.5)", "pow": "pow(p, 3) + pow(p, 0.5)",
    "neg_div": "-x / p", "row_sum": "x * row_sum(x)", "row_max": "x - row_max(x)",
    "row_mean": "x - row_mean(x)", "dropout": "dropout(x, 0.3)",
    "per_row": "x * w", "sin": "sin(x)", "cos": "cos(x)",
    "partner": "x * partner(x, 1) + partner(x, 2) * r + partner(x, 4)",
    "coordinates": "x * row() + col() * x",
    # Groups of 4 columns: the second of 6 is ragged.
    "group_sum": "x * group_sum(x, 4)", "group_max": "x - group_max(x, 2)",
    "group_mean": "x * rsqrt(group_mean(p, 4))",
}
for name, expression in BUILTINS.items():
    source = (f"EPILOGUE {name}(v: f32[N], r: f32[M, N], w: f32[M]) {{\n"
              f"  x = input + v;\n  p = x * x + 1;\n  output = {expression} + r;\n}}\n")
    check("builtin " + name, source)

# Inputs that repeat along the row (`N % p`, read through detach: a rotary
# embedding's frequencies or cos/sin table) take no gradient; the others do.
check("periodic inputs", "EPILOGUE periodic(v: f32[N], r: f32[M, N], f: f32[N % 4],\n"
      "                  t: f32[M, N % 2]) {\n  x = input + v;\n"
      "  output = x * cos(x * detach(f)) + detach(t) * partner(x, 1) + r;\n}\n")
periodic = ProgramFamily("EPILOGUE periodic(f: f32[N % 2]) {\n  output = input * f;\n}\n")
expect_error("a gradient through an input that spans n mod p",
             lambda: run(periodic.key, "", torch.randn(M, K, dtype=torch.float64,
                                                       requires_grad=True),
                         torch.randn(N, K, dtype=torch.float64), [torch.randn(2, dtype=torch.float64)],
                         "f", [], "", torch.tensor(0))[0].sum().backward(),
             CodaError, lambda message: "cannot derive the gradient of epilogue input 'f', "
             "which spans [n mod 2]" in message, "periodic gradient error")

# coda.nn.Linear in float32 on the CPU reference against PyTorch autograd.
lin = Linear(K, N, epilogue="EPILOGUE mlp(bias: f32[N]) {\n  output = gelu(input + bias);\n}\n")
x = torch.randn(3, M, K, requires_grad=True)
y = lin(x)
g = torch.randn_like(y)
y.backward(g)
xr = x.detach().clone().requires_grad_()
wr = lin.weight.detach().clone().requires_grad_()
br = lin.bias.detach().clone().requires_grad_()
yr = torch.nn.functional.gelu(xr @ wr.T + br, approximate="tanh")
yr.backward(g)
for what, got, want in (("output", y, yr), ("grad x", x.grad, xr.grad),
                        ("grad weight", lin.weight.grad, wr.grad),
                        ("grad bias", lin.bias.grad, br.grad)):
    report("Linear " + what, got, want, 1e-5)
assert list(lin.state_dict()) == ["weight", "bias"]
# An epilogue whose gradient needs no kernel (input + bias) trains from a
# loss whose gradient is a broadcast view (a sum's): the GEMMs of x's and
# the weight's gradients take it as a contiguous operand.
plain = Linear(K, N, epilogue="EPILOGUE plain(bias: f32[N]) {\n  output = input + bias;\n}\n")
x = torch.randn(M, K, requires_grad=True)
plain(x).sum().backward()
report("Linear without a derived kernel, grad x", x.grad,
       plain.weight.detach().sum(0).expand(M, K), 1e-5)

# An output projection whose weight is stored [in, out] (Hugging Face's
# Conv1D) and read as stored: float64 gradcheck of every operand with its
# dropout, and nn.Linear's initialization of the transposed weight.
for p in (0.0, 0.3):
    proj = coda.nn.OutProjection(K, N, dropout=p, weight_layout="kn", dtype=torch.float64)
    assert proj.weight.shape == (K, N), proj.weight.shape
    x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
    r = torch.randn(M, N, dtype=torch.float64, requires_grad=True)
    seed = torch.tensor(5)
    ok = torch.autograd.gradcheck(
        lambda x, w, b, r: proj._forward(w, b, x, seed, {"residual": r}),
        (x, proj.weight, proj.bias, r), raise_exception=False)
    if p == 0.0:
        report("OutProjection kn output", proj(x, residual=r), x @ proj.weight + proj.bias + r,
               1e-12)
    print(f"OutProjection kn dropout {p}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(f"OutProjection kn dropout {p}")
# nn.Linear's bound, 1 / sqrt(in_features), here 1/8 (1/2 if the fan-in
# were taken from the stored shape's columns).
wide = coda.nn.Linear(64, 4, weight_layout="kn")
assert wide.weight.shape == (64, 4), wide.weight.shape
assert 1 / 16 < wide.weight.abs().max().item() <= 1 / 8, wide.weight.abs().max().item()
expect_error("Linear weight_layout='mn'", lambda: coda.nn.Linear(K, N, weight_layout="mn"),
             ValueError, lambda m: "weight_layout 'mn'" in m and "kn" in m, "weight_layout's message")

# The fused MLP op in float64: every parameter, the input and the residual,
# with and without biases, with and without a dropout after fc2.
H, D = 9, 6
for activation, bias, q in (("gelu", True, 0.0), ("relu", False, 0.0), ("silu", True, 0.0),
                            ("gelu", True, 0.4), ("relu", False, 0.4)):
    module = coda.nn.MLP(K, H, D, activation=activation, dropout=0.25, bias=bias,
                         dtype=torch.float64, output_dropout=q)
    params = [p.detach().clone().requires_grad_() for p in
              (module.fc1.weight, module.fc1.bias, module.fc2.weight, module.fc2.bias)
              if p is not None]
    x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
    r = torch.randn(M, D, dtype=torch.float64, requires_grad=True)

    def f(x, r, *params):
        w1, b1, w2, b2 = params if bias else (params[0], None, params[1], None)
        return mlp(module._up.key, module._down[True].key, x, w1, b1, w2, b2, r,
                   torch.tensor(77), torch.tensor(78))[0]

    ok = torch.autograd.gradcheck(f, (x, r, *params), raise_exception=False)
    print(f"MLP {activation} bias={bias} output dropout {q}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(f"MLP {activation} output dropout {q}")

# An fc1 whose epilogue reads a row statistic: its saving program also
# writes the row mean (saved_row0), which its epilogue gradient on fc2's
# dgrad GEMM reads instead of reducing the row again.
centered = ProgramFamily("EPILOGUE centered(bias: f32[N]) {\n  x = input + bias;\n"
                         "  output = tanh(x - row_mean(x));\n}\n")
module = coda.nn.MLP(K, H, D, dtype=torch.float64)
x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
r = torch.randn(M, D, dtype=torch.float64, requires_grad=True)
ok = torch.autograd.gradcheck(
    lambda x, r, w1, b1, w2, b2: mlp(centered.key, module._down[True].key, x, w1, b1, w2, b2, r,
                                     torch.tensor(0), torch.tensor(0))[0],
    (x, r, *module.parameters()), raise_exception=False)
print(f"MLP with a row statistic in fc1: {'ok' if ok else 'FAILED'}")
if not ok:
    failures.append("MLP with a row statistic in fc1")

# The gated MLP in float64 (its gate and up projections one GEMM, their
# gradient on the down projection's dgrad GEMM with an accumulator [m, n/2]):
# every weight, the input and the residual; then in float32 against the
# unfused math, in eval mode and under torch.compile.
for activation in ("silu", "gelu"):
    gated = coda.nn.GatedMLP(K, H, D, activation=activation, dtype=torch.float64)
    x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
    r = torch.randn(M, D, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(lambda x, r, *w: torch.func.functional_call(
        gated, dict(zip(("gate_proj.weight", "up_proj.weight", "down_proj.weight"), w)),
        (x,), {"residual": r}), (x, r, *gated.parameters()), raise_exception=False)
    print(f"GatedMLP {activation}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(f"GatedMLP {activation}")
gated = coda.nn.GatedMLP(K, H, D)
assert list(gated.state_dict()) == ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]
x = torch.randn(2, M, K, requires_grad=True)
unfused = lambda x: gated.down_proj(torch.nn.functional.silu(gated.gate_proj(x)) * gated.up_proj(x))
y = gated(x)
report("GatedMLP output", y, unfused(x), 1e-5)
grads = torch.autograd.grad(y.square().sum(), [x, *gated.parameters()])
wants = torch.autograd.grad(unfused(x).square().sum(), [x, *gated.parameters()])
for what, got, want in zip(("x", "gate", "up", "down"), grads, wants):
    report(f"GatedMLP grad {what}", got, want, 1e-5)
report("GatedMLP eval", gated.eval()(x), unfused(x), 1e-5)
gated.train()
# Its gate and up program run by itself, saving its accumulator, with
# gradients enabled (what bench/training.py times): the forward runs (no
# backward with the GEMM recomputed is looked for); its own backward, which
# only the down projection's dgrad GEMM can carry, is refused by name.
stacked = gated._programs(False)[2].detach().requires_grad_()
xs = x.detach().reshape(-1, K).requires_grad_()
h, saved_acc = run(gated._up.key, "saving", xs, stacked, [], "", [], "",
                   torch.zeros((), dtype=torch.int64))
report("GatedMLP's gate and up program, saving", h,
       torch.nn.functional.silu(xs @ gated.gate_proj.weight.T) * (xs @ gated.up_proj.weight.T), 1e-5)
expect_error("the gate and up program's own backward", lambda: h.sum().backward(), CodaError,
             lambda text: "cannot be differentiated from its saved accumulator: output 'output' "
                          "spans [m, n/2]" in text,
             "message for a gated program's own backward")
compiled = torch.compile(gated, fullgraph=True, backend="aot_eager")
xc = x.detach().clone().requires_grad_()
compiled(xc).square().sum().backward()
report("compiled GatedMLP grad x", xc.grad, wants[0], 1e-5)

# The output projection in float64, with dropout (its epilogue gradient a
# kernel) and without (none: see below).
x = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
r = torch.randn(M, N, dtype=torch.float64, requires_grad=True)
for p in (0.2, 0.0):
    proj = coda.nn.OutProjection(K, N, dropout=p, dtype=torch.float64)
    ok = torch.autograd.gradcheck(lambda x, r, w, b: run(
        proj.family.key, "", x, w, [b, r], "bias,residual", [], "", torch.tensor(5))[0],
        (x, r, proj.weight, proj.bias), raise_exception=False)
    print(f"OutProjection p={p}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(f"OutProjection p={p}")

# What the derivation finds the backward's outputs to be: without dropout the
# output projection's grad_acc and grad_residual are grad_output and its
# grad_bias grad_output's column sum, so its backward launches nothing; with
# dropout (before the residual), or with an activation, grad_acc and
# grad_bias are computed. Counted by the programs the autograd runs.
def sources(program):
    return [(o["name"], o["source"], program.arguments[o["source_argument"]]["name"]
             if o["source"] != "computed" else None) for o in program.outputs]


for p, want in ((0.0, [("grad_acc", "argument", "grad_output"),
                       ("grad_bias", "column_sum", "grad_output"),
                       ("grad_residual", "argument", "grad_output")]),
                (0.2, [("grad_acc", "computed", None), ("grad_bias", "computed", None),
                       ("grad_residual", "argument", "grad_output")])):
    family = coda.nn.OutProjection(K, N, dropout=p).family
    got = sources(family.program("backward", torch.device("cpu"), torch.float32))
    print(f"OutProjection p={p} backward outputs: {got}")
    if got != want:
        failures.append(f"OutProjection p={p} backward outputs")
gelu = ProgramFamily("EPILOGUE g(bias: f32[N]) {\n  output = gelu(input + bias);\n}\n")
got = sources(gelu.program("backward", torch.device("cpu"), torch.float32))
print(f"gelu backward outputs: {got}")
if got != [("grad_acc", "computed", None), ("grad_bias", "computed", None)]:
    failures.append("gelu backward outputs")
# A gradient written in another type than the one given is a conversion:
# computed (an f32 residual's gradient, the output's gradient in bf16).
mixed = ProgramFamily("EPILOGUE w(residual: f32[M, N]) {\n  output = input + residual;\n}\n")
got = sources(mixed.program("backward", torch.device("cpu"), torch.bfloat16))
print(f"bf16 output + f32 residual backward outputs: {got}")
if got != [("grad_acc", "argument", "grad_output"), ("grad_residual", "computed", None)]:
    failures.append("mixed-type backward outputs")

launched = []
real_run = coda.autograd._run


def counting_run(key, derive, *args):
    launched.append(derive)
    return real_run(key, derive, *args)


coda.autograd._run = counting_run
proj(x, residual=r).backward(torch.randn(M, N, dtype=torch.float64))  # p = 0
coda.autograd._run = real_run
print(f"OutProjection p=0 programs run: {launched}")
if launched != ["", "grad_a", "grad_b"]:
    failures.append("OutProjection p=0 programs run")


def unfused_mlp(module, x, residual, keep, output_keep=1):
    """The MLP's math in PyTorch, coda's dropout masks `keep` (after the
    activation) and `output_keep` (after fc2) applied, with their scale,
    65536 / (65536 - t)."""
    pre = x @ module.fc1.weight.T + module.fc1.bias
    h = torch.nn.functional.gelu(pre, approximate="tanh")
    scale = 65536 / (65536 - dropout_threshold(module.p))
    y = (h * keep * scale) @ module.fc2.weight.T + module.fc2.bias
    if module.output_p:
        y = y * output_keep * 65536 / (65536 - dropout_threshold(module.output_p))
    return y + residual


# The MLP module in float32 against PyTorch autograd, its seed drawn as
# F.dropout's (the same draw regenerates the mask).
module = coda.nn.MLP(K, H, D, dropout=0.3)
x = torch.randn(2, M, K, requires_grad=True)
r = torch.randn(2, M, D, requires_grad=True)
torch.manual_seed(11)
y = module(x, residual=r)
torch.manual_seed(11)
seed = int(draw_seed("cpu"))
keep = torch.from_numpy(dropout_mask(seed, (2 * M, H), module.p)).reshape(2, M, H)
g = torch.randn_like(y)
y.backward(g)
copy = coda.nn.MLP(K, H, D, dropout=0.3)
copy.load_state_dict(module.state_dict())
xr, rr = x.detach().clone().requires_grad_(), r.detach().clone().requires_grad_()
yr = unfused_mlp(copy, xr, rr, keep)
yr.backward(g)
report("MLP output", y, yr, 1e-5)
report("MLP grad x", x.grad, xr.grad, 1e-5)
report("MLP grad residual", r.grad, rr.grad, 1e-6)
for name, p in module.named_parameters():
    report(f"MLP grad {name}", p.grad, dict(copy.named_parameters())[name].grad, 1e-5)
assert list(module.state_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]

# With a dropout after fc2 too: a second seed, drawn after the first.
dropped = coda.nn.MLP(K, H, D, dropout=0.3, output_dropout=0.2)
xo, ro = x.detach().clone().requires_grad_(), r.detach().clone().requires_grad_()
torch.manual_seed(12)
yo = dropped(xo, residual=ro)
torch.manual_seed(12)
seeds = int(draw_seed("cpu")), int(draw_seed("cpu"))
keeps = [torch.from_numpy(dropout_mask(s, (2 * M, n), p)).reshape(2, M, n)
         for s, n, p in zip(seeds, (H, D), (dropped.p, dropped.output_p))]
yo.backward(g)
copy = coda.nn.MLP(K, H, D, dropout=0.3, output_dropout=0.2)
copy.load_state_dict(dropped.state_dict())
xr, rr = x.detach().clone().requires_grad_(), r.detach().clone().requires_grad_()
yr = unfused_mlp(copy, xr, rr, *keeps)
yr.backward(g)
report("MLP output dropout: output", yo, yr, 1e-5)
report("MLP output dropout: grad x", xo.grad, xr.grad, 1e-5)
report("MLP output dropout: grad residual", ro.grad, rr.grad, 1e-6)
for name, p in dropped.named_parameters():
    report(f"MLP output dropout: grad {name}", p.grad, dict(copy.named_parameters())[name].grad,
           1e-5)

# Eval mode: dropout is the identity, as nn.Dropout's.
module.eval()
with torch.no_grad():
    report("MLP eval", module(x, residual=r), unfused_mlp(module, x, r, 1 - dropout_threshold(module.p) / 65536), 1e-5)
    dropped.eval()
    report("MLP output dropout eval", dropped(x, residual=r),
           unfused_mlp(dropped, x, r, 1 - dropout_threshold(dropped.p) / 65536,
                       1 - dropout_threshold(dropped.output_p) / 65536), 1e-5)
    proj = coda.nn.OutProjection(K, N, dropout=0.2).eval()
    rp = torch.randn(M, N)
    report("OutProjection eval", proj(x[0], residual=rp),
           x[0] @ proj.weight.T + proj.bias + rp, 1e-5)
module.train()

# torch.compile(fullgraph=True): no graph break, forward and backward as in
# eager mode (the seed drawn inside the graph).
compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
for run_mode in ("eager", "compiled"):
    module.zero_grad()
    xc = x.detach().clone().requires_grad_()
    torch.manual_seed(3)
    yc = (compiled if run_mode == "compiled" else module)(xc, residual=r.detach())
    yc.backward(g)
    if run_mode == "eager":
        y_eager, gx_eager, gw_eager = yc.detach(), xc.grad, module.fc1.weight.grad.clone()
report("compiled MLP output", yc, y_eager, 1e-6)
report("compiled MLP grad x", xc.grad, gx_eager, 1e-6)
report("compiled MLP grad fc1.weight", module.fc1.weight.grad, gw_eager, 1e-6)
# The output projection with dropout, and without (its backward traced
# without the epilogue gradient's program).
for p in (0.2, 0.0):
    proj = coda.nn.OutProjection(K, N, dropout=p)
    compiled = torch.compile(proj, fullgraph=True, backend="aot_eager")
    results = []
    for module in (proj, compiled):
        xc = x[0].detach().clone().requires_grad_()
        rc = rp.detach().clone().requires_grad_()
        torch.manual_seed(4)
        yc = module(xc, residual=rc)
        yc.backward(torch.ones_like(yc))
        results.append((yc.detach(), xc.grad, rc.grad, proj.bias.grad.clone()))
        proj.zero_grad()
    for i, what in enumerate(("output", "grad x", "grad residual", "grad bias")):
        report(f"compiled OutProjection p={p} {what}", results[1][i], results[0][i], 1e-6)


# A program whose epilogue has no derivative is refused with the op named.
family = ProgramFamily("""
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %1 = math.atan %acc : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x?xf32>
}
""")
a = torch.randn(M, K, dtype=torch.float64, requires_grad=True)
b = torch.randn(N, K, dtype=torch.float64)
out = run(family.key, "", a, b, [], "", [], "", torch.tensor(0))[0]
expect_error("math.atan", lambda: out.sum().backward(), CodaError,
             lambda text: "'math.atan' op has no derivative" in text, "message for math.atan")

# An activation that is none.
expect_error("activation='swish'", lambda: coda.nn.GatedMLP(8, 16, activation="swish"),
             ValueError,
             lambda text: text.startswith("unknown activation 'swish'; expected one of gelu"),
             "message for an unknown activation")

# A weight layout that is none.
expect_error("weight_layout='mn'", lambda: coda.nn.MLP(8, 16, weight_layout="mn"), ValueError,
             lambda text: text == ("unknown weight_layout 'mn'; expected nk (nn.Linear's "
                                   "[out, in]) or kn ([in, out], as Conv1D)"),
             "message for an unknown weight layout")

# The backward from a saved accumulator of programs it cannot serve: an
# output of the even columns (its gradient is N / 2 wide), a loss over rows.
for example, message in (
        ("swiglu", "output 'output' spans [m, n/2]"),
        ("cross_entropy", "a loss over rows (only [m] and [n] outputs) recomputes its GEMM")):
    source = open(os.path.join(sys.argv[1], "examples", example + ".coda")).read()
    expect_error(f"backward_from_saved of {example}",
                 lambda: ReferenceProgram(source, dtype="f32", derive="backward_from_saved"),
                 CodaError,
                 lambda text: ("cannot be differentiated from its saved accumulator: "
                               + message) in text,
                 f"message for backward_from_saved of {example}")

# A derived program's name that names none.
expect_error("derive='backward_saved_kn'",
             lambda: ReferenceProgram("EPILOGUE { output = input; }", dtype="f32",
                                      derive="backward_saved_kn"), CodaError,
             lambda text: ("unknown derived program 'backward_saved_kn'; expected backward, "
                           "saving, backward_saved, backward_saved_nk, backward_from_saved, "
                           "grad_a, grad_b, inference, row_statistics or row_apply") in text,
             "message for an unknown derived program")

print(f"{len(failures)} failed: {failures}" if failures else "all passed")
sys.exit(1 if failures else 0)
