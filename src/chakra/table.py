"""The node table: one rank's nodes as columns, the one decoder from ``.et`` nodes to the values
every consumer uses (validation, info, the analyses, the simulator, the replay, the pictures).

:func:`load_table` streams a file once through the C record decoder (``chakra._columns``, via
:meth:`chakra.io.EtReader.decoded_batches`) into a :class:`NodeTable`; :func:`iter_chunks` yields the
same columns a buffer at a time for consumers that only add things up (``chakra info``). What a node
*is* is decided here, once:

* **Attributes** by the reading rules of :mod:`chakra.attrs` (first of a name, any integer member,
  flags from text too; an unreadable attribute counts as absent and is listed in :attr:`NodeTable.problems`).
* **Category** from the node type: compute (``COMP_NODE``), communication (collectives, sends,
  receives), memory (``MEM_LOAD_NODE``/``MEM_STORE_NODE``), other (metadata, invalid, unknown types).
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
    >>> table = load_table("job.0.et")                         # doctest: +SKIP
    >>> table.names[0], table.category[0], table.dur_ns[0], table.track_names[table.track[0]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from typing import NamedTuple

import numpy as np

from chakra import _columns, io
from chakra.attrs import (
    MEMBER_CODE,
    MEMBER_OF_CODE,
    NO_MEMBER,
    READABLE,
    STRING_CODE,
    WELL_KNOWN,
    flag_column,
    int_column,
    member_problem,
    text_column,
)
from chakra.errors import ChakraInputError, PathLike
from chakra.graph import TraceGraph, graph_from_arrays
from chakra.groups import GroupNameError, group_id
from chakra.paths import rank_of
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    METADATA_NODE,
    AttributeProto,
    GlobalMetadata,
    Node,
)

#: Row layouts of ``chakra._columns`` (its ``NodeRow`` and ``AttrRow`` structs; change both together).
NODE_ROW = np.dtype(
    [
        ("rec_off", "<i8"),
        ("id", "<u8"),
        ("start_us", "<u8"),
        ("dur_us", "<u8"),
        ("rec_len", "<i4"),
        ("type", "<i4"),
        ("name_id", "<i4"),
        ("n_ctrl", "<i4"),
        ("n_data", "<i4"),
        ("n_attr", "<i4"),
    ]
)
ATTR_ROW = np.dtype(
    [("value", "<i8"), ("node", "<i4"), ("name_id", "<i4"), ("len", "<i4"), ("member", "<i2"), ("repeat", "<i2")]
)
if (NODE_ROW.itemsize, ATTR_ROW.itemsize) != _columns.row_sizes():  # pragma: no cover - a build out of step
    raise ImportError("chakra._columns was built from another version of its row layout: reinstall chakra-et")

NS_PER_US = 1000
#: An int64 column's value where the node has no such attribute (or one that does not read, rule 5).
#: Rule 2's range starts one above it, so no readable value collides with it.
MISSING = np.iinfo(np.int64).min
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


class Category(IntEnum):
    """What kind of work a node is, from its type."""

    COMPUTE = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


COMPUTE, COMMUNICATION, MEMORY, OTHER = Category
CATEGORY_NAMES = tuple(c.name.lower() for c in Category)
_CATEGORY_OF_TYPE = {
    COMP_NODE: COMPUTE,
    COMM_COLL_NODE: COMMUNICATION,
    COMM_SEND_NODE: COMMUNICATION,
    COMM_RECV_NODE: COMMUNICATION,
    MEM_LOAD_NODE: MEMORY,
    MEM_STORE_NODE: MEMORY,
}


class Slot(IntEnum):
    """ASTRA-sim's hardware slots (astra-sim.md §2.3); a rank runs one node per slot at a time."""

    CPU = 0
    GPU_COMPUTE = 1
    GPU_COMM = 2
    NONE = 3


SLOT_NAMES = ("CPU", "GPU compute", "GPU comm", "none")
#: Fallback track names of nodes without thread or stream, by slot; memory nodes get their own.
SLOT_CPU, SLOT_GPU_COMPUTE, SLOT_GPU_COMM, SLOT_MEMORY = "CPU", "GPU compute", "GPU comm", "memory"

