"""Reading one configuration file: its text as JSON or YAML, then typed by a msgspec struct.

A loader declares the keys of its file as a :class:`msgspec.Struct` (types, defaults, bounds, and in
``Meta(description=...)`` why a bound matters) and calls :meth:`ConfigSource.decode`. Every problem
becomes one :class:`~chakra.errors.ChakraInputError` naming the file, the key (and dimension), the
value as written, and the override when one supplied it, with a fix hint::

    system.json: local-mem-bw = 'fast' is not a finite number (hint: write a plain number)
    net.yml: bandwidth[0] (dimension 0) = 0 must be > 0: every message would take forever (...)

What a type cannot say (ASTRA-sim's exact spellings, keys that depend on each other) the loaders
check on the typed values with :meth:`ConfigSource.choice` and :meth:`ConfigSource.error`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from chakra.documents import parse_json, parse_yaml, read_text
from chakra.errors import ChakraInputError

S = TypeVar("S", bound=msgspec.Struct)

#: The largest finite float: a number bounded by it refuses infinity (NaN fails every bound), so a
#: struct field ``Annotated[float, Meta(le=FINITE_MAX)]`` takes finite numbers only.
FINITE_MAX = sys.float_info.max
#: A finite number >= 0 (a delay, a bandwidth that may be 0), and one > 0.
NonNegative = Annotated[float, msgspec.Meta(ge=0, le=FINITE_MAX)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=FINITE_MAX)]
#: A whole number > 0 (a count of chunks, nodes, NPUs).
Count = Annotated[int, msgspec.Meta(gt=0)]

# "Expected `float`, got `str` - at `$.bandwidth[0]`": msgspec's problem and where it is
_AT = re.compile(r"^(?P<problem>.*) - at `\$\.(?P<key>[\w-]+)(?:\[(?P<index>\d+)\])?`$")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]+)`")
_WRONG_TYPE = re.compile(r"^Expected `[^`]+`, got `")


@dataclass(frozen=True)
class ConfigSource:
    """One configuration file being read: its path, what it is (``"system configuration"``), the keys an
    override replaced, and for each required key why it is needed and how to add it (named in errors)."""

    path: Path
    what: str
    overridden: frozenset[str] = frozenset()
    required: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # key -> (why, hint)

    def describe(self, key: str, value: Any, index: int | None = None) -> str:
        """``key = value`` (``key[i] (dimension i) = value`` in a per-dimension list), marked when overridden."""
        label = key if index is None else f"{key}[{index}] (dimension {index})"
        source = " (set by override)" if key in self.overridden else ""
        return f"{label} = {value!r}{source}"

    def error(self, message: str, hint: str | None = None) -> ChakraInputError:
        return ChakraInputError(message, path=self.path, hint=hint)

    def decode(self, raw: Mapping[str, Any], schema: type[S], *, numbers_as_text: bool = False) -> S:
        """``raw`` typed as ``schema``; keys the schema lacks are ignored (the loader reports them).

        ``numbers_as_text``: a string that reads as a number is one (YAML: ASTRA-sim's yaml-cpp takes
        ``"1e9"`` and a quoted ``"50"`` as numbers, PyYAML as strings); JSON numbers must be numbers.
        """
        if not numbers_as_text:
            raw = _whole_floats_as_integers(raw, schema)
        try:
            return msgspec.convert(raw, type=schema, strict=not numbers_as_text)
        except msgspec.ValidationError as exc:
            raise self._problem(str(exc), raw, schema) from None
        except UnicodeEncodeError:  # a JSON escape of half a UTF-16 pair ("\udcff") is no text
            raise self.error(
                f"{self.what} holds text that is not Unicode (a lone surrogate escape such as \\udcff)",
                hint="write the text as plain characters",
            ) from None

    def choice(self, key: str, value: str, allowed: tuple[str, ...]) -> str:
        """``value`` when it is one of ``allowed`` as spelt (ASTRA-sim compares exactly), else the error."""
        if value in allowed:
            return value
        hint = f"use one of {', '.join(allowed)} (ASTRA-sim compares the spelling exactly)"
        same_but_case = [name for name in allowed if name.lower() == value.lower()]
        if same_but_case:
            hint = f'write "{same_but_case[0]}" (ASTRA-sim compares the spelling exactly)'
        raise self.error(f"{self.describe(key, value)} is not one of {', '.join(allowed)}", hint=hint)

    def _problem(self, problem: str, raw: Mapping[str, Any], schema: type[msgspec.Struct]) -> ChakraInputError:
        """The error for msgspec's message ``problem`` about ``raw``."""
        missing = _MISSING.match(problem)
        if missing:
            key = missing["key"]
            why, hint = self.required.get(key, ("ASTRA-sim needs it", f'add "{key}"'))
            return self.error(f"{self.what} has no {key!r}: {why}", hint=hint)
        at = _AT.match(problem)
        if at is None:  # msgspec names a place for every problem of a value
            return self.error(f"{self.what}: {problem}")
        key, index = at["key"], int(at["index"]) if at["index"] is not None else None
        value = raw[key] if index is None else raw[key][index]
        expected = _field_type(schema, key, item=index is not None)
        described = self.describe(key, value, index)
        if _WRONG_TYPE.match(at["problem"]) or "out of range" in at["problem"]:
            return self.error(f"{described} is not {_kind(expected)}", hint=_hint(key, expected))
        return self._out_of_bounds(described, key, value, expected)

    def _out_of_bounds(self, described: str, key: str, value: Any, expected: msgspec.inspect.Type) -> ChakraInputError:
        """The error for ``value``, of the right type, outside the bounds of ``expected``."""
        bare = _unwrap(expected)
        why = _description(expected)
        reason = f": {why}" if why else ""
        if isinstance(bare, msgspec.inspect.ListType):
            return self.error(f"{described} must not be empty{reason}", hint=_hint(key, expected))
        if isinstance(bare, msgspec.inspect.FloatType) and not _finite(value):
            return self.error(f"{described} is not a finite number", hint="write a plain number")
        if isinstance(bare, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
            relation, bound = (">", bare.gt) if bare.gt is not None else (">=", bare.ge)
            if bare.le is not None and float(value) > bare.le:
                relation, bound = "<=", bare.le
            return self.error(
                f"{described} must be {relation} {bound:g}{reason}", hint=f"write a number {relation} {bound:g}"
            )
        return self.error(f"{described} is not {_kind(expected)}", hint=_hint(key, expected))


def _finite(value: Any) -> bool:
    number = float(value)  # msgspec took it as a number, so it reads as one
    return -FINITE_MAX <= number <= FINITE_MAX


def _whole_floats_as_integers(raw: Mapping[str, Any], schema: type[msgspec.Struct]) -> dict[str, Any]:
    """``raw`` with ``4.0`` as ``4``, and true and false as 1 and 0, where the schema wants an
    integer: ASTRA-sim's JSON reader converts such values (measured: ``"roofline-enabled": true``
    runs as 1; a fraction it would truncate, and the schema refuses)."""
    integer_keys = {
        key
        for key, declared in _fields(schema).items()
        if isinstance(bare := _unwrap(declared), msgspec.inspect.IntType)
        or (isinstance(bare, msgspec.inspect.LiteralType) and all(isinstance(v, int) for v in bare.values))
    }
    return {
        key: int(value)
        if key in integer_keys and (isinstance(value, bool) or (isinstance(value, float) and value.is_integer()))
        else value
        for key, value in raw.items()
    }


def _fields(schema: type[msgspec.Struct]) -> dict[str, msgspec.inspect.Type]:
    """The declared type of each of ``schema``'s fields, by its name in the file."""
    info = msgspec.inspect.type_info(schema)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.encode_name: f.type for f in info.fields}


