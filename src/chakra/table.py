r"""The node table: one rank's nodes as columns, the one decoder from ``.et`` nodes to the values
every consumer uses (validation, info, the analyses, the simulator, the replay, the pictures).

:func:`load_table` streams a file once through the C record decoder (``chakra._columns``, via
:meth:`chakra.io.EtReader.decoded_batches`) into a :class:`NodeTable`; :func:`iter_chunks` yields the
same columns a buffer at a time for consumers that only add things up (``chakra info``). What a node
*is* is decided here, once:

* **Attributes** by the reading rules of :mod:`chakra.attrs` (first of a name, any integer member,
  flags from text too; an unreadable attribute counts as absent and is listed in :attr:`NodeTable.problems`).
* **Category** from the node type: compute (``COMP_NODE``), communication (collectives, sends,
  receives), memory (``MEM_LOAD_NODE``/``MEM_STORE_NODE``, and device ``COMP_NODE``\ s named as
  profilers name copies and memsets: :data:`chakra.chunks.DEVICE_COPY_PREFIXES`), other
  (metadata, invalid, unknown types).
* **Slot**: the ASTRA-sim hardware slot the node occupies (``reference/astra-sim.md`` §2.3): CPU
  (compute with ``is_cpu_op``), GPU compute (other compute), GPU comm (collectives, sends, memory,
  metadata, invalid), none (receives).
* **Track**: where the node ran as recorded: the host thread ``tid`` of a CPU op (thread 0 when it
  records none); the ``stream`` of a device node, else its ``tid``. These *resources* come first,
  numbered in order of appearance; a node with neither is on the track named for its slot's kind
  (``CPU``, ``GPU compute``, ``GPU comm``, ``memory``), and metadata on no track (``-1``).
* **Durations** in ns: the attribute ``duration_ns`` when it reads as an integer >= 0, else
  ``duration_micros x 1000``. **Start** in µs: ``start_time_micros``, where 0 means "not recorded".
* **Communication**: ``comm_type`` (collectives only, else -1) and ``comm_size`` (bytes, 0 when
  absent) per node; ``pg_name``, its group (:func:`chakra.groups.group_id`), peers, tag and priority
  of the communication nodes in :attr:`NodeTable.comm`.
* **Roofline**: ``num_ops`` (FLOPs) and ``tensor_size`` (bytes), :data:`MISSING` where absent.

Example:
    table = load_table("job.0.et")
    table.names[0], table.category[0], table.dur_ns[0], table.track_names[table.track[0]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

import numpy as np

from chakra import io
from chakra.attrs import READABLE, WELL_KNOWN
from chakra.chunks import (
    CATEGORY_NAMES,
    COMMUNICATION,
    COMPUTE,
    INT_KEYS,
    MEMORY,
    MISSING,
    NODE_ROW,
    OTHER,
    Category,
    ChunkDecoder,
    NodeChunk,
    attr_counts,
    categories,
    chunk_of_nodes,
    device_copy_names,
    iter_chunks,
    member_slots,
)
from chakra.errors import ChakraFormatError, ChakraInputError, PathLike
from chakra.graph import TraceGraph, graph_from_arrays
from chakra.groups import GroupNameError, group_id
from chakra.paths import rank_of
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMP_NODE, GlobalMetadata, Node
from chakra.units import NS_PER_US

#: ``comm_type`` of a node that is not a collective (or a collective without one).
NO_COMM_TYPE = -1
#: ``tid`` of a CPU op that records none (the main thread).
DEFAULT_TID = 0
#: Track of a node that runs on nothing (metadata).
NO_TRACK = -1
#: :attr:`CommColumns.group` of the default group (all ranks) and of a ``pg_name`` that names none.
DEFAULT_GROUP_ID, INVALID_GROUP_ID = -1, -2
#: Largest duration accepted, in ns (int64 sums along a path must not overflow).
MAX_DUR_NS = (1 << 62) - 1
#: What :meth:`NodeTable.derived` returns.
T = TypeVar("T")
#: Largest ``comm_size`` accepted, in bytes: a pebibyte, some 600 times the fp32 gradients of a
#: 405-billion-parameter model; more is a corrupt field, which would simulate for years.
MAX_COMM_BYTES = 1 << 50


class Slot(IntEnum):
    """ASTRA-sim's hardware slots (astra-sim.md §2.3); a rank runs one node per slot at a time."""

    CPU = 0
    GPU_COMPUTE = 1
    GPU_COMM = 2
    NONE = 3


