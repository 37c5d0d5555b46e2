"""A workload for analysis: every rank's node table, loaded once, and its communicator groups.

:func:`load_workload` loads a prefix, a folder holding one workload, a rank file or any single ``.et``
file, ranks in parallel through :mod:`chakra.parallel`; ``ranks=[3]`` loads only the files asked for.
Every analysis of :mod:`chakra.analyze` takes the tables of one :class:`Workload`, and what they
derive from a table (the replayed schedule of :mod:`chakra.analyze.replay`) is computed once per
table, so a report, a breakdown and a rank comparison of the same workload share it.

Example:
    workload = load_workload("out/job")
    workload.ranks, workload.tables[0].label
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.parallel import map_ranks
from chakra.paths import rank_of
from chakra.table import NodeTable, load_table
from chakra.trace import TraceSet

R = TypeVar("R")


@dataclass
class Workload:
    """Every rank loaded of a workload as tables: ``tables[rank]``, plus its communicator groups.
    ``missing`` lists the ranks below the highest one that have no file."""

    prefix: str
    tables: dict[int, NodeTable]
    comm_groups: CommGroups | None = None
    missing: tuple[int, ...] = ()

    @property
    def ranks(self) -> list[int]:
        return sorted(self.tables)

    def table(self, rank: int | None = None) -> NodeTable:
        """One rank's table: ``rank``, or the lowest rank loaded."""
        chosen = self.ranks[0] if rank is None else rank
        if chosen not in self.tables:
            raise ChakraInputError(f"the workload has no rank {chosen} (ranks {self.ranks})", path=self.prefix)
        return self.tables[chosen]


def _load_item(item: tuple[int, str]) -> NodeTable:
    rank, path = item
    return load_table(path, rank)


@dataclass(frozen=True)
class _RankFiles:
    """The files an analysis reads: ``items`` are (rank, path); ``traces`` is the workload they come
    from (``None`` for one file named on its own)."""

    prefix: str
    items: list[tuple[int, str]]
    traces: TraceSet | None


def _rank_files(where: str | os.PathLike[str], ranks: Iterable[int] | None) -> _RankFiles:
    where = Path(where)
    if where.is_file():
        # one named file is one table, its rank from its name: a rank file does not bring in the
        # workload around it (a prefix or folder does)
        rank = rank_of(where)
        if ranks is not None and set(ranks) - {rank if rank is not None else 0}:
            raise ChakraInputError(
                f"{where.name} holds rank {rank if rank is not None else 0} only",
                path=where,
                hint="pass the workload PREFIX to analyse other ranks",
            )
        return _RankFiles(str(where), [(rank if rank is not None else 0, str(where))], None)
    traces = TraceSet.discover(where)
    wanted = sorted(traces.ranks) if ranks is None else sorted(set(ranks))
    absent = [r for r in wanted if r not in traces.ranks]
    if absent:
        raise ChakraInputError(
            f"the workload has no rank {', '.join(map(str, absent))} (ranks {sorted(traces.ranks)})",
            path=traces.prefix,
        )
    return _RankFiles(str(traces.prefix), [(rank, str(traces.ranks[rank])) for rank in wanted], traces)


def load_workload(
    where: str | os.PathLike[str],
    *,
    ranks: Iterable[int] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Workload:
    """Load a workload: a prefix or a directory holding one (every rank, or only ``ranks``), or one
    ``.et`` file (one table: its rank from a ``PREFIX.{rank}.et`` name, else 0). Ranks load in
    parallel through :func:`chakra.parallel.map_ranks` (``workers``, ``scheduler`` as there)."""
    files = _rank_files(where, ranks)
    tables = map_ranks(
        _load_item, files.items, workers=workers, scheduler=scheduler, progress=progress, description="load"
    )
    by_rank = {rank: table for (rank, _), table in zip(files.items, tables, strict=True)}
    traces = files.traces
    if traces is None:
        return Workload(files.prefix, by_rank)
    return Workload(files.prefix, by_rank, _groups_of(traces), tuple(traces.missing_ranks))


@dataclass
class RankResults(Generic[R]):
    """What one analysis found on each rank (:func:`map_workload`): ``results[rank]``, the workload's
    prefix, its communicator groups, and the ranks below the highest one that have no file."""

    prefix: str
    results: dict[int, R]
    comm_groups: CommGroups | None = None
    missing: tuple[int, ...] = ()


@dataclass(frozen=True)
class _OnTable(Generic[R]):
    # picklable: worker processes get the function and load the table themselves
    fn: Callable[[NodeTable], R]

    def __call__(self, item: tuple[int, str]) -> R:
        return self.fn(_load_item(item))


def map_workload(
    fn: Callable[[NodeTable], R],
    where: str | os.PathLike[str],
    *,
    ranks: Iterable[int] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RankResults[R]:
    """``fn(table)`` for every rank of ``where`` (as :func:`load_workload` reads it), each table loaded
    in a worker and dropped once ``fn`` returns: memory holds the results, not the tables, so a
    workload of thousands of ranks analyses in the memory of a few. ``fn`` must be picklable (a
    top-level function, or a ``functools.partial`` of one) when ranks run in worker processes."""
    files = _rank_files(where, ranks)
    found = map_ranks(
        _OnTable(fn), files.items, workers=workers, scheduler=scheduler, progress=progress, description="analyse"
    )
    results = {rank: r for (rank, _), r in zip(files.items, found, strict=True)}
    traces = files.traces
    if traces is None:
        return RankResults(files.prefix, results)
    return RankResults(files.prefix, results, _groups_of(traces), tuple(traces.missing_ranks))


def _groups_of(traces: TraceSet) -> CommGroups | None:
    return CommGroups({k: tuple(v) for k, v in traces.comm_groups.items()}) if traces.comm_groups else None
