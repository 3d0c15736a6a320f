# REQUIRES: torch, transformers
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src | FileCheck %s
#
# coda.patch on the Hugging Face decoder families beside LLaMA that look like
# it or like GPT-2 in places (a gated MLP, an RMSNorm, a rotary embedding,
# fused QKV or gate/up weights, parallel attention and MLP, a norm of
# (1 + weight)), and on the encoders beside BERT and RoBERTa (masked-LM
# heads; copies of BERT's layer under other names, and layers of their own:
# DistilBERT's feed-forward halves on coda's fused MLP), on T5's
# encoder-decoders (their feed-forward layers, plain and gated) and on the
# vision and contrastive encoders whose MLPs are fc1, activation_fn, fc2
# (ViT's, CLIP's with its QuickGELU, SigLIP's),
# each built small from a config with its dropouts off, in float64 on the
# CPU reference: whatever the patch replaces, and whatever it leaves, one
# training step gives the eager model's loss and every gradient (the causal
# LMs whose loss is plain cross-entropy on their logits, or on them scaled
# (Granite's, Cohere's) or soft-capped (Gemma 2's, Gemma 3's), with it from
# the LM head's GEMM, no logits). A family the installed
# transformers lacks is reported as such.

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
T5_LIKE = dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4,
               decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
VISION = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
              image_size=32, patch_size=8)


def tokens_in():
    tokens = torch.randint(3, VOCAB, (2, 12))
    return dict(input_ids=tokens, labels=tokens)


def images_in():
    return dict(pixel_values=torch.randn(2, 3, 32, 32, dtype=torch.float64),
                labels=torch.tensor([1, 0]))


def pairs_in():
    return dict(input_ids=torch.randint(3, VOCAB, (2, 12)),
                pixel_values=torch.randn(2, 3, 32, 32, dtype=torch.float64), return_loss=True)


# (model class, config class, config arguments, attention implementation[,
# the inputs of a training step, tokens_in's by default])
FAMILIES = [
    ("GemmaForCausalLM", "GemmaConfig", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("Gemma2ForCausalLM", "Gemma2Config", dict(LLAMA_LIKE, head_dim=16), "eager"),
    ("Gemma3ForCausalLM", "Gemma3TextConfig",
     dict(LLAMA_LIKE, head_dim=16, final_logit_softcapping=5.0), "sdpa"),
    ("MistralForCausalLM", "MistralConfig", LLAMA_LIKE, "sdpa"),
    ("Qwen2ForCausalLM", "Qwen2Config", LLAMA_LIKE, "sdpa"),
    ("Qwen3ForCausalLM", "Qwen3Config", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("OlmoForCausalLM", "OlmoConfig", LLAMA_LIKE, "sdpa"),
    ("Olmo2ForCausalLM", "Olmo2Config", LLAMA_LIKE, "sdpa"),
    ("GraniteForCausalLM", "GraniteConfig", dict(LLAMA_LIKE, logits_scaling=4.0), "sdpa"),
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
    ("Olmo3ForCausalLM", "Olmo3Config", LLAMA_LIKE, "sdpa"),
    ("SmolLM3ForCausalLM", "SmolLM3Config", dict(LLAMA_LIKE, pad_token_id=0), "sdpa"),
    ("Glm4ForCausalLM", "Glm4Config", dict(LLAMA_LIKE, pad_token_id=0), "sdpa"),
    ("Ernie4_5ForCausalLM", "Ernie4_5Config", LLAMA_LIKE, "sdpa"),
    ("ArceeForCausalLM", "ArceeConfig", LLAMA_LIKE, "sdpa"),
    ("HeliumForCausalLM", "HeliumConfig", dict(LLAMA_LIKE, head_dim=16), "sdpa"),
    ("NemotronForCausalLM", "NemotronConfig", LLAMA_LIKE, "sdpa"),
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
    ("T5ForConditionalGeneration", "T5Config", T5_LIKE, "eager"),
    ("T5ForConditionalGeneration", "T5Config", dict(T5_LIKE, feed_forward_proj="gated-gelu"),
     "eager"),
    ("MT5ForConditionalGeneration", "MT5Config", T5_LIKE, "eager"),
    ("UMT5ForConditionalGeneration", "UMT5Config", T5_LIKE, "eager"),
    # BART's layers hold fc1, fc2 and activation_fn beside their attention:
    # not an MLP module.
    ("BartForConditionalGeneration", "BartConfig",
     dict(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
          encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=96,
          decoder_ffn_dim=96, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
          eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2), "sdpa"),
    ("ViTForImageClassification", "ViTConfig", VISION, "sdpa", images_in),
    ("CLIPModel", "CLIPConfig",
     dict(text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                           num_hidden_layers=2, num_attention_heads=4,
                           max_position_embeddings=16, bos_token_id=1, eos_token_id=2),
          vision_config=VISION, projection_dim=32), "sdpa", pairs_in),
    ("SiglipModel", "SiglipConfig",
     dict(text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                           num_hidden_layers=2, num_attention_heads=4,
                           max_position_embeddings=16),
          vision_config=VISION), "sdpa", pairs_in),
]
DROPOUTS = ("dropout", "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop",
            "attn_pdrop", "residual_dropout", "embedding_dropout", "classifier_dropout",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "mlp_dropout", "dropout_rate")


def relative(got, want, floor=1e-12):
    """|got - want| / |want|, |want| taken as at least `floor`."""
    return ((got - want).norm() / want.norm().clamp_min(floor)).item()