SLOT_NAMES = ("CPU", "GPU compute", "GPU comm", "none")
#: Fallback track names of nodes without thread or stream, by slot; memory nodes get their own.
SLOT_CPU, SLOT_GPU_COMPUTE, SLOT_GPU_COMM, SLOT_MEMORY = "CPU", "GPU compute", "GPU comm", "memory"


class CommInfo(NamedTuple):
    """The communication attributes of one node (``None`` where it records none)."""

    pg_name: str
    src: int | None
    dst: int | None
    tag: int | None


@dataclass
class CommColumns:
    """Attributes of the communication nodes, aligned to ``pos`` (their positions, ascending):
    ``pg_name`` text (``""`` when absent), its ``group`` (:func:`chakra.groups.group_id`;
    :data:`DEFAULT_GROUP_ID`, :data:`INVALID_GROUP_ID`), and ``kind`` (``comm_type``), ``size``,
    ``src``, ``dst``, ``tag``, ``priority`` as recorded (int64, :data:`MISSING` when absent)."""

    pos: np.ndarray
    pg_name: list[str]
    group: np.ndarray
    kind: np.ndarray
    size: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    priority: np.ndarray

    def __len__(self) -> int:
        return len(self.pos)

    def index(self, pos: int) -> int | None:
        """Where node ``pos`` is in these columns, or ``None`` for a node that is not communication."""
        at = int(np.searchsorted(self.pos, pos))
        return at if at < len(self.pos) and self.pos[at] == pos else None

    def get(self, pos: int) -> CommInfo | None:
        at = self.index(pos)
        if at is None:
            return None
        return CommInfo(self.pg_name[at], _opt(self.src[at]), _opt(self.dst[at]), _opt(self.tag[at]))

    def __getitem__(self, pos: int) -> CommInfo:
        info = self.get(pos)
        if info is None:
            raise KeyError(pos)
        return info

    def __contains__(self, pos: object) -> bool:
        return isinstance(pos, (int, np.integer)) and self.index(int(pos)) is not None


def _opt(value: np.int64) -> int | None:
    return None if value == MISSING else int(value)


@dataclass
class AttrProblems:
    """Attributes consumers may read differently, for ``chakra validate``: per entry the node's
    position, the attribute name and the member it is stored in. ``kind`` (first attribute of each name)
    lists well-known attributes outside their canonical member; ``repeated`` names given twice on a node."""

    kind_pos: np.ndarray
    kind_name: list[str]
    kind_member: list[str]
    repeated_pos: np.ndarray
    repeated_name: list[str]

    def unreadable(self) -> set[tuple[int, str]]:
        """``(position, name)`` of the attributes that do not read at all (rule 5 of chakra.attrs)."""
        return {
            (p, name)
            for p, name, member in zip(self.kind_pos.tolist(), self.kind_name, self.kind_member, strict=True)
            if member not in READABLE[WELL_KNOWN[name].kind]
        }


