"""Hand-written protobuf encoding of ``Node`` records for producers' hot paths.

Building a ``Node`` message and its ``AttributeProto`` children costs a few µs per field in Python;
a converter writing 100k nodes a second cannot afford it. ``encode_node(node_id, name, node_type,
ctrl_deps, data_deps, start_time_micros, duration_micros, inputs, outputs, attrs)`` (C,
``src/chakra/_encode.c``) writes the same bytes protobuf would (fields in number order, proto3
defaults omitted, repeated ids packed; ``inputs``/``outputs`` ``None`` or an IOInfo's (values, shapes,
types) as text or UTF-8 bytes, written even when empty; ``attrs`` fields from :class:`AttrEncoder`);
``encode_nodes`` is the same for a batch of nodes given as columns (:func:`encode_columns` takes
attributes as :class:`AttrColumn`), the loop in C too; ``varint(value)`` is a base-128 varint
(negative values as their 64-bit two's complement; the same
function as :func:`chakra.io.encode_varint`);
``python_repr_of_json(text)`` is ``str()`` of a JSON value as UTF-8 (the text upstream stores for an IO
list), written from the JSON without parsing it into objects, or ``None`` for the forms whose text
Python's own rules settle (escapes, non-ASCII, quotes, objects, long integers: parse those); and
:class:`AttrEncoder` encodes attributes in their registered value kinds (``chakra.attrs``), caching
the bytes of values that repeat (``op_schema`` strings, flags, thread ids). Tests compare both with
protobuf's own serialization.

Example:
    >>> enc = AttrEncoder()
    >>> payload = encode_node(7, "aten::mm", 4, [], [6], 10, 3, None, None, [enc("is_cpu_op", True)])
    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> Node.FromString(payload).attr[0].bool_val
    True
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from chakra._encode import encode_node, encode_nodes, python_repr_of_json, varint
from chakra.attrs import WELL_KNOWN, check_value, member_for_python_value, set_attr
from chakra.errors import AttrKindError
from chakra.schema.protobuf.et_def_pb2 import Node

__all__ = [
    "RAW",
    "AttrColumn",
    "AttrEncoder",
    "EncodedNodes",
    "encode_columns",
    "encode_node",
    "encode_nodes",
    "python_repr_of_json",
    "varint",
]


def _len_field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


_ATTR = b"\x52"  # Node.attr = 10, length-delimited
#: Value tags of the scalar oneof members written by hand.
_VARINT_MEMBERS = {"int64_val": b"\x48", "uint64_val": b"\x68", "int32_val": b"\x38", "uint32_val": b"\x58"}
_BOOL_TAG = b"\xd8\x01"  # bool_val = 27
_STRING_TAG = b"\xea\x01"  # string_val = 29
_DOUBLE_TAG = b"\x19"  # double_val = 3
#: Attributes whose values repeat a lot get their bytes cached; unique ones (``rf_id``) do not.
_CACHE_LIMIT = 1 << 16


class AttrEncoder:
    """Encodes ``(name, value)`` as a Node ``attr`` field in the registered value kind.

    Values are checked as :func:`chakra.attrs.set_attr` checks them (range, type); members other
    than the common scalars go through protobuf itself.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, Any, type] | None, bytes] = {}
        self._names: dict[str, tuple[bytes, str]] = {}
        self._int64_names: dict[str, bytes] = {}

    def _name(self, name: str, value: Any) -> tuple[bytes, str]:
        known = self._names.get(name)
        if known is None:
            spec = WELL_KNOWN.get(name)
            member = spec.member if spec is not None else member_for_python_value(value)
            known = (_len_field(b"\x0a", name.encode()), member)
            if spec is not None:
                self._names[name] = known
        return known

    def int64(self, name: str, value: int) -> bytes:
        """``int64_val`` attribute ``name`` without checks or caching: for values that are
        integers by construction and rarely repeat (``rf_id``, ``seq_id``)."""
        name_field = self._int64_names.get(name)
        if name_field is None:
            name_field = self._int64_names[name] = _len_field(b"\x0a", name.encode()) + _VARINT_MEMBERS["int64_val"]
        body = name_field + varint(value)
        return _ATTR + varint(len(body)) + body

    def __call__(self, name: str, value: Any) -> bytes:
        key = (name, value, type(value)) if not isinstance(value, list) else None
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        name_field, member = self._name(name, value)
        check_value(name, member, value)
        # a oneof member is written even when it holds its default (0, false, ""): it has presence
        tag = _VARINT_MEMBERS.get(member)
        if tag is not None:
            body = name_field + tag + varint(int(value))
        elif member == "bool_val":
            body = name_field + _BOOL_TAG + (b"\x01" if value else b"\x00")
        elif member == "string_val":
            body = name_field + _len_field(_STRING_TAG, value.encode())
        elif member == "double_val":
            body = name_field + _DOUBLE_TAG + struct.pack("<d", value)
        else:
            holder = Node()
            set_attr(holder, name, value, member=member)
            body = holder.attr[0].SerializeToString()
        field = _len_field(_ATTR, body)
        if key is not None and len(self._cache) < _CACHE_LIMIT:
            self._cache[key] = field
        return field


