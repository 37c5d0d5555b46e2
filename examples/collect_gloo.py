"""A multi-rank CPU training job (gloo) that records host and device traces with chakra-et.

Each rank trains a small model under DistributedDataParallel and, every step, also runs each
collective PyTorch offers on gloo (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all,
barrier) plus a send/recv ring, so the traces hold every kind of communication.

Usage: python examples/collect_gloo.py OUT_DIR [--ranks 2] [--steps 3] [--port 29511]
                                       [--hidden 64] [--batch 16] [--training-only | --groups]
Writes OUT_DIR/host.{rank}.json and OUT_DIR/device.{rank}.json for every rank. ``--training-only``
leaves out the extra collectives: a plain DDP job whose steps are mostly compute (with a larger
``--hidden``/``--batch``), the kind a simulator is asked what-if questions about.

``--groups`` (``--ranks 4``) is a job of nested process groups instead of training: data-parallel
pairs {0,2} {1,3}, tensor-parallel pairs {0,1} {2,3} and a trio {0,1,2} made with
``dist.new_group``. Each step issues every collective gloo runs (all_reduce, broadcast, all_gather,
reduce_scatter, reduce, gather, scatter, all_to_all, barrier) on the world and on subgroups, with
non-zero roots; some ranks sleep so that others wait for them (:data:`GROUP_STEP`). What each rank
issued in the recorded steps (call, group members, global root) is written to
OUT_DIR/program.{rank}.json, so a test knows which group ran each collective.
"""

from __future__ import annotations

import argparse
import json
import os
import time
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

#: ``--groups``: the world size, the subgroups (global ranks in group-rank order, created in this
#: order on every rank), and what each group is called in :data:`GROUP_STEP`.
GROUPS_WORLD = 4
SUBGROUPS: dict[str, list[tuple[int, ...]]] = {
    "dp": [(0, 2), (1, 3)],
    "tp": [(0, 1), (2, 3)],
    "trio": [(0, 1, 2)],
}
#: Floats each group moves (divisible by its size): different per group, so that a collective's
#: size tells its group wherever the kind and root do not (two pairs running one at the same time
#: would otherwise look like one collective of all four ranks).
GROUP_FLOATS = {(0, 1, 2, 3): 16, (0, 2): 8, (1, 3): 10, (0, 1): 12, (2, 3): 14, (0, 1, 2): 6}
#: Ranks that sleep :data:`SLEEP_S` seconds at a ``("sleep", who, None)`` step of :data:`GROUP_STEP`.
SLEEPERS = {"dp13": (1, 3), "tp23": (2, 3), "late": (3,)}
SLEEP_S = 0.04
#: One step of ``--groups``: (collective, group, root as a group rank; ``None`` = unrooted). A rank
#: skips the collectives of groups it is not in ("world" is the default group). Barriers,
#: all-to-alls, gathers and scatters (whose sizes may differ per rank) look alike on every group:
#: before those of a subgroup the ranks of its other instance sleep, so that instance has finished
#: before they arrive (no larger group can have run it); rank 3 sleeps before the last world
#: barrier while the others run trio collectives (ranks arriving far apart).
GROUP_STEP: list[tuple[str, str, int | None]] = [
    ("all_reduce", "world", None),
    ("all_reduce", "dp", None),
    ("all_reduce", "tp", None),
    ("all_reduce", "trio", None),
    ("broadcast", "world", 1),
    ("broadcast", "dp", 1),
    ("broadcast", "trio", 2),
    ("all_gather", "world", None),
    ("all_gather", "dp", None),
    ("all_gather", "tp", None),
    ("all_gather", "trio", None),
    ("reduce_scatter", "world", None),
    ("reduce_scatter", "dp", None),
    ("reduce_scatter", "tp", None),
    ("reduce_scatter", "trio", None),
    ("reduce", "world", 3),
    ("reduce", "dp", 1),
    ("reduce", "tp", 1),
    ("gather", "world", 2),
    # root 3: no pair or trio has a group rank 3, so the root alone tells this scatter's group (with
    # root 1, a pair reads it as its own rank 1 and only timing tells them apart: unsure on a busy machine)
    ("scatter", "world", 3),
    ("scatter", "trio", 2),
    ("all_to_all", "world", None),
    ("sleep", "dp13", None),
    ("barrier", "dp", None),
    ("gather", "dp", 1),
    ("all_reduce", "world", None),
    ("sleep", "tp23", None),
    ("barrier", "tp", None),
    ("all_to_all", "tp", None),
    ("all_reduce", "world", None),
    ("barrier", "trio", None),
    ("all_reduce", "trio", None),
    ("sleep", "late", None),
    ("barrier", "world", None),
]


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


