"""Writing ``.et`` files atomically: :class:`AtomicFile` (temporary file, then rename), :class:`EtWriter`
(node by node) and :func:`write` (a whole file).

Example:
    with EtWriter("out.0.et", metadata) as writer:
        writer.write(node)
"""

from __future__ import annotations

import atexit
import errno
import gzip
import os
import signal
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import zstandard

from chakra.errors import ChakraInputError, ChakraOutputError, PathLike
from chakra.io.framing import (
    FORMAT_VERSION,
    SHORT_PREFIX_LIMIT,
    compression_for,
    encode_varint,
    frame,
    short_prefixes,
)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

#: Records gathered in memory before one ``write`` call to the file.
_WRITE_FLUSH_RECORDS = 4096
#: Errors of writing an output that are the output's (its disk full, over quota, too large for the
#: file system, read-only, failing): one line naming the output instead of a traceback.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def output_error(exc: OSError, path: Path) -> ChakraOutputError:
    """The one-line error for ``exc`` met while writing ``path``."""
    hint = "free some space or write somewhere else" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else None
    return ChakraOutputError(exc, path=path, hint=hint)


def _current_umask() -> int:
    """The process umask, from /proc where it can be read without changing it."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0)  # briefly process-wide; only where /proc is missing
    os.umask(umask)
    return umask


#: Temporary files of the AtomicFiles neither committed nor aborted. A signal can stop the process
#: between creating one and entering its ``with`` block (SIGTERM raises SystemExit there, see
#: chakra.cli.main): the files left then are removed when the interpreter exits.
_LIVE_TEMPS: set[Path] = set()


@atexit.register
def _remove_live_temps() -> None:
    for path in list(_LIVE_TEMPS):
        path.unlink(missing_ok=True)
    _LIVE_TEMPS.clear()


class AtomicFile:
    """A binary file that appears at ``path`` only when closed without error.

    Data goes to a temporary file beside ``path`` and is renamed over it on :meth:`commit`, so
    readers never see a half-written file and a failed run leaves the old file untouched.
    """

    def __init__(self, path: PathLike):
        self.path = Path(path)
        directory = self.path.parent
        if directory.exists() and not directory.is_dir():
            raise ChakraInputError("the output folder is a file", path=directory, hint="choose another output path")
        if not directory.is_dir():
            raise ChakraInputError("output directory does not exist", path=directory, hint="create it first")
        if self.path.is_dir():
            raise ChakraInputError("output path is a directory", path=self.path, hint="give a file name")
        # SIGTERM waits until the file is registered: no window in which it exists unknown
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
            self.tmp_path = Path(tmp)
            _LIVE_TEMPS.add(self.tmp_path)
        except OSError as exc:
            raise ChakraInputError(f"cannot create a file here: {exc.strerror}", path=directory) from None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        # mkstemp creates 0600; give the file the mode open() would (0666 less the umask)
        os.chmod(tmp, 0o666 & ~_current_umask())
        self.file: IO[bytes] = os.fdopen(fd, "wb")

    def commit(self) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp_path, self.path)
        except OSError as exc:
            self.abort()
            raise output_error(exc, self.path) from None
        _LIVE_TEMPS.discard(self.tmp_path)

    def abort(self) -> None:
        """Drop the temporary file, even when closing it fails (a full disk fails the last flush)."""
        try:
            self.file.close()
        except OSError:
            pass  # what it could not flush is dropped with the file
        finally:
            self.tmp_path.unlink(missing_ok=True)
            _LIVE_TEMPS.discard(self.tmp_path)

    def __enter__(self) -> IO[bytes]:
        return self.file

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if exc_type is None:
            self.commit()
            return
        self.abort()
        if isinstance(exc, OSError) and exc.errno in OUTPUT_ERRNOS:
            raise output_error(exc, self.path) from None


class EtWriter:
    """Write one ``.et`` file node by node; it appears atomically on :meth:`close`.

    ``compress``: ``"auto"`` (by suffix: ``.gz`` gzip, ``.zst`` zstd, else plain), ``None``/``"none"``
    or an explicit ``"gzip"``/``"zstd"``. Plain files are what ASTRA-sim reads.

    A ``GlobalMetadata`` that would serialize to zero bytes gets ``version = FORMAT_VERSION``
    (a zero-length first record makes the upstream Python reader see an empty file); a node
    that would serialize to zero bytes (id 0, no name, ``INVALID_NODE``, nothing else) is refused.
    """

    def __init__(self, path: PathLike, metadata: GlobalMetadata | None = None, *, compress: str | None = "auto"):
        self.path = Path(path)
        self.node_count = 0
        self._prefixes = short_prefixes()
        kind = compression_for(path) if compress == "auto" else (None if compress in (None, "none") else compress)
        if kind not in (None, "gzip", "zstd"):
            raise ChakraInputError(f"unknown compression {compress!r}", hint="use gzip, zstd or none")
        self._atomic = AtomicFile(path)
        self._closed = False
        try:
            self._open_sink(kind, metadata)
        except BaseException:
            self._atomic.abort()
            raise

    def _open_sink(self, kind: str | None, metadata: GlobalMetadata | None) -> None:
        self._sink: IO[bytes]
        if kind == "gzip":
            # mtime=0 keeps the bytes reproducible for the same content
            self._sink = gzip.GzipFile(fileobj=self._atomic.file, mode="wb", mtime=0)  # type: ignore[assignment]
        elif kind == "zstd":
            self._sink = zstandard.ZstdCompressor().stream_writer(self._atomic.file, closefd=False)  # type: ignore[assignment]
        else:
            self._sink = self._atomic.file
        self._pending: list[bytes] = []
        if metadata is None:
            metadata = GlobalMetadata(version=FORMAT_VERSION)
        payload = metadata.SerializeToString()
        if not payload:
            payload = GlobalMetadata(version=FORMAT_VERSION).SerializeToString()
        self._pending.append(frame(payload))

    def write(self, node: Node) -> None:
        """Append one node."""
        self.write_serialized(node.SerializeToString())

    def write_serialized(self, payload: bytes) -> None:
        """Append one node given as its serialized ``Node`` message (see :mod:`chakra.wire`)."""
        if self._closed:
            raise ChakraInputError("write after close or abort", path=self.path, hint="open a new EtWriter")
        n = len(payload)
        if n == 0:
            # refused without aborting: the caller may skip the node and go on
            raise ChakraInputError(
                f"node #{self.node_count} is empty (id 0, no name, INVALID_NODE) and would be a "
                "zero-length record, which the upstream Python reader takes for end of file",
                path=self.path,
                hint="give the node a name or type",
            )
        pending = self._pending
        pending.append(self._prefixes[n] if n < SHORT_PREFIX_LIMIT else encode_varint(n))
        pending.append(payload)
        self.node_count += 1
        if len(pending) >= _WRITE_FLUSH_RECORDS:
            self._flush()

    def write_framed(self, records: bytes, count: int) -> None:
        """Append ``count`` nodes given as framed records (length prefix and ``Node`` payload each:
        what a C rewriter produced), none of them empty."""
        if self._closed:
            raise ChakraInputError("write after close or abort", path=self.path, hint="open a new EtWriter")
        self._pending.append(records)
        self.node_count += count
        self._flush()

    def write_many(self, nodes: Iterable[Node]) -> None:
        """Append every node of ``nodes`` in order."""
        for node in nodes:
            self.write(node)

    def _flush(self) -> None:
        try:
            self._sink.write(b"".join(self._pending))
        except OSError as exc:
            self.abort()
            if exc.errno in OUTPUT_ERRNOS:
                raise output_error(exc, self.path) from None
            raise
        self._pending.clear()

    def close(self) -> None:
        """Finish the file and move it into place."""
        if self._closed:
            return
        self._flush()
        self._closed = True
        try:
            if self._sink is not self._atomic.file:
                self._sink.close()
        except OSError as exc:
            self._atomic.abort()
            if exc.errno in OUTPUT_ERRNOS:
                raise output_error(exc, self.path) from None
            raise
        except BaseException:
            self._atomic.abort()
            raise
        self._atomic.commit()

    def abort(self) -> None:
        """Drop everything written; the target file is left as it was."""
        if not self._closed:
            self._closed = True
            self._atomic.abort()

    def __enter__(self) -> EtWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write(
    path: PathLike, metadata: GlobalMetadata | None, nodes: Iterable[Node], *, compress: str | None = "auto"
) -> int:
    """Write a whole ``.et`` file atomically; returns the number of nodes written."""
    with EtWriter(path, metadata, compress=compress) as writer:
        writer.write_many(nodes)
        return writer.node_count