@dataclass(eq=False)  # compared by identity: analyses cache what they derive from a table
class NodeTable:
    """One rank's nodes as columns; index ``i`` is the ``i``-th node of the file (see the module doc).

    * ``graph``: ids, types, ``dur_us``/``start_us`` as recorded, dependencies (:class:`TraceGraph`)
    * ``name_id`` (int32) into ``name_list``; ``names`` the per-node strings (built on first use)
    * ``category`` (uint8, :class:`Category`), ``slot`` (uint8, :class:`Slot`), ``is_cpu`` (bool)
    * ``track`` (int32) into ``track_names``, :data:`NO_TRACK` for none; the first ``num_resources``
      tracks are threads and streams, the rest slot fallbacks
    * ``tid``, ``stream`` (int64, :data:`MISSING`), ``dur_ns`` (int64)
    * ``comm_type`` (int32), ``comm_size`` (int64 bytes); ``comm``: :class:`CommColumns`
    * ``num_ops``, ``tensor_size`` (int64, :data:`MISSING`)
    * ``metadata``: the file's GlobalMetadata; ``metadata_nodes``: position -> the METADATA nodes as
      messages; ``empty_records``: positions of zero-length records; ``problems``: :class:`AttrProblems`;
      ``attr_counts``: attribute name -> member -> nodes carrying it (first of a name per node);
      ``num_data_deps``/``num_ctrl_deps``: dependency ids listed, those on missing ids included
    """

    path: str | None
    rank: int | None
    graph: TraceGraph
    name_id: np.ndarray
    name_list: list[str]
    category: np.ndarray
    slot: np.ndarray
    is_cpu: np.ndarray
    track: np.ndarray
    track_names: list[str]
    num_resources: int
    tid: np.ndarray
    stream: np.ndarray
    dur_ns: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    comm: CommColumns
    num_ops: np.ndarray
    tensor_size: np.ndarray
    metadata: GlobalMetadata = field(default_factory=GlobalMetadata)
    metadata_nodes: dict[int, Node] = field(default_factory=dict)
    empty_records: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    problems: AttrProblems | None = None
    attr_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    num_data_deps: int = 0
    num_ctrl_deps: int = 0
    #: What analyses derived from this table, by key (:meth:`derived`); not shipped to other processes.
    derived_results: dict[str, Any] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return self.graph.num_nodes

    def derived(self, key: str, compute: Callable[[], T]) -> T:
        """What ``compute()`` returns, computed once per table and ``key`` (the scheduled starts that
        every analysis of the table shares)."""
        if key not in self.derived_results:
            self.derived_results[key] = compute()
        found: T = self.derived_results[key]
        return found

    def __getstate__(self) -> dict[str, object]:
        # protobuf messages do not pickle across processes (chakra.parallel): ship their bytes
        state = dict(self.__dict__)
        state["derived_results"] = {}
        state["metadata"] = self.metadata.SerializeToString()
        state["metadata_nodes"] = {pos: node.SerializeToString() for pos, node in self.metadata_nodes.items()}
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.metadata = GlobalMetadata.FromString(state["metadata"])  # type: ignore[arg-type]
        nodes: dict[int, bytes] = state["metadata_nodes"]  # type: ignore[assignment]
        self.metadata_nodes = {pos: Node.FromString(data) for pos, data in nodes.items()}

    @property
    def ids(self) -> np.ndarray:
        return self.graph.ids

    @property
    def node_type(self) -> np.ndarray:
        return self.graph.node_type

    @property
    def start_us(self) -> np.ndarray:
        return self.graph.start_us

    @cached_property
    def names(self) -> list[str]:
        """Every node's name (equal names share one string)."""
        names = self.name_list
        return [names[i] for i in self.name_id.tolist()]

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


def load_table(path: PathLike, rank: int | None = None) -> NodeTable:
    """Stream ``path`` (plain, ``.gz`` or ``.zst``) into a :class:`NodeTable`; ``rank`` defaults to the
    one in a ``PREFIX.{rank}.et`` name."""
    metadata, chunks, decoder = iter_chunks(path)
    return _assemble(metadata, list(chunks), decoder, str(path), rank_of(path) if rank is None else rank)


def table_from_nodes(
    nodes: Iterable[Node],
    *,
    metadata: GlobalMetadata | None = None,
    path: PathLike | None = None,
    rank: int | None = None,
) -> NodeTable:
    """The :class:`NodeTable` of nodes held in memory (a :class:`chakra.trace.Trace`, a test's nodes):
    they are framed as a file would hold them and go through the same decoder."""
    label = str(path) if path is not None else None
    chunk, decoder = chunk_of_nodes(nodes, label)
    return _assemble(metadata or GlobalMetadata(version=io.FORMAT_VERSION), [chunk], decoder, label, rank)


