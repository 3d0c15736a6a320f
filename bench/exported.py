"""What PyTorch's and JAX's exporters emit, raised and outlined, against the
same programs written in the DSL, on the H200: GPT-2's MLP up-projection
(linear + bias + exact GELU, 768 -> 3072) and its attention output projection
with bias, residual and LayerNorm (768 -> 768), f32 operands (tf32 on the
tensor cores, as the exports are f32), M = 8192, one process, CUDA-event
medians with L2 flushed. Rows: cuBLAS's GEMM alone (F.linear, TF32), eager
PyTorch's unfused layer, the DSL program, and each frontend's exported
program (coda.Program on the outlined module's program). Each program's
output (its buffer filled with NaN first) is checked against the layer in
float64 before it is timed; the relative errors are in the report.

The exports need the frontends (jax, iree-turbine) and coda-opt, which the
GPU machine may not have: export here, carry the folder, time there.

    python3 bench/exported.py --export DIR          # export, raise, outline
    python3 bench/exported.py --modules DIR [--out DIR]   # the same --m
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT = os.path.join(HERE, "..", "test", "Conversion", "LinalgToCoda", "Inputs", "export.py")
# Each case: its export sizes and the DSL program that computes the same.
CASES = {
    "linear_gelu": ("M={m},K=768,N=3072", """
EPILOGUE linear_gelu(bias: f32[N]) -> (output: f32[M, N]) {
  output = gelu_erf(input + bias);
}
"""),
    "residual_layernorm": ("M={m},K=768,N=768", """
EPILOGUE residual_layernorm(bias: f32[N], residual: f32[M, N], gamma: f32[N], beta: f32[N])
    -> (output: f32[M, N]) {
  x = input + bias + residual;
  mean = row_mean(x);
  d = x - mean;
  output = d * rsqrt(row_mean(d * d) + 1e-5) * gamma + beta;
}
"""),
}
FRONTENDS = ("torch", "jax")


def export(folder, m):
    """Writes <frontend>-<case>.mlir, raised and outlined, into `folder`."""
    os.makedirs(folder, exist_ok=True)
    for case, (sizes, _) in CASES.items():
        for frontend in FRONTENDS:
            text = subprocess.run([sys.executable, EXPORT, frontend, case,
                                   "--size=" + sizes.format(m=m)], check=True,
                                  capture_output=True, text=True).stdout
            outlined = subprocess.run(["coda-opt", "--coda-raise-linalg",
                                       "--coda-outline-programs"], input=text, check=True,
                                      capture_output=True, text=True).stdout
            with open(os.path.join(folder, f"{frontend}-{case}.mlir"), "w") as f:
                f.write(outlined)
            print(f"{frontend}-{case}.mlir")


def program_of(text):
    """The name of the module's program (the function that holds its
    coda.gemm and calls nothing)."""
    for name, body in re.findall(r"^  func\.func @(\w+)\(.*?^(.*?)^  \}$", text, re.M | re.S):
        if "coda.gemm" in body and "call @" not in body:
            return name
    raise SystemExit("no program in the module")


def inputs_for(program, vectors, residual):
    """Inputs of `program`'s signature, named, beside A and B: its [N]
    tensors taken from `vectors` in order (bias, then LayerNorm's gamma and
    beta), its [M, N] tensor `residual`, and any scalar its host code
    passes in as the export computes it (JAX's N - ddof as an f32 and its
    N - ddof > 0 guard as an i64, in exports raised before the raising
    folded them into constants)."""
    vectors = iter(vectors)
    scalars = {"f32": float(residual.shape[1]), "i64": 1}
    return {arg["name"]: (next(vectors) if arg["dims"] == 1 else residual) if arg["tensor"]
            else scalars[arg["type"]]
            for arg in program.arguments if arg["role"] == "input"}


def time_all(folder, out, m):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    from common import bench, load_coda, report

    coda = load_coda()
    torch.backends.cuda.matmul.allow_tf32 = True
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "rows": {}}
    torch.manual_seed(0)
    for case, (sizes, dsl) in CASES.items():
        size = dict(item.split("=") for item in sizes.format(m=0).split(","))
        k, n = int(size["K"]), int(size["N"])
        modules = [f for f in FRONTENDS
                   if os.path.exists(os.path.join(folder, f"{f}-{case}.mlir"))]
        if not modules:
            raise SystemExit(f"no export of {case} in {folder} (bench/exported.py --export)")
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda") / k ** 0.5
        bias, gamma, beta = (torch.randn(n, device="cuda") for _ in range(3))
        r = torch.randn(m, n, device="cuda")
        layer = {"linear_gelu": lambda a, b, bias, r, gamma, beta: F.gelu(F.linear(a, b, bias)),
                 "residual_layernorm": lambda a, b, bias, r, gamma, beta: F.layer_norm(
                     F.linear(a, b, bias) + r, (n,), gamma, beta)}[case]
        operands = (a, b, bias, r, gamma, beta)
        # Each program is checked against the layer in float64 before it is
        # timed, its output first filled with NaN.
        want = layer(*(t.double() for t in operands))
        row = {"gemm": bench(lambda: F.linear(a, b)), "eager": bench(lambda: layer(*operands))}
        programs = {"dsl": coda.Program(dsl, dtype="f32")}
        for frontend in modules:
            text = open(os.path.join(folder, f"{frontend}-{case}.mlir")).read()
            if f"tensor<{m}x{k}xf32>" not in text:
                raise SystemExit(f"{frontend}-{case}.mlir was not exported at M = {m} (--m)")
            programs[frontend] = coda.Program(text, function=program_of(text))
        for name, program in programs.items():
            args = inputs_for(program, (bias, gamma, beta), r)
            (output,) = program.outputs
            poisoned = {output["name"]: torch.full((m, n), float("nan"), device="cuda")}
            got = program(a, b, inputs=args, out=poisoned)[output["name"]]
            res[f"{case} {name}_error"] = ((got.double() - want).norm() / want.norm()).item()
            row[name] = bench(lambda: program(a, b, inputs=args))
            res[f"{case}_{name}_kernel"] = list(program.kernel_shape)
        res["rows"][f"{case} M={m} K={k} N={n}"] = row
    report(out, "exported", res,
           f"exported programs vs the DSL, f32 (tf32), {res['device']}, {res['date']} (ms)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", help="write the outlined exports into this folder")
    parser.add_argument("--modules", help="time the outlined exports in this folder")
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    if args.export:
        export(args.export, args.m)
    if args.modules:
        time_all(args.modules, args.out, args.m)
    if not (args.export or args.modules):
        parser.error("give --export DIR, --modules DIR or both")


if __name__ == "__main__":
    main()
