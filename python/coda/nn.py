"""coda modules: layers a model uses directly, trained through coda's
derived backward programs (coda.autograd).

- ``Linear(in_features, out_features, epilogue=DSL)``: nn.Linear with any
  epilogue;
- ``MLP(in_features, hidden_features)``: fc1 + activation + dropout, fc2 +
  bias (+ dropout) + residual, two kernels forward and four backward (five
  with fc2's dropout), fc1's epilogue gradient riding on fc2's dgrad GEMM;
- ``OutProjection(in_features, out_features, dropout)``: an attention output
  projection, dropout(x W^T + b) + residual, in one kernel;
- ``GatedMLP(in_features, hidden_features)``: LLaMA's MLP, down(silu(gate(x))
  * up(x)), the gate and up projections one GEMM with the gated activation
  in its epilogue, its gradient on the down projection's dgrad GEMM;
- ``linear_cross_entropy(x, weight, target)``: an LM head's cross-entropy
  from its GEMM, the loss's row statistics and the logits' gradient in the
  epilogue, no logits kept;
- ``RMSNormRotaryQKV(width, heads)``: a LLaMA attention's input, RMSNorm,
  the Q, K and V projections and the rotary embedding in one kernel, the
  norm folded into the product;
- ``ResidualNormMLP(in_features, width, hidden_features, norm=...)``: the
  second half of a pre-norm Transformer block, the attention output
  projection, its residual and LayerNorm or RMSNorm in one kernel, then an
  MLP or GatedMLP with the residual in its second, the norm's backward on
  fc1's dgrad GEMM.

Parameters and state dicts are nn.Linear's. In eval mode a program with
dropout runs its inference form (dropout the identity).
"""

import contextlib
import math

from .runtime import _require_torch

torch = _require_torch("coda.nn")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from . import autograd  # noqa: E402
from .autograd import (ProgramFamily, _autocast, _operand_gradient, down_inputs,  # noqa: E402
                       draw_seed, mlp, run, tail)

_PLAIN = "EPILOGUE linear(bias: f32[N]) {\n  output = input + bias;\n}\n"
# The activations of coda's MLPs: each one's DSL expression of its input x.
# The DSL's own functions, and QuickGELU (CLIP's: x sigmoid(1.702 x)).
_ACTIVATIONS = {name: name + "({x})" for name in
                ("gelu", "gelu_erf", "relu", "silu", "sigmoid", "tanh")}
_ACTIVATIONS["quick_gelu"] = "{x} * sigmoid(1.702 * {x})"


def _activated(activation, x):
    """The DSL expression of `activation` (an _ACTIVATIONS name) applied to
    the DSL expression `x`."""
    return _ACTIVATIONS[activation].replace("{x}", x if x.isidentifier() else f"({x})")


def _reset_linear(weight, bias, in_features):
    """nn.Linear's initialization."""
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(in_features) if in_features else 0
        nn.init.uniform_(bias, -bound, bound)


def _check_layout(weight_layout):
    if weight_layout not in ("nk", "kn"):
        raise ValueError(f"unknown weight_layout '{weight_layout}'; expected nk "
                         "(nn.Linear's [out, in]) or kn ([in, out], as Conv1D)")


def _width(linear, weight_layout, side):
    """The in (side 0) or out (side 1) features of `linear`, from its weight
    as `weight_layout` stores it."""
    return linear.weight.shape[side if weight_layout == "kn" else 1 - side]


def _check_dropout(p):
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")


class Linear(nn.Module):
    """y = epilogue(x W^T, inputs): nn.Linear's parameters (`weight`
    [out_features, in_features], `bias` [out_features] when the epilogue
    declares an input named `bias`, as nn.Linear initializes them), and any
    epilogue in the DSL (or a function of the operand type's name that
    returns it). Other epilogue inputs are keyword arguments of forward; a
    program with dropout draws its seed from PyTorch's generator of the
    input's device at each call, as F.dropout (or takes `seed=`, an int64
    tensor of one element). Returns the output `output`, or a dict when the
    program has several outputs. weight_layout="kn" stores `weight` [in,
    out] (Hugging Face's Conv1D) and multiplies by it as it is stored."""

    def __init__(self, in_features, out_features, epilogue=_PLAIN, device=None, dtype=None,
                 weight_layout="nk"):
        super().__init__()
        _check_layout(weight_layout)
        self.in_features, self.out_features = in_features, out_features
        self.weight_layout = weight_layout
        self.family = ProgramFamily(epilogue, layout_b=weight_layout)
        shape = (out_features, in_features) if weight_layout == "nk" else (in_features,
                                                                          out_features)
        self.weight = nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
        self._inputs = self.family.inputs()
        self._outputs = [output["name"] for output in self.family.describe().outputs]
        self._dropout = self.family.has_dropout()
        if any(arg["name"] == "bias" for arg in self._inputs):
            self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight_layout == "nk":
            _reset_linear(self.weight, self.bias, self.in_features)
            return
        # nn.Linear's initialization of the transposed weight.
        with torch.no_grad():
            weight = torch.empty(self.out_features, self.in_features, device=self.weight.device,
                                 dtype=self.weight.dtype)
            _reset_linear(weight, self.bias, self.in_features)
            self.weight.copy_(weight.t())

    def forward(self, x, seed=None, **inputs):
        return self._forward(self.weight, self.bias, x, seed, inputs)

    def _forward(self, weight, bias, x, seed, inputs):
        """forward with `weight` and `bias` in place of the module's own
        (coda.patch passes the patched model's parameters as they are at the
        call: a distributed engine such as FSDP2 swaps them)."""
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        tensors, names, scalars, scalar_names = [], [], [], []
        for arg in self._inputs:
            name = arg["name"]
            if name == "bias" and bias is not None:
                value = bias
            elif name in inputs:
                value = inputs.pop(name)
            else:
                raise TypeError(f"missing epilogue input '{name}'")
            if arg["tensor"]:
                # [M, N] (or [M, N % p]): the leading dims folded into M.
                tensors.append(value.reshape(-1, value.shape[-1]) if arg["dims"] == 3
                               else value)
                names.append(name)
            else:
                scalars.append(float(value))
                scalar_names.append(name)
        if inputs:
            raise TypeError(f"unexpected epilogue inputs {sorted(inputs)}")
        derive = "inference" if self._dropout and not self.training else ""
        if seed is None:
            seed = draw_seed(x.device) if self._dropout and self.training else _no_seed(x)
        outputs = run(self.family.key, derive, x2.contiguous(), weight, tensors,
                      ",".join(names), scalars, ",".join(scalar_names), seed)
        results = {}
        for name, value in zip(self._outputs, outputs):
            results[name] = value.reshape(*lead, -1) if value.dim() == 2 else value
        return results["output"] if list(results) == ["output"] else results

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}"
                + (f", weight_layout={self.weight_layout}" if self.weight_layout != "nk" else ""))


class _Remade:
    """A tensor saved for the backward as the way to make it (_remade): the
    function that makes it, the parameters it is made of and their
    versions when it was saved, and its type (torch.autocast's, where the
    forward cast it), which what `make` makes is converted to."""

    def __init__(self, make, sources, dtype):
        self.make, self.sources, self.dtype = make, sources, dtype
        self.versions = _versions(sources)

    def __call__(self):
        _check_versions(self.sources, self.versions)
        with torch.no_grad():
            return self.make().to(self.dtype)


def _versions(sources):
    return [source._version for source in sources]


def _check_versions(sources, versions):
    """Raises where one of `sources` (weights a stacked weight is made of)
    changed since `versions` (_versions) were taken at the forward."""
    if _versions(sources) != versions:
        raise RuntimeError(
            "a weight was modified in place between the forward and the backward: the "
            "stacked weight that coda makes again for the backward would not be the "
            "forward's (update parameters after the backward, as optimizers do)")


@contextlib.contextmanager
def _remade():
    """Saved-tensor hooks under which the autograd functions called in the
    context save each tensor registered by `remade(tensor, make, sources)`
    (a GEMM operand `make()` makes from the parameters `sources`: their
    weights stacked, or scaled by a norm's weight; in the tensor's type, to
    which it is converted) as the way to make it,
    made again in the backward rather than held from the forward to the
    backward: a copy of the weights per layer (a third of a LLaMA-7B
    layer's activations at 4096 tokens). A source modified in place in
    between is an error, as for a saved tensor. Not under torch.compile
    (its partitioner chooses what to save and recompute), nor inside other
    saved-tensor hooks (activation checkpointing's: nothing of the forward
    is held there)."""
    recipes = {}

    def remade(tensor, make, sources):
        recipes[id(tensor)] = tensor, _Remade(make, sources, tensor.dtype)

    if (torch.compiler.is_compiling() or not torch.is_grad_enabled()
            or torch._C._autograd._top_saved_tensors_default_hooks(False) is not None):
        yield lambda *args: None
        return

    def pack(tensor):
        entry = recipes.get(id(tensor))
        return entry[1] if entry is not None and entry[0] is tensor else tensor

    def unpack(saved):
        return saved() if isinstance(saved, _Remade) else saved

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield remade
    finally:
        # The hooks stay with what they saved: the tensors themselves go.
        recipes.clear()


