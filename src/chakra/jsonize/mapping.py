"""The parts of protobuf's proto3 JSON mapping that both directions share (``reference/chakra-format.md`` §9.1).

Encoding (:mod:`chakra.jsonize.encode`) and decoding (:mod:`chakra.jsonize.decode`) are written per
field for speed; what they must agree on lives here once: the JSON keys, the value kind of every
``AttributeProto.value`` oneof member, the spellings of non-finite floats and the ``NodeType`` names.

Examples:
    >>> json_name("start_time_micros")
    'startTimeMicros'
    >>> list_member("int64_val"), KIND_OF_MEMBER["sfixed64_val"]
    ('int64_list', 'int64')
"""

from __future__ import annotations

from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.schema.protobuf.et_def_pb2 import AttributeProto

#: Top-level keys of the JSON document form (``{"globalMetadata": {...}, "nodes": [...]}``).
DOC_METADATA_KEY = "globalMetadata"
DOC_NODES_KEY = "nodes"

#: proto3 JSON spellings of the non-finite floating point values.
JSON_NAN, JSON_INF, JSON_NEG_INF = "NaN", "Infinity", "-Infinity"

#: Value kind of each scalar member of the ``AttributeProto.value`` oneof (the protobuf wire
#: variants of one kind, e.g. ``sint64``/``sfixed64``, share their JSON rendering).
KIND_OF_MEMBER: dict[str, str] = {
    "double_val": "double",
    "float_val": "float",
    "int32_val": "int32",
    "sint32_val": "int32",
    "sfixed32_val": "int32",
    "uint32_val": "uint32",
    "fixed32_val": "uint32",
    "int64_val": "int64",
    "sint64_val": "int64",
    "sfixed64_val": "int64",
    "uint64_val": "uint64",
    "fixed64_val": "uint64",
    "bool_val": "bool",
    "string_val": "string",
    "bytes_val": "bytes",
}

_SCALAR_SUFFIX, _LIST_SUFFIX = "_val", "_list"


def list_member(member: str) -> str:
    """The ``*_list`` oneof member holding repeated values of the scalar member ``member``."""
    return member[: -len(_SCALAR_SUFFIX)] + _LIST_SUFFIX


#: ``*_list`` oneof member -> its scalar member.
LIST_MEMBERS: dict[str, str] = {list_member(member): member for member in KIND_OF_MEMBER}
assert set(KIND_OF_MEMBER) | set(LIST_MEMBERS) == {
    f.name for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields
}


def json_name(field_name: str) -> str:
    """The lowerCamelCase JSON key of a protobuf field (what protoc derives as ``json_name``)."""
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


NODE_TYPE_NAMES: dict[int, str] = {v.number: v.name for v in pb.NodeType.DESCRIPTOR.values}
NODE_TYPE_NUMBERS: dict[str, int] = {name: number for number, name in NODE_TYPE_NAMES.items()}
