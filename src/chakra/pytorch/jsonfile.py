"""Reading the big JSON files PyTorch writes: bytes (plain, gzip or zstd), a GC pause for decoding,
decode errors that name the line and column, and one big array read a piece at a time
(:class:`ArrayPieces`), so that the file's text and what it decodes to are never all in memory together."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from io import BufferedReader
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

import msgspec

from chakra import io
from chakra._json_scan import find_array, items_end, object_items_end
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError

_BYTE_POS = re.compile(r"byte (\d+)")
#: A character that is not JSON whitespace.
_JSON_TEXT = re.compile(rb"[^ \t\r\n]")
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


class NotStreamable(Exception):
    """The text is not an object whose array :class:`ArrayPieces` can read a piece at a time (the key
    is missing, escaped or not an array, the text is cut or is not JSON): read the whole file, whose
    decoder names what is wrong."""


class ArrayPieces(Generic[T]):
    """The array under top-level key ``key`` of the JSON object ``stream`` holds, decoded a piece at
    a time: :meth:`items` gives the items of each piece in order (about ``block_bytes`` of text
    each), ``decode`` turning a piece's text (a JSON array) into its items; then :attr:`rest` is the
    object with that array emptied. Raises :class:`NotStreamable` where the text does not allow it,
    and what ``decode`` raises for a piece that is not its items.

    A piece of an array of objects ends where the text looks like one object closing and another
    opening: a guess made without reading the text before it, which is right when the piece decodes
    (a cut inside a string or a nested value leaves it unclosed); where it does not, the piece ends
    where a scan of every byte says.

    Example:
        >>> import io as bytes_io
        >>> text = b'{"a": 1, "items": [{"b": "}, {"}, {"c": [2, 3]}, {}], "z": 0}'
        >>> reader = ArrayPieces(bytes_io.BytesIO(text), b"items", msgspec.json.decode, 16)
        >>> list(reader.items())
        [[{'b': '}, {'}], [{'c': [2, 3]}], [{}]]
        >>> reader.rest
        b'{"a": 1, "items":[], "z": 0}'
    """

    def __init__(
        self,
        stream: BinaryIO,
        key: bytes,
        decode: Callable[[bytearray], list[T]],
        block_bytes: int = io.READ_CHUNK_BYTES,
    ):
        self._stream = stream
        self._key = key
        self._decode = decode
        self._blocks = BlockReader(stream, block_bytes)
        self.rest = b""

    def items(self) -> Iterator[list[T]]:
        text = bytearray()
        while (found := find_array(text, self._key)) is None:
            if not self._blocks.more(text):
                raise NotStreamable("the text ends before the array")
        key_start, items_start = found
        head = bytes(text[:key_start])
        del text[:items_start]
        first = True
        while True:
            more = self._blocks.more(text)
            guess = object_items_end(text) if more else -1
            if guess > 0:
                try:
                    items = self._decode(_piece(text, guess))
                except msgspec.DecodeError:
                    pass  # a wrong guess (or a fault, which the scan below finds again)
                else:
                    del text[: guess + 1]
                    first = False
                    yield items
                    continue
            try:
                end, closed = items_end(text, 0)
            except ValueError as exc:
                raise NotStreamable(str(exc)) from None
            if end >= 0:
                blank = _JSON_TEXT.search(text, 0, end) is None
                if blank and not (closed and first):  # "[,", ", ,", ",]": not JSON
                    raise NotStreamable("an array item is missing")
                if not blank:
                    yield self._decode(_piece(text, end))
                first = False
                del text[: end + 1]
                if closed:
                    break
            elif not more:
                raise NotStreamable("the text ends inside the array")
        self.rest = head + b'"' + self._key + b'":[]' + bytes(text) + self._stream.read()


class BlockReader:
    """A stream's blocks of ``size`` bytes appended to a text, read into one buffer where the stream
    can (a plain file): a fresh block per read was new memory, faulted in, each time.

    Example:
        >>> import io as bytes_io
        >>> text, blocks = bytearray(b">"), BlockReader(bytes_io.BytesIO(b"abcde"), 2)
        >>> blocks.more(text), blocks.more(text), blocks.more(text), blocks.more(text), bytes(text)
        (True, True, True, False, b'>abcde')
    """

    def __init__(self, stream: BinaryIO, size: int):
        self._stream = stream
        self._size = size
        self._buffer: bytearray | None = None

    def more(self, text: bytearray) -> bool:
        """Appends the next block to ``text``; False at the stream's end."""
        if isinstance(self._stream, BufferedReader):
            if self._buffer is None:
                self._buffer = bytearray(self._size)
            count = self._stream.readinto(self._buffer)
            with memoryview(self._buffer) as view:
                text += view[:count]
            return count > 0
        block = self._stream.read(self._size)
        text += block
        return bool(block)


def _piece(text: bytearray, end: int) -> bytearray:
    """``text[:end]`` as a JSON array."""
    piece = bytearray(b"[")
    with memoryview(text) as view:
        piece += view[:end]
    piece += b"]"
    return piece
