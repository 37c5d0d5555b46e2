"""``.et`` <-> JSON in protobuf's proto3 JSON mapping (the upstream ``chakra_jsonizer``'s rendering).

Three JSON forms (``reference/chakra-format.md`` §9.1):

* **document** (``jsonize`` default): one valid JSON document
  ``{"globalMetadata": {...}, "nodes": [ {...}, ... ]}``. It is written with **one node per line**
  (compact, not indented per field): any JSON parser reads it, the file stays about as small as
  compact JSON, and ``diff``/``grep`` work node by node. ``dejsonize`` reads it back streaming.
* **JSON Lines** (``lines=True``): the GlobalMetadata object on the first line, then one node per line.
* **upstream** (``upstream=True``): what upstream ``chakra_jsonizer`` writes, byte for byte:
  ``MessageToJson(msg)`` (2-space indent, ASCII only) of the metadata and of every node, back to
  back with nothing in between. Not valid JSON as a whole; ``dejsonize`` reads it too.

Each message uses the proto3 JSON mapping exactly as ``google.protobuf.json_format.MessageToDict``
produces it (lowerCamelCase keys, 64-bit integers as strings, enums by name, defaults omitted, oneof
members always present once set), but built by hand-written per-field code: about 4x faster than
``MessageToDict`` and 6x faster than ``ParseDict`` on typical nodes (measured on a 300k-node trace:
``jsonize`` about 80k nodes/s, ``dejsonize`` about 65k nodes/s, upstream ``chakra_jsonizer`` 10k).

Units are those of the format: ``durationMicros``/``startTimeMicros`` in µs, sizes in bytes.

Limits of JSON (why ``jsonize`` → ``dejsonize`` is byte-identical only for canonical files):

* protobuf fields unknown to this schema (e.g. a future ``Node`` field 11) have no JSON rendering;
  :func:`jsonize` counts the nodes that carry any (:class:`JsonizeResult`) and can refuse them.
* NaN payloads/signs are not kept (every NaN is written as ``"NaN"``).
* A file with non-canonical protobuf encoding (unpacked repeated fields, fields out of order) comes
  back canonically encoded: same messages, other bytes.

Examples:
    >>> from chakra import jsonize
    >>> jsonize.jsonize("llama.0.et", "llama.0.json")          # doctest: +SKIP
    JsonizeResult(nodes=3664, nodes_with_unknown_fields=0, metadata_has_unknown_fields=False)
    >>> jsonize.dejsonize("llama.0.json", "llama.0.et")        # doctest: +SKIP
    3664
"""

from __future__ import annotations

import base64
import binascii
import codecs
import gzip
import json
import math
import re
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import orjson
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from chakra import io
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, GlobalMetadata, IOInfo, Node

PathLike = io.PathLike

__all__ = [
    "JsonizeResult",
    "dejsonize",
    "dict_to_metadata",
    "dict_to_node",
    "has_unknown_fields",
    "iter_json_messages",
    "jsonize",
    "message_to_dict",
    "message_to_upstream_json",
]

# --------------------------------------------------------------------------------------------
# Constants

#: Top-level keys of the JSON document form.
DOC_METADATA_KEY = "globalMetadata"
DOC_NODES_KEY = "nodes"

#: Integer ranges of the protobuf scalar types (proto3 JSON accepts numbers or decimal strings).
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

#: Largest double that a float32 field stores as the largest finite float32 instead of infinity
#: (halfway to 2**128; protobuf rounds up to it). json_format prints FLT_MAX as ``3.4028235e+38``,
#: which is above FLT_MAX itself, so the limit for reading ``float`` values back must be this one.
FLOAT32_MAX_ROUNDED = float.fromhex("0x1.ffffffp+127")

#: json_format's shortest-float32 search starts at 6 significant digits (every float32 needs 6-9).
FLOAT32_MIN_DIGITS = 6

#: proto3 JSON spellings of the non-finite floating point values.
JSON_NAN, JSON_INF, JSON_NEG_INF = "NaN", "Infinity", "-Infinity"

#: Bytes read (and decoded to text) per refill of the streaming JSON reader.
JSON_READ_CHUNK_CHARS = 1 << 20

#: Longest line the streaming JSON reader hands to orjson whole; a longer value is parsed by
#: ``json.JSONDecoder.raw_decode`` instead (nodes are far shorter; see :meth:`_JsonText.value`).
JSON_FAST_LINE_CHARS = 1 << 16

#: How far into the text the first key of the document form is looked for.
JSON_DETECT_CHARS = 1 << 16

#: A JSON syntax error this close to the end of the buffered text may just be a value cut by the
#: buffer boundary (a literal, a number or a ``\\uXXXX`` escape is shorter), so more text is read.
JSON_TAIL_SLACK_CHARS = 32

#: Keys whose values are floats: their text in upstream mode must come from Python's ``json``
#: (``repr`` formatting), so orjson's output is not used for objects that contain them.
_FLOAT_KEY_MARKERS = (b'"doubleVal"', b'"floatVal"', b'"doubleList"', b'"floatList"')
#: Every ``*List`` attribute value has a key ending so (``"int64List":``), compact or indented.
_LIST_KEY_MARKER = b'List":'
#: ``json.dumps(ensure_ascii=True)`` escapes DEL (0x7f); orjson does not.
_ASCII_DEL = b"\x7f"

_UPSTREAM_INDENT = 2
_ORJSON_UPSTREAM = orjson.OPT_INDENT_2
_WS = re.compile(r"[ \t\n\r]*")
#: How our document form starts (its first key); anything else is read as objects back to back.
_DOCUMENT_START = re.compile(r'\{[ \t\n\r]*"(?:globalMetadata|nodes)"')
_F32 = struct.Struct("<f")
_UTF8_BOM = "\ufeff"

