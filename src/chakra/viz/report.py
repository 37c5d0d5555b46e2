"""``chakra report``: one self-contained HTML page about a workload, readable offline.

The page holds, for every rank, the time breakdown (compute, communication, memory, idle;
communication overlapped with compute or exposed); the per-rank comparison with imbalance and
stragglers; the critical path of the slowest rank with its operators, categories and the slack of
the top non-critical operators; the top operators by total and exclusive time; and the collectives
by type. Plots are inline SVG and the style sheet is inline: the file needs nothing else, no
network and no scripts from elsewhere. A tiny inline script marks, once the page is laid out, how
many plots the browser rendered (``data-plots-rendered`` on ``<body>``), so a headless browser can
check the page.

Example:
    workload = chakra.open("out/job")
    write_report(workload, "report.html")
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from chakra import __version__, io
from chakra.analyze.across import MAX_LISTED_CLASSES, MAX_LISTED_RANKS, group_identical, rank_ranges
from chakra.analyze.breakdown import (
    Breakdown,
    OperatorStat,
    OperatorTotal,
    Timing,
    breakdown,
    collective_volume,
    operator_totals,
    top_operators,
)
from chakra.analyze.critical_path import CriticalPath, critical_path
from chakra.analyze.ranks import RankComparison, RankDigest, compare_digests, compare_ranks, rank_digest
from chakra.errors import ChakraInputError, PathLike
from chakra.graph import CycleError, cycle_text
from chakra.groups import CommGroups
from chakra.table import NodeTable
from chakra.units import NS_PER_MS
from chakra.viz import plots
from chakra.viz.choices import PlotKind
from chakra.workload import Workload, open_workload

#: Rows in the operator and slack tables, and bars in the critical-path plot.
DEFAULT_TOP = 15
#: Stragglers listed (the worst first).
MAX_STRAGGLERS = 10

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 70rem;
       color: #1d1d1f; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f5f5f7; } td:first-child, th:first-child { text-align: left; }
.plot svg { max-width: 100%; height: auto; } .note { color: #666; font-size: 0.85rem; }
"""

# Counts the inline SVG plots that got a non-empty layout box in the browser.
_RENDER_CHECK = """
window.addEventListener("load", function () {
  var rendered = 0;
  document.querySelectorAll(".plot svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    if (box.width > 0 && box.height > 0) { rendered += 1; }
  });
  document.body.setAttribute("data-plots-rendered", String(rendered));
});
"""


@dataclass
class DamagedRank:
    """A rank whose dependencies have a cycle: what the report still shows of it (node count,
    operator totals, communication volume: none needs a schedule) and the cycle, named by ``cycle``
    (:class:`chakra.graph.CycleError`'s message: its member ids only)."""

    rank: int
    nodes: int
    cycle: str
    top_total: list[OperatorTotal]
    bytes_by_collective: dict[str, int]
    count_by_collective: dict[str, int]


@dataclass
class ReportData:
    """What the page shows, computed once (also handy for tests and notebooks). ``breakdowns`` and
    ``comparison`` cover the ranks that could be scheduled; ``damaged`` the ranks with a dependency
    cycle (``comparison`` is ``None`` when every rank has one); the critical path and operator tables
    are those of ``slowest_rank``, the slowest rank scheduled."""

    prefix: str
    nodes: dict[int, int]
    breakdowns: dict[int, Breakdown]
    comparison: RankComparison | None
    slowest_rank: int | None
    path: CriticalPath | None
    top_total: list[OperatorStat]
    top_exclusive: list[OperatorStat]
    damaged: dict[int, DamagedRank]


def rank_part(table: NodeTable, *, timing: str = "auto", top: int = DEFAULT_TOP) -> RankDigest | DamagedRank:
    """What the report keeps of one rank once its table is gone: its digest for the rank comparison,
    or, when its dependencies have a cycle, what can be said without a schedule."""
    try:
        return rank_digest(table, timing=timing)
    except CycleError as cycle:
        volume, count = collective_volume(table)
        return DamagedRank(
            rank=table.rank if table.rank is not None else 0,
            nodes=len(table),
            cycle=f"{cycle_text(cycle.ids)}; {cycle.blocked:,} nodes can never run",
            top_total=operator_totals(table)[:top],
            bytes_by_collective=volume,
            count_by_collective=count,
        )


