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
    workload = load_workload("out/job")
    write_report(workload, "report.html")
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chakra import __version__, io
from chakra.analyze.breakdown import Breakdown, Timing, breakdown, top_operators
from chakra.analyze.critical_path import CriticalPath, critical_path
from chakra.analyze.ranks import RankComparison, compare_ranks
from chakra.analyze.workload import Workload
from chakra.errors import ChakraInputError, PathLike
from chakra.viz import plots
from chakra.viz.choices import PlotKind

#: Rows in the operator and slack tables, and bars in the critical-path plot.
DEFAULT_TOP = 15
#: Stragglers listed (the worst first).
MAX_STRAGGLERS = 10
NS_PER_MS = 1e6

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
class ReportData:
    """What the page shows, computed once (also handy for tests and notebooks)."""

    workload: Workload
    breakdowns: dict[int, Breakdown]
    comparison: RankComparison
    slowest_rank: int
    path: CriticalPath
    top_total: list[Any]
    top_exclusive: list[Any]


def report_data(workload: Workload, *, timing: str = "auto", top: int = DEFAULT_TOP) -> ReportData:
    """Run the analyses the report shows on ``workload``."""
    if not workload.tables:
        raise ChakraInputError("the workload has no ranks", path=workload.prefix)
    breakdowns = {rank: breakdown(table, timing=timing) for rank, table in sorted(workload.tables.items())}
    comparison = compare_ranks(workload, timing=timing)
    slowest = comparison.slowest_rank
    table = workload.tables[slowest]
    return ReportData(
        workload=workload,
        breakdowns=breakdowns,
        comparison=comparison,
        slowest_rank=slowest,
        path=critical_path(table, top=top),
        top_total=top_operators(table, top, by="total", timing=timing),
        top_exclusive=top_operators(table, top, by="exclusive", timing=timing),
    )


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


def render_report(data: ReportData, *, title: str | None = None) -> str:
    """The HTML text of the report."""
    workload = data.workload
    title = title or f"Chakra report: {Path(workload.prefix).name}"
    nodes = sum(len(t) for t in workload.tables.values())
    timings = sorted({b.timing for b in data.breakdowns.values()})
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{html.escape(workload.prefix)}: {len(workload.tables)} ranks, {nodes:,} nodes; '
        f"times from {html.escape(' and '.join(timings))} timing; written by chakra-et {__version__} "
        f"on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Times in ms.</p>",
    ]

    parts.append("<h2>Time breakdown per rank</h2>")
    parts.append(
        _table(
            ["rank", "nodes", "span", "compute", "communication", "overlapped", "exposed", "memory", "idle"],
            [(rank, f"{len(workload.tables[rank]):,}", *map(_ms, b.times_ns())) for rank, b in data.breakdowns.items()],
        )
    )
    untimed = sum(b.untimed_comm_nodes for b in data.breakdowns.values())
    if untimed:
        parts.append(
            f'<p class="note">{untimed:,} communication nodes have no recorded duration and count 0 here; '
            "<code>chakra simulate</code> times them.</p>"
        )
    parts.append(_plot(plots.plot_breakdown({r: breakdown_parts(b) for r, b in data.breakdowns.items()}, None)))

    comparison = data.comparison
    parts.append("<h2>Ranks compared</h2>")
    parts.append(
        "<p>Imbalance (max / mean - 1): "
        + ", ".join(f"{html.escape(k)} {v:.1%}" for k, v in comparison.imbalance.items())
        + f". Slowest rank: {comparison.slowest_rank}.</p>"
    )
    if len(comparison.rows) > 1:
        parts.append(_plot(plots.plot_rank_comparison(rank_plot_rows(comparison), None)))
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

    path = data.path
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
    for label, stats in (("by total time", data.top_total), ("by exclusive time", data.top_exclusive)):
        parts.append(f"<p>{label}</p>")
        parts.append(
            _table(
                ["operator", "category", "count", "total", "exclusive"],
                [(s.name, s.category, f"{s.count:,}", _ms(s.total_ns), _ms(s.exclusive_ns)) for s in stats],
            )
        )

    collectives: dict[str, list[int]] = {}
    for b in data.breakdowns.values():
        for kind, count in b.count_by_collective.items():
            entry = collectives.setdefault(kind, [0, 0])
            entry[0] += count
            entry[1] += b.bytes_by_collective.get(kind, 0)
    if collectives:
        parts.append("<h2>Communication</h2>")
        parts.append(
            _table(
                ["kind", "count (all ranks)", "bytes (comm_size)"],
                [(k, f"{c:,}", f"{n:,}") for k, (c, n) in sorted(collectives.items())],
            )
        )
    parts.append(f"<script>{_RENDER_CHECK}</script></body></html>")
    return "\n".join(parts)


def write_report(
    workload: Workload, path: PathLike, *, title: str | None = None, timing: str = "auto", top: int = DEFAULT_TOP
) -> Path:
    """Analyse ``workload`` and write the HTML report to ``path`` (atomically); returns the path."""
    text = render_report(report_data(workload, timing=timing, top=top), title=title)
    out = Path(path)
    with io.AtomicFile(out) as handle:
        handle.write(text.encode("utf-8"))
    return out
