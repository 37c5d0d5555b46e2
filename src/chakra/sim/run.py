"""Simulate a workload on disk: find its rank files and groups, load them, run the engine.

Example:
    >>> from chakra.sim.config import load_network, load_system                  # doctest: +SKIP
    >>> result = simulate_workload("out/job", load_system("sys.json"), load_network("net.yml"))
    >>> print("\\n".join(result.astra_lines()))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError
from chakra.sim.engine import SimResult, load_rank, simulate
from chakra.trace import TraceSet, read_comm_groups

#: ASTRA-sim's convention: a comm-group path containing this means "no groups" (§1).
NO_GROUPS_MARKER = "empty"


def simulate_workload(
    workload: str | Path,
    system: Any,
    network: Any,
    *,
    remote_memory: Any = None,
    comm_groups_path: str | Path | None = None,
    compute_scale: float = 1.0,
    keep_intervals: bool = False,
    cpu_per_thread: bool = False,
    gpu_per_stream: bool = False,
) -> SimResult:
    """Run ``PREFIX.{rank}.et`` (a prefix, a folder or one file) on ``system``/``network``.

    Every rank the network has must have its file (ASTRA-sim stops on a missing one); groups come
    from ``comm_groups_path``, else ``PREFIX.comm_groups.json`` beside the files.
    ``cpu_per_thread``/``gpu_per_stream``: see :func:`chakra.sim.engine.load_rank`.
    """
    traces = TraceSet.discover(workload)
    missing = [r for r in range(network.num_npus) if r not in traces.ranks]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise ChakraInputError(
            f"the network has {network.num_npus} NPUs but ranks {shown} have no ET file",
            path=traces.prefix,
            hint="give every rank its PREFIX.{rank}.et, or a network whose npus_count matches the workload",
        )
    if comm_groups_path is not None and NO_GROUPS_MARKER in str(comm_groups_path):
        groups: dict[int, list[int]] | None = None
    elif comm_groups_path is not None:
        groups = read_comm_groups(comm_groups_path)
    else:
        groups = traces.comm_groups
    programs = {
        rank: load_rank(path, rank, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream)
        for rank, path in sorted(traces.ranks.items())
    }
    return simulate(
        programs,
        system,
        network,
        remote_memory=remote_memory,
        comm_groups=groups,
        compute_scale=compute_scale,
        keep_intervals=keep_intervals,
    )
