"""Load PyTorch host execution traces ("host ET", ``ExecutionTraceObserver`` JSON) of every schema.

Both node layouts (``reference/pytorch-traces.md`` §1.3-1.4) are read into one form,
:class:`HostNode`: the flat ``1.0.1`` layout (``parent``, ``input_shapes``, ... and attributes as
top-level keys) and the grouped Chakra layout (``1.0.2-chakra.0.0.4`` through
``1.1.1-chakra.1.0.0``: ``ctrl_deps``, ``inputs``/``outputs`` objects, typed ``attrs`` list). The
layout is recognised by the fields present, not by the version string, which does not reliably say
what a file holds. Plain and gzip files are accepted. A file cut short by a process that died before
the observer finalised it (ends after a node and a comma) is repaired and the repair reported.

Speed and memory: a grouped trace is read a block of the file at a time and each block's nodes
straight from its text in C, the JSON checked as it is read (msgspec decodes the rest of the file and
the few records of forms the reader leaves; the whole file where the text is not read so, so that its
decoder names the fault); the flat layout is decoded by msgspec into typed structs. The bulky operator
``inputs``/``outputs`` lists are kept as raw JSON until asked for (:class:`IOLists`). Measured on a
64 MB, 68,744-node trace: 0.21 s (330k nodes/s) and 55 MiB peak (0.35 s and 116 MiB with msgspec's
records of the whole file's bytes), against 4.6 s and 860 MB on top of the bytes for ``orjson.loads``
of a 94 MB trace into dicts.

Example:
    trace = load_host_trace("traces/host.0.json")
    trace.schema, len(trace.nodes), trace.process_groups()
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, repeat
from operator import eq
from pathlib import Path
from typing import Any

import msgspec

from chakra import io
from chakra._host_record import grouped_nodes, host_nodes, split_attrs, split_io, text_tables
from chakra._items import gather
from chakra._json_scan import find_array
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.pytorch.jsonfile import BlockReader, position_of, read_json_bytes

PathLike = str | Path

#: Attributes every node of either layout carries, with the value a missing one means.
CORE_ATTRS: dict[str, Any] = {
    "rf_id": 0,
    "fw_parent": 0,
    "seq_id": -1,
    "scope": 0,
    "tid": 0,
    "fw_tid": 0,
    "op_schema": "",
}

#: Names of the process-group record and of the roots the observer writes (§1.9, §1.10).
PROCESS_GROUP_NODE = "## process_group:init ##"
THREAD_ROOT_NAMES = ("[pytorch|profiler|execution_trace|thread]", "[pytorch|profiler|execution_graph|thread]")
PROCESS_ROOT_NAMES = ("[pytorch|profiler|execution_trace|process]", "[pytorch|profiler|execution_graph|process]")

#: Schema strings seen in the wild (§1.2); others are read by field presence and reported.
KNOWN_SCHEMAS = (
    "1.0.1",
    "1.0.2-chakra.0.0.4",
    "1.0.3-chakra.0.0.4",
    "1.0.4-chakra.0.0.4",
    "1.1.0-chakra.0.0.4",
    "1.1.1-chakra.0.0.4",
    "1.1.1-chakra.1.0.0",
)

_EMPTY_LIST = msgspec.Raw(b"[]")
#: ``strides`` exist from schema 1.1.1 only; absent ones read as JSON null.
_NULL = msgspec.Raw(b"null")
_decode_any = msgspec.json.Decoder().decode


class _Attr(msgspec.Struct, gc=False):
    name: str
    value: Any = None
    type: str = ""


_decode_attrs = msgspec.json.Decoder(list[_Attr]).decode


class _IO(msgspec.Struct, gc=False):
    values: msgspec.Raw = _EMPTY_LIST
    shapes: msgspec.Raw = _EMPTY_LIST
    types: msgspec.Raw = _EMPTY_LIST
    strides: msgspec.Raw = _NULL


class GroupedRecord(msgspec.Struct, gc=False):
    """A node of the grouped (Chakra) layout as it is on disk."""

    id: int
    name: str  # the observer names every node: a node without one is a damaged file
    ctrl_deps: int = 0
    # kept as JSON: their lists are copied out in C (views would hold the whole file)
    inputs: msgspec.Raw = _NULL
    outputs: msgspec.Raw = _NULL
    # kept as JSON until the node is converted: decoded all at once, the attribute structs were
    # the largest part of the peak memory (a third more than the file)
    attrs: msgspec.Raw = _EMPTY_LIST


class _FlatNode(msgspec.Struct, gc=False):
    """A node of the flat ``1.0.1`` layout as it is on disk."""

    id: int
    name: str
    parent: int = 0
    inputs: msgspec.Raw = _EMPTY_LIST
    input_shapes: msgspec.Raw = _EMPTY_LIST
    input_types: msgspec.Raw = _EMPTY_LIST
    outputs: msgspec.Raw = _EMPTY_LIST
    output_shapes: msgspec.Raw = _EMPTY_LIST
    output_types: msgspec.Raw = _EMPTY_LIST
    rf_id: int = 0
    fw_parent: int = 0
    seq_id: int = -1
    scope: int = 0
    tid: int = 0
    fw_tid: int = 0
    op_schema: str = ""


class _GroupedTrace(msgspec.Struct):
    nodes: list[GroupedRecord]
    schema: str = ""
    pid: int | None = None
    time: str | None = None
    start_ts: int | None = None
    finish_ts: int | None = None


class _FlatTrace(msgspec.Struct):
    nodes: list[_FlatNode]
    schema: str = ""
    pid: int | None = None
    time: str | None = None
    start_ts: int | None = None
    finish_ts: int | None = None


class IOLists(msgspec.Struct, gc=False):
    """An operator's inputs or outputs: ``values``, ``shapes``, ``types`` (and ``strides`` from
    schema 1.1.1), kept as their JSON text (bytes, or views of a file's) and decoded on use by the
    methods of the same name."""

    raw_values: msgspec.Raw | bytes = _EMPTY_LIST
    raw_shapes: msgspec.Raw | bytes = _EMPTY_LIST
    raw_types: msgspec.Raw | bytes = _EMPTY_LIST
    raw_strides: msgspec.Raw | bytes = _NULL

    def values(self) -> list[Any]:
        return _decode_any(self.raw_values)

    def shapes(self) -> list[Any]:
        return _decode_any(self.raw_shapes)

    def types(self) -> list[str]:
        return _decode_any(self.raw_types)

    def strides(self) -> list[Any] | None:
        """Per-input strides (schema 1.1.1 and later), ``None`` for older traces."""
        return _decode_any(self.raw_strides)


class HostNode(msgspec.Struct, gc=False):
    """One host operator, the same whatever the file's layout.

    ``parent`` is the call-stack parent (``ctrl_deps`` or ``parent`` on disk); ``attrs`` holds
    every attribute beyond the core ones (collective metadata, ``kernel_backend``, ...).
    """

    id: int
    name: str
    parent: int
    rf_id: int
    tid: int
    fw_parent: int
    seq_id: int
    scope: int
    fw_tid: int
    op_schema: str
    inputs: IOLists
    outputs: IOLists
    attrs: dict[str, Any]


@dataclass
class HostTrace:
    """A host execution trace: header fields and nodes in file order (post-order, see §1.9).

    ``start_ts``/``finish_ts`` are steady-clock milliseconds (not comparable with Kineto times).
    ``layout`` is ``"flat"`` or ``"grouped"``; ``notes`` says what was unusual (an unknown schema
    string, a repaired truncated file).
    """

    path: Path | None
    schema: str
    layout: str
    nodes: list[HostNode]
    pid: int | None = None
    time: str | None = None
    start_ts: int | None = None
    finish_ts: int | None = None
    notes: list[str] = field(default_factory=list)

    def process_groups(self) -> list[dict[str, Any]]:
        """The groups of the ``## process_group:init ##`` record (``[]`` when there is none)."""
        (names,) = gather(self.nodes, (("name",),))
        for node in compress(self.nodes, map(eq, names, repeat(PROCESS_GROUP_NODE))):
            values = node.inputs.values()
            if values and isinstance(values[0], str):
                try:
                    groups = _decode_any(values[0].encode())
                except msgspec.DecodeError as exc:
                    raise ChakraInputError(
                        f"node {node.id} ({PROCESS_GROUP_NODE}) holds process groups that are not JSON: {exc}",
                        path=self.path,
                        hint="its first input is the JSON list PyTorch's observer writes; re-record the trace "
                        "or remove the node to convert without its groups",
                    ) from None
                return groups if isinstance(groups, list) else []
        return []

    def by_id(self) -> Mapping[int, HostNode]:
        """The nodes by id (the last of an id): a :class:`NodesByPlace` where every node's id is its place
        from 1 (a profiler view numbers its nodes so), else a dict."""
        nodes = self.nodes
        if nodes and nodes[0].id == 1 and nodes[-1].id == len(nodes):
            (ids,) = gather(nodes, (("id",),))
            if ids == list(range(1, len(nodes) + 1)):
                return NodesByPlace(nodes)
        return {node.id: node for node in nodes}


class NodesByPlace(Mapping[int, HostNode]):
    """Nodes whose ids are their places from 1, by id, read from their list: a dict of a whole trace's
    few hundred thousand nodes was a fiftieth of its conversion's peak.

    Example:
        >>> nodes = NodesByPlace(["first", "second"])  # any objects: the places are what is read
        >>> nodes[2], nodes.get(3), 0 in nodes, list(nodes)
        ('second', None, False, [1, 2])
    """

    __slots__ = ("nodes",)

    def __init__(self, nodes: Sequence[HostNode]):
        self.nodes = nodes

    def __contains__(self, node_id: object) -> bool:
        return type(node_id) is int and 0 < node_id <= len(self.nodes)

    def __getitem__(self, node_id: int) -> HostNode:
        if node_id in self:
            return self.nodes[node_id - 1]
        raise KeyError(node_id)

    def get(self, node_id: int, default: Any = None) -> Any:  # type: ignore[override]
        return self.nodes[node_id - 1] if node_id in self else default

    def __iter__(self) -> Iterator[int]:
        return iter(range(1, len(self.nodes) + 1))

    def __len__(self) -> int:
        return len(self.nodes)

    def values(self) -> Sequence[HostNode]:  # type: ignore[override]
        return self.nodes


#: The tail of a host trace whose process died before the observer finalised it: the last node's
#: closing brace, maybe a comma and white space, and nothing after (§1.1).
_UNFINISHED_TAIL = re.compile(rb"\}\s*,?\s*$")


def _repair_unfinished(data: bytes) -> bytes | None:
    """Close the node list and the object of a trace cut after a complete node, else ``None``."""
    if b'"nodes"' not in data[:4096] or not _UNFINISHED_TAIL.search(data[-64:]):
        return None
    return data.rstrip().rstrip(b",") + b"]}"


_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "grouped": msgspec.json.Decoder(_GroupedTrace),
    "flat": msgspec.json.Decoder(_FlatTrace),
}

