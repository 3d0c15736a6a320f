"""Checks the kernels coda-gpu-pipeline generates against fp64 references on
an NVIDIA GPU (sm_90a), on ragged shapes, with poisoned and guarded outputs.

  fused_kernels.py --coda-opt PATH --work DIR [--phase compile|run|all]

`compile` runs coda-opt on every case (no GPU needed) and writes DIR/<case>.mlir;
`run` loads those with the CUDA driver, launches them on random inputs (torch)
and compares every output with a float64 reference: relative error by norm
under a per-dtype tolerance, no NaN, every element written, nothing written
past the end, dropout masks identical to coda.dropout's definition. The fc1
cases (GPT-2's MLP up-projection, bias + GELU + dropout + residual) are also
timed, under several tilings, against cuBLAS and eager PyTorch (torch), with
CUDA events.
"""

import argparse
import functools
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'lib'))
import coda_gpu  # noqa: E402
import coda_reference  # noqa: E402

SEED = 0x1234ABCD5678EF01

# --- The programs ------------------------------------------------------------


def mlp(m, n, k, dyn_m=True):
    md = '?' if dyn_m else str(m)
    return f'''
func.func @mlp(%x: tensor<{md}x{k}xbf16>, %w: tensor<{n}x{k}xbf16>,
               %bias: tensor<{n}xf32> {{coda.name = "bias"}},
               %res: tensor<{md}x{n}xbf16> {{coda.name = "residual"}},
               %seed: i64 {{coda.name = "seed"}})
    -> (tensor<{md}x{n}xbf16>, tensor<{md}x{n}xf32>, tensor<{md}x{n}xf32>) {{
  %out, %pre, %drop = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<{n}xf32> [n], %res : tensor<{md}x{n}xbf16> [m, n], %seed : i64)
      : tensor<{md}x{k}xbf16>, tensor<{n}x{k}xbf16>
      -> (tensor<{md}x{n}xbf16> [m, n], tensor<{md}x{n}xf32> [m, n], tensor<{md}x{n}xf32> [m, n]) {{
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {{p = 0.1 : f32}}
    %3 = arith.addf %2, %r : f32
    coda.yield %3, %1, %2 : f32, f32, f32
  }}
  return %out, %pre, %drop : tensor<{md}x{n}xbf16>, tensor<{md}x{n}xf32>, tensor<{md}x{n}xf32>
}}'''


def fc1_chain(m, n, k):
    return f'''
func.func @fc1(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>, %bias: tensor<{n}xf32>,
               %res: tensor<?x{n}xbf16>, %seed: i64) -> tensor<?x{n}xbf16> {{
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


def gemm_only(m, n, k):
    return f'''
