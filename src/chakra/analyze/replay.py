"""Fidelity check of a converted trace: replay one rank's graph with its recorded durations.

:func:`replay` (nodes in memory) and :func:`replay_file` (streams an ``.et``, keeping only compact
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

  Attributes are read as FeederV3 reads them: the first attribute of a name, any integer-like
  member (:func:`chakra.attrs.flag_value`, :func:`chakra.attrs.int_value`); a value of another
  family counts as absent.
* **Durations.** ``duration_micros`` (µs), or ``duration_ns / 1000`` when the node has an integer
  attribute ``duration_ns`` (converters may keep exact nanoseconds); a negative ``duration_ns`` is
  ignored. The replay computes in integer nanoseconds, so sums are exact.
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

A dependency cycle leaves nodes that never become ready: :class:`chakra.errors.ChakraInputError`.

The scheduler is an event-driven list scheduler: a heap of completion events, one heap of ready
nodes per resource; O((N + E) log N), iterative, over compact int arrays (no per-node objects).

Example:
    >>> result = replay_file("llama.0.et")                 # doctest: +SKIP
    >>> result.predicted_span_us, result.measured_span_us, result.error
"""

from __future__ import annotations

import heapq
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from chakra import io
from chakra.attrs import flag_value, int_value
from chakra.errors import ChakraInputError
from chakra.graph import GraphBuilder, TraceGraph
from chakra.schema.protobuf.et_def_pb2 import Node

NS_PER_US = 1000

#: ``tid`` of a CPU op that records none (the main thread).
DEFAULT_TID = 0

#: Resource index of a node without thread or stream: it never waits for a resource.
NO_RESOURCE = -1

#: Resource kinds, the first element of a resource key ``(kind, number)``.
THREAD, STREAM = "thread", "stream"

#: Ids of never-run nodes quoted in the cycle error (the full list can be a million long).
CYCLE_EXAMPLE_IDS = 5

#: Largest duration the replay accepts, in ns (int64 time stamps must hold the sum of a path).
MAX_DUR_NS = (1 << 62) - 1

_IS_CPU_OP, _TID, _STREAM, _DURATION_NS = "is_cpu_op", "tid", "stream", "duration_ns"


