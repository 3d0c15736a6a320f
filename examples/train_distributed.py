"""Trains the GPT of examples/train.py on coda's kernels under PyTorch's own
distributed engines: DistributedDataParallel (--engine ddp) or FSDP2
(--engine fsdp: torch.distributed.fsdp.fully_shard on each block and on the
model). One process per GPU with NCCL; on a machine without a GPU, processes
on the CPU reference with gloo. Nothing coda-specific in the launch:

    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --engine ddp
    python examples/train_distributed.py --engine fsdp      # one process

Every rank builds the same model (the same seed), coda.patch puts it on coda
kernels, the engine wraps it. Each step draws a global batch of --batch
sequences from one generator that every rank seeds alike, and rank r trains
on its r-th share, so that any number of processes trains on the same
tokens with the same gradients (the engines average them) as one process
with the whole batch. Dropout (--dropout) draws from each rank's own
generator, seeded by rank. Rank 0 prints the loss averaged over the ranks,
the gradients' norm and tokens/s, and with --out writes them as JSON.
Kernels compile once per rank, or load from the disk cache (CODA_CACHE_DIR),
which ranks on one host share.
"""

import argparse
import datetime
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import coda  # noqa: E402
from train import GPT, corpus  # noqa: E402


def start():
    """Joins the process group torchrun set up, or makes a group of one (an
    in-memory store, no port) when the script runs alone; returns rank,
    world size and this rank's device."""
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    options = dict(backend="nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=10))
    if "RANK" not in os.environ:
        options.update(store=dist.HashStore(), rank=0, world_size=1)
    dist.init_process_group(**options)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), device


def wrap(model, engine, device):
    """`model` under `engine`."""
    if engine == "ddp":
        return DistributedDataParallel(model, device_ids=[device.index]
                                       if device.type == "cuda" else None)
    for block in model.blocks:
        fully_shard(block)
    return fully_shard(model)


def gradient_norm(model):
    """The norm of all gradients (whole, where FSDP2 holds shards of them)."""
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    return (norm.full_tensor() if hasattr(norm, "full_tensor") else norm).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=8,
                        help="sequences per step over all ranks (a multiple of their number)")
    parser.add_argument("--context", type=int, default=None,
                        help="tokens per sequence (default 256 on a GPU, 64 on the CPU)")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu",
                        help="the blocks' MLP: GPT-2's, or LLaMA's gated one")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-coda", dest="coda", action="store_false",
                        help="train the eager model (the baseline), not coda's")
    parser.add_argument("--out", help="a JSON file for rank 0's record of the run")
    args = parser.parse_args()

    rank, world, device = start()
    if args.batch % world:
        parser.error(f"--batch {args.batch} is not a multiple of the {world} ranks")
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    context = args.context or (256 if cuda else 64)
    layers = args.layers or (6 if cuda else 2)
    width = args.width or (384 if cuda else 64)

    torch.manual_seed(args.seed)
    model = GPT(context=context, layers=layers, heads=args.heads, d=width,
                dropout=args.dropout, mlp=args.mlp).to(device, dtype)
    if args.coda:
        report = coda.patch(model)
        if rank == 0:
            print(report)
    model = wrap(model, args.engine, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    # examples/train.py's linear warm-up of the learning rate.
    warmup = max(1, min(30, args.steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min(1.0, (i + 1) / warmup))
    torch.manual_seed(args.seed + 1 + rank)  # each rank's own dropout masks

    data = corpus(8 << 20 if cuda else 1 << 20)
    split = int(0.95 * len(data))
    batches = torch.Generator().manual_seed(args.seed)
    share = args.batch // world
    if rank == 0:
        print(f"{args.engine}, {world} rank(s) on {device.type} ({dtype}): {layers} layers, "
              f"width {width}, {args.batch} x {context} tokens per step", flush=True)
    record = {"engine": args.engine, "world": world, "coda": args.coda, "device": device.type,
              "losses": [], "grad_norms": []}
    timed_from, seconds = min(5, args.steps // 2), 0.0
    for step in range(args.steps):
        starts = torch.randint(0, split - context - 1, (args.batch,), generator=batches)
        mine = starts[rank * share:(rank + 1) * share]
        x = torch.stack([data[s:s + context] for s in mine]).to(device)
        y = torch.stack([data[s + 1:s + context + 1] for s in mine]).to(device)
        if cuda:
            torch.cuda.synchronize()
        begin = time.perf_counter()
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = gradient_norm(model)
        optimizer.step()
        schedule.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean = mean.item() / world
        if step >= timed_from:
            seconds += time.perf_counter() - begin
        record["losses"].append(mean)
        record["grad_norms"].append(norm)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            rate = (f"  {args.batch * context * (step + 1 - timed_from) / seconds:,.0f} tok/s"
                    if seconds else "")
            print(f"step {step + 1:4d}/{args.steps}  loss {mean:.4f}  grad norm {norm:.4f}{rate}",
                  flush=True)
    if seconds:
        record["tokens_per_s"] = args.batch * context * (args.steps - timed_from) / seconds
    if rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
    # The engine's state (FSDP2's gathered parameters, its pending reductions)
    # goes before the process group does.
    del model, optimizer, schedule, loss
    dist.barrier()
    dist.destroy_process_group()
    return 0 if math.isfinite(record["losses"][-1]) else 1


if __name__ == "__main__":
    sys.exit(main())
