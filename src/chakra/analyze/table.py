"""One rank's nodes as arrays for analyses: kinds, tracks, durations, start times, communication.

:func:`load_table` streams an ``.et`` file once (the messages are not kept) into a
:class:`NodeTable`; :func:`load_workload` does it for every rank of a workload, in parallel through
:mod:`chakra.parallel`. Every analysis in :mod:`chakra.analyze` and every picture in
:mod:`chakra.viz` starts from these tables.

* **Category** of a node, from its type: compute (``COMP_NODE``), communication (collectives,
  sends, receives), memory (``MEM_LOAD_NODE``/``MEM_STORE_NODE``), other (metadata, invalid).
* **Track**: where the node runs. The *resources* of :mod:`chakra.analyze.replay` come first (host
  thread ``tid`` for CPU ops; device ``stream``; the ``tid`` of a device node without stream); a
  node with neither goes on the ASTRA-sim slot of its kind (``CPU``, ``GPU compute``,
  ``GPU comm``, ``memory``) or, for metadata, on no track (``-1``).
* **Durations** in ns: the integer attribute ``duration_ns`` when present, else
  ``duration_micros × 1000``. **Start** in µs: ``start_time_micros``, where 0 means "not
  recorded" (proto3 cannot tell 0 from absent).
* **Communication**: ``comm_type`` (``-1`` unless a collective), ``comm_size`` bytes, and for
  communication nodes ``pg_name``, source, destination and tag in :attr:`NodeTable.comm`.

Attributes are read as FeederV3 reads them: the first attribute of a name, any integer-like member.

Example:
    >>> table = load_table("job.0.et")                       # doctest: +SKIP
    >>> table.names[0], table.category[0], table.dur_ns[0]
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from chakra import io
from chakra.attrs import flag_value, int_value, member_value
from chakra.errors import ChakraInputError
from chakra.graph import GraphBuilder, TraceGraph
from chakra.parallel import map_ranks
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    AttributeProto,
    Node,
)
from chakra.trace import TraceSet, rank_of

NS_PER_US = 1000

#: Node categories (``NodeTable.category``) and their names.
COMPUTE, COMMUNICATION, MEMORY, OTHER = 0, 1, 2, 3
CATEGORY_NAMES = ("compute", "communication", "memory", "other")
_CATEGORY_OF_TYPE = {
    COMP_NODE: COMPUTE,
    COMM_COLL_NODE: COMMUNICATION,
    COMM_SEND_NODE: COMMUNICATION,
    COMM_RECV_NODE: COMMUNICATION,
    MEM_LOAD_NODE: MEMORY,
    MEM_STORE_NODE: MEMORY,
}

#: ``tid`` of a CPU op that records none (the main thread), as in the replay.
DEFAULT_TID = 0
#: Track of a node that runs on nothing (metadata).
NO_TRACK = -1
#: Fallback tracks for nodes without thread or stream: ASTRA-sim's slots (``reference/astra-sim.md`` §2.3).
SLOT_CPU, SLOT_GPU_COMPUTE, SLOT_GPU_COMM, SLOT_MEMORY = "CPU", "GPU compute", "GPU comm", "memory"

#: ``comm_type`` of a node that is not a collective.
NO_COMM_TYPE = -1

#: Largest duration accepted, in ns (int64 sums along a path must not overflow).
MAX_DUR_NS = (1 << 62) - 1

_IS_CPU_OP, _TID, _STREAM, _DURATION_NS = "is_cpu_op", "tid", "stream", "duration_ns"
_COMM_TYPE, _COMM_SIZE, _PG_NAME = "comm_type", "comm_size", "pg_name"
_SRC, _DST, _TAG = "comm_src", "comm_dst", "comm_tag"
_COMM_KEYS = frozenset({_COMM_TYPE, _COMM_SIZE, _PG_NAME, _SRC, _DST, _TAG})
_READ_KEYS = _COMM_KEYS | {_IS_CPU_OP, _TID, _STREAM, _DURATION_NS}


class CommInfo(NamedTuple):
    """The communication attributes of one node (``None`` where the node records none)."""

    pg_name: str
    src: int | None
    dst: int | None
    tag: int | None


@dataclass
class NodeTable:
    """One rank's nodes as arrays; index ``i`` is the ``i``-th node of the file.

    * ``graph``: ids, types, ``dur_us``/``start_us`` as recorded, dependencies (see :class:`TraceGraph`)
    * ``names``: node names (equal names share one string)
    * ``category`` (uint8): :data:`COMPUTE`, :data:`COMMUNICATION`, :data:`MEMORY`, :data:`OTHER`
    * ``is_cpu`` (bool): ``is_cpu_op``
    * ``track`` (int32): index into ``track_names``, :data:`NO_TRACK` for none; the first
      ``num_resources`` tracks are real threads and streams, the rest ASTRA-sim slots
    * ``dur_ns`` (int64), ``start_us`` (uint64, 0 = not recorded)
    * ``comm_type`` (int32, :data:`NO_COMM_TYPE` unless a collective), ``comm_size`` (int64 bytes)
    * ``comm``: position -> :class:`CommInfo`, for communication nodes only
    """

    path: str | None
    rank: int | None
    graph: TraceGraph
    names: list[str]
    category: np.ndarray
    is_cpu: np.ndarray
    track: np.ndarray
    track_names: list[str]
    num_resources: int
    dur_ns: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    comm: dict[int, CommInfo] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.graph.num_nodes

    @property
    def ids(self) -> np.ndarray:
        return self.graph.ids

    @property
    def start_us(self) -> np.ndarray:
        return self.graph.start_us

    @property
    def label(self) -> str:
        """How messages name this trace: its file, else its rank."""
        if self.path is not None:
            return self.path
        return f"rank {self.rank}" if self.rank is not None else "trace"

    @property
    def has_start_times(self) -> bool:
        """Whether any node records ``start_time_micros``."""
        return bool(len(self) and (self.graph.start_us > 0).any())

    @property
    def has_durations(self) -> bool:
        """Whether any node has a non-zero duration."""
        return bool(len(self) and (self.dur_ns > 0).any())

    def resource(self) -> np.ndarray:
        """Per node, the replay's resource index (a thread or stream), -1 for none."""
        return np.where(self.track < self.num_resources, self.track, -1).astype(np.int64)

    def start_ns(self) -> np.ndarray:
        """Recorded starts in ns relative to the first recorded start (int64; 0 where none is recorded).

        Raises :class:`ChakraInputError` when the trace has no start times.
        """
        self.require_start_times()
        start_us = self.graph.start_us
        first_us = int(start_us[start_us > 0].min())
        rel = (start_us.astype(np.int64) - first_us) * NS_PER_US
        return np.where(start_us > 0, rel, 0)

    def require_nodes(self) -> None:
        """Raise :class:`ChakraInputError` for an empty trace."""
        if not len(self):
            raise ChakraInputError("the trace has no nodes", path=self.path, hint="check that this is the right file")

    def require_start_times(self) -> None:
        """Raise :class:`ChakraInputError` when no node records a start time."""
        self.require_nodes()
        if not self.has_start_times:
            raise ChakraInputError(
                "no node records start_time_micros, so there is no measured timeline",
                path=self.path,
                hint="use a trace converted from a recording (chakra convert pytorch), or simulate it "
                "(chakra simulate --timeline) for a predicted one",
            )

    def untimed_comm_nodes(self) -> int:
        """Communication nodes whose duration is 0 (generated workloads leave them to a simulator)."""
        return int(np.count_nonzero((self.category == COMMUNICATION) & (self.dur_ns == 0)))

    def require_durations(self) -> None:
        """Raise :class:`ChakraInputError` when every duration is zero."""
        self.require_nodes()
        if not self.has_durations:
            raise ChakraInputError(
                "every node has duration 0, so there is no time to analyse",
                path=self.path,
                hint="durations come from a recording's device trace (chakra convert pytorch --device) or "
                "a generator's roofline (chakra generate llm); chakra simulate times an untimed workload",
            )


