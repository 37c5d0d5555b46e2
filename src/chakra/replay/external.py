"""Replaying under a launcher that starts the ranks itself (``torchrun``, a cluster's job script).

When the environment names this process's place in a job (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``, as ``torchrun`` sets them), ``chakra replay`` runs that one rank
in this process instead of starting its own: :func:`replay_this_rank` joins the job (gloo), runs
the rank as :func:`chakra.replay.launch.run_rank` does for the local launcher (NCCL on the
process's CUDA device, ``LOCAL_RANK``, when there is one, else gloo), and gathers every rank's
results on rank 0, which alone reports. The launcher's own timeout is the hang guard there
(no progress array spans machines); gloo's is ``timeout_s``.

Example (two ranks on this machine):
    torchrun --nproc-per-node 2 -m chakra replay out/job --compute none
"""

from __future__ import annotations

import datetime
import os

from chakra.errors import ChakraInputError, PathLike
from chakra.replay.launch import RankReplay, ReplaySettings, WorkloadReplay, choose_backend, run_rank
from chakra.workload import open_workload

#: What a launcher sets for every rank it starts (torch.distributed's env:// initialization).
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def under_launcher() -> bool:
    """Whether this process was started as one rank of a job."""
    return all(name in os.environ for name in LAUNCHER_VARIABLES)


def replay_this_rank(workload: PathLike, settings: ReplaySettings) -> WorkloadReplay | None:
    """Run this process's rank of ``workload``; rank 0 returns every rank's results, others ``None``."""
    import torch.distributed as dist

    traces = open_workload(workload, whole=True)
    traces.require_rank_files("replay")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != len(traces.files) or rank not in traces.files:
        raise ChakraInputError(
            f"the launcher started {world} ranks; the workload has {len(traces.files)}",
            path=traces.prefix,
            hint="start one process per rank file (torchrun --nproc-per-node N)",
        )
    groups = {gid: tuple(members) for gid, members in sorted((traces.comm_groups or {}).items())}
    # a launcher starts a node's ranks there: a CUDA device for each of this node's ranks is enough
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    backend, device = choose_backend(settings.backend, local_world)
    if device == "cuda":
        import torch

        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=settings.timeout_s))
    try:
        result = run_rank(rank, str(traces.files[rank]), groups, settings, lambda step, waiting: None,
                          backend=backend, device=device)  # fmt: skip
        gathered: list[RankReplay | None] = [None] * world
        dist.gather_object(result, gathered if rank == 0 else None, dst=0)
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    replay = WorkloadReplay(str(traces.prefix), settings.compute, settings.comm)
    replay.ranks = {r.rank: r for r in gathered if r is not None}
    return replay
