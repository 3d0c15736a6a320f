# REQUIRES: torch
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src
#
# coda.nn.linear_cross_entropy on the CPU reference: an LM head's
# cross-entropy whose program writes the rows' log-sum-exp and class logit
# and the logits' gradient, from which its backward runs two GEMMs, and a row
# loss of the same statistics whose backward coda derives: gradcheck in float64
# over ragged shapes with ignored rows, the loss and gradients in float32
# against F.cross_entropy(x W^T), every reduction, soft-capped logits, a batch of sequences,
# torch.compile(fullgraph=True), and the errors a user sees.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks
import torch.nn.functional as F

import coda.autograd
import coda.nn
from coda import CodaError
from coda.autograd import ProgramFamily, run

failures = []


def expect(what, ok):
    print(f"{what}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(what)


def close(what, got, want, tolerance):
    error = ((got.double() - want.double()).norm() / want.double().norm()).item()
    expect(f"{what} (relative error {error:.1e})", error < tolerance)


torch.manual_seed(0)
for m, k, v, ignored in ((1, 3, 2, 0), (37, 24, 53, 2), (20, 9, 130, 19)):
    x = torch.randn(m, k, dtype=torch.float64, requires_grad=True)
    w = torch.randn(v, k, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, v, (m,))
    target[:ignored] = -100
    for reduction in ("mean", "sum", "none"):
        got = coda.nn.linear_cross_entropy(x, w, target, reduction=reduction)
        want = F.cross_entropy(x @ w.T, target, reduction=reduction)
        expect(f"{m}x{k} -> {v} {reduction}: float64 loss",
               got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12, atol=1e-12))
        expect(f"{m}x{k} -> {v} {reduction}: gradcheck",
               torch.autograd.gradcheck(
                   lambda x, w: coda.nn.linear_cross_entropy(x, w, target, reduction=reduction),
                   (x, w)))
    b = torch.randn(v, dtype=torch.float64, requires_grad=True)
    got = coda.nn.linear_cross_entropy(x, w, target, bias=b)
    want = F.cross_entropy(F.linear(x, w, b), target)
    expect(f"{m}x{k} -> {v} with a bias: float64 loss",
           torch.allclose(got, want, rtol=1e-12, atol=1e-12))
    expect(f"{m}x{k} -> {v} with a bias: gradcheck",
           torch.autograd.gradcheck(
               lambda x, w, b: coda.nn.linear_cross_entropy(x, w, target, bias=b), (x, w, b)))

# Soft-capped logits (Gemma 2's: c tanh(logits / c)), with and without a
# bias, over vocabularies padded (the pad's offset after the cap) or not;
# c = 4, whose inverse (an f32 scalar of the program) is exact.
for m, k, v, with_bias in ((37, 24, 53, False), (20, 9, 130, True), (5, 8, 15, True)):
    x = torch.randn(m, k, dtype=torch.float64, requires_grad=True)
    w = torch.randn(v, k, dtype=torch.float64, requires_grad=True)
    b = torch.randn(v, dtype=torch.float64, requires_grad=True) if with_bias else None
    target = torch.randint(0, v, (m,))
    target[:2] = -100
    got = coda.nn.linear_cross_entropy(x, w, target, bias=b, softcap=4.0)
    want = F.cross_entropy(4.0 * torch.tanh(F.linear(x, w, b) / 4.0), target)
    what = f"{m}x{k} -> {v}{' with a bias' if with_bias else ''} soft-capped"
    expect(f"{what}: float64 loss", torch.allclose(got, want, rtol=1e-12, atol=1e-12))
    expect(f"{what}: gradcheck", torch.autograd.gradcheck(
        lambda *args: coda.nn.linear_cross_entropy(args[0], args[1], target, softcap=4.0,
                                                   bias=args[2] if with_bias else None),
        (x, w, b) if with_bias else (x, w)))

# float32, a batch of sequences, a custom ignore_index.
x = torch.randn(2, 5, 16, requires_grad=True)
w = torch.randn(40, 16, requires_grad=True)
target = torch.randint(0, 40, (2, 5))
target[1, 4] = 7
loss = coda.nn.linear_cross_entropy(x, w, target, ignore_index=7)
loss.backward()
x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
want = F.cross_entropy((x2 @ w2.T).reshape(-1, 40), target.reshape(-1), ignore_index=7)
want.backward()
want_mean = want.item()
expect("float32 loss", loss.dtype == torch.float32 and abs(loss.item() - want_mean) < 1e-5)
close("float32 grad x", x.grad, x2.grad, 1e-5)
close("float32 grad weight", w.grad, w2.grad, 1e-5)
# A bias in bf16, as a model's parameters: its gradient in bf16 too.
b6 = torch.randn(40, dtype=torch.bfloat16, requires_grad=True)
x6, w6 = x.detach().bfloat16().requires_grad_(), w.detach().bfloat16().requires_grad_()
loss = coda.nn.linear_cross_entropy(x6, w6, target, ignore_index=7, bias=b6)
loss.backward()
b7 = b6.detach().double().requires_grad_()
want = F.cross_entropy(F.linear(x6.detach().double(), w6.detach().double(), b7).reshape(-1, 40),
                       target.reshape(-1), ignore_index=7)
