# REQUIRES: torch, transformers
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
# RUN: %if transformers-5.17 %{ env PYTHONPATH=%transformers_517 CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s %}
#
# coda.unmasked_attention(model): a Hugging Face model called without an
# attention mask calls SDPA without one (is_causal for a causal model) even
# where transformers cannot read its inputs (a CUDA graph being captured,
# torch.compile tracing: simulated here by masking_utils.is_tracing), where
# the model as built attends through a dense mask; the loss is the model's
# as built, with and without a padding mask, also after coda.patch (whose
# decoder layers call the model's attention function); a model whose
# attention is not SDPA, or a module without a config, is refused.

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
import transformers.masking_utils as masking
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, \
    LlamaForCausalLM

import coda

torch.manual_seed(0)
calls = []
sdpa = torch.nn.functional.scaled_dot_product_attention


def recorded(*args, attn_mask=None, is_causal=False, **kwargs):
    calls.append((attn_mask is None, is_causal))
    return sdpa(*args, attn_mask=attn_mask, is_causal=is_causal, **kwargs)


torch.nn.functional.scaled_dot_product_attention = recorded
tracing = masking.is_tracing


def masks(model, tokens, traced, **inputs):
    """How each SDPA call of a forward saw its mask: ((no mask, is_causal),
    ...) once each, and the loss. A causal LM is called as in training, with
    no key and value cache."""
    if not isinstance(model, BertForMaskedLM):
        inputs["use_cache"] = False
    calls.clear()
    masking.is_tracing = (lambda *args, **kwargs: True) if traced else tracing
    try:
        loss = model(input_ids=tokens, labels=tokens, **inputs).loss
    finally:
        masking.is_tracing = tracing
    return sorted(set(calls)), loss


models = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, vocab_size=64, attn_implementation="sdpa")),
    "gpt2": lambda: GPT2LMHeadModel(GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
        attn_implementation="sdpa")),
    "bert": lambda: BertForMaskedLM(BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, attn_implementation="sdpa")),
}
tokens = torch.randint(0, 64, (2, 12))
padding = torch.ones(2, 12, dtype=torch.long)
padding[1, 9:] = 0
for name, build in models.items():
    torch.manual_seed(1)
    model = build().eval()
    torch.manual_seed(1)
    unmasked = coda.unmasked_attention(build().eval())
    assert coda.unmasked_attention(unmasked) is unmasked
    built, want = masks(model, tokens, traced=True)
    got, loss = masks(unmasked, tokens, traced=True)
    _, eager = masks(model, tokens, traced=False)
    print(f"{name}: traced, as built: {built}; unmasked: {got}; "
          f"loss {abs(loss - eager).item():.1e} from eager's")
    (_, want), (seen, got) = (masks(model, tokens, False, attention_mask=padding),
                              masks(unmasked, tokens, False, attention_mask=padding))
    print(f"{name}: padded: masked {not any(none for none, _ in seen)}, loss "
          f"{abs(got - want).item():.1e} from eager's")
# CHECK: llama: traced, as built: [(False, False)]; unmasked: [(True, True)]; loss 0.0e+00 from eager's
# CHECK: llama: padded: masked True, loss 0.0e+00 from eager's
# CHECK: gpt2: traced, as built: [(False, False)]; unmasked: [(True, True)]; loss 0.0e+00 from eager's
# CHECK: gpt2: padded: masked True, loss 0.0e+00 from eager's
# (transformers 5.25 passes BERT no mask while tracing either; 5.17 a dense one.)
# CHECK: bert: traced, as built: [({{True|False}}, False)]; unmasked: [(True, False)]; loss 0.0e+00 from eager's
# CHECK: bert: padded: masked True, loss 0.0e+00 from eager's

# After coda.patch, in either order: the patched layers attend through the
# model's attention function, unmasked alike.
torch.manual_seed(1)
model = models["llama"]().eval()
_, want = masks(model, tokens, traced=False)
for order in ("patched, then unmasked", "unmasked, then patched"):
    torch.manual_seed(1)
    patched = models["llama"]().eval()
    for step in order.split(", then "):
        if step == "patched":
            coda.patch(patched)
        else:
            coda.unmasked_attention(patched)
    seen, loss = masks(patched, tokens, traced=True)
    print(f"llama {order}: traced {seen}, loss within 1e-5 of eager's "
          f"{abs(loss - want).item() <= 1e-5 * abs(want).item()}")
# CHECK: llama patched, then unmasked: traced [(True, True)], loss within 1e-5 of eager's True
# CHECK: llama unmasked, then patched: traced [(True, True)], loss within 1e-5 of eager's True

for what, module in (("eager attention", models["llama"]().eval().to(torch.float32)),
                     ("a module", torch.nn.Linear(2, 2))):
    if what == "eager attention":
        module.set_attn_implementation("eager")
    try:
        coda.unmasked_attention(module)
        print(f"{what}: accepted")
    except ValueError as error:
        print(f"{what}: {error}")
# CHECK: eager attention: unmasked_attention: expected a Hugging Face model whose attention is SDPA (attn_implementation='sdpa'); this one's is 'eager'
# CHECK: a module: unmasked_attention: expected a Hugging Face model whose attention is SDPA (attn_implementation='sdpa'); a Linear has no config naming one

# An SDPA model without set_attn_implementation (an older transformers), and
# a transformers without the registries (their module hidden here).
from types import SimpleNamespace  # noqa: E402


class OldModel:
    config = SimpleNamespace(_attn_implementation="sdpa")


hidden = "transformers.integrations.sdpa_attention"
for what, module in (("an older model", OldModel()), ("no registries", models["bert"]())):
    saved = sys.modules.get(hidden)
    if what == "no registries":
        sys.modules[hidden] = None
    try:
        coda.unmasked_attention(module)
        print(f"{what}: accepted")
    except ValueError as error:
        print(f"{what}: {error}")
    finally:
        if saved is None:
            sys.modules.pop(hidden, None)
        else:
            sys.modules[hidden] = saved
# CHECK: an older model: unmasked_attention: a OldModel cannot change its attention implementation (no set_attn_implementation: transformers 5 has it)
# CHECK: no registries: unmasked_attention: this transformers has no AttentionInterface and AttentionMaskInterface to register an attention with