def _str_value(attr: AttributeProto) -> str:
    value = member_value(attr)
    return value if isinstance(value, str) else str(value)


#: Marks an attribute not seen yet on the current node (``None`` is a value: "present, unreadable").
_ABSENT = object()
#: The slots of nodes without thread or stream, numbered by their index here: CPU ops go on
#: ``SLOT_CPU``, the others on the slot of their category (metadata on none).
_SLOTS = (SLOT_CPU, SLOT_GPU_COMPUTE, SLOT_GPU_COMM, SLOT_MEMORY)
_SLOT_OF_CATEGORY = {COMPUTE: 1, COMMUNICATION: 2, MEMORY: 3}  # indices into _SLOTS
_NO_SLOT = -1


def table_from_nodes(
    nodes: Iterable[Node], *, path: str | os.PathLike[str] | None = None, rank: int | None = None
) -> NodeTable:
    """Build a :class:`NodeTable` from nodes in file order (one pass; the messages are not kept).

    A hot loop over up to millions of nodes, where reading a message field is the cost: each field
    is read once (type and ``duration_micros`` come back vectorized from the graph arrays), only the
    attributes are walked per node, and everything that depends on the node type (category, slot,
    communication) is worked out on arrays afterwards.
    """
    builder = GraphBuilder()
    names: list[str] = []
    interned: dict[str, str] = {}
    is_cpu_arr = array("B")
    track = array("i")
    dur_attr_ns = array("q")  # the duration_ns attribute, -1 where absent, unreadable or negative
    comm_attrs: dict[int, tuple[object, ...]] = {}  # position -> communication attributes, nodes with any
    resource_names: list[str] = []
    threads: dict[int, int] = {}  # tid -> track
    streams: dict[int, int] = {}  # stream -> track
    add_graph, add_name, get_name = builder.add, names.append, interned.setdefault
    add_cpu, add_track, add_dur = is_cpu_arr.append, track.append, dur_attr_ns.append
    absent: Any = _ABSENT
    label = str(path) if path is not None else None
    for node in nodes:
        pos = add_graph(node)
        name = node.name
        add_name(get_name(name, name))
        # the first attribute of a name is the one consumers read: each is taken only while absent
        cpu = tid = stream = dur_ns = absent
        comm_type = comm_size = pg_name = src = dst = tag = absent
        has_comm = False
        for attr in node.attr:
            key = attr.name
            if key not in _READ_KEYS:  # most attributes of a converted trace (rf_id, op_schema, ...)
                continue
            if key == _IS_CPU_OP:
                if cpu is absent:
                    cpu = flag_value(attr)
            elif key == _TID:
                if tid is absent:
                    tid = int_value(attr)
            elif key == _STREAM:
                if stream is absent:
                    stream = int_value(attr)
            elif key == _DURATION_NS:
                if dur_ns is absent:
                    dur_ns = int_value(attr)
            elif key in _COMM_KEYS:
                has_comm = True
                if key == _COMM_TYPE:
                    if comm_type is absent:
                        comm_type = int_value(attr)
                elif key == _COMM_SIZE:
                    if comm_size is absent:
                        comm_size = int_value(attr)
                elif key == _PG_NAME:
                    if pg_name is absent:
                        pg_name = _str_value(attr)
                elif key == _SRC:
                    if src is absent:
                        src = int_value(attr)
                elif key == _DST:
                    if dst is absent:
                        dst = int_value(attr)
                elif tag is absent:
                    tag = int_value(attr)
        if cpu is True:
            add_cpu(1)
            thread = DEFAULT_TID if tid is absent or tid is None else tid
            index = threads.get(thread)
            if index is None:
                index = threads[thread] = len(resource_names)
                resource_names.append(f"thread {thread}")
        else:
            add_cpu(0)
            if stream is not absent and stream is not None:
                index = streams.get(stream)
                if index is None:
                    index = streams[stream] = len(resource_names)
                    resource_names.append(f"stream {stream}")
            elif tid is not absent and tid is not None:
                index = threads.get(tid)
                if index is None:
                    index = threads[tid] = len(resource_names)
                    resource_names.append(f"thread {tid}")
            else:
                index = NO_TRACK
        add_track(index)
        if dur_ns is absent or dur_ns is None or dur_ns < 0:
            add_dur(-1)
        elif dur_ns > MAX_DUR_NS:
            _implausible_duration(node.id, dur_ns, label)
        else:
            add_dur(dur_ns)
        if has_comm:
            comm_attrs[pos] = (comm_type, comm_size, pg_name, src, dst, tag)
    graph = builder.build()
    category = _categories(graph.node_type)
    is_cpu = _np(is_cpu_arr, np.uint8).astype(bool)
    dur_ns_np = _durations_ns(graph, _np(dur_attr_ns, np.int64), label)
    track_names = resource_names[:]
    track_np = _np(track, np.int32)
    _place_in_slots(track_np, track_names, category, is_cpu)
    comm_type_np, comm_size_np, comm = _communication(graph.node_type, category, comm_attrs)
    return NodeTable(
        path=label,
        rank=rank,
        graph=graph,
        names=names,
        category=category,
        is_cpu=is_cpu,
        track=track_np,
        track_names=track_names,
        num_resources=len(resource_names),
        dur_ns=dur_ns_np,
        comm_type=comm_type_np,
        comm_size=comm_size_np,
        comm=comm,
    )