#: The member of an :class:`AttrColumn` whose values are attribute fields already encoded (bytes
#: from :class:`AttrEncoder`, any number of fields), appended as they are.
RAW = "raw"
#: The member an unregistered attribute's value of each type gets (chakra.attrs.member_for_python_value).
_MEMBER_OF_TYPE = {bool: "bool_val", int: "int64_val", float: "double_val", str: "string_val"}
#: Members the C batch encoder writes itself; columns of other members are encoded here first.
_BATCH_MEMBERS = frozenset(
    {RAW, "int64_val", "uint64_val", "int32_val", "uint32_val", "bool_val", "string_val", "double_val"}
)


@dataclass(frozen=True, slots=True)
class AttrColumn:
    """One attribute over a batch of nodes: ``values[i]`` is row i's value, ``None`` where the row
    has none. ``member`` is the registered one for well-known names (``chakra.attrs``), else the
    one given, else inferred from each value as :func:`chakra.attrs.set_attr` infers it; :data:`RAW`
    for encoded fields (``name`` is then only a label)."""

    name: str
    values: Sequence[Any]
    member: str | None = None


class EncodedNodes(NamedTuple):
    """What :func:`encode_columns` wrote: one payload per row, and the dependencies it left out
    (``later``: not below the row's own id, with ``earlier_only``; ``repeated``: a second mention)."""

    payloads: list[bytes]
    later: int
    repeated: int


def encode_columns(
    names: Sequence[str | bytes],
    node_types: Sequence[int],
    ctrl_deps: Sequence[Sequence[int]],
    data_deps: Sequence[Sequence[int]],
    start_time_micros: Sequence[float | None],
    duration_micros: Sequence[float | None],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    attrs: Sequence[AttrColumn] = (),
    *,
    node_ids: Sequence[int] | None = None,
    id_map: Mapping[int, int] | memoryview | None = None,
    earlier_only: bool = False,
    io_json: Callable[[Any], str | bytes] | None = None,
    io_fields: tuple[str, str, str] | None = None,
    float_times: bool = False,
) -> EncodedNodes:
    """Nodes given as columns (one row per node), encoded as :func:`encode_node` encodes one: row
    ``i`` gets id ``node_ids[i]`` (default ``i``). Dependencies are mapped through ``id_map`` when
    given (ids it lacks are skipped: nodes not written), with ``earlier_only`` those not below the
    row's own id are left out, and each is written once (``id_map`` may also be int64 ranks by id, -1
    for an id not written: a ``memoryview`` of format ``q``, read as an array). Attribute values are checked as
    :func:`chakra.attrs.set_attr` checks them (:class:`~chakra.errors.AttrKindError`). With
    ``io_json``, the IO lists are given as JSON (bytes, ``msgspec.Raw``) and written as Python's
    ``str()`` of their values (upstream's text form), by :func:`python_repr_of_json` or, for the
    forms it leaves to Python, by ``io_json(json)``; with ``io_fields`` too, each IO entry is an object
    whose attributes of those three names hold the texts. With ``float_times``, the start and
    duration columns may hold float microseconds, written rounded as :func:`round` rounds (negative
    ones as 0), and None (0).

    Example:
        >>> done = encode_columns(["a", "b"], [4, 4], [[], [0, 0]], [[], [5]], [0, 2], [2, 1],
        ...                       [None, None], [None, None], [AttrColumn("rf_id", [None, 7])], earlier_only=True)
        >>> done.later, done.repeated
        (1, 1)
        >>> Node.FromString(done.payloads[1]).ctrl_deps, Node.FromString(done.payloads[1]).attr[0].int64_val
        ([0], 7)
    """
    columns = [_batch_column(column) for column in attrs]
    payloads, later, repeated = encode_nodes(
        names,
        node_types,
        ctrl_deps,
        data_deps,
        start_time_micros,
        duration_micros,
        inputs,
        outputs,
        columns,
        node_ids=node_ids,
        id_map=dict(id_map) if id_map is not None and not isinstance(id_map, dict | memoryview) else id_map,
        earlier_only=earlier_only,
        io_json=io_json,
        io_fields=io_fields,
        float_times=float_times,
    )
    return EncodedNodes(payloads, later, repeated)


def _batch_column(column: AttrColumn) -> tuple[str, str, Sequence[Any]]:
    """``column`` as the C encoder takes it: its member, or its values encoded here when the member
    is one it does not write (or has to be inferred value by value)."""
    spec = WELL_KNOWN.get(column.name)
    if spec is not None and column.member not in (None, spec.member):
        raise AttrKindError(f"attribute {column.name!r} must be written as {spec.member}, not {column.member}")
    member = spec.member if spec is not None else column.member
    if member is None:  # one Python type throughout infers one member, as set_attr would for each
        kinds = set(map(type, column.values)) - {type(None)}
        member = _MEMBER_OF_TYPE.get(kinds.pop()) if len(kinds) == 1 else None
    if member in _BATCH_MEMBERS:
        return (column.name, member, column.values)
    encode = AttrEncoder()
    fields: list[bytes | None] = []
    for value in column.values:
        if value is None:
            fields.append(None)
            continue
        if member is None:
            fields.append(encode(column.name, value))
            continue
        holder = Node()
        set_attr(holder, column.name, value, member=member)
        fields.append(_len_field(_ATTR, holder.attr[0].SerializeToString()))
    return (column.name, RAW, fields)
