"""coda.patch(model): a PyTorch model's Transformer blocks on coda kernels,
in place.

Recognized, by their structure (the modules and attributes they hold):

- an MLP: a module with ``c_fc`` and ``c_proj`` (nn.Linear, or Hugging
  Face's ``Conv1D``, whose weight is stored [in, out]) and an activation
  module (``gelu``, ``act`` or ``activation``), as nanoGPT's ``MLP`` and
  Hugging Face's ``GPT2MLP``; a module of nothing but ``fc1``, ``fc2``
  (nn.Linear) and ``activation_fn``, as Hugging Face's ``ViTMLP``,
  ``CLIPMLP`` and ``SiglipMLP``; or an ``nn.Sequential`` of Linear,
  activation, Linear. Its forward
  becomes coda's fused MLP (coda.nn.MLP: fc1 + activation in one kernel, fc2
  + bias, its dropout when the MLP has one after the second Linear, in
  another, fc1's epilogue gradient on fc2's dgrad GEMM);
- Hugging Face's ``GPT2Block`` (transformers 5): its attention's output
  projection (``c_proj``, a Conv1D read as stored), ``resid_dropout``, the
  residual and ``ln_2`` in one kernel, then the MLP with the residual in its
  second (coda.nn.ResidualNormMLP; with a cross-attention, which comes
  before ``ln_2``, coda.nn.OutProjection for the first three and ``ln_2``
  PyTorch's); the attention's ``c_proj`` and ``resid_dropout`` then return
  their input;
- a gated MLP: a module with ``gate_proj``, ``up_proj`` and ``down_proj``
  (nn.Linear without biases) and an activation module ``act_fn``, forward
  ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``, as Hugging Face's
  ``LlamaMLP`` (and Mistral's, Qwen2's, Gemma's): coda.nn.GatedMLP, the gate
  and up projections one GEMM with the gated activation in its epilogue, its
  gradient on the down projection's dgrad GEMM;
- a LLaMA-style decoder layer (Hugging Face's LlamaDecoderLayer, Mistral's,
  Qwen2's, Qwen3's: input_layernorm, self_attn with an nn.Linear o_proj, an RMSNorm
  post_attention_layernorm and a gated mlp): after attention, the output
  projection and the residual in one kernel, the RMSNorm folded into the
  gate and up projections' GEMM and the gated MLP with the residual in its
  second (coda.nn.ResidualNormMLP, fold_norm; with biases of the
  projections, the output projection, the residual and the RMSNorm in one
  kernel, the norm's backward on the gate and up projections' dgrad GEMM);
  before attention,
  where _rotary_head recognizes them, the input RMSNorm, the Q, K and V
  projections (and Qwen3's per-head norms) and the rotary embedding in one
  kernel (coda.nn.RMSNormRotaryQKV);
- an nn.Linear whose in or out features are not a multiple of 8 (the head
  of an unpadded vocabulary, GPT-2's 50257): coda's GEMM, whose operands
  and outputs may have any width, where cuBLAS falls back to kernels
  several times slower (bf16 and f16 in eager mode; float32 CUDA tensors,
  and the layer under torch.compile, whose inductor pads it, stay on
  F.linear);
- Hugging Face BERT's ``BertLayer``: its feed-forward half
  (``feed_forward_chunk``: ``BertIntermediate``, ``dense``, an nn.Linear
  with a bias, then ``intermediate_act_fn``; then ``BertOutput``, ``dense``,
  ``dropout`` and ``LayerNorm``, forward ``LayerNorm(dropout(dense(h)) +
  x)``) as coda's fused MLP with x as its residual, then the LayerNorm;
  ``BertSelfOutput`` (the attention's output, the same three children and
  forward): the projection, its dropout and the residual in one kernel
  (coda.nn.OutProjection), then the LayerNorm; a ``BertIntermediate`` or
  ``BertOutput`` outside such a layer on its own kernel (the projection,
  bias and activation; the projection, dropout and residual); and the same
  modules of the models that copy BERT's (``RobertaLayer``,
  ``RobertaOutput``, ...: a class name of the model's prefix and these
  suffixes);
- Hugging Face DistilBERT's ``TransformerBlock``: its feed-forward half
  (``ffn``: ``lin1``, its activation, ``lin2`` and ``dropout``; then the
  residual and ``output_layer_norm``) as coda's fused MLP with the
  attention's normalized output as its residual, then the LayerNorm;
- Hugging Face T5's ``T5LayerFF`` (and MT5's, UMT5's, LongT5's, ...:
  ``layer_norm``, ``DenseReluDense`` of nn.Linear ``wi`` and ``wo`` without
  biases, ``act`` and ``dropout``, and ``dropout``, forward ``x +
  dropout(wo(dropout(act(wi(layer_norm(x))))))``): the RMSNorm, then
  coda's fused MLP with both dropouts and x as its residual; a gated
  ``DenseReluDense`` (T5 v1.1's ``wi_0`` and ``wi_1``) as coda.nn.GatedMLP
  with the residual where both dropouts are 0 (it applies none), else left
  as it is;
- Hugging Face BERT's ``BertSelfAttention`` (transformers 5; the same
  module of the models that copy BERT's): its ``query``, ``key`` and
  ``value`` projections as one GEMM over their weights stacked, their
  biases in its epilogue, then the model's own attention function;
- a Hugging Face causal language model whose loss is plain cross-entropy
  on its logits (``...ForCausalLM``, ``...LMHeadModel`` of a model type in
  _PLAIN_CAUSAL_LMS, LLaMA's, GPT-2's, Gemma's, Phi's, GPT-NeoX's, OPT's and
  more: ``lm_head``, an nn.Linear, over its base model): in training with
  labels, the loss from the last hidden states (scaled where the model
  scales its logits: Granite, Cohere; of the logits soft-capped where it
  caps them: Gemma 2 and 3) by coda.nn.linear_cross_entropy (the head's
  bias too), the head's GEMM with the loss's
  row statistics in its epilogue, the logits never written (the output's
  ``logits`` is None then);
- a Hugging Face RMSNorm no coda kernel folds (``LlamaRMSNorm``'s forward:
  ``weight`` and ``variance_epsilon``; a LLaMA model's final norm, T5's
  ``T5LayerNorm``): PyTorch's
  fused ``F.rms_norm`` where x and the weight share a type (one kernel
  forward and one backward, for the module's six and more);
- Hugging Face's ``BertForMaskedLM``: in training with labels, the
  masked-LM loss from the head's transform of the hidden states by
  coda.nn.linear_cross_entropy with the decoder's bias, no logits;
- a nanoGPT-style block: ``ln_1``, ``attn``, ``ln_2`` and ``mlp``, its
  forward ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``, with ``attn``
  holding ``c_attn``, ``c_proj`` (nn.Linear), ``resid_dropout`` and
  ``n_head``. Attention itself stays PyTorch's scaled_dot_product_attention
  (causal); the output projection, its dropout, the residual and ``ln_2``
  (an nn.LayerNorm with a weight and a bias; otherwise it stays PyTorch's)
  become one coda kernel, and the residual rides in the MLP's second kernel
  (coda.nn.ResidualNormMLP).

Parameters stay where they are: the patched modules keep their children,
``state_dict`` keys and initialization, and an optimizer built before or
after the patch trains the same tensors. Activations: nn.GELU (erf or
tanh), nn.ReLU, nn.SiLU, nn.Sigmoid, nn.Tanh, and Hugging Face's GELU
(``gelu``), tanh-approximated GELUs (``gelu_new``, ``gelu_pytorch_tanh``),
SiLU and CLIP's QuickGELU (``quick_gelu``), recognized by their class
names (transformers is not imported). What is not recognized is left as it
is, and the report says what was replaced and what was not, and why.
"""

import copy
import functools
import inspect
import sys

import torch.nn.functional as F

from .runtime import _require_torch

torch = _require_torch("coda.patch")
from torch import nn  # noqa: E402

from . import nn as coda_nn  # noqa: E402

# The MLP modules _mlp_parts recognizes besides an nn.Sequential, by the
# names of their children: (the first projection, the second, the
# activation's names, every child the module may hold, or None when it may
# hold more: a dropout after the second projection). nanoGPT's MLP and
# GPT-2's; then ViT's, CLIP's and SigLIP's, which hold nothing else (BART's
# layer, which holds them beside its attention, is no MLP).
_MLP_NAMINGS = (("c_fc", "c_proj", ("gelu", "act", "activation"), None),
                ("fc1", "fc2", ("activation_fn",), {"fc1", "fc2", "activation_fn"}))
# Hugging Face's activation classes (transformers.activations), by name.
_HF_ACTIVATIONS = {"GELUActivation": "gelu_erf", "NewGELUActivation": "gelu",
                   "GELUTanh": "gelu", "PytorchGELUTanh": "gelu", "SiLUActivation": "silu",
                   "QuickGELUActivation": "quick_gelu"}