#: Keys that only the grouped layout has; looked for in the first node (the layouts never mix).
_GROUPED_KEYS = re.compile(rb'"(?:ctrl_deps|attrs)"\s*:')
_LAYOUT_SNIFF_BYTES = 1 << 16


def _layout_of(data: bytes | bytearray) -> str:
    """``"grouped"`` or ``"flat"``, from the keys of the first node."""
    start = data.find(b'"nodes"')
    head = data[start : start + _LAYOUT_SNIFF_BYTES] if start >= 0 else data[:_LAYOUT_SNIFF_BYTES]
    return "grouped" if _GROUPED_KEYS.search(head) else "flat"


def _decode(data: bytes, layout: str, path: Path | None) -> tuple[Any, list[str]]:
    notes: list[str] = []
    decoder = _DECODERS[layout]
    try:
        return decoder.decode(data), notes
    except msgspec.DecodeError as exc:
        first_error = exc
    if data.lstrip()[:1] == b"{" and b'"traceEvents"' in data[: 1 << 16] and b'"nodes"' not in data[: 1 << 16]:
        raise ChakraFormatError(
            "this is a Kineto (device) trace, not a host execution trace",
            path=path,
            hint="pass it as the device trace",
        )
    repaired = _repair_unfinished(data)
    if repaired is not None:
        try:
            trace = decoder.decode(repaired)
        except msgspec.DecodeError:
            pass
        else:
            notes.append(
                "the file was not finalised (the observer was never unregistered); closed it after its "
                "last complete node: the process root node and finish_ts are missing"
            )
            return trace, notes
    message = str(first_error)
    raise ChakraFormatError(
        f"not a host execution trace: {message}{position_of(message, data)}",
        path=path,
        hint="expected the JSON written by torch.profiler.ExecutionTraceObserver",
    )


