# REQUIRES: torch, transformers
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# coda.patch on the Hugging Face decoder families beside LLaMA that look like
# it or like GPT-2 in places (a gated MLP, an RMSNorm, a rotary embedding,
# fused QKV or gate/up weights, parallel attention and MLP, a norm of
# (1 + weight)), and on the encoders beside BERT and RoBERTa (masked-LM
# heads; copies of BERT's layer under other names, and layers of their own:
# DistilBERT's feed-forward halves on coda's fused MLP),
# each built small from a config with its dropouts off, in float64 on the
# CPU reference: whatever the patch replaces, and whatever it leaves, one
# training step gives the eager model's loss and every gradient. A family
# the installed transformers lacks is reported as such.

import copy
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
import transformers

import coda

torch.manual_seed(0)
VOCAB = 100
LLAMA_LIKE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
ENCODER = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=96, max_position_embeddings=64)
# (model class, config class, config arguments, attention implementation)
FAMILIES = [
    ("GemmaForCausalLM", "GemmaConfig", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("Gemma2ForCausalLM", "Gemma2Config", dict(LLAMA_LIKE, head_dim=16), "eager"),
    ("Gemma3ForCausalLM", "Gemma3TextConfig", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("MistralForCausalLM", "MistralConfig", LLAMA_LIKE, "sdpa"),
    ("Qwen2ForCausalLM", "Qwen2Config", LLAMA_LIKE, "sdpa"),
    ("Qwen3ForCausalLM", "Qwen3Config", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("OlmoForCausalLM", "OlmoConfig", LLAMA_LIKE, "sdpa"),
    ("Olmo2ForCausalLM", "Olmo2Config", LLAMA_LIKE, "sdpa"),
    ("GraniteForCausalLM", "GraniteConfig", LLAMA_LIKE, "sdpa"),
    ("CohereForCausalLM", "CohereConfig", LLAMA_LIKE, "sdpa"),
    ("StableLmForCausalLM", "StableLmConfig", LLAMA_LIKE, "sdpa"),
    ("Starcoder2ForCausalLM", "Starcoder2Config", LLAMA_LIKE, "sdpa"),
    ("Phi3ForCausalLM", "Phi3Config", dict(LLAMA_LIKE, pad_token_id=0), "sdpa"),
    ("PhiForCausalLM", "PhiConfig", dict(LLAMA_LIKE, pad_token_id=0), "sdpa"),
    ("GPTNeoXForCausalLM", "GPTNeoXConfig", LLAMA_LIKE, "sdpa"),
    ("GPTJForCausalLM", "GPTJConfig",
     dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64), "sdpa"),
    ("FalconForCausalLM", "FalconConfig",
     dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4), "sdpa"),
    ("OPTForCausalLM", "OPTConfig",
     dict(vocab_size=VOCAB, hidden_size=64, ffn_dim=96, num_hidden_layers=2,
          num_attention_heads=4, word_embed_proj_dim=64, max_position_embeddings=64), "sdpa"),
    ("BloomForCausalLM", "BloomConfig", dict(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4),
     "eager"),
    ("ElectraForMaskedLM", "ElectraConfig", dict(ENCODER, embedding_size=64), "sdpa"),
    ("XLMRobertaForMaskedLM", "XLMRobertaConfig", dict(ENCODER, max_position_embeddings=80), "sdpa"),
    ("DebertaV2ForMaskedLM", "DebertaV2Config", ENCODER, "eager"),
    ("MPNetForMaskedLM", "MPNetConfig", dict(ENCODER, max_position_embeddings=80), "eager"),
    ("ErnieForMaskedLM", "ErnieConfig", ENCODER, "sdpa"),
    ("DistilBertForMaskedLM", "DistilBertConfig",
     dict(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=96,
          max_position_embeddings=64), "sdpa"),
    ("AlbertForMaskedLM", "AlbertConfig", dict(ENCODER, embedding_size=32), "sdpa"),
    ("ModernBertForMaskedLM", "ModernBertConfig",
     dict(ENCODER, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
          sep_token_id=2), "sdpa"),
]
DROPOUTS = ("dropout", "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop",
            "attn_pdrop", "residual_dropout", "embedding_dropout", "classifier_dropout",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "mlp_dropout")


def relative(got, want):
    return ((got - want).norm() / want.norm().clamp_min(1e-12)).item()


failures = []
for model_name, config_name, arguments, attention in FAMILIES:
    if not hasattr(transformers, model_name):
        print(f"{model_name}: not in this transformers")
        continue
    config = getattr(transformers, config_name)(**arguments)
    config._attn_implementation = attention
    for name in DROPOUTS:
        if isinstance(getattr(config, name, None), float):
            setattr(config, name, 0.0)
    eager = getattr(transformers, model_name)(config).double()
    fused = copy.deepcopy(eager)
    report = coda.patch(fused)
    tokens = torch.randint(3, VOCAB, (2, 12))
    losses = []
    for model in (eager, fused):
        model.train()
        model.zero_grad(set_to_none=True)
        loss = model(tokens, labels=tokens).loss
        loss.backward()
        losses.append(loss.detach())
    errors, found = [relative(losses[1], losses[0])], []
    for (name, p_eager), (_, p_fused) in zip(eager.named_parameters(), fused.named_parameters()):
        if (p_eager.grad is None) != (p_fused.grad is None):
            found.append(f"{model_name}: {name} has a gradient in one model only")
        elif p_eager.grad is not None:
            errors.append(relative(p_fused.grad, p_eager.grad))
    if not max(errors) < 1e-5:
        found.append(f"{model_name}: relative error {max(errors):.2e}\n{report}")
    failures += found
    verdict = "differ" if found else "equal"
    print(f"{model_name}: loss and gradients {verdict} ({str(report).splitlines()[0]})")

# CHECK: GemmaForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Gemma2ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Gemma3ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: MistralForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Qwen2ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Qwen3ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: OlmoForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Olmo2ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: GraniteForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: CohereForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: StableLmForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Starcoder2ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: Phi3ForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: PhiForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: GPTNeoXForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: GPTJForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: FalconForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: OPTForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: BloomForCausalLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: ElectraForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: XLMRobertaForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: DebertaV2ForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: MPNetForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: ErnieForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: DistilBertForMaskedLM: loss and gradients equal (coda.patch: 3 modules replaced)
# CHECK: AlbertForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: ModernBertForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# What DistilBERT's block patch leaves, and why: an FFN applied in chunks, an
# activation coda does not know.
small = dict(vocab_size=VOCAB, dim=64, n_layers=1, n_heads=4, hidden_dim=96)
chunked = transformers.DistilBertConfig(**small, chunk_size_feed_forward=4)
print(coda.patch(transformers.DistilBertModel(chunked)))
# CHECK: left as is: transformer.layer.0: an FFN applied in chunks (chunk_size_feed_forward)
model = transformers.DistilBertModel(transformers.DistilBertConfig(**small))
model.transformer.layer[0].ffn.activation = torch.nn.Hardswish()
print(coda.patch(model))
# CHECK: left as is: transformer.layer.0: an FFN whose activation Hardswish coda does not know

print("\n".join(failures) if failures else "all families: ok")
# CHECK-NOT: relative error
# CHECK-NOT: in one model only
# CHECK: all families: ok