class PatchReport:
    """What coda.patch did: `replaced` and `skipped`, lists of (module name,
    description)."""

    def __init__(self):
        self.replaced, self.skipped = [], []

    def __str__(self):
        lines = [f"coda.patch: {len(self.replaced)} modules replaced"]
        lines += [f"  {name or '<model>'}: {what}" for name, what in self.replaced]
        lines += [f"  left as is: {name or '<model>'}: {why}" for name, why in self.skipped]
        return "\n".join(lines)


def _activation(module):
    """The coda DSL activation of an activation module, or None."""
    if isinstance(module, nn.GELU):
        return "gelu" if module.approximate == "tanh" else "gelu_erf"
    for kind, name in ((nn.ReLU, "relu"), (nn.SiLU, "silu"), (nn.Sigmoid, "sigmoid"),
                       (nn.Tanh, "tanh")):
        if isinstance(module, kind):
            return name
    if getattr(module, "use_gelu_python", False):
        return "gelu_erf"
    return _HF_ACTIVATIONS.get(type(module).__name__)


def _layout(module):
    """How a projection's weight is stored: "nk" for an nn.Linear ([out,
    in]), "kn" for Hugging Face's Conv1D ([in, out]), else None."""
    if isinstance(module, nn.Linear):
        return "nk"
    weight = getattr(module, "weight", None)
    if (type(module).__name__ == "Conv1D" and isinstance(weight, torch.Tensor)
            and weight.dim() == 2 and getattr(module, "nf", None) == weight.shape[1]):
        return "kn"
    return None


def _features(module):
    """(in features, out features) of a projection _layout recognizes."""
    rows, cols = module.weight.shape
    return (cols, rows) if _layout(module) == "nk" else (rows, cols)


def _mlp_naming(module):
    """The entry of _MLP_NAMINGS whose projections `module` holds (with
    nothing else where the entry says so), else None."""
    for naming in _MLP_NAMINGS:
        first, second, _, only = naming
        if (_layout(getattr(module, first, None)) is not None
                and _layout(getattr(module, second, None)) is not None
                and (only is None or set(module._modules) == only)):
            return naming
    return None


def _mlp_parts(module):
    """(fc1, activation name, fc2, the probability of the dropout after fc2)
    of an MLP module, or a string that says why it is not one (None if it
    does not look like one at all)."""
    if isinstance(module, nn.Sequential):
        children = list(module)
        if len(children) not in (3, 4) or not all(
                isinstance(m, nn.Linear) for m in (children[0], children[2])):
            return None
        fc1, act, fc2 = children[:3]
        dropout = children[3] if len(children) == 4 else None
        if dropout is not None and not isinstance(dropout, nn.Dropout):
            return None
    else:
        naming = _mlp_naming(module)
        if naming is None:
            return None
        first, second, activations, _ = naming
        fc1, fc2 = getattr(module, first), getattr(module, second)
        if _layout(fc1) != _layout(fc2):
            return "one projection is an nn.Linear and the other a Conv1D"
        act = next((getattr(module, n) for n in activations
                    if isinstance(getattr(module, n, None), nn.Module)), None)
        dropout = getattr(module, "dropout", None)
        if act is None:
            return f"an MLP without an activation module ({' or '.join(activations)})"
    name = _activation(act)
    if name is None:
        return f"activation {type(act).__name__} has no coda epilogue"
    if (fc1.bias is None) != (fc2.bias is None):
        return "one projection has a bias and the other not"
    if _features(fc1)[1] != _features(fc2)[0]:
        return "the projections' sizes do not chain"
    return fc1, name, fc2, dropout.p if isinstance(dropout, nn.Dropout) else 0.0


def _describe(parts):
    """What the report calls an MLP of `parts` (_mlp_parts)."""
    _, activation, _, output_dropout = parts
    return f"MLP ({activation}{f', dropout {output_dropout}' if output_dropout else ''})"


def _fused_mlp(fc1, activation, fc2, output_dropout, dropout=0.0):
    """coda's MLP over the existing fc1 and fc2 (their parameters, not
    copies), outside the model's module tree; `dropout` after the
    activation."""
    (d, h), (_, out) = _features(fc1), _features(fc2)
    core = coda_nn.MLP(d, h, out, activation=activation, dropout=dropout,
                       bias=fc1.bias is not None, device="meta",
                       output_dropout=output_dropout, weight_layout=_layout(fc1))
    core.fc1, core.fc2 = fc1, fc2
    return core


def _run(core, owner, x, **inputs):
    """`core` in `owner`'s training mode."""
    core.training = owner.training
    return core(x, **inputs)


def _kept(forward, *pairs):
    """`forward`, raising first when any (owner, child name) of `pairs` no
    longer holds the module it holds now. A patched forward holds the modules
    it was made of: a wrapper put in their place after coda.patch (LoRA,
    quantization) would be bypassed without a word."""
    held = [(owner, name, owner._modules[name]) for owner, name in pairs]

    @functools.wraps(forward)
    def checked(*args, **kwargs):
        for owner, name, module in held:
            if owner._modules.get(name) is not module:
                raise RuntimeError(
                    f"{type(owner).__name__}.{name} was replaced after coda.patch (by a LoRA or "
                    "quantization wrapper?), and the patched forward would bypass it: apply "
                    "coda.patch after wrapping the model's layers (it leaves the wrapped ones "
                    "as they are)")
        return forward(*args, **kwargs)
    return checked


def _checkpointed(layer, forward):
    """`forward` under `layer`'s gradient checkpointing, as transformers 5
    applies it in a GradientCheckpointingLayer's class forward, which a
    patched instance forward replaces: with gradients in training, the
    layer is run again in the backward, the key and value cache off."""
    def checkpointed(*args, **kwargs):
        if getattr(layer, "gradient_checkpointing", False) and layer.training and \
                torch.is_grad_enabled():
            if kwargs.get("use_cache"):
                kwargs["use_cache"] = False
            if not getattr(layer, "_can_checkpoint_with_cache", False):
                for name in ("cache", "past_key_values"):
                    if kwargs.get(name) is not None:
                        kwargs[name] = None
            return layer._gradient_checkpointing_func(functools.partial(forward, **kwargs),
                                                      *args)
        return forward(*args, **kwargs)
    return checkpointed


def _mlp_children(module):
    """(module, child name) of an MLP's two projections (_mlp_parts)."""
    names = ("0", "2") if isinstance(module, nn.Sequential) else _mlp_naming(module)[:2]
    return [(module, name) for name in names]


def _patch_mlp(module, parts):
    core = _fused_mlp(*parts)
    object.__setattr__(module, "_coda_mlp", core)

    def forward(x, residual=None):
        return _run(core, module, x, residual=residual)

    module.forward = _kept(forward, *_mlp_children(module))
    return f"{_describe(parts)} as coda's fused MLP"


def _gated_parts(module):
    """(the activation name,) of a gated MLP module, a string that says why
    it is left as it is, or None when it is not one."""
    projections = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    act = getattr(module, "act_fn", None)
    if not all(isinstance(p, nn.Linear) for p in projections) or not isinstance(act, nn.Module):
        return None
    gate, up, down = projections
    if any(p.bias is not None for p in projections):
        return "a gated MLP with biases"
    name = _activation(act)
    if name is None:
        return f"activation {type(act).__name__} has no coda epilogue"
    if (gate.weight.shape != up.weight.shape
            or down.in_features != gate.out_features):
        return "the projections' sizes do not chain"
    return (name,)


def _fused_gated(gate, up, down, activation):
    """coda's gated MLP over the existing gate, up and down projections
    (their parameters, the gate's and up's weights then views of one
    buffer), outside the model's module tree."""
    core = coda_nn.GatedMLP(gate.in_features, gate.out_features, down.out_features,
                            activation=activation, device="meta")
    core.gate_proj, core.up_proj, core.down_proj = gate, up, down
    core._share_weights()
    return core


def _patch_gated(module, activation):
    core = _fused_gated(module.gate_proj, module.up_proj, module.down_proj, activation)
    object.__setattr__(module, "_coda_mlp", core)

    def forward(x):
        return _run(core, module, x)

    module.forward = _kept(forward, *((module, name)
                                      for name in ("gate_proj", "up_proj", "down_proj")))
    return f"gated MLP ({activation}) as coda's fused gated MLP"


def _attention_parts(attn):
    """Whether `attn` is nanoGPT-style causal self-attention."""
    return (isinstance(getattr(attn, "c_attn", None), nn.Linear)
            and isinstance(getattr(attn, "c_proj", None), nn.Linear)
            and isinstance(getattr(attn, "resid_dropout", None), nn.Dropout)
            and isinstance(getattr(attn, "n_head", None), int))


