"""Fidelity check of a converted trace: replay one rank's graph with its recorded durations.

:func:`schedule_nodes` (nodes in memory) and :func:`schedule_file` (streams an ``.et``, keeping only compact
arrays) schedule every node of one rank and compare the predicted span with the measured one.

Semantics of the replay:

* **Dependencies.** A node may start once every node it depends on (``data_deps`` and
  ``ctrl_deps`` alike) has finished. Ids missing from the file are ignored; their number is
  reported as ``missing_deps``. With duplicated ids a dependency means the last node of that id
  (as in :mod:`chakra.graph` and the C++ feeders).
* **Resources.** One op at a time per host thread and per device stream:

  - ``is_cpu_op`` true: the thread ``tid`` (thread 0 when the node has no ``tid``);
  - ``is_cpu_op`` false or absent, with a ``stream`` attribute: that stream;
  - ``is_cpu_op`` false or absent, no ``stream`` but a ``tid``: that thread (e.g. gloo
    communication work running on a CPU worker thread);
  - neither (``METADATA`` nodes, hand-made traces): no resource, the node starts when ready.

  These are the *resources* of the node table (:meth:`chakra.table.NodeTable.resource`), whose
  attributes follow the reading rules of :mod:`chakra.attrs`.
* **Durations.** The table's ``dur_ns``: ``duration_ns`` where a converter kept exact nanoseconds,
  else ``duration_micros`` x 1000. The replay computes in integer nanoseconds, so sums are exact.
* **Order on a resource.** Among the ready nodes of a free resource the one with the smallest
  recorded ``start_time_micros`` goes first, ties by id, which keeps the replay in the measured
  order where the graph allows it. A start of 0 means "not recorded" (proto3 cannot tell 0 from
  absent); such nodes go after every ready node with a start time, in the order they became ready.
  All completions at one instant (and the zero-length nodes without a resource that they
  release) are processed before any free resource picks, so a resource chooses among every node
  ready at that instant. A zero-length node on a resource ends in the next round at the same
  instant, after the other free resources have picked.
* **Time.** The replay starts at 0; ``start_us`` / ``end_us`` are relative µs per file position.
  ``measured_span_us`` is ``max(start + duration) - min(start)`` over the nodes with a recorded
  start (duration as in the replay), ``None`` when no node has one.

A dependency cycle leaves nodes that never become ready: :class:`chakra.graph.CycleError`. The
schedule of a table is computed once (:func:`scheduled_starts_ns`) and shared by every analysis of it.

The scheduler is an event-driven list scheduler: a heap of completion events, one heap of ready
nodes per resource; O((N + E) log N), iterative, over compact int arrays (no per-node objects).

Example:
    result = schedule_file("llama.0.et")
    result.predicted_span_us, result.measured_span_us, result.error
"""

from __future__ import annotations

import heapq
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from chakra.graph import TraceGraph, cycle_error
from chakra.schema.protobuf.et_def_pb2 import Node
from chakra.table import NodeTable, load_table, table_from_nodes
from chakra.units import NS_PER_US

#: The key of a table's scheduled starts among what is derived from it (:meth:`NodeTable.derived`).
SCHEDULED_STARTS = "scheduled_starts_ns"


@dataclass
class ScheduleResult:
    """Outcome of :func:`schedule_nodes`. Times in µs; arrays are indexed by file position.

    * ``predicted_span_us``: makespan of the replay (last end - first start), 0 for no nodes
    * ``measured_span_us``: last recorded end - first recorded start, ``None`` without start times
    * ``nodes``: nodes replayed; ``resources``: distinct threads and streams they use
    * ``start_us`` / ``end_us`` (float64): replayed start and end of each node, from 0
    * ``missing_deps``: dependencies on ids not in the trace (ignored by the replay)
    """

    predicted_span_us: float
    measured_span_us: float | None
    nodes: int
    resources: int
    start_us: np.ndarray
    end_us: np.ndarray
    missing_deps: int = 0

    @property
    def error(self) -> float | None:
        """:func:`span_error` of the replay."""
        return span_error(self.predicted_span_us, self.measured_span_us)

    def to_dict(self) -> dict[str, object]:
        """The scalars, JSON-ready (the per-node arrays are left out: they can be a million long)."""
        return {
            "predicted_span_us": self.predicted_span_us,
            "measured_span_us": self.measured_span_us,
            "error": self.error,
            "nodes": self.nodes,
            "resources": self.resources,
            "missing_deps": self.missing_deps,
        }


def span_error(predicted_us: float, measured_us: float | None) -> float | None:
    """Relative error ``(predicted - measured) / measured``; ``None`` without a (non-zero) measurement.

    >>> span_error(105.0, 100.0), span_error(1.0, None)
    (0.05, None)
    """
    if not measured_us:
        return None
    return (predicted_us - measured_us) / measured_us


def schedule_nodes(nodes: Iterable[Node], *, path: str | os.PathLike[str] | None = None) -> ScheduleResult:
    """Replay the nodes of one rank (any order) with their recorded durations; see the module doc.

    ``path`` only names the file in errors.
    """
    return schedule_table(table_from_nodes(nodes, path=path))


def schedule_file(path: str | os.PathLike[str]) -> ScheduleResult:
    """Stream ``path`` (plain, ``.gz`` or ``.zst``) into its node table and replay it."""
    return schedule_table(load_table(path))


