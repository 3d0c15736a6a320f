"""Runs coda programs on an NVIDIA GPU (sm_90a) through coda.Program, the
product's runtime, and checks every output against a float64 reference.

  fused_kernels.py [CASE ...]    (libcoda_runtime.so: $CODA_RUNTIME_LIBRARY)

Shapes are ragged (not multiples of the tile). Each output is a view, passed as
out=, of a NaN-filled buffer that runs on past its end: every element must be
written, the NaN guard after it left untouched, and the output within a relative
(norm) tolerance of the reference. Dropout decisions must be those of
coda.dropout's definition. A row reduction wider than its kernel's tile must be
refused before the launch. GPT-2's fc1 chain and its plain GEMM are checked and
timed under several tilings, next to cuBLAS and eager PyTorch (informational).
"""

import copy
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'lib'))
sys.path.insert(0, os.path.join(HERE, '..', '..', '..', 'python'))
import coda  # noqa: E402
import coda_ref as ref  # noqa: E402

SEED = 0x1234ABCD5678EF01
GUARD = 4096  # elements of NaN after each output
rng = np.random.default_rng(0)

# --- The programs -------------------------------------------------------------


def mlp(n, k):
    return f'''
func.func @mlp(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>,
               %bias: tensor<{n}xf32> {{coda.name = "bias"}},
               %res: tensor<?x{n}xbf16> {{coda.name = "residual"}},
               %seed: i64 {{coda.name = "seed"}})
    -> (tensor<?x{n}xbf16> {{coda.name = "output"}}, tensor<?x{n}xf32> {{coda.name = "pre"}},
        tensor<?x{n}xf32> {{coda.name = "dropped"}}) {{
  %out, %pre, %drop = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<{n}xf32> [n], %res : tensor<?x{n}xbf16> [m, n], %seed : i64)
      : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16>
      -> (tensor<?x{n}xbf16> [m, n], tensor<?x{n}xf32> [m, n], tensor<?x{n}xf32> [m, n]) {{
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {{p = 0.1 : f32}}
    %3 = arith.addf %2, %r : f32
    coda.yield %3, %1, %2 : f32, f32, f32
  }}
  return %out, %pre, %drop : tensor<?x{n}xbf16>, tensor<?x{n}xf32>, tensor<?x{n}xf32>
}}'''


def fc1_chain(n, k):
    return f'''
func.func @fc1(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>,
               %bias: tensor<{n}xf32> {{coda.name = "bias"}},
               %res: tensor<?x{n}xbf16> {{coda.name = "residual"}},
               %seed: i64 {{coda.name = "seed"}})
    -> (tensor<?x{n}xbf16> {{coda.name = "output"}}) {{
  %out = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<{n}xf32> [n], %res : tensor<?x{n}xbf16> [m, n], %seed : i64)
      : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16> -> (tensor<?x{n}xbf16> [m, n]) {{
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {{p = 0.1 : f32}}
    %3 = arith.addf %2, %r : f32
    coda.yield %3 : f32
  }}
  return %out : tensor<?x{n}xbf16>
}}'''


def gemm_only(n, k):
    return f'''
func.func @gemm(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>)
    -> (tensor<?x{n}xbf16> {{coda.name = "output"}}) {{
  %out = coda.gemm %x, %w transpose_b : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16>
      -> (tensor<?x{n}xbf16> [m, n]) {{
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }}
  return %out : tensor<?x{n}xbf16>
}}'''


def linear(n, k):
    # A linear layer: the bias starts the accumulators (KernelPlan::biasAdd).
    return f'''
func.func @linear(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>,
                  %bias: tensor<{n}xf32> {{coda.name = "bias"}})
    -> (tensor<?x{n}xbf16> {{coda.name = "output"}}) {{
  %out = coda.gemm %x, %w transpose_b ins(%bias : tensor<{n}xf32> [n])
      : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16> -> (tensor<?x{n}xbf16> [m, n]) {{
  ^bb0(%acc: f32, %b: f32):
    %0 = arith.addf %acc, %b : f32
    coda.yield %0 : f32
  }}
  return %out : tensor<?x{n}xbf16>
}}'''