def _attention(attn, x):
    """nanoGPT's causal self-attention of x [B, T, C], before its output
    projection: [B, T, C]."""
    batch, tokens, channels = x.shape
    heads = attn.n_head
    q, k, v = attn.c_attn(x).split(channels, dim=2)
    q, k, v = (t.view(batch, tokens, heads, channels // heads).transpose(1, 2)
               for t in (q, k, v))
    p = float(getattr(attn, "dropout", 0.0)) if attn.training else 0.0
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    return y.transpose(1, 2).contiguous().view(batch, tokens, channels)


def _block_tail(block, mlp_parts, fold_norm=True):
    """What a GPT-style block (nanoGPT's, GPT-2's) runs after its attention:
    `finish(attended, x)`, the attention's output projection (attn.c_proj,
    its weight read as stored), its dropout (attn.resid_dropout's
    probability) and the residual x, giving h, then ln_2 and the MLP of
    `mlp_parts` with h as its residual; what the report says of it; and the
    (owner, child name) pairs it reads (_kept). With `fold_norm`, ln_2 an
    nn.LayerNorm with a weight and a bias and a projection with a bias, the
    projection, its dropout, the residual and ln_2 are one kernel, and the
    MLP's two follow (coda.nn.ResidualNormMLP, the norm's backward on fc1's
    dgrad GEMM); otherwise the projection, its dropout and the residual are
    one kernel (coda.nn.OutProjection), ln_2 stays PyTorch's, then the fused
    MLP, and `finish(attended, x, middle)` applies `middle` to h before
    ln_2 (GPT-2's cross-attention). Their programs have no parameters of
    their own: each call takes the modules' as they are then."""
    attn, norm = block.attn, block.ln_2
    proj = attn.c_proj
    in_features, out_features = _features(proj)
    mlp = _fused_mlp(*mlp_parts)
    held = ((block, "attn"), (block, "mlp"), (block, "ln_2"), (attn, "c_proj"),
            *_mlp_children(block.mlp))
    if (fold_norm and type(norm) is nn.LayerNorm and norm.normalized_shape == (out_features,)
            and norm.weight is not None and norm.bias is not None and proj.bias is not None):
        core = coda_nn.ResidualNormMLP(in_features, out_features, _features(mlp_parts[0])[1],
                                       eps=norm.eps, dropout=attn.resid_dropout.p,
                                       weight_layout=_layout(proj), device="meta")
        core.proj, core.norm, core.mlp = proj, norm, mlp
        object.__setattr__(block, "_coda_tail", core)

        def finish(attended, x):
            core.training = block.training
            return core(attended, x)

        return finish, held, ("block: attention output projection + dropout + residual + ln_2 "
                              f"in one kernel, {_describe(mlp_parts)} + residual as coda's fused "
                              "MLP")
    out = coda_nn.OutProjection(in_features, out_features, dropout=attn.resid_dropout.p,
                                weight_layout=_layout(proj), device="meta")
    object.__setattr__(block, "_coda_out_projection", out)
    object.__setattr__(block, "_coda_mlp", mlp)

    def finish(attended, x, middle=None):
        out.training = block.training
        h = out._forward(proj.weight, proj.bias, attended, None, {"residual": x}).view(x.shape)
        if middle is not None:
            h = middle(h)
        return _run(mlp, block, norm(h), residual=h)

    return finish, held, ("block: attention output projection + dropout + residual in one "
                          f"kernel, {_describe(mlp_parts)} + residual as coda's fused MLP")


def _patch_block(block, mlp_parts):
    attn = block.attn
    if attn.c_proj.bias is None:
        return None
    finish, held, what = _block_tail(block, mlp_parts)

    def forward(x):
        return finish(_attention(attn, block.ln_1(x)), x).view(x.shape)

    block.forward = _kept(forward, *held)
    return what


_DECODER_CHILDREN = {"input_layernorm", "self_attn", "post_attention_layernorm", "mlp"}
# Model types whose decoder layer computes LLaMA's layer (pre-norm residuals,
# no multipliers), and those whose attention rotates LLaMA's way too
# (rotate-half on every layer, no query scaling): others that share the
# module structure (Granite's residual multiplier, Helium's interleaved
# rotation, SmolLM3's layers without one) are left as they are.
_LLAMA_LAYERS = ("llama", "mistral", "qwen2", "qwen3")
_LLAMA_ROTARY = ("llama", "mistral", "qwen2", "qwen3")
# The widest row whose norm the GPU's kernels compute in one cluster.
_WIDEST_NORM = 4096


def _rmsnorm_eps(norm, width):
    """The epsilon of an RMSNorm module of `width` whose forward is
    Hugging Face's (LlamaRMSNorm's: `weight` and `variance_epsilon`; T5's
    T5LayerNorm, the same where x and the weight share a type), else
    None."""
    if (type(norm).__name__.endswith(("RMSNorm", "T5LayerNorm"))
            and isinstance(getattr(norm, "variance_epsilon", None), float)
            and isinstance(getattr(norm, "weight", None), torch.Tensor)
            and norm.weight.shape == (width,)):
        return norm.variance_epsilon
    return None


def _decoder_parts(layer):
    """(the gated MLP's activation name, the rotary head's arguments or why
    the attention's input stays PyTorch's) of a LLaMA-style decoder layer
    (Hugging Face's LlamaDecoderLayer, Mistral's, Qwen2's, Qwen3's: exactly the
    children input_layernorm, self_attn with an nn.Linear o_proj,
    post_attention_layernorm, an RMSNorm with `weight` and
    `variance_epsilon`, and a gated MLP), a string that says why it is left
    as it is, or None when it is not one."""
    children = dict(layer.named_children())
    if set(children) != _DECODER_CHILDREN or not type(layer).__name__.endswith("DecoderLayer"):
        return None
    model_type = getattr(getattr(children["self_attn"], "config", None), "model_type", None)
    if model_type not in _LLAMA_LAYERS:
        return f"a decoder layer of model type {model_type!r}, which may differ from LLaMA's"
    proj = getattr(children["self_attn"], "o_proj", None)
    norm = children["post_attention_layernorm"]
    gated = _gated_parts(children["mlp"])
    if not isinstance(proj, nn.Linear) or not isinstance(gated, tuple):
        return None
    if _rmsnorm_eps(norm, proj.out_features) is None:
        return "a post-attention norm that is not an RMSNorm of weight and variance_epsilon"
    if proj.out_features > _WIDEST_NORM:
        return (f"rows of {proj.out_features} columns: the fused norm spans at most "
                f"{_WIDEST_NORM}")
    version = _transformers_version()
    if version < (5,):
        return (f"a decoder layer of transformers {'.'.join(map(str, version))}, whose layers "
                "return tuples (the patched layer returns a tensor, as transformers 5 does)")
    return (*gated, _rotary_head(layer, proj.out_features))


# Rotary embeddings whose frequencies change with the sequence's length.
_DYNAMIC_ROPE = ("dynamic", "longrope")


def _rotary_head(layer, width):
    """The arguments of coda.nn.RMSNormRotaryQKV for a decoder layer's
    input RMSNorm, Q, K and V projections and rotary embedding: its
    attention holds exactly q_proj, k_proj, v_proj and o_proj (nn.Linear;
    the first three all with biases, as Qwen2's, or all without), and q_norm
    and k_norm when it normalizes each query and key head (Qwen3's QK-norm:
    RMSNorms of one epsilon over a head's columns), attends without a
    sliding window, over heads of a power-of-2 width rotated whole, and its
    module defines the attention functions it calls and its rotary embedding
    class (<Model>RotaryEmbedding). Its frequencies are taken from that class
    (the default, linear and llama3 rotary embeddings); where they change
    with the sequence's length or its cos and sin are scaled (dynamic,
    longrope, yarn), `tables`: the kernel rotates by the cos and sin the
    model passes its layers (position_embeddings). Else why not (a
    string)."""
    attn = layer.self_attn
    projections = [getattr(attn, name, None) for name in ("q_proj", "k_proj", "v_proj")]
    children = set(dict(attn.named_children()))
    qk_norm = children == {"q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"}
    biases = {getattr(p, "bias", None) is not None for p in projections}
    if (children != {"q_proj", "k_proj", "v_proj", "o_proj"} and not qk_norm) or not all(
            isinstance(p, nn.Linear) and p.in_features == width
            for p in projections) or len(biases) != 1:
        return ("its attention is not Q, K, V and output projections, the first three all "
                "with biases or all without (and the heads' norms)")
    eps = _rmsnorm_eps(layer.input_layernorm, width)
    if eps is None:
        return "an input norm that is not an RMSNorm of weight and variance_epsilon"
    config = getattr(attn, "config", None)
    if config.model_type not in _LLAMA_ROTARY:
        return f"the rotary embedding of model type {config.model_type!r}"
    if getattr(attn, "sliding_window", getattr(config, "sliding_window", None)) is not None:
        return "a sliding-window attention"
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        return "a rotary embedding of part of each head"
    head_dim = getattr(attn, "head_dim", 0)
    heads, kv_heads = projections[0].out_features // max(head_dim, 1), \
        projections[1].out_features // max(head_dim, 1)
    if head_dim < 2 or head_dim & (head_dim - 1) or heads * head_dim != projections[0].out_features:
        return f"heads of {head_dim} columns, not a power of 2"
    if (kv_heads * head_dim != projections[1].out_features or kv_heads < 1 or heads % kv_heads
            or projections[2].out_features != projections[1].out_features):
        return "key and value projections that are not whole groups of heads"
    functions = sys.modules.get(type(attn).__module__)
    rotary_class = getattr(functions, type(attn).__name__.replace("Attention", "RotaryEmbedding"),
                           None)
    if rotary_class is None or not all(
            hasattr(functions, name) for name in ("ALL_ATTENTION_FUNCTIONS",
                                                  "eager_attention_forward")):
        return "an attention whose module does not define its attention functions"
    try:
        rotary = rotary_class(config)
    except Exception as error:  # noqa: BLE001 - a configuration the class does not take
        return f"a rotary embedding that does not build from its config ({error})"
    rope_type = getattr(rotary, "rope_type", None)
    tables = not isinstance(rope_type, str) or any(kind in rope_type for kind in _DYNAMIC_ROPE) or (
        getattr(rotary, "attention_scaling", None) != 1.0)
    arguments = dict(width=width, heads=heads, kv_heads=kv_heads, head_dim=head_dim, eps=eps,
                     inv_freq=rotary.inv_freq, tables=tables, bias=biases.pop())
    if qk_norm:
        qk_eps = {_rmsnorm_eps(attn.q_norm, head_dim), _rmsnorm_eps(attn.k_norm, head_dim)}
        if None in qk_eps or len(qk_eps) != 1:
            return "heads' norms that are not RMSNorms of one epsilon over a head"
        arguments.update(qk_norm=True, qk_eps=qk_eps.pop())
    return arguments


def _rotary_attention(attn, head, hidden_states, position_ids, cache, kwargs, tables):
    """Hugging Face's attention (LlamaAttention.forward) up to its output
    projection, its input from coda's RMSNormRotaryQKV: the queries, keys
    and values normalized, projected and rotated in one kernel (by the
    model's cos and sin with `tables`, else by the positions), then the
    model's own attention function (SDPA, eager, flash) and `cache`."""
    if tables:
        q, k, v = head(hidden_states, position_embeddings=kwargs["position_embeddings"])
    else:
        q, k, v = head(hidden_states, position_ids)
    if cache is not None:
        k, v = cache.update(k, v, attn.layer_idx, kwargs=kwargs)
    kwargs.pop("position_embeddings", None)
    mask = kwargs.pop("attention_mask", None)
    out, _ = _attend(attn, q, k, v, mask, attn.attention_dropout, kwargs)
    return out.reshape(*hidden_states.shape[:-1], -1)


def _attend(attn, q, k, v, mask, dropout, kwargs):
    """Hugging Face's attention of `attn` on q, k, v ([batch, heads, tokens,
    head_dim]): the function its config names (SDPA, eager, flash), from
    the attention's own module, with dropout probability `dropout` in
    training; (output [batch, tokens, heads, head_dim], weights or None)."""
    functions = sys.modules[type(attn).__module__]
    interface = functions.ALL_ATTENTION_FUNCTIONS.get_interface(
        attn.config._attn_implementation, functions.eager_attention_forward)
    return interface(attn, q, k, v, mask, dropout=dropout if attn.training else 0.0,
                     scaling=attn.scaling, **kwargs)


def _patch_decoder(layer, activation, rotary):
    """A LLaMA-style decoder layer: the input RMSNorm, the Q, K and V
    projections and the rotary embedding in one kernel
    (coda.nn.RMSNormRotaryQKV, when _rotary_head recognizes them), the
    model's attention, then the output projection, the residual and the
    post-attention RMSNorm in one kernel and the gated MLP with the residual
    in its second kernel (coda.nn.ResidualNormMLP); the norm's backward
    rides on the gate and up projections' dgrad GEMM. The attention's o_proj
    then returns its input: the layer applies it."""
    attn, norm, mlp = layer.self_attn, layer.post_attention_layernorm, layer.mlp
    proj, gate = attn.o_proj, mlp.gate_proj
    core = coda_nn.ResidualNormMLP(proj.in_features, proj.out_features, gate.out_features,
                                   norm="rmsnorm", eps=norm.variance_epsilon, gated=True,
                                   activation=activation, bias=proj.bias is not None,
                                   device="meta")
    core.proj, core.norm = proj, norm
    core.mlp.gate_proj, core.mlp.up_proj, core.mlp.down_proj = gate, mlp.up_proj, mlp.down_proj
    core.mlp._share_weights()
    # LLaMA's block: the norm folded into the gate and up projections'
    # product (1 ms a step less on LLaMA-1B, docs/performance.md).
    core.fold_norm = proj.bias is None
    object.__setattr__(layer, "_coda_tail", core)
    head, tables = None, False
    if isinstance(rotary, dict):
        tables = rotary.pop("tables")
        head = coda_nn.RMSNormRotaryQKV(**rotary, device="meta")
        head.norm, head.q_proj, head.k_proj, head.v_proj = (layer.input_layernorm, attn.q_proj,
                                                             attn.k_proj, attn.v_proj)
        if rotary.get("qk_norm"):
            head.q_norm, head.k_norm = attn.q_norm, attn.k_norm
        head._share_weights()
        object.__setattr__(layer, "_coda_head", head)
    proj.forward = lambda x: x
    # How the attention module's own forward takes the cache (earlier
    # transformers 5 releases: past_key_values).
    attn_cache = _cache_keyword(type(attn).forward) or "cache"

    def forward(hidden_states, *args, **kwargs):
        if args:
            raise TypeError("the patched decoder layer takes its arguments after "
                            "hidden_states by keyword")
        # The cache under either name: past_key_values (transformers 5's
        # earlier releases, and what later layers rename to cache).
        cache = kwargs.pop("cache", kwargs.pop("past_key_values", None))
        position_ids = kwargs.get("position_ids")
        # The attention module's own forward where something watches it: a
        # hook (transformers records attention weights by hooks on it) or a
        # request for the weights.
        watched = (attn._forward_hooks or attn._forward_pre_hooks
                   or kwargs.get("output_attentions"))
        if (head is not None and not watched
                and kwargs.get("position_embeddings" if tables else "position_ids") is not None):
            attended = _rotary_attention(attn, head, hidden_states, position_ids, cache, kwargs,
                                         tables)
        else:
            if cache is not None:
                kwargs[attn_cache] = cache
            x = layer.input_layernorm(hidden_states)
            attended, _ = attn(hidden_states=x, **kwargs)
        core.training = layer.training
        return core(attended, hidden_states)

    layer.forward = _checkpointed(layer, _kept(
        forward, (layer, "self_attn"), (layer, "mlp"), (layer, "input_layernorm"),
        (layer, "post_attention_layernorm"), (attn, "o_proj"),
        *((mlp, name) for name in ("gate_proj", "up_proj", "down_proj")),
        *((attn, name) for name in ("q_proj", "k_proj", "v_proj", "q_norm", "k_norm")
          if head is not None and hasattr(attn, name))))
    qk_norm = head is not None and head.qk_eps is not None
    what = ("decoder layer: input RMSNorm + QKV projection + "
            + ("the heads' RMSNorms + " if qk_norm else "")
            + "rotary embedding" + (" (the model's cos and sin)" if tables else "")
            + " in one kernel, " if head is not None else "decoder layer: ")
    what += ("attention output projection + residual in one kernel, RMSNorm folded into "
             "the gate and up projections' GEMM, " if core.fold_norm else
             "attention output projection + residual + RMSNorm in one kernel, ")
    what += f"gated MLP ({activation}) + residual as coda's fused gated MLP"
    if head is None:
        what += f" (the input RMSNorm, Q, K and V stay PyTorch's: {rotary})"
    return what


def _linear_epilogue(bias):
    """The epilogue of a linear layer, with its bias or without, as a
    function of the operand type's name."""
    return lambda t: ("EPILOGUE linear(bias: " + t + "[N]) {\n  output = input + bias;\n}\n"
                      if bias else "EPILOGUE linear() {\n  output = input;\n}\n")


def _patch_linear(module):
    """An nn.Linear of a width cuBLAS runs slowly (in or out features not a
    multiple of 8: an unpadded vocabulary's head) on coda's GEMM, its bias in
    the epilogue; its parameters as they are at each call. float32 CUDA
    tensors stay on F.linear (coda multiplies f32 as tf32), and so does the
    layer under torch.compile, whose inductor pads such GEMMs for cuBLAS
    (faster there than coda's unpadded kernels: docs/performance.md)."""
    bias = module.bias is not None
    core = coda_nn.Linear(module.in_features, module.out_features, device="meta",
                          epilogue=_linear_epilogue(bias))
    object.__setattr__(module, "_coda_linear", core)

    def forward(x):
        if torch.compiler.is_compiling() or (x.is_cuda and x.dtype == torch.float32):
            return F.linear(x, module.weight, module.bias)
        core.training = module.training
        return core._forward(module.weight, module.bias, x, None, {})

    module.forward = forward
    return (f"linear {module.in_features} -> {module.out_features}"
            f"{'' if bias else ' (no bias)'}: coda's GEMM (a width not a multiple of 8, "
            f"which cuBLAS runs several times slower)")


def _dense_parts(module):
    """What a Hugging Face BERT module of a dense projection is: ("act", its
    activation name) for BertIntermediate, ("residual", None) for
    BertSelfOutput and BertOutput, a string saying why it is left as it is,
    or None when it is neither."""
    dense = getattr(module, "dense", None)
    if not isinstance(dense, nn.Linear):
        return None
    kind = type(module).__name__
    if kind.endswith("Intermediate"):
        act = getattr(module, "intermediate_act_fn", None)
        name = _activation(act) if isinstance(act, nn.Module) else None
        if name is None:
            return f"activation {type(act).__name__} has no coda epilogue"
    elif kind.endswith("Output") and kind != "Output":
        if not (isinstance(getattr(module, "dropout", None), nn.Dropout)
                and isinstance(getattr(module, "LayerNorm", None), nn.Module)):
            return None
        name = None
    else:
        return None
    if dense.bias is None:
        return "a projection without a bias"
    return ("act", name) if name else ("residual", None)


def _patch_dense(module, parts):
    """BertIntermediate: dense + activation in one coda kernel; BertOutput
    and BertSelfOutput: dense + dropout + residual in one, then the
    module's LayerNorm. The projection's parameters as they are at each
    call."""
    dense = module.dense
    kind, activation = parts
    if kind == "act":
        core = coda_nn.Linear(
            dense.in_features, dense.out_features, device="meta",
            epilogue=lambda t: (f"EPILOGUE dense(bias: {t}[N]) {{\n"
                                f"  output = {activation}(input + bias);\n}}\n"))
        object.__setattr__(module, "_coda_linear", core)

        def forward(hidden_states):
            core.training = module.training
            return core._forward(dense.weight, dense.bias, hidden_states, None, {})

        module.forward = _kept(forward, (module, "dense"))
        return f"projection + bias + {activation} in one kernel"
    out = coda_nn.OutProjection(dense.in_features, dense.out_features,
                                dropout=module.dropout.p, device="meta")
    object.__setattr__(module, "_coda_out_projection", out)

    def forward(hidden_states, input_tensor):
        out.training = module.training
        y = out._forward(dense.weight, dense.bias, hidden_states, None,
                         {"residual": input_tensor})
        return module.LayerNorm(y)

    module.forward = _kept(forward, (module, "dense"))
    return "projection + bias + dropout + residual in one kernel, then its LayerNorm"


def _self_attention_parts(module):
    """(query, key, value) of a Hugging Face BERT-style self-attention of
    transformers 5 (``BertSelfAttention`` and the copies of it: exactly the
    children ``query``, ``key``, ``value``, nn.Linear layers of one shape
    with biases, and ``dropout``; heads of ``attention_head_size`` columns;
    its module defining the attention functions it calls; its forward
    BERT's: hidden_states, attention_mask and a cache, then the attention
    function the config names), a string saying why it is left as it is,
    or None when it is not one."""
    kind = type(module)
    if not kind.__name__.endswith("SelfAttention") or not kind.__module__.startswith(
            "transformers.") or set(dict(module.named_children())) != {
                "query", "key", "value", "dropout"}:
        return None
    projections = [getattr(module, name) for name in ("query", "key", "value")]
    if not all(isinstance(p, nn.Linear) for p in projections) or not isinstance(
            module.dropout, nn.Dropout):
        return None
    if len({(p.in_features, p.out_features) for p in projections}) != 1 or any(
            p.bias is None for p in projections):
        return "Q, K and V projections of different shapes or without biases"
    if getattr(module, "position_embedding_type", "absolute") != "absolute":
        return f"relative position embeddings ({module.position_embedding_type})"
    functions = sys.modules.get(kind.__module__)
    if not all(hasattr(functions, name) for name in ("ALL_ATTENTION_FUNCTIONS",
                                                      "eager_attention_forward")) or not all(
            hasattr(module, name) for name in ("attention_head_size", "scaling", "config")):
        return "an attention whose module does not define its attention functions"
    version = _transformers_version()
    if version < (5,):
        return (f"a self-attention of transformers {'.'.join(map(str, version))}, whose "
                "attention functions differ")
    # BERT's forward (its copies' in other models): (hidden_states,
    # attention_mask, cache) and the attention function the config names.
    cache = _cache_keyword(kind.forward)
    forward = inspect.unwrap(kind.forward)
    if cache is None or list(inspect.signature(forward).parameters)[:4] != [
            "self", "hidden_states", "attention_mask", cache] or \
            "ALL_ATTENTION_FUNCTIONS" not in forward.__code__.co_names:
        return "a self-attention whose forward is not BERT's"
    return tuple(projections)


def _patch_self_attention(module, query, key, value):
    """A BERT-style self-attention: its Q, K and V projections as one coda
    GEMM over their weights stacked (their biases in its epilogue; the
    queries, keys and values views of its output), then the model's own
    attention function. With a key and value cache (a decoder generating)
    or arguments by position, the module's own forward."""
    core = coda_nn.Linear(query.in_features, 3 * query.out_features, device="meta",
                          epilogue=_linear_epilogue(True))
    object.__setattr__(module, "_coda_qkv", core)
    original = type(module).forward

    def forward(hidden_states, attention_mask=None, *args, **kwargs):
        if args or kwargs.get("cache", kwargs.get("past_key_values")) is not None:
            return original(module, hidden_states, attention_mask, *args, **kwargs)
        kwargs.pop("cache", None)
        kwargs.pop("past_key_values", None)
        core.training = module.training
        projections = (query.weight, key.weight, value.weight)
        with coda_nn._remade() as remade:
            # The stacked weight (in autocast's type) is made again in the
            # backward, not held from the forward.
            _, weight = coda_nn._autocast(hidden_states, torch.cat(projections))
            remade(weight, lambda: torch.cat(projections), projections)
            qkv = core._forward(weight, torch.cat((query.bias, key.bias, value.bias)),
                                hidden_states, None, {})
        lead = hidden_states.shape[:-1]
        q, k, v = (t.view(*lead, -1, module.attention_head_size).transpose(1, 2)
                   for t in qkv.split(query.out_features, dim=-1))
        out, weights = _attend(module, q, k, v, attention_mask, module.dropout.p, kwargs)
        return out.reshape(*lead, -1).contiguous(), weights

    module.forward = _kept(forward, *((module, name) for name in ("query", "key", "value")))
    return "Q, K and V projections + biases in one kernel"


def _transformers_version():
    """The loaded transformers' version as a tuple of its leading numbers
    ((5,) when it cannot be read: the modules were recognized by name)."""
    text = getattr(sys.modules.get("transformers"), "__version__", "5")
    numbers = []
    for part in text.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers) or (5,)