def schedule_table(table: NodeTable) -> ScheduleResult:
    """Replay one rank's table (see the module doc)."""
    graph = table.graph
    dur_ns = table.dur_ns
    start_ns = scheduled_starts_ns(table)
    end_ns = start_ns + dur_ns
    n = graph.num_nodes
    predicted_us = float(end_ns.max() - start_ns.min()) / NS_PER_US if n else 0.0
    return ScheduleResult(
        predicted_span_us=predicted_us,
        measured_span_us=_measured_span_us(graph.start_us, dur_ns),
        nodes=n,
        resources=table.num_resources,
        start_us=start_ns.astype(np.float64) / NS_PER_US,
        end_us=end_ns.astype(np.float64) / NS_PER_US,
        missing_deps=len(graph.missing_deps),
    )


def scheduled_starts_ns(table: NodeTable) -> np.ndarray:
    """Scheduled start of every position of ``table`` in ns from 0, by :func:`schedule_starts` over
    its resources and durations; computed once per table and kept on it (read-only)."""
    return table.derived(SCHEDULED_STARTS, lambda: _scheduled_starts_ns(table))


def _scheduled_starts_ns(table: NodeTable) -> np.ndarray:
    found = schedule_starts(
        table.graph, int_array(table.resource()), table.num_resources, int_array(table.dur_ns), table.path
    )
    found.setflags(write=False)
    return found


def _measured_span_us(recorded_start_us: np.ndarray, dur_ns: np.ndarray) -> float | None:
    """``max(start + dur) - min(start)`` over nodes with a recorded start (non-zero), in µs."""
    has_start = recorded_start_us > 0
    if not has_start.any():
        return None
    starts = recorded_start_us[has_start]
    first_us = starts.min()
    # relative to the first start, so epoch-sized time stamps cannot overflow in ns
    rel_end_ns = (starts - first_us).astype(np.int64) * NS_PER_US + dur_ns[has_start]
    return float(rel_end_ns.max()) / NS_PER_US


def _priorities(graph: TraceGraph) -> array:
    """Per position, the rank of ``(recorded start, id, position)`` among nodes with a start,
    or -1 for nodes without one (they are ranked when they become ready)."""
    n = graph.num_nodes
    prio = np.full(n, -1, dtype=np.int64)
    timed = np.flatnonzero(graph.start_us > 0)
    if len(timed):
        order = np.lexsort((graph.ids[timed], graph.start_us[timed]))  # stable: position breaks ties
        prio[timed[order]] = np.arange(len(timed), dtype=np.int64)
    return int_array(prio)


def int_array(values: np.ndarray) -> array:
    """A compact ``array('q')`` copy (indexing it yields Python ints, unlike numpy scalars)."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


def schedule_starts(
    graph: TraceGraph, resource: array, num_resources: int, dur_ns: array, path: str | os.PathLike[str] | None
) -> np.ndarray:
    """Replayed start of every position, in ns from 0 (the list scheduler of the module doc).

    Heap entries are single ints ``key * n + position`` (faster to compare than tuples):
    completion events are keyed by end time, ready nodes by priority.
    """
    n = graph.num_nodes
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    scale = n
    child_ptr_np, child_pos_np = graph.children
    child_ptr = int_array(child_ptr_np)
    child_pos = int_array(child_pos_np)
    remaining = int_array(np.diff(graph.dep_ptr))
    prio = _priorities(graph)
    start = array("q", bytes(8 * n))
    started = 0
    ready: list[list[int]] = [[] for _ in range(num_resources)]
    busy = [False] * num_resources
    events: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    # nodes without a recorded start are ranked after all timed ones, in the order they become ready
    untimed_rank = n

    touched: list[int] = []  # resources that freed up or got ready nodes at the current instant
    released: list[int] = np.flatnonzero(np.diff(graph.dep_ptr) == 0).tolist()  # nodes whose parents are done
    now = 0
    while True:
        # complete every event at this instant (zero-length ones they release too) before any resource picks
        limit = (now + 1) * scale
        while True:
            for c in released:  # a node without a resource starts at once; the others wait for theirs
                rc = resource[c]
                if rc < 0:
                    start[c] = now
                    started += 1
                    push(events, (now + dur_ns[c]) * scale + c)
                else:
                    p = prio[c]
                    if p < 0:
                        p = untimed_rank
                        untimed_rank += 1
                    push(ready[rc], p * scale + c)
                    touched.append(rc)
            released = []
            if not (events and events[0] < limit):
                break
            pos = pop(events) - now * scale
            r = resource[pos]
            if r >= 0:
                busy[r] = False
                touched.append(r)
            for k in range(child_ptr[pos], child_ptr[pos + 1]):
                c = child_pos[k]
                left = remaining[c] - 1
                remaining[c] = left
                if not left:
                    released.append(c)
        # dispatch: every touched free resource starts its best ready node now
        for r in touched:
            if not busy[r]:
                heap = ready[r]
                if heap:
                    pos = pop(heap) % scale
                    busy[r] = True
                    start[pos] = now
                    started += 1
                    push(events, (now + dur_ns[pos]) * scale + pos)
        touched.clear()
        if not events:
            break
        now = events[0] // scale

    if started < n:
        ran = np.flatnonzero(np.frombuffer(remaining, dtype=np.int64) == 0)
        raise cycle_error(graph, ran, path=path, what=" in the replay")
    return np.frombuffer(start, dtype=np.int64).copy()