want.backward()
expect("bf16 with a bias: the loss", abs(loss.item() - want.item()) < 1e-3 * abs(want.item()))
expect("bf16 with a bias: the bias's gradient in bf16", b6.grad.dtype == torch.bfloat16)
close("bf16 with a bias: grad bias", b6.grad, b7.grad, 1e-2)
per_row = coda.nn.linear_cross_entropy(x, w, target, ignore_index=7, reduction="none")
want = F.cross_entropy((x2 @ w2.T).reshape(-1, 40), target.reshape(-1), ignore_index=7,
                       reduction="none")
expect("per-row loss has the target's shape, 0 where ignored",
       per_row.shape == target.shape and per_row[1, 4].item() == 0.0
       and torch.allclose(per_row.reshape(-1), want, rtol=1e-5, atol=1e-5))

# Under torch.autocast the head runs in its type (bf16 here), as F.linear
# does: the same loss as the autocast eager model's, within bf16 rounding.
x5, w5 = x.detach().requires_grad_(), w.detach().requires_grad_()
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = coda.nn.linear_cross_entropy(x5, w5, target, ignore_index=7)
    eager = F.cross_entropy(F.linear(x5, w5).float().reshape(-1, 40), target.reshape(-1),
                            ignore_index=7)
loss.backward()
expect("autocast: the loss of bf16 operands", abs(loss.item() - eager.item()) < 2e-2 * abs(eager.item())
       and x5.grad.dtype == torch.float32 and w5.grad.dtype == torch.float32)

# Under torch.compile(fullgraph=True): the custom op traced, forward and
# backward.
x3, w3 = x.detach().requires_grad_(), w.detach().requires_grad_()
compiled = torch.compile(lambda x, w, t: coda.nn.linear_cross_entropy(x, w, t, ignore_index=7),
                         fullgraph=True)
loss = compiled(x3, w3, target)
loss.backward()
expect("torch.compile loss", abs(loss.item() - want_mean) < 1e-5)
close("torch.compile grad x", x3.grad, x2.grad, 1e-5)
close("torch.compile grad weight", w3.grad, w2.grad, 1e-5)

# The errors a user sees.
try:
    coda.nn.linear_cross_entropy(x, w, target, reduction="max")
    expect("an unknown reduction is refused", False)
except ValueError as error:
    expect("an unknown reduction is refused", "reduction must be" in str(error))
try:
    coda.nn.linear_cross_entropy(x, w, target.reshape(-1))
    expect("a target of the wrong shape is refused", False)
except ValueError as error:
    expect("a target of the wrong shape is refused", "expected x's without its last" in str(error))
try:
    coda.nn.linear_cross_entropy(x, w, torch.full((2, 5), 40))
    expect("a class out of range is refused", False)
except ValueError as error:
    expect("a class out of range is refused", "outside [0, 40)" in str(error))
try:
    coda.nn.linear_cross_entropy(x, w, target, bias=torch.zeros(41))
    expect("a bias of the wrong shape is refused", False)
except ValueError as error:
    expect("a bias of the wrong shape is refused", "expected [40], one per class" in str(error))
for softcap in (0, -1.0, "30"):
    try:
        coda.nn.linear_cross_entropy(x, w, target, softcap=softcap)
        expect(f"softcap {softcap!r} is refused", False)
    except ValueError as error:
        expect(f"softcap {softcap!r} is refused", "softcap must be a number above 0" in str(error))
# Trained through its forward rather than its saving program, a loss over
# rows says what to run; the saving program of any other program trains from
# its saved accumulator (backward_from_saved), as its forward does with the
# GEMM recomputed.
family = ProgramFamily(
    "EPILOGUE row_loss(target: f32[M]) -> (lse: f32[M], picked: f32[M]) {\n"
    "  shift = detach(row_max(input));\n"
    "  lse = shift + log(row_sum(exp(input - shift)));\n"
    "  picked = row_sum(input * max(0, 1 - abs(col() - detach(target))));\n}\n")
x4, w4 = torch.randn(3, 16, requires_grad=True), torch.randn(40, 16, requires_grad=True)
lse, picked = run(family.key, "", x4, w4, [torch.zeros(3)], "target", [], "",
                  torch.zeros((), dtype=torch.int64))
try:
    (lse - picked).sum().backward()
    expect("a loss over rows trained through its forward is refused", False)
except CodaError as error:
    expect("a loss over rows trained through its forward is refused",
           "run the program 'saving'" in str(error))
gelu = ProgramFamily("EPILOGUE up(bias: f32[N]) {\n  output = gelu(input + bias);\n}\n")
grads, b4 = {}, torch.randn(40)
for derive in ("saving", ""):
    x5, w5, b5 = (t.detach().double().requires_grad_() for t in (x4, w4, b4))
    h, *_ = run(gelu.key, derive, x5, w5, [b5], "bias", [], "",
                torch.zeros((), dtype=torch.int64))
    (h * torch.linspace(-1, 1, h.numel(), dtype=torch.float64).view_as(h)).sum().backward()
    grads[derive] = [x5.grad, w5.grad, b5.grad]
