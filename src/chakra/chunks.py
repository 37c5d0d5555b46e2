"""Decoding a file's records a buffer at a time into columns: the first half of the node table.

The C decoder ``chakra._columns`` (via :meth:`chakra.io.EtReader.decoded_batches`) turns framed records
into fixed-width rows; :class:`ChunkDecoder` reads the attributes consumers use out of them by the
rules of :mod:`chakra.attrs` and gives one :class:`NodeChunk` per buffer. :mod:`chakra.table` joins the
chunks of a file into a :class:`~chakra.table.NodeTable`; ``chakra info`` adds them up as they come
(:func:`iter_chunks`), so its memory does not grow with the file.

Example:
    metadata, chunks, decoder = iter_chunks("job.0.et")
    sum(len(chunk.rows) for chunk in chunks)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from chakra import _columns, io
from chakra.attrs import (
    MEMBER_CODE,
    MEMBER_OF_CODE,
    NO_MEMBER,
    STRING_CODE,
    WELL_KNOWN,
    flag_column,
    int_column,
    member_problem,
    text_column,
)
from chakra.errors import ChakraInputError, PathLike
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, GlobalMetadata, Node, NodeType

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

#: An int64 column's value where the node has no such attribute (or one that does not read, rule 5).
#: Rule 2's range starts one above it, so no readable value collides with it.
MISSING = np.iinfo(np.int64).min


class Category(IntEnum):
    """What kind of work a node is, from its type."""

    COMPUTE = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


COMPUTE, COMMUNICATION, MEMORY, OTHER = Category
CATEGORY_NAMES = tuple(c.name.lower() for c in Category)
_CATEGORY_OF_TYPE = {
    NodeType.COMP_NODE: COMPUTE,
    NodeType.COMM_COLL_NODE: COMMUNICATION,
    NodeType.COMM_SEND_NODE: COMMUNICATION,
    NodeType.COMM_RECV_NODE: COMMUNICATION,
    NodeType.MEM_LOAD_NODE: MEMORY,
    NodeType.MEM_STORE_NODE: MEMORY,
}


_FLAG_KEYS = ("is_cpu_op",)
INT_KEYS = (
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
    ints: dict[str, tuple[np.ndarray, np.ndarray]]  # INT_KEYS -> (positions in the chunk, int64 values)
    comm_pos: np.ndarray  # positions within the chunk of the communication nodes
    comm_texts: dict[str, list[str]]  # _TEXT_KEYS -> text per communication node ("" when absent)
    metadata_nodes: dict[int, Node]
    problem_pos: list[int]
    problem_name: list[str]
    problem_member: list[str]
    repeated_pos: list[int]
    repeated_name: list[str]
    member_counts: np.ndarray  # (attr name id, member code) -> nodes

    def column(self, name: str) -> np.ndarray:
        """Integer attribute ``name`` of every node of the chunk (int64, :data:`MISSING` where absent)."""
        out = np.full(len(self.rows), MISSING, dtype=np.int64)
        positions, values = self.ints[name]
        out[positions] = values
        return out


class ChunkDecoder:
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
        ints: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name in INT_KEYS:
            sel = rows_of(name)
            values, ok = int_column(a_member[sel], a_value[sel])
            ok &= values != MISSING
            ints[name] = (a_node[sel[ok]].astype(np.int64), values[ok])
        types = rows["type"]
        category = categories(types)
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
            for p in np.flatnonzero(types == NodeType.METADATA_NODE).tolist()
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


def member_slots() -> int:
    """Width of one attribute name's row in :attr:`NodeChunk.member_counts`."""
    return _MEMBER_SLOTS


def categories(node_type: np.ndarray) -> np.ndarray:
    """Per node, its :class:`Category` from its type (uint8)."""
    category = np.full(len(node_type), OTHER, dtype=np.uint8)
    for kind, cat in _CATEGORY_OF_TYPE.items():
        category[node_type == kind] = cat
    return category


#: How profilers name a device's copies and memsets (CUPTI and roctracer: ``Memcpy HtoD (Pageable ->
#: Device)``, ``Memset (Device)``; DMA engines ``dma...``): the kernel classes HolisticTraceAnalysis
#: counts as memory. A device compute node so named moves memory.
DEVICE_COPY_PREFIXES = ("Memcpy", "Memset", "hipMemcpy", "hipMemset", "dma")


def device_copy_names(name_list: list[str]) -> np.ndarray:
    """Per distinct name, whether it names a device copy or memset (:data:`DEVICE_COPY_PREFIXES`).

    >>> device_copy_names(["Memcpy DtoH (Device -> Pageable)", "volta_sgemm", "Memset (Device)"]).tolist()
    [True, False, True]
    """
    return np.array([name.startswith(DEVICE_COPY_PREFIXES) for name in name_list], dtype=np.bool_)


def iter_chunks(path: PathLike) -> tuple[GlobalMetadata, Iterator[NodeChunk], ChunkDecoder]:
    """Stream ``path``: its metadata, its :class:`NodeChunk`\\ s (one per read buffer, in file order) and
    the decoder (for the interned names once the chunks are consumed)."""
    reader = io.EtReader(path)
    decoder = ChunkDecoder(str(path))

    def chunks() -> Iterator[NodeChunk]:
        with reader:
            for decoded in reader.decoded_batches(decoder.node_names, decoder.attr_names):
                yield decoder.chunk(decoded)

    return reader.metadata, chunks(), decoder


def chunk_of_nodes(nodes: Iterable[Node], label: str | None = None) -> tuple[NodeChunk, ChunkDecoder]:
    """One :class:`NodeChunk` of in-memory nodes, decoded as if read from a file."""
    buf = b"".join(io.frame(node.SerializeToString()) for node in nodes)
    decoder = ChunkDecoder(label)
    stop, count, error, rows, ctrl, data, attrs = _columns.decode(
        buf, 0, len(buf), decoder.node_names, decoder.attr_names
    )
    if error is not None or stop != len(buf):  # pragma: no cover - serialized messages always decode
        raise ChakraInputError(f"nodes do not decode ({error})", path=label)
    return decoder.chunk(io.DecodedRecords(buf, 0, 0, count, rows, ctrl, data, attrs)), decoder


def attr_counts(counts: np.ndarray, names: list[str]) -> dict[str, dict[str, int]]:
    """Attribute name -> member -> nodes, from the flat (name id x member code) counts of the chunks."""
    out: dict[str, dict[str, int]] = {}
    for flat in np.flatnonzero(counts).tolist():
        name_id, member = divmod(flat, _MEMBER_SLOTS)
        out.setdefault(names[name_id], {})[MEMBER_OF_CODE.get(member, "unset")] = int(counts[flat])
    return out