_FLAG_KEYS = ("is_cpu_op",)
_INT_KEYS = (
    "tid",
    "stream",
    "duration_ns",
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "comm_priority",
    "num_ops",
    "tensor_size",
)
_TEXT_KEYS = ("pg_name",)
#: Attributes kept for communication nodes only (the rest are columns over every node).
_COMM_KEYS = ("pg_name", "comm_src", "comm_dst", "comm_tag", "comm_priority")


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

    def __len__(self) -> int:
        return self.graph.num_nodes

    def __getstate__(self) -> dict[str, object]:
        # protobuf messages do not pickle across processes (chakra.parallel): ship their bytes
        state = dict(self.__dict__)
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


# -- decoding, a buffer at a time ------------------------------------------------------------------


@dataclass
class NodeChunk:
    """The columns of consecutive nodes of one file (positions ``first``, ``first + 1``, ...): per node
    the raw fields and the attributes read by the rules; the rest of :class:`NodeTable` needs the whole
    file (dependency positions, tracks)."""

    first: int
    rows: np.ndarray  # NODE_ROW
    ctrl_deps: np.ndarray  # uint64
    data_deps: np.ndarray  # uint64
    is_cpu: np.ndarray
    ints: dict[str, np.ndarray]  # _INT_KEYS -> int64, MISSING where absent
    comm_pos: np.ndarray  # positions within the chunk of the communication nodes
    comm_texts: dict[str, list[str]]  # _TEXT_KEYS -> text per communication node ("" when absent)
    metadata_nodes: dict[int, Node]
    problem_pos: list[int]
    problem_name: list[str]
    problem_member: list[str]
    repeated_pos: list[int]
    repeated_name: list[str]
    member_counts: np.ndarray  # (attr name id, member code) -> nodes


