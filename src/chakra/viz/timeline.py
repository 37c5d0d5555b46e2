"""Chrome/Perfetto trace JSON of a run: measured (an ET's own start times) or simulated.

Open the files in https://ui.perfetto.dev or ``chrome://tracing``. Both kinds use one process
per rank (``pid`` = rank, named ``rank N``) and one thread per track (``tid``), with one complete
event (``ph: "X"``) per node, named after the node, with its id in ``args``. Chrome's ``ts`` and
``dur`` are **microseconds**; times are written as floats so sub-µs durations keep their length.

* :func:`trace_events` / :func:`write_trace_timeline`: the timeline an ET records itself. Tracks
  are those of :class:`chakra.table.NodeTable` (host threads, device streams, else
  ASTRA-sim's slot of the node's kind; nodes on no track, such as metadata, on ``none``). ``ts`` is
  the node's ``start_time_micros`` minus the smallest recorded start over **all** ranks: this
  assumes the ranks' clocks are one clock (true for ranks recorded on one machine; across
  machines only as good as their clock synchronisation). ``dur`` is ``dur_ns / 1000``. Nodes
  without a recorded start cannot be placed: they are logged as a warning, not drawn, and
  :func:`write_trace_timeline` returns their count per rank (:class:`TraceTimeline`). A trace
  with no start time at all is refused: it never ran, so simulate it instead
  (``chakra simulate --timeline``).
* :func:`simulation_events` / :func:`write_simulation_timeline`: a simulated run
  (:class:`chakra.sim.engine.SimResult` with ``keep_intervals=True``), one track per hardware slot
  (CPU, GPU compute, GPU comm; receives, which take no slot, on ``none``); the simulator's ns are
  divided by 1000.

Example:
    write_trace_timeline(chakra.open("out/job"), "job.trace.json")
    result = simulate_workload("out/job", system, network, keep_intervals=True)
    write_simulation_timeline(result, "job.sim.trace.json")
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from chakra import io
from chakra.analyze.frames import to_frame
from chakra.errors import ChakraInputError, PathLike
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType
from chakra.sim.engine import SLOT_NAMES, SimResult
from chakra.table import CATEGORY_NAMES, COMMUNICATION, NO_COMM_TYPE, NodeTable
from chakra.units import NS_PER_US
from chakra.workload import Workload

logger = logging.getLogger(__name__)

#: Tells the viewers to show times in ns (the durations' resolution) although the fields are µs.
DISPLAY_TIME_UNIT = "ns"
#: Name of the thread holding nodes that run on no track (metadata nodes with a start time).
NO_TRACK_NAME = "none"
#: Events serialised per ``orjson.dumps`` call when writing: bounds the memory of the dicts alive
#: at once while keeping the per-call overhead negligible.
WRITE_CHUNK_EVENTS = 65_536

_DOCUMENT_HEAD = b'{"displayTimeUnit":"' + DISPLAY_TIME_UNIT.encode() + b'","traceEvents":['
_DOCUMENT_TAIL = b"]}"


@dataclass
class TraceTimeline:
    """What a measured timeline holds: per rank, nodes drawn (``timed``) and nodes without a start (``untimed``)."""

    timed: dict[int, int] = field(default_factory=dict)
    untimed: dict[int, int] = field(default_factory=dict)

    @property
    def untimed_total(self) -> int:
        return sum(self.untimed.values())

    def to_dict(self) -> dict[str, Any]:
        """Counts per rank."""
        return {"timed": dict(self.timed), "untimed": dict(self.untimed), "untimed_total": self.untimed_total}

    def to_pandas(self) -> Any:
        """One row per rank: ``rank``, ``timed``, ``untimed``."""
        rows = [{"rank": r, "timed": self.timed[r], "untimed": self.untimed[r]} for r in sorted(self.timed)]
        return to_frame(rows, ["rank", "timed", "untimed"])


def _tables(workload: Workload | Mapping[int, NodeTable] | NodeTable) -> dict[int, NodeTable]:
    if isinstance(workload, Workload):
        return dict(workload.tables)
    if isinstance(workload, NodeTable):
        return {workload.rank or 0: workload}
    return dict(workload)


def _origin_us(tables: Mapping[int, NodeTable], where: str | None = None) -> int:
    """The smallest recorded start over all ranks; refuses a workload (at ``where``) that records none."""
    firsts = [int(t.start_us[t.start_us > 0].min()) for t in tables.values() if t.has_start_times]
    if not firsts:
        if not any(len(t) for t in tables.values()):
            raise ChakraInputError(
                "the workload has no nodes", path=where, hint="check that this is the right file or prefix"
            )
        label = next(iter(tables.values())).label if len(tables) == 1 else "the workload"
        raise ChakraInputError(
            f"no node of {label} records start_time_micros, so there is no measured timeline",
            path=where,
            hint="simulate it for a predicted one: chakra simulate --timeline job.trace.json",
        )
    return min(firsts)


def _comm_type_name(comm_type: int) -> str | int:
    try:
        return CollectiveCommType.Name(comm_type)  # type: ignore[arg-type]
    except ValueError:
        return comm_type


def _rank_metadata(rank: int, table: NodeTable, timed: np.ndarray) -> list[dict[str, Any]]:
    """Process name and sort index of ``rank``, and the name of each track its timed nodes use."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}},
    ]
    no_track_tid = len(table.track_names)
    for tid in np.unique(np.where(table.track[timed] < 0, no_track_tid, table.track[timed])).tolist():
        name = table.track_names[tid] if tid < no_track_tid else NO_TRACK_NAME
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": tid, "args": {"sort_index": tid}})
    return events