def _assemble(
    metadata: GlobalMetadata, chunks: list[NodeChunk], decoder: ChunkDecoder, label: str | None, rank: int | None
) -> NodeTable:
    """One table from the chunks of a file, in order."""
    rows = np.concatenate([c.rows for c in chunks]) if chunks else np.zeros(0, dtype=NODE_ROW)
    types = rows["type"].astype(np.int32)

    def joined(get: Callable[[NodeChunk], np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate([get(c) for c in chunks]).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)

    graph = graph_from_arrays(
        rows["id"],
        types,
        rows["dur_us"],
        rows["start_us"],
        rows["n_data"],
        joined(lambda c: c.data_deps, np.uint64),
        rows["n_ctrl"],
        joined(lambda c: c.ctrl_deps, np.uint64),
    )
    ints = {name: _dense(chunks, name, len(rows)) for name in INT_KEYS}
    is_cpu = joined(lambda c: c.is_cpu, np.bool_)
    category = categories(types)
    name_id = np.ascontiguousarray(rows["name_id"], dtype=np.int32)
    name_list = decoder.node_name_list()
    if len(name_list):
        copies = (types == COMP_NODE) & ~is_cpu & device_copy_names(name_list)[name_id]
        category[copies] = MEMORY
    track, track_names, num_resources = _tracks(is_cpu, ints["tid"], ints["stream"], category)
    collective = types == COMM_COLL_NODE
    comm_type = np.where(collective & (ints["comm_type"] != MISSING), ints["comm_type"], NO_COMM_TYPE)
    comm_pos = joined(lambda c: c.comm_pos + c.first, np.int64)
    pg_names = [text for c in chunks for text in c.comm_texts["pg_name"]]
    names = decoder.attr_name_list()
    counts = sum(
        (np.pad(c.member_counts, (0, len(names) * member_slots() - len(c.member_counts))) for c in chunks),
        np.zeros(len(names) * member_slots(), dtype=np.int64),
    )
    return NodeTable(
        path=label,
        rank=rank,
        graph=graph,
        name_id=name_id,
        name_list=name_list,
        category=category,
        slot=_slots(types, is_cpu),
        is_cpu=is_cpu,
        track=track,
        track_names=track_names,
        num_resources=num_resources,
        tid=ints["tid"],
        stream=ints["stream"],
        dur_ns=_durations_ns(graph, ints["duration_ns"], label),
        comm_type=comm_type.astype(np.int64),
        comm_size=_comm_sizes(graph, category, ints["comm_size"], label),
        comm=CommColumns(
            pos=comm_pos,
            pg_name=pg_names,
            group=_group_ids(pg_names),
            kind=ints["comm_type"][comm_pos],
            size=ints["comm_size"][comm_pos],
            src=ints["comm_src"][comm_pos],
            dst=ints["comm_dst"][comm_pos],
            tag=ints["comm_tag"][comm_pos],
            priority=ints["comm_priority"][comm_pos],
        ),
        num_ops=ints["num_ops"],
        tensor_size=ints["tensor_size"],
        metadata=metadata,
        metadata_nodes={pos: node for c in chunks for pos, node in c.metadata_nodes.items()},
        empty_records=np.flatnonzero(rows["rec_len"] == 0),
        problems=AttrProblems(
            kind_pos=np.array([p for c in chunks for p in c.problem_pos], dtype=np.int64),
            kind_name=[x for c in chunks for x in c.problem_name],
            kind_member=[x for c in chunks for x in c.problem_member],
            repeated_pos=np.array([p for c in chunks for p in c.repeated_pos], dtype=np.int64),
            repeated_name=[x for c in chunks for x in c.repeated_name],
        ),
        attr_counts=attr_counts(counts, names),
        num_data_deps=int(rows["n_data"].sum()),
        num_ctrl_deps=int(rows["n_ctrl"].sum()),
    )


def _dense(chunks: list[NodeChunk], name: str, n: int) -> np.ndarray:
    """Integer attribute ``name`` of every node of the file (int64, :data:`MISSING` where absent)."""
    out = np.full(n, MISSING, dtype=np.int64)
    for chunk in chunks:
        positions, values = chunk.ints[name]
        out[positions + chunk.first] = values
    return out


def _group_ids(pg_names: list[str]) -> np.ndarray:
    """:func:`chakra.groups.group_id` of each ``pg_name`` (computed once per distinct name)."""
    ids: dict[str, int] = {}
    for name in pg_names:
        if name not in ids:
            try:
                found = group_id(name)
            except GroupNameError:
                found = INVALID_GROUP_ID
            ids[name] = DEFAULT_GROUP_ID if found is None else found
    return np.array([ids[name] for name in pg_names], dtype=np.int64)


def _slots(node_type: np.ndarray, is_cpu: np.ndarray) -> np.ndarray:
    """Per node, the :class:`Slot` ASTRA-sim issues it on (uint8)."""
    slot = np.full(len(node_type), Slot.GPU_COMM, dtype=np.uint8)
    compute = node_type == COMP_NODE
    slot[compute] = np.where(is_cpu[compute], Slot.CPU, Slot.GPU_COMPUTE)
    slot[node_type == COMM_RECV_NODE] = Slot.NONE
    return slot


def _tracks(
    is_cpu: np.ndarray, tid: np.ndarray, stream: np.ndarray, category: np.ndarray
) -> tuple[np.ndarray, list[str], int]:
    """``(track, track_names, num_resources)`` by the rule of the module docstring."""
    n = len(is_cpu)
    has_tid, has_stream = tid != MISSING, stream != MISSING
    on_stream = ~is_cpu & has_stream
    on_thread = is_cpu | (~has_stream & has_tid)
    thread = np.where(is_cpu & ~has_tid, DEFAULT_TID, tid)
    firsts: list[np.ndarray] = []
    labels: list[str] = []
    inverse: list[tuple[np.ndarray, np.ndarray]] = []
    for kind, mask, values in (("thread", on_thread, thread), ("stream", on_stream, stream)):
        where = np.flatnonzero(mask)
        distinct, first, back = np.unique(values[where], return_index=True, return_inverse=True)
        firsts.append(where[first])
        labels.extend(f"{kind} {v}" for v in distinct.tolist())
        inverse.append((where, back + sum(len(f) for f in firsts[:-1])))
    appearance = np.argsort(np.concatenate(firsts), kind="stable")
    number = np.empty(len(appearance), dtype=np.int32)
    number[appearance] = np.arange(len(appearance), dtype=np.int32)
    track = np.full(n, NO_TRACK, dtype=np.int32)
    for where, resource in inverse:
        track[where] = number[resource]
    track_names = [labels[i] for i in appearance.tolist()]
    num_resources = len(track_names)
    fallback = np.full(n, -1, dtype=np.int64)
    for cat, slot_name in ((COMPUTE, SLOT_GPU_COMPUTE), (COMMUNICATION, SLOT_GPU_COMM), (MEMORY, SLOT_MEMORY)):
        fallback[category == cat] = _FALLBACKS.index(slot_name)
    fallback[is_cpu & (category != OTHER)] = _FALLBACKS.index(SLOT_CPU)
    fallback[track != NO_TRACK] = -1
    used = np.flatnonzero(fallback >= 0)
    if len(used):
        kinds, first = np.unique(fallback[used], return_index=True)
        for kind in kinds[np.argsort(first)].tolist():
            track[fallback == kind] = len(track_names)
            track_names.append(_FALLBACKS[kind])
    return track, track_names, num_resources


_FALLBACKS = (SLOT_CPU, SLOT_GPU_COMPUTE, SLOT_GPU_COMM, SLOT_MEMORY)


def _comm_sizes(graph: TraceGraph, category: np.ndarray, sizes: np.ndarray, label: str | None) -> np.ndarray:
    """Each communication node's ``comm_size`` (bytes; 0 when absent and for other nodes), refusing
    one that is negative or over :data:`MAX_COMM_BYTES`."""
    comm = (category == COMMUNICATION) & (sizes != MISSING)
    absurd = comm & ((sizes < 0) | (sizes > MAX_COMM_BYTES))
    if absurd.any():
        pos = int(np.argmax(absurd))
        raise ChakraFormatError(
            f"node {int(graph.ids[pos])}: comm_size of {int(sizes[pos]):,} bytes is not a plausible size",
            path=label,
            hint=f"check comm_size of this node (at most {MAX_COMM_BYTES:,} bytes, a pebibyte, is read)",
        )
    return np.where(comm, sizes, 0)


def _durations_ns(graph: TraceGraph, dur_attr_ns: np.ndarray, label: str | None) -> np.ndarray:
    """``duration_ns`` where the attribute gives one >= 0, else ``duration_micros x 1000`` (int64 ns)."""
    from_attr = dur_attr_ns >= 0
    too_long = (from_attr & (dur_attr_ns > MAX_DUR_NS)) | (~from_attr & (graph.dur_us > MAX_DUR_NS // NS_PER_US))
    if too_long.any():
        pos = int(np.argmax(too_long))
        shown = int(dur_attr_ns[pos]) if from_attr[pos] else int(graph.dur_us[pos]) * NS_PER_US
        raise ChakraFormatError(
            f"node {int(graph.ids[pos])}: duration of {shown} ns is not a plausible time",
            path=label,
            hint="check duration_micros / duration_ns of this node",
        )
    return np.where(from_attr, dur_attr_ns, graph.dur_us.astype(np.int64) * NS_PER_US)


__all__ = [
    "CATEGORY_NAMES",
    "COMMUNICATION",
    "COMPUTE",
    "DEFAULT_GROUP_ID",
    "INVALID_GROUP_ID",
    "MEMORY",
    "MISSING",
    "NO_COMM_TYPE",
    "NO_TRACK",
    "OTHER",
    "SLOT_NAMES",
    "AttrProblems",
    "Category",
    "CommColumns",
    "CommInfo",
    "NodeTable",
    "Slot",
    "load_table",
    "table_from_nodes",
]
