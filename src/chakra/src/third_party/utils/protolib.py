"""Drop-in for upstream Chakra's ``chakra.src.third_party.utils.protolib``.

Scripts written against the upstream package (``encodeMessage``, ``decodeMessage``,
``openFileRd``) run unchanged with chakra-et. The framing is the same; two things differ on
purpose: a zero-length record is an empty message (upstream stops reading there, hiding every
later node), and a truncated or corrupt record raises :class:`chakra.errors.ChakraFormatError`
instead of a bare protobuf error. New code should use :mod:`chakra.io`, which is much faster.
"""

from __future__ import annotations

import gzip
from typing import IO

from google.protobuf.message import DecodeError, Message

from chakra.errors import ChakraFormatError
from chakra.io import GZIP_MAGIC, MAX_RECORD_BYTES, MAX_VARINT32_BYTES, READ_CHUNK_BYTES, encode_varint


def openFileRd(in_file: str) -> IO[bytes]:
    """Open ``in_file`` for reading, transparently gunzipping a gzip file."""
    raw = open(in_file, "rb")  # noqa: SIM115 - the caller closes it, as upstream
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def _read_varint32(in_file: IO[bytes]) -> int | None:
    """The next length prefix, or ``None`` at a clean end of file."""
    value = 0
    for i in range(MAX_VARINT32_BYTES):
        byte = in_file.read(1)
        if not byte:
            if i == 0:
                return None
            raise ChakraFormatError("file ends inside a length prefix", path=getattr(in_file, "name", None))
        value |= (byte[0] & 0x7F) << (7 * i)
        if byte[0] < 0x80:
            return value
    raise ChakraFormatError("length prefix is longer than 5 bytes", path=getattr(in_file, "name", None))


def decodeMessage(in_file: IO[bytes], message: Message) -> bool:
    """Read the next record into ``message``; ``False`` at end of file."""
    size = _read_varint32(in_file)
    if size is None:
        return False
    if size > MAX_RECORD_BYTES:
        raise ChakraFormatError(
            f"length prefix claims {size} bytes, more than protobuf allows",
            path=getattr(in_file, "name", None),
            hint="the file is corrupt",
        )
    # read in pieces: a corrupt prefix must not allocate what it claims
    pieces = []
    remaining = size
    while remaining:
        piece = in_file.read(min(remaining, READ_CHUNK_BYTES))
        if not piece:
            break
        pieces.append(piece)
        remaining -= len(piece)
    payload = b"".join(pieces)
    if len(payload) != size:
        raise ChakraFormatError(
            f"record claims {size} bytes but the file ends after {len(payload)}",
            path=getattr(in_file, "name", None),
            hint="the file is truncated",
        )
    try:
        message.ParseFromString(payload)
    except DecodeError as exc:
        raise ChakraFormatError(f"record does not parse ({exc})", path=getattr(in_file, "name", None)) from None
    return True


def encodeMessage(out_file: IO[bytes], message: Message) -> None:
    """Append ``message`` to ``out_file`` as one length-prefixed record."""
    payload = message.SerializeToString()
    out_file.write(encode_varint(len(payload)))
    out_file.write(payload)


# snake_case spellings, as upstream scripts import them under these names too
encode_message = encodeMessage
decode_message = decodeMessage
open_file_rd = openFileRd
