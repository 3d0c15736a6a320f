"""coda: GEMM + epilogue programs for Transformer training.

Installed with ``pip install ./python`` after a build (the libraries come
along); ``coda.nn``, ``coda.autograd`` and ``coda.Program`` need PyTorch.
This package holds what Python users need next to the compiler:

- ``coda.Program``: compile a coda program and run it on PyTorch CUDA tensors,
  on PyTorch's current stream (``coda.runtime``, over libcoda_runtime.so);
- ``coda.reference.ReferenceProgram``: the same programs on CPU tensors, through
  the CPU reference lowering (libcoda_reference.so), in float64 on request;
- ``coda.HostFunction``: a whole function of a module (an exported model
  function, raised and outlined) run as host code that launches the coda
  programs it calls, as fused kernels on CUDA tensors or on the CPU reference
  on CPU tensors (``coda.host``);
- ``coda.nn``: modules to train with (``Linear`` with any epilogue, the fused
  ``MLP``, ``GatedMLP``, ``OutProjection``, ``ResidualNormMLP`` and
  ``RMSNormRotaryQKV``; an LM
  head's loss without logits, ``linear_cross_entropy``), whose
  backward coda derives (``coda.autograd``: the custom ops
  ``torch.ops.coda.run``, ``torch.ops.coda.mlp`` and ``torch.ops.coda.tail``,
  for eager mode, torch.compile and CUDA graphs);
- ``coda.patch(model)``: a model's Transformer blocks and MLPs (nanoGPT-style
  blocks, LLaMA-style decoder layers, Hugging Face's GPT-2, BERT and LLaMA
  modules, MLP modules, nn.Sequential MLPs) on those modules, in place, its
  parameters and state_dict unchanged (``coda.patching``);
- ``coda.unmasked_attention(model)``: a Hugging Face model's SDPA attention
  without the dense mask transformers builds while a CUDA graph is captured;
- ``coda.dropout``: coda's dropout mask (Philox-4x32-10, eight elements per call)
  in numpy, bit-identical to what compiled programs draw, so a backward pass or a
  test can regenerate the mask of any forward run from its seed.
"""

from .dropout import dropout, dropout_bits, dropout_mask, dropout_threshold, philox4x32
from .host import HostFunction
from .runtime import CodaError, Program


def patch(model, verbose=False):
    """Puts the Transformer blocks and MLPs of `model` on coda kernels, in
    place; returns what it replaced and what not (coda.patching.patch)."""
    from .patching import patch as _patch

    return _patch(model, verbose)


def unmasked_attention(model):
    """Runs a Hugging Face model's SDPA attention without a mask where it is
    called without one, also under CUDA graph capture and torch.compile
    (coda.patching.unmasked_attention); returns the model."""
    from .patching import unmasked_attention as _unmasked

    return _unmasked(model)


__all__ = ["CodaError", "HostFunction", "Program", "dropout", "dropout_bits", "dropout_mask",
           "dropout_threshold", "patch", "philox4x32", "unmasked_attention"]
