# REQUIRES: torch, transformers
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
# RUN: %if transformers-5.17 %{ env PYTHONPATH=%transformers_517 CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s %}
#
# coda.patch on Hugging Face models built from a config (small ones, on the
# CPU reference, in float32): GPT2LMHeadModel, whose blocks' attention output
# projection (dropout and residual) and MLP (its Conv1D weights stored [in,
# out]) go on coda; BertForMaskedLM, whose layers' feed-forward halves go on
# coda as one fused MLP each and whose attention output projections (dense +
# dropout + residual, then LayerNorm) do; and LlamaForCausalLM, whose decoder
# layers' input RMSNorm, QKV projection and rotary embedding, output
# projection, residual and post-attention RMSNorm and gated MLPs (SwiGLU) do;
# with the LM heads of an unpadded vocabulary. The state_dict keeps its keys
# and tensors, and the loss and every gradient equal the eager model's, with
# dropout off (also under gradient checkpointing); with dropout on, outputs
# are compared with the eager form on coda's masks; generation through the
# key and value cache equals eager's.

import copy
import inspect
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "test", "lib"))
import torch
import torch_checks as checks
from transformers import (BertConfig, BertForMaskedLM, BertLMHeadModel, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, RobertaConfig,
                          RobertaForMaskedLM)

import coda

torch.manual_seed(0)
failures = []


def close(what, got, want, tolerance=1e-5):
    # Relative, or absolute below 1e-6 (attention's key bias has a gradient
    # of 0 in exact arithmetic, 1e-12 in float32).
    error = ((got - want).norm() / want.norm().clamp_min(1e-6)).item()
    if not error < tolerance:
        failures.append(f"{what}: relative error {error:.2e}")


def check_training(label, eager, fused, tokens, **options):
    """`fused` (eager, patched) has eager's state_dict, and one step of
    training on `tokens` (the models called with `options`) gives it eager's
    loss and every gradient."""
    assert list(eager.state_dict()) == list(fused.state_dict()), f"{label}: state_dict keys changed"
    for key, tensor in eager.state_dict().items():
        assert torch.equal(tensor, fused.state_dict()[key]), f"{label}: {key} changed"
    losses = []
    for model in (eager, fused):
        model.train()
        model.zero_grad(set_to_none=True)
        output = model(tokens, labels=tokens, **options)
        output.loss.backward()
        losses.append(output.loss.detach())
    close(f"{label} loss", losses[1], losses[0])
    # A causal LM's and BERT's patched loss leaves the logits unwritten in
    # training, in the output class of the model's forward; in evaluation the
    # model's own forward gives them.
    if type(fused).__name__.endswith(("ForCausalLM", "LMHeadModel", "BertForMaskedLM")):
        assert output.logits is None, f"{label}: logits computed in training"
        assert type(output) is type(eager(tokens, labels=tokens)), type(output)
        fused.eval()
        logits = fused(tokens, labels=tokens).logits
        assert logits.shape == (*tokens.shape, fused.config.vocab_size), logits.shape
        fused.train()
    for (name, p_eager), (_, p_fused) in zip(eager.named_parameters(), fused.named_parameters()):
        if p_eager.grad is not None:
            close(f"{label} grad {name}", p_fused.grad, p_eager.grad)
    print(f"{label} losses and gradients: dropout off")