_NODE_TYPE_NAMES: dict[int, str] = {v.number: v.name for v in pb.NodeType.DESCRIPTOR.values}
_NODE_TYPE_NUMBERS: dict[str, int] = {name: number for number, name in _NODE_TYPE_NAMES.items()}


@dataclass(frozen=True)
class JsonizeResult:
    """What :func:`jsonize` wrote.

    ``nodes``: node count. ``nodes_with_unknown_fields``: nodes that carried protobuf fields unknown
    to this schema (anywhere inside the node); JSON cannot hold those fields, so they are missing
    from the output. ``metadata_has_unknown_fields``: the same for the GlobalMetadata record.
    """

    nodes: int
    nodes_with_unknown_fields: int = 0
    metadata_has_unknown_fields: bool = False

    @property
    def dropped_unknown_fields(self) -> bool:
        """Whether anything was lost because it had no JSON rendering."""
        return bool(self.nodes_with_unknown_fields or self.metadata_has_unknown_fields)


# --------------------------------------------------------------------------------------------
# message -> dict (the proto3 JSON mapping, as MessageToDict builds it)


def _nonfinite(value: float) -> str:
    if value != value:  # NaN
        return JSON_NAN
    return JSON_INF if value > 0 else JSON_NEG_INF


def _double_out(value: float) -> float | str:
    return value if value - value == 0.0 else _nonfinite(value)


def _float_out(value: float) -> float | str:
    """The shortest decimal that reads back as the same float32 (json_format's ToShortestFloat)."""
    if value - value != 0.0:
        return _nonfinite(value)
    digits = FLOAT32_MIN_DIGITS
    rounded = float(f"{value:.{digits}g}")
    while _F32.unpack(_F32.pack(rounded))[0] != value:
        digits += 1
        rounded = float(f"{value:.{digits}g}")
    return rounded


