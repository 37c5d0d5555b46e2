"""proto3 JSON -> messages: every value checked against its field, errors that name the JSON key.

Accepts what ``json_format.ParseDict`` accepts for Chakra messages (json or proto field names,
integers as numbers or decimal strings, enums by name or number, ``null`` for "default") and
builds the same message, about 6x faster. Converters check every value, so the message
constructors they feed cannot fail; they raise ``ValueError`` (scalars) or :class:`_ValueError`
(carrying the JSON key path below the field), which :func:`dict_to_node` turns into a
:class:`~chakra.errors.ChakraFormatError`. Key paths are only built on the error path: the hot
path does no string formatting.

Examples:
    >>> node = dict_to_node({"id": "7", "type": "COMP_NODE", "dataDeps": [5], "durationMicros": 12})
    >>> node.id, node.type, list(node.data_deps), node.duration_micros
    (7, 4, [5], 12)
    >>> try:
    ...     dict_to_node({"id": -1}, node_index=3)
    ... except ChakraFormatError as exc:
    ...     print(exc.node_index, exc.message)
    3 JSON key id: -1 is out of range for uint64
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable
from typing import Any

from chakra.errors import ChakraFormatError
from chakra.io import PathLike
from chakra.jsonize.mapping import (
    JSON_INF,
    JSON_NAN,
    JSON_NEG_INF,
    KIND_OF_MEMBER,
    NODE_TYPE_NAMES,
    NODE_TYPE_NUMBERS,
    json_name,
    list_member,
)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, IOInfo, Node

#: Integer ranges of the protobuf scalar types (proto3 JSON accepts numbers or decimal strings).
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

#: Largest double that a float32 field stores as the largest finite float32 instead of infinity
#: (halfway to 2**128; protobuf rounds up to it). json_format prints FLT_MAX as ``3.4028235e+38``,
#: which is above FLT_MAX itself, so the limit for reading ``float`` values back must be this one.
FLOAT32_MAX_ROUNDED = float.fromhex("0x1.ffffffp+127")

#: Longest ``repr`` of a bad value quoted in an error message.
SHORT_REPR_CHARS = 60


def _short(value: Any, limit: int = SHORT_REPR_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _ValueError(Exception):
    """Internal: a JSON value does not fit its field. ``key`` is the JSON key path below the field."""

    def __init__(self, key: str, message: str, hint: str | None):
        super().__init__(message)
        self.key = key
        self.message = message
        self.hint = hint


_INT_HINT = 'write integers as JSON numbers or decimal strings, e.g. 42 or "42" (64-bit ones as strings)'
_FLOAT_HINT = f'write floating point values as numbers or "{JSON_NAN}", "{JSON_INF}", "{JSON_NEG_INF}"'
_STRING_HINT = "write text as a JSON string"
_DEPS_HINT = 'write a list of node ids, e.g. ["4", "7"]'
_TYPE_HINT = f"use one of {', '.join(NODE_TYPE_NAMES.values())} or its number"
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
for _member, _kind in KIND_OF_MEMBER.items():
    _scalar_in, _many_in, _hint = _IN_BY_KIND[_kind]
    _list_member = list_member(_member)
    _ATTR_SPECS[json_name(_member)] = (_member, _scalar_in, True)
    _ATTR_SPECS[json_name(_list_member)] = (_list_member, _list_in(_many_in), True)
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
        if convert is None and type(item) is str:  # string fields: no call on the hot path
            kw[field] = item
            continue
        try:
            kw[field] = (convert or _string)(item)
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
        number = NODE_TYPE_NUMBERS.get(value)
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
            if convert is None and type(value) is str:  # string fields: no call on the hot path
                kw[field] = value
            else:
                kw[field] = (convert or _string)(value)
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


def dict_to_node(d: dict[str, Any], *, path: PathLike | None = None, node_index: int | None = None) -> Node:
    """The ``Node`` of a proto3-JSON object (inverse of :func:`message_to_dict`; same bytes back).

    Accepts what ``json_format.ParseDict`` accepts for nodes: json or proto field names, integers
    as numbers or strings, enums by name or number, null for "default". Raises
    :class:`ChakraFormatError` naming ``path``, ``node_index`` and the JSON key for bad content.
    """
    kw = _message_kwargs(d, _NODE_SPECS, _NODE_ALIASES, "node", path, node_index)
    try:
        return Node(**kw)
    except UnicodeEncodeError:
        raise _not_unicode(path, node_index) from None


def dict_to_metadata(d: dict[str, Any], *, path: PathLike | None = None) -> GlobalMetadata:
    """The ``GlobalMetadata`` of a proto3-JSON object (inverse of :func:`message_to_dict`)."""
    kw = _message_kwargs(d, _METADATA_SPECS, _METADATA_ALIASES, "GlobalMetadata", path, None)
    try:
        return GlobalMetadata(**kw)
    except UnicodeEncodeError:
        raise _not_unicode(path, None) from None


def _not_unicode(path: PathLike | None, node_index: int | None) -> ChakraFormatError:
    # a JSON escape of half a UTF-16 pair ("\udcff") parses, but protobuf strings must be UTF-8
    return ChakraFormatError(
        "a text field holds a lone surrogate escape (such as \\udcff), which is not Unicode",
        path=path,
        node_index=node_index,
        hint="write the text as plain characters",
    )