def _cache_keyword(forward):
    """The name under which `forward` (a Hugging Face block's or
    attention's) takes the key and value cache: "cache" (later transformers
    5 releases), "past_key_values" (earlier ones, 5.17 among them), or
    None."""
    try:
        names = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("cache", "past_key_values") if name in names), None)


def _gpt2_block_parts(module):
    """(MLP parts (_mlp_parts), the cache's keyword for the block's attention)
    of Hugging Face's GPT2Block of transformers 5 (children ln_1, attn with
    Conv1D c_attn and c_proj and resid_dropout, ln_2, mlp; its forward and
    its attention's taking `cache` or `past_key_values`), a string saying
    why its attention output projection is left as it is, or None when it
    is not one."""
    if type(module).__name__ != "GPT2Block" or not type(module).__module__.startswith(
            "transformers."):
        return None
    attn, mlp = getattr(module, "attn", None), getattr(module, "mlp", None)
    if type(attn).__name__ != "GPT2Attention":
        return None
    parts = _mlp_parts(mlp) if isinstance(mlp, nn.Module) else None
    if not isinstance(parts, tuple):
        return None
    version = _transformers_version()
    if version < (5,):
        return (f"a GPT2Block of transformers {'.'.join(map(str, version))}, whose blocks return "
                "tuples (the patched block returns a tensor, as transformers 5 does)")
    cache = _cache_keyword(type(attn).forward)
    if _cache_keyword(type(module).forward) is None or cache is None:
        return ("a GPT2Block whose forward or attention takes its cache as neither `cache` nor "
                "`past_key_values`")
    proj = getattr(attn, "c_proj", None)
    if _layout(proj) != "kn" or proj.bias is None or not isinstance(
            getattr(attn, "resid_dropout", None), nn.Dropout):
        return "an attention without a Conv1D c_proj with a bias and a resid_dropout"
    return parts, cache