def _assemble(
    prefix: str,
    parts: dict[int, RankDigest | DamagedRank],
    groups: CommGroups | None,
    slowest_table: Callable[[int], NodeTable],
    timing: str,
    top: int,
) -> ReportData:
    if not parts:
        raise ChakraInputError("the workload has no ranks", path=prefix)
    digests = {r: p for r, p in parts.items() if isinstance(p, RankDigest)}
    damaged = {r: p for r, p in parts.items() if isinstance(p, DamagedRank)}
    if not digests:
        return ReportData(prefix, {r: p.nodes for r, p in parts.items()}, {}, None, None, None, [], [], damaged)
    comparison = compare_digests(digests, groups)
    slowest = comparison.slowest_rank
    table = slowest_table(slowest)
    return ReportData(
        prefix=prefix,
        nodes={r: p.nodes for r, p in parts.items()},
        breakdowns={r: d.breakdown for r, d in sorted(digests.items())},
        comparison=comparison,
        slowest_rank=slowest,
        path=critical_path(table, top=top),
        top_total=top_operators(table, top, by="total", timing=timing),
        top_exclusive=top_operators(table, top, by="exclusive", timing=timing),
        damaged=damaged,
    )


def report_data(workload: Workload, *, timing: str = "auto", top: int = DEFAULT_TOP) -> ReportData:
    """Run the analyses the report shows on ``workload`` (its tables in memory)."""
    parts = {rank: rank_part(table, timing=timing, top=top) for rank, table in sorted(workload.tables.items())}
    for rank, part in parts.items():
        part.rank = rank
    return _assemble(workload.prefix, parts, workload.comm_groups, workload.table, timing, top)