def _bytes_out(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _list_out(convert: Callable[[Any], Any] | None) -> Callable[[Any], dict[str, Any]]:
    """Converter of a ``*List`` message: ``{"values": [...]}``, or ``{}`` when empty."""
    if convert is None:

        def out(msg: Any) -> dict[str, Any]:
            values = msg.values[:]
            return {"values": values} if values else {}
    else:

        def out(msg: Any) -> dict[str, Any]:
            values = msg.values[:]
            return {"values": list(map(convert, values))} if values else {}

    return out


#: Value kinds of the ``AttributeProto.value`` oneof members.
_KIND_OF_MEMBER: dict[str, str] = {
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
_LIST_MEMBERS: dict[str, str] = {name[: -len("_val")] + "_list": name for name in _KIND_OF_MEMBER}

#: Converter to JSON per value kind (``None``: the Python value is already the JSON value).
_OUT_BY_KIND: dict[str, Callable[[Any], Any] | None] = {
    "double": _double_out,
    "float": _float_out,
    "int32": None,
    "uint32": None,
    "int64": str,
    "uint64": str,
    "bool": None,
    "string": None,
    "bytes": _bytes_out,
}


def _json_name(field_name: str) -> str:
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


#: oneof member -> (JSON key, converter of the value or None).
_ATTR_OUT: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}
for _member, _kind in _KIND_OF_MEMBER.items():
    _ATTR_OUT[_member] = (_json_name(_member), _OUT_BY_KIND[_kind])
    _list_member = _member[: -len("_val")] + "_list"
    _ATTR_OUT[_list_member] = (_json_name(_list_member), _list_out(_OUT_BY_KIND[_kind]))
assert set(_ATTR_OUT) == {f.name for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields}


def _attr_to_dict(attr: AttributeProto) -> dict[str, Any]:
    d: dict[str, Any] = {}
    v = attr.name
    if v:
        d["name"] = v
    v = attr.doc_string
    if v:
        d["docString"] = v
    member = attr.WhichOneof("value")
    if member is not None:
        key, convert = _ATTR_OUT[member]
        value = getattr(attr, member)
        d[key] = value if convert is None else convert(value)
    return d


def _io_to_dict(info: IOInfo) -> dict[str, str]:
    d: dict[str, str] = {}
    v = info.values
    if v:
        d["values"] = v
    v = info.shapes
    if v:
        d["shapes"] = v
    v = info.types
    if v:
        d["types"] = v
    return d


def _node_to_dict(node: Node) -> dict[str, Any]:
    d: dict[str, Any] = {}
    v: Any = node.id
    if v:
        d["id"] = str(v)
    v = node.name
    if v:
        d["name"] = v
    v = node.type
    if v:
        d["type"] = _NODE_TYPE_NAMES.get(v, v)  # open enum: unknown numbers stay numbers
    # repeated fields: slicing copies to a list in C, about 3x faster than iterating the container
    v = node.ctrl_deps[:]
    if v:
        d["ctrlDeps"] = list(map(str, v))
    v = node.data_deps[:]
    if v:
        d["dataDeps"] = list(map(str, v))
    v = node.start_time_micros
    if v:
        d["startTimeMicros"] = str(v)
    v = node.duration_micros
    if v:
        d["durationMicros"] = str(v)
    if node.HasField("inputs"):
        d["inputs"] = _io_to_dict(node.inputs)
    if node.HasField("outputs"):
        d["outputs"] = _io_to_dict(node.outputs)
    v = node.attr[:]
    if v:
        d["attr"] = list(map(_attr_to_dict, v))
    return d


def _metadata_to_dict(metadata: GlobalMetadata) -> dict[str, Any]:
    d: dict[str, Any] = {}
    v: Any = metadata.version
    if v:
        d["version"] = v
    v = metadata.attr[:]
    if v:
        d["attr"] = list(map(_attr_to_dict, v))
    return d


_TO_DICT: dict[type, Callable[[Any], dict[str, Any]]] = {
    Node: _node_to_dict,
    GlobalMetadata: _metadata_to_dict,
    AttributeProto: _attr_to_dict,
    IOInfo: _io_to_dict,
}
for _list_member in _LIST_MEMBERS:
    _list_type = AttributeProto.DESCRIPTOR.fields_by_name[_list_member].message_type
    assert _list_type is not None  # every *_list member is a message field
    _TO_DICT[getattr(pb, _list_type.name)] = _ATTR_OUT[_list_member][1]  # type: ignore[assignment]


def message_to_dict(msg: Message) -> dict[str, Any]:
    """``msg`` as a dict in the proto3 JSON mapping, equal to ``json_format.MessageToDict(msg)``.

    Handles ``Node``, ``GlobalMetadata``, ``AttributeProto``, ``IOInfo`` and the ``*List`` messages
    with per-field code; any other message goes through ``json_format`` itself. Fields unknown to
    the schema are left out (see :func:`has_unknown_fields`). Units are the message's own (µs, bytes).
    """
    convert = _TO_DICT.get(type(msg))
    if convert is None:
        return json_format.MessageToDict(msg)
    return convert(msg)


def _attr_has_unknown(attr: AttributeProto) -> bool:
    if len(UnknownFieldSet(attr)):
        return True
    member = attr.WhichOneof("value")
    return member in _LIST_MEMBERS and len(UnknownFieldSet(getattr(attr, member))) > 0


def has_unknown_fields(msg: Node | GlobalMetadata) -> bool:
    """Whether ``msg`` or any message inside it carries fields this schema does not know.

    Such fields survive ``.et`` round trips but have no JSON rendering. Cost: one
    ``UnknownFieldSet`` per (sub)message, about 0.1 µs each.
    """
    if len(UnknownFieldSet(msg)):
        return True
    if isinstance(msg, Node):
        if msg.HasField("inputs") and len(UnknownFieldSet(msg.inputs)):
            return True
        if msg.HasField("outputs") and len(UnknownFieldSet(msg.outputs)):
            return True
    return any(_attr_has_unknown(a) for a in msg.attr)


def message_to_upstream_json(msg: Message) -> str:
    """``json_format.MessageToJson(msg)`` exactly (2-space indent, ASCII), as upstream writes it."""
    return _upstream_bytes(message_to_dict(msg)).decode("ascii")


def _upstream_bytes(d: dict[str, Any]) -> bytes:
    """``json.dumps(d, indent=2)`` as bytes; orjson when its text is provably the same.

    orjson and ``json.dumps`` agree on layout and escapes for ASCII text without DEL and without
    floats (Python prints floats by ``repr``, e.g. ``1e-05``; orjson ``0.00001``).
    """
    text = orjson.dumps(d, option=_ORJSON_UPSTREAM)
    if text.isascii() and _ASCII_DEL not in text and not any(marker in text for marker in _FLOAT_KEY_MARKERS):
        return text
    return json.dumps(d, indent=_UPSTREAM_INDENT).encode("ascii")


# --------------------------------------------------------------------------------------------
# dict -> message
#
# Converters validate every value, so the message constructors they feed cannot fail, and raise
# ValueError (scalars) or _ValueError (carrying the JSON key path below the field) on bad input.
# Key paths are only built on the error path: the hot path does no string formatting.


class _ValueError(Exception):
    """Internal: a JSON value does not fit its field. ``key`` is the JSON key path below the field."""

    def __init__(self, key: str, message: str, hint: str | None):
        super().__init__(message)
        self.key = key
        self.message = message
        self.hint = hint


_INT_HINT = 'write integers as JSON numbers or decimal strings, e.g. 42 or "42" (64-bit ones as strings)'
_FLOAT_HINT = 'write floating point values as numbers or "NaN", "Infinity", "-Infinity"'
_STRING_HINT = "write text as a JSON string"
_DEPS_HINT = 'write a list of node ids, e.g. ["4", "7"]'
_TYPE_HINT = f"use one of {', '.join(_NODE_TYPE_NAMES.values())} or its number"
_JUST_STR = frozenset((str,))
_JUST_INT = frozenset((int,))


def _int_slow(value: Any) -> int:
    """json_format's integer rules: numbers or decimal strings, integral floats, no bools/spaces."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected an integer, got {_short(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(value)
    if isinstance(value, str):
        if " " in value:
            raise ValueError(f"expected an integer, got {_short(value)}")
        try:
            return int(value)
        except ValueError:
            try:
                as_float = float(value)
            except ValueError:
                raise ValueError(f"expected an integer, got {_short(value)}") from None
            if not as_float.is_integer():
                raise ValueError(f"expected an integer, got {_short(value)}") from None
            return int(as_float)
    return value


def _int_range(low: int, high: int, type_name: str) -> tuple[Callable[[Any], int], Callable[[Any], list[int]]]:
    """Converters of one integer type: scalar and list, with range checks."""

    def scalar(value: Any) -> int:
        kind = type(value)
        if kind is int:
            x = value
        elif kind is str and " " not in value:
            try:
                x = int(value)
            except ValueError:
                x = _int_slow(value)
        else:
            x = _int_slow(value)
        if low <= x <= high:
            return x
        raise ValueError(f"{_short(value)} is out of range for {type_name}")

    def many(values: Any) -> list[int]:
        if type(values) is not list:
            raise ValueError(f"expected a list, got {_short(values)}")
        if len(values) < 2:
            return [scalar(values[0])] if values else []
        kinds = set(map(type, values))
        if kinds == _JUST_STR and "".join(values).isdigit():
            xs = list(map(int, values))
        elif kinds == _JUST_INT:
            xs = values
        else:  # signs, exponents, mixed kinds: the scalar rules decide
            return list(map(scalar, values))
        if min(xs) < low or max(xs) > high:
            bad = next(v for v, x in zip(values, xs, strict=True) if not low <= x <= high)
            raise ValueError(f"{_short(bad)} is out of range for {type_name}")
        return xs

    return scalar, many


_uint64, _uint64_list = _int_range(0, UINT64_MAX, "uint64")
_int64, _int64_list = _int_range(INT64_MIN, INT64_MAX, "int64")
_uint32, _uint32_list = _int_range(0, UINT32_MAX, "uint32")
_int32, _int32_list = _int_range(INT32_MIN, INT32_MAX, "int32")


def _double(value: Any) -> float:
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        return float(value)
    if kind is str:
        if value == JSON_NAN:
            return math.nan
        if value == JSON_INF:
            return math.inf
        if value == JSON_NEG_INF:
            return -math.inf
        if value != "nan":  # json_format refuses this one spelling and takes whatever float() takes
            try:
                return float(value)
            except ValueError:
                pass
    raise ValueError(f"expected a number, got {_short(value)}")


def _float(value: Any) -> float:
    x = _double(value)
    if x - x == 0.0 and abs(x) > FLOAT32_MAX_ROUNDED:
        raise ValueError(f"{_short(value)} is out of range for float")
    return x


def _bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    raise ValueError(f"expected true or false, got {_short(value)}")


def _string(value: Any) -> str:
    if type(value) is str:
        return value
    raise ValueError(f"expected a string, got {_short(value)}")


def _bytes(value: Any) -> bytes:
    """Base64, standard or URL-safe alphabet, padding optional (as json_format accepts)."""
    if type(value) is not str:
        raise ValueError(f"expected a base64 string, got {_short(value)}")
    encoded = value.encode("ascii", "replace")
    try:
        return base64.urlsafe_b64decode(encoded + b"=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"expected a base64 string, got {_short(value)}") from None


def _map_list(convert: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    def many(values: Any) -> list[Any]:
        if type(values) is not list:
            raise ValueError(f"expected a list, got {_short(values)}")
        return list(map(convert, values))

    return many


def _string_list(values: Any) -> list[str]:
    if type(values) is not list:
        raise ValueError(f"expected a list, got {_short(values)}")
    if set(map(type, values)) <= _JUST_STR:
        return values
    return list(map(_string, values))


_IN_BY_KIND: dict[str, tuple[Callable[[Any], Any] | None, Callable[[Any], list[Any]], str]] = {
    "double": (_double, _map_list(_double), _FLOAT_HINT),
    "float": (_float, _map_list(_float), _FLOAT_HINT),
    "int32": (_int32, _int32_list, _INT_HINT),
    "uint32": (_uint32, _uint32_list, _INT_HINT),
    "int64": (_int64, _int64_list, _INT_HINT),
    "uint64": (_uint64, _uint64_list, _INT_HINT),
    "bool": (_bool, _map_list(_bool), "write booleans as true or false"),
    "string": (None, _string_list, _STRING_HINT),  # None: a str passes through unchanged
    "bytes": (_bytes, _map_list(_bytes), "write bytes as a base64 JSON string"),
}


def _list_in(many: Callable[[Any], list[Any]]) -> Callable[[Any], dict[str, list[Any]]]:
    """Converter of a ``*List`` message object ``{"values": [...]}`` (``{}`` = empty list)."""

    def convert(value: Any) -> dict[str, list[Any]]:
        if type(value) is not dict:
            raise ValueError(f'expected an object {{"values": [...]}}, got {_short(value)}')
        out: dict[str, list[Any]] = {}
        for key, values in value.items():
            if key != "values":
                raise ValueError(f'unknown key {key!r} (a list attribute holds only "values")')
            if values is not None:
                out["values"] = many(values)
        return out

    return convert


#: Attribute keys: JSON key (json name or proto field name) -> (field, converter or None for a
#: string passed through, is a member of the ``value`` oneof); hints per field.
_ATTR_SPECS: dict[str, tuple[str, Callable[[Any], Any] | None, bool]] = {
    "name": ("name", None, False),
    "docString": ("doc_string", None, False),
}
_ATTR_HINTS: dict[str, str] = {"name": _STRING_HINT, "doc_string": _STRING_HINT}
for _member, _kind in _KIND_OF_MEMBER.items():
    _scalar_in, _many_in, _hint = _IN_BY_KIND[_kind]
    _list_member = _member[: -len("_val")] + "_list"
    _ATTR_SPECS[_json_name(_member)] = (_member, _scalar_in, True)
    _ATTR_SPECS[_json_name(_list_member)] = (_list_member, _list_in(_many_in), True)
    _ATTR_HINTS[_member] = _ATTR_HINTS[_list_member] = _hint
for _spec in list(_ATTR_SPECS.values()):
    _ATTR_SPECS.setdefault(_spec[0], _spec)  # proto field names are accepted too (json_format does)
_ATTR_KNOWN = ", ".join(k for k in _ATTR_SPECS if "_" not in k)


def _attr_from_dict(value: Any) -> dict[str, Any]:
    """Constructor keywords of one ``AttributeProto`` from its JSON object."""
    if type(value) is not dict:
        raise _ValueError(
            "",
            f"expected an attribute object, got {_short(value)}",
            'write attributes as {"name": ..., "<kind>Val": ...}',
        )
    kw: dict[str, Any] = {}
    member = None
    for key, item in value.items():
        spec = _ATTR_SPECS.get(key)
        if spec is None:
            raise _ValueError(
                f".{key}",
                f"unknown attribute key {key!r}",
                f"an attribute has name, docString and one value key; known: {_ATTR_KNOWN}",
            )
        if item is None:  # JSON null: the field keeps its default (json_format's rule)
            continue
        field, convert, in_oneof = spec
        if in_oneof:
            if member is not None:
                raise _ValueError(
                    f".{key}",
                    f"attribute has two values ({member} and {field})",
                    "an attribute holds exactly one value key",
                )
            member = field
        elif field in kw:
            raise _ValueError(f".{key}", f"{field} given twice", "give each key once")
        if convert is None:
            if type(item) is not str:
                raise _ValueError(f".{key}", f"expected a string, got {_short(item)}", _STRING_HINT)
            kw[field] = item
        else:
            try:
                kw[field] = convert(item)
            except (ValueError, TypeError, OverflowError) as exc:
                raise _ValueError(f".{key}", str(exc), _ATTR_HINTS[field]) from None
    return kw


def _attrs_from(values: Any) -> list[dict[str, Any]]:
    if type(values) is not list:
        raise _ValueError(
            "",
            f"expected a list of attribute objects, got {_short(values)}",
            'write "attr": [{"name": ..., "<kind>Val": ...}, ...]',
        )
    try:
        return list(map(_attr_from_dict, values))
    except _ValueError:
        for i, item in enumerate(values):  # find which attribute failed, for the key path
            try:
                _attr_from_dict(item)
            except _ValueError as exc:
                raise _ValueError(f"[{i}]{exc.key}", exc.message, exc.hint) from None
        raise


_IO_KEYS = frozenset(f.name for f in IOInfo.DESCRIPTOR.fields)


def _io_from(value: Any) -> dict[str, str]:
    """Constructor keywords of an ``IOInfo`` (the JSON object itself when it is already valid)."""
    if type(value) is dict and value.keys() <= _IO_KEYS:
        for item in value.values():
            if type(item) is not str:
                break
        else:
            return value
    if type(value) is not dict:
        raise _ValueError(
            "", f"expected an object, got {_short(value)}", 'write {"values": "...", "shapes": "...", "types": "..."}'
        )
    out: dict[str, str] = {}
    for key, item in value.items():
        if key not in _IO_KEYS:
            raise _ValueError(f".{key}", f"unknown key {key!r}", "IOInfo has values, shapes and types")
        if item is None:
            continue
        if type(item) is not str:
            raise _ValueError(f".{key}", f"expected a string, got {_short(item)}", _STRING_HINT)
        out[key] = item
    return out


def _node_type(value: Any) -> int:
    if type(value) is str:
        number = _NODE_TYPE_NUMBERS.get(value)
        if number is not None:
            return number
    try:
        return _int32(value)  # open enum: unknown numbers are kept
    except ValueError:
        raise ValueError(f"unknown NodeType {_short(value)}") from None


#: Message keys: JSON key (json name or proto field name) -> (field, converter or None for a string
#: passed through); hints per field.
_NODE_SPECS: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "id": ("id", _uint64),
    "name": ("name", None),
    "type": ("type", _node_type),
    "ctrlDeps": ("ctrl_deps", _uint64_list),
    "dataDeps": ("data_deps", _uint64_list),
    "startTimeMicros": ("start_time_micros", _uint64),
    "durationMicros": ("duration_micros", _uint64),
    "inputs": ("inputs", _io_from),
    "outputs": ("outputs", _io_from),
    "attr": ("attr", _attrs_from),
}
_METADATA_SPECS: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "version": ("version", None),
    "attr": ("attr", _attrs_from),
}
_FIELD_HINTS: dict[str, str] = {
    "id": _INT_HINT,
    "name": _STRING_HINT,
    "type": _TYPE_HINT,
    "ctrl_deps": _DEPS_HINT,
    "data_deps": _DEPS_HINT,
    "start_time_micros": _INT_HINT + "; unit: µs",
    "duration_micros": _INT_HINT + "; unit: µs",
    "version": _STRING_HINT,
}
#: Proto field names accepted in place of the json names (json_format accepts both).
_NODE_ALIASES = {spec[0]: spec for spec in _NODE_SPECS.values()}
_METADATA_ALIASES = {spec[0]: spec for spec in _METADATA_SPECS.values()}
for _specs, _message in ((_NODE_SPECS, Node), (_METADATA_SPECS, GlobalMetadata)):
    assert {s[0] for s in _specs.values()} == {f.name for f in _message.DESCRIPTOR.fields}


def _message_kwargs(
    d: Any,
    specs: dict[str, tuple[str, Callable[[Any], Any] | None]],
    aliases: dict[str, tuple[str, Callable[[Any], Any] | None]],
    what: str,
    path: PathLike | None,
    node_index: int | None,
) -> dict[str, Any]:
    """Validated constructor keywords of a Node/GlobalMetadata from its JSON object."""
    if type(d) is not dict:
        raise ChakraFormatError(
            f"{what} must be a JSON object, got {type(d).__name__}: {_short(d)}",
            path=path,
            node_index=node_index,
            hint=f"each {what} is one JSON object",
        )
    kw: dict[str, Any] = {}
    key = None
    aliased = False
    try:
        for key, value in d.items():
            spec = specs.get(key)
            if spec is None:
                spec = aliases.get(key)
                if spec is None:
                    raise _ValueError("", f"{what} has no key {key!r}", f"known keys: {', '.join(specs)}")
                aliased = True
            if value is None:  # JSON null: the field keeps its default (json_format's rule)
                continue
            field, convert = spec
            if aliased and field in kw:  # a pair always has one alias: whichever comes second sees it
                raise _ValueError("", f"{field} given twice (json and proto field name)", "give each key once")
            if convert is None:
                if type(value) is not str:
                    raise ValueError(f"expected a string, got {_short(value)}")
                kw[field] = value
            else:
                kw[field] = convert(value)
    except _ValueError as exc:
        raise ChakraFormatError(
            f"JSON key {key}{exc.key!s}: {exc.message}",
            path=path,
            node_index=node_index,
            hint=exc.hint,
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:
        field = specs[key][0] if key in specs else ""
        raise ChakraFormatError(
            f"JSON key {key}: {exc}",
            path=path,
            node_index=node_index,
            hint=_FIELD_HINTS.get(field),
        ) from None
    return kw


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dict_to_node(d: dict[str, Any], *, path: PathLike | None = None, node_index: int | None = None) -> Node:
    """The ``Node`` of a proto3-JSON object (inverse of :func:`message_to_dict`; same bytes back).

    Accepts what ``json_format.ParseDict`` accepts for nodes: json or proto field names, integers
    as numbers or strings, enums by name or number, null for "default". Raises
    :class:`ChakraFormatError` naming ``path``, ``node_index`` and the JSON key for bad content.
    """
    return Node(**_message_kwargs(d, _NODE_SPECS, _NODE_ALIASES, "node", path, node_index))


def dict_to_metadata(d: dict[str, Any], *, path: PathLike | None = None) -> GlobalMetadata:
    """The ``GlobalMetadata`` of a proto3-JSON object (inverse of :func:`message_to_dict`)."""
    return GlobalMetadata(**_message_kwargs(d, _METADATA_SPECS, _METADATA_ALIASES, "GlobalMetadata", path, None))


# --------------------------------------------------------------------------------------------
# .et -> JSON


@contextmanager
def _output(dst: PathLike) -> Iterator[IO[bytes]]:
    """An atomically written output file, gzip/zstd compressed when its suffix says so."""
    kind = io.compression_for(dst)
    with io.AtomicFile(dst) as raw:
        if kind == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as sink:  # mtime=0: reproducible bytes
                yield sink  # type: ignore[misc]
        elif kind == "zstd":
            import zstandard

            with zstandard.ZstdCompressor().stream_writer(raw, closefd=False) as sink:
                yield sink  # type: ignore[misc]
        else:
            yield raw


def jsonize(
    src: PathLike,
    dst: PathLike,
    *,
    lines: bool = False,
    upstream: bool = False,
    unknown_fields: Literal["count", "error"] = "count",
) -> JsonizeResult:
    """Write the ``.et`` file ``src`` as JSON to ``dst``; stream, constant memory, atomic.

    ``lines=False``: one JSON document ``{"globalMetadata": {...}, "nodes": [...]}``, one node per
    line. ``lines=True``: JSON Lines (metadata object first). ``upstream=True``: the text of upstream
    ``chakra_jsonizer`` (``MessageToJson`` of each message back to back). A ``.gz``/``.zst`` suffix
    on ``dst`` compresses. ``unknown_fields``: ``"count"`` (report them in the result) or
    ``"error"`` (raise :class:`ChakraFormatError` at the first message that carries some).
    """
    if lines and upstream:
        raise ChakraInputError("lines and upstream exclude each other", hint="upstream text is concatenated objects")
    if unknown_fields not in ("count", "error"):
        raise ChakraInputError(f"unknown_fields must be 'count' or 'error', not {unknown_fields!r}")
    strict = unknown_fields == "error"
    dumps = orjson.dumps
    render = _upstream_bytes if upstream else dumps
    unknown_nodes = 0
    with io.EtReader(src) as reader, _output(dst) as out:
        metadata = reader.metadata
        metadata_unknown = has_unknown_fields(metadata)
        if metadata_unknown and strict:
            raise _unknown_error(src, None)
        meta_dict = _metadata_to_dict(metadata)
        if upstream:
            out.write(_upstream_bytes(meta_dict))
        elif lines:
            out.write(dumps(meta_dict) + b"\n")
        else:
            out.write(
                b'{"' + DOC_METADATA_KEY.encode() + b'":' + dumps(meta_dict) + b',\n"' + DOC_NODES_KEY.encode() + b'":['
            )
        index = 0
        separator = b"\n"  # before the first node; ",\n" between nodes of the document
        for batch in reader.batches():
            parts: list[bytes] = []
            for node in batch:
                text = render(_node_to_dict(node))
                if len(UnknownFieldSet(node)) or _nested_unknown(node, text):
                    if strict:
                        raise _unknown_error(src, index)
                    unknown_nodes += 1
                parts.append(text)
                index += 1
            if not parts:
                continue
            if upstream:
                out.write(b"".join(parts))
            elif lines:
                out.write(b"\n".join(parts) + b"\n")
            else:
                out.write(separator + b",\n".join(parts))
                separator = b",\n"
        if not upstream and not lines:
            out.write(b"\n]}\n")
    return JsonizeResult(index, unknown_nodes, metadata_unknown)


def _nested_unknown(node: Node, text: bytes) -> bool:
    """Whether a message inside ``node`` carries unknown fields (``text``: the node's JSON, whose
    keys tell cheaply whether any ``*List`` message is there to check)."""
    if node.HasField("inputs") and len(UnknownFieldSet(node.inputs)):
        return True
    if node.HasField("outputs") and len(UnknownFieldSet(node.outputs)):
        return True
    attrs = node.attr[:]
    if any(map(len, map(UnknownFieldSet, attrs))):
        return True
    return _LIST_KEY_MARKER in text and any(_attr_has_unknown(a) for a in attrs)


def _unknown_error(src: PathLike, node_index: int | None) -> ChakraFormatError:
    return ChakraFormatError(
        "carries protobuf fields unknown to this schema, which JSON cannot represent",
        path=src,
        node_index=node_index,
        hint="keep the .et file, or jsonize with unknown_fields='count' to drop them",
    )


# --------------------------------------------------------------------------------------------
# JSON -> .et


class _JsonText:
    """Incremental reader of JSON values from a text file, with line/column/byte positions for errors.

    Values are parsed one at a time, so memory is bounded by the largest single value (a node):
    a value that ends its line is parsed by orjson (our own document and JSON Lines layouts), any
    other by ``json.JSONDecoder.raw_decode`` (indented or concatenated objects).
    """

    def __init__(self, path: PathLike):
        self.path = Path(path)
        self._stream, _ = io.open_decompressed(self.path, what="a JSON file")
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._raw_decode = json.JSONDecoder().raw_decode
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._started = False
        self._line_base = 0  # newlines before buf[0]
        self._col_base = 0  # characters between the last newline and buf[0]
        self._byte_base = 0  # bytes of the decoded stream before buf[0]
        self._bytes_read = 0  # bytes of the (decompressed) stream read so far
        self._dropped_chars = 0  # characters before buf[0]: absolute position = _dropped_chars + pos

    def close(self) -> None:
        self._stream.close()

    # -- buffer ----------------------------------------------------------------------------
    def _read_more(self, want_chars: int | None = None) -> bool:
        """Drop the consumed text and append at least ``want_chars`` more (default: one chunk).

        Returns False at end of file (nothing more to read)."""
        if self.eof:
            return False
        chunk_chars = JSON_READ_CHUNK_CHARS  # read at call time, so tests can shrink it
        want_chars = want_chars or chunk_chars
        if self.pos:
            dropped = self.buf[: self.pos]
            newlines = dropped.count("\n")
            self._line_base += newlines
            last = dropped.rfind("\n")
            self._col_base = len(dropped) - last - 1 if last >= 0 else self._col_base + len(dropped)
            self._byte_base += len(dropped) if dropped.isascii() else len(dropped.encode("utf-8", "surrogatepass"))
            self._dropped_chars += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        pieces = [self.buf]
        got = 0
        while got < want_chars:
            pending = len(self._decoder.getstate()[0])  # bytes of a character cut by the last chunk
            try:
                chunk = self._stream.read(max(want_chars - got, chunk_chars))
            except io.DECOMPRESS_ERRORS as exc:
                raise ChakraFormatError(
                    f"cannot decompress: {exc}",
                    path=self.path,
                    offset=self._bytes_read,
                    hint="the compressed file is truncated or corrupt",
                ) from None
            self._bytes_read += len(chunk)
            try:
                text = self._decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                raise ChakraFormatError(
                    f"not UTF-8 text ({exc.reason})",
                    path=self.path,
                    offset=self._bytes_read - len(chunk) - pending + exc.start,
                    hint="JSON files must be UTF-8; is this a binary .et file? (use jsonize for .et -> JSON)",
                ) from None
            if not self._started and (text or not chunk):
                self._started = True
                if text.startswith(_UTF8_BOM):
                    text = text[1:]
                    self._byte_base += len(_UTF8_BOM.encode("utf-8"))
            pieces.append(text)
            got += len(text)
            if not chunk:
                self.eof = True
                break
        self.buf = "".join(pieces)
        return got > 0

    def peek(self) -> str | None:
        """The next non-whitespace character (``pos`` moves onto it), None at end of file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._read_more():
                return None

    # -- values ----------------------------------------------------------------------------
    def value(self, node_index: int | None) -> Any:
        """Parse the JSON value at ``pos`` (after :meth:`peek`) and move past it.

        Fast path: the value ends its line (our layouts), so orjson parses the line. Lines longer
        than ``JSON_FAST_LINE_CHARS`` (e.g. a whole document on one line) go to ``raw_decode``,
        so no text is scanned or copied more than a bounded number of times.
        """
        limit = JSON_FAST_LINE_CHARS
        newline = self.buf.find("\n", self.pos, self.pos + limit)
        while newline < 0 and not self.eof and len(self.buf) - self.pos < limit:
            searched = len(self.buf) - self.pos
            self._read_more()
            newline = self.buf.find("\n", self.pos + searched, self.pos + limit)
        if newline < 0:
            if len(self.buf) - self.pos >= limit:
                return self._slow_value(node_index)
            newline = len(self.buf)  # end of file ends the last line
        end = newline
        buf = self.buf
        while end > self.pos and buf[end - 1] in " \t\r":
            end -= 1
        if end > self.pos and buf[end - 1] == ",":
            end -= 1
        try:
            result = orjson.loads(buf[self.pos : end])
        except orjson.JSONDecodeError:
            return self._slow_value(node_index)
        self.pos = end
        return result

    def _slow_value(self, node_index: int | None) -> Any:
        while True:
            try:
                result, end = self._raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - JSON_TAIL_SLACK_CHARS or exc.msg.startswith("Unterminated")
                if cut and self._read_more(max(len(self.buf), JSON_READ_CHUNK_CHARS)):
                    continue
                raise self.error(f"invalid JSON: {exc.msg}", exc.pos, node_index) from None
            except RecursionError:
                raise self.error("invalid JSON: nested too deeply", self.pos, node_index) from None
            # a number or literal that ends the buffer may continue in the next chunk
            if end == len(self.buf) and not self.eof and self.buf[end - 1] not in '}]"' and self._read_more():
                continue
            self.pos = end
            return result

    def string(self, node_index: int | None) -> str:
        """A JSON string at ``pos`` (an object key)."""
        value = self.value(node_index) if self.buf.startswith('"', self.pos) else None
        if not isinstance(value, str):
            raise self.error("expected a string key", self.pos, node_index)
        return value

    def expect(self, chars: str, what: str, node_index: int | None) -> str:
        """Consume one of ``chars`` (after whitespace) and return it, or raise naming ``what``."""
        char = self.peek()
        if char is None or char not in chars:
            found = "end of file" if char is None else repr(char)
            raise self.error(f"invalid JSON: expected {what}, found {found}", self.pos, node_index)
        self.pos += 1
        return char

    # -- errors ----------------------------------------------------------------------------
    def error(self, message: str, pos: int, node_index: int | None, hint: str | None = None) -> ChakraFormatError:
        """A ChakraFormatError at ``buf[pos]``: line and column (1-based, in characters) and byte offset."""
        buf = self.buf
        line = self._line_base + buf.count("\n", 0, pos) + 1
        last = buf.rfind("\n", 0, pos)
        column = pos - last if last >= 0 else self._col_base + pos + 1
        offset = self._byte_base + len(buf[:pos].encode("utf-8", "surrogatepass"))
        return ChakraFormatError(
            f"{message} (line {line}, column {column})",
            path=self.path,
            offset=offset,
            node_index=node_index,
            hint=hint or "the JSON is damaged or truncated; regenerate it with `chakra jsonize`",
        )

    # -- layouts ---------------------------------------------------------------------------
    def is_document(self) -> bool:
        """Whether the text is our document form: an object whose first key is globalMetadata or nodes."""
        if self.peek() != "{":
            return False
        # the first key must be buffered whole: read on until its closing quote (or give up)
        while (
            self.buf.count('"', self.pos, self.pos + JSON_DETECT_CHARS) < 2
            and len(self.buf) - self.pos < JSON_DETECT_CHARS
            and self._read_more()
        ):
            pass
        return _DOCUMENT_START.match(self.buf, self.pos) is not None

    def stream_messages(self) -> Iterator[dict[str, Any]]:
        """Objects back to back (JSON Lines or upstream concatenated): metadata first, then nodes."""
        index: int | None = None
        while self.peek() is not None:
            start = self._dropped_chars + self.pos  # absolute: value() may drop consumed text
            value = self.value(index)
            if type(value) is not dict:
                what = "the GlobalMetadata" if index is None else "a node"
                raise self.error(
                    f"expected {what} object, got {type(value).__name__}",
                    start - self._dropped_chars,
                    index,
                    hint="each message is one JSON object",
                )
            yield value
            index = 0 if index is None else index + 1

    def document_messages(self) -> Iterator[dict[str, Any]]:
        """The document form, streamed: the globalMetadata object, then every element of nodes."""
        self.expect("{", "'{'", None)
        seen: set[str] = set()
        while True:
            self.peek()
            key_pos = self.pos
            key = self.string(None)
            self.expect(":", "':' after a key", None)
            if key in seen:
                raise self.error(f"key {key!r} given twice", key_pos, None)
            seen.add(key)
            if key == DOC_METADATA_KEY:
                self.peek()
                metadata = self.value(None)
                if type(metadata) is not dict:
                    raise self.error("globalMetadata must be an object", key_pos, None)
                yield metadata
            elif key == DOC_NODES_KEY:
                if DOC_METADATA_KEY not in seen:
                    raise self.error(
                        "nodes come before globalMetadata",
                        key_pos,
                        None,
                        hint=f'put "{DOC_METADATA_KEY}" first (jsonize writes it so)',
                    )
                yield from self._document_nodes()
            else:
                raise self.error(
                    f"unknown top-level key {key!r}",
                    key_pos,
                    None,
                    hint=f'the document has only "{DOC_METADATA_KEY}" and "{DOC_NODES_KEY}"',
                )
            if self.expect(",}", "',' or '}'", None) == "}":
                break
        if self.peek() is not None:
            raise self.error("invalid JSON: extra data after the document", self.pos, None)

    def _document_nodes(self) -> Iterator[dict[str, Any]]:
        self.expect("[", "'[' (the nodes list)", 0)
        index = 0
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            self.peek()
            start = self._dropped_chars + self.pos  # absolute: value() may drop consumed text
            value = self.value(index)
            if type(value) is not dict:
                where = start - self._dropped_chars
                raise self.error(f"expected a node object, got {type(value).__name__}", where, index)
            yield value
            index += 1
            if self.expect(",]", "',' or ']' in the nodes list", index) == "]":
                return


def iter_json_messages(src: PathLike) -> Iterator[dict[str, Any]]:
    """Stream the message objects of any supported JSON form: the metadata dict, then each node dict.

    Forms: our document, JSON Lines, upstream concatenated ``MessageToJson`` objects; plain or
    ``.gz``/``.zst``. Raises :class:`ChakraFormatError` with line, column and byte offset for bad JSON.
    """
    text = _JsonText(src)
    try:
        if text.peek() is None:
            raise ChakraFormatError(
                "file is empty: expected JSON", path=text.path, hint="write it with `chakra jsonize` or chakra_jsonizer"
            )
        messages = text.document_messages() if text.is_document() else text.stream_messages()
        yield from messages
    finally:
        text.close()


#: Top-level keys that identify JSON files that are not Chakra JSON, and what they are.
_OTHER_JSON_FORMATS = (
    ("workload_graph", "the mlcommons C++ feeder's JSON workload form (`workload_graph`), not proto3 JSON of an ET"),
    ("traceEvents", "a Kineto/Chrome trace (GPU timeline), not a Chakra ET"),
    ("nodes", "a PyTorch execution trace (host trace JSON), not a Chakra ET; convert it with the PyTorch front end"),
)


def _refuse_other_json_formats(first: Any, src: PathLike) -> None:
    """Name the JSON formats that are often mistaken for Chakra JSON instead of failing on a key."""
    if type(first) is not dict:
        return
    for key, what in _OTHER_JSON_FORMATS:
        if key in first:
            raise ChakraFormatError(
                f"this is {what}",
                path=src,
                hint="dejsonize reads the output of `chakra jsonize` or upstream chakra_jsonizer",
            )


def dejsonize(src: PathLike, dst: PathLike, *, compress: str | None = "auto") -> int:
    """Write the ``.et`` file ``dst`` from JSON ``src`` (any form :func:`iter_json_messages` reads).

    The form is detected from the text. Streams (memory bounded by one node) and writes atomically
    through :class:`chakra.io.EtWriter` (``compress`` as there). ``jsonize`` then ``dejsonize`` gives
    the identical bytes for canonically encoded files. Returns the node count.
    """
    messages = iter_json_messages(src)
    try:
        first = next(messages, None)
        if first is None:
            raise ChakraFormatError(
                "no GlobalMetadata object found", path=src, hint="the first JSON object must be the GlobalMetadata"
            )
        _refuse_other_json_formats(first, src)
        metadata = dict_to_metadata(first, path=src)
        with io.EtWriter(dst, metadata, compress=compress) as writer:
            write = writer.write
            for index, d in enumerate(messages):
                write(Node(**_message_kwargs(d, _NODE_SPECS, _NODE_ALIASES, "node", src, index)))
        return writer.node_count
    finally:
        messages.close()  # type: ignore[attr-defined]
