"""Exports a small Transformer piece with a frontend's own exporter and prints
it as linalg on tensors, for the raising tests:

    export.py torch|jax CASE [--driver] [--bf16] [--size=M=6,K=8,...]

torch: the module through iree-turbine's aot.export (torch-mlir's torch
dialect), then torch-mlir's torch-backend and linalg-on-tensors pipelines;
jax: jax.jit(...).lower(...) (StableHLO), then CHLO's decompositions (exact
GELU's erfc), IREE's StableHLO input conversion and the inliner (JAX calls
its activations as functions). Both with
IREE's iree-opt, as a user of those frontends would. The exported function is
named CASE. With --driver, a @main that calls it on the inputs of
e2e-driver.mlir's @matrix and prints the result is added (the printed module
is then one to append e2e-driver.mlir to and run). With --bf16 (torch), the
module and its arguments are bf16: torch-mlir's bf16 programs accumulate the
product in f32, round it to bf16 and compute every elementwise op in bf16.

CASE: gated (silu(x Wg^T) * (x Wu^T), a gated MLP's gate and up projections),
linear_gelu (gelu(x W^T + b), erf form), residual_layernorm (LayerNorm(x W^T
+ b + r) with gamma and beta; in JAX written out with jnp.mean and jnp.var) or
scores_softmax (softmax(q k^T) over the keys; torch's max.dim also yields
the indices, which nothing reads) or residual_rmsnorm (RMSNorm(x W^T + r) with
gamma, LLaMA's, in JAX written out), and a normalization before a product:
rmsnorm_linear (RMSNorm(x) W^T), layernorm_linear (LayerNorm(x) W^T + b) and
residual_rmsnorm_linear (RMSNorm(x Wo^T + r) W^T: the output projection,
the residual and the next layer's normalized input projection), at more
rows than output columns.
"""

import re
import subprocess
import sys

M, K, N = 6, 8, 12
# The rows and output columns of the products after a normalization.
M2, N2 = 16, 6
# --size NAME=VALUE,... overrides them (the GPU tests export larger, ragged
# shapes).
for arg in sys.argv:
    if arg.startswith("--size="):
        for item in arg[len("--size="):].split(","):
            name, value = item.split("=")
            globals()[name] = int(value)
# The arguments of each case, by shape.
SHAPES = {"gated": [(M, K), (N, K), (N, K)],
          "linear_gelu": [(M, K), (N, K), (N,)],
          "residual_layernorm": [(M, K), (N, K), (N,), (M, N), (N,), (N,)],
          "scores_softmax": [(M, K), (N, K)],
          "residual_rmsnorm": [(M, K), (N, K), (M, N), (N,)],
          "rmsnorm_linear": [(M2, K), (N2, K), (K,)],
          "layernorm_linear": [(M2, K), (N2, K), (N2,), (K,), (K,)],
          "residual_rmsnorm_linear": [(M2, K), (N, K), (M2, N), (N,), (N2, N)]}
# The result's shape, where it is not [M, N].
RESULTS = {"rmsnorm_linear": (M2, N2), "layernorm_linear": (M2, N2),
           "residual_rmsnorm_linear": (M2, N2)}


def export_torch(case):
    import torch
    import torch.nn.functional as F
    import iree.turbine.aot as aot

    class Gated(torch.nn.Module):
        def forward(self, x, wg, wu):
            return F.silu(F.linear(x, wg)) * F.linear(x, wu)

    class LinearGelu(torch.nn.Module):
        def forward(self, x, w, b):
            return F.gelu(F.linear(x, w, b))

    class ResidualLayerNorm(torch.nn.Module):
        def forward(self, x, w, b, r, gamma, beta):
            return F.layer_norm(F.linear(x, w, b) + r, (N,), gamma, beta)

    class ScoresSoftmax(torch.nn.Module):
        def forward(self, q, k):
            return torch.softmax(q @ k.T, dim=-1)

    class ResidualRMSNorm(torch.nn.Module):
        def forward(self, x, w, r, gamma):
            return F.rms_norm(F.linear(x, w) + r, (N,), gamma, eps=1e-6)

    class RMSNormLinear(torch.nn.Module):
        def forward(self, x, w, gamma):
            return F.linear(F.rms_norm(x, (K,), gamma, eps=1e-6), w)

    class LayerNormLinear(torch.nn.Module):
        def forward(self, x, w, b, gamma, beta):
            return F.linear(F.layer_norm(x, (K,), gamma, beta), w, b)

    class ResidualRMSNormLinear(torch.nn.Module):
        def forward(self, x, wo, r, gamma, w):
            return F.linear(F.rms_norm(F.linear(x, wo) + r, (N,), gamma, eps=1e-6), w)

    module = {"gated": Gated, "linear_gelu": LinearGelu,
              "residual_layernorm": ResidualLayerNorm, "scores_softmax": ScoresSoftmax,
              "residual_rmsnorm": ResidualRMSNorm, "rmsnorm_linear": RMSNormLinear,
              "layernorm_linear": LayerNormLinear,
              "residual_rmsnorm_linear": ResidualRMSNormLinear}[case]()
    dtype = torch.bfloat16 if BF16 else torch.float32
    args = tuple(torch.randn(*shape, dtype=dtype) for shape in SHAPES[case])
    text = str(aot.export(module, args=args).mlir_module)
    return iree_opt(text, ["--torch-function-to-torch-backend-pipeline",
                           "--torch-backend-to-linalg-on-tensors-backend-pipeline"])


