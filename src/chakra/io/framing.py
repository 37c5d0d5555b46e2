"""The bytes of an ``.et`` file: varint framing of records, the format's limits, and opening a file with
its compression (plain, gzip ``.gz``, zstandard ``.zst``; by suffix, else by magic number).

A file is ``varint32(len) GlobalMetadata`` followed by ``varint32(len) Node`` records until the end of
the file (``reference/chakra-format.md`` §2).

Example:
    >>> frame(b"abc"), encode_varint(300)
    (b'\\x03abc', b'\\xac\\x02')
"""

from __future__ import annotations

import gzip
import mmap
import os
import stat
import zlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

import zstandard

# encode_varint: base-128 varint, least significant group first (protobuf's length encoding; negative
# values as their 64-bit two's complement): the one varint writer, in C beside the node encoder
from chakra._encode import frame_records as _frame_records
from chakra._encode import varint as encode_varint
from chakra.errors import ChakraFormatError, ChakraInputError, PathLike

#: Version string written into ``GlobalMetadata.version`` when a producer leaves it empty: the
#: Chakra release whose ``et_def.proto`` this package carries (chakra-format.md §8).
FORMAT_VERSION = "1.0.0"

#: Bytes read from disk per refill of the streaming buffer. Large enough that the per-batch
#: overhead vanishes, small enough that streaming memory stays flat (measured in benchmarks/).
READ_CHUNK_BYTES = 1 << 20

#: Most bytes asked of a compressed stream in one ``read`` call (``read(n)`` allocates ``n`` up
#: front). A record length in a compressed file cannot be checked against the file size, so a
#: corrupt prefix may claim up to 2 GiB; reading it in pieces keeps memory proportional to the data.
MAX_READ_CALL_BYTES = 8 << 20

#: protobuf refuses messages of 2 GiB or more; a record claiming more is corrupt for every reader.
MAX_RECORD_BYTES = (1 << 31) - 1