failures = []
for model_name, config_name, arguments, attention, *inputs in FAMILIES:
    if not hasattr(transformers, model_name):
        print(f"{model_name}: not in this transformers")
        continue
    config = getattr(transformers, config_name)(**arguments)
    config._attn_implementation = attention
    parts = config, getattr(config, "text_config", None), getattr(config, "vision_config", None)
    for part in parts:
        for name in DROPOUTS:
            if isinstance(getattr(part, name, None), float):
                setattr(part, name, 0.0)
    eager = getattr(transformers, model_name)(config).double()
    fused = copy.deepcopy(eager)
    report = coda.patch(fused)
    step = (inputs[0] if inputs else tokens_in)()
    losses = []
    for model in (eager, fused):
        model.train()
        model.zero_grad(set_to_none=True)
        loss = model(**step).loss
        loss.backward()
        losses.append(loss.detach())
    errors, found = [relative(losses[1], losses[0])], []
    # A gradient that is 0 but for rounding (a key projection's bias, which
    # the softmax cancels) is compared at a millionth of the largest.
    floor = 1e-6 * max(p.grad.norm() for p in eager.parameters() if p.grad is not None)
    for (name, p_eager), (_, p_fused) in zip(eager.named_parameters(), fused.named_parameters()):
        if (p_eager.grad is None) != (p_fused.grad is None):
            found.append(f"{model_name}: {name} has a gradient in one model only")
        elif p_eager.grad is not None:
            errors.append(relative(p_fused.grad, p_eager.grad, floor))
    if not max(errors) < 1e-5:
        found.append(f"{model_name}: relative error {max(errors):.2e}\n{report}")
    failures += found
    verdict = "differ" if found else "equal"
    head = any("loss from the hidden states" in what for _, what in report.replaced)
    print(f"{model_name}: loss and gradients {verdict} ({str(report).splitlines()[0]}"
          f"{', the loss in the head' if head else ''})")

# CHECK: GemmaForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Gemma2ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Gemma3ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: MistralForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Qwen2ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Qwen3ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: OlmoForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Olmo2ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: GraniteForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: CohereForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: StableLmForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Starcoder2ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Phi3ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: PhiForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: GPTNeoXForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: GPTJForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: FalconForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: OPTForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: BloomForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Olmo3ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: SmolLM3ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Glm4ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: Ernie4_5ForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: ArceeForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: HeliumForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: NemotronForCausalLM: {{loss and gradients equal \(coda.patch: [0-9]+ modules replaced, the loss in the head\)|not in this transformers}}
# CHECK: ElectraForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: XLMRobertaForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: DebertaV2ForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: MPNetForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: ErnieForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: DistilBertForMaskedLM: loss and gradients equal (coda.patch: 3 modules replaced)
# CHECK: AlbertForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: ModernBertForMaskedLM: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: T5ForConditionalGeneration: loss and gradients equal (coda.patch: 17 modules replaced)
# CHECK: T5ForConditionalGeneration: loss and gradients equal (coda.patch: 17 modules replaced)
# CHECK: MT5ForConditionalGeneration: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: UMT5ForConditionalGeneration: {{loss and gradients equal \(coda.patch:|not in this transformers}}
# CHECK: BartForConditionalGeneration: loss and gradients equal (coda.patch: 1 modules replaced)
# CHECK: ViTForImageClassification: loss and gradients equal (coda.patch: 3 modules replaced)
# CHECK: CLIPModel: loss and gradients equal (coda.patch: 4 modules replaced)
# CHECK: SiglipModel: {{loss and gradients equal \(coda.patch: 5 modules replaced\)|not in this transformers}}
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
# A gated T5 feed-forward with its dropout on: coda's gated MLP applies none.
gated = transformers.T5Config(**dict(T5_LIKE, num_layers=1, feed_forward_proj="gated-gelu"))
print(coda.patch(transformers.T5EncoderModel(gated)))
# CHECK: left as is: encoder.block.0.layer.1: a gated feed-forward (wi_0 and wi_1) with dropout (0.1, 0.1): coda's gated MLP applies none (patched where both are 0)
# A T5 feed-forward of an activation coda does not know, and one whose
# projection has a bias.
plain = transformers.T5Config(**dict(T5_LIKE, num_layers=1))
odd = transformers.T5EncoderModel(plain)
odd.encoder.block[0].layer[1].DenseReluDense.act = torch.nn.Hardswish()
print(coda.patch(odd).skipped)
# CHECK: [('encoder.block.0.layer.1', 'a feed-forward whose activation Hardswish coda does not know')]
odd = transformers.T5EncoderModel(plain)
odd.encoder.block[0].layer[1].DenseReluDense.wi = torch.nn.Linear(64, 96)
print(coda.patch(odd).skipped)
# CHECK: [('encoder.block.0.layer.1', 'a feed-forward whose projections have biases or whose sizes do not chain')]
# A head whose logits the model scales, given a bias: the bias would be
# scaled too, so the model keeps its loss.
granite = transformers.GraniteForCausalLM(
    transformers.GraniteConfig(**dict(LLAMA_LIKE, num_hidden_layers=1)))
granite.lm_head = torch.nn.Linear(64, VOCAB)
print(dict(coda.patch(granite).skipped)[""])
# CHECK: an LM head with a bias whose logits are scaled

print("\n".join(failures) if failures else "all families: ok")
# CHECK-NOT: relative error
# CHECK-NOT: in one model only
# CHECK: all families: ok
