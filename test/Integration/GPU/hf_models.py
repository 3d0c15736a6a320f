# REQUIRES: cuda-gpu, torch, transformers
# RUN: env CODA_CACHE_DIR=%t.cache CODA_RUNTIME_LIBRARY=%coda_obj/lib/libcoda_runtime.so %python %s %coda_src | FileCheck %s
#
# coda.patch on Hugging Face models on the GPU, in bf16: a GPT2LMHeadModel, a
# BertForMaskedLM, a LlamaForCausalLM (its decoder layers: input RMSNorm, QKV
# projection and rotary embedding in one kernel; output projection and residual
# in one kernel, then the gated MLP with the post-attention RMSNorm folded into
# its gate and up projections' GEMM) and T5ForConditionalGeneration models built from
# configs, with ragged token counts and an odd vocabulary. One training step of the patched model (loss and every
# gradient) is compared with the same step of the model in float64; the
# patched model must be as close to it as the eager bf16 model is (within
# twice eager's error, or 1e-2). Every tensor PyTorch allocates is filled with
# NaN first, so an output the kernels leave unwritten shows. Then each
# patched model's whole step captured in one CUDA graph and replayed.

import copy
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM, T5Config, T5ForConditionalGeneration)

import coda

torch.use_deterministic_algorithms(True, warn_only=True)
torch.utils.deterministic.fill_uninitialized_memory = True
cuda = torch.device("cuda")
torch.manual_seed(0)
failures = []


def error(got, want):
    got, want = got.double(), want.double()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return ((got - want).norm() / want.norm().clamp_min(1e-12)).item()


