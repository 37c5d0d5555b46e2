"""Sizes and counts as command lines write them: :func:`parse_size` reads ``64KiB``, ``1.5MiB``, ``10MB``
into bytes, :func:`parse_sizes` / :func:`parse_counts` comma-separated lists (each value once), and
:func:`format_size` names a size the way workload names show it (``1MiB``, ``96KiB``, ``1000B``).

Example:
    >>> parse_sizes("1KiB,1.5MiB,10MB")
    [1024, 1572864, 10000000]
    >>> format_size(1572864)
    '1536KiB'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import TypeVar

from chakra.errors import ChakraInputError

#: Binary units used in names (``1MiB``), largest first.
_NAME_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
#: Byte multipliers of the size suffixes accepted by :func:`parse_size` (lower case).
SIZE_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z]*)")
SIZE_HINT = "write bytes as a whole number with an optional unit: 512, 64KiB, 1MiB, 1.5GiB, 10MB"


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes from ``"65536"``, ``"64KiB"``, ``"1.5MiB"``, ``"10MB"`` (units: B, KiB, MiB, GiB, KB, MB, GB,
    any case); ``what`` names the option in the error."""
    match = _SIZE.fullmatch(text.strip())
    unit = match.group("unit").lower() if match else ""
    if match is None or (unit and unit not in SIZE_UNITS):
        raise ChakraInputError(f"bad {what} {text!r}", hint=SIZE_HINT)
    size = Fraction(match.group("number")) * SIZE_UNITS.get(unit, 1)
    if size.denominator != 1:
        raise ChakraInputError(f"bad {what} {text!r}: {float(size):g} is not a whole number of bytes", hint=SIZE_HINT)
    return int(size)


def parse_sizes(text: str, *, what: str = "sizes") -> list[int]:
    """Bytes from a comma-separated list (``"1KiB,1MiB"``); each size once."""
    return unique([parse_size(item, what=f"size in {what}") for item in _items(text, what)], what, format_size)


def parse_counts(text: str, *, what: str = "rank counts") -> list[int]:
    """Whole numbers from a comma-separated list (``"8,16"``); each once."""
    counts = []
    for item in _items(text, what):
        if not item.isdigit():
            raise ChakraInputError(
                f"bad count {item!r} in {what}", hint="write whole numbers separated by commas: 8,16"
            )
        counts.append(int(item))
    return unique(counts, what, str)


def format_size(size_bytes: int) -> str:
    """The exact size with the largest binary unit that divides it: ``1MiB``, ``96KiB``, ``1000B``."""
    for unit, factor in _NAME_UNITS:
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor}{unit}"
    return f"{size_bytes}B"


def _items(text: str, what: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ChakraInputError(f"empty item in {what} {text!r}", hint="separate values by single commas: 1KiB,1MiB")
    return items


_T = TypeVar("_T")


def unique(values: list[_T], what: str, show: Callable[[_T], str]) -> list[_T]:
    """``values`` as they are, refusing one given twice (``show`` writes it in the error, ``what`` the list)."""
    seen: set[_T] = set()
    for value in values:
        if value in seen:
            raise ChakraInputError(f"{show(value)} is given twice in {what}", hint="name each value once")
        seen.add(value)
    return values