def export_jax(case):
    import jax
    import jax.numpy as jnp

    def gated(x, wg, wu):
        return jax.nn.silu(x @ wg.T) * (x @ wu.T)

    def linear_gelu(x, w, b):
        return jax.nn.gelu(x @ w.T + b, approximate=False)

    def residual_layernorm(x, w, b, r, gamma, beta):
        h = x @ w.T + b + r
        mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        return (h - mean) / jnp.sqrt(var + 1e-5) * gamma + beta

    def scores_softmax(q, k):
        return jax.nn.softmax(q @ k.T, axis=-1)

    def residual_rmsnorm(x, w, r, gamma):
        h = x @ w.T + r
        return h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6) * gamma

    def rmsnorm(h, gamma):
        return h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6) * gamma

    def rmsnorm_linear(x, w, gamma):
        return rmsnorm(x, gamma) @ w.T

    def layernorm_linear(x, w, b, gamma, beta):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return ((x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta) @ w.T + b

    def residual_rmsnorm_linear(x, wo, r, gamma, w):
        return rmsnorm(x @ wo.T + r, gamma) @ w.T

    fn = {"gated": gated, "linear_gelu": linear_gelu,
          "residual_layernorm": residual_layernorm, "scores_softmax": scores_softmax,
          "residual_rmsnorm": residual_rmsnorm, "rmsnorm_linear": rmsnorm_linear,
          "layernorm_linear": layernorm_linear,
          "residual_rmsnorm_linear": residual_rmsnorm_linear}[case]
    text = jax.jit(fn).lower(*(jnp.zeros(shape) for shape in SHAPES[case])).as_text()
    return iree_opt(text, ["--chlo-legalize-to-stablehlo", "--iree-stablehlo-to-iree-input",
                           "--inline"])


def iree_opt(text, passes):
    run = subprocess.run([sys.executable, "-m", "iree.compiler.tools.scripts.iree_opt", "-",
                          *passes], input=text, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"iree-opt {' '.join(passes)} failed:\n{run.stderr}")
    return run.stdout


def unwrap(text, case):
    """The module's contents, its function named `case`, so that a driver
    can be appended; the exporters wrap it in a named module."""
    lines = text.strip().splitlines()
    body = [line for line in lines if not re.match(r"\s*module\b.*\{$", line)]
    if body[-1].strip() == "}":
        body.pop()
    return re.sub(r"func\.func (public )?@main\b", f"func.func @{case}", "\n".join(body))


def driver(case):
    """A @main that calls `case` on @matrix inputs and prints the result."""
    element, suffix = ("bf16", "_bf16") if BF16 else ("f32", "")
    lines = ["func.func @main() {", "  %one = arith.constant 1 : index"]
    args, types = [], []
    for i, shape in enumerate(SHAPES[case]):
        rows, cols = shape if len(shape) == 2 else (1, shape[0])
        lines += [f"  %r{i} = arith.constant {rows} : index",
                  f"  %c{i} = arith.constant {cols} : index",
                  f"  %a{i} = arith.constant {3 + 2 * i} : index",
                  f"  %b{i} = arith.constant {5 + 3 * i} : index",
                  f"  %d{i} = call @matrix{suffix}(%r{i}, %c{i}, %a{i}, %b{i}) "
                  f": (index, index, index, index) -> tensor<?x?x{element}>"]
        if len(shape) == 2:
            lines.append(f"  %t{i} = tensor.cast %d{i} : tensor<?x?x{element}> "
                         f"to tensor<{rows}x{cols}x{element}>")
            types.append(f"tensor<{rows}x{cols}x{element}>")
        else:
            lines.append(f"  %t{i} = tensor.extract_slice %d{i}[0, 0] [1, {cols}] [1, 1] "
                         f": tensor<?x?x{element}> to tensor<{cols}x{element}>")
            types.append(f"tensor<{cols}x{element}>")
        args.append(f"%t{i}")
    rows, cols = RESULTS.get(case, (M, N))
    lines += [f"  %y = call @{case}({', '.join(args)}) : ({', '.join(types)}) "
              f"-> tensor<{rows}x{cols}x{element}>",
              f"  %p = tensor.cast %y : tensor<{rows}x{cols}x{element}> to tensor<?x?x{element}>",
              f"  call @print2d{suffix}(%p) : (tensor<?x?x{element}>) -> ()", "  return", "}"]
    return "\n".join(lines)


BF16 = "--bf16" in sys.argv


def main():
    frontend, case = sys.argv[1], sys.argv[2]
    text = unwrap({"torch": export_torch, "jax": export_jax}[frontend](case), case)
    if "--driver" in sys.argv:
        text += "\n\n" + driver(case)
    print(text)


if __name__ == "__main__":
    main()