class _Decoder:
    """Turns the decoder's rows of one file into :class:`NodeChunk`\\ s (names interned across chunks)."""

    def __init__(self, label: str | None):
        self.label = label
        self.node_names: dict[bytes, int] = {}
        self.attr_names: dict[bytes, int] = {}
        self._texts: dict[bytes, AttributeProto] = {}  # payload -> message, for strings and lists
        self._attr_list: list[str] = []

    def key_id(self, name: str) -> int:
        return self.attr_names.get(name.encode(), -1)

    def attribute(self, buf: bytes, offset: int, length: int) -> AttributeProto:
        payload = buf[offset : offset + length]
        found = self._texts.get(payload)
        if found is None:
            found = self._texts[payload] = AttributeProto.FromString(payload)
        return found

    def chunk(self, decoded: io.DecodedRecords) -> NodeChunk:
        rows = np.frombuffer(decoded.nodes, dtype=NODE_ROW)
        attrs = np.frombuffer(decoded.attrs, dtype=ATTR_ROW)
        count = len(rows)
        repeat = attrs["repeat"] != 0
        first = attrs[~repeat] if repeat.any() else attrs  # the attribute of each name consumers read
        # contiguous copies: every mask below walks these
        a_node, a_name = np.ascontiguousarray(first["node"]), np.ascontiguousarray(first["name_id"])
        a_member, a_value = np.ascontiguousarray(first["member"]), np.ascontiguousarray(first["value"])
        a_len = first["len"]

        def rows_of(name: str) -> np.ndarray:
            key = self.key_id(name)
            return np.flatnonzero(a_name == key) if key >= 0 else np.zeros(0, dtype=np.int64)

        def strings_of(sel: np.ndarray) -> dict[int, str]:
            """Index in ``sel`` -> ``string_val`` of the rows stored as strings."""
            at = np.flatnonzero(a_member[sel] == STRING_CODE)
            offsets, lengths = a_value[sel[at]].tolist(), a_len[sel[at]].tolist()
            buf = decoded.buf
            return {
                k: self.attribute(buf, off, length).string_val
                for k, off, length in zip(at.tolist(), offsets, lengths, strict=True)
            }

        is_cpu = np.zeros(count, dtype=bool)
        sel = rows_of("is_cpu_op")
        if len(sel):
            flags, ok = flag_column(a_member[sel], a_value[sel], strings_of(sel))
            is_cpu[a_node[sel[ok]]] = flags[ok]
        ints: dict[str, np.ndarray] = {}
        for name in _INT_KEYS:
            column = np.full(count, MISSING, dtype=np.int64)
            sel = rows_of(name)
            if len(sel):
                values, ok = int_column(a_member[sel], a_value[sel])
                ok &= values != MISSING
                column[a_node[sel[ok]]] = values[ok]
            ints[name] = column
        types = rows["type"]
        category = _categories(types)
        comm_pos = np.flatnonzero(category == COMMUNICATION)
        comm_texts: dict[str, list[str]] = {}
        for name in _TEXT_KEYS:
            texts = [""] * count
            sel = rows_of(name)
            if len(sel):
                values_text, ok = text_column(a_member[sel], a_value[sel], strings_of(sel))
                for node, text, readable in zip(a_node[sel].tolist(), values_text, ok.tolist(), strict=True):
                    if readable:
                        texts[node] = text
            comm_texts[name] = [texts[p] for p in comm_pos.tolist()]
        metadata_nodes = {
            decoded.first_index + int(p): Node.FromString(
                decoded.buf[int(rows["rec_off"][p]) : int(rows["rec_off"][p]) + int(rows["rec_len"][p])]
            )
            for p in np.flatnonzero(types == METADATA_NODE).tolist()
        }
        problem_pos, problem_name, problem_member = self._problems(a_node, a_name, a_member, decoded.first_index)
        repeated = attrs[repeat]
        names = self.attr_name_list()
        pairs = sorted({(int(n), int(k)) for n, k in zip(repeated["node"], repeated["name_id"], strict=True)})
        member_counts = np.bincount(
            a_name.astype(np.int64) * _MEMBER_SLOTS + a_member, minlength=len(self.attr_names) * _MEMBER_SLOTS
        )
        return NodeChunk(
            first=decoded.first_index,
            rows=rows,
            ctrl_deps=np.frombuffer(decoded.ctrl_deps, dtype=np.uint64),
            data_deps=np.frombuffer(decoded.data_deps, dtype=np.uint64),
            is_cpu=is_cpu,
            ints=ints,
            comm_pos=comm_pos,
            comm_texts=comm_texts,
            metadata_nodes=metadata_nodes,
            problem_pos=problem_pos,
            problem_name=problem_name,
            problem_member=problem_member,
            repeated_pos=[decoded.first_index + n for n, _ in pairs],
            repeated_name=[names[k] for _, k in pairs],
            member_counts=member_counts,
        )

    def _problems(
        self, a_node: np.ndarray, a_name: np.ndarray, a_member: np.ndarray, offset: int
    ) -> tuple[list[int], list[str], list[str]]:
        """Well-known attributes stored outside their canonical member (first of each name per node)."""
        canonical = np.full(len(self.attr_names), -1, dtype=np.int64)
        for name, spec in WELL_KNOWN.items():
            key = self.key_id(name)
            if key >= 0:
                canonical[key] = MEMBER_CODE[spec.member]
        wanted = canonical[a_name]
        odd = np.flatnonzero((wanted >= 0) & (a_member != wanted) & (a_member != NO_MEMBER))
        names = self.attr_name_list()
        out_pos, out_name, out_member = [], [], []
        for r in odd.tolist():
            name = names[int(a_name[r])]
            member = MEMBER_OF_CODE[int(a_member[r])]
            if member_problem(name, member) is not None:
                out_pos.append(offset + int(a_node[r]))
                out_name.append(name)
                out_member.append(member)
        return out_pos, out_name, out_member

    def attr_name_list(self) -> list[str]:
        if len(self._attr_list) != len(self.attr_names):
            self._attr_list = [name.decode() for name in self.attr_names]
        return self._attr_list

    def node_name_list(self) -> list[str]:
        return [name.decode() for name in self.node_names]


#: Width of one attribute name's row of member counts: every oneof field number, and 0 (no member).
_MEMBER_SLOTS = max(MEMBER_OF_CODE) + 1


def _categories(node_type: np.ndarray) -> np.ndarray:
    """Per node, its :class:`Category` from its type (uint8)."""
    category = np.full(len(node_type), OTHER, dtype=np.uint8)
    for kind, cat in _CATEGORY_OF_TYPE.items():
        category[node_type == kind] = cat
    return category


