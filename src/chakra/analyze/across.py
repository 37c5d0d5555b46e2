"""Per-rank figures summarized across ranks, so a workload of thousands of ranks reads in a screen.

Three views of the same rows (one row of figures per rank), from the most to the least detailed:

* every rank, one row each (:data:`MAX_LISTED_RANKS` or fewer ranks, or when asked);
* the ranks grouped where their rows are identical (:func:`group_identical`): a generated workload
  has one class per pipeline stage and role, a recorded one often a handful;
* a spread per column (:func:`spread`): minimum, median and maximum, with the ranks at the extremes
  named, when even the classes are too many to list.

:func:`rank_ranges` writes a set of ranks compactly (``0-7, 9, 12-15``). Nothing here imports the
node table: the functions take plain rows, so ``chakra info``, ``validate``, the analyses, the
simulator's table and the report share them.

Example:
    >>> rows = {0: (10, 2), 1: (10, 2), 2: (10, 2), 3: (12, 5)}
    >>> [(rank_ranges(c.ranks), c.row) for c in group_identical(rows)]
    [('0-2', (10, 2)), ('3', (12, 5))]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Up to this many ranks a table lists every rank; past it, ranks are grouped or summarized. Sixteen
#: rows fit a terminal beside a heading and a note, and cover the jobs recorded on one or two hosts.
MAX_LISTED_RANKS = 16
#: Classes of identical ranks listed before a table falls back to the spread per column; as many as
#: ranks listed, for the same reason.
MAX_LISTED_CLASSES = MAX_LISTED_RANKS


def rank_ranges(ranks: Iterable[int]) -> str:
    """Ranks as runs of consecutive numbers, ascending: ``0-7, 9, 12-15``.

    >>> rank_ranges([3, 0, 1, 2, 9, 12, 13])
    '0-3, 9, 12-13'
    >>> rank_ranges([])
    ''
    """
    ordered = sorted(set(ranks))
    runs: list[str] = []
    start = previous = None
    for rank in [*ordered, None]:
        if start is not None and previous is not None and (rank is None or rank != previous + 1):
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if rank is not None and start is None:
            start = rank
        previous = rank
    return ", ".join(runs)


@dataclass(frozen=True)
class RankClass:
    """Ranks whose rows are identical, and that row."""

    ranks: tuple[int, ...]
    row: tuple[Hashable, ...]


def group_identical(rows: Mapping[int, Sequence[Hashable]]) -> list[RankClass]:
    """The ranks grouped by identical rows, in the order of each class's lowest rank.

    >>> [c.ranks for c in group_identical({4: ("a",), 1: ("b",), 2: ("a",)})]
    [(1,), (2, 4)]
    """
    classes: dict[tuple[Hashable, ...], list[int]] = {}
    for rank in sorted(rows):
        classes.setdefault(tuple(rows[rank]), []).append(rank)
    return sorted((RankClass(tuple(ranks), row) for row, ranks in classes.items()), key=lambda c: c.ranks[0])


@dataclass(frozen=True)
class Spread:
    """One column across ranks: its minimum, median and maximum, and the lowest rank at each extreme."""

    column: str
    min: float
    median: float
    max: float
    min_rank: int
    max_rank: int


def spread(rows: Mapping[int, Sequence[float]], columns: Sequence[str]) -> list[Spread]:
    """The minimum, median and maximum of each column over the ranks, naming the rank at each extreme
    (the lowest rank on a tie). ``rows[rank][i]`` is column ``columns[i]``; units are the rows'.

    >>> s = spread({0: (5.0,), 1: (9.0,), 2: (7.0,)}, ["span_ms"])[0]
    >>> (s.min, s.median, s.max, s.min_rank, s.max_rank)
    (5.0, 7.0, 9.0, 0, 1)
    """
    ranks = sorted(rows)
    out = []
    for i, column in enumerate(columns):
        values = [float(rows[rank][i]) for rank in ranks]
        low = min(range(len(values)), key=lambda j: (values[j], ranks[j]))
        high = max(range(len(values)), key=lambda j: (values[j], -ranks[j]))
        out.append(Spread(column, values[low], _median(values), values[high], ranks[low], ranks[high]))
    return out


def _median(values: list[float]) -> float:
    # statistics.median, without its import (fractions, random: 20 ms of the CLI's start-up)
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