def _made_once(cache, key, make):
    """make(), a constant, kept in `cache` under `key` and made once; but
    made anew without being kept under torch.compile (a traced tensor
    belongs to its trace) and in inference mode (an inference tensor cannot
    be saved for a later backward)."""
    keep = not torch.compiler.is_compiling() and not torch.is_inference_mode_enabled()
    value = cache.get(key) if keep else None
    if value is None:
        value = make()
        if keep:
            cache[key] = value
    return value


_no_seeds = {}


def _no_seed(x):
    """The seed of a program that draws no mask (never read): one tensor per
    device (_made_once)."""
    return _made_once(_no_seeds, x.device,
                      lambda: torch.zeros((), dtype=torch.int64, device=x.device))


def _cross_entropy_text(bias, offset=False, gradient=True, capped=False):
    """The row loss of linear_cross_entropy, for operands of type `t`: each
    row's log-sum-exp (shifted by its maximum), its target class's logit,
    and with `gradient` the logits' gradient for a unit loss, softmax -
    onehot; of the logits as F.linear writes them (in t, from which eager
    PyTorch computes its loss), with `bias` added along the row, or with
    `offset`, a constant one (_PADDED_LOGIT on the classes a vocabulary is
    padded with); `capped`, of the logits soft-capped, cap tanh(logits /
    cap) (Gemma 2's), whose gradient is then times 1 - tanh^2 (cap and its
    inverse scalars). The gradient needs each row's log-sum-exp in every
    element: on the GPU the program then runs as its row split (the GEMM
    writing the logits and the rows' statistics, then their application);
    without it, the rows' statistics are merged after the GEMM and nothing
    [M, N] is written."""
    inputs = "target: f32[M]" + (", bias: f32[N]" if bias else "") + (
        ", offset: f32[N]" if offset else "") + (", cap: f32, inv_cap: f32" if capped else "")
    # Under a cap, the offset comes after it (which would bound it).
    terms = "input" + (" + bias" if bias else "") + (
        " + offset" if offset and not capped else "")

    def text(t):
        logits = f"{t}({terms})" if t in ("bf16", "f16") else terms
        grad = "exp(logits - lse) - onehot"
        capping = ""
        if capped:
            capping = f"  bent = tanh(({logits}) * inv_cap);\n"
            logits = "cap * bent + offset" if offset else "cap * bent"
            grad = f"({grad}) * (1 - bent * bent)"
        outputs = "lse: f32[M], picked: f32[M]" + (f", grad: {t}[M, N]" if gradient else "")
        return (f"EPILOGUE cross_entropy({inputs})\n"
                f"    -> ({outputs}) {{\n"
                + capping +
                f"  logits = {logits};\n"
                "  shift = row_max(logits);\n"
                "  lse = shift + log(row_sum(exp(logits - shift)));\n"
                "  onehot = max(0, 1 - abs(col() - target));\n"
                "  picked = row_sum(logits * onehot);\n"
                + (f"  grad = {grad};\n" if gradient else "") + "}\n")

    return text


# By (bias, offset, capped, gradient): the loss to train through, or the
# loss alone (no gradient asked for: a validation pass). Registered at
# import (nothing compiles until a first call), so that torch.compile traces
# the op of a family that exists.
_CROSS_ENTROPY = {
    (bias, offset, capped, gradient): ProgramFamily(
        _cross_entropy_text(bias, offset, gradient, capped))
    for capped in (False, True)
    for bias, offset in ((False, False), (True, False), (False, True)) + ((True, True),) * capped
    for gradient in (True, False)}


class _LinearCrossEntropy(torch.autograd.Function):
    """Each row's loss, lse - picked, of family `key`'s program on x [M, K]
    and weight [V, K] and its inputs `tensors` (the bias among them, when
    given: `bias` is there for its gradient), whose logits' gradient for a
    unit loss, G [M, V], is saved; backward, with the rows' gradients dl:
    the gradient of x, dl * (G W), of the weight, G^T (dl * x), and of the
    bias, G^T dl: two GEMMs on G as the forward wrote it, no product
    recomputed. The programs run as `run` runs them: through the coda::run
    op under torch.compile, else called directly (less host time than the
    op's dispatch); this function records no autograd of its own inside."""

    @staticmethod
    def forward(ctx, key, x, weight, bias, tensors, names, scalars, scalar_names, seed):
        ctx.call = autograd._runner()
        lse, picked, grad = ctx.call(key, "", x, weight, tensors, names, scalars, scalar_names,
                                     seed)
        ctx.key = key
        ctx.save_for_backward(x, weight, bias, grad, seed)
        return lse - picked

    @staticmethod
    def backward(ctx, grad_rows):
        x, weight, bias, grad, seed = ctx.saved_tensors
        needs = ctx.needs_input_grad
        rows = grad_rows.unsqueeze(-1)
        grad_x = grad_weight = grad_bias = None
        if needs[1]:
            grad_x = _operand_gradient(ctx.call, ctx.key, "grad_a", grad, weight, seed)
            grad_x.mul_(rows)
        if needs[2]:
            scaled = torch.mul(x, rows, out=torch.empty_like(x))
            grad_weight = _operand_gradient(ctx.call, ctx.key, "grad_b", grad, scaled, seed)
        if needs[3]:
            grad_bias = (grad.t() @ grad_rows.to(grad.dtype)).to(bias.dtype)
        return None, grad_x, grad_weight, grad_bias, None, None, None, None, None


# The logit of a class a vocabulary is padded with: exp(-1e4 - max) is 0 in
# f32 wherever the row's largest logit is above -9900, and it times 0 (not
# the target) is 0, where -inf would give NaN; finite also where the logits
# are rounded to f16 (at most 65504 in magnitude), as F.linear writes them.
_PADDED_LOGIT = -1e4
_offsets = {}


def _padded_offset(classes, padded, like):
    """The offset of a vocabulary of `classes` padded to `padded`: 0, then
    _PADDED_LOGIT; f32, made on `like`'s device (no copy from the host), once
    per size (_made_once)."""
    def make():
        columns = torch.arange(padded, device=like.device)
        return torch.where(columns < classes, 0.0, _PADDED_LOGIT).to(torch.float32)

    return _made_once(_offsets, (classes, padded, like.device), make)


