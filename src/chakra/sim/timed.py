"""A simulated run as a workload: every node at the start and for the duration the simulator gave it.

``chakra simulate --timed OUT`` writes the simulated workload's nodes, unchanged but for their
times, to ``OUT.{rank}.et`` (and the groups file beside them), so ``chakra analyze``, ``report``
and ``viz`` answer for the simulated run as for a recording: a generated workload, whose
collectives carry no duration, then shows its simulated communication, exposed time and critical
path. Times:

* ``start_time_micros`` is the simulated start in µs plus :data:`ORIGIN_US`: a start of 0 means
  "not recorded" in the format (proto3 cannot tell 0 from absent), and the simulation starts at 0.
  Analyses measure from the first start, so the offset cancels.
* ``duration_micros`` is the simulated duration in µs (rounded), and ``duration_ns`` the exact ns
  (the node table reads it first).
* The metadata says where the times come from (``chakra_timing``: ``simulated``, with the system
  and network files).

Nodes the simulation did not run keep no start (0); their number is returned.

Example:
    result = simulate_workload("out/job", system, network, keep_intervals=True)
    write_timed_workload(result, "out/job", "sim/job")
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from chakra import io
from chakra.attrs import TIMING_ATTR, TIMING_SIMULATED, set_attr
from chakra.errors import ChakraInputError, PathLike
from chakra.paths import groups_path
from chakra.sim.results import SimResult
from chakra.units import NS_PER_US
from chakra.workload import open_workload
from chakra.workload_writer import WorkloadWriter

#: Added to every simulated start (µs): the format reads a start of 0 as "not recorded".
ORIGIN_US = 1


@dataclass
class TimedWorkload:
    """What :func:`write_timed_workload` wrote: the prefix, the ranks, and the nodes per rank the
    simulation did not run (left without a start)."""

    prefix: Path
    ranks: int
    unrun: dict[int, int]


def write_timed_workload(result: SimResult, source: PathLike, out_prefix: PathLike, *, note: str = "") -> TimedWorkload:
    """Write the workload at ``source`` to ``out_prefix.{rank}.et`` with each node's simulated start
    and duration from ``result`` (simulated with ``keep_intervals=True``); ``note`` is kept in the
    metadata beside ``chakra_timing`` (the system and network it ran on)."""
    if result.intervals is None:
        raise ChakraInputError("the simulation kept no intervals", hint="simulate with keep_intervals=True")
    traces = open_workload(source, whole=True)
    traces.require_rank_files("writing simulated times")
    unrun: dict[int, int] = {}
    with WorkloadWriter(out_prefix) as writer:
        for rank, path in sorted(traces.files.items()):
            metadata, nodes = io.read(path)
            by_id: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for node_id, start_ns, end_ns, _ in sorted(result.intervals.get(rank, []), key=lambda i: i[1]):
                by_id[node_id].append((start_ns, end_ns))
            taken: dict[int, int] = defaultdict(int)  # a duplicated id: its intervals in start order
            missing = 0
            for node in nodes:
                runs = by_id.get(node.id, [])
                if taken[node.id] >= len(runs):
                    node.start_time_micros = 0
                    missing += 1
                    continue
                start_ns, end_ns = runs[taken[node.id]]
                taken[node.id] += 1
                node.start_time_micros = ORIGIN_US + start_ns // NS_PER_US
                node.duration_micros = round((end_ns - start_ns) / NS_PER_US)
                set_attr(node, "duration_ns", end_ns - start_ns)
            metadata.attr.add(name=TIMING_ATTR, string_val=TIMING_SIMULATED + (f": {note}" if note else ""))
            writer.write_nodes(rank, nodes, metadata)
            if missing:
                unrun[rank] = missing
        source_groups = groups_path(traces.prefix)
        if source_groups.exists():
            writer.groups_file = source_groups
    return TimedWorkload(Path(out_prefix), len(traces.files), unrun)