def _rank_nodes(rank: int, table: NodeTable, timed: np.ndarray, origin_us: int) -> Iterator[dict[str, Any]]:
    """One ``X`` event per timed node of ``table``, by start time (ties in file order)."""
    start_us = table.start_us[timed].astype(np.int64)
    order = np.argsort(start_us, kind="stable")
    positions = timed[order]
    ts_us = (start_us[order] - origin_us).tolist()
    dur_us = (table.dur_ns[positions] / NS_PER_US).tolist()
    track = table.track[positions]
    tids = np.where(track < 0, len(table.track_names), track).tolist()
    ids = table.ids[positions].tolist()
    categories = table.category[positions].tolist()
    names = table.names
    comm_type, comm_size = table.comm_type, table.comm_size
    for pos, ts, dur, tid, node_id, cat in zip(positions.tolist(), ts_us, dur_us, tids, ids, categories, strict=True):
        args: dict[str, Any] = {"node_id": node_id, "category": CATEGORY_NAMES[cat]}
        if cat == COMMUNICATION:
            if comm_type[pos] != NO_COMM_TYPE:
                args["comm_type"] = _comm_type_name(int(comm_type[pos]))
            args["comm_size"] = int(comm_size[pos])
        yield {"ph": "X", "name": names[pos], "pid": rank, "tid": tid, "ts": float(ts), "dur": dur, "args": args}


def _trace_parts(
    workload: Workload | Mapping[int, NodeTable] | NodeTable,
) -> tuple[TraceTimeline, list[dict[str, Any]], list[Iterator[dict[str, Any]]]]:
    """Counts and metadata of a measured timeline, with one lazy event stream per rank."""
    tables = _tables(workload)
    origin_us = _origin_us(tables, workload.prefix if isinstance(workload, Workload) else None)
    summary = TraceTimeline()
    metadata: list[dict[str, Any]] = []
    streams: list[Iterator[dict[str, Any]]] = []
    for rank, table in sorted(tables.items()):
        timed = np.flatnonzero(table.start_us > 0)
        summary.timed[rank] = len(timed)
        summary.untimed[rank] = len(table) - len(timed)
        if len(timed):
            metadata.extend(_rank_metadata(rank, table, timed))
            streams.append(_rank_nodes(rank, table, timed, origin_us))
    if summary.untimed_total:
        logger.warning(
            "%d node(s) record no start time and are not on the timeline (per rank: %s)",
            summary.untimed_total,
            {r: n for r, n in summary.untimed.items() if n},
        )
    return summary, metadata, streams


def trace_events(workload: Workload | Mapping[int, NodeTable] | NodeTable) -> list[dict[str, Any]]:
    """The Chrome trace events of a workload's own start times and durations (µs).

    ``workload`` is a :class:`Workload`, a ``{rank: NodeTable}`` mapping or one table. Metadata
    first, then per rank one ``X`` event per node with a recorded start, by start time; nodes
    without one are logged (their count per rank: :func:`write_trace_timeline`). Raises
    :class:`ChakraInputError` when no node records a start time.

    Example:
        events = trace_events(chakra.open("out/job"))
        events[-1]["ts"], events[-1]["dur"]                  # µs since the first start, µs
    """
    _, events, streams = _trace_parts(workload)
    for stream in streams:
        events.extend(stream)
    return events