def linear_cross_entropy(x, weight, target, ignore_index=-100, reduction="mean", *, bias=None,
                         softcap=None):
    """F.cross_entropy(F.linear(x, weight, bias), target) in one GEMM whose
    epilogue reduces each row of logits (as F.linear writes them, in the
    operands' type) to its log-sum-exp (shifted by the row's maximum) and
    the target's logit, merged across the tiles of a row at any vocabulary
    size, and writes the logits' gradient for a unit loss, softmax - onehot
    (on the GPU, the program's row split: the GEMM writing the logits and
    the rows' statistics, then their application); the loss is their
    difference. The logits' gradient is held for the backward (what the
    forward writes instead of the logits), which runs the gradients of x
    and weight as two GEMMs on it, each row scaled by its loss's gradient,
    and no product again (with a bias, its gradient is the logits'
    gradient summed over the rows). A vocabulary whose rows of logits are
    not a multiple of 16 bytes is padded with classes that take no
    probability (so that the GEMMs read the logits' gradient where it is
    written). x [..., K], weight [V, K] (an LM head), bias [V] or None,
    target [...] class indices; rows whose target is `ignore_index` count
    for nothing. `reduction`: "mean" (over the rows that count), "sum" or
    "none". `softcap` c > 0: the loss of the logits soft-capped,
    c tanh(logits / c), as Gemma 2 computes its own. The loss is in float32 (float64 for float64 operands), as
    Hugging Face's models compute it from their logits; float32 CUDA
    operands run on the tensor cores as tf32, as coda's programs of f32
    operands do, and under torch.autocast the operands are cast to its
    type, as F.linear's."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if target.shape != x.shape[:-1]:
        raise ValueError(f"target has shape {tuple(target.shape)}; expected x's without its "
                         f"last dim, {tuple(x.shape[:-1])}")
    if softcap is not None and not (isinstance(softcap, (int, float)) and softcap > 0):
        raise ValueError(f"softcap must be a number above 0 (or None), got {softcap!r}")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ValueError(f"bias has shape {tuple(bias.shape)}; expected [{weight.shape[0]}], "
                         "one per class (weight's rows)")
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    target = target.reshape(-1).to(x.device)
    counts = target != ignore_index
    # As F.cross_entropy, a class out of range is an error (checked in eager
    # mode: under torch.compile it would stop the graph). On the GPU it is a
    # device-side assert, as F.cross_entropy's: reading the answer back
    # would make the host wait for the GPU at every step (and cannot be done
    # while a CUDA graph is captured).
    if not torch.compiler.is_compiling():
        outside = (counts & ((target < 0) | (target >= weight.shape[0]))).any()
        if target.is_cuda:
            torch._assert_async(~outside)
        elif outside:
            raise ValueError(f"target has a class outside [0, {weight.shape[0]}) that is not "
                             f"ignore_index ({ignore_index})")
    # A class index as f32 (exact below 2^24); -1 matches no column.
    classes = torch.where(counts, target, -1).to(torch.float32)
    # A vocabulary whose rows of logits are not a multiple of 16 bytes
    # (BERT's 30522, GPT-2's 50257) is padded with classes of logit
    # _PADDED_LOGIT, which take no probability and no gradient: the logits'
    # gradient that the backward writes is then read by its two GEMMs
    # where it is, not copied into rows 16 bytes apart for each.
    vocabulary, given = weight.shape[0], weight
    x2, weight = _autocast(x2, weight)
    padded = -(-vocabulary * weight.element_size() // 16) * 16 // weight.element_size()
    with _remade() as remade:
        if padded != vocabulary:
            # The padded copy (of the weight in autocast's type) is made
            # again in the backward, not held.
            weight = F.pad(weight, (0, 0, 0, padded - vocabulary))
            remade(weight, lambda: F.pad(given, (0, 0, 0, padded - vocabulary)), (given,))
            if bias is not None:
                # In f32 at least (the pad is not exact in a 16-bit type);
                # under a cap, 0, the offset after the cap doing the rest.
                bias = F.pad(bias.to(torch.promote_types(bias.dtype, torch.float32)),
                             (0, padded - vocabulary),
                             value=0.0 if softcap is not None else _PADDED_LOGIT)
        tensors, names = [classes], "target"
        offset = (bias is None or softcap is not None) and padded != vocabulary
        if bias is not None:
            tensors.append(bias)
            names += ",bias"
        if offset:
            tensors.append(_padded_offset(vocabulary, padded, x2))
            names += ",offset"
        scalars, scalar_names = [], ""
        if softcap is not None:
            scalars, scalar_names = [float(softcap), 1 / softcap], "cap,inv_cap"
        needs = (x2.requires_grad, weight.requires_grad)
        gradient = torch.is_grad_enabled() and (
            any(needs) or (bias is not None and bias.requires_grad))
        family = _CROSS_ENTROPY[bias is not None, offset, softcap is not None, gradient]
        if not gradient:
            # No logits' gradient written where none is asked for.
            call = autograd._runner()
            lse, picked = call(family.key, "", x2, weight, tensors, names, scalars, scalar_names,
                               _no_seed(x))
            losses = lse - picked
        else:
            if not torch.compiler.is_compiling() and any(needs):
                # The backward's two GEMMs, compiled while the forward runs.
                autograd._compile_ahead(
                    ("loss", family.key, x2.dtype, x2.shape, weight.shape, needs),
                    autograd.operand_jobs, x2, family.key, (x2.shape[0], padded), x2.shape,
                    weight.shape, needs)
            losses = _LinearCrossEntropy.apply(family.key, x2, weight, bias, tensors, names,
                                               scalars, scalar_names, _no_seed(x))
    losses = torch.where(counts, losses, 0.0)
    if reduction == "none":
        return losses.reshape(x.shape[:-1])
    total = losses.sum()
    return total if reduction == "sum" else total / counts.sum()


class OutProjection(Linear):
    """An attention output projection with its dropout and residual in one
    kernel: y = dropout(x W^T + b, p) + residual, `residual` a keyword
    argument of forward of the shape of y."""

    def __init__(self, in_features, out_features, dropout=0.1, device=None, dtype=None,
                 weight_layout="nk"):
        _check_dropout(dropout)
        self.p = dropout
        body = f"dropout(input + bias, {dropout!r})" if dropout else "input + bias"
        super().__init__(in_features, out_features, device=device, dtype=dtype,
                         weight_layout=weight_layout,
                         epilogue=lambda t: f"EPILOGUE out_projection(bias: {t}[N], "
                                            f"residual: {t}[M, N]) {{\n"
                                            f"  output = {body} + residual;\n}}\n")

    def extra_repr(self):
        return super().extra_repr() + f", dropout={self.p}"


class _InOutLinear(nn.Module):
    """The parameters of a linear layer whose weight is stored [in, out]
    (as Hugging Face's Conv1D), initialized as nn.Linear's."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        reference = nn.Linear(in_features, out_features, bias, device, dtype)
        self.weight = nn.Parameter(reference.weight.detach().t().contiguous())
        self.bias = reference.bias


def _down_families(bias, output_dropout, weight_layout):
    """The second GEMM of an MLP, `input [+ bias]` (dropout of it with
    probability `output_dropout`, when not 0) [+ residual]: its program
    family without a residual (key False) and with one (key True)."""
    families = {}
    for residual in (False, True):
        inputs = (["bias: {t}[N]"] if bias else []) + (["residual: {t}[M, N]"]
                                                      if residual else [])
        linear = " + ".join(["input"] + (["bias"] if bias else []))
        if output_dropout:
            linear = f"dropout({linear}, {output_dropout!r})"
        terms = [linear] + (["residual"] if residual else [])
        text = (f"EPILOGUE fc2({', '.join(inputs)}) {{\n  output = "
                f"{' + '.join(terms)};\n}}\n")
        families[residual] = ProgramFamily(lambda t, text=text: text.replace("{t}", t),
                                           layout_b=weight_layout)
    return families


def _inference(up, p, x2, w1, b1, down, output_p, w2, b2, r2):
    """An MLP's two GEMMs in eval mode: `up` on x2 and w1 (and b1), then
    `down` on its output, w2 (and b2, r2), each in its inference form when it
    has dropout (probability p, output_p)."""
    seed = _no_seed(x2)
    bias1 = [] if b1 is None else [b1]
    (h,) = run(up.key, "inference" if p else "", x2, w1, bias1, "bias" if bias1 else "", [],
               "", seed)
    tensors, names = down_inputs(b2, r2)
    (y,) = run(down.key, "inference" if output_p else "", h, w2, tensors, ",".join(names), [],
               "", seed)
    return y


def _seeds(module, x, *probabilities):
    """A dropout seed for each probability: drawn for dropout in training
    (all of them in one draw, each a view of it), else the one never
    read."""
    drawn = [bool(p) and module.training for p in probabilities]
    seeds = iter(draw_seed(x.device, sum(drawn)).unbind() if any(drawn) else ())
    return [next(seeds) if d else _no_seed(x) for d in drawn]


def _mlp_forward(module, x, in_features, out_features, residual):
    """The forward of an MLP or GatedMLP `module` (its _programs) on x [..., in]
    with `residual` [..., out] added in its second kernel when given."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, in_features).contiguous()
    r2 = None if residual is None else residual.reshape(-1, out_features)
    if not module.training:
        up, p, w1, b1, down, output_p, w2, b2 = module._programs(residual is not None)
        return _inference(up, p, x2, w1, b1, down, output_p, w2, b2, r2).reshape(*lead, -1)
    with _remade() as remade:
        up, p, w1, b1, down, output_p, w2, b2 = module._programs(residual is not None, remade,
                                                                 x2)
        seed, output_seed = _seeds(module, x, p, output_p)
        y = mlp(up.key, down.key, x2, w1, b1, w2, b2, r2, seed, output_seed)[0]
    return y.reshape(*lead, -1)


class MLP(nn.Module):
    """A Transformer MLP: y = dropout(fc2(dropout(act(fc1(x)), p)), q) +
    residual (q = output_dropout, 0 by default, as nanoGPT's MLP), with
    `fc1` and `fc2` nn.Linear modules (their parameters, initialization and
    state dict). Two kernels forward (fc1 also writes its accumulator for
    the backward); backward, fc2's bias gradient, then fc2's dgrad GEMM
    carrying fc1's whole epilogue gradient (the activation's derivative, the
    dropout mask regenerated from its seed, fc1's bias gradient), and three
    weight and input gradient GEMMs. `residual` (a keyword argument of
    forward, the shape of y) is added in fc2's epilogue when given. With
    output dropout fc2's epilogue gradient is its own kernel (the mask
    regenerated from its seed, a second one), where without it needs
    none. weight_layout="kn" runs fc1 and fc2 whose weights are stored
    [in, out] (Hugging Face's Conv1D, which coda.patch puts here) instead of
    nn.Linear's [out, in] (fc1 and fc2 then hold `weight` [in, out] and
    `bias` [out], initialized as nn.Linear's)."""

    def __init__(self, in_features, hidden_features, out_features=None, activation="gelu",
                 dropout=0.1, bias=True, device=None, dtype=None, output_dropout=0.0,
                 weight_layout="nk"):
        super().__init__()
        _check_layout(weight_layout)
        self.weight_layout = weight_layout
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation '{activation}'; expected one of "
                             f"{', '.join(_ACTIVATIONS)}")
        _check_dropout(dropout)
        _check_dropout(output_dropout)
        out_features = out_features or in_features
        self.activation, self.p, self.output_p = activation, dropout, output_dropout
        linear = nn.Linear if weight_layout == "nk" else _InOutLinear
        self.fc1 = linear(in_features, hidden_features, bias, device, dtype)
        self.fc2 = linear(hidden_features, out_features, bias, device, dtype)
        # Biases and the residual in the parameters' type: nothing is
        # converted.
        header = "(bias: {t}[N])" if bias else ""
        pre = "input + bias" if bias else "input"
        body = _activated(activation, pre)
        up = (f"EPILOGUE fc1{header} {{\n  output = "
              f"{f'dropout({body}, {dropout!r})' if dropout else body};\n}}\n")
        self._up = ProgramFamily(lambda t: up.replace("{t}", t), layout_b=weight_layout)
        self._down = _down_families(bias, output_dropout, weight_layout)

    def _programs(self, residual, remade=None, like=None):
        """(fc1's family, its dropout probability, w1, b1, fc2's family (with
        a residual input or not), its dropout probability, w2, b2). `remade`
        and `like`: GatedMLP's."""
        return (self._up, self.p, self.fc1.weight, self.fc1.bias, self._down[residual],
                self.output_p, self.fc2.weight, self.fc2.bias)

    def forward(self, x, residual=None):
        return _mlp_forward(self, x, _width(self.fc1, self.weight_layout, 0),
                            _width(self.fc2, self.weight_layout, 1), residual)

    def extra_repr(self):
        return (f"activation={self.activation}, dropout={self.p}"
                + (f", output_dropout={self.output_p}" if self.output_p else ""))


class _SharedRows(nn.Module):
    """A module whose weights named by `_shared_weights()` ([rows, K] each)
    are kept as consecutive rows of one buffer (_share_rows), read stacked
    without a copy (_stacked_rows)."""

    def _share_weights(self):
        _share_rows(self._shared_weights())

    def _apply(self, fn, *args, **kwargs):
        # A conversion (.to(), .cuda(), .half()) gives each parameter its own
        # storage: the weights are put back in one buffer. What leaves them
        # stacked (a conversion to what they are, share_memory()) leaves
        # them where they are.
        super()._apply(fn, *args, **kwargs)
        if _stacked_rows(self._shared_weights()) is None:
            self._share_weights()
        return self


class GatedMLP(_SharedRows):
    """A gated MLP (LLaMA's, Mistral's, Gemma's): y = down_proj(act(gate_proj(x))
    * up_proj(x)), with `gate_proj`, `up_proj` and `down_proj` nn.Linear
    modules without biases (their parameters, initialization and state dict,
    under Hugging Face's names). act is silu (SwiGLU) or another activation
    of coda.nn.MLP (gelu: GeGLU). Forward, two kernels: the gate and up
    projections as one GEMM over their weights with rows interleaved (gate
    row j at 2j, up row j at 2j + 1, stacked at each call), its epilogue
    act(gate) * up written N / 2 wide, the GEMM's accumulator also written
    for the backward; then the down projection. Backward: the gated
    activation's gradient in the epilogue of the down projection's dgrad
    GEMM (an accumulator [m, n/2]: each column of that product is the
    gradient of one pair), then the input and weight gradients of both
    GEMMs. `residual` (a keyword argument of forward, the shape of y) is
    added in the down projection's epilogue when given. The gate and up
    weights are kept as the two halves of one buffer (each parameter a
    view of it: _SharedRows), which ResidualNormMLP's folded norm reads
    as they lie."""

    def __init__(self, in_features, hidden_features, out_features=None, activation="silu",
                 device=None, dtype=None):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation '{activation}'; expected one of "
                             f"{', '.join(_ACTIVATIONS)}")
        out_features = out_features or in_features
        self.activation = activation
        self.gate_proj = nn.Linear(in_features, hidden_features, False, device, dtype)
        self.up_proj = nn.Linear(in_features, hidden_features, False, device, dtype)
        self.down_proj = nn.Linear(hidden_features, out_features, False, device, dtype)
        gated = (f"EPILOGUE gated -> (output: {{t}}[M, N/2]) {{\n"
                 f"  output = {_activated(activation, 'input')} * partner(input, 1);\n}}\n")
        self._up = ProgramFamily(lambda t: gated.replace("{t}", t))
        self._down = _down_families(False, 0.0, "nk")
        self._share_weights()

    def _shared_weights(self):
        return self.gate_proj.weight, self.up_proj.weight

    def _programs(self, residual, remade=None, like=None):
        """As MLP's: the gate and up projections one GEMM over their weights
        as one, their rows interleaved, no dropout. With `remade` (_remade's),
        that weight in torch.autocast's type for operands like `like`, saved
        for the backward as the way to make it from the weights this call
        read (not the module's at the backward: torch.func.functional_call
        swaps them back in between)."""
        gate, up = self._shared_weights()

        def stacked():
            return torch.stack((gate, up), dim=1).reshape(2 * gate.shape[0], gate.shape[1])

        w1 = stacked()
        if remade is not None:
            w1 = _autocast(like, w1)[1]
            remade(w1, stacked, (gate, up))
        return (self._up, 0.0, w1, None, self._down[residual], 0.0, self.down_proj.weight, None)

    def forward(self, x, residual=None):
        return _mlp_forward(self, x, self.gate_proj.in_features, self.down_proj.out_features,
                            residual)

    def extra_repr(self):
        return f"activation={self.activation}"


