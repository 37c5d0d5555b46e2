"""Framing of ``.et`` files: read, stream and write Chakra execution traces.

A file is ``varint32(len) GlobalMetadata`` followed by ``varint32(len) Node`` records until the end
of the file (``reference/chakra-format.md`` §2). Plain, gzip (``.gz``) and zstandard (``.zst``)
files are supported; the compression is chosen by the file name suffix, and a plain-named file whose
content starts with a gzip or zstd magic number is decompressed too. The modules: :mod:`.framing`
(records, limits, opening), :mod:`.reader`, :mod:`.writer`.

Examples:
    from chakra import io
    metadata, nodes = io.read("workload.0.et")
    for node in io.stream("workload.0.et"): ...
    with io.EtReader("workload.0.et") as reader:
        for node in reader: ...
    with io.EtWriter("out.0.et", metadata) as writer:
        writer.write(node)
"""

from chakra.errors import PathLike
from chakra.io.framing import (
    DECOMPRESS_ERRORS,
    FORMAT_VERSION,
    GZIP_MAGIC,
    MAX_READ_CALL_BYTES,
    MAX_RECORD_BYTES,
    MAX_VARINT32_BYTES,
    READ_CHUNK_BYTES,
    ZSTD_MAGIC,
    compression_for,
    encode_varint,
    frame,
    frame_all,
    framed_batches,
    open_decompressed,
    read_decompressed,
    read_mapped,
)
from chakra.io.reader import DecodedRecords, EtReader, read, read_metadata, stream
from chakra.io.writer import AtomicFile, EtWriter, write

__all__ = [
    "DECOMPRESS_ERRORS",
    "FORMAT_VERSION",
    "GZIP_MAGIC",
    "MAX_READ_CALL_BYTES",
    "MAX_RECORD_BYTES",
    "MAX_VARINT32_BYTES",
    "READ_CHUNK_BYTES",
    "ZSTD_MAGIC",
    "AtomicFile",
    "DecodedRecords",
    "EtReader",
    "EtWriter",
    "PathLike",
    "compression_for",
    "encode_varint",
    "frame",
    "frame_all",
    "framed_batches",
    "open_decompressed",
    "read",
    "read_decompressed",
    "read_mapped",
    "read_metadata",
    "stream",
    "write",
]
