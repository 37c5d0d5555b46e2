"""A multi-rank CPU training job (gloo) that records host and device traces with chakra-et.

Each rank trains a small model under DistributedDataParallel and, every step, also runs each
collective PyTorch offers on gloo (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all,
barrier) plus a send/recv ring, so the traces hold every kind of communication.

Usage: python examples/collect_gloo.py OUT_DIR [--ranks 2] [--steps 3] [--port 29511]
                                       [--hidden 64] [--batch 16] [--training-only]
Writes OUT_DIR/host.{rank}.json and OUT_DIR/device.{rank}.json for every rank. ``--training-only``
leaves out the extra collectives: a plain DDP job whose steps are mostly compute (with a larger
``--hidden``/``--batch``), the kind a simulator is asked what-if questions about.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from chakra.pytorch.collect import collect

HIDDEN = 64
BATCH = 16
WARMUP_STEPS = 1
P2P_TAG = 3


def communicate(rank: int, world: int) -> None:
    """One of each collective, then a send/recv ring (even ranks send first to avoid a deadlock)."""
    x = torch.full((world * 4,), float(rank))
    dist.all_reduce(x)
    gathered = [torch.empty(4) for _ in range(world)]
    dist.all_gather(gathered, torch.full((4,), float(rank)))
    shard = torch.empty(4)
    dist.reduce_scatter_tensor(shard, x)
    dist.broadcast(x, src=0)
    exchanged = torch.empty_like(x)
    dist.all_to_all_single(exchanged, x)
    dist.barrier()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    outgoing, incoming = torch.full((8,), float(rank)), torch.empty(8)
    if rank % 2 == 0:
        dist.send(outgoing, dst=nxt, tag=P2P_TAG)
        dist.recv(incoming, src=prv, tag=P2P_TAG)
    else:
        dist.recv(incoming, src=prv, tag=P2P_TAG)
        dist.send(outgoing, dst=nxt, tag=P2P_TAG)


def run(rank: int, world: int, out_dir: str, steps: int, port: int, shape: tuple[int, int, bool]) -> None:
    hidden, batch, training_only = shape
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(batch, hidden)
    with collect(out_dir, warmup_steps=WARMUP_STEPS, active_steps=steps - WARMUP_STEPS) as recorder:
        for _ in range(steps):
            optimizer.zero_grad()
            model(data).square().mean().backward()
            optimizer.step()
            if not training_only:
                communicate(rank, world)
            recorder.step()
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="training steps (the first one is warm-up)")
    parser.add_argument("--port", type=int, default=29511)
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="width of the two Linear layers")
    parser.add_argument("--batch", type=int, default=BATCH, help="samples per step")
    parser.add_argument("--training-only", action="store_true", help="no collectives beyond DDP's own")
    args = parser.parse_args()
    if args.steps <= WARMUP_STEPS:
        parser.error(f"--steps must be more than {WARMUP_STEPS}")
    shape = (args.hidden, args.batch, args.training_only)
    mp.spawn(run, args=(args.ranks, str(args.out_dir), args.steps, args.port, shape), nprocs=args.ranks)


if __name__ == "__main__":
    main()
