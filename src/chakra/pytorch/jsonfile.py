"""Reading the big JSON files PyTorch writes: bytes (plain, gzip or zstd), a GC pause for decoding, and
decode errors that name the line and column."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from chakra import io
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError

_BYTE_POS = re.compile(r"byte (\d+)")
T = TypeVar("T")


def read_json_bytes(path: Path, what: str) -> bytes:
    """The bytes of a JSON file, decompressed when it is gzip or zstd; ``what`` names the expected
    file kind in errors."""
    return io.read_decompressed(path, what=what)


def decode_json(data: bytes, decode: Callable[[bytes], T], *, path: Path, kind: str, hint: str) -> T:
    """``decode(data)`` with the collector paused; a decode error names ``kind`` (``"a Kineto
    trace"``), the line and column, and ``hint``."""
    try:
        with gc_paused():
            return decode(data)
    except msgspec.DecodeError as exc:
        raise ChakraFormatError(f"not {kind}: {exc}{position_of(str(exc), data)}", path=path, hint=hint) from None


def position_of(message: str, data: bytes) -> str:
    """``" (line L, column C)"`` for the byte offset a decoder's error message names, else ``""``."""
    match = _BYTE_POS.search(message)
    if match is None:
        return ""
    pos = int(match.group(1))
    line = data.count(b"\n", 0, pos) + 1
    column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f" (line {line}, column {column})"