def report_data_of(
    where: PathLike,
    *,
    timing: str = "auto",
    top: int = DEFAULT_TOP,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReportData:
    """:func:`report_data` of the workload at ``where`` (as :func:`chakra.workload.open_workload`
    reads it), each rank analysed where its table is loaded and the table dropped: only the slowest
    rank's table is loaded again, for its critical path. Memory holds a few tables whatever the ranks."""
    found = open_workload(where).map(
        partial(rank_part, timing=timing, top=top), workers=workers, scheduler=scheduler, progress=progress
    )
    for rank, part in found.results.items():
        part.rank = rank

    def slowest_table(rank: int) -> NodeTable:
        return open_workload(where).table(rank)

    return _assemble(found.prefix, found.results, found.comm_groups, slowest_table, timing, top)


def _ms(ns: float) -> str:
    return f"{ns / NS_PER_MS:,.3f}"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _plot(svg: str) -> str:
    return f'<div class="plot">{svg}</div>'


def breakdown_parts(b: Breakdown) -> dict[str, float]:
    """The disjoint pieces of a rank's span the breakdown plot stacks."""
    compute_only = max(0, b.compute_ns - b.comm_overlapped_ns)
    memory_and_other = max(0, b.span_ns - b.idle_ns - compute_only - b.communication_ns)
    return {
        "compute only": compute_only,
        "overlapped communication": b.comm_overlapped_ns,
        "exposed communication": b.comm_exposed_ns,
        "memory / other": memory_and_other,
        "idle": b.idle_ns,
    }


def rank_plot_rows(comparison: RankComparison) -> list[dict[str, float]]:
    """The quantities the rank-comparison plot draws, one dict per rank (ns)."""
    return [
        {
            "rank": r.rank,
            "span": r.span_ns,
            "compute": r.compute_ns,
            "communication": r.communication_ns,
            "idle": r.idle_ns,
        }
        for r in comparison.rows
    ]


# PlotKind is defined in chakra.viz.choices, which the CLI imports without the analyses and plots;
# importable from here as before.
def plot_analysis(
    workload: Workload, kind: PlotKind | str, path: PathLike, *, rank: int | None = None, timing: Timing | str = "auto"
) -> Path:
    """Draw one analysis of ``workload`` as a PNG or SVG file (by suffix); ``rank`` picks the rank of a
    critical path (default: the slowest)."""
    kind = PlotKind(kind)
    if kind is PlotKind.BREAKDOWN:
        parts = {r: breakdown_parts(breakdown(t, timing=timing)) for r, t in workload.tables.items()}
        return plots.plot_breakdown(parts, path)
    comparison = compare_ranks(workload, timing=timing) if kind is PlotKind.RANKS or rank is None else None
    if kind is PlotKind.RANKS:
        assert comparison is not None
        return plots.plot_rank_comparison(rank_plot_rows(comparison), path)
    chosen = workload.table(rank if comparison is None else comparison.slowest_rank)
    found = critical_path(chosen)
    return plots.plot_critical_path(found.by_operator, found.by_category, path)


def _representatives(rows: dict[int, tuple[str, ...]]) -> tuple[list[int], str]:
    """The ranks a plot draws and how the page says which: every rank up to
    :data:`~chakra.analyze.across.MAX_LISTED_RANKS`, else the lowest rank of each class of identical
    rows, else the first ranks of as many classes as a plot shows."""
    if len(rows) <= MAX_LISTED_RANKS:
        return sorted(rows), ""
    classes = group_identical(rows)
    chosen = [c.ranks[0] for c in classes[:MAX_LISTED_CLASSES]]
    if len(classes) <= MAX_LISTED_CLASSES:
        return chosen, f"one rank of each of the {len(classes)} classes of identical ranks"
    return chosen, f"the first rank of {len(chosen)} of the {len(classes):,} distinct ranks"


def _rank_rows(headers: Sequence[str], rows: dict[int, tuple[str, ...]]) -> str:
    """Every rank's row, or (past :data:`~chakra.analyze.across.MAX_LISTED_RANKS` ranks) identical
    rows merged under the ranks they cover."""
    if len(rows) <= MAX_LISTED_RANKS:
        return _table(["rank", *headers], [(rank, *rows[rank]) for rank in sorted(rows)])
    classes = group_identical(rows)
    return _table(["ranks", "count", *headers], [(rank_ranges(c.ranks), f"{len(c.ranks):,}", *c.row) for c in classes])


def _damaged_section(damaged: dict[int, DamagedRank]) -> list[str]:
    parts = ["<h2>Ranks with a dependency cycle</h2>"]
    by_cycle: dict[str, list[int]] = {}
    for rank, d in sorted(damaged.items()):
        by_cycle.setdefault(d.cycle, []).append(rank)
    for cycle, ranks in by_cycle.items():
        parts.append(f'<p class="damaged">Rank {html.escape(rank_ranges(ranks))}: {html.escape(cycle)}.</p>')
    parts.append(
        "<p>Their time breakdown, critical path, stragglers and exclusive times need the dependencies to "
        "form a DAG and are left out; the tables below need no schedule. "
        "<code>chakra adapt --target astra-sim</code> writes a copy without the edges that close each cycle "
        "(and reports them); <code>chakra validate</code> lists every cycle.</p>"
    )
    first = min(damaged)
    d = damaged[first]
    parts.append(f"<p>Operators of rank {first} by total time (recorded durations)</p>")
    parts.append(
        _table(
            ["operator", "category", "count", "total"],
            [(s.name, s.category, f"{s.count:,}", _ms(s.total_ns)) for s in d.top_total],
        )
    )
    return parts


def render_report(data: ReportData, *, title: str | None = None) -> str:
    """The HTML text of the report."""
    title = title or f"Chakra report: {Path(data.prefix).name}"
    nodes = sum(data.nodes.values())
    timings = sorted({b.timing for b in data.breakdowns.values()})
    timed = f"times from {html.escape(' and '.join(timings))} timing; " if timings else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{html.escape(data.prefix)}: {len(data.nodes):,} ranks, {nodes:,} nodes; '
        f"{timed}written by chakra-et {__version__} "
        f"on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Times in ms.</p>",
    ]
    if data.damaged:
        parts.extend(_damaged_section(data.damaged))
    if data.breakdowns:
        parts.extend(_timed_sections(data))
    parts.extend(_communication_section(data))
    parts.append(f"<script>{_RENDER_CHECK}</script></body></html>")
    return "\n".join(parts)