def _field_type(schema: type[msgspec.Struct], key: str, *, item: bool) -> msgspec.inspect.Type:
    """The declared type of ``schema``'s field named ``key`` in the file (of its items when ``item``)."""
    declared = _fields(schema)[key]
    if item:
        bare = _unwrap(declared)
        assert isinstance(bare, msgspec.inspect.ListType)
        return bare.item_type
    return declared


def _unwrap(declared: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """The type under its metadata, and the non-null member of ``X | None``."""
    if isinstance(declared, msgspec.inspect.Metadata):
        return _unwrap(declared.type)
    if isinstance(declared, msgspec.inspect.UnionType):
        members = [t for t in declared.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _unwrap(members[0]) if len(members) == 1 else declared
    return declared


def _json_schema(declared: msgspec.inspect.Type) -> dict[str, Any]:
    """What ``Meta(description=..., examples=...)`` says of a type (the outermost that says it)."""
    if isinstance(declared, msgspec.inspect.Metadata):
        return {**_json_schema(declared.type), **(declared.extra_json_schema or {})}
    if isinstance(declared, msgspec.inspect.UnionType):
        found: dict[str, Any] = {}
        for member in declared.types:
            found |= _json_schema(member)
        return found
    return {}


def _description(declared: msgspec.inspect.Type) -> str | None:
    return _json_schema(declared).get("description")


def _kind(declared: msgspec.inspect.Type) -> str:
    """What a value of the type is, in words: ``"a finite number"``, ``"0 or 1"``."""
    bare = _unwrap(declared)
    if isinstance(bare, msgspec.inspect.IntType):
        return "a whole number"
    if isinstance(bare, msgspec.inspect.FloatType):
        return "a finite number"
    if isinstance(bare, msgspec.inspect.StrType):
        return "a string"
    if isinstance(bare, msgspec.inspect.LiteralType):
        return " or ".join(map(str, bare.values))
    if isinstance(bare, msgspec.inspect.ListType):
        return "a non-empty list" if bare.min_length else "a list"
    return type(bare).__name__


def _hint(key: str, declared: msgspec.inspect.Type) -> str:
    """How to write a value of the type: the field's example when it has one."""
    examples = _json_schema(declared).get("examples")
    if examples:
        return f'write e.g. "{key}": {json.dumps(examples[0])}'
    bare = _unwrap(declared)
    if isinstance(bare, msgspec.inspect.IntType):
        return "write an integer"
    if isinstance(bare, msgspec.inspect.LiteralType):
        return f'write "{key}": {_kind(bare)}'
    if isinstance(bare, msgspec.inspect.StrType):
        return "write a name in quotes"
    return "write a plain number"


# ---------------------------------------------------------------------------------------------
# Files


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The file's JSON object (key -> value)."""
    document = parse_json(
        read_text(path, what),
        path,
        what,
        hint="ASTRA-sim reads strict JSON: keys in double quotes, no comments, no trailing commas",
    )
    if not isinstance(document, dict):
        raise ChakraInputError(
            f"{what} must be a JSON object of key -> value, not {type(document).__name__}",
            path=path,
            hint='write { "key": value, ... }',
        )
    return document


def read_yaml_mapping(path: Path, what: str, example: str) -> dict[str, Any]:
    """The file's YAML mapping (key -> value); ``example`` shows a good file in hints."""
    document = parse_yaml(read_text(path, what), path, what, hint=f"write one list per key, e.g. {example}")
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise ChakraInputError(
            f"{what} must be a YAML mapping of key -> list, found {found}", path=path, hint=f"write {example}"
        )
    return document