# rstd is detached: its gradient comes from the output (_RotaryQKV's
# backward), so that the epilogue gradient, the inverse rotation times rstd,
# reads no accumulator and its kernel runs no product.
_ROTARY_QKV = """
EPILOGUE rmsnorm_rotary(rstd: f32[M], {inputs}, sign: f32[N], normed: f32[N])
    -> (output: {t}[M, N]) {
  {rotation}
  output = turned * detach(rstd);
}
"""
# With biases of the projections (Qwen2's) or QK-norm (each query and key
# head normalized, RMSNorm over its head_dim columns, group_mean) before the
# rotation; `normed` is 1 on the Q and K columns, 0 on V, which pass through.
# rstd takes its gradient here: the output is no multiple of it.
_ROTARY_SAVING_QKV = """
EPILOGUE rmsnorm_rotary_saving(rstd: f32[M], {inputs}, sign: f32[N], normed: f32[N]{extra})
    -> (output: {t}[M, N]) {
  p = input * rstd{bias};
  {qk_norm}
  {rotation}
  output = turned;
}
"""
_QK_NORM = ("on = detach(normed);\n"
            "  x = p * (on * rsqrt(group_mean(p * p, {head_dim}) + {eps}) * qk_weight + 1 - on);")
# How the rotation turns x (`input`, or the heads' normalized values): by
# each token's position and each pair's frequency, the angle's sine and
# cosine computed in the epilogue (0 on the value columns: they pass
# through); or by the model's own cos and sin of each token, Hugging Face's
# position_embeddings, whatever its rotary scaling (`normed` keeps the value
# columns as they are).
_ROTATIONS = {
    False: ("pos: f32[M], inv_freq: f32[N]",
            "angle = detach(pos * inv_freq);\n"
            "  turned = X * cos(angle) + partner(X, {half}) * detach(sign) * sin(angle);"),
    True: ("cosine: {t}[M, N % {head_dim}], sine: {t}[M, N % {head_dim}]",
           "turned = X + detach(normed) * (X * detach(cosine)\n"
           "         + partner(X, {half}) * detach(sign) * detach(sine) - X);"),
}
# The backward of _ROTARY_QKV's program on the gradient of its output, y:
# the inverse rotation (the transpose of _ROTATIONS' turn: each column's
# term in its partner's turn, moved back) times rstd, the epilogue
# gradient, which reads no accumulator (its kernel runs no product); and
# rowsum(grad * y), rstd's gradient times rstd (y = turned(acc) * rstd).
_ROTARY_GRADIENT = """
EPILOGUE rmsnorm_rotary_gradient(grad: {t}[M, N], y: {t}[M, N], rstd: f32[M], {inputs},
                                 sign: f32[N], normed: f32[N])
    -> (grad_acc: {t}[M, N], rowdot: f32[M]) {
  {inverse}
  grad_acc = turned * rstd;
  rowdot = row_sum(grad * y);
}
"""
# By positions a pair's two columns share their frequency (_columns), so
# the partner's sine is the column's own (one sine and cosine an element,
# and fewer registers: 112 bytes of spills a thread instead of 256 at
# 128 x 256 tiles); cos/sin tables are taken as given.
_INVERSE_ROTATIONS = {
    False: ("angle = pos * inv_freq;\n"
            "  turned = grad * cos(angle) - partner(grad, {half}) * sign * sin(angle);"),
    True: ("turned = grad + normed * (grad * cosine + partner(grad * sign * sine, {half})\n"
           "                          - grad);"),
}
# x's and gamma's gradients: the product of the epilogue gradient by the
# three weights stacked as they are (B [K, N]: the weights [N, K] as
# stored), times gamma (the forward's weight is scaled by it), plus what
# reaches x through rstd = rsqrt(mean(x * x) + eps), x * (rstd's gradient)
# * -rstd^3 / K with rstd's gradient rowdot / rstd; gamma's, the column
# sums of that product times x.
_ROTARY_INPUT_GRADIENT = ProgramFamily(lambda t: f"""
EPILOGUE rmsnorm_rotary_input_gradient(x: {t}[M, N], gamma: f32[N], rowdot: f32[M],
                                       rstd: f32[M], inv_width: f32)
    -> (output: {t}[M, N], grad_gamma: f32[N]) {{
  output = input * gamma - x * (rowdot * rstd * rstd * inv_width);
  grad_gamma = col_sum(input * x);
}}
""", layout_b="kn")
# The gradient of weights scaled by a norm's weight gamma in the forward (the
# norm folded into their product): the epilogue gradient's transpose (A
# [K, M]: grad_acc [M, K] as written) by the norm's input x, times gamma.
_SCALED_WEIGHT_GRADIENT = ProgramFamily(lambda t: f"""
EPILOGUE scaled_weight_gradient(gamma: f32[N]) -> (output: {t}[M, N]) {{
  output = input * gamma;
}}
""", layout_a="km", layout_b="kn")
_rotary_families = {}
# The program family of _ROTARY_GRADIENT for each _ROTARY_QKV family's key.
_rotary_gradients = {}