_decode_io = msgspec.json.Decoder(_IO | None).decode


@dataclass
class SharedValues:
    """What the nodes of one trace share: equal dicts of extra attributes, equal IO list texts, equal
    names and schemas (the same op kind recurs thousands of times with the same shapes and types)."""

    extras: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = field(default_factory=dict)
    texts: dict[bytes, bytes] = field(default_factory=dict)
    strings: dict[str, str] = field(default_factory=dict)


def _io_lists(raw: msgspec.Raw, texts: dict[bytes, bytes]) -> IOLists:
    """The lists of an ``inputs``/``outputs`` object, copied out of the file's bytes: views would hold
    the whole file in memory for as long as the trace lives, where the lists are an eighth of it."""
    parts = split_io(raw, texts)
    if parts is not None:
        return IOLists(*parts)
    io = _decode_io(raw)  # a form the splitter leaves to msgspec, which reads it or names the error
    if io is None:
        return IOLists()
    return IOLists(bytes(io.values), bytes(io.shapes), bytes(io.types), bytes(io.strides))


def host_node_from_record(raw: GroupedRecord, shared: SharedValues | None = None) -> HostNode:
    """A grouped-layout record as a node; raises ``msgspec.ValidationError`` (the caller names the
    file and node) when a core attribute holds a value of another kind than the observer writes.
    Nodes given the same ``shared`` share equal dicts of extra attributes, IO list texts, names and
    schemas. :func:`load_host_trace` converts most records in C (``host_nodes``) and the forms that
    leaves to Python here."""
    shared = shared if shared is not None else SharedValues()
    split = split_attrs(raw.attrs, CORE_ATTRS)
    if split is None:  # a form the splitter leaves to msgspec (or a damaged list)
        core, extra = _attrs_by_msgspec(raw)
        rf_id, fw_parent, seq_id, scope, tid, fw_tid, op_schema = core.values()
    else:
        (rf_id, fw_parent, seq_id, scope, tid, fw_tid, op_schema), pairs = split
        if pairs not in shared.extras:
            shared.extras[pairs] = dict(pairs)
        extra = shared.extras[pairs]
    strings = shared.strings
    return HostNode(
        id=raw.id,
        name=strings.setdefault(raw.name, raw.name),
        parent=raw.ctrl_deps,
        rf_id=rf_id,
        tid=tid,
        fw_parent=fw_parent,
        seq_id=seq_id,
        scope=scope,
        fw_tid=fw_tid,
        op_schema=strings.setdefault(op_schema, op_schema) if isinstance(op_schema, str) else op_schema,
        inputs=_io_lists(raw.inputs, shared.texts),
        outputs=_io_lists(raw.outputs, shared.texts),
        attrs=extra,
    )