def residual_add(n, k, dtype, gelu):
    # No dropout: the residual is read 16 bytes per lane (chunkedLoads), the
    # bias beside it a pair of columns at a time.
    act = '%a = coda.activation gelu_tanh %0' if gelu else '%a = arith.addf %0, %0 : f32'
    return f'''
func.func @residual_add(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>,
                        %bias: tensor<{n}x{dtype}> {{coda.name = "bias"}},
                        %res: tensor<?x{n}x{dtype}> {{coda.name = "residual"}})
    -> (tensor<?x{n}x{dtype}> {{coda.name = "output"}}) {{
  %out = coda.gemm %x, %w transpose_b ins(%bias : tensor<{n}x{dtype}> [n],
                                          %res : tensor<?x{n}x{dtype}> [m, n])
      : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16> -> (tensor<?x{n}x{dtype}> [m, n]) {{
  ^bb0(%acc: f32, %b: f32, %r: f32):
    %0 = arith.addf %acc, %b : f32
    {act}
    %1 = arith.addf %a, %r : f32
    coda.yield %1 : f32
  }}
  return %out : tensor<?x{n}x{dtype}>
}}'''


NN_F16 = '''
func.func @nn(%a: tensor<100x264xf16>, %b: tensor<100x328xf16>, %c: tensor<264x328xf32>,
              %alpha: f32, %beta: f32, %rs: tensor<264xf32> {coda.name = "row_scale"},
              %s: f32 {coda.name = "shift"})
    -> (tensor<264x328xf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_a c(%c : tensor<264x328xf32>) alpha(%alpha) beta(%beta)
      ins(%rs : tensor<264xf32> [m], %s : f32)
      : tensor<100x264xf16>, tensor<100x328xf16> -> (tensor<264x328xf16> [m, n]) {
  ^bb0(%acc: f32, %r: f32, %sc: f32):
    %0 = coda.activation relu %acc
    %1 = arith.mulf %0, %r : f32
    %2 = arith.addf %1, %sc : f32
    coda.yield %2 : f32
  }
  return %o : tensor<264x328xf16>
}'''

TN_MIXED = '''
func.func @tn(%a: tensor<150x200xbf16>, %b: tensor<200x72xbf16>)
    -> (tensor<150x72xf32> {coda.name = "silu"}, tensor<150x72xbf16> {coda.name = "acc"}) {
  %s, %o = coda.gemm %a, %b : tensor<150x200xbf16>, tensor<200x72xbf16>
      -> (tensor<150x72xf32> [m, n], tensor<150x72xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation silu %acc
    coda.yield %0, %acc : f32, f32
  }
  return %s, %o : tensor<150x72xf32>, tensor<150x72xbf16>
}'''

TF32 = '''
func.func @tf32(%a: tensor<130x52xf32>, %b: tensor<136x52xf32>,
                %bias: tensor<136xbf16> {coda.name = "bias"})
    -> (tensor<130x136xf32> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%bias : tensor<136xbf16> [n])
      : tensor<130x52xf32>, tensor<136x52xf32> -> (tensor<130x136xf32> [m, n]) {
  ^bb0(%acc: f32, %bi: f32):
    %0 = arith.addf %acc, %bi : f32
    %1 = coda.activation sigmoid %0
    %2 = coda.activation gelu_erf %acc
    %3 = arith.addf %1, %2 : f32
    coda.yield %3 : f32
  }
  return %o : tensor<130x136xf32>
}'''

LAYERNORM = '''
func.func @ln(%a: tensor<200x72xbf16>, %b: tensor<96x72xbf16>,
              %g: tensor<96xf32> {coda.name = "gamma"})
    -> (tensor<200x96xf16> {coda.name = "y"}, tensor<200xf32> {coda.name = "mean"},
        tensor<200xf32> {coda.name = "max"}) {
  %y, %mu, %mx = coda.gemm %a, %b transpose_b ins(%g : tensor<96xf32> [n])
      : tensor<200x72xbf16>, tensor<96x72xbf16>
      -> (tensor<200x96xf16> [m, n], tensor<200xf32> [m], tensor<200xf32> [m]) {
  ^bb0(%acc: f32, %gamma: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-05 : f32
    %v = arith.addf %var, %eps : f32
    %r = math.rsqrt %v : f32
    %nrm = arith.mulf %d, %r : f32
    %o = arith.mulf %nrm, %gamma : f32
    %max = coda.row_reduce max %acc
    coda.yield %o, %mean, %max : f32, f32, f32
  }
  return %y, %mu, %mx : tensor<200x96xf16>, tensor<200xf32>, tensor<200xf32>
}'''