def _patch_gpt2_block(block, mlp_parts, cache_keyword):
    """GPT2Block: the attention's output projection (its Conv1D weight as
    stored), its dropout, the residual and ln_2 in one kernel, then the MLP
    with the residual in its second kernel (_block_tail; with a
    cross-attention, which comes before ln_2, the projection, dropout and
    residual in one kernel, ln_2 PyTorch's). The attention's c_proj and
    resid_dropout then return their input: the block applies them. The
    attention takes the cache as `cache_keyword`."""
    attn = block.attn
    finish, held, what = _block_tail(block, mlp_parts,
                                     fold_norm=not hasattr(block, "crossattention"))
    attn.c_proj.forward = lambda x: x
    attn.resid_dropout.forward = lambda x: x

    # GPT2Block's own signature (the model passes some arguments by position).
    def forward(hidden_states, cache=None, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, use_cache=False, **kwargs):
        # The cache by its other name (later transformers 5 releases renamed
        # past_key_values to cache, and their block's own forward takes
        # either).
        cache = kwargs.pop("past_key_values", cache)
        attended, _ = attn(block.ln_1(hidden_states), attention_mask=attention_mask,
                           use_cache=use_cache, **{cache_keyword: cache}, **kwargs)
        if encoder_hidden_states is None:
            return finish(attended, hidden_states)
        if not hasattr(block, "crossattention"):
            raise ValueError(f"encoder_hidden_states were given, but {type(block).__name__} "
                             "has no cross-attention (config.add_cross_attention)")

        def cross(h):
            crossed, _ = block.crossattention(
                block.ln_cross_attn(h), **{cache_keyword: cache}, attention_mask=attention_mask,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask)
            return h + crossed

        return finish(attended, hidden_states, cross)

    block.forward = _checkpointed(block, _kept(forward, *held, (attn, "resid_dropout")))
    return what


