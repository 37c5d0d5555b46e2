"""Drop-in for upstream Chakra's ``chakra.src.third_party.utils.protolib``.

Scripts written against the upstream package (``encodeMessage``, ``decodeMessage``,
``openFileRd``) run unchanged with chakra-et, through :mod:`chakra.io` (the one place that frames
records). Three things differ on purpose: a zero-length record is an empty message (upstream stops
reading there, hiding every later node), a truncated or corrupt record raises
:class:`chakra.errors.ChakraFormatError` instead of a bare protobuf error, and zstd files open as
gzip ones do. New code should use :mod:`chakra.io`, which is much faster.
"""

from __future__ import annotations

from typing import IO

from google.protobuf.message import DecodeError, Message

from chakra.errors import ChakraFormatError
from chakra.io.framing import frame, open_decompressed, read_record


def openFileRd(in_file: str) -> IO[bytes]:
    """Open ``in_file`` for reading, transparently decompressing a gzip or zstd file."""
    stream, _ = open_decompressed(in_file)
    return stream


def decodeMessage(in_file: IO[bytes], message: Message) -> bool:
    """Read the next record into ``message``; ``False`` at end of file."""
    path = getattr(in_file, "name", None)
    payload = read_record(in_file, path)  # type: ignore[arg-type]
    if payload is None:
        return False
    try:
        message.ParseFromString(payload)
    except DecodeError as exc:
        raise ChakraFormatError(f"record does not parse ({exc})", path=path) from None
    return True


def encodeMessage(out_file: IO[bytes], message: Message) -> None:
    """Append ``message`` to ``out_file`` as one length-prefixed record."""
    out_file.write(frame(message.SerializeToString()))


# snake_case spellings, as upstream scripts import them under these names too
encode_message = encodeMessage
decode_message = decodeMessage
open_file_rd = openFileRd
