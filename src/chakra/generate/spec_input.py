"""Reading a workload spec: YAML/JSON spec files, mappings and overrides into typed, checked specs.

:func:`resolve_spec` is what ``chakra generate llm`` runs: a model preset or a spec file, the
overrides given on top (the command line's options), the default hardware, and
:func:`~chakra.generate.specs.check_spec`. Every value is converted to its field's type with
``msgspec.convert`` in strict mode: a quoted number (``tp: "2"``) is text and refused, never
guessed at; ``1`` is not ``true``. Wrong types, unknown keys (with the keys that exist and the
closest one), impossible values and unreadable files are each one :class:`ChakraInputError` naming
the file, the key and the value.

Example:
    >>> spec = spec_from_mapping({"model": {"preset": "llama3-8b", "layers": 4}, "parallel": {"tp": 2}})
    >>> spec.model.layers, spec.parallel.tp, spec.hardware is None
    (4, 2, True)
    >>> spec_from_mapping({"model": "llama3-8b", "parallel": {"tpp": 2}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    chakra.errors.ChakraInputError: unknown key parallel.tpp = 2; parallel takes cp, ... 'tp' for 'tpp'?)
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import msgspec

from chakra.documents import parse_json, parse_yaml, read_text
from chakra.errors import ChakraInputError, PathLike
from chakra.generate.specs import (
    HARDWARE_PRESETS,
    PRESETS,
    HardwareSpec,
    KeyNames,
    ModelSpec,
    ParallelSpec,
    WorkloadSpec,
    check_spec,
    closest,
    refuse_choice,
)

#: The nested sections of a spec and the dataclass each fills.
_SECTIONS: dict[str, type] = {"model": ModelSpec, "parallel": ParallelSpec, "hardware": HardwareSpec}

#: Sections of a spec that name a preset or hold a mapping, with the presets each takes.
_PRESET_SECTIONS: dict[str, tuple[type, Mapping[str, Any]]] = {
    "model": (ModelSpec, PRESETS),
    "hardware": (HardwareSpec, HARDWARE_PRESETS),
}

#: What a custom model or hardware mapping (one without ``preset:``) is called.
CUSTOM_NAME = "custom"

#: The hardware of roofline durations when neither the spec nor an override names one.
DEFAULT_HARDWARE = "h100"

#: How messages call the types of spec fields and of values read from a file.
_EXPECTED: dict[Any, str] = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "text",
    tuple[int, ...]: "a list of integers",
}
_FOUND: dict[type, str] = {
    bool: "true/false",
    int: "an integer",
    float: "a number",
    str: "text",
    list: "a list",
    dict: "a mapping",
}


def resolve_spec(
    preset: str | None = None,
    spec_path: PathLike | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    durations: bool = True,
) -> WorkloadSpec:
    """The checked spec of a model ``preset`` or a spec file, with ``overrides`` applied: what
    ``chakra generate llm`` generates.

    ``overrides`` map dotted keys of the spec (``"parallel.tp"``, ``"model.seq_len"``,
    ``"global_batch"``, ``"hardware"``: a preset name) to values, typed and checked like the file's;
    ``labels`` say how errors name them (the CLI passes ``{"parallel.tp": "--tp"}``). The roofline
    hardware is the override's, else the spec's, else :data:`DEFAULT_HARDWARE`; ``durations=False``
    drops it (no ``duration_micros``), as does ``hardware: null`` in the file.

    Example:
        >>> spec = resolve_spec("llama3-8b", overrides={"parallel.tp": 2, "model.seq_len": 1024})
        >>> spec.parallel.tp, spec.model.seq_len, spec.hardware.name
        (2, 1024, 'h100')
        >>> resolve_spec("llama3-8b", overrides={"parallel.tp": "2"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        chakra.errors.ChakraInputError: overrides['parallel.tp'] = '2' is text, not an integer (hint: write 2, ...)
    """
    if (preset is None) == (spec_path is None):
        raise ChakraInputError(
            "give a model preset or a spec file (one of them)", hint=f"presets: {', '.join(PRESETS)}"
        )
    data: dict[Any, Any] = {"model": preset} if spec_path is None else read_spec_file(spec_path)
    data.setdefault("hardware", DEFAULT_HARDWARE)
    overrides = dict(overrides or {})
    labels = {**{key: f"overrides[{key!r}] =" for key in overrides}, **(labels or {})}
    for key, value in overrides.items():
        _set_override(data, key, value, labels[key], spec_path)
    if not durations:
        data["hardware"] = None
    spec = spec_from_mapping(data, path=spec_path, labels=labels)
    check_spec(spec, path=spec_path, labels=labels)
    return spec


def load_spec(path: PathLike, *, check: bool = True) -> WorkloadSpec:
    """Read a YAML or JSON spec file (see :func:`spec_from_mapping`); with ``check=False`` the
    result is typed but not checked (a caller changing it further checks it then).

    Example file::

        model: {preset: llama3-70b, seq_len: 4096}
        parallel: {tp: 8, pp: 4, dp: 16, schedule: 1f1b}
        hardware: h100
        global_batch: 1024
    """
    spec = spec_from_mapping(read_spec_file(path), path=path)
    if check:
        check_spec(spec, path=path)
    return spec


def spec_from_mapping(
    data: Mapping[Any, Any], *, path: PathLike | None = None, labels: Mapping[str, str] | None = None
) -> WorkloadSpec:
    """A typed (not yet checked) :class:`WorkloadSpec` from a spec file's mapping.

    ``model`` and ``hardware`` are a preset name or a mapping of their fields (``preset:`` starts from
    a preset and changes the keys given; without it the name is ``custom``); ``parallel`` a mapping
    of :class:`ParallelSpec` fields; the other keys are :class:`WorkloadSpec` fields. Values keep
    their type: a quoted number (``tp: "2"``) is text and refused, not read as a number. Errors
    name ``path``, the key and the value; ``labels`` rename keys an override set.
    """
    say = KeyNames(labels)
    _refuse_unknown(data, WorkloadSpec, "", say, path)
    if data.get("model") is None:
        raise ChakraInputError("the spec has no model", path=path, hint="add model: PRESET or a model mapping")
    model = _preset_section(data, "model", say, path)
    hardware = None if data.get("hardware") is None else _preset_section(data, "hardware", say, path)
    parallel = _build(ParallelSpec, data.get("parallel", {}), "parallel.", say, path)
    top = {key: value for key, value in data.items() if key not in _SECTIONS}
    values = {**_typed_fields(WorkloadSpec, top, "", say, path), "model": model, "hardware": hardware}
    return WorkloadSpec(**values, parallel=parallel)


def read_spec_file(path: PathLike) -> dict[Any, Any]:
    """The mapping of a YAML or JSON spec file (JSON by the ``.json`` suffix); numbers such as
    ``989e12`` are numbers in YAML too (as YAML 1.2 reads them)."""
    path = Path(path)
    text = read_text(path, "spec")
    data = parse_json(text, path, "spec") if path.suffix == ".json" else parse_yaml(text, path, "spec")
    if not isinstance(data, dict):
        found = "an empty file" if data is None else _FOUND.get(type(data), type(data).__name__)
        raise ChakraInputError(
            f"a spec file holds a mapping of keys at the top, not {found}",
            path=path,
            hint="write model: PRESET, parallel: {tp: 2}, ... one key a line",
        )
    return data


def _set_override(data: dict[Any, Any], key: str, value: Any, label: str, path: PathLike | None) -> None:
    """Set the dotted ``key`` of the raw spec ``data`` (a preset name there becomes ``{preset: name}``)."""
    section, _, name = key.rpartition(".")
    keys = [f.name for f in fields(WorkloadSpec)] + [f"{s}.{f.name}" for s, c in _SECTIONS.items() for f in fields(c)]
    if key not in keys:
        close = closest(key, keys)
        raise ChakraInputError(
            f"{label} {value!r}: {key!r} is not a key of the spec",
            path=path,
            hint=f"did you mean {close!r}?" if close else "use a dotted key such as parallel.tp",
        )
    if not section:
        data[key] = value
        return
    current = data.get(section)
    if isinstance(current, str):
        data[section] = {"preset": current, name: value}
    elif isinstance(current, dict):
        data[section] = {**current, name: value}
    elif current is None:
        data[section] = {name: value}
    # any other value stays, for spec_from_mapping to refuse with the file's own key


def _preset_section(data: Mapping[Any, Any], key: str, say: KeyNames, path: PathLike | None) -> Any:
    """``model`` or ``hardware``: a preset by name, or a mapping of fields (``preset:`` plus changes)."""
    cls, presets = _PRESET_SECTIONS[key]
    value = data[key]
    if isinstance(value, str):
        return _preset(presets, value, say, key, path)
    if not isinstance(value, dict):
        raise ChakraInputError(
            f"{say(key, value)} is neither a preset name nor a mapping", path=path, hint=f"{key}: {next(iter(presets))}"
        )
    _refuse_unknown(value, cls, f"{key}.", say, path, extra=("preset",))
    values = dict(value)
    if "preset" in values:
        name = values.pop("preset")
        if not isinstance(name, str):
            raise ChakraInputError(f"{say(f'{key}.preset', name)} is not a preset name", path=path, hint="quote it")
        values = {**asdict(_preset(presets, name, say, f"{key}.preset", path)), **values}
    values.setdefault("name", CUSTOM_NAME)
    return _build(cls, values, f"{key}.", say, path)


def _preset(presets: Mapping[str, Any], name: str, say: KeyNames, key: str, path: PathLike | None) -> Any:
    refuse_choice(say, key, name, presets, path)
    return presets[name]


def _refuse_unknown(
    values: Mapping[Any, Any], cls: type, prefix: str, say: KeyNames, path: PathLike | None, extra: tuple[str, ...] = ()
) -> None:
    """Raise for keys of ``values`` that are not fields of ``cls`` (or ``extra``), with the known
    keys and the closest match of each unknown one."""
    known = sorted([f.name for f in fields(cls)] + list(extra))
    unknown = [key for key in values if key not in known]
    if not unknown:
        return
    shown = ", ".join(say(f"{prefix}{key}", values[key]) for key in unknown)
    guesses = [f"{close!r} for {key!r}" for key in unknown if (close := closest(str(key), known))]
    where = prefix.rstrip(".") or "a spec"
    raise ChakraInputError(
        f"unknown key{'s' if len(unknown) > 1 else ''} {shown}; {where} takes {', '.join(known)}",
        path=path,
        hint=f"did you mean {', '.join(guesses)}?" if guesses else "check the spelling",
    )


def _build(cls: type, values: Any, prefix: str, say: KeyNames, path: PathLike | None) -> Any:
    """An instance of the dataclass ``cls`` from a mapping of its fields, each converted to its type."""
    where = prefix.rstrip(".")
    if not isinstance(values, dict):
        raise ChakraInputError(f"{say(where, values)} is not a mapping", path=path, hint=f"{where}: {{key: value}}")
    _refuse_unknown(values, cls, prefix, say, path)
    return cls(**_typed_fields(cls, values, prefix, say, path))


def _typed_fields(cls: type, values: Mapping[str, Any], prefix: str, say: KeyNames, path: PathLike | None) -> dict:
    """``values`` converted to the field types of ``cls`` (strictly: no text for numbers, no 1 for
    true); every field without a default must be there."""
    types = _field_types(cls)
    missing = [f.name for f in fields(cls) if f.name in types and _required(f) and f.name not in values]
    if missing:
        where = prefix.rstrip(".") or "the spec"
        raise ChakraInputError(
            f"{where} has no {', '.join(missing)}", path=path, hint="give them, or start from a preset: (preset: NAME)"
        )
    typed: dict[str, Any] = {}
    for key, value in values.items():
        try:
            typed[key] = msgspec.convert(value, types[key], strict=True)
        except msgspec.ValidationError:
            raise _type_error(f"{prefix}{key}", value, types[key], say, path) from None
    return typed


def _type_error(key: str, value: Any, expected: Any, say: KeyNames, path: PathLike | None) -> ChakraInputError:
    """``KEY = VALUE is text, not an integer``; for a list, which of its items is not."""
    wanted = _EXPECTED.get(expected, str(expected))
    found = "empty (null)" if value is None else _FOUND.get(type(value), type(value).__name__)
    hint = f"write {wanted}"
    if isinstance(value, str) and expected in (int, float) and _is_number_text(value, expected):
        hint = f"write {value.strip()}, without quotes"
    if isinstance(value, list) and typing.get_origin(expected) is tuple:
        return ChakraInputError(f"{say(key, value)} is not {wanted}", path=path, hint=hint)
    return ChakraInputError(f"{say(key, value)} is {found}, not {wanted}", path=path, hint=hint)


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """The field types of ``cls`` the file may set: the nested sections are built on their own."""
    hints = typing.get_type_hints(cls)
    return {name: hint for name, hint in hints.items() if name not in _SECTIONS}


def _is_number_text(text: str, kind: type) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
