"""Running a workload's ranks as processes on this machine, and watching them for hangs.

:func:`replay_workload` starts one process per rank (``torch.distributed`` with gloo, a free
localhost port), each of which creates every communicator group of the workload in the same order
(ascending group id, as ``new_group`` requires), loads its rank's program, runs ``warmup`` and then
``iterations`` iterations (a barrier before each), and sends back what it measured.

The ranks use NCCL on CUDA devices when there is one for each of them (``backend="auto"``), else
gloo on the CPU.

While they run, every process tells a shared array which issue step it is at and whether it is
waiting for communication there. When every rank still running waits and none moves for
``timeout_s`` (while some are still starting: :data:`STARTUP_TIMEOUT_S`, since importing torch on
a busy machine takes long) the launcher stops them all and raises :class:`ReplayHang`, naming for
each rank the node it waits on (a collective a peer never reaches, a receive with no send), the
way the simulator diagnoses a workload that cannot finish.

The ranks are spawned processes, which import the caller's main module: call it under
``if __name__ == "__main__":`` (the ``chakra`` command does).

Example:
    result = replay_workload("out/job", compute=ComputeMode.DURATION, iterations=3)
    result.ranks[0].step_ns    # each iteration's wall time on rank 0
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra.errors import ChakraError, ChakraInputError, PathLike
from chakra.replay.choices import REPLAY_CHECK_TOLERANCE, Backend, ComputeMode
from chakra.replay.issue import DEFAULT_MAX_BUFFER_BYTES, Issuer
from chakra.replay.measure import (
    CollectiveBandwidth,
    CommKey,
    KindTime,
    collective_bandwidth,
    comm_timings,
    kind_times,
    total_kind_times,
)
from chakra.replay.preflight import plan_replay
from chakra.replay.program import Kind, issue_program
from chakra.table import load_table
from chakra.units import NS_PER_US

#: How long every rank may stand still before the replay is declared hung (s).
DEFAULT_TIMEOUT_S = 60.0
#: How often the launcher looks at the ranks' progress (s).
POLL_S = 0.1
#: What a rank's slot in the progress array holds: the issue step, and whether it waits there.
STEP, WAITING, DONE = 0, 1, 2
SLOTS = 3
#: The step a rank reports before its first iteration: it is still starting (importing torch,
#: joining the job). Starting is not a hang: the ranks get this long for it, busy machines included.
STARTING = -1
STARTUP_TIMEOUT_S = 300.0
#: How long a stopped rank gets to exit before it is killed (s).
STOP_GRACE_S = 5.0
#: How often a rank's issuing thread offers the GIL to others (s): the backend's completion
#: callbacks need it to note when a collective completed, and Python's default, 5 ms, would late them by up to that.
GIL_SWITCH_S = 50e-6
#: The torch.distributed backends a replay runs on; ``auto``: NCCL with a CUDA device per rank, else gloo.
BACKENDS = tuple(b.value for b in Backend)


class ReplayHang(ChakraError):
    """The ranks stopped moving: ``waits`` says, per rank, the node each one is stuck at."""

    def __init__(self, waits: dict[int, str], timeout_s: float):
        self.waits = waits
        lines = "; ".join(f"rank {rank} {what}" for rank, what in sorted(waits.items()))
        super().__init__(f"the replay made no progress for {timeout_s:g} s: {lines}")


@dataclass(frozen=True)
class ReplaySettings:
    """How every rank replays (see :func:`replay_workload`)."""

    compute: ComputeMode = ComputeMode.DURATION
    compute_scale: float = 1.0
    comm: bool = True
    warmup: int = 1
    iterations: int = 3
    max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    timeline: bool = False
    backend: str = "auto"


@dataclass
class RankReplay:
    """What one rank measured: every iteration's wall, compute and waiting time (ns), the nodes it
    issued by kind and the bytes put into each kind of communication (the last iteration's), the
    fallbacks taken, compute nodes cut to the buffer bound, replayed against recorded time per node
    kind, communication timings (:func:`chakra.replay.measure.comm_timings`), and the step it is
    compared with: the recorded span (``reference`` ``"recorded"``), else the simulator's
    prediction when one was asked for (``"simulated"``, :func:`simulated_reference`)."""

    rank: int
    step_ns: list[int]
    compute_ns: list[int]
    wait_ns: list[int]
    issued: dict[str, int]
    sent_bytes: dict[str, int]
    fallbacks: dict[str, int]
    cut_nodes: int
    recorded_span_us: float | None
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # the last iteration's, if recorded
    path: str = ""  # the rank's file
    kinds: dict[str, KindTime] = field(default_factory=dict)
    comm_timings: dict[CommKey, tuple[int, float]] = field(default_factory=dict)
    backend: str = "gloo"
    device: str = "cpu"
    reference_us: float | None = None
    reference: str | None = None

    def __post_init__(self) -> None:
        if self.reference_us is None and self.recorded_span_us:
            self.reference_us, self.reference = self.recorded_span_us, "recorded"

    @property
    def median_step_us(self) -> float:
        return statistics.median(self.step_ns) / NS_PER_US

    @property
    def error(self) -> float | None:
        """Replayed median step against the reference, relative; ``None`` without one."""
        if not self.reference_us:
            return None
        return (self.median_step_us - self.reference_us) / self.reference_us

    def to_dict(self) -> dict[str, Any]:
        us = [t / NS_PER_US for t in self.step_ns]
        return {
            "rank": self.rank,
            "step_us": {"min": min(us), "median": statistics.median(us), "max": max(us), "all": us},
            "compute_us": statistics.median(self.compute_ns) / NS_PER_US,
            "wait_us": statistics.median(self.wait_ns) / NS_PER_US,
            "issued": self.issued,
            "sent_bytes": self.sent_bytes,
            "fallbacks": self.fallbacks,
            "cut_nodes": self.cut_nodes,
            "recorded_span_us": self.recorded_span_us,
            "reference_us": self.reference_us,
            "reference": self.reference,
            "error": self.error,
            "kinds": {
                name: {"count": k.count, "replayed_us": k.replayed_us, "recorded_us": k.recorded_us}
                for name, k in self.kinds.items()
            },
            "backend": self.backend,
            "device": self.device,
        }


@dataclass
class WorkloadReplay:
    prefix: str
    compute: ComputeMode
    comm: bool
    ranks: dict[int, RankReplay] = field(default_factory=dict)

    def kind_totals(self) -> dict[str, KindTime]:
        """Replayed against recorded time per node kind, all ranks added up."""
        return total_kind_times(r.kinds for r in self.ranks.values())

    def collectives(self) -> list[CollectiveBandwidth]:
        """Time and bandwidth of every kind of communication, slowest rank (nccl-tests' definitions)."""
        return collective_bandwidth(r.comm_timings for r in self.ranks.values())

    def check_failures(self, tolerance: float = REPLAY_CHECK_TOLERANCE) -> list[int]:
        """The ranks whose median step is further than ``tolerance`` (relative) from their reference,
        or that have no reference to compare with."""
        return sorted(r for r, one in self.ranks.items() if one.error is None or abs(one.error) > tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.prefix,
            "compute": self.compute.value,
            "comm": self.comm,
            "ranks": {str(r): result.to_dict() for r, result in self.ranks.items()},
            "collectives": [row.to_dict() for row in self.collectives()],
        }


def replay_workload(
    workload: PathLike,
    *,
    compute: ComputeMode = ComputeMode.DURATION,
    compute_scale: float = 1.0,
    comm: bool = True,
    warmup: int = 1,
    iterations: int = 3,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
    timeline: bool = False,
    backend: str = "auto",
) -> WorkloadReplay:
    """Replay every rank of ``workload`` in its own process (see the module's docstring); with
    ``timeline`` each rank keeps its last iteration's node spans
    (:func:`chakra.replay.timeline.write_timeline`)."""
    if backend not in BACKENDS:
        raise ChakraInputError(f"unknown backend {backend!r}", hint=f"one of {', '.join(BACKENDS)}")
    if backend == "nccl":  # refused here, before any rank starts, rather than by every rank
        choose_backend(backend, 1)
    plan = plan_replay(workload)  # refuses a bad file here, with its name, before any process starts
    ranks = sorted(plan.ranks)
    paths = {rank: Path(one.path) for rank, one in plan.ranks.items()}
    groups = plan.groups
    world = len(ranks)
    context = mp.get_context("spawn")
    progress = context.Array("q", world * SLOTS, lock=False)
    for rank in ranks:
        progress[rank * SLOTS + STEP] = STARTING
    results = context.Queue()
    port = _free_port()
    settings = ReplaySettings(compute, compute_scale, comm, warmup, iterations, max_buffer_bytes, timeout_s, timeline,
                              backend)  # fmt: skip
    processes = [
        context.Process(
            target=_rank_main,
            args=(rank, world, port, str(paths[rank]), groups, settings, progress, results),
            daemon=True,
        )
        for rank in ranks
    ]
    for process in processes:
        process.start()
    try:
        outcome = _watch(processes, progress, results, world, timeout_s, paths)
    finally:
        _stop(processes)
    replay = WorkloadReplay(plan.prefix, compute, comm)
    replay.ranks = dict(sorted(outcome.items()))
    return replay


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _watch(
    processes: list[Any], progress: Any, results: Any, world: int, timeout_s: float, paths: dict[int, Path]
) -> dict[int, RankReplay]:
    """Collect every rank's result; raise on a failed rank or when none moves for ``timeout_s``."""
    outcome: dict[int, RankReplay] = {}
    last = list(progress)
    moved_at = time.monotonic()
    while len(outcome) < world:
        while not results.empty():
            rank, payload = results.get()
            if isinstance(payload, str):
                raise ChakraError(f"rank {rank} failed: {payload}")
            outcome[rank] = payload
        now = list(progress)
        if now != last:
            last, moved_at = now, time.monotonic()
        dead = [r for r, p in enumerate(processes) if p.exitcode not in (None, 0) and r not in outcome]
        if dead:
            raise ChakraError(f"rank {dead[0]} exited with code {processes[dead[0]].exitcode}")
        running = [r for r in range(world) if r not in outcome and not now[r * SLOTS + DONE]]
        starting = any(now[r * SLOTS + STEP] == STARTING for r in running)
        if not all(now[r * SLOTS + WAITING] or now[r * SLOTS + STEP] == STARTING for r in running):
            moved_at = time.monotonic()  # a rank that computes (a long node) is not stuck
        limit = max(timeout_s, STARTUP_TIMEOUT_S) if starting else timeout_s
        if time.monotonic() - moved_at > limit:
            raise ReplayHang(_diagnose(now, world, paths, set(outcome)), limit)
        time.sleep(POLL_S)
    return outcome


def _diagnose(progress: list[int], world: int, paths: dict[int, Path], finished: set[int]) -> dict[int, str]:
    waits = {}
    for rank in range(world):
        if rank in finished or progress[rank * SLOTS + DONE]:
            waits[rank] = "finished"
            continue
        step, waiting = progress[rank * SLOTS + STEP], progress[rank * SLOTS + WAITING]
        if step == STARTING:
            waits[rank] = "is still starting (importing torch, joining the job)"
            continue
        program = issue_program(load_table(paths[rank], rank))
        if step >= len(program):
            waits[rank] = "is between iterations (waiting in the barrier before the next)"
            continue
        kind = Kind(int(program.kind[step]))
        what = f"node {int(program.ids[step])} ({program.names[step]}, {kind.name.lower()}"
        if kind in (Kind.SEND, Kind.RECV):
            what += f" {'to' if kind is Kind.SEND else 'from'} rank {int(program.peer[step])}"
        waits[rank] = ("waits for " if waiting else "is issuing ") + what + ")"
    return waits


def _stop(processes: list[Any]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def choose_backend(requested: str, world: int) -> tuple[str, str]:
    """``(backend, device kind)`` for a job of ``world`` ranks on this machine: NCCL on CUDA when
    asked or, for ``auto``, when there is a CUDA device for every rank; else gloo on the CPU."""
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    if requested == "nccl" and not torch.cuda.is_available():
        raise ChakraError("the nccl backend needs CUDA devices and this machine has none: use --backend gloo")
    if requested == "nccl" or (requested == "auto" and cuda):
        return "nccl", "cuda"
    return "gloo", "cpu"


def run_rank(
    rank: int,
    path: str,
    groups: dict[int, tuple[int, ...]],
    settings: ReplaySettings,
    tell: Callable[[int, bool], None],
    *,
    backend: str = "gloo",
    device: str = "cpu",
) -> RankReplay:
    """One rank of a joined job (``torch.distributed`` initialized with ``backend``, buffers on
    ``device``): create every group in order, run the warm-up and measured iterations, and return
    what they measured."""
    import sys

    import torch.distributed as dist

    sys.setswitchinterval(GIL_SWITCH_S)
    made = {gid: dist.new_group(list(members)) for gid, members in groups.items()}
    program = issue_program(load_table(path, rank))
    issuer = Issuer(
        program, rank, made, groups, settings.compute,
        compute_scale=settings.compute_scale, comm=settings.comm,
        max_buffer_bytes=settings.max_buffer_bytes, progress=tell, device=device,
    )  # fmt: skip
    measured = []
    total = settings.warmup + settings.iterations
    for iteration in range(total):
        tell(len(program), True)  # the barrier waits for the other ranks
        dist.barrier()
        times = issuer.run(record=settings.timeline and iteration == total - 1)
        if iteration >= settings.warmup:
            measured.append(times)
    tell(len(program), True)
    dist.barrier()
    last = measured[-1]
    comm = [t.comm for t in measured]
    sizes = {gid: len(members) for gid, members in groups.items()}
    return RankReplay(
        rank, [t.wall_ns for t in measured], [t.compute_ns for t in measured], [t.wait_ns for t in measured],
        dict(last.issued), dict(last.sent_bytes), dict(issuer.fallbacks), issuer.cut_nodes,
        program.recorded_span_us, sorted(last.spans + last.comm) if settings.timeline else [], path,
        kind_times(program, [t.compute_ns for t in measured], comm),
        comm_timings(program, sizes, dist.get_world_size(), comm), backend, device,
    )  # fmt: skip


def _rank_main(
    rank: int,
    world: int,
    port: int,
    path: str,
    groups: dict[int, tuple[int, ...]],
    settings: ReplaySettings,
    progress: Any,
    results: Any,
) -> None:
    """One rank's process: join the job on the launcher's port, run it, report."""
    try:
        import datetime

        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        # the launcher watches for hangs; the backend's own timeout only has to outlast it
        timeout = datetime.timedelta(seconds=settings.timeout_s * 4 + 60)
        backend, device = choose_backend(settings.backend, world)
        if device == "cuda":
            import torch

            device = f"cuda:{rank % torch.cuda.device_count()}"
            torch.cuda.set_device(device)
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)

        def tell(step: int, waiting: bool) -> None:
            progress[rank * SLOTS + STEP] = step
            progress[rank * SLOTS + WAITING] = int(waiting)

        result = run_rank(rank, path, groups, settings, tell, backend=backend, device=device)
        progress[rank * SLOTS + DONE] = 1
        results.put((rank, result))
        dist.destroy_process_group()
    except Exception:  # the launcher reports it with the rank; a traceback is for the developer
        results.put((rank, traceback.format_exc(limit=4).strip().splitlines()[-1]))


@dataclass
class OverlapStudy:
    """The same workload replayed three ways: whole, compute only (``--no-comm``) and communication
    only (``--compute none``). ``overlap_us`` = compute only + communication only - whole (median
    steps, µs): the time the whole replay hid by overlapping the two (negative: they slowed each
    other down, as processes sharing cores do). Per rank (:meth:`overlap_us`) a fast rank's wait for a
    slow one is in neither part, so it can come out negative on imbalanced ranks; for the job
    (:meth:`job_overlap_us`) each replay's step is its slowest rank's."""

    full: WorkloadReplay
    compute_only: WorkloadReplay
    comm_only: WorkloadReplay

    def overlap_us(self) -> dict[int, float]:
        return {
            rank: self.compute_only.ranks[rank].median_step_us
            + self.comm_only.ranks[rank].median_step_us
            - whole.median_step_us
            for rank, whole in self.full.ranks.items()
        }

    def job_overlap_us(self) -> float:
        def step_us(replay: WorkloadReplay) -> float:
            return max(r.median_step_us for r in replay.ranks.values())

        return step_us(self.compute_only) + step_us(self.comm_only) - step_us(self.full)

    def to_dict(self) -> dict[str, Any]:
        return {
            "full": self.full.to_dict(),
            "compute_only": self.compute_only.to_dict(),
            "comm_only": self.comm_only.to_dict(),
            "overlap_us": {str(r): v for r, v in self.overlap_us().items()},
            "job_overlap_us": self.job_overlap_us(),
        }


def overlap_study(
    workload: PathLike, compute: ComputeMode = ComputeMode.DURATION, run: Callable[..., WorkloadReplay] | None = None
) -> OverlapStudy:
    """Replay ``workload`` whole, compute only and communication only; ``run`` is
    :func:`replay_workload` with the options wanted (``functools.partial``)."""
    replay = run or replay_workload
    return OverlapStudy(
        replay(workload, compute=compute),
        replay(workload, compute=compute, comm=False),
        replay(workload, compute=ComputeMode.NONE),
    )
