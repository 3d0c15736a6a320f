"""Each program of a Transformer MLP's training step, timed with the tile
rule's kernel shape and with every tuning candidate pinned, beside cuBLAS's
GEMM of the same size, in one process on the H200.

The programs are the ones coda.nn.MLP and coda.nn.OutProjection run (bf16,
no dropout unless the row says so): fc1's forward and its saving form (also
writing the accumulator), its epilogue gradient on fc2's dgrad GEMM
(backward_saved), the paper's chain, fc2 and the output projection with
bias + residual, at GPT-2's (768 -> 3072) and BERT-L's (1024 -> 4096)
widths; and the plain GEMM at a K whose rows the runtime stages for TMA
(765) and at GPT-2's vocabulary (N = 50257). Each time is the median of
CUDA-event timings of the program replayed from a CUDA graph with L2
flushed (triton.testing.do_bench), in microseconds; "best" names the
fastest candidate. Before timing, every candidate's outputs are compared
with the rule's (they compute the same program, so they agree to
rounding). Writes shapes.json and shapes.md to --out.

    python3 bench/shapes.py [--m 8192] [--out DIR] [--only TEXT] [--shapes rule,128x256]
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

from common import bench, graphed, load_coda, parse_arguments, rel

coda = load_coda()
_output_shape = sys.modules["coda_compiler.runtime"]._output_shape
dev = torch.device("cuda")

GEMM = "EPILOGUE gemm() {\n  output = input;\n}\n"
FC1 = "EPILOGUE fc1(bias: bf16[N]) {\n  output = %s(input + bias);\n}\n"
PAPER = ("EPILOGUE paper(bias: bf16[N], residual: bf16[M, N]) {\n"
         "  output = dropout(gelu(input + bias), 0.1) + residual;\n}\n")
PROJ = ("EPILOGUE out_projection(bias: bf16[N], residual: bf16[M, N]) {\n"
        "  output = input + bias + residual;\n}\n")
# name: (source, derive, N, K)
ROWS = {
    "gpt2 fc1 gemm": (GEMM, "", 3072, 768),
    "gpt2 lm head gemm, N = 50304 (padded)": (GEMM, "", 50304, 768),
    "gpt2 fc1 gemm, K = 765 (A and B staged)": (GEMM, "", 3072, 765),
    "gpt2 lm head gemm, N = 50257": (GEMM, "", 50257, 768),
    "gpt2 fc1 gelu": (FC1 % "gelu", "", 3072, 768),
    "gpt2 fc1 gelu_erf saving": (FC1 % "gelu_erf", "saving", 3072, 768),
    "gpt2 fc1 gelu saving": (FC1 % "gelu", "saving", 3072, 768),
    "gpt2 fc1 backward on fc2 dgrad": (FC1 % "gelu_erf", "backward_saved", 3072, 768),
    "gpt2 fc1 paper chain": (PAPER, "", 3072, 768),
    "gpt2 fc2 bias+residual": (PROJ, "", 768, 3072),
    "gpt2 out projection": (PROJ, "", 768, 768),
    "bertL fc1 gelu": (FC1 % "gelu", "", 4096, 1024),
    "bertL fc1 gelu_erf saving": (FC1 % "gelu_erf", "saving", 4096, 1024),
    "bertL fc1 backward on fc2 dgrad": (FC1 % "gelu_erf", "backward_saved", 4096, 1024),
}
# label: kernel-shape options (the rule's when empty)
SHAPES = {
    "rule": {},
    "128x256": dict(tile_n=256),
    "128x192": dict(tile_n=192),
    "128x128": dict(tile_n=128),
    "256x128": dict(tile_m=256, tile_n=128),
    "128x256 c2": dict(tile_n=256, cluster_m=2, group_rows=16),
    "128x192 c2": dict(tile_n=192, cluster_m=2, group_rows=16),
    "128x128 pingpong": dict(tile_n=128, schedule="pingpong"),
    "128x192 pingpong": dict(tile_m=128, tile_n=192, schedule="pingpong"),
}
TYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}


def make_inputs(program, m, n, k):
    """Random operands and epilogue inputs of `program` for an m x n x k
    problem (A [m, k], B as the program lays it out)."""
    a = torch.randn(*((k, m) if program.transpose_a else (m, k)), device=dev) / k ** 0.25
    b = torch.randn(*((n, k) if program.transpose_b else (k, n)), device=dev) / k ** 0.25
    named = {}
    for arg in program.arguments:
        if arg["role"] != "input":
            continue
        if not arg["tensor"]:
            named[arg["name"]] = 1234 if arg["type"] == "i64" else 0.5
            continue
        # An input that spans n mod p is p wide.
        shape = _output_shape(arg["dims"], None, m, arg["period"] or n)
        named[arg["name"]] = torch.randn(*shape, device=dev).to(TYPES[arg["type"]])
    return a.bfloat16(), b.bfloat16(), named


def us(fn):
    return round(bench(graphed(fn)) * 1000, 1)


def measure(name, source, derive, n, k, m, shapes):
    row = {}
    x, w = (torch.randn(m, k, device=dev, dtype=torch.bfloat16),
            torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    row["cuBLAS"] = us(lambda: F.linear(x, w))
    reference = None
    for label, options in shapes.items():
        try:
            program = coda.Program(source, derive=derive, **options)
            if reference is None:
                torch.manual_seed(0)
                a, b, named = make_inputs(program, m, n, k)
            seed = {"seed": 7} if "dropout" in source else {}
            outs = program(a, b, inputs=named, **seed)
            if reference is None:
                reference = {key: v.clone() for key, v in outs.items()}
                row["rule shape"] = "x".join(map(str, program.kernel_shape[:2])) + (
                    f" {program.kernel_shape[2]} c{program.kernel_shape[3]}")
            else:
                worst = max(rel(outs[key], reference[key]) for key in reference)
                if worst > 1e-2:
                    raise RuntimeError(f"differs from the rule's kernel by {worst:.2e}")
            row[label] = us(lambda: program(a, b, inputs=named, out=outs, **seed))
        except Exception as error:  # noqa: BLE001 - a shape the program refuses is reported
            row[label] = f"error: {str(error).splitlines()[0][:100]}"
    timed = {key: v for key, v in row.items() if key in SHAPES and isinstance(v, float)}
    row["best"] = min(timed, key=timed.get) if timed else "none"
    print(name, row, flush=True)
    return row


def main():
    args = parse_arguments()
    shapes = {label: options for label, options in SHAPES.items()
              if not args.shapes or label in args.shapes.split(",")}
    results = {name: measure(name, *spec, args.m, shapes) for name, spec in ROWS.items()
               if args.only in name}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "shapes.json"), "w") as f:
        json.dump(results, f, indent=1)
    columns = ["cuBLAS", *shapes, "best", "rule shape"]
    lines = ["| program | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    for name, row in results.items():
        lines.append(f"| {name} | " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "shapes.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
