"""Hand-written protobuf encoding of ``Node`` records for producers' hot paths.

Building a ``Node`` message and its ``AttributeProto`` children costs a few µs per field in Python;
a converter writing 100k nodes a second cannot afford it. :func:`encode_node` writes the same bytes
protobuf would (fields in number order, proto3 defaults omitted, repeated ids packed), and
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
from collections.abc import Sequence
from typing import Any

from chakra.attrs import WELL_KNOWN, check_value, member_for_python_value, set_attr
from chakra.io import encode_varint
from chakra.schema.protobuf.et_def_pb2 import Node

_MASK64 = (1 << 64) - 1
#: Pre-encoded varints for small values (ids, lengths, durations): one tuple lookup.
_SMALL_BITS = 14
_SMALL_LIMIT = 1 << _SMALL_BITS
_LOW14 = _SMALL_LIMIT - 1


def varint(value: int) -> bytes:
    """Base-128 varint of ``value`` (negative numbers as their 64-bit two's complement)."""
    if 0 <= value < _SMALL_LIMIT:
        return _SMALL[value]
    value &= _MASK64
    # 14 bits at a time from a table (timestamps of 51 bits take four lookups, not eight loops)
    parts = []
    while value >= _SMALL_LIMIT:
        parts.append(_CONTINUED[value & _LOW14])
        value >>= _SMALL_BITS
    parts.append(_SMALL[value])
    return b"".join(parts)


_SMALL = tuple(encode_varint(n) for n in range(_SMALL_LIMIT))
#: 14 low bits as two varint bytes that both say "more follows".
_CONTINUED = tuple(bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(_SMALL_LIMIT))


def _len_field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


# Node field tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_ID, _NAME, _TYPE, _CTRL, _DATA, _START, _DUR, _INPUTS, _OUTPUTS, _ATTR = (
    b"\x08", b"\x12", b"\x18", b"\x22", b"\x2a", b"\x30", b"\x38", b"\x42", b"\x4a", b"\x52",
)  # fmt: skip


def _io_info(io: tuple[str | bytes, str | bytes, str | bytes]) -> bytes:
    """``IOInfo`` (values, shapes, types; text or UTF-8 bytes) as a Node field, empty ones omitted."""
    small, limit = _SMALL, _SMALL_LIMIT
    out = b""
    for tag, text in zip((b"\x0a", b"\x12", b"\x1a"), io, strict=True):
        if text:
            data = text.encode() if isinstance(text, str) else text
            n = len(data)
            out += tag + (small[n] if n < limit else varint(n)) + data
    return out


def encode_node(
    node_id: int,
    name: str,
    node_type: int,
    ctrl_deps: Sequence[int],
    data_deps: Sequence[int],
    start_time_micros: int,
    duration_micros: int,
    inputs: tuple[str | bytes, str | bytes, str | bytes] | None,
    outputs: tuple[str | bytes, str | bytes, str | bytes] | None,
    attrs: Sequence[bytes],
) -> bytes:
    """A ``Node`` message's bytes; ``attrs`` are fields from :class:`AttrEncoder`."""
    # hot path: varints of small values are inlined table lookups
    small, limit = _SMALL, _SMALL_LIMIT
    parts = []
    if node_id:
        parts.append(_ID + (small[node_id] if 0 < node_id < limit else varint(node_id)))
    if name:
        data = name.encode()
        parts.append(_NAME + (small[len(data)] if len(data) < limit else varint(len(data))) + data)
    if node_type:
        parts.append(_TYPE + varint(node_type))
    for tag, deps in ((_CTRL, ctrl_deps), (_DATA, data_deps)):
        if deps:
            packed = b"".join([small[d] if 0 <= d < limit else varint(d) for d in deps])
            parts.append(tag + (small[len(packed)] if len(packed) < limit else varint(len(packed))) + packed)
    if start_time_micros:
        parts.append(_START + varint(start_time_micros))
    if duration_micros:
        parts.append(_DUR + (small[duration_micros] if 0 < duration_micros < limit else varint(duration_micros)))
    for tag, io in ((_INPUTS, inputs), (_OUTPUTS, outputs)):
        if io is not None:  # a given IOInfo is written even when empty, as protobuf writes a set field
            body = _io_info(io)
            parts.append(tag + (small[len(body)] if len(body) < limit else varint(len(body))) + body)
    parts.extend(attrs)
    return b"".join(parts)


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
