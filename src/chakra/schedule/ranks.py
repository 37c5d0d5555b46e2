"""Replay every rank of a workload together with their recorded durations, sends matched to receives.

:func:`chakra.schedule.rank.schedule_table` replays one rank alone: its communication takes the
time it was recorded with. :func:`schedule_ranks` replays all ranks on one clock, by the same list
scheduler (:func:`chakra.schedule.rank.schedule_starts`) over the union of their graphs:

* every node takes its recorded duration on its rank's resources (one op at a time per thread and
  per stream, as the one-rank replay);
* a send and a receive pair up on (source, destination, tag, bytes) in file order, as ASTRA-sim
  pairs them (``comm_src`` of a send and ``comm_dst`` of a receive default to their own rank): the
  receive depends on its send and takes no time of its own, so the receiver's dependents wait for
  the message to have arrived, the send's duration being the transfer's;
* collectives take their recorded time on each rank, unsynchronized (their members are not
  matched here: ``chakra simulate`` models them).

This is the fidelity check of producers whose transfers carry their time (FlexFlow's task graphs):
with the ranks' recorded starts on one clock, ``measured_span_us`` is the recorded makespan.

Example:
    result = schedule_ranks(chakra.open("out/mlp").tables)
    result.predicted_span_us, result.measured_span_us, result.matched
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from chakra.chunks import MISSING
from chakra.graph import TraceGraph
from chakra.schedule.rank import int_array, schedule_starts, span_error
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE
from chakra.table import NodeTable
from chakra.units import NS_PER_US


@dataclass
class WorkloadSchedule:
    """Times in µs from the replay's 0 (the first start of any rank): the makespan over every rank,
    the recorded one (``None`` without recorded starts), each rank's replayed node starts and ends
    (by file position), and how many sends found their receive."""

    predicted_span_us: float
    measured_span_us: float | None
    start_us: dict[int, np.ndarray]
    end_us: dict[int, np.ndarray]
    matched: int
    unmatched: int

    @property
    def error(self) -> float | None:
        """:func:`chakra.schedule.rank.span_error` of the replay."""
        return span_error(self.predicted_span_us, self.measured_span_us)

    def to_dict(self) -> dict[str, object]:
        return {
            "predicted_span_us": self.predicted_span_us, "measured_span_us": self.measured_span_us,
            "error": self.error, "matched": self.matched, "unmatched": self.unmatched,
            "ranks": {rank: float(ends.max()) if len(ends) else 0.0 for rank, ends in self.end_us.items()},
        }  # fmt: skip


def schedule_ranks(tables: Mapping[int, NodeTable]) -> WorkloadSchedule:
    """Replay ``tables`` (rank -> its node table) together (see the module docstring)."""
    ranks = sorted(tables)
    if not ranks:
        return WorkloadSchedule(0.0, None, {}, {}, 0, 0)
    offsets = np.cumsum([0] + [tables[r].graph.num_nodes for r in ranks])
    sends, receives = _messages(tables, ranks, offsets)
    pairs = [(s, r) for key in sends.keys() & receives.keys() for s, r in zip(sends[key], receives[key], strict=False)]
    matched = len(pairs)
    unmatched = sum(len(v) for v in sends.values()) + sum(len(v) for v in receives.values()) - 2 * matched
    graph = _union_graph(tables, ranks, offsets, pairs)
    recorded_ns = np.concatenate([tables[r].dur_ns for r in ranks]).astype(np.int64)
    dur_ns = recorded_ns.copy()
    dur_ns[np.array([r for _, r in pairs], dtype=np.int64)] = 0  # a matched receive ends when its message arrived
    resource, num_resources = _resources(tables, ranks)
    start_ns = schedule_starts(graph, int_array(resource), num_resources, int_array(dur_ns), None)
    end_ns = start_ns + dur_ns
    total = len(start_ns)
    predicted = float(end_ns.max() - start_ns.min()) / NS_PER_US if total else 0.0
    starts, ends = {}, {}
    for k, rank in enumerate(ranks):
        part = slice(int(offsets[k]), int(offsets[k + 1]))
        starts[rank] = start_ns[part].astype(np.float64) / NS_PER_US
        ends[rank] = end_ns[part].astype(np.float64) / NS_PER_US
    return WorkloadSchedule(predicted, _measured_us(graph.start_us, recorded_ns), starts, ends, matched, unmatched)


def _messages(
    tables: Mapping[int, NodeTable], ranks: list[int], offsets: np.ndarray
) -> tuple[dict[tuple[int, ...], list[int]], dict[tuple[int, ...], list[int]]]:
    """Global positions of sends and receives by (source, destination, tag, bytes), in file order."""
    sends: dict[tuple[int, ...], list[int]] = defaultdict(list)
    receives: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for k, rank in enumerate(ranks):
        table = tables[rank]
        comm = table.comm
        types = table.graph.node_type[comm.pos]
        for pos, kind, src, dst, tag, size in zip(
            comm.pos.tolist(), types.tolist(), comm.src.tolist(), comm.dst.tolist(), comm.tag.tolist(),
            comm.size.tolist(), strict=True,
        ):  # fmt: skip
            if kind == COMM_SEND_NODE:
                sends[(rank if src == MISSING else src, dst, tag, size)].append(int(offsets[k]) + pos)
            elif kind == COMM_RECV_NODE:
                receives[(src, rank if dst == MISSING else dst, tag, size)].append(int(offsets[k]) + pos)
    return sends, receives


def _union_graph(
    tables: Mapping[int, NodeTable], ranks: list[int], offsets: np.ndarray, pairs: list[tuple[int, int]]
) -> TraceGraph:
    """Every rank's graph side by side, each receive depending on its send as well."""
    graphs = [tables[r].graph for r in ranks]
    n = int(offsets[-1])
    placed = list(zip(graphs, offsets[:-1].tolist(), strict=True))
    children = [np.repeat(np.arange(g.num_nodes, dtype=np.int64) + off, np.diff(g.dep_ptr)) for g, off in placed]
    child = np.concatenate([*children, np.array([r for _, r in pairs], dtype=np.int64)])
    parents = [g.dep_pos.astype(np.int64) + off for g, off in placed]
    parent = np.concatenate([*parents, np.array([s for s, _ in pairs], dtype=np.int64)])
    kind = np.concatenate([g.dep_kind for g in graphs] + [np.zeros(len(pairs), dtype=np.uint8)])
    order = np.argsort(child, kind="stable")
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=dep_ptr[1:])
    return TraceGraph(
        ids=np.concatenate([g.ids for g in graphs]),
        node_type=np.concatenate([g.node_type for g in graphs]),
        dur_us=np.concatenate([g.dur_us for g in graphs]),
        start_us=np.concatenate([g.start_us for g in graphs]),
        dep_ptr=dep_ptr,
        dep_pos=parent[order],
        dep_kind=kind[order],
    )


def _resources(tables: Mapping[int, NodeTable], ranks: list[int]) -> tuple[np.ndarray, int]:
    """Each node's resource, numbered across ranks (-1: none)."""
    parts: list[np.ndarray] = []
    total = 0
    for rank in ranks:
        table = tables[rank]
        resource = table.resource()
        parts.append(np.where(resource >= 0, resource + total, -1))
        total += table.num_resources
    return np.concatenate(parts), total


def _measured_us(start_us: np.ndarray, dur_ns: np.ndarray) -> float | None:
    """The recorded makespan over every rank (recorded starts on one clock), µs."""
    timed = start_us > 0
    if not timed.any():
        return None
    first = start_us[timed].min()
    ends = (start_us[timed] - first).astype(np.int64) * NS_PER_US + dur_ns[timed]
    return float(ends.max()) / NS_PER_US