expect("a saved accumulator's saving program trains as its forward does",
       all(torch.allclose(g, r, rtol=1e-12, atol=0) for g, r in zip(grads["saving"], grads[""])))
# A loss over rows that reads no row statistic has no saving program.
plain = ProgramFamily("EPILOGUE rows(t: f32[M]) -> (out: f32[M]) {\n  out = t * 2;\n}\n")
try:
    run(plain.key, "saving", torch.randn(3, 4), torch.randn(5, 4), [torch.randn(3)], "t", [], "",
        torch.zeros((), dtype=torch.int64))
    expect("a row loss without row statistics has no saving program", False)
except CodaError as error:
    expect("a row loss without row statistics has no saving program",
           "has no saving program" in str(error))

# A vocabulary padded to rows of 16 bytes (1001 classes of f32: 1004) holds
# no padded copy of the weight (4 MiB) from the forward to the backward: it
# is made again there, and the weight's gradient is the unpadded one's.
w6 = torch.randn(1001, 1024, requires_grad=True)
x6 = torch.randn(4, 1024, requires_grad=True)
t6 = torch.randint(0, 1001, (4,))
loss6, held = checks.held_after(lambda: coda.nn.linear_cross_entropy(x6, w6, t6))
expect(f"a padded vocabulary's weight not held ({held} bytes)", held < 2**20)
got6 = torch.autograd.grad(loss6, (x6, w6))
# Against float64: in float32 these logits (of magnitude ~30) round by
# ~4e-6, which an elementwise comparison with PyTorch's float32 gradient
# flagged on small entries.
x64, w64 = (t.detach().double().requires_grad_() for t in (x6, w6))
want6 = torch.autograd.grad(F.cross_entropy(x64 @ w64.t(), t6), (x64, w64))
for what, g, w in zip(("x", "weight"), got6, want6):
    close(f"a padded vocabulary's gradient of {what} ({tuple(g.shape)})", g, w, 1e-5)

# In f16 the logits are rounded as F.linear writes them, the padded classes'
# too: their logit stays finite (a pad of -1e30 became -inf there, and its
# product with the one-hot zero NaN), with and without a bias.
w8 = torch.randn(1001, 64, dtype=torch.float16)
x8 = torch.randn(4, 64, dtype=torch.float16)
b8 = torch.randn(1001, dtype=torch.float16)
t8 = torch.randint(0, 1001, (4,))
for what, bias in ("", None), (" with a bias", b8):
    got8 = coda.nn.linear_cross_entropy(x8, w8, t8, bias=bias)
    want8 = F.cross_entropy(F.linear(x8.float(), w8.float(), None if bias is None else bias.float())
                            .half().float(), t8)
    close(f"an f16 padded vocabulary's loss{what}", got8.float(), want8, 1e-3)

# Where no gradient is asked for (a validation pass under torch.no_grad, or
# frozen weights), the loss's program writes no logits' gradient: the same
# losses from a program whose outputs are the rows' statistics alone.
programs = []
real_run = coda.autograd._run


def recording_run(key, derive, a, *rest):
    programs.append(coda.autograd._families[key].program(derive, a.device, a.dtype))
    return real_run(key, derive, a, *rest)


coda.autograd._run = recording_run
w9 = torch.randn(1004, 64, requires_grad=True)  # rows of 4016 bytes: not padded
cases = (("", x6[:, :64].detach(), w9, t6.clamp(max=1003), None),
         (" (a padded vocabulary)", x6, w6, t6, None),
         (" (with a bias)", x8, w8, t8, b8.clone().requires_grad_()))
for what, xs, ws, ts, bias in cases:
    programs.clear()
    want9 = coda.nn.linear_cross_entropy(xs, ws, ts, bias=bias)
    trained = [[o["name"] for o in p.outputs] for p in programs]
    programs.clear()
    with torch.no_grad():
        got9 = coda.nn.linear_cross_entropy(xs, ws, ts, bias=bias)
    outputs = [[o["name"] for o in p.outputs] for p in programs]
    expect(f"no gradient asked{what}: the rows' statistics alone ({outputs}, in training "
           f"{trained})", outputs == [["lse", "picked"]] and trained == [["lse", "picked", "grad"]]
           and torch.equal(got9, want9.detach()))
coda.autograd._run = real_run

# Under inference mode first (a validation pass), then in training: the
# padded vocabulary's offset and the seed of a program without dropout, made
# once and kept, are not inference tensors that autograd refuses to save.
w7 = torch.randn(53, 16, requires_grad=True)
x7 = torch.randn(4, 16, requires_grad=True)
t7 = torch.randint(0, 53, (4,))
with torch.inference_mode():
    coda.nn.linear_cross_entropy(x7, w7, t7)
try:
    torch.autograd.grad(coda.nn.linear_cross_entropy(x7, w7, t7), (x7, w7))
    expect("inference mode, then training", True)
except RuntimeError as error:
    expect(f"inference mode, then training ({error})", False)

if failures:
    print("FAILED:", ", ".join(failures))
    sys.exit(1)
print("all passed")
