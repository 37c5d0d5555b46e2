"""One way in: :func:`open_workload` (``chakra.open``) finds a workload and returns a :class:`Workload`.

A workload on disk is ``PREFIX.{rank}.et`` (``.gz``/``.zst`` too) and, where communicator groups
exist, ``PREFIX.comm_groups.json`` beside them; or, written as classes of equivalent ranks
(:mod:`chakra.class_layout`), ``PREFIX.class{k}.et`` and ``PREFIX.classes.json``, whose ranks read
as their class's table with their own groups and peers. :func:`open_workload` takes what a user names:

* a prefix (``out/job``), a folder holding one workload, or a workload's ``PREFIX.classes.json``:
  every rank (or ``ranks``);
* one file: that file alone (its rank from a ``PREFIX.{rank}.et`` name, else 0), with the groups
  beside it; ``whole=True`` opens every rank of the workload it belongs to instead;
* a glob (``"out/job.[0-3].et"``): the rank files it matches, of one workload.

Opening reads no trace: a rank's :class:`chakra.table.NodeTable` is loaded when first asked for
(:meth:`Workload.table`) and kept, :meth:`Workload.load` loads every rank in parallel,
:meth:`Workload.map` runs a function on each rank's table in worker processes (or Dask) without
keeping the tables, and what analyses derive from the workload is kept on the object
(:meth:`Workload.derived`): load once, query many.

Example:
    >>> import tempfile
    >>> from chakra.generate.llm import generate_llm
    >>> from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ParallelSpec, WorkloadSpec
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2, pp=1, dp=2), HARDWARE_PRESETS["h100"],
    ...                     global_batch=4)
    >>> prefix = generate_llm(spec, f"{tempfile.mkdtemp()}/llama").prefix
    >>> workload = open_workload(prefix)
    >>> workload.ranks, dict(workload.comm_groups)[1], len(workload.table(0)) > 0
    ([0, 1, 2, 3], (0, 1), True)
    >>> open_workload(f"{prefix}.2.et").ranks, open_workload(f"{prefix}.2.et", whole=True).ranks
    ([2], [0, 1, 2, 3])
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from chakra.class_layout import ClassLayout, RankRenaming, class_file_of
from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.parallel import map_ranks
from chakra.paths import (
    CLASS_FILE,
    CLASSES_SUFFIX,
    RANK_FILE,
    classes_path,
    groups_path,
    prefix_of,
    prefix_of_classes,
    rank_of,
)
from chakra.table import NodeTable, load_table
from chakra.trace import Trace

R = TypeVar("R")
T = TypeVar("T")

#: Characters that make a name a glob pattern rather than a path.
GLOB_CHARACTERS = frozenset("*?[")


@dataclass
class RankResults(Generic[R]):
    """What one function found on each rank (:meth:`Workload.map`): ``results[rank]``, the workload's
    prefix, its communicator groups, and the ranks below the highest one that have no file."""

    prefix: str
    results: dict[int, R]
    comm_groups: CommGroups | None = None
    missing: tuple[int, ...] = ()


class Workload:
    """A workload opened: its rank files, communicator groups and the tables loaded so far.

    ``prefix`` is the workload's ``PREFIX`` (the file's path for one file named alone); ``files``
    maps each opened rank to its file; ``missing`` lists the ranks below the highest one of the
    workload that have no file (ASTRA-sim needs one per NPU). ``comm_groups_path`` is the file the
    groups were read from (errors name it). ``single_file`` is set when one file was named on its own
    (no workload around it was looked at). ``classes`` is the rank-to-class mapping of a workload
    written as classes (read from ``classes_path``); ``files`` then maps each rank to its class's file.
    """

    def __init__(
        self,
        prefix: PathLike,
        files: dict[int, Path],
        comm_groups: CommGroups | None = None,
        missing: Iterable[int] = (),
        *,
        comm_groups_path: Path | None = None,
        single_file: bool = False,
        tables: dict[int, NodeTable] | None = None,
        classes: ClassLayout | None = None,
        classes_path: Path | None = None,
    ):
        self.prefix = str(prefix)
        self.files = dict(sorted(files.items()))
        self.comm_groups = comm_groups
        self.comm_groups_path = comm_groups_path if comm_groups is not None else None
        self.missing = tuple(missing)
        self.single_file = single_file
        self._tables: dict[int, NodeTable] = dict(tables or {})
        self._derived: dict[Any, Any] = {}
        self.classes = classes
        self.classes_path = classes_path

    @classmethod
    def of_tables(cls, prefix: PathLike, tables: dict[int, NodeTable], comm_groups: CommGroups | None = None,
                  missing: Iterable[int] = ()) -> Workload:  # fmt: skip
        """A workload of tables already in memory (built, not read; ``files`` are their paths)."""
        files = {rank: Path(table.path or f"{prefix}.{rank}.et") for rank, table in tables.items()}
        return cls(prefix, files, comm_groups, missing, tables=tables)

    def with_comm_groups(self, comm_groups: CommGroups | None, path: Path | None = None) -> Workload:
        """The same rank files with other communicator groups (``path``: their file), the tables
        loaded so far shared."""
        return Workload(self.prefix, self.files, comm_groups, self.missing, comm_groups_path=path,
                        single_file=self.single_file, tables=self._tables, classes=self.classes,
                        classes_path=self.classes_path)  # fmt: skip

    @property
    def ranks(self) -> list[int]:
        return list(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __repr__(self) -> str:
        return f"<Workload {self.prefix}: {len(self.files)} ranks, {len(self._tables)} loaded>"

    def path(self, rank: int) -> Path:
        """The file of ``rank``; raises :class:`ChakraInputError` naming the ranks there are."""
        if rank not in self.files:
            raise ChakraInputError(f"the workload has no rank {rank} (ranks {self.ranks})", path=self.prefix)
        return self.files[rank]

    def table(self, rank: int | None = None) -> NodeTable:
        """One rank's node table (``rank``, or the lowest rank), loaded on first use and kept."""
        chosen = self.ranks[0] if rank is None else rank
        found = self._tables.get(chosen)
        if found is None:
            found = self._tables[chosen] = self.read_table(chosen)
        return found

    def read_table(self, rank: int) -> NodeTable:
        """``rank``'s node table read afresh (not kept: :meth:`table` keeps it)."""
        return _load_table(self._item(rank))

    def renaming(self, rank: int) -> RankRenaming | None:
        """How ``rank``'s nodes differ from its class file's (``None``: the workload has rank files)."""
        return None if self.classes is None else self.classes.renaming(rank)

    def require_rank_files(self, purpose: str) -> None:
        """Raise :class:`ChakraInputError` when the workload is written as classes: ``purpose`` (what
        needs one file per rank) reads rank files only."""
        if self.classes is not None:
            raise ChakraInputError(
                f"{purpose} reads one file per rank; this workload is written as "
                f"{len(self.classes.classes)} class files",
                path=self.classes_path,
                hint=f"write its rank files first: chakra expand {self.prefix} -o NEW_PREFIX",
            )

    def _item(self, rank: int) -> _RankItem:
        return _RankItem(rank, str(self.path(rank)), self.renaming(rank))

    @property
    def tables(self) -> dict[int, NodeTable]:
        """Every rank's table, loading those not loaded yet here, one after another (:meth:`load`
        loads them in parallel)."""
        return {rank: self.table(rank) for rank in self.files}

    def trace(self, rank: int) -> Trace:
        """One rank's nodes as protobuf messages (:class:`chakra.trace.Trace`), read afresh (in a
        workload written as classes: its class's nodes with the rank's groups and peers)."""
        trace = Trace.load(self.path(rank))
        renaming = self.renaming(rank)
        if renaming is not None:
            for node in trace.nodes:
                renaming.node(node)
        return trace

    def load(
        self,
        *,
        workers: int | None = None,
        scheduler: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Workload:
        """Load every rank's table not loaded yet, in parallel (:func:`chakra.parallel.map_ranks`:
        ``workers`` processes, or a Dask ``scheduler``); returns the workload itself."""
        todo = [self._item(rank) for rank in self.files if rank not in self._tables]
        loaded = map_ranks(_load_table, todo, workers=workers, scheduler=scheduler, progress=progress,
                           description="load")  # fmt: skip
        self._tables.update({item.rank: table for item, table in zip(todo, loaded, strict=True)})
        return self

    def map(
        self,
        fn: Callable[[NodeTable], R],
        *,
        workers: int | None = None,
        scheduler: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> RankResults[R]:
        """``fn(table)`` for every rank, each table loaded in a worker and dropped once ``fn``
        returns: memory holds the results, not the tables, so a workload of thousands of ranks is
        analysed in the memory of a few. ``fn`` must be picklable (a top-level function, or a
        ``functools.partial`` of one) when ranks run in worker processes."""
        items = [self._item(rank) for rank in self.files]
        found = map_ranks(_OnTable(fn), items, workers=workers, scheduler=scheduler, progress=progress,
                          description="analyse")  # fmt: skip
        results = dict(zip(self.files, found, strict=True))
        return RankResults(self.prefix, results, self.comm_groups or None, self.missing)

    def derived(self, key: Any, compute: Callable[[], T]) -> T:
        """What ``compute()`` returns, computed once per workload and ``key`` (an analysis's result
        that several views of the same workload share)."""
        if key not in self._derived:
            self._derived[key] = compute()
        found: T = self._derived[key]
        return found


@dataclass(frozen=True)
class _RankItem:
    """What a worker needs to load one rank: its file, and its renaming when the file is its class's."""

    rank: int
    path: str
    renaming: RankRenaming | None


#: Class files this process read last, by path and modification time: the ranks of a class come one
#: after another, each a renaming of its class's table.
_CLASS_TABLES: dict[tuple[str, int], NodeTable] = {}
#: Class tables kept at most (a workload's ranks come class by class).
CLASS_TABLES_KEPT = 2


def _load_table(item: _RankItem) -> NodeTable:
    if item.renaming is None:
        return load_table(item.path, item.rank)
    key = (item.path, Path(item.path).stat().st_mtime_ns)
    table = _CLASS_TABLES.get(key)
    if table is None:
        table = load_table(item.path)
        while len(_CLASS_TABLES) >= CLASS_TABLES_KEPT:
            del _CLASS_TABLES[next(iter(_CLASS_TABLES))]
        _CLASS_TABLES[key] = table
    return item.renaming.table(table, item.rank)


@dataclass(frozen=True)
class _OnTable(Generic[R]):
    # picklable: worker processes get the function and load the table themselves
    fn: Callable[[NodeTable], R]

    def __call__(self, item: _RankItem) -> R:
        return self.fn(_load_table(item))


def open_workload(where: PathLike, ranks: Iterable[int] | None = None, *, whole: bool = False) -> Workload:
    """The workload ``where`` names (a prefix, a folder holding one workload, one file, or a glob of
    rank files; see the module's docstring), with every rank or only ``ranks``. Raises
    :class:`chakra.errors.ChakraInputError` when it names none, or lacks a rank asked for."""
    text = str(where)
    path = Path(where)
    if not path.exists() and GLOB_CHARACTERS & set(text):
        return _open_glob(text, ranks)
    if path.is_file() and prefix_of_classes(path) is not None:
        path = Path(str(prefix_of_classes(path)))
    elif path.is_file() and not whole:
        return _open_file(path, ranks)
    prefix = _find_prefix(path)
    files = rank_files(prefix)
    if classes_path(prefix).is_file():
        return _open_classes(prefix, files, ranks)
    if not files:
        raise ChakraInputError(f"no files {prefix.name}.{{rank}}.et found", path=prefix.parent,
                               hint="a workload is PREFIX.0.et, PREFIX.1.et, ...")  # fmt: skip
    missing = [r for r in range(max(files) + 1) if r not in files]
    groups, groups_file = _groups_beside(prefix)
    return Workload(prefix, _chosen(files, ranks, prefix), groups, missing, comm_groups_path=groups_file)


def _open_file(path: Path, ranks: Iterable[int] | None) -> Workload:
    # one named file is one table, its rank from its name: a rank file does not bring in the
    # workload around it (a prefix or folder does, and whole=True)
    rank = rank_of(path)
    rank = 0 if rank is None else rank
    if ranks is not None and set(ranks) - {rank}:
        raise ChakraInputError(f"{path.name} holds rank {rank} only", path=path,
                               hint="pass the workload PREFIX to open other ranks")  # fmt: skip
    prefix = prefix_of(path)
    groups, groups_file = _groups_beside(prefix) if prefix is not None else (None, None)
    return Workload(path, {rank: path}, groups, comm_groups_path=groups_file, single_file=True)


def _open_classes(prefix: Path, files: dict[int, Path], ranks: Iterable[int] | None) -> Workload:
    """The workload of ``PREFIX.classes.json``: every rank's file is its class's."""
    mapping = classes_path(prefix)
    if files:
        raise ChakraInputError(f"{prefix.name} has both rank files and class files ({mapping.name})", path=mapping,
                               hint="remove one of the two, or write the workload again")  # fmt: skip
    layout = ClassLayout.read(mapping)
    class_files = [class_file_of(mapping, cls) for cls in layout.classes]
    absent = [p.name for p in class_files if not p.is_file()]
    if absent:
        raise ChakraInputError(f"the class file {absent[0]} it names is missing", path=mapping,
                               hint="write the workload again")  # fmt: skip
    every = {rank: class_files[entry.class_index] for rank, entry in enumerate(layout.ranks)}
    groups, groups_file = _groups_beside(prefix)
    return Workload(prefix, _chosen(every, ranks, prefix), groups, comm_groups_path=groups_file, classes=layout,
                    classes_path=mapping)  # fmt: skip


def _open_glob(pattern: str, ranks: Iterable[int] | None) -> Workload:
    matched = [(Path(p), RANK_FILE.match(Path(p).name)) for p in sorted(glob.glob(pattern))]
    prefixes = {str(p.parent / m.group("prefix")) if m else "" for p, m in matched}
    if not matched or "" in prefixes or len(prefixes) != 1:
        found = ", ".join(p.name for p, _ in matched[:4]) if matched else "nothing"
        raise ChakraInputError(f"the pattern {pattern!r} matches {found}, not rank files of one workload",
                               hint="match PREFIX.{rank}.et files of one prefix")  # fmt: skip
    prefix = Path(prefixes.pop())
    files = {int(m.group("rank")): p for p, m in matched if m}
    every = rank_files(prefix)
    missing = [r for r in range(max(every) + 1) if r not in every]
    groups, groups_file = _groups_beside(prefix)
    return Workload(prefix, _chosen(files, ranks, prefix), groups, missing, comm_groups_path=groups_file)


def _find_prefix(where: Path) -> Path:
    """The prefix of a workload named by its prefix, one of its files, or the folder holding it."""
    if not where.is_dir():
        of_class = CLASS_FILE.match(where.name)
        return prefix_of(where) or (where.with_name(of_class.group("prefix")) if of_class else where)
    prefixes = {m.group("prefix") for p in where.iterdir() if (m := RANK_FILE.match(p.name))}
    prefixes |= {p.name[: -len(CLASSES_SUFFIX)] for p in where.iterdir() if prefix_of_classes(p) is not None}
    if len(prefixes) != 1:
        found = ", ".join(sorted(prefixes)) or "none"
        raise ChakraInputError(f"expected one workload PREFIX.{{rank}}.et in the directory, found: {found}",
                               path=where, hint="pass the prefix, e.g. DIR/PREFIX")  # fmt: skip
    return where / prefixes.pop()


def rank_files(prefix: PathLike) -> dict[int, Path]:
    """Rank -> file of every ``PREFIX.{rank}.et`` (compressed too) there is, ascending; a rank
    found twice is an error."""
    prefix = Path(prefix)
    directory = prefix.parent if str(prefix.parent) else Path(".")
    found: dict[int, Path] = {}
    if not directory.is_dir():
        return found
    for p in directory.iterdir():
        m = RANK_FILE.match(p.name)
        if m and m.group("prefix") == prefix.name:
            rank = int(m.group("rank"))
            if rank in found:
                raise ChakraInputError(f"rank {rank} exists twice ({found[rank].name}, {p.name})", path=directory)
            found[rank] = p
    return dict(sorted(found.items()))


def _chosen(files: dict[int, Path], ranks: Iterable[int] | None, prefix: Path) -> dict[int, Path]:
    if ranks is None:
        return files
    wanted = sorted(set(ranks))
    absent = [r for r in wanted if r not in files]
    if absent:
        raise ChakraInputError(f"the workload has no rank {', '.join(map(str, absent))} (ranks {list(files)})",
                               path=prefix)  # fmt: skip
    return {rank: files[rank] for rank in wanted}


def _groups_beside(prefix: Path) -> tuple[CommGroups | None, Path | None]:
    """The groups of ``PREFIX.comm_groups.json`` and that file, if there is one."""
    found = groups_path(prefix)
    return (CommGroups.read(found), found) if found.exists() else (None, None)