def make_subgroups(rank: int) -> dict[str, tuple[tuple[int, ...], dist.ProcessGroup | None]]:
    """Every rank creates every subgroup, in the same order; returns, per group key, the members
    of this rank's group of that kind and its handle (``None``: the world), for the groups the
    rank is in."""
    mine: dict[str, tuple[tuple[int, ...], dist.ProcessGroup | None]] = {"world": (tuple(range(GROUPS_WORLD)), None)}
    for key, member_lists in SUBGROUPS.items():
        for members in member_lists:
            group = dist.new_group(list(members))
            if rank in members:
                mine[key] = (members, group)
    return mine


def group_call(
    name: str, group: dist.ProcessGroup | None, members: tuple[int, ...], root: int | None, rank: int
) -> None:
    """Run the collective ``name`` on ``group`` (of ``members``; ``root``: a *global* rank)."""
    size = len(members)
    floats = GROUP_FLOATS[members]
    x = torch.full((floats,), float(rank))
    piece = floats // size
    if name == "all_reduce":
        dist.all_reduce(x, group=group)
    elif name == "broadcast":
        dist.broadcast(x, src=root, group=group)
    elif name == "barrier":
        dist.barrier(group=group)
    elif name == "all_gather":
        dist.all_gather([torch.empty(floats) for _ in range(size)], x, group=group)
    elif name == "reduce_scatter":
        dist.reduce_scatter_tensor(torch.empty(piece), x, group=group)
    elif name == "all_to_all":
        dist.all_to_all_single(torch.empty_like(x), x, group=group)
    elif name == "reduce":
        dist.reduce(x, dst=root, group=group)
    elif name == "gather":
        gathered = [torch.empty(floats) for _ in range(size)] if rank == root else None
        dist.gather(x, gathered, dst=root, group=group)
    elif name == "scatter":
        pieces = list(x.split(piece)) if rank == root else None
        dist.scatter(torch.empty(piece), pieces, src=root, group=group)
    else:
        raise ValueError(f"no collective {name!r}")


def group_step(rank: int, mine: dict[str, tuple[tuple[int, ...], dist.ProcessGroup | None]]) -> list[dict]:
    """Run one step of :data:`GROUP_STEP`; returns what this rank issued, in order."""
    issued = []
    for name, key, group_root in GROUP_STEP:
        if name == "sleep":
            if rank in SLEEPERS[key]:
                time.sleep(SLEEP_S)
            continue
        if key not in mine:
            continue
        members, group = mine[key]
        root = None if group_root is None else members[group_root]
        group_call(name, group, members, root, rank)
        issued.append({"call": name, "group": key, "ranks": list(members), "root": root})
    return issued


def run_groups(rank: int, out_dir: str, steps: int) -> None:
    """The ``--groups`` job (module docstring)."""
    mine = make_subgroups(rank)
    recorded: list[dict] = []
    with collect(out_dir, warmup_steps=WARMUP_STEPS, active_steps=steps - WARMUP_STEPS) as recorder:
        for step in range(steps):
            issued = group_step(rank, mine)
            if step >= WARMUP_STEPS:
                recorded += issued
            recorder.step()
    Path(out_dir, f"program.{rank}.json").write_text(json.dumps(recorded))


def run(rank: int, world: int, out_dir: str, steps: int, port: int, shape: tuple[int, int, str]) -> None:
    hidden, batch, mode = shape
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if mode == "groups":
        run_groups(rank, out_dir, steps)
        dist.barrier()
        dist.destroy_process_group()
        return
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(batch, hidden)
    with collect(out_dir, warmup_steps=WARMUP_STEPS, active_steps=steps - WARMUP_STEPS) as recorder:
        for _ in range(steps):
            optimizer.zero_grad()
            model(data).square().mean().backward()
            optimizer.step()
            if mode != "training-only":
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
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--training-only", action="store_true", help="no collectives beyond DDP's own")
    modes.add_argument(
        "--groups", action="store_true", help=f"nested process groups ({GROUPS_WORLD} ranks, no training)"
    )
    args = parser.parse_args()
    if args.steps <= WARMUP_STEPS:
        parser.error(f"--steps must be more than {WARMUP_STEPS}")
    if args.groups and args.ranks != GROUPS_WORLD:
        parser.error(f"--groups runs {GROUPS_WORLD} ranks (--ranks {GROUPS_WORLD})")
    mode = "groups" if args.groups else "training-only" if args.training_only else "training"
    shape = (args.hidden, args.batch, mode)
    mp.spawn(run, args=(args.ranks, str(args.out_dir), args.steps, args.port, shape), nprocs=args.ranks)


if __name__ == "__main__":
    main()
