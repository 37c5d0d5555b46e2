"""Simulate a workload on disk: find its rank files and groups, load them, run the engine.

The steps apart (:func:`find_workload`, :func:`check_network_covers`, :func:`load_programs`) are
for callers that run one workload many times, as sweeps do: load once, simulate at every point.

Example:
    from chakra.sim.config import load_network, load_system
    result = simulate_workload("out/job", load_system("sys.json"), load_network("net.yml"))
    print("\\n".join(result.astra_lines()))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.paths import groups_path
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.engine import simulate
from chakra.sim.matching import check_groups
from chakra.sim.program import RankProgram, load_rank
from chakra.sim.results import SimResult
from chakra.trace import TraceSet

#: ASTRA-sim's convention: a comm-group path containing this means "no groups" (§1).
NO_GROUPS_MARKER = "empty"
#: How many missing ranks an error lists.
MISSING_SHOWN = 10


@dataclass(frozen=True)
class WorkloadFiles:
    """A workload on disk: its prefix, each rank's file, and its communicator groups (group id -> ranks)
    with the file they came from."""

    prefix: Path
    ranks: dict[int, Path]
    comm_groups: dict[int, list[int]] | None
    comm_groups_path: Path | None = None


def find_workload(workload: PathLike, comm_groups_path: PathLike | None = None) -> WorkloadFiles:
    """The rank files of ``PREFIX.{rank}.et`` (a prefix, a folder or one file) and the groups:
    ``comm_groups_path`` (a path containing ``empty``: none), else ``PREFIX.comm_groups.json`` beside them."""
    traces = TraceSet.discover(Path(workload))
    if comm_groups_path is not None and NO_GROUPS_MARKER in str(comm_groups_path):
        return WorkloadFiles(traces.prefix, dict(traces.ranks), None)
    if comm_groups_path is not None:
        groups = {k: list(v) for k, v in CommGroups.read(comm_groups_path).items()}
        return WorkloadFiles(traces.prefix, dict(traces.ranks), groups, Path(comm_groups_path))
    beside = groups_path(traces.prefix) if traces.comm_groups is not None else None
    return WorkloadFiles(traces.prefix, dict(traces.ranks), traces.comm_groups, beside)


def check_network_covers(files: WorkloadFiles, network: NetworkConfig) -> None:
    """Raise unless every NPU of ``network`` has its rank file (ASTRA-sim stops on a missing one) and
    every group's ranks are NPUs of the network."""
    check_groups(files.comm_groups, network.num_npus, files.comm_groups_path)
    missing = [r for r in range(network.num_npus) if r not in files.ranks]
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (" ..." if len(missing) > MISSING_SHOWN else "")
        raise ChakraInputError(
            f"the network has {network.num_npus} NPUs but ranks {shown} have no ET file",
            path=files.prefix,
            hint="give every rank its PREFIX.{rank}.et, or a network whose npus_count matches the workload",
        )


def load_programs(
    files: WorkloadFiles, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> dict[int, RankProgram]:
    """Every rank's program, by rank (``cpu_per_thread``/``gpu_per_stream``: see :func:`load_rank`)."""
    return {
        rank: load_rank(path, rank, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream)
        for rank, path in sorted(files.ranks.items())
    }


def simulate_workload(
    workload: str | Path,
    system: SystemConfig,
    network: NetworkConfig,
    *,
    remote_memory: RemoteMemoryConfig | None = None,
    comm_groups_path: str | Path | None = None,
    compute_scale: float = 1.0,
    keep_intervals: bool = False,
    cpu_per_thread: bool = False,
    gpu_per_stream: bool = False,
) -> SimResult:
    """Run ``PREFIX.{rank}.et`` (a prefix, a folder or one file) on ``system``/``network``.

    Every rank the network has must have its file; groups come from ``comm_groups_path``, else
    ``PREFIX.comm_groups.json`` beside the files (:func:`find_workload`).
    ``cpu_per_thread``/``gpu_per_stream``: see :func:`chakra.sim.program.load_rank`.
    """
    files = find_workload(workload, comm_groups_path)
    check_network_covers(files, network)
    return simulate(
        load_programs(files, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream),
        system,
        network,
        remote_memory=remote_memory,
        comm_groups=files.comm_groups,
        compute_scale=compute_scale,
        keep_intervals=keep_intervals,
    )