BATCHED_A = '''
func.func @batched(%a: tensor<3x70x64xbf16>, %b: tensor<130x64xbf16>,
                   %bias: tensor<130xbf16> {coda.name = "bias"},
                   %res: tensor<3x70x130xf32> {coda.name = "residual"},
                   %seed: i64 {coda.name = "seed"})
    -> (tensor<3x70x130xbf16> {coda.name = "output"}, tensor<3x70x130xf32> {coda.name = "pre"},
        tensor<3x70x130xf32> {coda.name = "dropped"}) {
  %o, %pre, %drop = coda.gemm %a, %b transpose_b
      ins(%bias : tensor<130xbf16> [n], %res : tensor<3x70x130xf32> [b, m, n], %seed : i64)
      : tensor<3x70x64xbf16>, tensor<130x64xbf16>
      -> (tensor<3x70x130xbf16> [b, m, n], tensor<3x70x130xf32> [b, m, n],
          tensor<3x70x130xf32> [b, m, n]) {
  ^bb0(%acc: f32, %bi: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %bi : f32
    %1 = coda.dropout %0, %s {p = 0.25 : f32, stream = 1 : i32}
    %2 = arith.addf %1, %r : f32
    coda.yield %2, %0, %1 : f32, f32, f32
  }
  return %o, %pre, %drop : tensor<3x70x130xbf16>, tensor<3x70x130xf32>, tensor<3x70x130xf32>
}'''

BATCHED_B = '''
func.func @batched_b(%a: tensor<70x40xf16>, %b: tensor<2x40x136xf16>)
    -> (tensor<2x70x136xf32> {coda.name = "output"}) {
  %o = coda.gemm %a, %b : tensor<70x40xf16>, tensor<2x40x136xf16>
      -> (tensor<2x70x136xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<2x70x136xf32>
}'''

VECTORS = '''
func.func @vectors(%a: tensor<300x48xbf16>, %b: tensor<200x48xbf16>,
                   %bias: tensor<200xf32> {coda.name = "bias"},
                   %rv: tensor<300xf32> {coda.name = "row"})
    -> (tensor<300x200xf32> {coda.name = "output"}, tensor<200xf32> {coda.name = "twice_bias"},
        tensor<300xbf16> {coda.name = "row_plus_one"}) {
  %o, %bn, %rm = coda.gemm %a, %b transpose_b
      ins(%bias : tensor<200xf32> [n], %rv : tensor<300xf32> [m])
      : tensor<300x48xbf16>, tensor<200x48xbf16>
      -> (tensor<300x200xf32> [m, n], tensor<200xf32> [n], tensor<300xbf16> [m]) {
  ^bb0(%acc: f32, %bi: f32, %r: f32):
    %0 = arith.mulf %bi, %r : f32
    %1 = arith.addf %acc, %0 : f32
    %two = arith.constant 2.0 : f32
    %2 = arith.mulf %bi, %two : f32
    %one = arith.constant 1.0 : f32
    %3 = arith.addf %r, %one : f32
    coda.yield %1, %2, %3 : f32, f32, f32
  }
  return %o, %bn, %rm : tensor<300x200xf32>, tensor<200xf32>, tensor<300xbf16>
}'''

BATCHED_LN = '''
func.func @batched_ln(%a: tensor<2x150x64xbf16>, %b: tensor<2x64x72xbf16>)
    -> (tensor<2x150x72xf32> {coda.name = "centered"}, tensor<2x150xf32> {coda.name = "row_sum"},
        tensor<2x72xf32> {coda.name = "col_mean"}) {
  %y, %s, %cm = coda.gemm %a, %b : tensor<2x150x64xbf16>, tensor<2x64x72xbf16>
      -> (tensor<2x150x72xf32> [b, m, n], tensor<2x150xf32> [b, m], tensor<2x72xf32> [b, n]) {
  ^bb0(%acc: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sum = coda.row_reduce sum %acc
    %colmean = coda.col_reduce mean %acc
    coda.yield %d, %sum, %colmean : f32, f32, f32
  }
  return %y, %s, %cm : tensor<2x150x72xf32>, tensor<2x150xf32>, tensor<2x72xf32>
}'''

