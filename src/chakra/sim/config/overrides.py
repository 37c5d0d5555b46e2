"""Overrides of configuration keys from the command line: ``--set key=value`` (ASTRA-sim key spellings).

Example:
    >>> parse_override("bandwidth=[100, 50]")
    ('bandwidth', [100, 50])
    >>> parse_override("local-mem-bw=1e3")
    ('local-mem-bw', 1000.0)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from typing import Any

import yaml

from chakra.errors import ChakraInputError
from chakra.sim.config.reading import ConfigSource

# A number written as text: PyYAML reads "1e9" (no dot) as a string, a user typing it means the number.
_NUMERIC_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``"key=value"`` (``--set``) into the key and the value read as YAML (``8``, ``[100, 50]``, ``FIFO``)."""
    key, sep, value_text = text.partition("=")
    key, value_text = key.strip(), value_text.strip()
    if not sep or not key:
        raise ChakraInputError(
            f"override {text!r} is not key=value",
            hint="write e.g. preferred-dataset-splits=8 or bandwidth=[100,50]",
        )
    if not value_text:
        raise ChakraInputError(f"override {text!r} has no value after '='", hint=f"write e.g. {key}=8")
    try:
        value = yaml.safe_load(value_text)
    except yaml.YAMLError as exc:
        problem = (exc.problem if isinstance(exc, yaml.MarkedYAMLError) else None) or "not a YAML value"
        raise ChakraInputError(
            f"override {text!r}: cannot read the value: {problem}",
            hint="write a number, a word or a list such as [100,50]",
        ) from None
    return key, _numbers_from_text(value)


def _numbers_from_text(value: Any) -> Any:
    if isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [_numbers_from_text(item) for item in value]
    return value


def check_override_keys(source: ConfigSource, overrides: Mapping[str, Any], known: Collection[str]) -> None:
    """Refuse an override of a key ASTRA-sim does not read, suggesting the nearest known key.

    A mistyped key in a file is tolerated (ASTRA-sim ignores it), but one typed on the command line
    right now would silently do nothing.
    """
    for key in overrides:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise source.error(
                f"override {key!r} is not a key ASTRA-sim reads",
                hint=f'did you mean "{close[0]}"?' if close else "use the key spelling of the configuration file",
            )