@dataclass
class ReplayResult:
    """Outcome of :func:`replay`. Times in µs; arrays are indexed by file position.

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
        """Relative error ``(predicted - measured) / measured``; ``None`` without a (non-zero) measurement."""
        if not self.measured_span_us:
            return None
        return (self.predicted_span_us - self.measured_span_us) / self.measured_span_us

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


@dataclass
class _ReplayInputs:
    """What the replay keeps of each node: the graph arrays, resource index and duration in ns."""

    graph: TraceGraph
    resource: array
    dur_ns: array
    num_resources: int


def _collect(nodes: Iterable[Node]) -> _ReplayInputs:
    """One pass over ``nodes`` into typed arrays (the messages are not kept).

    A hot loop over a million nodes: locals instead of attribute lookups, no per-node objects.
    """
    builder = GraphBuilder()
    resource = array("q")
    dur_ns_arr = array("q")
    resource_index: dict[tuple[str, int], int] = {}
    add_graph, add_resource, add_dur = builder.add, resource.append, dur_ns_arr.append
    for node in nodes:
        add_graph(node)
        is_cpu: bool | None = None
        tid = stream = dur_ns = None
        seen_tid = seen_stream = seen_dur = False
        for attr in node.attr:
            # the first attribute of a name is the one consumers read
            name = attr.name
            if name == _IS_CPU_OP:
                if is_cpu is None:
                    is_cpu = flag_value(attr)
            elif name == _TID:
                if not seen_tid:
                    seen_tid, tid = True, int_value(attr)
            elif name == _STREAM:
                if not seen_stream:
                    seen_stream, stream = True, int_value(attr)
            elif name == _DURATION_NS and not seen_dur:
                seen_dur, dur_ns = True, int_value(attr)
        key: tuple[str, int] | None
        if is_cpu:
            key = (THREAD, DEFAULT_TID if tid is None else tid)
        elif stream is not None:
            key = (STREAM, stream)
        elif tid is not None:
            key = (THREAD, tid)
        else:
            key = None
        if key is None:
            add_resource(NO_RESOURCE)
        else:
            index = resource_index.get(key)
            if index is None:
                index = resource_index[key] = len(resource_index)
            add_resource(index)
        if dur_ns is None or dur_ns < 0:
            dur_ns = node.duration_micros * NS_PER_US
        if dur_ns > MAX_DUR_NS:
            raise ChakraInputError(
                f"node {node.id}: duration of {dur_ns} ns is not a plausible time",
                hint="check duration_micros / duration_ns of this node",
            )
        add_dur(dur_ns)
    return _ReplayInputs(builder.build(), resource, dur_ns_arr, len(resource_index))


def replay(nodes: Iterable[Node], *, path: str | os.PathLike[str] | None = None) -> ReplayResult:
    """Replay the nodes of one rank (any order) with their recorded durations; see the module doc.

    ``path`` only names the file in errors.
    """
    return _replay_inputs(_collect(nodes), path)


def replay_file(path: str | os.PathLike[str]) -> ReplayResult:
    """Stream ``path`` (plain, ``.gz`` or ``.zst``) and replay it, keeping only compact arrays."""
    return replay(io.stream(path), path=path)


def _replay_inputs(inputs: _ReplayInputs, path: str | os.PathLike[str] | None) -> ReplayResult:
    graph = inputs.graph
    dur_ns = np.frombuffer(inputs.dur_ns, dtype=np.int64) if len(inputs.dur_ns) else np.zeros(0, dtype=np.int64)
    start_ns = schedule_starts(graph, inputs.resource, inputs.num_resources, inputs.dur_ns, path)
    start_us = start_ns.astype(np.float64) / NS_PER_US
    end_ns = start_ns + dur_ns
    end_us = end_ns.astype(np.float64) / NS_PER_US
    n = graph.num_nodes
    predicted_us = float(end_ns.max() - start_ns.min()) / NS_PER_US if n else 0.0
    return ReplayResult(
        predicted_span_us=predicted_us,
        measured_span_us=_measured_span_us(graph.start_us, dur_ns),
        nodes=n,
        resources=inputs.num_resources,
        start_us=start_us,
        end_us=end_us,
        missing_deps=len(graph.missing_deps),
    )


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
    return _int_array(prio)


def _int_array(values: np.ndarray) -> array:
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
    child_ptr_np, child_pos_np = graph.children_csr()
    child_ptr = _int_array(child_ptr_np)
    child_pos = _int_array(child_pos_np)
    remaining = _int_array(np.diff(graph.dep_ptr))
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
    now = 0
    for pos in np.flatnonzero(np.diff(graph.dep_ptr) == 0).tolist():
        r = resource[pos]
        if r < 0:
            started += 1
            push(events, dur_ns[pos] * scale + pos)  # starts at 0
        else:
            p = prio[pos]
            if p < 0:
                p = untimed_rank
                untimed_rank += 1
            push(ready[r], p * scale + pos)
            touched.append(r)

    while True:
        # complete every event at this instant (zero-length ones they release too) before any resource picks
        limit = (now + 1) * scale
        while events and events[0] < limit:
            pos = pop(events) - now * scale
            r = resource[pos]
            if r >= 0:
                busy[r] = False
                touched.append(r)
            for k in range(child_ptr[pos], child_ptr[pos + 1]):
                c = child_pos[k]
                left = remaining[c] - 1
                remaining[c] = left
                if left:
                    continue
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
        never = np.flatnonzero(np.frombuffer(remaining, dtype=np.int64) > 0)
        examples = ", ".join(str(i) for i in graph.ids[never[:CYCLE_EXAMPLE_IDS]].tolist())
        more = ", ..." if len(never) > CYCLE_EXAMPLE_IDS else ""
        raise ChakraInputError(
            f"replay stuck: {n - started} nodes never ran, waiting on a dependency cycle (ids {examples}{more})",
            path=path,
            hint="run chakra validate to find the cycle",
        )
    return np.frombuffer(start, dtype=np.int64).copy()