def _attrs_by_msgspec(raw: GroupedRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """The core attributes (in :data:`CORE_ATTRS`'s order) and the others of ``raw``, decoded by msgspec."""
    core = dict(CORE_ATTRS)
    extra: dict[str, Any] = {}
    for attr in _decode_attrs(raw.attrs):
        if attr.name in core:
            wanted = type(CORE_ATTRS[attr.name])
            # bool is an int to Python, never to the observer
            if not isinstance(attr.value, wanted) or isinstance(attr.value, bool):
                raise msgspec.ValidationError(
                    f"attribute {attr.name!r} of node {raw.id} is {attr.value!r}, expected {wanted.__name__}"
                )
            core[attr.name] = attr.value
        else:
            extra[attr.name] = attr.value
    return core, extra


def _from_flat(raw: _FlatNode) -> HostNode:
    return HostNode(
        id=raw.id,
        name=raw.name,
        parent=raw.parent,
        rf_id=raw.rf_id,
        tid=raw.tid,
        fw_parent=raw.fw_parent,
        seq_id=raw.seq_id,
        scope=raw.scope,
        fw_tid=raw.fw_tid,
        op_schema=raw.op_schema,
        inputs=IOLists(raw.inputs, raw.input_shapes, raw.input_types),
        outputs=IOLists(raw.outputs, raw.output_shapes, raw.output_types),
        attrs={},
    )


def _share_equal_values(nodes: list[HostNode]) -> None:
    """Let a flat-layout trace's nodes share equal names, schemas and extra-attribute dicts, as
    :class:`SharedValues` lets the grouped layout's: the same op kind recurs thousands of times, and
    the current writer puts the same ``kernel_backend``/``kernel_file``/``tensor_range`` on every node
    (a fifth of the loaded trace's memory otherwise). The dicts are read-only by convention."""
    strings: dict[str, str] = {}
    dicts: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    for node in nodes:
        node.name = strings.setdefault(node.name, node.name)
        node.op_schema = strings.setdefault(node.op_schema, node.op_schema)
        attrs = node.attrs
        try:
            node.attrs = dicts.setdefault(tuple(attrs.items()), attrs)
        except TypeError:  # unhashable values (lists): the node keeps its own dict
            continue


_decode_record = msgspec.json.Decoder(GroupedRecord).decode
#: A grouped trace's text is read this much at a time.
_BLOCK_BYTES = io.READ_CHUNK_BYTES


def _scan_grouped(path: Path, shared: SharedValues) -> tuple[_GroupedTrace, list[int]] | None:
    """A grouped-layout trace read a block of the file at a time, each block's nodes straight from its
    text in C (``grouped_nodes``: no struct per record, a record the block cuts read again with the
    next), the records of forms read in Python decoded one by one (their indices returned: they are
    still records), the rest of the file by msgspec. The file's text is never all in memory beside
    its nodes. None for the flat layout, and where the text is not read so (not JSON, a key given
    twice, a file cut short, a file that is not a regular one, which is read once): the caller decodes
    the whole file, whose decoder names the fault."""
    if not path.is_file():
        return None
    stream, _ = io.open_decompressed(path, what="a host trace")
    nodes: list[HostNode | GroupedRecord] = []
    left: list[int] = []
    blocks, tables = BlockReader(stream, _BLOCK_BYTES), text_tables()
    try:
        text = bytearray()
        while len(text) < 2 * _LAYOUT_SNIFF_BYTES and blocks.more(text):
            pass
        at = text.find(b'"nodes"')  # _layout_of's window after it must be in the text read (or the file ends)
        if at < 0 or at + _LAYOUT_SNIFF_BYTES > len(text) >= 2 * _LAYOUT_SNIFF_BYTES or _layout_of(text) != "grouped":
            return None
        while (found := find_array(text, b"nodes")) is None:
            if not blocks.more(text):
                return None
        key_start, items_start = found
        head = bytes(text[:key_start])
        del text[: items_start - 1]  # from the array's '['
        first, closed, more = True, False, True
        while not closed:
            scanned = grouped_nodes(
                text, 0, first, CORE_ATTRS, shared.extras, shared.texts, shared.strings, HostNode, IOLists, tables
            )
            if scanned is None:
                return None
            found_nodes, others, end, closed = scanned
            for index, start, stop in others:
                found_nodes[index] = _decode_record(text[start:stop])
            left.extend(len(nodes) + index for index, _, _ in others)
            nodes += found_nodes
            first = first and end == 0
            del text[:end]
            if not closed and not more:
                return None  # the text ends inside the array
            more = more and blocks.more(text)
        rest = head + b'"nodes":[]' + bytes(text) + stream.read()
        if rest.count(b'"nodes"') != 1 or b"\\u" in rest:
            return None  # a second list of nodes (its key maybe spelled with escapes): msgspec settles which counts
        header = _DECODERS["grouped"].decode(rest)
    except (msgspec.DecodeError, *io.DECOMPRESS_ERRORS):
        return None
    finally:
        stream.close()
    if not nodes:
        return None
    header.nodes = nodes
    return header, left


def load_host_trace(path: PathLike) -> HostTrace:
    """Read a host execution trace (plain or gzip JSON), either layout, repairing an unfinished file.

    Raises :class:`ChakraFormatError` (with line and column) for files that are not host traces and
    :class:`ChakraInputError` for files that cannot be read.
    """
    path = Path(path)
    shared = SharedValues()
    left: Sequence[int] = ()
    notes: list[str] = []
    layout = "grouped"
    with gc_paused():
        scanned = _scan_grouped(path, shared)
        if scanned is not None:
            raw, left = scanned
        else:
            data = read_json_bytes(path, "a host trace")
            layout = _layout_of(data)
            raw, notes = _decode(data, layout, path)
            del data
        nodes: list[Any] = raw.nodes
        if not nodes:
            raise ChakraFormatError(
                "the host trace has no nodes",
                path=path,
                hint="record at least one step with torch.profiler.ExecutionTraceObserver",
            )
        convert: Callable[[Any], HostNode] = _from_flat
        if layout == "grouped":
            if scanned is None:
                # in place, so each on-disk struct is freed as soon as it is converted (halves the peak)
                left = host_nodes(nodes, CORE_ATTRS, shared.extras, shared.texts, shared.strings, HostNode, IOLists)
            convert = partial(host_node_from_record, shared=shared)
        else:
            left = range(len(nodes))
        for i in left:
            try:
                nodes[i] = convert(nodes[i])
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise ChakraFormatError(
                    f"not a host execution trace: its attrs, inputs or outputs: {exc}",
                    path=path,
                    node_index=i,
                    hint="expected the JSON written by torch.profiler.ExecutionTraceObserver",
                ) from None
        if layout == "flat":
            _share_equal_values(nodes)
    if raw.schema not in KNOWN_SCHEMAS:
        notes.append(f"schema {raw.schema!r} is not one this tool was tested with; read by its fields")
    return HostTrace(
        path=path,
        schema=raw.schema,
        layout=layout,
        nodes=nodes,
        pid=raw.pid,
        time=raw.time,
        start_ts=raw.start_ts,
        finish_ts=raw.finish_ts,
        notes=notes,
    )
