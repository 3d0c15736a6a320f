# REQUIRES: cuda-gpu, torch
# RUN: %python %s %coda_src | FileCheck %s
#
# coda.HostFunction on CUDA tensors: the host code runs on the CPU and each
# program it calls as its fused kernel on the GPU (arguments copied there,
# outputs back); the results, on the GPU, are checked against an fp64
# computation of the same MLP with coda's dropout mask, on a ragged M and
# fresh random non-zero inputs (an element a kernel missed would hold what
# torch.empty left there and show as a mismatch).

import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import numpy as np
import torch

import coda

source = open(os.path.join(sys.argv[1], "test", "Runner", "Inputs", "host-mlp.mlir")).read()
torch.manual_seed(1)
M = 333
x = torch.randn(M, 64, device="cuda").bfloat16()
w1 = (torch.randn(96, 64, device="cuda") / 8).bfloat16()
b1 = torch.randn(96, device="cuda")
w2 = (torch.randn(64, 96, device="cuda") / 8).bfloat16()

mlp = coda.HostFunction(source, "mlp")
y, h = mlp(x, w1, b1, w2)
print(y.device.type, h.device.type, list(y.shape), list(h.shape))
# CHECK: cuda cuda [333, 64] [333, 96]

xd, w1d, b1d, w2d = (t.double().cpu() for t in (x, w1, b1, w2))
acc1 = xd @ w1d.T + b1d
h_ref = 0.5 * acc1 * (1 + torch.tanh(0.7978845608028654 * (acc1 + 0.044715 * acc1 ** 3)))
mask = torch.from_numpy(coda.dropout_mask(7, (M, 64), 0.25).astype(np.float64))
y_ref = (h.double().cpu() * 0.5) @ w2d.T * 1.5 * mask / 0.75 + xd


def error(got, want):
    return ((got.double().cpu() - want).norm() / want.norm()).item()


print(f"h {error(h, h_ref) < 1e-2}, y {error(y, y_ref) < 1e-2}")
# CHECK: h True, y True