def step(model, tokens, autocast=None, **inputs):
    model.train()
    model.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=autocast, enabled=autocast is not None):
        loss = model(tokens, labels=tokens, **inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def check_training(label, model, tokens, autocast=None):
    """One step of `model` patched, in bf16 or (`autocast`: f16 or bf16) with
    float32 parameters under torch.autocast, against the same step in float64."""
    reference = copy.deepcopy(model).to(cuda, torch.float64)
    eager = copy.deepcopy(model).to(cuda, torch.float32 if autocast else torch.bfloat16)
    fused = copy.deepcopy(eager)
    report = coda.patch(fused)
    loss_ref, grads_ref = step(reference, tokens)
    loss_eager, grads_eager = step(eager, tokens, autocast)
    loss_fused, grads_fused = step(fused, tokens, autocast)
    worst = 0.0
    for what, got, base, want in [("loss", loss_fused, loss_eager, loss_ref)] + [
            (name, grads_fused.get(name), grads_eager[name], grads_ref[name]) for name in grads_ref]:
        if got is None:
            failures.append(f"{label} {what}: no gradient")
            continue
        # Gradients in the parameters' types; the loss in f32 (BERT's from
        # bf16 logits is bf16 in eager).
        if what != "loss" and got.dtype != base.dtype:
            failures.append(f"{label} {what}: {got.dtype}, eager's is {base.dtype}")
        ours, theirs = error(got, want), error(base, want)
        worst = max(worst, ours / max(theirs, 1e-3))
        if not ours <= max(2 * theirs, 1e-2):
            failures.append(f"{label} {what}: relative error {ours:.2e}, eager bf16 {theirs:.2e}")
    print(f"{label}: {len(report.replaced)} modules replaced; loss and {len(grads_ref)} gradients "
          f"checked (worst error {worst:.2f}x eager's)")


gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=1001, n_positions=256, n_embd=192, n_layer=2, n_head=3, bos_token_id=0, eos_token_id=0,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
check_training("GPT-2", gpt2, torch.randint(0, 1001, (3, 67), device=cuda))
# CHECK: GPT-2: 4 modules replaced; loss and {{[0-9]+}} gradients checked

bert = BertForMaskedLM(BertConfig(vocab_size=1001, hidden_size=256, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=1024,
                                  max_position_embeddings=256, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0))
check_training("BERT", bert, torch.randint(0, 1001, (2, 93), device=cuda))
# CHECK: BERT: 8 modules replaced; loss and {{[0-9]+}} gradients checked

llama = LlamaForCausalLM(LlamaConfig(vocab_size=1001, hidden_size=256, intermediate_size=688,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, max_position_embeddings=256))
check_training("LLaMA", llama, torch.randint(0, 1001, (2, 93), device=cuda))
# CHECK: LLaMA: 5 modules replaced; loss and {{[0-9]+}} gradients checked

# T5's feed-forward layers (RMSNorm, then the MLP with its residual: plain
# with ReLU, or gated with GELU), its RMSNorms and its odd vocabulary's head.
for label, proj in (("T5", "relu"), ("T5 gated", "gated-gelu")):
    t5 = T5ForConditionalGeneration(T5Config(
        vocab_size=1001, d_model=256, d_kv=64, d_ff=688, num_layers=2, num_heads=4,
        dropout_rate=0.0, feed_forward_proj=proj, decoder_start_token_id=0, pad_token_id=0,
        eos_token_id=1))
    check_training(label, t5, torch.randint(2, 1001, (2, 93), device=cuda))
# CHECK: T5: 17 modules replaced; loss and {{[0-9]+}} gradients checked
# CHECK: T5 gated: 17 modules replaced; loss and {{[0-9]+}} gradients checked

# Mixed precision, PyTorch's standard recipe: float32 parameters, the GEMMs in
# autocast's type (f16 by default on CUDA, or bf16), gradients in float32.
tokens = torch.randint(0, 1001, (2, 93), device=cuda)
for model in ("GPT-2", gpt2), ("BERT", bert), ("LLaMA", llama):
    for dtype in torch.float16, torch.bfloat16:
        check_training(f"{model[0]} under autocast {str(dtype)[6:]}", model[1], tokens, dtype)
# CHECK: GPT-2 under autocast float16: 4 modules replaced
# CHECK: GPT-2 under autocast bfloat16: 4 modules replaced
# CHECK: BERT under autocast float16: 8 modules replaced
# CHECK: BERT under autocast bfloat16: 8 modules replaced
# CHECK: LLaMA under autocast float16: 5 modules replaced
# CHECK: LLaMA under autocast bfloat16: 5 modules replaced


def graphed_step(model, tokens, **inputs):
    """One step of `model` (forward and backward) captured whole in a CUDA
    graph after warm-up steps on a side stream, as bench/train.py's +graphs
    variants run it, then replayed: its loss and gradients."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(model, tokens, **inputs)
    torch.cuda.current_stream().wait_stream(side)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        loss = model(tokens, labels=tokens, **inputs).loss
        loss.backward()
    graph.replay()
    torch.cuda.synchronize()
    return loss.detach().clone(), {n: p.grad.clone() for n, p in model.named_parameters()
                                   if p.grad is not None}


def replay_errors(model, **inputs):
    """The relative error of the loss and of each gradient of `model`'s step
    replayed from a CUDA graph (graphed_step) against the step launched from
    Python, by name ("loss" for the loss)."""
    want_loss, want_grads = step(model, tokens, **inputs)
    want_loss, want_grads = want_loss.clone(), {n: g.clone() for n, g in want_grads.items()}
    got_loss, got_grads = graphed_step(model, tokens, **inputs)
    errors = {n: error(got_grads.get(n, torch.full_like(g, float("nan"))), g)
              for n, g in want_grads.items()}
    errors["loss"] = error(got_loss, want_loss)
    return errors


# The whole step of each patched model captured in one CUDA graph: nothing
# in it reads the GPU's answers on the host or copies from pageable memory,
# and a replay gives the loss and gradients of the step launched from Python
# (coda's kernels are deterministic: the same to the bit), or as close to
# them as eager PyTorch's replay gives its own: a gradient that is zero in
# exact arithmetic (BERT's key biases: softmax ignores a constant added to a
# query's scores) is rounding noise whose sum the attention's
# non-deterministic backward orders differently each run. BERT is given its
# attention mask: without one, Hugging Face's BERT makes a mask of ones while
# a graph is captured and none when launched, so the two run different
# attention kernels (its f32 loss from the logits then differs by 1.8e-5,
# coda's loss by 2.9e-5 on an H100; the same with the mask given).
for label, model, inputs in (("GPT-2", gpt2, {}),
                             ("BERT", bert, {"attention_mask": torch.ones_like(tokens)}),
                             ("LLaMA", llama, {})):
    eager = replay_errors(copy.deepcopy(model).to(cuda, torch.bfloat16), **inputs)
    fused = copy.deepcopy(model).to(cuda, torch.bfloat16)
    coda.patch(fused)
    errors = replay_errors(fused, **inputs)
    for name, ours in errors.items():
        if not ours <= max(1e-6, 2 * eager.get(name, 0.0)):
            failures.append(f"{label} captured whole, {name}: relative error {ours:.2e}, "
                            f"eager's replay {eager.get(name, 0.0):.2e}")
    print(f"{label} captured whole: loss and {len(errors) - 1} gradients as launched")
# CHECK: GPT-2 captured whole: loss and {{[0-9]+}} gradients as launched
# CHECK: BERT captured whole: loss and {{[0-9]+}} gradients as launched
# CHECK: LLaMA captured whole: loss and {{[0-9]+}} gradients as launched

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("hf models on the GPU: ok")
# CHECK: hf models on the GPU: ok
