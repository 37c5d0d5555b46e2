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

from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.parallel import map_ranks
from chakra.paths import rank_of
from chakra.table import NodeTable, load_table
from chakra.trace import TraceSet


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


def load_workload(
    where: str | os.PathLike[str],
    *,
    ranks: Iterable[int] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Workload:
    """Load a workload: a prefix, a directory holding one, one of its rank files, or any single ``.et``
    file (then one table, rank from the name or 0). ``ranks`` loads only those ranks' files. Ranks load
    in parallel through :func:`chakra.parallel.map_ranks` (``workers``, ``scheduler`` as there)."""
    where = Path(where)
    if where.is_file() and rank_of(where) is None:
        return Workload(str(where), {0: load_table(where, 0)})
    traces = TraceSet.discover(where)
    wanted = sorted(traces.ranks) if ranks is None else sorted(set(ranks))
    absent = [r for r in wanted if r not in traces.ranks]
    if absent:
        raise ChakraInputError(
            f"the workload has no rank {', '.join(map(str, absent))} (ranks {sorted(traces.ranks)})",
            path=traces.prefix,
        )
    items = [(rank, str(traces.ranks[rank])) for rank in wanted]
    tables = map_ranks(_load_item, items, workers=workers, scheduler=scheduler, progress=progress, description="load")
    groups = CommGroups({k: tuple(v) for k, v in traces.comm_groups.items()}) if traces.comm_groups else None
    by_rank = {rank: table for (rank, _), table in zip(items, tables, strict=True)}
    return Workload(str(traces.prefix), by_rank, groups, tuple(traces.missing_ranks))