DBIAS = '''
func.func @dbias(%a: tensor<300x72xbf16>, %b: tensor<200x72xbf16>,
                 %bias: tensor<200xf32> {coda.name = "bias"})
    -> (tensor<300x200xbf16> {coda.name = "output"}, tensor<200xf32> {coda.name = "dbias"},
        tensor<200xf32> {coda.name = "col_max"}) {
  %o, %db, %mx = coda.gemm %a, %b transpose_b ins(%bias : tensor<200xf32> [n])
      : tensor<300x72xbf16>, tensor<200x72xbf16>
      -> (tensor<300x200xbf16> [m, n], tensor<200xf32> [n], tensor<200xf32> [n]) {
  ^bb0(%acc: f32, %bi: f32):
    %0 = arith.addf %acc, %bi : f32
    %1 = coda.col_reduce sum %0
    %2 = coda.col_reduce max %acc
    coda.yield %0, %1, %2 : f32, f32, f32
  }
  return %o, %db, %mx : tensor<300x200xbf16>, tensor<200xf32>, tensor<200xf32>
}'''

WIDE_ROWS = '''
func.func @wide_rows(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>)
    -> (tensor<?xf32> {coda.name = "row_sum"}) {
  %s = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %0 = coda.row_reduce sum %acc
    coda.yield %0 : f32
  }
  return %s : tensor<?xf32>
}'''

# --- The cases: programs, inputs and references -------------------------------


class Case:
    """A program with its arguments by name (float64 arrays holding values of
    the declared types, scalars) and {output: (reference, tolerance)}. Elements
    a reference leaves NaN are only checked to be written. `masks` lists
    (pre, dropped, p, stream): `dropped` must be coda.dropout of `pre`. `error`:
    the launch must be refused with a message holding it."""

    def __init__(self, name, program, args, expected, tile_n=0, stages=0,
                 masks=(), launches=1, timed=False, error=None, tile_m=0, schedule='',
                 cluster_m=0, group_rows=0, fast_activations=False):
        self.name, self.program, self.args, self.expected = name, program, args, expected
        self.tile_n, self.stages, self.masks = tile_n, stages, masks
        self.launches, self.timed, self.error = launches, timed, error
        self.tile_m, self.schedule, self.cluster_m = tile_m, schedule, cluster_m
        self.group_rows, self.fast_activations = group_rows, fast_activations

    def fast(self, tol):
        """This case with fast activations (tanh.approx.f32), its outputs held
        to at least `tol`."""
        case = self.under(self.name + '_fast', fast_activations=True)
        case.expected = {name: (want, max(old, tol))
                         for name, (want, old) in self.expected.items()}
        return case

    def under(self, name, **shape):
        """This case under another kernel shape (tile_m, tile_n, stages,
        schedule, cluster_m, group_rows), named `name`."""
        case = copy.copy(self)
        case.name = name
        for key, value in shape.items():
            setattr(case, key, value)
        return case


def randn(shape, dtype='bf16', scale=1.0):
    """Normal values rounded to `dtype`: exactly what the GPU reads."""
    return ref.round_to(rng.standard_normal(shape) * scale, dtype)


def dropout(x, p, stream, first_row=0):
    """coda.dropout (seed SEED) of x, [m, n] or [batch, m, n], in float64."""
    if x.ndim == 2:
        return ref.dropout(x, p, SEED, stream, first_row=first_row)
    return np.stack([ref.dropout(xb, p, SEED, stream, batch) for batch, xb in enumerate(x)])


def mlp_case(name, m, n, k, tile_n=0, stages=0):
    x, w = randn((m, k)), randn((n, k), scale=0.1)
    bias, res = randn(n, 'f32'), randn((m, n))
    pre = ref.gelu_tanh(x @ w.T + bias)
    dropped = dropout(pre, 0.1, 0)
    return Case(name, mlp(n, k), dict(a=x, b=w, bias=bias, residual=res, seed=SEED),
                {'output': (dropped + res, 1e-2), 'pre': (pre, 1e-4), 'dropped': (dropped, 1e-4)},
                tile_n, stages, masks=[('pre', 'dropped', 0.1, 0)])