def _row_rstd(x, eps):
    """rsqrt(mean(x * x, -1) + eps) of x [M, K], in f32 as Hugging Face's
    RMSNorm computes it (f64 for f64 x), in two kernels (the row norm, then
    the rest in place)."""
    wide = torch.promote_types(x.dtype, torch.float32)
    rstd = torch.linalg.vector_norm(x, dim=-1, dtype=wide)
    return rstd.square_().div_(x.shape[-1]).add_(eps).rsqrt_()


class _RowRstd(torch.autograd.Function):
    """_row_rstd(x, eps); backward, x times grad * -rstd^3 / K, written in
    x's type by one kernel (autograd of the same expression runs six)."""

    @staticmethod
    def forward(ctx, x, eps):
        rstd = _row_rstd(x, eps)
        ctx.save_for_backward(x, rstd)
        return rstd

    @staticmethod
    def backward(ctx, grad):
        x, rstd = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None
        scale = rstd.pow(3).mul_(grad).mul_(-1.0 / x.shape[-1])
        return torch.mul(x, scale.unsqueeze(-1), out=torch.empty_like(x)), None


class _RotaryQKV(torch.autograd.Function):
    """y, family `key`'s _ROTARY_QKV program on x [M, K] and the weights
    `projections` stacked and scaled by the norm's weight gamma
    (_scaled_rows, in `dtype`), its inputs `tensors` (rstd first, detached
    in the program) named by `names`. Backward, on y's gradient: the
    epilogue gradient and rowsum(grad * y) in one kernel with no product
    (_ROTARY_GRADIENT); x's gradient on its GEMM by the weights stacked as
    they are, times gamma, with what rstd passes on to x and gamma's
    gradient in its epilogue (_ROTARY_INPUT_GRADIENT); the weights' on
    theirs (_SCALED_WEIGHT_GRADIENT), views of one product. Neither stacked
    weight is held from the forward (the parameters are saved). The
    programs run as `run` runs them: through the coda::run op under
    torch.compile, else called directly; this function records no autograd
    of its own inside."""

    @staticmethod
    def forward(ctx, key, x, gamma, tensors, names, seed, dtype, *projections):
        ctx.call = autograd._runner()
        weight = _scaled_rows(projections, gamma, dtype)
        (y,) = ctx.call(key, "", x, weight, tensors, names, [], "", seed)
        ctx.key, ctx.names, ctx.dtype, ctx.count = key, names, dtype, len(tensors)
        # In eager mode the parameters are saved under _remade's hooks,
        # which leave PyTorch's check that they are unchanged to them.
        ctx.versions = (None if torch.compiler.is_compiling()
                        else _versions((gamma, *projections)))
        ctx.save_for_backward(x, gamma, y, seed, *tensors, *projections)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, gamma, y, seed, *rest = ctx.saved_tensors
        tensors, projections = rest[:ctx.count], rest[ctx.count:]
        if ctx.versions is not None:
            _check_versions((gamma, *projections), ctx.versions)
        needs = ctx.needs_input_grad
        stacked = _scaled_rows(projections, None, ctx.dtype)
        grad_acc, rowdot = ctx.call(_rotary_gradients[ctx.key].key, "", x, stacked,
                                    [grad.contiguous(), y, *tensors], "grad,y," + ctx.names,
                                    [], "", seed)
        grad_x = grad_gamma = None
        if needs[1] or needs[2]:
            grad_x, grad_gamma = ctx.call(
                _ROTARY_INPUT_GRADIENT.key, "", grad_acc, stacked, [x, gamma, rowdot, tensors[0]],
                "x,gamma,rowdot,rstd", [1.0 / x.shape[1]], "inv_width", seed)
            grad_x = autograd._as(grad_x, x.dtype) if needs[1] else None
            grad_gamma = autograd._as(grad_gamma, gamma.dtype) if needs[2] else None
        grad_weights = [None] * len(projections)
        if any(needs[7:]):
            (grad_stacked,) = ctx.call(_SCALED_WEIGHT_GRADIENT.key, "", grad_acc, x, [gamma],
                                       "gamma", [], "", seed)
            grad_weights = [autograd._as(g, w.dtype) if need else None for g, w, need in
                            zip(grad_stacked.split([w.shape[0] for w in projections]),
                                projections, needs[7:])]
        return None, grad_x, grad_gamma, None, None, None, None, *grad_weights


def _rotary_jobs(like, key, x, weight, needs):
    """The jobs (autograd._compile_ahead) of _RotaryQKV's backward on x and
    the stacked weight (shapes; `needs`: the gradients of x or gamma, and of
    the weights, asked for)."""
    grad_acc = (x[0], weight[0])
    jobs = [(_rotary_gradients[key].key, "", x, weight)]
    if needs[0]:
        jobs.append((_ROTARY_INPUT_GRADIENT.key, "", grad_acc, weight))
    if needs[1]:
        jobs.append((_SCALED_WEIGHT_GRADIENT.key, "", grad_acc, x))
    return jobs


def _share_rows(weights):
    """Moves the parameters `weights` ([rows, K] each, of one type and
    device) into one buffer, as its consecutive rows: each keeps its object,
    values and shape, its data a view of the buffer (contiguous, disjoint
    from the others': optimizers, state dicts and Hugging Face's
    save_pretrained take them as they take separate tensors). The rows
    stacked are then that buffer (_stacked_rows), not a copy."""
    first = weights[0]
    # Plain tensors only: a distributed engine's (DTensor) keeps its own.
    if first.is_meta or any(type(w.data) is not torch.Tensor or w.dtype != first.dtype
                            or w.device != first.device or w.shape[1:] != first.shape[1:]
                            for w in weights):
        return
    with torch.no_grad():
        buffer = torch.cat([w.detach() for w in weights])
        for w, rows in zip(weights, buffer.split([w.shape[0] for w in weights])):
            w.data = rows


def _stacked_rows(weights):
    """The rows of `weights` stacked without a copy: a view of their storage
    where they are its consecutive rows (_share_rows), else None (and under
    torch.compile, which traces the copy)."""
    if torch.compiler.is_compiling() or any(type(w.data) is not torch.Tensor for w in weights):
        return None
    first = weights[0]
    storage, offset = first.untyped_storage().data_ptr(), first.storage_offset()
    for w in weights:
        if (w.dtype != first.dtype or w.shape[1:] != first.shape[1:] or not w.is_contiguous()
                or w.untyped_storage().data_ptr() != storage or w.storage_offset() != offset):
            return None
        offset += w.numel()
    return first.detach().as_strided((sum(w.shape[0] for w in weights), first.shape[1]),
                                     (first.shape[1], 1))


def _scaled_rows(weights, scale, dtype):
    """The rows of `weights` stacked, column k times scale[k] (as they are
    where scale is None), in `dtype`: where they lie stacked already
    (_stacked_rows), that view or one kernel over it; else one pass over
    each weight (torch.cat(weights) * scale takes two, and a stacked
    copy)."""
    stacked = _stacked_rows(weights)
    if stacked is not None and stacked.dtype == dtype:
        return stacked if scale is None else torch.mul(stacked, scale,
                                                       out=torch.empty_like(stacked))
    if scale is None and all(w.dtype == dtype for w in weights):
        return torch.cat(weights)  # one kernel
    out = torch.empty(sum(w.shape[0] for w in weights), weights[0].shape[1], dtype=dtype,
                      device=weights[0].device)
    _scaled_into(weights, out.split([w.shape[0] for w in weights]), scale)
    return out


def _scaled_into(weights, views, scale):
    """Each of `weights` written into its view of a stacked weight, column k
    times scale[k] (as it is where scale is None): one pass over each."""
    for w, view in zip(weights, views):
        if scale is None:
            view.copy_(w)
        else:
            torch.mul(w, scale, out=view)


class _ScaledRows(torch.autograd.Function):
    """_scaled_rows(weights, scale, dtype) with its gradients: a weight's,
    the stacked gradient's rows times scale (views of one product); scale's,
    the column sums of the stacked gradient times the weights, in f32 (f64
    for f64 operands). Nothing is saved but the parameters themselves."""

    @staticmethod
    def forward(ctx, dtype, scale, *weights):
        ctx.save_for_backward(scale, *weights)
        return _scaled_rows(weights, scale, dtype)

    @staticmethod
    def backward(ctx, grad):
        scale, *weights = ctx.saved_tensors
        rows = [w.shape[0] for w in weights]
        grad_scale = grad_weights = None
        if any(ctx.needs_input_grad[2:]):
            grad_weights = [g.to(w.dtype) for g, w in
                            zip((grad * scale.to(grad.dtype)).split(rows), weights)]
        if ctx.needs_input_grad[1]:
            products = torch.empty_like(grad)
            for g, w, out in zip(grad.split(rows), weights, products.split(rows)):
                torch.mul(g, w, out=out)
            wide = torch.promote_types(grad.dtype, torch.float32)
            grad_scale = products.sum(0, dtype=wide).to(scale.dtype)
        return None, grad_scale, *(grad_weights or [None] * len(weights))


