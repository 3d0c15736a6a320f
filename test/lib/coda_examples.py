"""Inputs and fp64 references for the programs in examples/, shared by the
CPU and GPU end-to-end tests.

    for name, case in EXAMPLES.items():
        arrays, scalars = case.inputs(rng, m, n, k)
        want = case.reference(arrays, scalars, seed)   # {output: array}
"""

import numpy as np

import coda_ref as ref
from coda_test import random


def _gemm(arrays, dtype="bf16"):
    # The examples use the default layouts: A [M, K], B [N, K].
    return ref.round_to(arrays["a"], dtype) @ ref.round_to(arrays["b"], dtype).T


class Example:
    def __init__(self, inputs, reference, tolerances):
        self.inputs, self.reference, self.tolerances = inputs, reference, tolerances


def _ab(rng, m, n, k):
    return {"a": random(rng, m, k), "b": random(rng, n, k) / np.float32(np.sqrt(k))}


def _paper(arrays, scalars, seed):
    out = ref.dropout(ref.gelu_tanh(_gemm(arrays)), 0.1, seed)
    return {"output": out + ref.round_bf16(arrays["residual"])}


def _mlp_up(arrays, scalars, seed):
    acc = _gemm(arrays)
    pre = acc * np.float32(scalars["alpha"]) + arrays["bias"]
    out = ref.gelu_tanh(pre) * arrays["rs"][:, None] + ref.round_bf16(arrays["residual"])
    return {"output": out, "pre": pre, "dbias": acc.sum(axis=0)}


def _layernorm(arrays, scalars, seed):
    x = _gemm(arrays) + arrays["bias"] + ref.round_bf16(arrays["residual"])
    mean = x.mean(axis=1)
    d = x - mean[:, None]
    rstd = 1.0 / np.sqrt((d * d).mean(axis=1) + 1e-5)
    return {"output": d * rstd[:, None] * arrays["gamma"] + arrays["beta"],
            "mean": mean, "rstd": rstd}


def _softmax(arrays, scalars, seed):
    s = _gemm(arrays) * np.float32(scalars["scale"])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return {"output": e / e.sum(axis=1, keepdims=True)}


def _bias_grad(arrays, scalars, seed):
    grad = _gemm(arrays) * ref.round_bf16(arrays["mask"])
    return {"output": grad, "dbias": grad.sum(axis=0)}


def _rope_inputs(rng, m, n, k):
    # Positions of a ragged batch of sequences; 128-column heads whose first
    # two are Q and K (rotated) and the rest V (inv_freq and sign 0).
    column = np.arange(n) % 128
    inv_freq = 10000.0 ** (-(column % 64) / 64.0)
    heads = np.arange(n) // 128
    inv_freq = np.where(heads < 2, inv_freq, 0).astype(np.float32)
    sign = np.where(heads < 2, np.where(column < 64, -1.0, 1.0), 0).astype(np.float32)
    pos = (np.arange(m) % 1000).astype(np.float32)
    return {**_ab(rng, m, n, k), "pos": pos, "inv_freq": inv_freq, "sign": sign}, {}


def _rope(arrays, scalars, seed):
    x = _gemm(arrays)
    n = x.shape[1]
    partner = np.arange(n) ^ 64
    inside = partner < n
    rotated = np.where(inside, x[:, np.minimum(partner, n - 1)], 0)
    # The angle is an f32 product, as the program computes it.
    angle = (arrays["pos"][:, None] * arrays["inv_freq"][None, :]).astype(np.float32)
    angle = angle.astype(np.float64)
    return {"output": x * np.cos(angle) + rotated * arrays["sign"] * np.sin(angle)}


def _cross_entropy_inputs(rng, m, n, k):
    # Classes of every column, and rows that count for nothing (-1).
    target = rng.integers(-1, n, m).astype(np.float32)
    return {**_ab(rng, m, n, k), "target": target}, {}


def _cross_entropy(arrays, scalars, seed):
    x = _gemm(arrays)
    top = x.max(axis=1)
    lse = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
    column = np.arange(x.shape[1])[None, :]
    picked = np.where(column == arrays["target"][:, None], x, 0).sum(axis=1)
    return {"lse": lse, "picked": picked}


EXAMPLES = {
    "paper": Example(lambda rng, m, n, k: ({**_ab(rng, m, n, k), "residual": random(rng, m, n)}, {}),
                     _paper, {"output": "bf16"}),
    "mlp_up": Example(lambda rng, m, n, k: ({**_ab(rng, m, n, k), "bias": random(rng, n),
                                             "residual": random(rng, m, n), "rs": random(rng, m)},
                                            {"alpha": 0.75}),
                      _mlp_up, {"output": "bf16", "pre": "f32", "dbias": "f32"}),
    "bias_gelu": Example(lambda rng, m, n, k: ({**_ab(rng, m, n, k), "bias": random(rng, n)}, {}),
                         lambda a, s, seed: {"output": ref.gelu_tanh(_gemm(a) + a["bias"])},
                         {"output": "bf16"}),
    "residual_layernorm": Example(
        lambda rng, m, n, k: ({**_ab(rng, m, n, k), "bias": random(rng, n),
                               "residual": random(rng, m, n), "gamma": random(rng, n),
                               "beta": random(rng, n)}, {}),
        _layernorm, {"output": "bf16", "mean": "f32", "rstd": "f32"}),
    "softmax_rows": Example(lambda rng, m, n, k: (_ab(rng, m, n, k), {"scale": 0.5}),
                            _softmax, {"output": "bf16"}),
    "squared_relu": Example(lambda rng, m, n, k: ({**_ab(rng, m, n, k), "bias": random(rng, n)}, {}),
                            lambda a, s, seed: {"output": np.maximum(_gemm(a) + a["bias"], 0) ** 2},
                            {"output": "bf16"}),
    "bias_grad": Example(lambda rng, m, n, k: ({**_ab(rng, m, n, k),
                                                "mask": (rng.random((m, n)) > 0.5).astype(np.float32)},
                                               {}),
                         _bias_grad, {"output": "bf16", "dbias": "f32"}),
    "swiglu": Example(lambda rng, m, n, k: (_ab(rng, m, n, k), {}),
                      lambda a, s, seed: {"output": ref.silu(_gemm(a)[:, 0::2]) * _gemm(a)[:, 1::2]},
                      {"output": "bf16"}),
    "rope": Example(_rope_inputs, _rope, {"output": "bf16"}),
    "cross_entropy": Example(_cross_entropy_inputs, _cross_entropy, {"lse": "f32", "picked": "f32"}),
}