def linear_case(m, n, k):
    x, w, bias = randn((m, k)), randn((n, k), scale=0.1), randn(n, 'f32')
    return Case('linear', linear(n, k), dict(a=x, b=w, bias=bias),
                {'output': (x @ w.T + bias, 1e-2)})


def residual_case(m, n, k, dtype='bf16', gelu=False):
    """(x w^T + bias) doubled, or under GELU(tanh), plus a residual."""
    x, w = randn((m, k)), randn((n, k), scale=0.1)
    bias, res = randn(n, dtype), randn((m, n), dtype)
    pre = x @ w.T + bias
    act = ref.gelu_tanh(pre) if gelu else 2 * pre
    return Case(f'residual_{dtype}', residual_add(n, k, dtype, gelu),
                dict(a=x, b=w, bias=bias, residual=res), {'output': (act + res, 1e-2)})


def nn_f16():
    m, n, k = 264, 328, 100
    a, b = randn((k, m), 'f16'), randn((k, n), 'f16')
    c, rs = randn((m, n), 'f32'), randn(m, 'f32')
    acc = 0.5 * (a.T @ b) - 1.5 * c
    return Case('nn_f16', NN_F16,
                dict(a=a, b=b, c=c, gemm_alpha=0.5, gemm_beta=-1.5, row_scale=rs, shift=0.25),
                {'output': (ref.relu(acc) * rs[:, None] + 0.25, 5e-3)})


def tn_mixed():
    a, b = randn((150, 200)), randn((200, 72))
    acc = a @ b
    return Case('tn_mixed', TN_MIXED, dict(a=a, b=b),
                {'silu': (ref.silu(acc), 1e-4), 'acc': (acc, 1e-2)})


def tf32():
    a, b, bias = randn((130, 52), 'f32'), randn((136, 52), 'f32'), randn(136)
    acc = a @ b.T
    return Case('tf32', TF32, dict(a=a, b=b, bias=bias),
                {'output': (ref.sigmoid(acc + bias) + ref.gelu_erf(acc), 5e-3)})


def layernorm():
    a, b, gamma = randn((200, 72)), randn((96, 72)), randn(96, 'f32')
    acc = a @ b.T
    mean = acc.mean(axis=1, keepdims=True)
    var = ((acc - mean) ** 2).mean(axis=1, keepdims=True)
    return Case('layernorm', LAYERNORM, dict(a=a, b=b, gamma=gamma),
                {'y': ((acc - mean) / np.sqrt(var + 1e-5) * gamma, 5e-3),
                 'mean': (mean[:, 0], 1e-4), 'max': (acc.max(axis=1), 1e-5)})


def batched_a():
    a, b = randn((3, 70, 64)), randn((130, 64))
    bias, res = randn(130), randn((3, 70, 130), 'f32')
    pre = a @ b.T + bias
    dropped = dropout(pre, 0.25, 1)
    return Case('batched_a', BATCHED_A, dict(a=a, b=b, bias=bias, residual=res, seed=SEED),
                {'output': (dropped + res, 1e-2), 'pre': (pre, 1e-5), 'dropped': (dropped, 1e-5)},
                masks=[('pre', 'dropped', 0.25, 1)])


def batched_b():
    a, b = randn((70, 40), 'f16'), randn((2, 40, 136), 'f16')
    return Case('batched_b', BATCHED_B, dict(a=a, b=b), {'output': (a @ b, 1e-5)})


def vectors():
    a, b = randn((300, 48)), randn((200, 48))
    bias, row = randn(200, 'f32'), randn(300, 'f32')
    return Case('vectors', VECTORS, dict(a=a, b=b, bias=bias, row=row),
                {'output': (a @ b.T + bias * row[:, None], 1e-5),
                 'twice_bias': (2 * bias, 0.0), 'row_plus_one': (row + 1, 1e-2)})