def write_trace_timeline(workload: Workload | Mapping[int, NodeTable] | NodeTable, path: PathLike) -> TraceTimeline:
    """Write the measured timeline of ``workload`` to ``path`` (atomically, streamed); see :func:`trace_events`.

    Returns the nodes drawn and left out per rank. Node events are serialised in chunks, so the
    whole event list is never in memory at once.
    """
    summary, metadata, streams = _trace_parts(workload)
    with io.AtomicFile(Path(path)) as handle:
        handle.write(_DOCUMENT_HEAD)
        first = _write_chunk(handle, metadata, first=True)
        for stream in streams:
            chunk: list[dict[str, Any]] = []
            for event in stream:
                chunk.append(event)
                if len(chunk) == WRITE_CHUNK_EVENTS:
                    first = _write_chunk(handle, chunk, first)
                    chunk = []
            first = _write_chunk(handle, chunk, first)
        handle.write(_DOCUMENT_TAIL)
    return summary


def _write_chunk(handle: IO[bytes], events: list[dict[str, Any]], first: bool) -> bool:
    """Append ``events`` to an open ``traceEvents`` array; returns whether the array is still empty."""
    if not events:
        return first
    if not first:
        handle.write(b",")
    handle.write(orjson.dumps(events)[1:-1])  # the list's items without its brackets
    return False


def simulation_events(result: SimResult) -> list[dict[str, Any]]:
    """The Chrome trace events of a simulated run (metadata first, then one ``X`` event per node, by start time).

    Raises :class:`ChakraInputError` when the simulation kept no intervals.
    """
    if result.intervals is None:
        raise ChakraInputError(
            "the simulation kept no node intervals, so there is no timeline to write",
            hint="simulate with keep_intervals=True (chakra simulate --timeline FILE does)",
        )
    events: list[dict[str, Any]] = []
    for rank, spans in sorted(result.intervals.items()):
        names = (result.names or {}).get(rank, {})
        slot_names = result.slot_names.get(rank, list(SLOT_NAMES))
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for slot in sorted({slot for *_, slot in spans}):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": rank,
                    "tid": slot,
                    "args": {"name": slot_name(slot, slot_names)},
                }
            )
        for node_id, start_ns, end_ns, slot in sorted(spans, key=lambda span: (span[1], span[3], span[0])):
            events.append(
                {
                    "ph": "X",
                    "name": names.get(node_id, f"node {node_id}"),
                    "pid": rank,
                    "tid": slot,
                    "ts": start_ns / NS_PER_US,
                    "dur": (end_ns - start_ns) / NS_PER_US,
                    "args": {"node_id": node_id},
                }
            )
    events += link_events(result, pid=max(result.intervals, default=-1) + 1)
    return events


def link_events(result: SimResult, pid: int) -> list[dict[str, Any]]:
    """The links of a congestion-aware run as a process ``pid`` of the trace: a track per link with
    each message's transfer, and the time messages queued for it as asynchronous slices beside it
    (several can wait at once). Empty when the run kept no hops."""
    if not result.link_hops:
        return []
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "network links"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    tracks: dict[str, int] = {}
    for waited, (link, since_ns, start_ns, end_ns, size) in enumerate(result.link_hops):
        tid = tracks.get(link)
        if tid is None:
            tid = tracks[link] = len(tracks) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": link}})
        events.append({"ph": "X", "name": "transfer", "pid": pid, "tid": tid, "ts": start_ns / NS_PER_US,
                       "dur": (end_ns - start_ns) / NS_PER_US, "args": {"bytes": size}})  # fmt: skip
        if since_ns < start_ns:
            common = {"cat": "queued", "name": "queued", "pid": pid, "tid": tid, "id": waited}
            events.append({**common, "ph": "b", "ts": since_ns / NS_PER_US, "args": {"bytes": size}})
            events.append({**common, "ph": "e", "ts": start_ns / NS_PER_US})
    return events


def write_simulation_timeline(result: SimResult, path: PathLike) -> None:
    """Write ``result`` as a Chrome/Perfetto trace JSON file at ``path`` (atomically); see :func:`simulation_events`."""
    document = {"traceEvents": simulation_events(result), "displayTimeUnit": DISPLAY_TIME_UNIT}
    with io.AtomicFile(Path(path)) as handle:
        handle.write(orjson.dumps(document))


def slot_name(slot: int, names: Sequence[str] = SLOT_NAMES) -> str:
    """The track name of hardware slot ``slot`` (per-thread and per-stream slots included)."""
    return names[slot] if 0 <= slot < len(names) else f"slot {slot}"
