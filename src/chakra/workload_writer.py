"""The workload writer: :class:`WorkloadWriter`, the one way every producer writes a workload, all of
it or none of it (a workload is opened by :func:`chakra.workload.open_workload`).

A workload on disk is ``PREFIX.{rank}.et`` (optionally ``.gz``/``.zst``) plus, where communicator
groups exist, ``PREFIX.comm_groups.json`` in ASTRA-sim's format (:mod:`chakra.groups`). (Its own
module, apart from :mod:`chakra.trace`'s in-memory model, so that a converter that writes does not load
the node table's and the graph's numpy on start-up.)

Example:
    with WorkloadWriter("out/job") as writer:        # out/job.0.et, out/job.1.et, groups
        writer.write_nodes(0, nodes0)
        writer.write_nodes(1, nodes1)
        writer.groups = CommGroups({1: (0, 1)})
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chakra import io
from chakra.errors import ChakraInputError, ChakraOutputError, PathLike
from chakra.groups import CommGroups
from chakra.paths import (
    CLASS_FILE,
    RANK_FILE,
    class_path,
    classes_path,
    groups_path,
    rank_path,
)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

if TYPE_CHECKING:
    from chakra.class_layout import ClassLayout

#: Threads that write a workload's rank files: creating, syncing and renaming files release the GIL
#: (measured: 1,024 files of 60 kB in 2.5 s with one thread, 0.55 s with 8, no gain beyond;
#: benchmarks/README.md, generate: 2.7 s -> 1.4 s for 2,048 files).
WRITE_THREADS = 8
#: Rendered rank files waiting for a writer thread at most (bounds memory to a few files).
MAX_PENDING_WRITES = 2 * WRITE_THREADS
#: Stale files a note names before it says "...".
REMOVED_SHOWN = 5


@dataclass(frozen=True)
class WrittenWorkload:
    """What :class:`WorkloadWriter` left on disk: the rank files, the groups file (if any) and the
    files of an earlier workload of the same prefix it removed; for a workload written as classes
    (:mod:`chakra.class_layout`), ``paths`` is empty and ``class_paths`` and ``classes_path`` say
    where its class files and mapping are."""

    prefix: Path
    paths: dict[int, Path]
    groups_path: Path | None
    removed: tuple[Path, ...]
    class_paths: tuple[Path, ...] = ()
    classes_path: Path | None = None

    def removed_note(self) -> str | None:
        """The note a producer prints about the stale files it removed, or ``None``."""
        if not self.removed:
            return None
        shown = ", ".join(path.name for path in self.removed[:REMOVED_SHOWN])
        more = " ..." if len(self.removed) > REMOVED_SHOWN else ""
        return f"removed {len(self.removed)} files of an earlier workload with this prefix: {shown}{more}"


def prepare_prefix(prefix: PathLike) -> Path:
    """``prefix`` (of ``PREFIX.{rank}.et``) as a path whose folder exists (created when missing).

    Raises :class:`ChakraInputError` when the prefix names a folder or the folder cannot be made."""
    prefix = Path(prefix)
    if prefix.is_dir():
        raise ChakraInputError(
            "the output prefix is a directory", path=prefix, hint=f"give a name inside it, e.g. {prefix / 'workload'}"
        )
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ChakraInputError(
            "the output folder is a file", path=prefix.parent, hint="choose another output prefix"
        ) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot create the output folder: {exc.strerror}", path=prefix.parent) from None
    return prefix


class WorkloadWriter:
    """Writes one workload, all of it or none of it: ``PREFIX.{rank}.et`` for every rank given, and
    ``PREFIX.comm_groups.json`` when :attr:`groups` is set (or copied from :attr:`groups_file`).

    Rank files are written to hidden staging names beside their final ones (by a few threads, for
    rendered bytes) and renamed into place only when the ``with`` block ends without error; then the
    files of an earlier workload of the same prefix that would join this one are removed (ranks it no
    longer has, compressed copies, a groups file it no longer has). An error leaves the earlier
    workload as it was and no staged file behind.

    Producers whose ranks are written by other processes write to :meth:`staging_path` and call
    :meth:`adopt`. A producer that writes the workload as classes (:mod:`chakra.class_layout`) writes
    each class with :meth:`write_class_bytes` and sets :attr:`classes`; no rank files then.
    """

    def __init__(self, prefix: PathLike, *, progress: Callable[[int], None] | None = None):
        # the folders this writer makes for the prefix, removed again (if still empty) when it aborts
        self._made_folders = _missing_folders(Path(prefix).parent)
        self.prefix = prepare_prefix(prefix)
        self.groups: CommGroups | None = None
        #: a groups file to copy byte for byte instead (when :attr:`groups` is not set)
        self.groups_file: Path | None = None
        #: the rank-to-class mapping, for a workload written as class files
        self.classes: ClassLayout | None = None
        self._staged_classes: dict[int, Path] = {}
        self._progress = progress
        self._token = secrets.token_hex(4)
        self._staged: dict[int, Path] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[None]] = deque()
        self.result: WrittenWorkload | None = None

    # -- writing ---------------------------------------------------------------------------------
    def path(self, rank: int) -> Path:
        """Where rank ``rank`` ends up."""
        return rank_path(self.prefix, rank)

    def staging_path(self, rank: int) -> Path:
        """Where rank ``rank`` is written before the workload is complete."""
        return Path(self.staging_pattern().format(rank=rank))

    def _class_staging_path(self, index: int) -> Path:
        return self.prefix.with_name(f".{self.prefix.name}.class{index}.et.{self._token}.staged")

    def staging_pattern(self) -> str:
        """:meth:`staging_path` as a ``str.format`` pattern with ``{rank}``, for workers in other
        processes that learn their rank from what they read."""
        escaped = self.prefix.name.replace("{", "{{").replace("}", "}}")
        folder = str(self.prefix.parent).replace("{", "{{").replace("}", "}}")
        return os.path.join(folder, f".{escaped}.{{rank}}.et.{self._token}.staged")

    def write_nodes(self, rank: int, nodes: Iterable[Node], metadata: GlobalMetadata | None = None) -> None:
        """Write rank ``rank`` from node messages (``GlobalMetadata.version`` defaults to the format's)."""
        with self._writing(rank):
            io.write(self.staging_path(rank), metadata or GlobalMetadata(version=io.FORMAT_VERSION), nodes)

    def write_payloads(self, rank: int, metadata: GlobalMetadata, payloads: Sequence[bytes]) -> None:
        """Write rank ``rank`` from encoded node messages (the payloads of
        :func:`chakra.wire.encode_columns`)."""
        path = self.staging_path(rank)
        self.write_framed(rank, metadata, io.framed_batches(list(payloads), path))

    def write_framed(self, rank: int, metadata: GlobalMetadata, batches: Iterable[tuple[bytes, int]]) -> None:
        """Write rank ``rank`` from batches of framed node records (``(records, count)``: a C
        rewriter's output), streamed to the file as they come."""
        with self._writing(rank), io.EtWriter(self.staging_path(rank), metadata) as out:
            for records, count in batches:
                out.write_framed(records, count)

    @contextlib.contextmanager
    def _writing(self, rank: int) -> Iterator[None]:
        """Around writing rank ``rank`` in this thread: a disk error as one line naming the workload's
        folder; the rank adopted when written."""
        try:
            yield
        except OSError as error:
            raise _write_error(self.prefix, error) from None
        except ChakraOutputError as error:
            raise _write_error(self.prefix, error.os_error) from None
        self.adopt(rank)

    def write_bytes(self, rank: int, data: bytes) -> None:
        """Write rank ``rank`` from its whole file's bytes (framed by :mod:`chakra.io`: a generator's
        rendered template), by one of :data:`WRITE_THREADS` threads."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WRITE_THREADS)
        self._staged[rank] = self.staging_path(rank)
        self._pending.append(self._pool.submit(_write_file, self.staging_path(rank), data))
        if len(self._pending) >= MAX_PENDING_WRITES:
            self._pending.popleft().result()
        self._tell()

    def write_class_bytes(self, index: int, data: bytes) -> None:
        """Write the file of class ``index`` (``PREFIX.class{index}.et``) from its whole bytes."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WRITE_THREADS)
        staged = self._staged_classes[index] = self._class_staging_path(index)
        self._pending.append(self._pool.submit(_write_file, staged, data))
        self._tell()

    def adopt(self, rank: int) -> None:
        """Count rank ``rank`` as this writer's: its file is at :meth:`staging_path`, or will be
        before :meth:`commit` (written by workers elsewhere; :meth:`abort` removes it either way)."""
        self._staged[rank] = self.staging_path(rank)
        self._tell()

    def _tell(self) -> None:
        if self._progress is not None:
            self._progress(len(self._staged) + len(self._staged_classes))

    # -- finishing -------------------------------------------------------------------------------
    def __enter__(self) -> WorkloadWriter:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            self.commit()
            return
        self.abort()
        # a rank written elsewhere (a worker process, a thread) failed on the disk: one line naming
        # the workload's folder, not the hidden staged file
        if isinstance(exc, ChakraOutputError):
            raise _write_error(self.prefix, exc.os_error) from None
        if isinstance(exc, OSError):
            raise _write_error(self.prefix, exc) from None

    def commit(self) -> WrittenWorkload:
        """Put every staged rank in place, write or drop the groups file, remove stale files."""
        try:
            self._drain()
            paths = {}
            for rank, staged in sorted(self._staged.items()):
                os.replace(staged, self.path(rank))
                paths[rank] = self.path(rank)
            self._staged.clear()
            if self._staged_classes and self.classes is None:
                raise ChakraInputError("class files written without their mapping", path=self.prefix)
            written_classes = []
            for index, staged in sorted(self._staged_classes.items()):
                os.replace(staged, class_path(self.prefix, index))
                written_classes.append(class_path(self.prefix, index))
            self._staged_classes.clear()
            mapping = classes_path(self.prefix) if self.classes is not None else None
            if self.classes is not None:
                self.classes.write(classes_path(self.prefix))
            found = groups_path(self.prefix)
            has_groups = self.groups is not None or self.groups_file is not None
            if self.groups is not None:
                self.groups.write(found)
            elif self.groups_file is not None and self.groups_file.resolve() != found.resolve():
                with io.AtomicFile(found) as out:
                    out.write(self.groups_file.read_bytes())
            removed = _remove_stale(self.prefix, set(paths.values()) | set(written_classes),
                                    None if has_groups else found, mapping is None)  # fmt: skip
        except OSError as error:
            self.abort()
            raise _write_error(self.prefix, error) from None
        except ChakraOutputError as error:
            self.abort()
            raise _write_error(self.prefix, error.os_error) from None
        except BaseException:
            self.abort()
            raise
        self.result = WrittenWorkload(self.prefix, paths, found if has_groups else None, tuple(removed),
                                      tuple(written_classes), mapping)  # fmt: skip
        return self.result

    def abort(self) -> None:
        """Drop everything staged; the earlier workload stays as it was."""
        with contextlib.suppress(OSError, ChakraInputError):
            self._drain()
        for staged in [*self._staged.values(), *self._staged_classes.values()]:
            # a read-only file system refuses even to unlink what is not there
            with contextlib.suppress(OSError):
                staged.unlink(missing_ok=True)
        self._staged.clear()
        self._staged_classes.clear()
        for folder in self._made_folders:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()

    def _drain(self) -> None:
        """Wait for the writer threads; the first write error is raised after the others finish."""
        pending, self._pending = self._pending, deque()
        errors = []
        for future in pending:
            try:
                future.result()
            except (OSError, ChakraInputError) as error:
                errors.append(error)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if errors:
            raise errors[0]


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _write_error(prefix: Path, error: OSError) -> ChakraInputError:
    """One line for a workload that could not be written: it names the output file when the error
    is about one (a groups file), else the output folder (a hidden staged file, or an error that
    names the input it was copying from)."""
    filename = Path(error.filename) if error.filename is not None else None
    output_file = filename is not None and filename.parent == prefix.parent and not filename.name.startswith(".")
    return ChakraInputError(
        f"cannot write workload {prefix.name}: {error.strerror or error}",
        path=filename if output_file else prefix.parent,
        hint="choose an output folder you can write to, with room for the workload",
    )


def _write_file(path: Path, data: bytes) -> None:
    with io.AtomicFile(path) as handle:
        handle.write(data)


def _remove_stale(prefix: Path, keep: set[Path], stale_groups: Path | None, stale_classes: bool) -> list[Path]:
    """Remove ``PREFIX.{rank}.et`` files (also compressed) and ``PREFIX.class{k}.et`` files not in
    ``keep``, ``stale_groups`` if it exists, and the mapping ``PREFIX.classes.json`` when
    ``stale_classes``: what an earlier workload of the same prefix left behind would otherwise join
    this one (or, in the other layout, stand beside it). Returns the removed paths."""
    stale = sorted(p for p in _rank_file_paths(prefix) if p not in keep)
    if stale_groups is not None and stale_groups.exists():
        stale.append(stale_groups)
    if stale_classes and classes_path(prefix).exists():
        stale.append(classes_path(prefix))
    for path in stale:
        path.unlink()
    return stale


def _rank_file_paths(prefix: Path) -> list[Path]:
    directory = prefix.parent if str(prefix.parent) else Path(".")
    return [
        p
        for p in directory.iterdir()
        if (m := RANK_FILE.match(p.name) or CLASS_FILE.match(p.name)) is not None and m.group("prefix") == prefix.name
    ]


def write_workload(
    prefix: PathLike,
    ranks: Mapping[int, Iterable[Node]],
    groups: CommGroups | Mapping[int, Iterable[int]] | None = None,
    *,
    metadata: GlobalMetadata | None = None,
) -> WrittenWorkload:
    """Write a whole workload from node messages per rank (see :class:`WorkloadWriter`)."""
    with WorkloadWriter(prefix) as writer:
        for rank, nodes in sorted(ranks.items()):
            writer.write_nodes(rank, nodes, metadata)
        if groups is not None:
            writer.groups = (
                groups if isinstance(groups, CommGroups) else CommGroups({k: tuple(v) for k, v in groups.items()})
            )
    assert writer.result is not None
    return writer.result