def batched_ln():
    a, b = randn((2, 150, 64)), randn((2, 64, 72))
    acc = a @ b
    return Case('batched_ln', BATCHED_LN, dict(a=a, b=b),
                {'centered': (acc - acc.mean(axis=2, keepdims=True), 1e-5),
                 'row_sum': (acc.sum(axis=2), 1e-5), 'col_mean': (acc.mean(axis=1), 1e-5)})


def dbias():
    """Column reductions accumulate with atomics: launched twice, the outputs
    must start over."""
    a, b, bias = randn((300, 72)), randn((200, 72)), randn(200, 'f32')
    acc = a @ b.T
    return Case('dbias', DBIAS, dict(a=a, b=b, bias=bias),
                {'output': (acc + bias, 1e-2), 'dbias': ((acc + bias).sum(axis=0), 1e-5),
                 'col_max': (acc.max(axis=0), 1e-6)}, launches=2)


def wide_rows():
    """A fused row reduction over N = 200, wider than the kernel's 128-column
    tile, and over N = 4104, wider than the widest cluster (16 tiles of 256
    columns): a row statistic (no element of the row needs it), each tile's
    partial sums merged after the GEMM at any width."""
    a, b, wide = randn((256, 64)), randn((200, 64)), randn((4104, 64))
    return [Case('wide_rows', WIDE_ROWS, dict(a=a, b=b),
                 {'row_sum': ((a @ b.T).sum(axis=1), 1e-5)}),
            Case('wider_than_a_cluster', WIDE_ROWS, dict(a=a, b=wide),
                 {'row_sum': ((a @ wide.T).sum(axis=1), 1e-5)})]


FC1 = (8192, 3072, 768)  # GPT-2's MLP up-projection: M tokens, N, K
# The kernel shapes the fc1 chain and GEMM are timed under.
TILINGS = [('default', {}), ('coop256x128', dict(tile_m=256, tile_n=128)),
           ('pp128x128', dict(schedule='pingpong', tile_m=128, tile_n=128)),
           ('pp64x256', dict(schedule='pingpong', tile_m=64, tile_n=256)),
           ('n128', dict(tile_n=128)), ('n192', dict(tile_n=192)),
           ('c2', dict(cluster_m=2)),
           ('c2pp128x128', dict(schedule='pingpong', tile_m=128, tile_n=128, cluster_m=2)),
           ('pp128x192', dict(schedule='pingpong', tile_m=128, tile_n=192))]
# The kernel shapes besides the default that every persistent-kernel case
# runs under.
SHAPES = [('coop256x128', dict(tile_m=256, tile_n=128)),
          ('pp128x128', dict(schedule='pingpong', tile_m=128, tile_n=128)),
          ('pp64x256', dict(schedule='pingpong', tile_m=64, tile_n=256)),
          ('n64s2', dict(tile_n=64, stages=2)),
          ('pp64x64s2', dict(schedule='pingpong', tile_m=64, tile_n=64, stages=2)),
          ('n192', dict(tile_n=192)),
          ('c2', dict(cluster_m=2)),
          ('c2pp128x128', dict(schedule='pingpong', tile_m=128, tile_n=128, cluster_m=2)),
          ('c2n192', dict(tile_n=192, cluster_m=2)),
          # Tile orders: row by row, groups of 5 row blocks (the last group
          # shorter), column by column, and groups of 10 in clusters of two
          # (5 units of two tiles).
          ('g1', dict(group_rows=1)), ('g5', dict(group_rows=5)),
          ('g1024', dict(group_rows=1024)), ('c2g10', dict(cluster_m=2, group_rows=10)),
          # 192 accumulator registers per consumer thread.
          ('pp128x192', dict(schedule='pingpong', tile_m=128, tile_n=192))]
# The shapes the other programs run under: both ping-pong shapes, 192 columns
# (three 64-column boxes of an N-major B) alone and in clusters of two (whose
# blocks then load two boxes and one), clusters of two, and groups of 5 row
# blocks.
OTHER_SHAPES = [SHAPES[1], SHAPES[2], SHAPES[5], SHAPES[6], SHAPES[8], SHAPES[10]]