def _timed_sections(data: ReportData) -> list[str]:
    comparison, path = data.comparison, data.path
    assert comparison is not None and path is not None  # set whenever a rank could be scheduled
    parts = ["<h2>Time breakdown per rank</h2>"]
    rows = {rank: (f"{data.nodes[rank]:,}", *map(_ms, b.times_ns())) for rank, b in data.breakdowns.items()}
    parts.append(
        _rank_rows(["nodes", "span", "compute", "communication", "overlapped", "exposed", "memory", "idle"], rows)
    )
    untimed = sum(b.untimed_comm_nodes for b in data.breakdowns.values())
    if untimed:
        parts.append(
            f'<p class="note">{untimed:,} communication nodes have no recorded duration and count 0 here; '
            "<code>chakra simulate</code> times them.</p>"
        )
    drawn, which = _representatives(rows)
    if which:
        parts.append(f'<p class="note">The plots draw {html.escape(which)}.</p>')
    parts.append(_plot(plots.plot_breakdown({r: breakdown_parts(data.breakdowns[r]) for r in drawn}, None)))

    parts.append("<h2>Ranks compared</h2>")
    parts.append(
        "<p>Imbalance (max / mean - 1): "
        + ", ".join(f"{html.escape(k)} {v:.1%}" for k, v in comparison.imbalance.items())
        + f". Slowest rank: {comparison.slowest_rank}.</p>"
    )
    if len(comparison.rows) > 1:
        chosen = set(drawn)
        parts.append(
            _plot(plots.plot_rank_comparison([r for r in rank_plot_rows(comparison) if r["rank"] in chosen], None))
        )
    if comparison.stragglers:
        parts.append("<p>Stragglers: ranks that arrived last at collectives, and by how much.</p>")
        parts.append(
            _table(
                ["rank", "times last", "late total", "late max"],
                [(s.rank, s.times_last, _ms(s.late_ns_total), _ms(s.late_ns_max)) for s in comparison.stragglers][
                    :MAX_STRAGGLERS
                ],
            )
        )
    elif comparison.note:
        parts.append(f'<p class="note">Stragglers unknown: {html.escape(comparison.note)}.</p>')
    else:
        parts.append(f'<p class="note">No stragglers: {len(comparison.collectives)} collectives matched.</p>')

    parts.append(f"<h2>Critical path of rank {data.slowest_rank}</h2>")
    parts.append(
        f"<p>Length {_ms(path.length_ns)} ms through {len(path.positions):,} nodes (dependencies and recorded "
        "durations, no resource limits).</p>"
    )
    parts.append(_table(["category", "ms on the path"], [(k, _ms(v)) for k, v in path.by_category.items()]))
    parts.append(_plot(plots.plot_critical_path(path.by_operator, path.by_category, None)))
    if path.slack:
        parts.append("<p>Slack of the longest operators off the path (how much later they could run).</p>")
        parts.append(
            _table(
                ["operator", "node id", "duration", "slack"],
                [(s.name, s.node_id, _ms(s.dur_ns), _ms(s.slack_ns)) for s in path.slack],
            )
        )

    parts.append(f"<h2>Top operators of rank {data.slowest_rank}</h2>")
    tables = [("by total time", data.top_total), ("by exclusive time", data.top_exclusive)]
    if [(s.name, s.category) for s in data.top_total] == [(s.name, s.category) for s in data.top_exclusive]:
        # a converted trace carries each op's own (exclusive) time as its duration: little nests
        parts.append(
            '<p class="note">Ranked by total or by exclusive time, these operators come in the same order '
            "(a converted trace stores each op's exclusive time as its duration, so little time nests): "
            "one table, with both times.</p>"
        )
        tables = tables[:1]
    for label, stats in tables:
        parts.append(f"<p>{label}</p>")
        parts.append(
            _table(
                ["operator", "category", "count", "total", "exclusive"],
                [(s.name, s.category, f"{s.count:,}", _ms(s.total_ns), _ms(s.exclusive_ns)) for s in stats],
            )
        )
    return parts


def _communication_section(data: ReportData) -> list[str]:
    collectives: dict[str, list[int]] = {}
    volumes = [(b.count_by_collective, b.bytes_by_collective) for b in data.breakdowns.values()]
    volumes += [(d.count_by_collective, d.bytes_by_collective) for d in data.damaged.values()]
    for counts, sizes in volumes:
        for kind, count in counts.items():
            entry = collectives.setdefault(kind, [0, 0])
            entry[0] += count
            entry[1] += sizes.get(kind, 0)
    if not collectives:
        return []
    return [
        "<h2>Communication</h2>",
        _table(
            ["kind", "count (all ranks)", "bytes (comm_size)"],
            [(k, f"{c:,}", f"{n:,}") for k, (c, n) in sorted(collectives.items())],
        ),
    ]


def write_report(
    workload: Workload | PathLike,
    path: PathLike,
    *,
    title: str | None = None,
    timing: str = "auto",
    top: int = DEFAULT_TOP,
    workers: int | None = None,
) -> Path:
    """Analyse ``workload`` (loaded, or a prefix, folder or file: then rank by rank, in the memory of a
    few tables, :func:`report_data_of`) and write the HTML report to ``path`` atomically; returns
    the path."""
    if isinstance(workload, Workload):
        data = report_data(workload, timing=timing, top=top)
    else:
        data = report_data_of(workload, timing=timing, top=top, workers=workers)
    return write_html(render_report(data, title=title), path)


def write_html(text: str, path: PathLike) -> Path:
    """Write a rendered page to ``path`` atomically; returns the path."""
    out = Path(path)
    with io.AtomicFile(out) as handle:
        handle.write(text.encode("utf-8"))
    return out
