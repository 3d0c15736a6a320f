# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: env CODA_REFERENCE_LIBRARY=%coda_obj/lib/libcoda_reference.so %python %s %coda_src %t | FileCheck %s
#
# coda's modules under PyTorch's distributed engines, on the CPU reference
# with gloo: examples/train_distributed.py trains the coda.patch'd GPT of
# examples/train.py in two processes launched by torchrun, under
# DistributedDataParallel and under FSDP2 (fully_shard), and in one process
# on the whole batch. Every run trains on the same tokens, so in float32 the
# two-process runs' losses and gradient norms equal the one-process run's
# step by step, and that one's equal the eager model's. A run with dropout
# trains under FSDP2 too; a global batch that the ranks cannot share is
# refused. The same holds with LLaMA's gated MLP in the blocks.

import json
import os
import subprocess
import sys

source, work = sys.argv[1], sys.argv[2]
script = os.path.join(source, "examples", "train_distributed.py")
common = ["--steps", "4", "--layers", "2", "--width", "32", "--context", "16", "--batch", "4"]
env = dict(os.environ, OMP_NUM_THREADS="1")


def train(name, ranks, *options):
    """Runs the script in `ranks` processes; returns rank 0's record."""
    out = os.path.join(work, name + ".json")
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={ranks}"] if ranks > 1 else [sys.executable])
    done = subprocess.run(launch + [script, *common, *options, "--out", out], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    with open(out) as f:
        return json.load(f)


def same(what, got, want, tolerance):
    worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    print(f"{what}: {len(got)} steps, worst relative difference "
          f"{'below' if worst < tolerance else 'ABOVE'} {tolerance:g}")


one = train("one", 1, "--engine", "ddp")
eager = train("eager", 1, "--engine", "ddp", "--no-coda")
same("one process, coda vs eager: loss", one["losses"], eager["losses"], 1e-5)
same("one process, coda vs eager: gradient norm", one["grad_norms"], eager["grad_norms"], 1e-5)
for engine in ("ddp", "fsdp"):
    run = train(engine, 2, "--engine", engine)
    print(f"{engine}: world {run['world']}, coda {run['coda']}")
    same(f"{engine}, two processes vs one: loss", run["losses"], one["losses"], 1e-5)
    same(f"{engine}, two processes vs one: gradient norm", run["grad_norms"], one["grad_norms"],
         1e-5)

# CHECK: one process, coda vs eager: loss: 4 steps, worst relative difference below 1e-05
# CHECK: one process, coda vs eager: gradient norm: 4 steps, worst relative difference below 1e-05
# CHECK: ddp: world 2, coda True
# CHECK: ddp, two processes vs one: loss: 4 steps, worst relative difference below 1e-05
# CHECK: ddp, two processes vs one: gradient norm: 4 steps, worst relative difference below 1e-05
# CHECK: fsdp: world 2, coda True
# CHECK: fsdp, two processes vs one: loss: 4 steps, worst relative difference below 1e-05
# CHECK: fsdp, two processes vs one: gradient norm: 4 steps, worst relative difference below 1e-05

# LLaMA's gated MLP in the blocks (coda.nn.GatedMLP after coda.patch).
gated_one = train("gated-one", 1, "--engine", "ddp", "--mlp", "swiglu")
gated_eager = train("gated-eager", 1, "--engine", "ddp", "--mlp", "swiglu", "--no-coda")
same("gated MLP, coda vs eager: loss", gated_one["losses"], gated_eager["losses"], 1e-5)
for engine in ("ddp", "fsdp"):
    run = train("gated-" + engine, 2, "--engine", engine, "--mlp", "swiglu")
    same(f"gated MLP, {engine}, two processes vs one: gradient norm", run["grad_norms"],
         gated_one["grad_norms"], 1e-5)
# CHECK: gated MLP, coda vs eager: loss: 4 steps, worst relative difference below 1e-05
# CHECK: gated MLP, ddp, two processes vs one: gradient norm: 4 steps, worst relative difference below 1e-05
# CHECK: gated MLP, fsdp, two processes vs one: gradient norm: 4 steps, worst relative difference below 1e-05

dropout = train("dropout", 2, "--engine", "fsdp", "--dropout", "0.1")
print(f"fsdp with dropout: {len(dropout['losses'])} steps, final loss finite: "
      f"{dropout['losses'][-1] == dropout['losses'][-1] and abs(dropout['losses'][-1]) < 1e9}")
# CHECK: fsdp with dropout: 4 steps, final loss finite: True

refused = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node=2", script, *common[:-1], "3"], env=env,
                         capture_output=True, text=True)
print(f"--batch 3 on two ranks: exit {refused.returncode}")
print(next(line for line in refused.stderr.splitlines() if "error:" in line))
# CHECK: --batch 3 on two ranks: exit 1
# CHECK: train_distributed.py: error: --batch 3 is not a multiple of the 2 ranks