def _rotary_family(head_dim, qk_eps=None, tables=False, bias=False):
    """The program family of RMSNormRotaryQKV's kernel for heads of
    `head_dim` columns (rotate-half pairs columns head_dim / 2 apart), with
    QK-norm of epsilon `qk_eps` when it is given and the projections'
    `bias`, rotating by the model's cos/sin `tables` or by positions and
    frequencies."""
    key = head_dim, qk_eps, tables, bias
    family = _rotary_families.get(key)
    if family is None:
        inputs, rotation = _ROTATIONS[tables]
        if qk_eps is None and not bias:
            text = _ROTARY_QKV.replace("{rotation}", rotation.replace("X", "input"))
        else:
            extra = (", qk_weight: f32[N]" if qk_eps is not None else "") + (
                ", bias: f32[N]" if bias else "")
            text = (_ROTARY_SAVING_QKV.replace("{extra}", extra)
                    .replace("{bias}", " + bias" if bias else "")
                    .replace("{qk_norm}", _QK_NORM if qk_eps is not None else "x = p;")
                    .replace("{rotation}", rotation.replace("X", "x")))

        def filled(text):
            return (text.replace("{inputs}", inputs).replace("{half}", str(head_dim // 2))
                    .replace("{head_dim}", str(head_dim)).replace("{eps}", repr(qk_eps)))

        text = filled(text)
        family = _rotary_families[key] = ProgramFamily(lambda t: text.replace("{t}", t))
        if qk_eps is None and not bias:
            gradient = filled(_ROTARY_GRADIENT.replace("{inverse}", _INVERSE_ROTATIONS[tables]))
            _rotary_gradients[family.key] = ProgramFamily(
                lambda t: gradient.replace("{t}", t))
    return family


class RMSNormRotaryQKV(_SharedRows):
    """A pre-norm attention's input: RMSNorm(x), then the query, key and
    value projections, then the rotary embedding of the queries and keys
    (rotate-half, as Hugging Face's LLaMA, Mistral and Qwen apply it, from
    token positions and the inverse frequencies of base `theta`, or
    `inv_freq` when given: head_dim / 2 of them, as a scaled rotary
    embedding's), in one kernel. The norm is folded into the product (docs/autodiff.md):
    RMSNorm(x) W^T = rstd * (x (W * gamma)^T), so the GEMM reads x itself,
    its weight the three projections' stacked and scaled by the norm's
    weight at each call (the projections' weights are kept as consecutive
    rows of one buffer, their parameters' data views of it: one kernel
    scales them, and the backward reads them stacked without a copy; a
    conversion of the module puts them back, a model's conversion after
    coda.patch leaves them apart, copied at each call), and its epilogue
    multiplies each row by its rstd
    (one row reduction of x, in PyTorch) and rotates each pair of columns
    head_dim / 2 apart; the normalized x and the unrotated queries and keys
    are never written. Backward, three programs (_RotaryQKV): the inverse
    rotation times rstd with rowsum(grad * output) (rstd's gradient times
    rstd) in one kernel that runs no product; x's gradient on its GEMM by
    the three weights as they are, times the norm's weight, with what rstd
    passes on to x and the norm weight's gradient in its epilogue; the
    weights' gradient on theirs.
    With qk_norm=True (Qwen3's, OLMo2's attention), each query and key head
    is normalized by an RMSNorm of its own over head_dim columns (weights
    `q_norm`, `k_norm`, epsilon `qk_eps`, by default `eps`) before the
    rotation, in the same kernel: a group reduction of each head's columns
    in the epilogue (docs/dsl.md); the kernel then also writes its
    accumulator, from which coda's derived backward runs without the GEMM
    again (backward_from_saved), rstd's gradient among its outputs.
    With bias=True (Qwen2's attention) the projections' biases are added
    before the rotation, in the same kernel (which then writes its
    accumulator too, as with QK-norm). Children: `norm` (nn.RMSNorm),
    `q_proj`, `k_proj`, `v_proj` (nn.Linear, with biases when bias=True),
    and with qk_norm `q_norm`, `k_norm` (nn.RMSNorm of head_dim). forward(x [..., s, width], positions [s] or [..., s])
    returns q [..., heads, s, head_dim] and k, v [..., kv_heads, s,
    head_dim], as F.scaled_dot_product_attention takes them. Given
    `position_embeddings` (the cos and sin of each token, [..., s, head_dim],
    as a Hugging Face model passes them to its layers) in place of positions,
    it rotates by them, whatever the rotary scaling that made them: inputs
    that repeat along the row (docs/dsl.md)."""

    def __init__(self, width, heads, kv_heads=None, head_dim=None, eps=1e-6, theta=10000.0,
                 inv_freq=None, qk_norm=False, qk_eps=None, bias=False, device=None,
                 dtype=None):
        super().__init__()
        kv_heads = kv_heads or heads
        head_dim = head_dim or width // heads
        if head_dim < 2 or head_dim & (head_dim - 1):
            raise ValueError(f"head_dim must be a power of 2 (rotate-half pairs columns "
                             f"head_dim / 2 apart within a head), got {head_dim}")
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        self.heads, self.kv_heads, self.head_dim, self.eps = heads, kv_heads, head_dim, eps
        # theta when the frequencies are its (for extra_repr).
        self.theta = theta if inv_freq is None else None
        if inv_freq is None:
            # Hugging Face's default rotary frequencies, computed as it does.
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        elif tuple(inv_freq.shape) != (head_dim // 2,):
            raise ValueError(f"inv_freq has shape {tuple(inv_freq.shape)}; expected "
                             f"({head_dim // 2},), one frequency per pair of a head")
        self._inv_freq = inv_freq.detach().to("cpu", torch.float32)
        self.norm = nn.RMSNorm(width, eps, device=device, dtype=dtype)
        self.q_proj = nn.Linear(width, heads * head_dim, bias, device, dtype)
        self.k_proj = nn.Linear(width, kv_heads * head_dim, bias, device, dtype)
        self.v_proj = nn.Linear(width, kv_heads * head_dim, bias, device, dtype)
        self.qk_eps = None
        if qk_norm:
            self.qk_eps = float(eps if qk_eps is None else qk_eps)
            self.q_norm = nn.RMSNorm(head_dim, self.qk_eps, device=device, dtype=dtype)
            self.k_norm = nn.RMSNorm(head_dim, self.qk_eps, device=device, dtype=dtype)
        self._tables = {}
        self._share_weights()
        # The program families forward may run (by positions or by tables,
        # with biases or not: coda.patch may put biased projections here),
        # registered now: made in a forward traced by torch.compile, a
        # family would be registered only after the trace that calls it.
        for tables in (False, True):
            for biased in (False, True):
                _rotary_family(head_dim, self.qk_eps, tables, biased)

    def _shared_weights(self):
        """The query, key and value projections' weights, in their stacked
        order (_SharedRows': the GEMM reads them as they lie, and only the
        norm's scaling copies them, one kernel)."""
        return self.q_proj.weight, self.k_proj.weight, self.v_proj.weight

    def _columns(self, device):
        """Per column of the stacked product: the inverse frequency of its
        pair and the sign of its partner's term (-1 on the first half of a
        head, 1 on the second); 0 and 0 on the value columns, which pass
        through (cos 0 = 1, sin 0 = 0); then whether it is a query or key
        column (1) or a value column (0). Made once per device
        (_made_once)."""
        def make():
            d = self.head_dim
            head_freq = torch.cat((self._inv_freq, self._inv_freq))
            head_sign = torch.cat((-torch.ones(d // 2), torch.ones(d // 2)))
            rotated = self.heads + self.kv_heads
            values = self.kv_heads * d
            inv_freq = torch.cat((head_freq.repeat(rotated), torch.zeros(values)))
            sign = torch.cat((head_sign.repeat(rotated), torch.zeros(values)))
            normed = torch.cat((torch.ones(rotated * d), torch.zeros(values)))
            return inv_freq.to(device), sign.to(device), normed.to(device)

        return _made_once(self._tables, device, make)

    def forward(self, x, positions=None, position_embeddings=None):
        with _remade() as remade:
            return self._forward(x, positions, position_embeddings, remade)

    def _forward(self, x, positions, position_embeddings, remade):
        width = self.norm.weight.shape[0]
        lead = x.shape[:-1]
        projections = self._shared_weights()
        (x,) = _autocast(x)
        x2 = x.reshape(-1, width)
        bias = self.q_proj.bias is not None
        plain = self.qk_eps is None and not bias
        # rstd's gradient reaches x in _RotaryQKV's backward (the plain
        # program), else through its row norm (_RowRstd).
        rstd = _row_rstd(x2.detach(), self.eps) if plain else _RowRstd.apply(x2, self.eps)
        # The weights stacked and scaled by the norm's weight, in
        # torch.autocast's type when it is on; not held for the backward.
        gamma = self.norm.weight
        dtype = x.dtype if torch.is_autocast_enabled(x.device.type) else projections[0].dtype
        if not plain:
            weight = _ScaledRows.apply(dtype, gamma, *projections)
            remade(weight, lambda: _scaled_rows(projections, gamma, dtype),
                   (*projections, gamma))
        inv_freq, sign, normed = self._columns(x.device)
        d = self.head_dim
        tables = position_embeddings is not None
        if tables:
            # The model's cos and sin of each token ([..., s, head_dim]),
            # broadcast over x's leading dims ([1, s, head_dim] for an x of
            # [s, width] too).
            turn = [(t.reshape(*lead, d) if t.dim() > len(lead) + 1 else t)
                    .expand(*lead, d).reshape(-1, d).contiguous() for t in position_embeddings]
            turn_names = "cosine,sine"
        elif positions is None:
            raise TypeError("RMSNormRotaryQKV needs the tokens' positions, or their "
                            "position_embeddings (cos, sin)")
        else:
            # [s] or [..., s] positions, broadcast over x's leading dims
            # ([1, s] for an x of [s, width] too).
            if positions.dim() > len(lead):
                positions = positions.reshape(lead)
            turn = [positions.expand(lead).reshape(-1).to(torch.float32), inv_freq]
            turn_names = "pos,inv_freq"
        family = _rotary_family(d, self.qk_eps, tables, bias)
        tensors, names = [rstd, *turn, sign, normed], f"rstd,{turn_names},sign,normed"
        if plain:
            x2 = x2.contiguous()
            shape = (sum(w.shape[0] for w in projections), width)
            needs = (x2.requires_grad or gamma.requires_grad,
                     any(w.requires_grad for w in projections))
            if not torch.compiler.is_compiling() and torch.is_grad_enabled() and any(needs):
                # The backward's programs, compiled while the forward runs.
                autograd._compile_ahead(
                    ("rotary", family.key, x2.dtype, x2.shape, shape, needs),
                    _rotary_jobs, x2, family.key, x2.shape, shape, needs)
            out = _RotaryQKV.apply(family.key, x2, gamma, tensors, names, _no_seed(x), dtype,
                                   *projections)
        else:
            if self.qk_eps is not None:
                # Each head's norm weight repeated over the query and key
                # heads, 1 on the value columns.
                tensors.append(torch.cat((self.q_norm.weight.repeat(self.heads),
                                          self.k_norm.weight.repeat(self.kv_heads),
                                          normed.new_ones(self.kv_heads * d))))
                names += ",qk_weight"
            if bias:
                tensors.append(torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias)))
                names += ",bias"
            # The accumulator saved: the backward (with rstd's gradient, the
            # heads' norms' and the biases') runs without the GEMM again.
            out, _ = run(family.key, "saving", x2.contiguous(), weight, tensors, names, [], "",
                         _no_seed(x))
        q, k, v = out.split((self.heads * d, self.kv_heads * d, self.kv_heads * d), dim=-1)
        return tuple(t.reshape(*lead, -1, d).transpose(-3, -2) for t in (q, k, v))

    def extra_repr(self):
        frequencies = f"theta={self.theta}" if self.theta is not None else "inv_freq given"
        return (f"heads={self.heads}, kv_heads={self.kv_heads}, head_dim={self.head_dim}, "
                f"{frequencies}" + (f", qk_norm=True, qk_eps={self.qk_eps}"
                                    if self.qk_eps is not None else "")
                + (", bias=True" if self.q_proj.bias is not None else ""))


_NORMS = ("layernorm", "rmsnorm")


def _projection_norm(norm, eps, bias, norm_bias, dropout, weight_layout="nk"):
    """The program family of an output projection (its weight stored as
    `weight_layout` says) whose epilogue adds its
    bias (when `bias`), applies dropout (probability `dropout`) and adds the
    residual, h, then normalizes h over its row: LayerNorm (with its bias
    when `norm_bias`) or RMSNorm, both with the weight `gamma`, in f32. In
    a 16-bit type h is normalized as written (bf16(...)), as PyTorch's
    modules normalize the h they are given; on the GPU its row split then
    saves h in that type instead of the f32 accumulator. Writes norm(h)
    first (the output whose gradient fc1's dgrad GEMM gives), then h."""
    inputs = ((["bias: {t}[N]"] if bias else []) + ["residual: {t}[M, N]", "gamma: {t}[N]"]
              + (["beta: {t}[N]"] if norm_bias else []))
    linear = "input + bias" if bias else "input"
    if dropout:
        linear = f"dropout({linear}, {dropout!r})"
    if norm == "layernorm":
        body = ("  d = h - row_mean(h);\n"
                f"  normed = d * rsqrt(row_mean(d * d) + {eps!r}) * gamma"
                + (" + beta" if norm_bias else "") + ";\n")
    else:
        body = f"  normed = h * rsqrt(row_mean(h * h) + {eps!r}) * gamma;\n"
    text = (f"EPILOGUE projection_{norm}({', '.join(inputs)})\n"
            "    -> (normed: {t}[M, N], h: {t}[M, N]) {\n"
            f"  h = {{h}};\n{body}}}\n")
    h = f"{linear} + residual"
    return ProgramFamily(lambda t: text.replace("{h}", f"{t}({h})" if t in ("bf16", "f16") else h)
                         .replace("{t}", t), layout_b=weight_layout)


# ResidualNormMLP's RMSNorm folded into the gate and up projections' product
# (fold_norm=True), as RMSNormRotaryQKV folds its own: RMSNorm(h) W^T = rstd *
# (h (W * gamma)^T). The output projection writes h alone (the MLP's down
# projection's program: input + residual), PyTorch its rows' rstd, and the
# gated GEMM reads h by the gate and up weights stacked and scaled by gamma
# (one kernel over the buffer they share, read as pairs: layout halves), its
# epilogue multiplying each row by its rstd (detached: the norm's backward
# below carries its gradient): normed is never written nor saved.
_FOLDED_GATED = """
EPILOGUE gated_rmsnorm(rstd: f32[M]) -> (output: {t}[M, N/2]) {
  a = input * detach(rstd);
  output = {activated} * partner(a, 1);
}
"""
_folded_gated = {}


def _folded_gated_family(activation):
    """The gated program family of _FOLDED_GATED for `activation`, one per
    activation."""
    if activation not in _folded_gated:
        _folded_gated[activation] = ProgramFamily(
            lambda t: _FOLDED_GATED.replace("{activated}", _activated(activation, "a"))
            .replace("{t}", t),
            layout_b="halves")
    return _folded_gated[activation]


# h's gradient and gamma's on the GEMM of the gated epilogue's gradient (the
# product's rows times rstd, grad_acc, each pair's columns in its two halves)
# by the gate and up weights as stored (B [K, N], the halves): RMSNorm's
# backward with its input normed = h * rstd * gamma,
# whose gradient is this product over rstd, plus y's gradient (h is the
# down projection's residual). The row sum runs across the row's tiles (on
# the GPU, the row split).
_FOLDED_INPUT_GRADIENT = ProgramFamily(lambda t: f"""
EPILOGUE rmsnorm_folded_input_gradient(h: {t}[M, N], gamma: f32[N], rstd: f32[M],
                                       grad_y: {t}[M, N], inv_width: f32)
    -> (output: {t}[M, N], grad_gamma: f32[N]) {{
  g = input * gamma;
  output = g - h * (row_sum(g * h) * rstd * rstd * inv_width) + grad_y;
  grad_gamma = col_sum(input * h);
}}
""", layout_b="kn")


def _folded_needs(needs):
    """What _FoldedNormTail's backward computes, from the gradients of x, w0,
    the gate and up weights, w2, and the residual or gamma asked for
    (`needs`): (h's, which the norm's backward gives, the gated epilogue's,
    which that and the gate and up weights' read)."""
    grad_h = needs[0] or needs[1] or needs[4]
    return grad_h, grad_h or needs[2]


def _folded_jobs(like, keys, x, w0, w1, w2, needs):
    """The jobs (autograd._compile_ahead) of _FoldedNormTail on x, w0, the
    gate and up weights stacked w1 and w2 (shapes; `needs`: as
    _folded_needs'): the gated and down projections' forward, which compile
    while the output projection's does, then the backward's programs."""
    up_key, down_key = keys
    h, g = (x[0], w0[0]), (x[0], w1[0] // 2)
    grad_acc = (x[0], w1[0])
    grad_h, gated = _folded_needs(needs)
    jobs = [(up_key, "saving", h, w1), (down_key, "", g, w2)]
    jobs += autograd.operand_jobs(like, down_key, h, g, w2, (False, needs[3]))
    if gated:
        jobs.append((up_key, autograd._saved_derive(down_key), h, w2))
    if grad_h:
        jobs.append((_FOLDED_INPUT_GRADIENT.key, "", grad_acc, w1))
    if needs[2]:
        jobs.append((_SCALED_WEIGHT_GRADIENT.key, "", grad_acc, h))
    return jobs + autograd.operand_jobs(like, down_key, h, x, w0, needs[:2])


class _FoldedNormTail(torch.autograd.Function):
    """y = h + down(act(gate(n)) * up(n)), n = RMSNorm(h), h = x w0^T +
    residual, in four kernels and a row reduction: the output projection
    (family `keys[1]`: input + residual), rstd of h's rows (_row_rstd), the
    gated GEMM of h by the gate and up weights scaled by gamma (family
    keys[0], _FOLDED_GATED, its saving program) and the down projection.
    Backward, on y's gradient: the down projection's weight gradient; its
    dgrad GEMM with the gated epilogue's gradient (grad_acc, the rows times
    rstd); h's and gamma's gradients on grad_acc's GEMM by the weights as
    stored (_FOLDED_INPUT_GRADIENT); the gate and up weights' gradient
    (_SCALED_WEIGHT_GRADIENT, each a view of it); x's and w0's on h's.
    Neither stacked weight is held from the forward."""

    @staticmethod
    def forward(ctx, keys, x, w0, residual, gamma, eps, dtype, gate, up, w2):
        ctx.call = autograd._runner()
        up_key, down_key = keys
        seed = _no_seed(x)
        (h,) = ctx.call(down_key, "", x, w0, [residual], "residual", [], "", seed)
        rstd = _row_rstd(h, eps)
        weight = _scaled_rows((gate, up), gamma, dtype)
        g, *saved = ctx.call(up_key, "saving", h, weight, [rstd], "rstd", [], "", seed)
        (y,) = ctx.call(down_key, "", g, w2, [h], "residual", [], "", seed)
        ctx.keys, ctx.dtype = keys, dtype
        ctx.versions = (None if torch.compiler.is_compiling()
                        else _versions((w0, gamma, gate, up, w2)))
        ctx.save_for_backward(x, w0, h, rstd, g, gamma, gate, up, w2, seed, *saved)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, w0, h, rstd, g, gamma, gate, up, w2, seed, *saved = ctx.saved_tensors
        if ctx.versions is not None:
            _check_versions((w0, gamma, gate, up, w2), ctx.versions)
        up_key, down_key = ctx.keys
        call, needs = ctx.call, ctx.needs_input_grad
        needs_h, needs_gated = _folded_needs((needs[1], needs[2], needs[7] or needs[8], needs[9],
                                              needs[3] or needs[4]))
        grad_y = autograd._as(grad_y, h.dtype).contiguous()
        grad_w2 = (autograd._as(_operand_gradient(call, down_key, "grad_b", grad_y, g, seed),
                                w2.dtype) if needs[9] else None)
        grad_h = grad_gamma = grad_gate = grad_up = None
        if needs_gated:
            names = ",".join((*autograd._saved_names(up_key, h), "rstd"))
            grad_acc = call(up_key, autograd._saved_derive(down_key), grad_y, w2,
                            [*saved, rstd], names, [], "", seed)[0]
        if needs_h:
            grad_h, grad_gamma = call(_FOLDED_INPUT_GRADIENT.key, "", grad_acc,
                                      _scaled_rows((gate, up), None, ctx.dtype),
                                      [h, gamma, rstd, grad_y], "h,gamma,rstd,grad_y",
                                      [1.0 / h.shape[1]], "inv_width", seed)
        if needs[7] or needs[8]:
            (grad_rows,) = call(_SCALED_WEIGHT_GRADIENT.key, "", grad_acc, h, [gamma], "gamma",
                                [], "", seed)
            halves = grad_rows.split(gate.shape[0])
            grad_gate = autograd._as(halves[0], gate.dtype) if needs[7] else None
            grad_up = autograd._as(halves[1], up.dtype) if needs[8] else None
        grad_x = (autograd._as(_operand_gradient(call, down_key, "grad_a", grad_h, w0, seed),
                               x.dtype) if needs[1] else None)
        grad_w0 = (autograd._as(_operand_gradient(call, down_key, "grad_b", grad_h, x, seed),
                                w0.dtype) if needs[2] else None)
        return (None, grad_x, grad_w0, autograd._as(grad_h, h.dtype) if needs[3] else None,
                autograd._as(grad_gamma, gamma.dtype) if needs[4] else None, None, None,
                grad_gate, grad_up, grad_w2)


class ResidualNormMLP(nn.Module):
    """The second half of a pre-norm Transformer block: h = dropout(x W^T +
    b, p) + residual, then y = h + mlp(norm(h)), with norm LayerNorm
    (nanoGPT's and GPT-2's ln_2) or RMSNorm (LLaMA's post-attention norm)
    and mlp a coda.nn.MLP or GatedMLP. Forward: the attention output
    projection writes h and norm(h) (on the GPU its row split: the GEMM with
    the rows' statistics, then their application), then the MLP's two
    kernels, h added in the second. Backward, the MLP's,
    with the projection's epilogue gradient (the norm's backward, the
    residual's gradient, the gradients of b and of the norm's weight and
    bias) in the epilogue of fc1's dgrad GEMM, and the projection's two
    operand gradients: no kernel of the norm's own. Children: `proj`
    (nn.Linear), `norm` (nn.LayerNorm or nn.RMSNorm) and `mlp`.
    weight_layout="kn" stores the projection's and a plain MLP's weights
    [in, out] (Hugging Face's Conv1D, which coda.patch puts here).
    fold_norm=True (RMSNorm, a gated MLP, no biases or dropout: LLaMA's
    block) trains with the norm folded into the gate and up projections'
    product instead (_FoldedNormTail): no kernel applies the norm forward
    and normed is not saved; h's rstd is one row reduction in PyTorch."""

    def __init__(self, in_features, width, hidden_features, norm="layernorm", eps=1e-5,
                 gated=False, activation=None, dropout=0.0, mlp_dropout=0.0,
                 output_dropout=0.0, bias=True, device=None, dtype=None, weight_layout="nk",
                 fold_norm=False):
        super().__init__()
        if norm not in _NORMS:
            raise ValueError(f"unknown norm '{norm}'; expected layernorm or rmsnorm")
        _check_dropout(dropout)
        _check_layout(weight_layout)
        if gated and weight_layout != "nk":
            raise ValueError("a gated MLP's weights are stored [out, in] (weight_layout='nk')")
        self.p = dropout
        self.weight_layout = weight_layout
        linear = nn.Linear if weight_layout == "nk" else _InOutLinear
        self.proj = linear(in_features, width, bias, device, dtype)
        if norm == "layernorm":
            self.norm = nn.LayerNorm(width, eps, bias=bias, device=device, dtype=dtype)
        else:
            self.norm = nn.RMSNorm(width, eps, device=device, dtype=dtype)
        if gated:
            self.mlp = GatedMLP(width, hidden_features, activation=activation or "silu",
                                device=device, dtype=dtype)
        else:
            self.mlp = MLP(width, hidden_features, activation=activation or "gelu",
                           dropout=mlp_dropout, bias=bias, device=device, dtype=dtype,
                           output_dropout=output_dropout, weight_layout=weight_layout)
        self._proj = _projection_norm(norm, eps, bias, norm == "layernorm" and bias, dropout,
                                      weight_layout)
        self._norm_kind, self._eps = norm, eps
        self.fold_norm = fold_norm

    @property
    def fold_norm(self):
        return self._fold_norm

    @fold_norm.setter
    def fold_norm(self, fold):
        if fold and not (self._norm_kind == "rmsnorm" and isinstance(self.mlp, GatedMLP)
                         and self.proj.bias is None and not self.p):
            raise ValueError("fold_norm needs an RMSNorm, a gated MLP and neither biases nor "
                             "dropout (LLaMA's block)")
        self._fold_norm = bool(fold)

    def forward(self, x, residual):
        lead = residual.shape
        x2 = x.reshape(-1, _width(self.proj, self.weight_layout, 0)).contiguous()
        named = [("bias", self.proj.bias), ("residual", residual.reshape(-1, lead[-1])),
                 ("gamma", self.norm.weight), ("beta", getattr(self.norm, "bias", None))]
        tensors = [t for _, t in named if t is not None]
        names = ",".join(n for n, t in named if t is not None)
        if not self.training:
            up, p, w1, b1, down, output_p, w2, b2 = self.mlp._programs(True)
            normed, h = run(self._proj.key, "inference" if self.p else "", x2, self.proj.weight,
                            tensors, names, [], "", _no_seed(x))
            y = _inference(up, p, normed, w1, b1, down, output_p, w2, b2, h)
            return y.reshape(lead)
        if self.fold_norm:
            mlp = self.mlp
            x2, w0, w2, residual2 = _autocast(x2, self.proj.weight, mlp.down_proj.weight,
                                              named[1][1])
            dtype = x2.dtype
            keys = (_folded_gated_family(mlp.activation).key, mlp._down[True].key)
            gate = mlp.gate_proj.weight
            needs = (x2.requires_grad, w0.requires_grad,
                     gate.requires_grad or mlp.up_proj.weight.requires_grad, w2.requires_grad,
                     residual2.requires_grad or self.norm.weight.requires_grad)
            if not torch.compiler.is_compiling() and torch.is_grad_enabled() and any(needs):
                # The later forward programs and the backward's, compiled
                # while the first runs.
                shapes = (x2.shape, w0.shape, (2 * gate.shape[0], gate.shape[1]), w2.shape)
                autograd._compile_ahead(("folded", keys, dtype, *shapes, needs), _folded_jobs,
                                        x2, keys, *shapes, needs)
            y = _FoldedNormTail.apply(keys, x2, w0, residual2.contiguous(), self.norm.weight,
                                      self._eps, dtype,
                                      gate, mlp.up_proj.weight, w2)
            return y.reshape(lead)
        with _remade() as remade:
            up, p, w1, b1, down, output_p, w2, b2 = self.mlp._programs(True, remade, x2)
            seed0, seed, output_seed = _seeds(self, x, self.p, p, output_p)
            y = tail(self._proj.key, up.key, down.key, x2, self.proj.weight, tensors, names, w1,
                     b1, w2, b2, seed0, seed, output_seed)[0]
        return y.reshape(lead)

    def extra_repr(self):
        return (f"dropout={self.p}"
                + (f", weight_layout={self.weight_layout}" if self.weight_layout != "nk" else ""))
