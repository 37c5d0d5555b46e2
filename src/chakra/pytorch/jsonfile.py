"""Reading the big JSON files PyTorch writes: bytes (plain or gzip), a GC pause for decoding, and
decode errors that name the line and column."""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chakra.errors import ChakraFormatError, ChakraInputError

GZIP_MAGIC = b"\x1f\x8b"
_BYTE_POS = re.compile(r"byte (\d+)")


def read_json_bytes(path: Path, what: str) -> bytes:
    """The bytes of a JSON file, gunzipped when it is gzip; ``what`` names the expected file kind."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ChakraInputError("no such file", path=path, hint="check the path") from None
    except IsADirectoryError:
        raise ChakraInputError(f"is a directory, not {what}", path=path) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot read: {exc.strerror}", path=path) from None
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ChakraFormatError(f"cannot decompress: {exc}", path=path, hint="the gzip file is corrupt") from None
    return data


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of acyclic objects are built: it would
    otherwise rescan them again and again (3x the decoding time, measured on host traces)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def position_of(message: str, data: bytes) -> str:
    """``" (line L, column C)"`` for the byte offset a decoder's error message names, else ``""``."""
    match = _BYTE_POS.search(message)
    if match is None:
        return ""
    pos = int(match.group(1))
    line = data.count(b"\n", 0, pos) + 1
    column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f" (line {line}, column {column})"