def fc1_cases():
    """The fc1 chain (reference on its first and last rows) and its plain GEMM,
    under every tiling, on the same inputs."""
    m, n, k = FC1
    x, w = randn((m, k)), randn((n, k), scale=0.05)
    bias, res = randn(n, 'f32'), randn((m, n))
    acc = x @ w.T
    chain = np.full((m, n), np.nan)
    for rows in (slice(0, 1024), slice(m - 256, m)):
        pre = ref.gelu_tanh(acc[rows] + bias)
        chain[rows] = dropout(pre, 0.1, 0, first_row=rows.start) + res[rows]
    chain_case = Case('fc1', fc1_chain(n, k), dict(a=x, b=w, bias=bias, residual=res, seed=SEED),
                      {'output': (chain, 1e-2)}, timed=True)
    gemm_case = Case('gemm', gemm_only(n, k), dict(a=x, b=w), {'output': (acc, 1e-2)},
                     timed=True)
    cases = []
    for tag, shape in TILINGS:
        cases.append(chain_case.under('fc1_' + tag, **shape))
        cases.append(gemm_case.under('gemm_' + tag, **shape))
    return cases


def shape_cases():
    """Many tiles per persistent block (ragged M and N, K of 16 steps and of 3,
    fewer than the stages, an odd N) under the default and every other kernel
    shape; the other programs under OTHER_SHAPES."""
    cases = []
    for case in (mlp_case('big', 2999, 1496, 1000), mlp_case('shallow', 2999, 1499, 136),
                 linear_case(2999, 1496, 1000), residual_case(2999, 1496, 1000),
                 residual_case(2999, 1499, 136, 'f16', gelu=True)):
        cases.append(case)
        cases += [case.under(f'{case.name}_{tag}', **shape) for tag, shape in SHAPES]
    for case in (nn_f16(), tf32(), layernorm(), batched_a(), batched_ln(), dbias()):
        cases += [case.under(f'{case.name}_{tag}', **shape) for tag, shape in OTHER_SHAPES]
    return cases


def fast_cases():
    """GELU(tanh), SiLU and sigmoid on tanh.approx.f32: f32 outputs within 2e-3
    (the tanh's relative error is up to 2^-11), and the same dropout decisions."""
    return [mlp_case('mlp', 300, 200, 136).fast(2e-3),
            mlp_case('big', 2999, 1496, 1000).fast(2e-3), tn_mixed().fast(2e-3), tf32().fast(5e-3)]


def all_cases():
    # mlp_c2: three row blocks, so the second cluster's lower block has none.
    return [mlp_case('mlp', 300, 200, 136), mlp_case('mlp', 300, 200, 136).under('mlp_c2', cluster_m=2),
            mlp_case('mlp_n64_s2', 300, 200, 136, 64, 2),
            mlp_case('mlp_n256_s3', 300, 200, 136, 256, 3), nn_f16(), tn_mixed(), tf32(),
            layernorm(), batched_a(), batched_b(), vectors(), batched_ln(), dbias(),
            mlp_case('deep', 1000, 1000, 1000), *wide_rows()] + fast_cases() + shape_cases() + \
        fc1_cases()


# --- Checking -----------------------------------------------------------------


class Report:
    def __init__(self):
        self.rows = []
        self.failed = False

    def add(self, case, what, value, tol, unwritten, overrun, ok):
        self.failed |= not ok
        self.rows.append((case, what, value, tol, unwritten, overrun, 'ok' if ok else 'FAIL'))

    def compare(self, case, output, got, overrun, want, tol):
        unwritten = int(np.isnan(got).sum())
        known = ~np.isnan(want)
        err = ref.rel_error(np.nan_to_num(got[known], nan=1e30), want[known])
        self.add(case, output, f'{err:.2e}', f'{tol:.0e}', unwritten, overrun,
                 unwritten == 0 and overrun == 0 and err <= tol)

    def mask(self, case, pre, dropped, p, stream):
        """`dropped` is coda.dropout of `pre`: the same decisions wherever pre is
        not zero, kept values scaled."""
        want = dropout(pre, p, stream)
        valid = pre != 0
        differ = int(((dropped != 0) != (want != 0))[valid].sum())
        kept = valid & (want != 0)
        badly_scaled = int((np.abs(dropped - want) > 1e-5 * np.abs(pre))[kept].sum())
        self.add(case, 'dropout mask',
                 f'{differ}/{int(valid.sum())} differ, {badly_scaled} scaled wrong', '0', '-', '-',
                 differ == 0 and badly_scaled == 0)

    def show(self):
        row = '%-20s %-16s %-16s %-6s %-9s %-7s %s'
        print(row % ('case', 'output', 'rel err', 'tol', 'unwritten', 'overrun', ''))
        for r in self.rows:
            print(row % r)