def iter_chunks(path: PathLike) -> tuple[GlobalMetadata, Iterator[NodeChunk], _Decoder]:
    """Stream ``path``: its metadata, its :class:`NodeChunk`\\ s (one per read buffer, in file order) and
    the decoder (for the interned names once the chunks are consumed)."""
    reader = io.EtReader(path)
    decoder = _Decoder(str(path))

    def chunks() -> Iterator[NodeChunk]:
        with reader:
            for decoded in reader.decoded_batches(decoder.node_names, decoder.attr_names):
                yield decoder.chunk(decoded)

    return reader.metadata, chunks(), decoder


# -- the whole file --------------------------------------------------------------------------------


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


def chunk_of_nodes(nodes: Iterable[Node], label: str | None = None) -> tuple[NodeChunk, _Decoder]:
    """One :class:`NodeChunk` of in-memory nodes, decoded as if read from a file."""
    buf = b"".join(io.frame(node.SerializeToString()) for node in nodes)
    decoder = _Decoder(label)
    stop, count, error, rows, ctrl, data, attrs = _columns.decode(
        buf, 0, len(buf), decoder.node_names, decoder.attr_names
    )
    if error is not None or stop != len(buf):  # pragma: no cover - serialized messages always decode
        raise ChakraInputError(f"nodes do not decode ({error})", path=label)
    return decoder.chunk(io.DecodedRecords(buf, 0, 0, count, rows, ctrl, data, attrs)), decoder


def _assemble(
    metadata: GlobalMetadata, chunks: list[NodeChunk], decoder: _Decoder, label: str | None, rank: int | None
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
    ints = {name: joined(lambda c, name=name: c.ints[name], np.int64) for name in _INT_KEYS}
    is_cpu = joined(lambda c: c.is_cpu, np.bool_)
    category = _categories(types)
    track, track_names, num_resources = _tracks(is_cpu, ints["tid"], ints["stream"], category)
    collective = types == COMM_COLL_NODE
    comm_type = np.where(collective & (ints["comm_type"] != MISSING), ints["comm_type"], NO_COMM_TYPE)
    comm_pos = joined(lambda c: c.comm_pos + c.first, np.int64)
    pg_names = [text for c in chunks for text in c.comm_texts["pg_name"]]
    names = decoder.attr_name_list()
    counts = sum(
        (np.pad(c.member_counts, (0, len(names) * _MEMBER_SLOTS - len(c.member_counts))) for c in chunks),
        np.zeros(len(names) * _MEMBER_SLOTS, dtype=np.int64),
    )
    return NodeTable(
        path=label,
        rank=rank,
        graph=graph,
        name_id=rows["name_id"].astype(np.int32),
        name_list=decoder.node_name_list(),
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
        comm_size=np.where((category == COMMUNICATION) & (ints["comm_size"] != MISSING), ints["comm_size"], 0),
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


def attr_counts(counts: np.ndarray, names: list[str]) -> dict[str, dict[str, int]]:
    """Attribute name -> member -> nodes, from the flat (name id x member code) counts of the chunks."""
    out: dict[str, dict[str, int]] = {}
    for flat in np.flatnonzero(counts).tolist():
        name_id, member = divmod(flat, _MEMBER_SLOTS)
        out.setdefault(names[name_id], {})[MEMBER_OF_CODE.get(member, "unset")] = int(counts[flat])
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


def _durations_ns(graph: TraceGraph, dur_attr_ns: np.ndarray, label: str | None) -> np.ndarray:
    """``duration_ns`` where the attribute gives one >= 0, else ``duration_micros x 1000`` (int64 ns)."""
    from_attr = dur_attr_ns >= 0
    too_long = (from_attr & (dur_attr_ns > MAX_DUR_NS)) | (~from_attr & (graph.dur_us > MAX_DUR_NS // NS_PER_US))
    if too_long.any():
        pos = int(np.argmax(too_long))
        shown = int(dur_attr_ns[pos]) if from_attr[pos] else int(graph.dur_us[pos]) * NS_PER_US
        raise ChakraInputError(
            f"node {int(graph.ids[pos])}: duration of {shown} ns is not a plausible time",
            path=label,
            hint="check duration_micros / duration_ns of this node",
        )
    return np.where(from_attr, dur_attr_ns, graph.dur_us.astype(np.int64) * NS_PER_US)