def _bert_layer_parts(module):
    """(intermediate, activation name, output) of a Hugging Face BERT layer
    (``BertLayer`` and the copies of it: a ``feed_forward_chunk`` method over
    children ``intermediate`` and ``output`` that _dense_parts recognizes),
    a string saying why its feed-forward half is left as it is, or None
    when it is not one."""
    intermediate, output = (getattr(module, n, None) for n in ("intermediate", "output"))
    if not (callable(getattr(module, "feed_forward_chunk", None))
            and isinstance(intermediate, nn.Module) and isinstance(output, nn.Module)):
        return None
    # BERT's body, intermediate then output (X-MOD's layer, say, applies its
    # output in its forward instead).
    code = getattr(getattr(module.feed_forward_chunk, "__func__", None), "__code__", None)
    if code is None or not {"intermediate", "output"} <= set(code.co_names):
        return None
    up, down = _dense_parts(intermediate), _dense_parts(output)
    if not (isinstance(up, tuple) and up[0] == "act" and isinstance(down, tuple)
            and down[0] == "residual"):
        return None
    if output.dense.in_features != intermediate.dense.out_features:
        return "the projections' sizes do not chain"
    return intermediate, up[1], output


def _patch_bert_layer(module, intermediate, activation, output):
    """The layer's feed-forward half, LayerNorm(dropout(dense2(act(dense1(x)
    + b1)) + b2) + x), as coda's fused MLP with x as its residual (fc1's
    epilogue gradient on fc2's dgrad GEMM), then the output's LayerNorm."""
    core = _fused_mlp(intermediate.dense, activation, output.dense, output.dropout.p)
    object.__setattr__(module, "_coda_mlp", core)

    def feed_forward_chunk(attention_output):
        return output.LayerNorm(_run(core, module, attention_output, residual=attention_output))

    module.feed_forward_chunk = _kept(feed_forward_chunk, (module, "intermediate"),
                                      (module, "output"), (intermediate, "dense"),
                                      (output, "dense"))
    return (f"feed-forward, {_describe((None, activation, None, output.dropout.p))} + residual "
            "as coda's fused MLP, then its LayerNorm")


def _distilbert_block_parts(module):
    """(activation name,) of Hugging Face DistilBERT's ``TransformerBlock``
    (children ``attention``, ``sa_layer_norm``, ``ffn`` with nn.Linear
    ``lin1`` and ``lin2``, an ``activation`` coda knows and a ``dropout``
    after lin2, and ``output_layer_norm``; forward
    ``output_layer_norm(ffn(a) + a)`` with ``a = sa_layer_norm(attention(x) +
    x)``), a string saying why its feed-forward half is left as it is, or
    None when it is not one."""
    if type(module).__name__ != "TransformerBlock" or not type(module).__module__.startswith(
            "transformers.models.distilbert"):
        return None
    ffn = getattr(module, "ffn", None)
    lin1, lin2 = getattr(ffn, "lin1", None), getattr(ffn, "lin2", None)
    if not (isinstance(lin1, nn.Linear) and isinstance(lin2, nn.Linear)
            and isinstance(getattr(ffn, "dropout", None), nn.Dropout)
            and isinstance(getattr(module, "sa_layer_norm", None), nn.Module)
            and isinstance(getattr(module, "output_layer_norm", None), nn.Module)):
        return None
    act_fn = getattr(ffn, "activation", None)
    activation = _activation(act_fn)
    if activation is None:
        return f"an FFN whose activation {type(act_fn).__name__} coda does not know"
    if getattr(ffn, "chunk_size_feed_forward", 0):
        return "an FFN applied in chunks (chunk_size_feed_forward)"
    if (lin1.bias is None or lin2.bias is None or lin2.in_features != lin1.out_features
            or lin2.out_features != lin1.in_features):
        return "an FFN whose projections lack biases or whose sizes do not chain"
    return (activation,)


def _patch_distilbert_block(block, activation):
    """DistilBERT's block: the attention and its residual's LayerNorm as
    they are, then the feed-forward half, lin2(act(lin1(a))) with its
    dropout and the residual a, as coda's fused MLP (lin1's epilogue
    gradient on lin2's dgrad GEMM), then the output's LayerNorm."""
    ffn, attention = block.ffn, block.attention
    core = _fused_mlp(ffn.lin1, activation, ffn.lin2, ffn.dropout.p)
    object.__setattr__(block, "_coda_mlp", core)

    def forward(hidden_states, attention_mask=None, **kwargs):
        attended, _ = attention(hidden_states, attention_mask=attention_mask, **kwargs)
        normed = block.sa_layer_norm(attended + hidden_states)
        return block.output_layer_norm(_run(core, block, normed, residual=normed))

    block.forward = _checkpointed(block, _kept(
        forward, (block, "attention"), (block, "sa_layer_norm"), (block, "ffn"),
        (block, "output_layer_norm"), (ffn, "lin1"), (ffn, "lin2")))
    return (f"feed-forward, {_describe((None, activation, None, ffn.dropout.p))} + residual "
            "as coda's fused MLP, then its LayerNorm")


def _t5_feed_forward_parts(module):
    """(dense, activation name, the dropout after the activation, whether it
    is gated) of Hugging Face T5's ``T5LayerFF`` and the copies of it (MT5's,
    UMT5's, LongT5's, ...: children ``layer_norm``, ``DenseReluDense`` and
    ``dropout``, forward ``x + dropout(DenseReluDense(layer_norm(x)))``;
    ``DenseReluDense`` a ``T5DenseActDense``, nn.Linear ``wi`` and ``wo``
    without biases, ``act`` and a ``dropout`` between them, or a
    ``T5DenseGatedActDense``, ``wi_0`` and ``wi_1`` for ``wi``), a string
    saying why it is left as it is, or None when it is not one."""
    dense, dropout = (getattr(module, n, None) for n in ("DenseReluDense", "dropout"))
    code = getattr(getattr(type(module), "forward", None), "__code__", None)
    if not (isinstance(dense, nn.Module) and isinstance(dropout, nn.Dropout)
            and isinstance(getattr(module, "layer_norm", None), nn.Module) and code is not None
            and set(code.co_names) == {"layer_norm", "DenseReluDense", "dropout"}):
        return None
    gated = isinstance(getattr(dense, "wi_1", None), nn.Linear)
    ups = [getattr(dense, n, None) for n in (("wi_0", "wi_1") if gated else ("wi",))]
    wo, act = getattr(dense, "wo", None), getattr(dense, "act", None)
    if not (all(isinstance(w, nn.Linear) for w in ups + [wo])
            and isinstance(getattr(dense, "dropout", None), nn.Dropout)
            and isinstance(act, nn.Module)):
        return None
    activation = _activation(act)
    if activation is None:
        return f"a feed-forward whose activation {type(act).__name__} coda does not know"
    if (any(w.bias is not None for w in ups + [wo]) or wo.in_features != ups[0].out_features
            or ups[-1].weight.shape != ups[0].weight.shape):
        return "a feed-forward whose projections have biases or whose sizes do not chain"
    if gated and (dense.dropout.p or dropout.p):
        return (f"a gated feed-forward (wi_0 and wi_1) with dropout ({dense.dropout.p}, "
                f"{dropout.p}): coda's gated MLP applies none (patched where both are 0)")
    return dense, activation, dense.dropout.p, gated


