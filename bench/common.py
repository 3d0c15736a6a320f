"""What the H200 benchmarks share: coda's python package loaded beside the
peers', CUDA-event medians with L2 flushed, CUDA-graph replays, relative
errors, and the peers.
"""

import argparse
import importlib.util
import json
import os
import site
import sys
import types

from triton.testing import do_bench

HERE = os.path.dirname(os.path.abspath(__file__))


def load_coda():
    """coda's python package, loaded under the name `coda_compiler`: the peer
    CODA-kernels ships a top-level package `coda` too, and both run in one
    process (coda's modules import each other relatively)."""
    folder = os.path.join(HERE, "..", "python", "coda")
    spec = importlib.util.spec_from_file_location(
        "coda_compiler", os.path.join(folder, "__init__.py"),
        submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules["coda_compiler"] = module
    spec.loader.exec_module(module)
    return module


def bench(fn):
    """The median time of `fn` in ms (CUDA events, L2 flushed)."""
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def graphed(fn, warmup=3, capture_error_mode="global"):
    """fn captured in a CUDA graph (after warm-up on a side stream); returns
    the graph's replay. capture_error_mode: torch.cuda.graph's ("thread_local"
    lets other threads, coda's compile threads, call CUDA meanwhile)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=capture_error_mode):
        fn()
    return graph.replay


def rel(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def load_peers(folder):
    """The peers' modules that import from `folder` (a pip --target folder),
    by name: CODA-kernels' GEMM functions (peer_coda), quack's GEMM
    interface (peer_quack) and its norms (peer_quack_norm)."""
    found = {}
    if not folder:
        return found
    site.addsitedir(folder)  # its .pth files name CuTeDSL's packages
    # coda-kernels 0.2 imports ipdb (a debugger) at import time and never
    # uses it here.
    sys.modules.setdefault("ipdb", types.ModuleType("ipdb"))
    for name, module in (("peer_coda", "coda.core.gemm.functional"),
                         ("peer_quack", "quack.gemm_interface"),
                         ("peer_quack_norm", "quack.rmsnorm")):
        try:
            found[name] = importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 - a peer that does not load is left out
            print(f"{module}: not available ({type(error).__name__}: {error})")
    return found


def report(out, name, res, header):
    """Writes `res` to <out>/<name>.json and, as a table of each row's times
    relative to its first (the GEMMs alone), with `header` and the "*_error" entries, to
    <out>/<name>.md; prints the table."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = [header, ""]
    for shape, row in res["rows"].items():
        base = next(iter(row.values()))
        lines.append(f"{shape}: " + ", ".join(f"{key} {ms:.4f} ({ms / base:.3f}x)"
                                              for key, ms in row.items()))
    lines.append("errors vs the unfused math: " + ", ".join(
        f"{key[:-6]} {value:.2e}" for key, value in res.items() if key.endswith("_error")))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write(text + "\n")


# The columns of a forward and backward benchmark's table (run_shapes).
STEP_COLUMNS = [
    ("shape", lambda r: r["shape"]), ("variant", lambda r: r["variant"]),
    ("forward ms", lambda r: f"{r['forward_ms']:.3f}"),
    ("forward + backward ms", lambda r: f"{r['step_ms']:.3f}"),
    ("in GEMMs", lambda r: f"{r['step_ms'] / r['gemm_ms']:.2f}")]


def run_shapes(name, shapes, measure, columns=()):
    """The main of a forward and backward benchmark: `measure(shape,
    *shapes[shape])` (rows of dicts with shape, variant, forward_ms, step_ms
    and gemm_ms) for each shape --shapes names (default: all), written with
    the date and the GPU to <--out>/<name>.json and as a table of
    STEP_COLUMNS and `columns` to <--out>/<name>.md."""
    import time

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=",".join(shapes))
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        rows += measure(shape, *shapes[shape])
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(dict(date=time.strftime("%Y-%m-%d"), device=torch.cuda.get_device_name(),
                       rows=rows), f, indent=1)
    columns = STEP_COLUMNS + list(columns)
    with open(os.path.join(args.out, name + ".md"), "w") as f:
        f.write("| " + " | ".join(header for header, _ in columns) + " |\n"
                + "|---" * len(columns) + "|\n")
        for row in rows:
            f.write("| " + " | ".join(cell(row) for _, cell in columns) + " |\n")


def parse_arguments():
    """The benchmarks' options: --out (default $OUT or .), --m (tokens, 8192),
    --peers (a folder to import the peers from), and --only and --shapes
    (the rows and kernel shapes to run, where a benchmark has them)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--peers", default="", help="a folder to import the peers from")
    parser.add_argument("--only", default="",
                        help="run the rows whose name contains this text (default: all)")
    parser.add_argument("--shapes", default="",
                        help="comma-separated kernel shapes to time (default: all)")
    return parser.parse_args()