#: A varint32 length prefix is at most 5 bytes long (7 payload bits per byte).
MAX_VARINT32_BYTES = 5

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compression_for(path: PathLike) -> str | None:
    """The compression a file name asks for: ``"gzip"``, ``"zstd"`` or ``None`` (plain)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".gz":
        return "gzip"
    if suffix in (".zst", ".zstd"):
        return "zstd"
    return None


#: Pre-encoded length prefixes for records under 16 KiB, which covers nearly every node.
SHORT_PREFIX_LIMIT = 1 << 14


@cache
def short_prefixes() -> tuple[bytes, ...]:
    """The length prefixes of records under ``SHORT_PREFIX_LIMIT`` bytes: one varint byte below 128,
    two below 16 Ki. Built directly (``encode_varint`` 16 Ki times cost 15 ms), and when first asked:
    at import it was 5 ms of the start-up of every command, most of which write no record this way."""
    return tuple(bytes((n,)) for n in range(0x80)) + tuple(
        bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x80, SHORT_PREFIX_LIMIT)
    )


def frame(payload: bytes) -> bytes:
    """One record: the varint32 length of ``payload`` followed by ``payload``."""
    n = len(payload)
    return (short_prefixes()[n] if n < SHORT_PREFIX_LIMIT else encode_varint(n)) + payload


def frame_all(payloads: list[bytes], path: PathLike | None = None) -> bytes:
    """The records of ``payloads`` one after the other (:func:`frame` each, in C). An empty payload
    is refused: a zero-length record is what the upstream Python reader takes for the end of a file.

    >>> frame_all([b"ab", b"c"])
    b'\\x02ab\\x01c'
    """
    try:
        return _frame_records(payloads)
    except ValueError as exc:
        index = int(str(exc).split()[1])
        raise ChakraInputError(
            f"node #{index} is empty (id 0, no name, INVALID_NODE) and would be a zero-length record, "
            "which the upstream Python reader takes for end of file",
            path=path,
            hint="give the node a name or type",
        ) from None


#: Nodes framed per batch (:func:`framed_batches`): the framed copy of a batch is all that is held
#: beside the payloads.
FRAME_BATCH_NODES = 8192


def framed_batches(payloads: list[bytes], path: PathLike | None = None) -> Iterator[tuple[bytes, int]]:
    """``payloads`` framed as records (:func:`frame_all`), a batch at a time, with each batch's count:
    what :meth:`chakra.io.EtWriter.write_framed` takes."""
    for first in range(0, len(payloads), FRAME_BATCH_NODES):
        batch = payloads[first : first + FRAME_BATCH_NODES]
        yield frame_all(batch, path), len(batch)


def read_record(stream: BinaryIO, path: PathLike | None = None) -> bytes | None:
    """The payload of the next record of ``stream``, ``None`` at a clean end of file; a record cut
    short, a prefix past 5 bytes or a length past :data:`MAX_RECORD_BYTES` is a
    :class:`ChakraFormatError` naming ``path``. Read in pieces: a corrupt prefix cannot allocate
    what it claims. (One record at a time, for callers that read records one by one from a stream;
    the readers of :mod:`chakra.io.reader` take a whole buffer at once.)"""
    size = 0
    for i in range(MAX_VARINT32_BYTES):
        byte = stream.read(1)
        if not byte:
            if i == 0:
                return None
            raise ChakraFormatError("file ends inside a length prefix", path=path)
        size |= (byte[0] & 0x7F) << (7 * i)
        if byte[0] < 0x80:
            break
    else:
        raise ChakraFormatError("length prefix is longer than 5 bytes", path=path)
    if size > MAX_RECORD_BYTES:
        raise ChakraFormatError(f"length prefix claims {size} bytes, more than protobuf allows", path=path,
                                hint="the file is corrupt")  # fmt: skip
    pieces = []
    remaining = size
    while remaining and (piece := stream.read(min(remaining, READ_CHUNK_BYTES))):
        pieces.append(piece)
        remaining -= len(piece)
    if remaining:
        raise ChakraFormatError(f"record claims {size} bytes but the file ends after {size - remaining}",
                                path=path, hint="the file is truncated")  # fmt: skip
    return b"".join(pieces)


#: What gzip and zstd raise for corrupt input (``zlib.error`` and ``ZstdError`` are no ``OSError``).
DECOMPRESS_ERRORS = (OSError, EOFError, ValueError, zlib.error, zstandard.ZstdError)


#: The compression-ratio guard: real traces compress 8 to 27 times (gzip and zstd, the shared data),
#: gzip at most 1,032 times (a file of zeros). Past ``BOMB_CHECK_BYTES`` decompressed, a stream that
#: grew more than ``MAX_COMPRESSION_RATIO`` times the bytes read is refused as a compression bomb.
MAX_COMPRESSION_RATIO = 250
BOMB_CHECK_BYTES = 64 << 20


class _ClosingStream:
    """A decompressing stream that also closes the file under it (``GzipFile`` leaves it open), and
    refuses to inflate past the compression-ratio guard."""

    def __init__(self, stream: Any, raw: BinaryIO, path: Path):
        self._stream = stream
        self._raw = raw
        self._path = path
        self._out = 0

    def read(self, n: int = -1) -> bytes:
        if n < 0:  # all of it, a chunk at a time: a bomb is stopped before it fills the memory
            chunks = []
            while chunk := self.read(READ_CHUNK_BYTES):
                chunks.append(chunk)
            return b"".join(chunks)
        data = self._stream.read(n)
        self._out += len(data)
        if self._out > BOMB_CHECK_BYTES:
            read_in = max(1, self._raw.tell())
            if self._out > MAX_COMPRESSION_RATIO * read_in:
                raise ChakraFormatError(
                    f"{read_in:,} compressed bytes inflate to over {self._out:,}: more than "
                    f"{MAX_COMPRESSION_RATIO} times (real traces compress under 30 times), a compression bomb",
                    path=self._path,
                    hint="if the file is genuine, decompress it first (gunzip, zstd -d) and pass the plain file",
                )
        return data

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._raw.close()

    def __enter__(self) -> _ClosingStream:  # used as the file it stands for (``with open(...) as f``)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_decompressed(path: PathLike, *, what: str) -> bytes:
    """All the bytes of ``path``, decompressed when it is gzip or zstd (:func:`open_decompressed`);
    a truncated or corrupt compressed file is a :class:`ChakraFormatError` naming it."""
    stream, size = open_decompressed(path, what=what)
    try:
        return _read_all(stream, size, path)
    finally:
        stream.close()


def _read_all(stream: BinaryIO, size: int | None, path: PathLike) -> bytes:
    """The rest of ``stream`` (``size``: a plain file's size, else None); a corrupt compressed stream
    is a :class:`ChakraFormatError` naming ``path``."""
    try:
        if size is None:
            return stream.read()
        # a plain file: read at its size into one buffer (an unsized read() after the format sniff
        # gathers chunks and joins them: the file twice in memory at its peak)
        data = stream.read(size)
        rest = stream.read()  # a file still being written may have grown
        return data + rest if rest else data
    except DECOMPRESS_ERRORS as exc:
        raise ChakraFormatError(
            f"cannot decompress: {exc}", path=path, hint="the compressed file is truncated or corrupt"
        ) from None


def read_mapped(path: PathLike, *, what: str) -> bytes | mmap.mmap:
    """The bytes of ``path`` as :func:`read_decompressed` gives them, a plain regular file mapped
    read-only rather than read: its pages are the page cache's, mapped as the parser reaches them,
    where a read copies the whole file into fresh memory that the kernel hands out a page at a time
    (mapped, a 400-layer TensorFlow recording's 24 MiB converted in 0.150 s, not 0.166 s). For readers
    of whole protobuf files; a compressed file or a pipe is read from the stream opened.

    A mapped file that another process truncates while it is read ends this process (SIGBUS), as for
    any program that maps its input: the files read so are recordings, written once.
    """
    stream, size = open_decompressed(path, what=what)
    try:
        if size:  # a plain regular file, not empty (an empty one cannot be mapped)
            return mmap.mmap(stream.fileno(), 0, prot=mmap.PROT_READ)
        return _read_all(stream, size, path)  # from the stream opened: a pipe is not opened twice
    finally:
        stream.close()


def open_decompressed(path: PathLike, *, what: str = "an .et file") -> tuple[BinaryIO, int | None]:
    """Open ``path`` for binary reading, decompressing gzip or zstd (by suffix, else by magic number).

    Returns ``(stream, size)``: ``size`` is the file size in bytes for plain files and ``None`` for
    compressed ones (whose length is unknown until read). Closing the stream closes the file.
    Raises :class:`ChakraInputError` for files that cannot be opened; ``what`` names the expected
    kind of file in that message.
    """
    path = Path(path)
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed through the returned stream
    except FileNotFoundError:
        raise ChakraInputError("no such file", path=path, hint="check the path") from None
    except IsADirectoryError:
        raise ChakraInputError(f"is a directory, not {what}", path=path) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot open: {exc.strerror}", path=path) from None
    kind = compression_for(path)
    if kind is None:
        head = raw.peek(len(ZSTD_MAGIC))[: len(ZSTD_MAGIC)]  # peek works on pipes too
        if head.startswith(ZSTD_MAGIC):
            kind = "zstd"
        elif head.startswith(GZIP_MAGIC) and len(head) > 2 and head[2] == 8:
            kind = "gzip"
    if kind == "gzip":
        return _ClosingStream(gzip.GzipFile(fileobj=raw, mode="rb"), raw, path), None  # type: ignore[return-value]
    if kind == "zstd":
        zstd = zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
        return _ClosingStream(zstd, raw, path), None  # type: ignore[return-value]
    info = os.fstat(raw.fileno())
    # only a regular file's size bounds its records; a pipe reports 0
    return raw, info.st_size if stat.S_ISREG(info.st_mode) else None
