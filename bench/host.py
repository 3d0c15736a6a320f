"""The host's cost per call, in microseconds, on problems small enough that
the GPU waits for the host: coda.Program, its C launch alone, the autograd
modules forward and backward (and the MLP's forward alone; and both with
their launches stubbed), beside the PyTorch operators they replace. A
training step whose kernels are short is bound by these costs.

    python bench/host.py [--calls 2000] [--profile]
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import coda  # noqa: E402
import coda.nn  # noqa: E402

M, K, N = 128, 64, 256


def per_call(fn, calls):
    """Microseconds of host time per call of fn, the GPU synchronized before
    and after (its kernels are shorter than the host's work between them)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def c_launch(program, x, w, b):
    """A function that repeats program's last C launch with the same packed
    arguments: the runtime's own cost per call, no python in it."""
    recorded = {}
    program(x, w, bias=b)
    plan = program._plan
    real = plan["launch"]

    def record(*args):
        recorded["args"] = args
        return real(*args)

    plan["launch"] = record
    try:
        program(x, w, bias=b)
    finally:
        plan["launch"] = real
    args = recorded["args"]
    return lambda: real(*args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", action="store_true",
                        help="also print where the Linear's and the MLP's forward + backward spend "
                        "their host time")
    args = parser.parse_args()
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(M, K, device=dev, dtype=dt)
    w = torch.randn(N, K, device=dev, dtype=dt)
    b = torch.randn(N, device=dev, dtype=dt)
    program = coda.Program("EPILOGUE g(bias: bf16[N]) {\n  output = gelu(input + bias);\n}\n")

    rows = []

    def add(name, fn, kernels):
        rows.append((name, kernels, per_call(fn, args.calls)))

    add("F.linear (cuBLASLt GEMM + bias)", lambda: F.linear(x, w, b), 1)
    add("F.gelu(F.linear) eager", lambda: F.gelu(F.linear(x, w, b)), 2)
    add("coda.Program bias+gelu", lambda: program(x, w, bias=b), 1)
    add("  its C launch alone", c_launch(program, x, w, b), 1)

    # Forward + backward of a layer and of an MLP.
    xg = x.detach().requires_grad_()
    lin = torch.nn.Linear(K, N, device=dev, dtype=dt)
    code = coda.nn.Linear(K, N, epilogue="EPILOGUE g(bias: bf16[N]) {\n"
                          "  output = gelu(input + bias);\n}\n", device=dev, dtype=dt)

    def eager_linear():
        F.gelu(lin(xg)).sum().backward()

    def coda_linear():
        code(xg).sum().backward()

    add("nn.Linear + gelu, forward + backward", eager_linear, 0)
    add("coda.nn.Linear gelu, forward + backward", coda_linear, 0)

    mlp = coda.nn.MLP(K, 4 * K, dropout=0.1, device=dev, dtype=dt)
    r = torch.randn(M, K, device=dev, dtype=dt)

    def eager_mlp():
        h = F.dropout(F.gelu(mlp.fc1(xg)), 0.1)
        (mlp.fc2(h) + r).sum().backward()

    def coda_mlp():
        mlp(xg, residual=r).sum().backward()

    add("eager MLP (dropout 0.1), forward + backward", eager_mlp, 0)
    add("coda.nn.MLP, forward + backward", coda_mlp, 0)
    # The forward alone (its graph kept, as in training): what the backward
    # costs is the difference.
    add("eager MLP, forward", lambda: mlp.fc2(F.dropout(F.gelu(mlp.fc1(xg)), 0.1)) + r, 0)
    add("coda.nn.MLP, forward", lambda: mlp(xg, residual=r), 0)

    # The same steps with every program call stubbed (its outputs made
    # empty, as the custom op's fake makes them, nothing launched): coda's
    # Python and PyTorch's autograd around the launches; the difference to
    # the rows above is what the launches themselves cost the host.
    real = coda.autograd._run
    coda.autograd._run = coda.autograd._run_fake
    try:
        add("coda.nn.Linear gelu, forward + backward, launches stubbed", coda_linear, 0)
        add("coda.nn.MLP, forward + backward, launches stubbed", coda_mlp, 0)
    finally:
        coda.autograd._run = real

    print(f"host time per call, us ({args.calls} calls, M={M} K={K} N={N}, bf16; "
          f"torch {torch.__version__})")
    width = max(len(name) for name, _, _ in rows)
    for name, _, us in rows:
        print(f"  {name:<{width}}  {us:8.1f}")

    if args.profile:
        # The backward on this thread rather than autograd's device thread,
        # which cProfile does not see.
        torch.autograd.set_multithreading_enabled(False)
        for name, step in (("coda.nn.Linear", coda_linear), ("coda.nn.MLP", coda_mlp)):
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(200):
                step()
            torch.cuda.synchronize()
            profiler.disable()
            print(f"\n{name}, forward + backward, 200 steps:")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            # The PyTorch operators and CUDA calls a step dispatches.
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities) as trace:
                for _ in range(20):
                    step()
                torch.cuda.synchronize()
            print(trace.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