config = GPT2Config(vocab_size=101, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
eager = GPT2LMHeadModel(config)
fused = copy.deepcopy(eager)
report = coda.patch(fused)
print(report)
# CHECK: coda.patch: 4 modules replaced
# CHECK-NEXT: <model>: the loss from the hidden states in the LM head's GEMM (no logits) in training
# CHECK-NEXT: transformer.h.0: block: attention output projection + dropout + residual + ln_2 in one kernel, MLP (gelu) + residual as coda's fused MLP
# CHECK-NEXT: transformer.h.1: block: attention output projection + dropout + residual + ln_2 in one kernel, MLP (gelu) + residual as coda's fused MLP
# CHECK-NEXT: lm_head: linear 32 -> 101 (no bias): coda's GEMM
tokens = torch.randint(0, config.vocab_size, (2, 24))
check_training("GPT-2", eager, fused, tokens)
# CHECK: GPT-2 losses and gradients: dropout off

# The patched block traces whole under torch.compile (no graph break), with
# the eager block's output.
block = fused.transformer.h[0]
x = torch.randn(2, 16, 32)
close("GPT-2 block under torch.compile",
      torch.compile(block, fullgraph=True, backend="aot_eager")(x), eager.transformer.h[0](x))
print("GPT-2 block compiled: ok")
# CHECK: GPT-2 block compiled: ok


def compiled_loss(label, eager, fused, tokens, labels):
    """The patched model's training loss traced whole under torch.compile
    (its loss head's forward too: no graph break), its value and gradients
    the eager model's."""
    eager.train(), fused.train()
    eager.zero_grad(set_to_none=True), fused.zero_grad(set_to_none=True)
    loss = torch.compile(lambda t, l: fused(t, labels=l).loss, fullgraph=True,
                         backend="aot_eager")(tokens, labels)
    want = eager(tokens, labels=labels).loss
    close(f"{label} compiled loss", loss, want)
    loss.backward(), want.backward()
    for (name, p_eager), (_, p_fused) in zip(eager.named_parameters(), fused.named_parameters()):
        if p_eager.grad is not None:
            close(f"{label} compiled grad {name}", p_fused.grad, p_eager.grad)
    print(f"{label} loss compiled: ok")


compiled_loss("GPT-2", eager, fused, tokens, tokens)
# CHECK: GPT-2 loss compiled: ok

# Generation through the patched blocks reads and extends the key and value
# cache: greedy decoding gives the eager model's tokens.
eager.eval(), fused.eval()
generated = [model.generate(tokens[:, :5], max_new_tokens=6, do_sample=False)
             for model in (eager, fused)]
assert torch.equal(generated[0], generated[1]), generated
print("GPT-2 generation: ok")
# CHECK: GPT-2 generation: ok

# Earlier transformers 5 releases (5.17 among them) take the cache as
# past_key_values in GPT2Block's and GPT2Attention's forward: classes of that
# signature (and of their module) are patched too, and the patched blocks
# hand the cache on under that name (greedy decoding gives eager's tokens).
from transformers.models.gpt2 import modeling_gpt2  # noqa: E402


def cache_name(cls):
    """The keyword of the cache in cls.forward, in the transformers installed."""
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


class GPT2Attention(modeling_gpt2.GPT2Attention):
    def forward(self, hidden_states, past_key_values=None, **kwargs):
        return super().forward(hidden_states,
                               **{cache_name(modeling_gpt2.GPT2Attention): past_key_values},
                               **kwargs)


class GPT2Block(modeling_gpt2.GPT2Block):
    def forward(self, hidden_states, past_key_values=None, *args, **kwargs):
        return super().forward(hidden_states, past_key_values, *args, **kwargs)


GPT2Attention.__module__ = GPT2Block.__module__ = modeling_gpt2.__name__
older = copy.deepcopy(eager)
for layer in older.transformer.h:
    layer.__class__, layer.attn.__class__ = GPT2Block, GPT2Attention
print(coda.patch(older).replaced[1][1].split(",")[0])
# CHECK: block: attention output projection + dropout + residual + ln_2 in one kernel
assert torch.equal(older.generate(tokens[:, :5], max_new_tokens=6, do_sample=False),
                   generated[0])
print("GPT-2 of past_key_values: ok")
# CHECK: GPT-2 of past_key_values: ok

# With cross-attention (GPT-2 as a decoder over an encoder's states): the
# patched block runs it between the attention and the MLP, as GPT2Block does.
config_x = GPT2Config(**{**config.to_dict(), "add_cross_attention": True})
eager_x = GPT2LMHeadModel(config_x).eval()
fused_x = copy.deepcopy(eager_x)
coda.patch(fused_x)
states = torch.randn(2, 7, 32)
with torch.no_grad():
    close("GPT-2 cross-attention logits", fused_x(tokens, encoder_hidden_states=states).logits,
          eager_x(tokens, encoder_hidden_states=states).logits)
print("GPT-2 cross-attention: ok")
# CHECK: GPT-2 cross-attention: ok

# With the blocks' dropout on: in evaluation the patched model gives eager's
# logits; in training the attention's output projection (with ln_2 in its
# epilogue) and the MLP draw coda's masks, each compared with its eager form
# on that mask: a quarter of the product dropped, the rest scaled by
# 1 / 0.75, the residual added. The block applies them in turn (the same
# seeds drawn again give its output), the projection's h normalized by ln_2.
config_p = GPT2Config(**{**config.to_dict(), "resid_pdrop": 0.25})
model_p = GPT2LMHeadModel(config_p)
eager_p = copy.deepcopy(model_p).eval()
coda.patch(model_p)
model_p.eval()
with torch.no_grad():
    close("GPT-2 eval logits, dropout 0.25", model_p(tokens).logits, eager_p(tokens).logits)
model_p.train()
block = model_p.transformer.h[0]
mlp, attn = block.mlp, block.attn
x = torch.randn(3, 5, 32, requires_grad=True)
r = torch.randn(3, 5, 32)
core = block._coda_tail


def projection(x, r):
    """The block's output projection, dropout, residual r and ln_2 on x:
    (ln_2(h), h)."""
    return coda.autograd.run(core._proj.key, "", x.reshape(-1, 32), attn.c_proj.weight,
                             [attn.c_proj.bias, r.reshape(-1, 32), block.ln_2.weight,
                              block.ln_2.bias], "bias,residual,gamma,beta", [], "",
                             coda.autograd.draw_seed(x.device))


torch.manual_seed(11)
y = block(x)
torch.manual_seed(11)
normed, h = projection(attn(block.ln_1(x))[0], x)
close("GPT-2 block with dropout", y, core.mlp(normed, residual=h).view(y.shape))
close("GPT-2 ln_2 in the projection", normed, block.ln_2(h))
for what, got, pre in (
        ("MLP", core.mlp(x, residual=r),
         mlp.act(x @ mlp.c_fc.weight + mlp.c_fc.bias) @ mlp.c_proj.weight + mlp.c_proj.bias),
        ("output projection", projection(x, r)[1].view(r.shape),
         x @ attn.c_proj.weight + attn.c_proj.bias)):
    kept = (got - r) != 0
    assert 0.6 < kept.float().mean().item() < 0.9, (what, kept.float().mean().item())
    close(f"{what} with dropout", (got - r)[kept], (pre / 0.75)[kept])
y.sum().backward()
print("GPT-2 dropout: ok")
# CHECK: GPT-2 dropout: ok

# A layer wrapped after the patch (as LoRA wraps a projection) would be
# bypassed by the patched forward: it is an error, not a silent skip.
wrapped = GPT2LMHeadModel(config)
coda.patch(wrapped)
wrapped.transformer.h[0].attn.c_proj = torch.nn.Sequential(wrapped.transformer.h[0].attn.c_proj)
try:
    wrapped(tokens)
    failures.append("a projection wrapped after the patch was bypassed")
except RuntimeError as e:
    print(e)
# CHECK: GPT2Attention.c_proj was replaced after coda.patch

# BERT: each layer's feed-forward half as one fused MLP, the attention's
# output projection, and the MLM head.
bert_config = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=32, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
bert = BertForMaskedLM(bert_config)
bert_fused = copy.deepcopy(bert)
print(coda.patch(bert_fused))
# CHECK: coda.patch: 8 modules replaced
# CHECK-NEXT: <model>: the masked-LM loss from the head's transform in the decoder's GEMM with its bias (no logits) in training
# CHECK-NEXT: bert.encoder.layer.0: feed-forward, MLP (gelu_erf) + residual as coda's fused MLP, then its LayerNorm
# CHECK-NEXT: bert.encoder.layer.0.attention.self: Q, K and V projections + biases in one kernel
# CHECK-NEXT: bert.encoder.layer.0.attention.output: projection + bias + dropout + residual in one kernel, then its LayerNorm
# CHECK: cls.predictions.decoder: linear 32 -> 101: coda's GEMM
bert_tokens = tokens[:, :16].contiguous()
check_training("BERT", bert, bert_fused, bert_tokens)
# CHECK: BERT losses and gradients: dropout off
# The masked-LM loss over the labels that are not -100, the labels given by
# keyword or in their place among the forward's positional arguments.
masked = bert_tokens.masked_fill(torch.rand(bert_tokens.shape) < 0.7, -100)
want = bert(bert_tokens, labels=masked).loss
close("BERT masked-LM loss", bert_fused(bert_tokens, labels=masked).loss, want)
positional = list(inspect.signature(BertForMaskedLM.forward).parameters).index("labels") - 1
got = bert_fused(bert_tokens, *[None] * (positional - 1), masked)
assert got.logits is None, "BERT: positional labels computed the logits"
close("BERT masked-LM loss, positional labels", got.loss, want)
print("BERT masked-LM loss: ok")
# CHECK: BERT masked-LM loss: ok
compiled_loss("BERT", bert, bert_fused, bert_tokens, masked)
# CHECK: BERT loss compiled: ok

# With BERT's dropout on: in evaluation the patched layers give eager's
# output; in training the feed-forward's dropout draws coda's mask, with
# BertOutput's probability.
bert_p = BertForMaskedLM(BertConfig(**{**bert_config.to_dict(), "hidden_dropout_prob": 0.25}))
bert_p_fused = copy.deepcopy(bert_p)
print(coda.patch(bert_p_fused).replaced[1][1])
# CHECK: feed-forward, MLP (gelu_erf, dropout 0.25) + residual as coda's fused MLP, then its LayerNorm
bert_p.eval()
bert_p_fused.eval()
with torch.no_grad():
    close("BERT eval logits", bert_p_fused(bert_tokens).logits, bert_p(bert_tokens).logits)
layer = bert_p_fused.bert.encoder.layer[0]
layer.train()
x = torch.randn(2, 16, 32, requires_grad=True)
torch.manual_seed(3)
y = layer.feed_forward_chunk(x)
# The same seed again: the fused MLP alone, before the LayerNorm, is
# dropout(pre) + x with a quarter of pre's elements dropped, the rest
# scaled by 1 / 0.75.
torch.manual_seed(3)
z = layer._coda_mlp(x, residual=x)
close("BERT feed-forward", y, layer.output.LayerNorm(z))
pre = layer.output.dense(layer.intermediate(x))
kept = (z - x) != 0
assert 0.6 < kept.float().mean().item() < 0.9, kept.float().mean().item()
close("BERT feed-forward dropout", (z - x)[kept], (pre / 0.75)[kept])
y.sum().backward()
print("BERT dropout: ok")
# CHECK: BERT dropout: ok

# The attention's dropout in training: the model's attention function draws
# it from PyTorch's generator as the unpatched attention does (the fused
# projection draws nothing), so the same seed gives the same output. With a
# key and value cache (a decoder generating) the attention runs its own
# forward. On a generator of its own, so that the models after it draw the
# parameters they drew before.
with torch.random.fork_rng():
    bert_a = BertForMaskedLM(BertConfig(**{**bert_config.to_dict(),
                                          "attention_probs_dropout_prob": 0.5}))
    bert_a_fused = copy.deepcopy(bert_a)
    coda.patch(bert_a_fused)
    attention, attention_fused = (m.bert.encoder.layer[0].attention.self
                                  for m in (bert_a, bert_a_fused))
    attention.train()
    attention_fused.train()
    x = torch.randn(2, 16, 32, requires_grad=True)
    outputs = []
    for module in (attention, attention_fused):
        torch.manual_seed(4)
        outputs.append(module(x)[0])
    close("BERT attention dropout", outputs[1], outputs[0])
    assert not torch.equal(outputs[1], attention_fused.eval()(x)[0]), "no attention dropout"
    (x_grad,) = torch.autograd.grad(outputs[0].sum(), x)
    close("BERT attention dropout, input gradient",
          torch.autograd.grad(outputs[1].sum(), x)[0], x_grad)
    decoder_config = BertConfig(**{**bert_config.to_dict(), "is_decoder": True})
    decoder = BertLMHeadModel(decoder_config).eval()
    decoder_fused = copy.deepcopy(decoder)
    coda.patch(decoder_fused)
    with torch.no_grad():
        prompt = bert_tokens[:, :5]
        assert torch.equal(decoder_fused.generate(prompt, max_new_tokens=4, do_sample=False),
                           decoder.generate(prompt, max_new_tokens=4, do_sample=False))
    # The stacked Q, K and V weight (3 MiB at width 512) is made again in
    # the backward, not held from the forward.
    wide = BertForMaskedLM(BertConfig(**{**bert_config.to_dict(), "hidden_size": 512,
                                         "num_attention_heads": 8, "num_hidden_layers": 1}))
    coda.patch(wide)
    attention = wide.bert.encoder.layer[0].attention.self
    x = torch.randn(1, 4, 512, requires_grad=True)
    out, held = checks.held_after(lambda: attention(x)[0])
    assert held < 2**20, f"{held} bytes held after the attention's forward"
    out.sum().backward()
    print("BERT attention: ok")
# CHECK: BERT attention: ok

# RoBERTa copies BERT's modules under its own names.
roberta_config = RobertaConfig(**{**bert_config.to_dict(), "pad_token_id": 1})
roberta = RobertaForMaskedLM(roberta_config)
roberta_fused = copy.deepcopy(roberta)
report = coda.patch(roberta_fused)
print(report.replaced[0][0], len(report.replaced))
# CHECK: roberta.encoder.layer.0 7
check_training("RoBERTa", roberta, roberta_fused, bert_tokens.clamp(min=2))
# CHECK: RoBERTa losses and gradients: dropout off

# A self-attention with BERT's children whose forward is not BERT's
# (LayoutLM's takes no cache) is left as it is, and the report says why.
from transformers import LayoutLMConfig, LayoutLMModel  # noqa: E402

layout = coda.patch(LayoutLMModel(LayoutLMConfig(**{**bert_config.to_dict(), "vocab_size": 101})))
print(next(why for name, why in layout.skipped if name.endswith("attention.self")))
# CHECK: a self-attention whose forward is not BERT's

# LLaMA: every decoder layer on coda around its attention: the input RMSNorm,
# the Q, K and V projections (grouped: 4 query heads, 2 key and value heads)
# and the rotary embedding in one kernel; the attention output projection
# and the residual in one kernel, the post-attention RMSNorm folded into the
# LlamaMLP's gate and up projections' GEMM (without biases, SiLU), coda's
# fused gated MLP with the residual in its second kernel. Attention itself stays
# PyTorch's SDPA. The norms' weights are set away from 1, so that their
# gradients are checked.
llama_config = LlamaConfig(vocab_size=101, hidden_size=32, intermediate_size=88,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=32)
llama = LlamaForCausalLM(llama_config)
with torch.no_grad():
    for layer in llama.model.layers:
        layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        layer.input_layernorm.weight.uniform_(0.5, 1.5)
llama_fused = copy.deepcopy(llama)
print(coda.patch(llama_fused))
# CHECK: coda.patch: 5 modules replaced
# CHECK-NEXT: <model>: the loss from the hidden states in the LM head's GEMM (no logits) in training
# CHECK-NEXT: model.layers.0: decoder layer: input RMSNorm + QKV projection + rotary embedding in one kernel, attention output projection + residual in one kernel, RMSNorm folded into the gate and up projections' GEMM, gated MLP (silu) + residual as coda's fused gated MLP
# CHECK-NEXT: model.layers.1: decoder layer: input RMSNorm
# CHECK-NEXT: model.norm: RMSNorm: F.rms_norm (one fused kernel forward, one backward)
# CHECK-NEXT: lm_head: linear 32 -> 101 (no bias): coda's GEMM
check_training("LLaMA", llama, llama_fused, bert_tokens)
# CHECK: LLaMA losses and gradients: dropout off
# The final norm on F.rms_norm: the module's own math (in f32 for any x) and
# epsilon (rows small enough that it counts), output and gradient; an x of
# another type than the weight's through the module's own forward.
norm = copy.deepcopy(llama.model.norm).double()
norm.variance_epsilon = 0.5
with torch.no_grad():
    norm.weight.uniform_(0.5, 1.5)
fused_norm = copy.deepcopy(norm)
print(coda.patch(fused_norm).replaced)
# CHECK: [('', 'RMSNorm: F.rms_norm (one fused kernel forward, one backward)')]
rows = (torch.randn(3, 32, dtype=torch.float64) * 0.3).requires_grad_()
got, want = fused_norm(rows), norm(rows)
close("final norm", got, want, 1e-6)
close("final norm: grad x", torch.autograd.grad((got * want.detach()).sum(), rows)[0],
      torch.autograd.grad((want * want.detach()).sum(), rows)[0], 1e-6)
if not torch.equal(fused_norm(rows.float()), norm(rows.float())):
    failures.append("final norm: an x of another type than the weight's not on the "
                    "module's own forward")
# As training loops call it, without the key and value cache.
check_training("LLaMA without a cache", llama, llama_fused, bert_tokens, use_cache=False)
# CHECK: LLaMA without a cache losses and gradients: dropout off
# A deep copy of the patched model (an EMA's) is patched too and computes
# with its own parameters.
twin = copy.deepcopy(llama_fused)
close("LLaMA's deep copy", twin(bert_tokens, labels=bert_tokens).loss,
      llama_fused(bert_tokens, labels=bert_tokens).loss)
assert "forward" in vars(twin.model.layers[0]), "LLaMA's deep copy is not patched"
assert twin.lm_head.weight is not llama_fused.lm_head.weight
print("LLaMA deep copy: ok")
# CHECK: LLaMA deep copy: ok

# Generation reads and extends the model's key and value cache through the
# patched layers: greedy decoding gives the eager model's tokens.
llama.eval(), llama_fused.eval()
prompt = bert_tokens[:, :5]
generated = [model.generate(prompt, max_new_tokens=6, do_sample=False) for model in (llama, llama_fused)]
assert torch.equal(generated[0], generated[1]), generated
print("LLaMA generation: ok")
# CHECK: LLaMA generation: ok

# The attention weights, when asked for, come from the attention module's
# own forward (transformers records them by hooks on it); the deprecated
# past_key_values keyword still fills the cache.
eager_attention = LlamaForCausalLM(LlamaConfig(**llama_config.to_dict(),
                                               attn_implementation="eager"))
weights = eager_attention(bert_tokens, output_attentions=True).attentions
coda.patch(eager_attention)
got = eager_attention(bert_tokens, output_attentions=True).attentions
print(len(got), got[0].shape[1])
for g, w in zip(got, weights):
    close("attention weights", g, w)
# CHECK: 2 4
from transformers import DynamicCache  # noqa: E402

cache = DynamicCache(config=llama_config)
llama_fused.model.layers[0](llama_fused.model.embed_tokens(bert_tokens),
                            past_key_values=cache, use_cache=True,
                            position_ids=torch.arange(bert_tokens.shape[1])[None],
                            position_embeddings=llama_fused.model.rotary_emb(
                                llama_fused.model.embed_tokens(bert_tokens),
                                torch.arange(bert_tokens.shape[1])[None]))
print("cached tokens:", cache.get_seq_length())
# CHECK: cached tokens: 16

# An attention taking the cache as past_key_values (earlier transformers 5
# releases), its own forward run for its weights: the patched layer hands the
# cache on under that name.
attention_class = type(eager_attention.model.layers[0].self_attn)


class OlderAttention(attention_class):
    def forward(self, hidden_states, past_key_values=None, **kwargs):
        return super().forward(hidden_states, **{cache_name(attention_class): past_key_values},
                               **kwargs)


older = LlamaForCausalLM(LlamaConfig(**llama_config.to_dict(), attn_implementation="eager"))
for layer in older.model.layers:
    layer.self_attn.__class__ = OlderAttention
coda.patch(older)
cache = DynamicCache(config=llama_config)
older(bert_tokens, **{cache_name(LlamaForCausalLM): cache}, use_cache=True, output_attentions=True)
print("cached tokens, past_key_values:", cache.get_seq_length())
# CHECK: cached tokens, past_key_values: 16

# LLaMA 3's scaled rotary embedding: its frequencies, fixed, come from the
# model's own rotary embedding class, and the patched model's loss and
# gradients are still eager's.
llama3_config = LlamaConfig(**{**llama_config.to_dict(), "rope_parameters": {
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8, "rope_theta": 500000.0}})
llama3 = LlamaForCausalLM(llama3_config)
llama3_fused = copy.deepcopy(llama3)
print(coda.patch(llama3_fused).replaced[1][1].split(", attention")[0])
# CHECK: decoder layer: input RMSNorm + QKV projection + rotary embedding in one kernel
check_training("LLaMA-3 rotary", llama3, llama3_fused, bert_tokens)
# CHECK: LLaMA-3 rotary losses and gradients: dropout off

# Rotary embeddings whose frequencies change with the sequence's length
# (dynamic, here past its original length) or whose cos and sin are scaled
# (yarn's attention scaling): the kernel rotates by the cos and sin the model
# passes its layers; loss and gradients are eager's.
for rope in ({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0,
              "original_max_position_embeddings": 8},
             {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
              "original_max_position_embeddings": 8}):
    scaled = LlamaForCausalLM(LlamaConfig(**{**llama_config.to_dict(), "rope_parameters": rope}))
    scaled_fused = copy.deepcopy(scaled)
    print(coda.patch(scaled_fused).replaced[1][1].split(", attention")[0])
    check_training(f"LLaMA {rope['rope_type']} rotary", scaled, scaled_fused, bert_tokens)
# CHECK: decoder layer: input RMSNorm + QKV projection + rotary embedding (the model's cos and sin) in one kernel
# CHECK: LLaMA dynamic rotary losses and gradients: dropout off
# CHECK: decoder layer: input RMSNorm + QKV projection + rotary embedding (the model's cos and sin) in one kernel
# CHECK: LLaMA yarn rotary losses and gradients: dropout off
from transformers import MistralConfig, MistralForCausalLM  # noqa: E402

# A sliding-window attention leaves the attention's input to PyTorch; the
# rest of the layer still goes on coda.
mistral = MistralForCausalLM(MistralConfig(**{**llama_config.to_dict(), "sliding_window": 8}))
print(coda.patch(mistral).replaced[1][1].split("PyTorch's: ")[1])
# CHECK: a sliding-window attention)

# Qwen3's decoder layers normalize each query and key head (q_norm, k_norm):
# the heads' RMSNorms join the input RMSNorm, QKV projection and rotary
# embedding in one kernel; loss and gradients are still eager's.
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

qwen3 = Qwen3ForCausalLM(Qwen3Config(
    vocab_size=101, hidden_size=32, intermediate_size=88, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=32))
with torch.no_grad():
    for layer in qwen3.model.layers:
        for norm in (layer.input_layernorm, layer.self_attn.q_norm, layer.self_attn.k_norm):
            norm.weight.uniform_(0.5, 1.5)
qwen3_fused = copy.deepcopy(qwen3)
print(coda.patch(qwen3_fused).replaced[1][1].split(", attention")[0])
# CHECK: decoder layer: input RMSNorm + QKV projection + the heads' RMSNorms + rotary embedding in one kernel
check_training("Qwen3", qwen3, qwen3_fused, bert_tokens)
# CHECK: Qwen3 losses and gradients: dropout off
# Heads' norms of two epsilons are not one program's: the attention's input
# stays PyTorch's, the rest of the layer goes on coda.
uneven = copy.deepcopy(qwen3)
for layer in uneven.model.layers:
    layer.self_attn.k_norm.variance_epsilon = 1e-5
print(coda.patch(uneven).replaced[1][1].split("PyTorch's: ")[1])
# CHECK: heads' norms that are not RMSNorms of one epsilon over a head)

# Qwen2's query, key and value projections have biases, added before the
# rotation in the same kernel.
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

# In float64: the key projection's gradients nearly cancel (the attention's
# softmax does not see a key bias but through the rotation), and their
# float32 rounding is not coda's to answer for.
qwen2 = Qwen2ForCausalLM(Qwen2Config(
    vocab_size=101, hidden_size=32, intermediate_size=88, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)).double()
with torch.no_grad():
    for layer in qwen2.model.layers:
        layer.input_layernorm.weight.uniform_(0.5, 1.5)
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            proj.bias.uniform_(-1, 1)
qwen2_fused = copy.deepcopy(qwen2)
print(coda.patch(qwen2_fused).replaced[1][1].split(", attention")[0])
# CHECK: decoder layer: input RMSNorm + QKV projection + rotary embedding in one kernel
check_training("Qwen2", qwen2, qwen2_fused, bert_tokens)
# CHECK: Qwen2 losses and gradients: dropout off
# A query projection with a bias beside key and value projections without
# is not one GEMM's epilogue: the attention's input stays PyTorch's.
mixed = copy.deepcopy(llama)
for layer in mixed.model.layers:
    layer.self_attn.q_proj = torch.nn.Linear(32, 32, bias=True)
print(coda.patch(mixed).replaced[1][1].split("PyTorch's: ")[1])
# CHECK: its attention is not Q, K, V and output projections, the first three all with biases or all without (and the heads' norms))

# Models whose layers share LLaMA's modules but not its computation (Granite
# scales its residuals) keep their layers; their gated MLPs go on coda.
from transformers import GraniteConfig, GraniteForCausalLM  # noqa: E402

granite = coda.patch(GraniteForCausalLM(GraniteConfig(
    vocab_size=101, hidden_size=32, intermediate_size=88, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, residual_multiplier=0.22)))
print(dict(granite.skipped)["model.layers.0"], "|", dict(granite.replaced)["model.layers.0.mlp"])
# CHECK: a decoder layer of model type 'granite', which may differ from LLaMA's | gated MLP (silu) as coda's fused gated MLP

# A causal LM of a type whose loss coda has not read to be plain
# cross-entropy on its logits keeps its own loss.
from transformers import MixtralConfig, MixtralForCausalLM  # noqa: E402

mixtral = MixtralForCausalLM(MixtralConfig(vocab_size=101, hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=1, num_attention_heads=2,
                                           num_key_value_heads=1, num_local_experts=2))
print(dict(coda.patch(mixtral).skipped)[""])
# CHECK: model type 'mixtral', whose loss may not be plain cross-entropy on its logits

# A causal LM inside another module: its loss and its layers are patched.
wrapper = torch.nn.ModuleDict({"lm": LlamaForCausalLM(llama_config)})
print([name for name, _ in coda.patch(wrapper).replaced])
# CHECK: ['lm', 'lm.model.layers.0', 'lm.model.layers.1', 'lm.model.norm', 'lm.lm_head']

# Gradient checkpointing (transformers 5 applies it in the layer's class
# forward, which the patch replaces): each patched layer runs again in the
# backward, with the eager model's loss and gradients. A module the layer
# calls (GPT-2's ln_1, the LLaMA layer's fused tail) runs three times: the
# training step's forward, again in its backward, and the evaluation forward
# check_training ends with (twice without checkpointing).
def forward_calls(norms):
    calls = []
    for norm in norms:
        # Entered (a recomputation stops once it has what the backward
        # needs, before the module returns).
        norm.register_forward_pre_hook(lambda *_: calls.append(1))
    return calls


for label, base, norms in (
        ("GPT-2", GPT2LMHeadModel(config), lambda m: [b.ln_1 for b in m.transformer.h]),
        ("LLaMA", LlamaForCausalLM(llama_config),
         lambda m: [layer._coda_tail for layer in m.model.layers])):
    checkpointed = copy.deepcopy(base)
    coda.patch(checkpointed)
    for model in (base, checkpointed):
        # activation_checkpointing_enable in later transformers 5 releases,
        # gradient_checkpointing_enable (its deprecated alias there) before.
        enable = (getattr(model, "activation_checkpointing_enable", None)
                  or model.gradient_checkpointing_enable)
        enable()

    calls = forward_calls(norms(checkpointed))
    check_training(f"{label} checkpointed", base, checkpointed, bert_tokens)
    assert len(calls) == 3 * len(norms(checkpointed)), (label, len(calls))
# CHECK: GPT-2 checkpointed losses and gradients: dropout off
# CHECK: LLaMA checkpointed losses and gradients: dropout off

# Under transformers 4, whose decoder layers return tuples, the layers are
# left as they are (their gated MLPs still go on coda).
import transformers  # noqa: E402

version, transformers.__version__ = transformers.__version__, "4.46.0"
report = coda.patch(LlamaForCausalLM(llama_config))
transformers.__version__ = version
print(report.skipped[0][1])
print(report.replaced[1][1])
# CHECK: a decoder layer of transformers 4.46.0, whose layers return tuples (the patched layer returns a tensor, as transformers 5 does)
# CHECK: gated MLP (silu) as coda's fused gated MLP
transformers.__version__ = "4.46.0"
report = coda.patch(GPT2LMHeadModel(config))
transformers.__version__ = version
print(report.skipped[0][1])
# CHECK: a GPT2Block of transformers 4.46.0, whose blocks return tuples (the patched block returns a tensor, as transformers 5 does)


class UnknownCacheBlock(modeling_gpt2.GPT2Block):
    def forward(self, hidden_states, layer_past=None, *args, **kwargs):
        return super().forward(hidden_states, layer_past, *args, **kwargs)


UnknownCacheBlock.__name__ = "GPT2Block"
UnknownCacheBlock.__module__ = modeling_gpt2.__name__
unknown = GPT2LMHeadModel(config)
for layer in unknown.transformer.h:
    layer.__class__ = UnknownCacheBlock
print(coda.patch(unknown).skipped[0][1])
# CHECK: a GPT2Block whose forward or attention takes its cache as neither `cache` nor `past_key_values`

# Models loaded from a checkpoint directory (save_pretrained, then
# from_pretrained) patch as models built from a config do: one step gives
# the eager model's loss and gradients; the patched model's own
# save_pretrained writes the checkpoint an unpatched model loads.
import tempfile  # noqa: E402

for label, cls, model_config in (("GPT-2", GPT2LMHeadModel, config),
                                 ("LLaMA", LlamaForCausalLM, llama_config)):
    with tempfile.TemporaryDirectory() as saved, tempfile.TemporaryDirectory() as resaved:
        cls(model_config).save_pretrained(saved)
        loaded, loaded_fused = cls.from_pretrained(saved), cls.from_pretrained(saved)
        print(coda.patch(loaded_fused).replaced[1][1].split(",")[0])
        check_training(f"{label} from a checkpoint", loaded, loaded_fused, bert_tokens)
        loaded_fused.save_pretrained(resaved)
        back = cls.from_pretrained(resaved)
        for key, tensor in loaded.state_dict().items():
            assert torch.equal(back.state_dict()[key], tensor), f"{label}: {key} saved differently"
# CHECK: block: attention output projection + dropout + residual + ln_2 in one kernel
# CHECK: GPT-2 from a checkpoint losses and gradients: dropout off
# CHECK: decoder layer: input RMSNorm + QKV projection + rotary embedding in one kernel
# CHECK: LLaMA from a checkpoint losses and gradients: dropout off

# Under torch.autocast (bf16 on the CPU) with float32 parameters, as mixed
# precision trains: the patched models' loss and float32 gradients are the
# eager models' under autocast within bf16's rounding.
for label, make in (("GPT-2", lambda: GPT2LMHeadModel(config)),
                    ("BERT", lambda: BertForMaskedLM(bert_config)),
                    ("LLaMA", lambda: LlamaForCausalLM(llama_config))):
    eager_amp = make()
    fused_amp = copy.deepcopy(eager_amp)
    coda.patch(fused_amp)
    losses = []
    for model in (eager_amp, fused_amp):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            losses.append(model(bert_tokens, labels=bert_tokens).loss)
        losses[-1].backward()
    close(f"{label} autocast loss", losses[1], losses[0], 1e-3)
    for (name, p_eager), p_fused in zip(eager_amp.named_parameters(), fused_amp.parameters()):
        # Attention's key bias: 0 in exact arithmetic, bf16's noise here.
        if p_eager.grad is None or name.endswith("key.bias"):
            continue
        if p_fused.grad is None or p_fused.grad.dtype != torch.float32:
            failures.append(f"{label} autocast: {name}'s gradient is not float32")
        else:
            close(f"{label} autocast grad {name}", p_fused.grad, p_eager.grad, 3e-2)
print("autocast: done")
# CHECK: autocast: done

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("hf models: ok")
# CHECK: hf models: ok