def _patch_t5_feed_forward(layer, dense, activation, hidden_dropout, gated):
    """T5's feed-forward layer: its RMSNorm as it is (F.rms_norm where
    _rmsnorm_parts recognizes it), then wo(dropout(act(wi(h)))) with the
    layer's dropout and the residual x as coda's fused MLP (wi's epilogue
    gradient on wo's dgrad GEMM); gated, wo(act(wi_0(h)) * wi_1(h)) + x as
    coda's gated MLP (the gated activation's gradient on wo's dgrad GEMM)."""
    ups = ("wi_0", "wi_1") if gated else ("wi",)
    if gated:
        core = _fused_gated(dense.wi_0, dense.wi_1, dense.wo, activation)
    else:
        core = _fused_mlp(dense.wi, activation, dense.wo, layer.dropout.p, hidden_dropout)
    object.__setattr__(layer, "_coda_mlp", core)

    def forward(hidden_states):
        return _run(core, layer, layer.layer_norm(hidden_states), residual=hidden_states)

    layer.forward = _kept(forward, (layer, "layer_norm"), (layer, "DenseReluDense"),
                          *((dense, name) for name in ups + ("wo",)))
    if gated:
        return (f"feed-forward, gated MLP ({activation}) + residual as coda's fused gated MLP "
                "after its RMSNorm")
    dropouts = ", ".join(f"dropout {p}" for p in (hidden_dropout, layer.dropout.p) if p)
    return (f"feed-forward, MLP ({activation}{', ' + dropouts if dropouts else ''}) + residual "
            "as coda's fused MLP after its RMSNorm")


# The Hugging Face model types whose causal LM computes its loss as
# ForCausalLMLoss(lm_head(last hidden state), labels) and nothing else (no
# logit scaling, soft-capping or auxiliary loss), as their forwards read in
# transformers 5; and those that scale the logits first, by the factor of
# _LOGIT_SCALES, which scales the hidden states instead (their heads have no
# bias), or soft-cap them, at the value of _LOGIT_SOFTCAPS (None: not
# capped), which linear_cross_entropy applies.
_PLAIN_CAUSAL_LMS = ("llama", "mistral", "qwen2", "qwen3", "gpt2", "gemma", "olmo", "olmo2",
                     "stablelm", "starcoder2", "phi3", "phi", "gpt_neox", "gptj", "falcon", "opt",
                     "bloom", "granite", "cohere", "gemma2", "gemma3_text", "olmo3", "smollm3",
                     "glm4", "ernie4_5", "arcee", "helium", "nemotron")
_LOGIT_SCALES = {"granite": lambda lm: 1 / lm.config.logits_scaling,
                 "cohere": lambda lm: lm.logit_scale}
_LOGIT_SOFTCAPS = {model_type: lambda lm: lm.config.final_logit_softcapping
                   for model_type in ("gemma2", "gemma3_text")}


def _causal_lm_parts(module):
    """(base model, lm_head) of a Hugging Face causal language model whose
    loss is plain cross-entropy on lm_head(hidden states) (a transformers
    class named ...ForCausalLM or ...LMHeadModel of a model type in
    _PLAIN_CAUSAL_LMS, with an nn.Linear lm_head), a string
    saying why it is left as it is, or None when it is none."""
    kind = type(module).__name__
    if not (kind.endswith("ForCausalLM") or kind.endswith("LMHeadModel")) or \
            not type(module).__module__.startswith("transformers."):
        return None
    config = getattr(module, "config", None)
    head = getattr(module, "lm_head", None)
    base = getattr(module, getattr(module, "base_model_prefix", ""), None)
    if type(head) is not nn.Linear or not isinstance(base, nn.Module):
        return None
    model_type = getattr(config, "model_type", None)
    if model_type not in _PLAIN_CAUSAL_LMS:
        return f"model type '{model_type}', whose loss may not be plain cross-entropy on its logits"
    if getattr(config, "output_router_logits", False):
        return "a router's auxiliary loss added to the loss"
    scale = _LOGIT_SCALES.get(model_type)
    if scale is not None and head.bias is not None:
        return "an LM head with a bias whose logits are scaled"
    return base, head, scale, _LOGIT_SOFTCAPS.get(model_type)


def _output_type(module, default):
    """The output class of a Hugging Face model's forward: its return
    annotation's dataclass (alone or in a union with a tuple), else
    transformers.modeling_outputs' `default`."""
    import dataclasses
    import typing

    try:
        hint = typing.get_type_hints(type(module).forward).get("return")
    except Exception:
        hint = None
    for kind in typing.get_args(hint) or (hint,):
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            return kind
    from transformers import modeling_outputs

    return getattr(modeling_outputs, default)


def _loss_forward(module, loss_from, applies, default_output):
    """Replaces the forward of a Hugging Face model with a loss head: in
    training with labels, a dict asked for and `applies(arguments)`,
    `loss_from(labels, arguments)` computes (loss, the base model's outputs)
    from the call's other arguments (by name, as the model's forward names
    them), and the output, of the forward's own class (else
    `default_output`), has `logits` None (as Liger's fused losses leave
    it); otherwise the model's own forward runs."""
    original = module.forward
    signature = inspect.signature(original)
    output_type = _output_type(module, default_output)
    # The name of the forward's **kwargs, whose arguments the call lists
    # beside the named ones.
    extra = next((name for name, parameter in signature.parameters.items()
                  if parameter.kind is inspect.Parameter.VAR_KEYWORD), None)

    def forward(*args, **kwargs):
        try:
            call = signature.bind(*args, **kwargs).arguments
        except TypeError:  # The model's forward says what is wrong.
            return original(*args, **kwargs)
        call.update(call.pop(extra, {}))
        labels = call.pop("labels", None)
        return_dict = call.get("return_dict", getattr(module.config, "return_dict", True))
        if labels is None or not module.training or return_dict is False or not applies(call):
            return original(*args, **kwargs)
        loss, outputs = loss_from(labels, call)
        fields = getattr(output_type, "__dataclass_fields__", {})
        rest = {k: v for k, v in outputs.items() if k in fields and k != "last_hidden_state"}
        return output_type(loss=loss, logits=None, **rest)

    module.forward = forward


def _patch_causal_lm(module, base, head, scale, softcap):
    """In training with labels, the loss from the base model's hidden states
    (times `scale(module)` where the model scales its logits; of the logits
    soft-capped at `softcap(module)` where it caps them) by
    coda.nn.linear_cross_entropy: the head's GEMM with the loss's row
    statistics in its epilogue, no logits (_loss_forward; when the caller
    asks for some logits only, the model's own forward). The labels shifted
    and the mean taken as Hugging Face's ForCausalLMLoss does (a sum over
    `num_items_in_batch` when given)."""
    def loss_from(labels, call):
        call.pop("logits_to_keep", None)
        ignore_index = call.pop("ignore_index", -100)
        shift_labels = call.pop("shift_labels", None)
        items = call.get("num_items_in_batch")
        outputs = base(**call)
        hidden = outputs[0] if scale is None else outputs[0] * scale(module)
        cap = None if softcap is None else softcap(module)
        if shift_labels is None:
            shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
        shift_labels = shift_labels.to(hidden.device)
        loss = coda_nn.linear_cross_entropy(hidden, head.weight, shift_labels,
                                            ignore_index=ignore_index,
                                            reduction="mean" if items is None else "sum",
                                            bias=head.bias, softcap=cap)
        if items is not None:
            loss = loss / (items.to(loss.device) if torch.is_tensor(items) else items)
        return loss, outputs

    def all_logits(call):
        keep = call.get("logits_to_keep", 0)
        return isinstance(keep, int) and keep == 0

    _loss_forward(module, loss_from, all_logits, "CausalLMOutputWithPast")
    return ("the loss from the hidden states" + (" scaled" if scale else "")
            + " in the LM head's GEMM (" + ("its logits soft-capped, " if softcap else "")
            + "no logits) in training")


def _masked_lm_parts(module):
    """(base model, the head's predictions) of Hugging Face's BertForMaskedLM,
    whose loss is cross-entropy on predictions.decoder(predictions.transform(
    hidden states)), decoder an nn.Linear with a bias; None for any other
    module."""
    config = getattr(module, "config", None)
    if not type(module).__name__.endswith("ForMaskedLM") or \
            not type(module).__module__.startswith("transformers.") or \
            getattr(config, "model_type", None) != "bert":
        return None
    predictions = getattr(getattr(module, "cls", None), "predictions", None)
    base = getattr(module, "bert", None)
    if not isinstance(getattr(predictions, "transform", None), nn.Module) or \
            not isinstance(getattr(predictions, "decoder", None), nn.Linear) or \
            not isinstance(base, nn.Module):
        return None
    return base, predictions