func.func @gemm(%x: tensor<?x{k}xbf16>, %w: tensor<{n}x{k}xbf16>) -> tensor<?x{n}xbf16> {{
  %out = coda.gemm %x, %w transpose_b : tensor<?x{k}xbf16>, tensor<{n}x{k}xbf16>
      -> (tensor<?x{n}xbf16> [m, n]) {{
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }}
  return %out : tensor<?x{n}xbf16>
}}'''


NN_F16 = '''
func.func @nn(%a: tensor<100x264xf16>, %b: tensor<100x328xf16>, %c: tensor<264x328xf32>,
              %alpha: f32, %beta: f32, %rs: tensor<264xf32>, %s: f32) -> tensor<264x328xf16> {
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
    -> (tensor<150x72xf32>, tensor<150x72xbf16>) {
  %s, %o = coda.gemm %a, %b : tensor<150x200xbf16>, tensor<200x72xbf16>
      -> (tensor<150x72xf32> [m, n], tensor<150x72xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation silu %acc
    coda.yield %0, %acc : f32, f32
  }
  return %s, %o : tensor<150x72xf32>, tensor<150x72xbf16>
}'''

TF32 = '''
func.func @tf32(%a: tensor<130x52xf32>, %b: tensor<136x52xf32>, %bias: tensor<136xbf16>)
    -> tensor<130x136xf32> {
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
func.func @ln(%a: tensor<200x72xbf16>, %b: tensor<96x72xbf16>, %g: tensor<96xf32>)
    -> (tensor<200x96xf16>, tensor<200xf32>, tensor<200xf32>) {
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
func.func @batched(%a: tensor<3x70x64xbf16>, %b: tensor<130x64xbf16>, %bias: tensor<130xbf16>,
                   %res: tensor<3x70x130xf32>, %seed: i64)
    -> (tensor<3x70x130xbf16>, tensor<3x70x130xf32>, tensor<3x70x130xf32>) {
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
func.func @batched_b(%a: tensor<70x40xf16>, %b: tensor<2x40x136xf16>) -> tensor<2x70x136xf32> {
  %o = coda.gemm %a, %b : tensor<70x40xf16>, tensor<2x40x136xf16>
      -> (tensor<2x70x136xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<2x70x136xf32>
}'''

VECTORS = '''
func.func @vectors(%a: tensor<300x48xbf16>, %b: tensor<200x48xbf16>, %bias: tensor<200xf32>,
                   %rv: tensor<300xf32>)
    -> (tensor<300x200xf32>, tensor<200xf32>, tensor<300xbf16>) {
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
    -> (tensor<2x150x72xf32>, tensor<2x150xf32>, tensor<2x72xf32>) {
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
func.func @dbias(%a: tensor<300x72xbf16>, %b: tensor<200x72xbf16>, %bias: tensor<200xf32>)
    -> (tensor<300x200xbf16>, tensor<200xf32>, tensor<200xf32>) {
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
func.func @wide_rows(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?xf32> {
  %s = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %0 = coda.row_reduce sum %acc
    coda.yield %0 : f32
  }
  return %s : tensor<?xf32>
}'''


class Case:
    """A program compiled with `options`, checked by the runner `kind` (the
    case's name when not given) with the extra arguments `sizes`."""

    def __init__(self, name, program, options='', kind=None, sizes=()):
        self.name, self.program, self.options = name, program, options
        self.kind, self.sizes = kind or name, sizes


CASES = [
    Case('mlp', mlp(300, 200, 136), sizes=(300, 200, 136)),
    Case('mlp_n64_s2', mlp(300, 200, 136), 'tile-n=64 stages=2', 'mlp',
         (300, 200, 136)),
    Case('mlp_n256_s3', mlp(300, 200, 136), 'tile-n=256 stages=3', 'mlp',
         (300, 200, 136)),
    Case('nn_f16', NN_F16),
    Case('tn_mixed', TN_MIXED),
    Case('tf32', TF32),
    Case('layernorm', LAYERNORM),
    Case('batched_a', BATCHED_A),
    Case('batched_b', BATCHED_B),
    Case('vectors', VECTORS),
    Case('batched_ln', BATCHED_LN),
    Case('dbias', DBIAS),
    Case('deep', mlp(1000, 1000, 1000), kind='mlp', sizes=(1000, 1000, 1000)),
    Case('wide_rows', WIDE_ROWS),
]
# The kernel shapes besides the default: many tiles per persistent block
# (ragged M and N, K of 16 steps and of fewer steps than stages, odd N) under
# each, and the other cases under the ping-pong schedules.
SCHEDULES = ['epilogue-vector-bytes=4', 'tile-m=256 tile-n=128',
             'schedule=pingpong tile-m=128 tile-n=128',
             'schedule=pingpong tile-m=64 tile-n=256',
             'tile-n=64 stages=2',
             'schedule=pingpong tile-m=64 tile-n=64 stages=2']
for i, options in enumerate([''] + SCHEDULES):
    for name, sizes in (('big', (2999, 1496, 1000)),
                        ('shallow', (2999, 1499, 136))):
        CASES.append(Case('%s_%d' % (name, i), mlp(*sizes), options, 'mlp',
                          sizes))
for i, options in enumerate(SCHEDULES[2:4]):
    for kind, program in (('nn_f16', NN_F16), ('tf32', TF32),
                          ('layernorm', LAYERNORM), ('batched_a', BATCHED_A),
                          ('batched_ln', BATCHED_LN), ('dbias', DBIAS)):
        CASES.append(Case('%s_pp%d' % (kind, i), program, options, kind))
# The chain and the bare GEMM of GPT-2's fc1, timed under several tilings.
TILINGS = ['', 'epilogue-vector-bytes=4', 'tile-m=256 tile-n=128',
           'schedule=pingpong tile-m=128 tile-n=128',
           'schedule=pingpong tile-m=64 tile-n=256']
for i, tiling in enumerate(TILINGS):
    CASES.append(Case('fc1_%d' % i, fc1_chain(8192, 3072, 768), tiling))
    CASES.append(Case('gemm_%d' % i, gemm_only(8192, 3072, 768), tiling))


def compile_cases(coda_opt, work):
    os.makedirs(work, exist_ok=True)
    for case in CASES:
        pipeline = '--coda-gpu-pipeline=%s' % case.options if case.options \
            else '--coda-gpu-pipeline'
        out = subprocess.run([coda_opt, pipeline], input=case.program,
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit('%s: coda-opt failed:\n%s' % (case.name, out.stderr))
        with open(os.path.join(work, case.name + '.mlir'), 'w') as f:
            f.write(out.stdout)


# --- Running -----------------------------------------------------------------


class Checker:
    def __init__(self, torch):
        self.torch = torch
        self.rows = []
        self.failed = False

    def poisoned(self, shape, dtype):
        """An output poisoned with NaN, followed by a NaN guard region."""
        numel = math.prod(shape)
        buf = self.torch.full((numel + 4096,), float('nan'), dtype=dtype,
                              device='cuda')
        return buf[:numel].view(shape), buf[numel:]

    def compare(self, case, what, out, guard, ref, tol):
        torch = self.torch
        o = out.double()
        unwritten = int(torch.isnan(o).sum())
        overrun = int((~torch.isnan(guard.double())).sum())
        err = float(torch.linalg.norm((o - ref).nan_to_num(1e30)) /
                    torch.linalg.norm(ref))
        ok = unwritten == 0 and overrun == 0 and err <= tol
        self.failed |= not ok
        self.rows.append((case, what, '%.2e' % err, '%.0e' % tol,
                          unwritten, overrun, 'ok' if ok else 'FAIL'))

    def coverage(self, case, what, out, guard):
        """Every element written, nothing past the end."""
        torch = self.torch
        unwritten = int(torch.isnan(out.double()).sum())
        overrun = int((~torch.isnan(guard.double())).sum())
        ok = unwritten == 0 and overrun == 0
        self.failed |= not ok
        self.rows.append((case, what, '-', '-', unwritten, overrun,
                          'ok' if ok else 'FAIL'))

    def mask(self, case, pre, dropped, keep, scale):
        """Dropout decisions identical to the definition, kept values
        scaled."""
        torch = self.torch
        keep = torch.from_numpy(keep).cuda()
        valid = pre != 0
        got = dropped != 0
        mismatches = int(((got != keep) & valid).sum())
        scaled = (dropped.double() - pre.double() * scale).abs()
        bad_scale = int(((scaled > 1e-5 * pre.double().abs() + 1e-30) &
                         keep & valid).sum())
        ok = mismatches == 0 and bad_scale == 0
        self.failed |= not ok
        self.rows.append((case, 'dropout mask', '%d/%d differ' % (
            mismatches, int(valid.sum())), '0', '-', '-',
            'ok' if ok else 'FAIL'))


def gelu_tanh(x):
    return 0.5 * x * (1 + (0.7978845608028654 * (x + 0.044715 * x ** 3)).tanh())


def run_cases(work, names):
    import torch
    torch.manual_seed(0)
    driver = coda_gpu.Driver()
    check = Checker(torch)
    timings = []

    def load(name):
        text = open(os.path.join(work, name + '.mlir')).read()
        ptx = coda_gpu.extract_ptx(text)
        abi = next(iter(coda_gpu.extract_abis(text).values()))
        return coda_gpu.Kernel(driver, ptx[abi['module']], abi)

    def rand(*shape, dtype=torch.bfloat16, scale=1.0):
        return (torch.randn(*shape, device='cuda') * scale).to(dtype)

    @functools.lru_cache(maxsize=None)
    def keep_mask(seed, stream, p, b, m, n, first_row=0):
        import numpy as np
        bb, mm, nn = np.meshgrid(np.arange(b), np.arange(first_row,
                                                         first_row + m),
                                 np.arange(n), indexing='ij')
        keep, scale = coda_reference.dropout_keep(seed, stream, p, bb, mm, nn)
        return keep.reshape((m, n) if b == 1 else (b, m, n)), scale

    def run_mlp(name, m, n, k):
        kern = load(name)
        x, w = rand(m, k), rand(n, k, scale=0.1)
        bias, res = rand(n, dtype=torch.float32), rand(m, n)
        out, g0 = check.poisoned((m, n), torch.bfloat16)
        pre, g1 = check.poisoned((m, n), torch.float32)
        drop, g2 = check.poisoned((m, n), torch.float32)
        kern({0: x, 1: w, 2: bias, 3: res, 4: SEED}, {0: out, 1: pre, 2: drop},
             m, n, k)
        driver.synchronize()
        acc = x.double() @ w.double().T
        ref_pre = gelu_tanh(acc + bias.double())
        keep, scale = keep_mask(SEED, 0, 0.1, 1, m, n)
        keep_t = torch.from_numpy(keep).cuda()
        ref_drop = torch.where(keep_t, ref_pre * scale, torch.zeros_like(ref_pre))
        check.compare(name, 'pre (f32)', pre, g1, ref_pre, 1e-4)
        check.compare(name, 'dropped (f32)', drop, g2, ref_drop, 1e-4)
        check.compare(name, 'output (bf16)', out, g0, ref_drop + res.double(),
                      1e-2)
        check.mask(name, pre, drop, keep, scale)

    def run_nn_f16(name):
        kern = load(name)
        m, n, k = 264, 328, 100
        a, b = rand(k, m, dtype=torch.float16), rand(k, n, dtype=torch.float16)
        c, rs = rand(m, n, dtype=torch.float32), rand(m, dtype=torch.float32)
        alpha, beta, s = 0.5, -1.5, 0.25
        out, g = check.poisoned((m, n), torch.float16)
        kern({0: a, 1: b, 2: c, 3: alpha, 4: beta, 5: rs, 6: s}, {0: out},
             m, n, k)
        driver.synchronize()
        acc = alpha * (a.double().T @ b.double()) + beta * c.double()
        ref = acc.clamp(min=0) * rs.double()[:, None] + s
        check.compare(name, 'output (f16)', out, g, ref, 5e-3)

    def run_tn_mixed(name):
        kern = load(name)
        m, n, k = 150, 72, 200
        a, b = rand(m, k), rand(k, n)
        s, gs = check.poisoned((m, n), torch.float32)
        o, go = check.poisoned((m, n), torch.bfloat16)
        kern({0: a, 1: b}, {0: s, 1: o}, m, n, k)
        driver.synchronize()
        acc = a.double() @ b.double()
        check.compare(name, 'silu (f32)', s, gs, acc * acc.sigmoid(),
                      1e-4)
        check.compare(name, 'acc (bf16)', o, go, acc, 1e-2)

    def run_tf32(name):
        kern = load(name)
        m, n, k = 130, 136, 52
        a, b = rand(m, k, dtype=torch.float32), rand(n, k, dtype=torch.float32)
        bias = rand(n)
        out, g = check.poisoned((m, n), torch.float32)
        kern({0: a, 1: b, 2: bias}, {0: out}, m, n, k)
        driver.synchronize()
        acc = a.double() @ b.double().T
        ref = (acc + bias.double()).sigmoid() + 0.5 * acc * (
            1 + torch.special.erf(acc / math.sqrt(2)))
        check.compare(name, 'output (f32, tf32 operands)', out, g, ref, 5e-3)

    def run_layernorm(name):
        kern = load(name)
        m, n, k = 200, 96, 72
        a, b, gamma = rand(m, k), rand(n, k), rand(n, dtype=torch.float32)
        y, gy = check.poisoned((m, n), torch.float16)
        mu, gm = check.poisoned((m,), torch.float32)
        mx, gx = check.poisoned((m,), torch.float32)
        kern({0: a, 1: b, 2: gamma}, {0: y, 1: mu, 2: mx}, m, n, k)
        driver.synchronize()
        acc = a.double() @ b.double().T
        mean = acc.mean(dim=1, keepdim=True)
        var = ((acc - mean) ** 2).mean(dim=1, keepdim=True)
        ref = (acc - mean) / (var + 1e-5).sqrt() * gamma.double()
        check.compare(name, 'y (f16)', y, gy, ref, 5e-3)
        check.compare(name, 'row mean (f32)', mu, gm, mean[:, 0], 1e-4)
        check.compare(name, 'row max (f32)', mx, gx,
                      acc.max(dim=1).values, 1e-5)

    def run_batched_a(name):
        kern = load(name)
        bt, m, n, k = 3, 70, 130, 64
        a, b = rand(bt, m, k), rand(n, k)
        bias, res = rand(n), rand(bt, m, n, dtype=torch.float32)
        o, go = check.poisoned((bt, m, n), torch.bfloat16)
        pre, gp = check.poisoned((bt, m, n), torch.float32)
        drop, gd = check.poisoned((bt, m, n), torch.float32)
        kern({0: a, 1: b, 2: bias, 3: res, 4: SEED}, {0: o, 1: pre, 2: drop},
             m, n, k, bt)
        driver.synchronize()
        ref_pre = a.double() @ b.double().T + bias.double()
        keep, scale = keep_mask(SEED, 1, 0.25, bt, m, n)
        keep_t = torch.from_numpy(keep).cuda()
        dropped = torch.where(keep_t, ref_pre * scale, torch.zeros_like(ref_pre))
        check.compare(name, 'pre (f32)', pre, gp, ref_pre, 1e-5)
        check.compare(name, 'dropped (f32)', drop, gd, dropped, 1e-5)
        check.compare(name, 'output (bf16)', o, go,
                      dropped + res.double(), 1e-2)
        check.mask(name, pre, drop, keep, scale)

    def run_batched_b(name):
        kern = load(name)
        bt, m, n, k = 2, 70, 136, 40
        a, b = rand(m, k, dtype=torch.float16), rand(bt, k, n,
                                                     dtype=torch.float16)
        o, g = check.poisoned((bt, m, n), torch.float32)
        kern({0: a, 1: b}, {0: o}, m, n, k, bt)
        driver.synchronize()
        check.compare(name, 'output (f32)', o, g,
                      a.double() @ b.double(), 1e-5)

    def run_vectors(name):
        kern = load(name)
        m, n, k = 300, 200, 48
        a, b = rand(m, k), rand(n, k)
        bias, rv = rand(n, dtype=torch.float32), rand(m, dtype=torch.float32)
        o, go = check.poisoned((m, n), torch.float32)
        bn, gb = check.poisoned((n,), torch.float32)
        rm, gr = check.poisoned((m,), torch.bfloat16)
        kern({0: a, 1: b, 2: bias, 3: rv}, {0: o, 1: bn, 2: rm}, m, n, k)
        driver.synchronize()
        acc = a.double() @ b.double().T
        check.compare(name, 'acc + bias*row (f32)', o, go,
                      acc + bias.double() * rv.double()[:, None], 1e-5)
        check.compare(name, '[n] output (f32)', bn, gb,
                      2 * bias.double(), 0.0)
        check.compare(name, '[m] output (bf16)', rm, gr,
                      rv.double() + 1, 1e-2)

    def run_batched_ln(name):
        kern = load(name)
        bt, m, n, k = 2, 150, 72, 64
        a, b = rand(bt, m, k), rand(bt, k, n)
        y, gy = check.poisoned((bt, m, n), torch.float32)
        s_, gs = check.poisoned((bt, m), torch.float32)
        cm, gc = check.poisoned((bt, n), torch.float32)
        kern({0: a, 1: b}, {0: y, 1: s_, 2: cm}, m, n, k, bt)
        driver.synchronize()
        acc = a.double() @ b.double()
        check.compare(name, 'acc - row mean (f32)', y, gy,
                      acc - acc.mean(dim=2, keepdim=True), 1e-5)
        check.compare(name, '[b, m] row sum (f32)', s_, gs,
                      acc.sum(dim=2), 1e-5)
        check.compare(name, '[b, n] column mean (f32)', cm, gc,
                      acc.mean(dim=1), 1e-5)

    def run_dbias(name):
        kern = load(name)
        m, n, k = 300, 200, 72
        a, b, bias = rand(m, k), rand(n, k), rand(n, dtype=torch.float32)
        o, go = check.poisoned((m, n), torch.bfloat16)
        db, gd = check.poisoned((n,), torch.float32)
        mx, gm = check.poisoned((n,), torch.float32)
        launch = kern.prepare({0: a, 1: b, 2: bias}, {0: o, 1: db, 2: mx},
                              m, n, k)
        for _ in range(2):  # the outputs start over at every launch
            launch()
        driver.synchronize()
        acc = a.double() @ b.double().T
        pre = acc + bias.double()
        check.compare(name, 'acc + bias (bf16)', o, go, pre, 1e-2)
        check.compare(name, '[n] column sum (f32)', db, gd, pre.sum(dim=0),
                      1e-5)
        check.compare(name, '[n] column max (f32)', mx, gm,
                      acc.max(dim=0).values, 1e-6)

    def run_wide_rows(name):
        """A fused row reduction launched (against the ABI) with N wider than
        the tile must fail, not return a wrong answer."""
        kern = load(name)
        m, n, k = 256, kern.abi['max_n'] + 72, 64
        a, b = rand(m, k), rand(n, k)
        s_, _ = check.poisoned((m,), torch.float32)
        params = kern.params({0: a, 1: b}, {0: s_}, m, n, k)
        try:
            driver.launch(kern.func, kern.grid(m, n), kern.abi['block'],
                          kern.abi['shared_memory_bytes'], params)
            driver.synchronize()
            outcome, ok = 'completed', False
        except coda_gpu.CudaError as e:
            outcome, ok = str(e).split(' failed: ')[-1], True
        check.failed |= not ok
        check.rows.append((name, 'N=%d > max_n=%d' % (n, kern.abi['max_n']),
                           outcome, '-',
                           '-', '-', 'ok' if ok else 'FAIL'))

    def time_kernel(launch, reps=10, launches=20):
        """Median over `reps` of the mean time of `launches` back-to-back
        launches, in ms."""
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
        times.sort()
        return times[len(times) // 2]

    def run_fc1(variant):
        m, n, k = 8192, 3072, 768
        chain, gemm = load('fc1_%d' % variant), load('gemm_%d' % variant)
        x, w = rand(m, k), rand(n, k, scale=0.05)
        bias, res = rand(n, dtype=torch.float32), rand(m, n)
        out, g = check.poisoned((m, n), torch.bfloat16)
        plain, g2 = check.poisoned((m, n), torch.bfloat16)
        stream = torch.cuda.current_stream().cuda_stream
        run_chain = chain.prepare({0: x, 1: w, 2: bias, 3: res, 4: SEED},
                                  {0: out}, m, n, k, stream=stream)
        run_gemm = gemm.prepare({0: x, 1: w}, {0: plain}, m, n, k,
                                stream=stream)
        run_chain()
        run_gemm()
        torch.cuda.synchronize()
        acc = x.double() @ w.double().T
        tag = '[%s]' % TILINGS[variant]
        check.compare('gemm', 'output (bf16) ' + tag, plain, g2, acc, 1e-2)
        # The chain's reference on the first and last rows (the dropout
        # reference is computed on the host).
        for first, rows in ((0, 1024), (m - 256, 256)):
            part = slice(first, first + rows)
            pre = gelu_tanh(acc[part] + bias.double())
            keep, scale = keep_mask(SEED, 0, 0.1, 1, rows, n, first)
            keep_t = torch.from_numpy(keep).cuda()
            ref = torch.where(keep_t, pre * scale,
                              torch.zeros_like(pre)) + res[part].double()
            check.compare('fc1', 'rows %d+ (bf16) %s' % (first, tag),
                          out[part], g[:0], ref, 1e-2)
        del acc
        check.coverage('fc1', 'every element ' + tag, out, g)

        F = torch.nn.functional
        bias16 = bias.to(torch.bfloat16)
        t_chain = time_kernel(run_chain)
        t_gemm = time_kernel(run_gemm)
        measured = [('coda fused chain ' + tag, t_chain),
                    ('coda GEMM only ' + tag, t_gemm)]
        if variant == 0:
            measured += [
                ('cuBLAS F.linear', time_kernel(lambda: F.linear(x, w))),
                ('eager chain (torch)', time_kernel(lambda: F.dropout(
                    F.gelu(F.linear(x, w, bias16), approximate='tanh'), 0.1)
                    + res))]
        flops = 2 * m * n * k
        for what, t in measured:
            timings.append((what, '%.4f ms' % t,
                            '%.0f TFLOP/s' % (flops / t / 1e9)))

    kinds = {
        'mlp': run_mlp,
        'nn_f16': run_nn_f16,
        'tn_mixed': run_tn_mixed,
        'tf32': run_tf32,
        'layernorm': run_layernorm,
        'batched_a': run_batched_a,
        'batched_b': run_batched_b,
        'vectors': run_vectors,
        'batched_ln': run_batched_ln,
        'dbias': run_dbias,
        'wide_rows': run_wide_rows,
    }
    runners = {c.name: lambda c=c: kinds[c.kind](c.name, *c.sizes)
               for c in CASES if c.kind in kinds}
    for i in range(len(TILINGS)):
        runners['fc1_%d' % i] = lambda i=i: run_fc1(i)
    # A kernel that traps leaves the context unusable: that case goes last.
    runners['wide_rows'] = runners.pop('wide_rows')
    row_format = '%-14s %-34s %-16s %-6s %-9s %-7s %s'
    for name, runner in runners.items():
        if names and name not in names:
            continue
        done = len(check.rows)
        try:
            runner()
        except Exception as e:  # report and go on to the next case
            check.failed = True
            check.rows.append((name, 'exception', str(e)[:120], '', '', '',
                               'FAIL'))
        # Progress, in case the run is cut short.
        for row in check.rows[done:]:
            print(row_format % row, file=sys.stderr, flush=True)
    print(row_format % (
        'case', 'output', 'rel err', 'tol', 'unwritten', 'overrun', ''))
    for row in check.rows:
        print(row_format % row)
    for row in timings:
        print('%-44s %-12s %s' % row)
    return 1 if check.failed else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--coda-opt', default='coda-opt')
    parser.add_argument('--work', required=True)
    parser.add_argument('--phase', choices=['compile', 'run', 'all'],
                        default='all')
    parser.add_argument('cases', nargs='*')
    args = parser.parse_args()
    if args.phase in ('compile', 'all'):
        compile_cases(args.coda_opt, args.work)
    if args.phase in ('run', 'all'):
        sys.exit(run_cases(args.work, args.cases))


if __name__ == '__main__':
    main()