def _implausible_duration(node_id: int, dur_ns: int, label: str | None) -> None:
    raise ChakraInputError(
        f"node {node_id}: duration of {dur_ns} ns is not a plausible time",
        path=label,
        hint="check duration_micros / duration_ns of this node",
    )


def _categories(node_type: np.ndarray) -> np.ndarray:
    """Per node, its category from its type (uint8)."""
    category = np.full(len(node_type), OTHER, dtype=np.uint8)
    for kind, cat in _CATEGORY_OF_TYPE.items():
        category[node_type == kind] = cat
    return category


def _durations_ns(graph: TraceGraph, dur_attr_ns: np.ndarray, label: str | None) -> np.ndarray:
    """``duration_ns`` where the attribute gave one, else ``duration_micros × 1000`` (int64 ns)."""
    fallback = dur_attr_ns < 0
    too_long = fallback & (graph.dur_us > MAX_DUR_NS // NS_PER_US)
    if too_long.any():
        pos = int(np.argmax(too_long))
        _implausible_duration(int(graph.ids[pos]), int(graph.dur_us[pos]) * NS_PER_US, label)
    return np.where(fallback, graph.dur_us.astype(np.int64) * NS_PER_US, dur_attr_ns)


def _place_in_slots(track: np.ndarray, track_names: list[str], category: np.ndarray, is_cpu: np.ndarray) -> None:
    """Put the nodes without thread or stream (other than metadata) on the ASTRA-sim slot of their
    kind, slots numbered after the real tracks in the order they first occur (in place)."""
    slot = np.full(len(track), _NO_SLOT, dtype=np.int64)
    for cat, index in _SLOT_OF_CATEGORY.items():
        slot[category == cat] = index
    slot[is_cpu & (category != OTHER)] = _SLOTS.index(SLOT_CPU)
    slot[track != NO_TRACK] = _NO_SLOT
    used = np.flatnonzero(slot != _NO_SLOT)
    if not len(used):
        return
    kinds, first = np.unique(slot[used], return_index=True)
    for kind in kinds[np.argsort(first)].tolist():
        track[slot == kind] = len(track_names)
        track_names.append(_SLOTS[kind])


def _communication(
    node_type: np.ndarray, category: np.ndarray, comm_attrs: dict[int, tuple[object, ...]]
) -> tuple[np.ndarray, np.ndarray, dict[int, CommInfo]]:
    """``comm_type`` (collectives only), ``comm_size`` and :class:`CommInfo` of the communication nodes."""
    n = len(node_type)
    comm_type = np.full(n, NO_COMM_TYPE, dtype=np.int32)
    comm_size = np.zeros(n, dtype=np.int64)
    comm: dict[int, CommInfo] = {}
    no_attrs = (None,) * 6
    positions = np.flatnonzero(category == COMMUNICATION)
    collective = (node_type[positions] == COMM_COLL_NODE).tolist()
    for pos, is_collective in zip(positions.tolist(), collective, strict=True):
        values: list[Any] = [None if v is _ABSENT else v for v in comm_attrs.get(pos, no_attrs)]
        kind, size, pg_name, src, dst, tag = values
        if kind is not None and is_collective:
            comm_type[pos] = kind
        comm_size[pos] = size or 0
        comm[pos] = CommInfo(pg_name or "", src, dst, tag)
    return comm_type, comm_size, comm


def _np(values: array, dtype: type) -> np.ndarray:
    """A numpy copy of a typed array (empty arrays included)."""
    return np.array(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def load_table(path: str | os.PathLike[str], rank: int | None = None) -> NodeTable:
    """Stream ``path`` (plain, ``.gz`` or ``.zst``) into a :class:`NodeTable`; ``rank`` defaults to the
    one in a ``PREFIX.{rank}.et`` name."""
    return table_from_nodes(io.stream(path), path=path, rank=rank_of(Path(path)) if rank is None else rank)


@dataclass
class Workload:
    """Every rank of a workload as tables: ``tables[rank]``, plus its communicator groups."""

    prefix: str
    tables: dict[int, NodeTable]
    comm_groups: dict[int, list[int]] | None = None

    @property
    def ranks(self) -> list[int]:
        return sorted(self.tables)


def _load_item(item: tuple[int, str]) -> NodeTable:
    rank, path = item
    return load_table(path, rank)


def load_workload(
    where: str | os.PathLike[str],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Workload:
    """Load a workload: a prefix, a directory holding one, one of its rank files, or any single ``.et``
    file (then one table, rank from the name or 0). Ranks load in parallel through
    :func:`chakra.parallel.map_ranks` (``workers``, ``scheduler`` as there)."""
    where = Path(where)
    if where.is_file() and rank_of(where) is None:
        return Workload(str(where), {0: load_table(where, 0)})
    traces = TraceSet.discover(where)
    items = [(rank, str(path)) for rank, path in sorted(traces.ranks.items())]
    tables = map_ranks(_load_item, items, workers=workers, scheduler=scheduler, progress=progress, description="load")
    by_rank = {rank: table for (rank, _), table in zip(items, tables, strict=True)}
    return Workload(str(traces.prefix), by_rank, traces.comm_groups)