def run(case, torch, report):
    """Launches `case` through coda.Program and checks it; returns a function
    that launches it again."""
    dtypes = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}
    program = coda.Program(case.program, tile_n=case.tile_n, stages=case.stages,
                           tile_m=case.tile_m, schedule=case.schedule,
                           cluster_m=case.cluster_m, group_rows=case.group_rows,
                           fast_activations=case.fast_activations)
    args = {}
    for arg in program.arguments:
        # The GEMM's own scalars are keyword arguments gemm_alpha and gemm_beta.
        key = {'alpha': 'gemm_alpha', 'beta': 'gemm_beta'}.get(arg['role'], arg['name'])
        value = case.args[key]
        args[key] = (torch.from_numpy(value).to('cuda', dtypes[arg['type']])
                     if arg['tensor'] else value)
    if case.error:
        try:
            program(**args)
            torch.cuda.synchronize()
            outcome, ok = 'launched', False
        except coda.CodaError as e:
            outcome, ok = str(e), case.error in str(e)
        report.add(case.name, 'refused', outcome, '-', '-', '-', ok)
        return None

    outs, guards = {}, {}
    for output in program.outputs:
        name, shape = output['name'], case.expected[output['name']][0].shape
        numel = math.prod(shape)
        buffer = torch.full((numel + GUARD,), float('nan'), dtype=dtypes[output['type']],
                            device='cuda')
        outs[name], guards[name] = buffer[:numel].view(shape), buffer[numel:]

    def launch():
        program(out=outs, **args)
    for _ in range(case.launches):
        launch()
    torch.cuda.synchronize()
    got = {name: out.double().cpu().numpy() for name, out in outs.items()}
    for name, (want, tol) in case.expected.items():
        overrun = int((~torch.isnan(guards[name])).sum())
        report.compare(case.name, name, got[name], overrun, want, tol)
    for pre, dropped, p, stream in case.masks:
        report.mask(case.name, got[pre], got[dropped], p, stream)
    return launch


def time_ms(torch, launch, reps=10, launches=20):
    """Median over `reps` of the mean time of `launches` back-to-back launches."""
    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / launches)
    return sorted(times)[reps // 2]


def baselines(torch, args):
    """cuBLAS and the eager PyTorch chain on the fc1 inputs."""
    F = torch.nn.functional
    x, w, bias, res = (torch.from_numpy(args[name]).to('cuda', torch.bfloat16)
                       for name in ('a', 'b', 'bias', 'residual'))
    return [('cuBLAS F.linear', time_ms(torch, lambda: F.linear(x, w))),
            ('eager chain (torch)', time_ms(torch, lambda: F.dropout(
                F.gelu(F.linear(x, w, bias), approximate='tanh'), 0.1) + res))]


def main():
    import torch

    selected = [case for case in all_cases() if not sys.argv[1:] or case.name in sys.argv[1:]]
    # Under compute-sanitizer (lit.local.cfg) nothing is timed.
    timed = not os.environ.get("CODA_SANITIZER")
    report, timings = Report(), []
    for case in selected:
        try:
            launch = run(case, torch, report)
            if case.timed and timed:
                timings.append((case.name, time_ms(torch, launch)))
        except Exception as e:  # report and go on to the next case
            report.add(case.name, 'exception', str(e)[:200], '', '', '', False)
    chain = next((case for case in selected if case.name == 'fc1_default'), None)
    if chain and timed:
        timings += baselines(torch, chain.args)
    report.show()
    flops = 2 * math.prod(FC1)
    for what, ms in timings:
        print('%-24s %.4f ms  %4.0f TFLOP/s' % (what, ms, flops / ms / 1e9))
    return 1 if report.failed else 0


if __name__ == '__main__':
    sys.exit(main())