def _patch_masked_lm(module, base, predictions):
    """In training with labels, the masked-LM loss from the head's transform
    of the hidden states by coda.nn.linear_cross_entropy with the decoder's
    bias (_loss_forward): the mean over the labels not -100, as the model's
    CrossEntropyLoss (from f32 row statistics, where the model's own takes
    it from bf16 logits)."""
    def loss_from(labels, call):
        call["return_dict"] = True
        outputs = base(**call)
        hidden = predictions.transform(outputs[0])
        decoder = predictions.decoder
        loss = coda_nn.linear_cross_entropy(hidden, decoder.weight, labels.to(hidden.device),
                                            bias=decoder.bias)
        return loss, outputs

    _loss_forward(module, loss_from, lambda call: True, "MaskedLMOutput")
    return ("the masked-LM loss from the head's transform in the decoder's GEMM with its bias "
            "(no logits) in training")


def _odd_linear(module):
    """(module,) for an nn.Linear of a width not a multiple of 8, else None."""
    if isinstance(module, nn.Linear) and (module.in_features % 8 or module.out_features % 8):
        return (module,)
    return None


def _rmsnorm_parts(module):
    """(epsilon,) of a Hugging Face RMSNorm (_rmsnorm_eps) that no coda
    kernel folds (a model's final norm before its head), else None."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1:
        return None
    eps = _rmsnorm_eps(module, weight.shape[0])
    return None if eps is None else (eps,)


def _patch_rmsnorm(norm, eps):
    """Hugging Face's RMSNorm (x in f32 times rsqrt(mean(x * x) + eps),
    rounded to x's type, times the weight: six kernels forward and more
    backward) as F.rms_norm, PyTorch's fused kernel forward and backward,
    where x and the weight share a type (the product by the weight then in
    f32, rounded once); else the module's own forward."""
    original = norm.forward

    def forward(hidden_states):
        if hidden_states.dtype != norm.weight.dtype:
            return original(hidden_states)
        return F.rms_norm(hidden_states, norm.weight.shape, norm.weight, eps)

    norm.forward = forward
    return "RMSNorm: F.rms_norm (one fused kernel forward, one backward)"


# What coda.patch recognizes in a module, in order: a function that returns
# the parts it patches (a tuple), why it leaves the module (a string) or
# None; the function that patches the parts and describes what it did; and
# which of the module's descendants that covers: all (True), none (False: a
# causal LM's loss leaves its layers to their own patches) or the children
# it names (a BERT layer's feed-forward half leaves its attention).
_RECOGNIZERS = (
    (_causal_lm_parts, lambda module, parts: _patch_causal_lm(module, *parts), False),
    (_masked_lm_parts, lambda module, parts: _patch_masked_lm(module, *parts), False),
    (_decoder_parts, lambda module, parts: _patch_decoder(module, *parts), True),
    (_gpt2_block_parts, lambda module, parts: _patch_gpt2_block(module, *parts), True),
    (_gated_parts, lambda module, parts: _patch_gated(module, *parts), True),
    (_bert_layer_parts, lambda module, parts: _patch_bert_layer(module, *parts),
     ("intermediate", "output")),
    (_distilbert_block_parts, lambda module, parts: _patch_distilbert_block(module, *parts),
     ("ffn",)),
    (_t5_feed_forward_parts, lambda module, parts: _patch_t5_feed_forward(module, *parts),
     ("DenseReluDense",)),
    (_self_attention_parts, lambda module, parts: _patch_self_attention(module, *parts), True),
    (_dense_parts, _patch_dense, True),
    (_odd_linear, lambda module, parts: _patch_linear(module), True),
    (_rmsnorm_parts, lambda module, parts: _patch_rmsnorm(module, *parts), True),
    (_mlp_parts, _patch_mlp, True),
)


def _patched_attributes(module):
    """The instance attributes of `module` that coda.patch sets on the
    modules it patches (and on children whose forward it makes the
    identity)."""
    return [key for key in module.__dict__
            if key in ("forward", "__deepcopy__", "__reduce_ex__") or key.startswith("_coda_")]


def _bound(module):
    """Makes copying or pickling `module`, whose forward coda.patch replaced
    by one that holds its children, an error that says so: a deep copy would
    run the original's children (the forward a closure over them), and a
    closure does not pickle."""
    def refuse(*args):
        raise TypeError(f"{type(module).__name__} was patched by coda.patch, whose forward holds "
                        "this module's own children: a copy would run the original's. Copy the "
                        "whole model (copy.deepcopy of the model coda.patch was given patches "
                        "the copy), copy or save it before coda.patch, or save its state_dict")
    object.__setattr__(module, "__deepcopy__", refuse)
    object.__setattr__(module, "__reduce_ex__", refuse)


def _copied_and_patched(model, owned):
    """A __deepcopy__ for a model coda.patch patched: the model copied as it
    was before the patch (`owned`: what the patch set on each module, left
    out of the copy, put back on the original after it), then the copy
    patched, so that its forwards hold its own children."""
    def deepcopy(memo):
        stash = [(module, {key: module.__dict__.pop(key) for key in keys})
                 for module, keys in owned]
        try:
            twin = copy.deepcopy(model, memo)
        finally:
            for module, attributes in stash:
                module.__dict__.update(attributes)
        patch(twin)
        return twin
    return deepcopy


def patch(model, verbose=False):
    """Puts the Transformer blocks and MLPs of `model` (an nn.Module) on coda
    kernels, in place, and returns a PatchReport (printed with
    `verbose`). Call it once, before training or after loading a
    checkpoint; the model's parameters and state_dict are unchanged.
    copy.deepcopy(model) (an EMA's copy, say) copies the model as it was and
    patches the copy; a patched module inside it is not deep-copied alone,
    and no patched module pickles (its forward holds its children): save
    the model whole before patching it, or save its state_dict."""
    report = PatchReport()
    done = set()
    before = {module: set(_patched_attributes(module)) for module in model.modules()}
    for name, module in model.named_modules():
        if any(name == d or name.startswith(d + ".") for d in done):
            continue
        block_mlp = getattr(module, "mlp", None)
        if all(hasattr(module, a) for a in ("ln_1", "attn", "ln_2")) and block_mlp is not None:
            parts = _mlp_parts(block_mlp)
            if isinstance(parts, tuple) and _attention_parts(module.attn):
                what = _patch_block(module, parts)
                if what:
                    _bound(module)
                    report.replaced.append((name, what))
                    done.add(name)
                    continue
        for recognize, apply, covers in _RECOGNIZERS:
            parts = recognize(module)
            if isinstance(parts, tuple):
                report.replaced.append((name, apply(module, parts)))
                _bound(module)
                if covers is True:
                    done.add(name)
                elif covers:
                    done.update(f"{name}.{child}" if name else child for child in covers)
                break
            if isinstance(parts, str):
                report.skipped.append((name, parts))
    if report.replaced:
        owned = {module: [key for key in _patched_attributes(module) if key not in keys]
                 for module, keys in before.items()}
        if "__deepcopy__" not in owned[model]:
            owned[model].append("__deepcopy__")
        object.__setattr__(model, "__deepcopy__", _copied_and_patched(
            model, [(module, keys) for module, keys in owned.items() if keys]))
    if verbose:
        print(report)
    return report


# The name under which unmasked_attention registers Hugging Face's SDPA
# attention again.
_UNMASKED = "sdpa_unmasked"


def _unmasked_mask(sdpa_mask):
    """A mask function of transformers' AttentionMaskInterface: none where the
    model is called without an attention mask, else `sdpa_mask`'s."""
    def mask(*args, attention_mask=None, **kwargs):
        if attention_mask is None:
            return None
        return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)
    return mask


def unmasked_attention(model):
    """Runs the SDPA attention of `model`, a Hugging Face model, without a
    mask wherever it is called without an attention mask (is_causal for a
    causal model), as transformers does when it can tell that no row of the
    batch is padded or holds several sequences. While a CUDA graph is
    captured or torch.compile traces, it cannot read the position ids to
    tell, and builds a dense [batch, 1, S, S] mask: SDPA then runs its masked
    kernels, three times slower at LLaMA-1B's shapes (BERT's, with dropout,
    fall back to SDPA's math in f32). Call it on a model trained on batches
    of whole sequences (pass an attention mask where a batch is padded;
    packed sequences without a mask are then attended as one).
    Registers the attention as "sdpa_unmasked" with transformers and sets
    the model's attention implementation to it; returns the model."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current == _UNMASKED:
        return model
    if current != "sdpa":
        raise ValueError(
            "unmasked_attention: expected a Hugging Face model whose attention is SDPA "
            "(attn_implementation='sdpa'); "
            + (f"this one's is '{current}'" if current is not None
               else f"a {type(model).__name__} has no config naming one"))
    if not hasattr(model, "set_attn_implementation"):
        raise ValueError(f"unmasked_attention: a {type(model).__name__} cannot change its "
                         "attention implementation (no set_attn_implementation: transformers "
                         "5 has it)")
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as error:
        raise ValueError("unmasked_attention: this transformers has no AttentionInterface "
                         f"and AttentionMaskInterface to register an attention with ({error})"
                         ) from None
    AttentionInterface.register(_UNMASKED, sdpa_attention_forward)
    AttentionMaskInterface.register(_UNMASKED, _unmasked_mask(sdpa_mask))
    model.set_attn_implementation(_UNMASKED)
    return model
