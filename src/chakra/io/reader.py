"""Reading ``.et`` files: :class:`EtReader` streams one (metadata, then nodes, in bounded memory),
:func:`read` keeps every node, :func:`stream` yields them one at a time.

Speed: instead of one ``ParseFromString`` call per record, the reader gives protobuf a whole
buffer of records at once, parsed as ``repeated Node`` (see :func:`_node_batch_class`): the length
prefixes are already the wire format of such a field once a one-byte tag is put in front of each.
That moves the per-node work into C and keeps the nodes in one arena per buffer.
:meth:`EtReader.decoded_batches` hands the same buffers to the node table's C decoder instead.

Example:
    metadata, nodes = read("workload.0.et")
    for node in stream("workload.0.et"): ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass

from chakra import _columns
from chakra.errors import ChakraFormatError, PathLike
from chakra.io import framing
from chakra.io.framing import (
    DECOMPRESS_ERRORS,
    MAX_READ_CALL_BYTES,
    MAX_RECORD_BYTES,
    MAX_VARINT32_BYTES,
    open_decompressed,
)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

#: Zero-length records a file may hold before it is refused (:meth:`EtReader._count_empty`): real
#: files hold none; a few are read (and reported by ``validate``), a flood is not a trace.
MAX_EMPTY_RECORDS = 4096

#: The start of a JSON object or array (what host traces, Kineto traces and jsonized ETs begin
#: with), looked for in the first bytes of a file whose first record does not parse.
_JSON_START = re.compile(rb'\s*[\[{]\s*["\[{\]}]')
_JSON_SNIFF_BYTES = 64
#: Whitespace bytes a text file holds besides printable ASCII (tab, newline, carriage return).
_TEXT_CONTROL_BYTES = frozenset(b"\t\n\r")
#: Characters of a text file quoted in the error that refuses it.
_TEXT_SHOWN_BYTES = 40

#: Wire tag of field 1 with wire type LEN: put in front of each record it turns the framed file
#: into the serialization of ``message NodeBatch { repeated Node nodes = 1; }``.
_BATCH_FIELD_TAG = b"\x0a"


@cache
def _node_batch_class() -> Any:
    """Register ``chakra_internal.NodeBatch`` (``repeated Node nodes = 1``) in the default pool, when
    first asked (protobuf's descriptor module is a tenth of a command's start-up)."""
    from google.protobuf import descriptor_pb2

    pool = descriptor_pool.Default()
    name = "chakra_internal.NodeBatch"
    try:
        return GetMessageClass(pool.FindMessageTypeByName(name))
    except KeyError:
        pass
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="chakra_internal/node_batch.proto",
        package="chakra_internal",
        dependency=[Node.DESCRIPTOR.file.name],
        syntax="proto3",
    )
    message = file_proto.message_type.add(name="NodeBatch")
    message.field.add(
        name="nodes",
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=f".{Node.DESCRIPTOR.full_name}",
    )
    pool.Add(file_proto)
    return GetMessageClass(pool.FindMessageTypeByName(name))


#: A C decoder of framed records: ``(buf, pos, end) -> (stop, count, error, *results)``.
RecordDecoder = Callable[[bytes, int, int], tuple[Any, ...]]


class DecodedRecords(NamedTuple):
    """Complete records of one read buffer, decoded into rows by ``chakra._columns`` (layouts and
    meaning: :mod:`chakra.table`). ``buf`` is the buffer the rows' offsets point into; ``first_index``
    the index in the file of the first node; ``base_offset`` the file offset of ``buf[0]``."""

    buf: bytes
    base_offset: int
    first_index: int
    num_nodes: int
    nodes: bytes
    ctrl_deps: bytes
    data_deps: bytes
    attrs: bytes


class EtReader:
    """Stream one ``.et`` file: ``metadata`` first, then nodes in file order, in bounded memory.

    Iterating yields :class:`Node` messages; :meth:`batches` yields them a buffer at a time (a
    protobuf repeated container) for code that wants to amortize per-batch work. Memory stays
    flat in the node count as long as the caller does not keep the nodes: each node shares one
    arena with the others of its buffer (about 1 MiB of file).

    Raises :class:`ChakraFormatError` (file, byte offset, node index) for truncated or corrupt
    records and :class:`ChakraInputError` for files that cannot be opened.
    """

    def __init__(self, path: PathLike):
        self.path = Path(path)
        self.node_count = 0  # nodes yielded so far
        self._empty_floor = 0  # at least this many zero-length records were read (see _count_empty)
        self._stream, self._size = open_decompressed(self.path)
        self._buf = b""
        self._pos = 0  # position in _buf
        self._base = 0  # stream offset of _buf[0]
        self._eof = False
        self._pending_error: ChakraFormatError | None = None
        self.metadata_record = b""  # the GlobalMetadata record as framed in the file, for verbatim copies
        try:
            self.metadata: GlobalMetadata = self._read_metadata()
        except BaseException:
            self.close()
            raise

    # -- context manager -----------------------------------------------------------------
    def __enter__(self) -> EtReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()

    # -- public iteration ----------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        # chain runs in C: no generator frame per node
        return chain.from_iterable(self.batches())

    def batches(self) -> Iterator[Any]:
        """Yield the remaining nodes as protobuf repeated containers, one per read buffer."""
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            yield batch

    def decoded_batches(self, node_names: dict[bytes, int], attr_names: dict[bytes, int]) -> Iterator[DecodedRecords]:
        """Yield the remaining nodes a buffer at a time, decoded into rows in C (the node table's reader:
        see :mod:`chakra.table`). ``node_names``/``attr_names`` intern the names across batches.

        The same records, errors and positions as iterating the reader: a record that does not parse
        ends the stream with :class:`ChakraFormatError` after the good records before it.
        """

        def decode(buf: bytes, pos: int, end: int) -> tuple[Any, ...]:
            return _columns.decode(buf, pos, end, node_names, attr_names)

        for buf, base, first, count, (nodes, ctrl, data, attrs) in self.record_batches(decode):
            yield DecodedRecords(buf, base, first, count, nodes, ctrl, data, attrs)

    def record_batches(self, decode: RecordDecoder) -> Iterator[tuple[bytes, int, int, int, tuple[Any, ...]]]:
        """Yield the remaining nodes a buffer at a time through a C decoder of framed records (the node
        table's ``_columns.decode``, the anonymizer's rewriter): ``decode(buf, pos, end)`` handles the
        complete records of ``buf[pos:end]`` and returns ``(stop, count, error, *results)``, where
        ``error`` is ``None`` or ``(record index, prefix offset, message)`` of the first record that
        does not parse. Yields ``(buf, base offset of buf, index of the first node, count, results)``;
        a record that does not parse ends the stream with :class:`ChakraFormatError` after the good
        records before it, as iterating the reader does.
        """
        if self._pending_error is not None:
            raise self._pending_error
        while True:
            buf, pos = self._buf, self._pos
            stop, count, error, *results = decode(buf, pos, len(buf))
            if count:
                self._count_empty(count, stop - pos, pos)
                self._pos = stop
                yield buf, self._base, self.node_count, count, tuple(results)
                self.node_count += count
            if error is not None:
                _, offset, message = error
                self._pending_error = self._error(
                    f"node record does not parse ({message})",
                    self._base + offset,
                    self.node_count,
                    hint="the file is corrupt; regenerate it from the source trace",
                )
                raise self._pending_error
            if not count and not self._refill_for_record():
                return

    def _refill_for_record(self) -> bool:
        """No complete record at ``_pos``: read more (True) or tell that the stream ended (False).
        Raises for a truncated record and for a length prefix no valid file can contain."""
        pending = len(self._buf) - self._pos
        if self._eof and pending == 0:
            return False
        bounds = self._record_bounds(self._pos, self.node_count)
        if bounds is not None and bounds[1] <= len(self._buf):  # complete, yet not framed by the decoder
            raise self._error("node record cannot be framed", self._base + self._pos, self.node_count)
        if self._eof:
            raise self._error(
                "file ends inside a node record",
                self._base + self._pos,
                self.node_count,
                hint="the file is truncated (interrupted write or copy?); regenerate it",
            )
        self._fill(bounds[1] - self._pos if bounds else pending + 1)
        return True

    # -- internals -----------------------------------------------------------------------
    def _count_empty(self, records: int, span_bytes: int, start: int) -> None:
        """Refuse a stream of zero-length records (a file of zeros, a decompression bomb): a record
        with data takes at least two bytes, so ``records`` records in ``span_bytes`` bytes hold at
        least ``2 · records − span_bytes`` empty ones. No writer makes them (upstream's reader takes
        one for the end of the file)."""
        self._empty_floor += max(0, 2 * records - span_bytes)
        if self._empty_floor > MAX_EMPTY_RECORDS:
            raise self._error(
                f"more than {MAX_EMPTY_RECORDS:,} empty (zero-length) records: this is not a Chakra ET "
                "(a file of zeros, or zeros compressed?)",
                self._base + start,
                self.node_count,
                hint="check that the file is the trace you meant; regenerate it from the source trace",
            )

    def _error(self, message: str, offset: int, node_index: int | None, hint: str | None = None) -> ChakraFormatError:
        return ChakraFormatError(message, path=self.path, offset=offset, node_index=node_index, hint=hint)

    def _fill(self, need_total: int) -> bool:
        """Read until ``_buf[_pos:]`` holds ``need_total`` bytes or the stream ends."""
        if self._pos:
            self._base += self._pos
            self._buf = self._buf[self._pos :]
            self._pos = 0
        pieces = [self._buf]
        have = len(self._buf)
        while have < need_total and not self._eof:
            try:
                want = need_total - have
                if self._size is None:  # compressed: the record length was not checked against the data
                    want = min(want, MAX_READ_CALL_BYTES)
                chunk = self._stream.read(max(framing.READ_CHUNK_BYTES, want))
            except DECOMPRESS_ERRORS as exc:
                # gzip/zstd report their own corruption (bad CRC, truncated stream) here
                raise self._error(
                    f"cannot decompress: {exc}",
                    self._base + have,
                    self.node_count,
                    hint="the compressed file is truncated or corrupt; recompress it from the original",
                ) from None
            if not chunk:
                self._eof = True
                break
            pieces.append(chunk)
            have += len(chunk)
        if len(pieces) > 1:
            self._buf = b"".join(pieces)
        return have >= need_total

    def _record_bounds(self, pos: int, node_index: int | None) -> tuple[int, int] | None:
        """Decode the length prefix at ``_buf[pos]``: (payload start, payload end) or None if more
        bytes are needed. Raises for prefixes no valid file can contain."""
        buf = self._buf
        end = len(buf)
        length = 0
        shift = 0
        i = pos
        while True:
            if i >= end:
                return None
            byte = buf[i]
            length |= (byte & 0x7F) << shift
            i += 1
            if byte < 0x80:
                break
            shift += 7
            if i - pos >= MAX_VARINT32_BYTES:
                raise self._error(
                    "length prefix is longer than 5 bytes (not a varint32)",
                    self._base + pos,
                    node_index,
                    hint="the file is corrupt or not a Chakra .et file",
                )
        if length > MAX_RECORD_BYTES:
            raise self._error(
                f"length prefix claims {length} bytes, more than protobuf allows (2 GiB)",
                self._base + pos,
                node_index,
                hint="the file is corrupt or not a Chakra .et file",
            )
        if self._size is not None and self._base + i + length > self._size:
            raise self._error(
                f"record claims {length} bytes but only {self._size - self._base - i} remain in the file",
                self._base + pos,
                node_index,
                hint="the file is truncated (interrupted write or copy?); regenerate it",
            )
        return i, i + length

    def _read_metadata(self) -> GlobalMetadata:
        self._fill(MAX_VARINT32_BYTES)
        if not self._buf:
            raise self._error(
                "file is empty: a Chakra .et starts with a GlobalMetadata record",
                0,
                None,
                hint="the producer wrote nothing; regenerate the trace",
            )
        try:
            bounds = self._record_bounds(0, None)
            if bounds is None or bounds[1] > len(self._buf):
                self._fill(bounds[1] if bounds else MAX_VARINT32_BYTES + 1)
                bounds = self._record_bounds(0, None)
                if bounds is None or bounds[1] > len(self._buf):
                    raise self._error(
                        "file ends inside the GlobalMetadata record", 0, None, hint="the file is truncated"
                    )
        except ChakraFormatError:
            self._refuse_json()
            raise
        start, end = bounds
        try:
            metadata = GlobalMetadata.FromString(self._buf[start:end])
        except DecodeError as exc:
            self._refuse_json()
            raise self._error(
                f"GlobalMetadata does not parse ({exc})",
                0,
                None,
                hint="not a Chakra .et file, or one written with the pre-October-2023 schema "
                "(GlobalMetadata.attr was field 1 then); regenerate it with a current tool",
            ) from None
        self._pos = end
        self.metadata_record = self._buf[:end]
        return metadata

    def _refuse_json(self) -> None:
        """Called when the first record is broken: say so if the file is really JSON text."""
        if _JSON_START.match(self._buf, 0, _JSON_SNIFF_BYTES):
            raise self._error(
                "this is JSON text, not a binary Chakra .et file",
                0,
                None,
                hint="JSON from `chakra jsonize` goes back with `chakra dejsonize`; PyTorch host and Kineto "
                "traces are converted by the PyTorch front end",
            )
        head = bytes(self._buf[:_JSON_SNIFF_BYTES])
        if head and all(32 <= byte < 127 or byte in _TEXT_CONTROL_BYTES for byte in head):
            shown = head[:_TEXT_SHOWN_BYTES].decode("ascii").splitlines()[0] if head.strip() else ""
            raise self._error(
                f"this is text ({shown!r}...), not a binary Chakra .et file",
                0,
                None,
                hint="give the .et file itself; ASTRA-sim text workloads are converted by `chakra convert text`",
            )

    def _next_batch(self) -> Any:
        """Parse every complete record in the buffer (refilling once if none is complete)."""
        if self._pending_error is not None:
            raise self._pending_error
        while True:
            pieces: list[bytes] = []
            buf = self._buf
            pos = self._pos
            end = len(buf)
            batch_start = pos
            node_index = self.node_count
            incomplete = False
            while pos < end:
                # fast paths: a one- or two-byte length prefix (records under 16 KiB) whose record
                # is fully buffered; everything else takes the checked path
                byte = buf[pos]
                if byte < 0x80:
                    stop = pos + 1 + byte
                elif pos + 1 < end and buf[pos + 1] < 0x80:
                    stop = pos + 2 + ((byte & 0x7F) | (buf[pos + 1] << 7))
                else:
                    stop = end + 1
                if stop > end:
                    try:
                        bounds = self._record_bounds(pos, node_index)
                    except ChakraFormatError as error:
                        if not pieces:
                            raise
                        self._pending_error = error  # after the good records before it
                        break
                    if bounds is None or bounds[1] > end:
                        incomplete = True
                        break
                    stop = bounds[1]
                pieces.append(_BATCH_FIELD_TAG)
                pieces.append(buf[pos:stop])
                node_index += 1
                pos = stop
            self._pos = pos
            if pieces:
                self._count_empty(len(pieces) // 2, pos - batch_start, batch_start)
                # a corrupt record among these takes precedence over a framing error after them
                batch = self._parse_batch(pieces, batch_start)
                if len(batch) or self._pending_error is None:
                    return batch
                raise self._pending_error
            pending = len(buf) - pos
            if self._eof:
                if pending == 0:
                    return None
                raise self._error(
                    "file ends inside a node record",
                    self._base + pos,
                    node_index,
                    hint="the file is truncated (interrupted write or copy?); regenerate it",
                )
            # no complete record buffered: read at least the rest of the pending one
            bounds = self._record_bounds(pos, node_index) if incomplete else None
            self._fill(bounds[1] - pos if bounds else pending + 1)

    def _parse_batch(self, pieces: list[bytes], batch_start: int) -> Any:
        """Parse the framed records as one batch. On a corrupt record, return the good records
        before it and keep the error for the next call, so a stream yields every readable node."""
        batch = _node_batch_class()()
        try:
            batch.ParseFromString(b"".join(pieces))
        except DecodeError:
            bad, self._pending_error = self._find_bad_record(pieces, batch_start)
            batch = _node_batch_class()()
            batch.ParseFromString(b"".join(pieces[: 2 * bad]))
        self.node_count += len(batch.nodes)
        return batch.nodes

    def _find_bad_record(self, pieces: list[bytes], batch_start: int) -> tuple[int, ChakraFormatError]:
        """Index in the batch of the first record that does not parse, and the error for it."""
        start = batch_start
        for k, record in enumerate(pieces[1::2]):
            bounds = self._record_bounds(start, self.node_count + k)
            assert bounds is not None  # the batch holds complete records only
            try:
                Node.FromString(record[bounds[0] - start :])
            except DecodeError as exc:
                return k, self._error(
                    f"node record does not parse ({exc})",
                    self._base + start,
                    self.node_count + k,
                    hint="the file is corrupt; regenerate it from the source trace",
                )
            start += len(record)
        # each record parses alone but not together: cannot happen with protobuf's framing rules
        return 0, self._error("records do not parse", self._base + batch_start, self.node_count)


def read(path: PathLike) -> tuple[GlobalMetadata, list[Node]]:
    """Read a whole ``.et`` file: ``(metadata, nodes)`` in file order."""
    with EtReader(path) as reader:
        nodes: list[Node] = []
        for batch in reader.batches():
            nodes.extend(batch)
        return reader.metadata, nodes


def stream(path: PathLike) -> Iterator[Node]:
    """The nodes of ``path`` one at a time, in constant memory (use :class:`EtReader` to also get
    the metadata, or :func:`read_metadata`)."""
    with EtReader(path) as reader:
        yield from reader


def read_metadata(path: PathLike) -> GlobalMetadata:
    """Only the GlobalMetadata record of a file (reads the first few bytes)."""
    with EtReader(path) as reader:
        return reader.metadata
