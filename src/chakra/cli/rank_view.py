"""Per-rank tables that stay readable at any number of ranks (:mod:`chakra.analyze.across` decides the
view: every rank, classes of identical ranks, or a spread per column).

Every workload command renders its per-rank figures through :func:`rank_table`, and offers
``--per-rank`` (:data:`PER_RANK_OPTION`) to list every rank whatever their number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from chakra.analyze.across import MAX_LISTED_CLASSES, MAX_LISTED_RANKS, group_identical, rank_ranges, spread

PER_RANK_OPTION = typer.Option(
    False, "--per-rank", help=f"List every rank (default: every rank up to {MAX_LISTED_RANKS}, then grouped)."
)

#: Formats a cell's value for display.
Formatter = Callable[[Any], str]


def lists_every_rank(ranks: int, per_rank: bool) -> bool:
    """Whether a command shows each of ``ranks`` ranks on its own (few ranks, or ``--per-rank``)."""
    return per_rank or ranks <= MAX_LISTED_RANKS


def plain_table(title: str, headers: Sequence[str]) -> Table:
    """An empty table in the house style: a label column that folds, then numbers that never wrap."""
    # light rules and no outer padding: wide numeric tables fit an 80-column terminal unabridged;
    # numbers never wrap or get cut, the first (label) column folds instead
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i > 0, overflow="fold")
    return table


def rank_table(
    title: str,
    headers: Sequence[str],
    rows: Mapping[int, Sequence[Any]],
    formats: Sequence[Formatter],
    *,
    per_rank: bool = False,
) -> tuple[Table, str | None]:
    """A table of ``rows[rank]`` (raw values, one per header, shown through ``formats``) and a note to
    print under it (``None`` when every rank is listed).

    Ranks are listed one per row when they are few or ``per_rank``; else ranks whose shown rows are
    identical share a row (the ``ranks`` column names them); else each numeric column is summarized
    by its minimum, median and maximum with the ranks at the extremes.
    """
    shown = {rank: tuple(f(v) for f, v in zip(formats, row, strict=True)) for rank, row in rows.items()}
    if lists_every_rank(len(rows), per_rank):
        table = plain_table(title, ["rank", *headers])
        for rank in sorted(shown):
            table.add_row(Text(str(rank)), *(Text(cell) for cell in shown[rank]))
        return table, None
    classes = group_identical(shown)
    hint = "--per-rank lists every rank"
    if len(classes) <= MAX_LISTED_CLASSES:
        table = plain_table(title, ["ranks", "count", *headers])
        for c in classes:
            table.add_row(Text(rank_ranges(c.ranks)), f"{len(c.ranks):,}", *(Text(str(cell)) for cell in c.row))
        kinds = "class of identical rows" if len(classes) == 1 else "classes of identical rows"
        return table, f"{len(rows):,} ranks in {len(classes):,} {kinds}; {hint}"
    numeric = [i for i in range(len(headers)) if all(isinstance(row[i], int | float) for row in rows.values())]
    table = plain_table(f"{title}: across {len(rows):,} ranks", ["figure", "min", "median", "max", "at min", "at max"])
    spreads = spread({rank: [row[i] for i in numeric] for rank, row in rows.items()}, [headers[i] for i in numeric])
    for i, s in zip(numeric, spreads, strict=True):
        fmt = formats[i]
        table.add_row(Text(s.column), fmt(s.min), fmt(s.median), fmt(s.max), f"rank {s.min_rank}", f"rank {s.max_rank}")
    return table, f"{len(rows):,} ranks in {len(classes):,} distinct rows; {hint}"
