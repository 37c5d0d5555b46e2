"""``chakra analyze ...`` (where the time goes), ``chakra viz ...`` (graphs, timelines, plots) and
``chakra report`` (one HTML page)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table
from rich.text import Text

from chakra.analyze.across import MAX_LISTED_RANKS, rank_ranges
from chakra.analyze.choices import RankBy, Timing
from chakra.cli.console import CommandGroup, busy, note, print_json, print_table, progress_bar, quoting, stderr, stdout
from chakra.cli.rank_view import PER_RANK_OPTION, lists_every_rank, plain_table
from chakra.errors import ChakraInputError
from chakra.paths import rank_of
from chakra.units import NS_PER_MS
from chakra.viz.choices import PlotKind

# The analyses, the node table and the plots (numpy, protobuf, matplotlib) are imported in the
# commands: start-up imports only the choices they offer.
if TYPE_CHECKING:
    from chakra.analyze.breakdown import Breakdown, OperatorStat
    from chakra.analyze.ranks import RankComparison, RankDigest
    from chakra.table import NodeTable
    from chakra.workload import RankResults, Workload

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

DEFAULT_TOP = 15

analyze_app = typer.Typer(
    cls=CommandGroup,
    help="Where the time goes: breakdown, critical path, ranks compared, two runs diffed.\n\n"
    "Example: chakra analyze breakdown out/job",
    no_args_is_help=True,
)
viz_app = typer.Typer(
    cls=CommandGroup,
    help="Pictures: dependency graphs (DOT, SVG, PDF, PNG, GraphML), Chrome/Perfetto timelines, plots.\n\n"
    "Example: chakra viz graph out/job.0.et -o job.svg --around 42 --depth 2",
    no_args_is_help=True,
)
app.add_typer(analyze_app, name="analyze")
app.add_typer(viz_app, name="viz")

WORKLOAD_ARG = typer.Argument(..., help="A workload PREFIX (of PREFIX.{rank}.et), its folder, or one .et file.")
TIMING_OPTION = typer.Option(
    Timing.AUTO,
    "--timing",
    case_sensitive=False,
    help="Start times: recorded (from the trace), replay (scheduled from the graph), or auto.",
)
JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of tables.")
WORKERS_OPTION = typer.Option(None, "--workers", help="Ranks loaded at once (default: one per CPU).")
SCHEDULER_OPTION = typer.Option(None, "--scheduler", help="Dask scheduler address, or 'local', to load ranks on.")
TOP_OPTION = typer.Option(DEFAULT_TOP, "--top", min=1, help="Rows in operator tables.")


def _ms(ns: float) -> str:
    return f"{ns / NS_PER_MS:,.3f}"


def _load(
    where: str, workers: int | None = None, scheduler: str | None = None, ranks: list[int] | None = None
) -> Workload:
    """Load a workload (``ranks``: only those), saying which ranks it lacks."""
    from chakra.workload import open_workload

    with progress_bar() as bar:
        task = bar.add_task("loading ranks", total=None)
        workload = open_workload(where, ranks).load(
            workers=workers,
            scheduler=scheduler,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    if workload.missing:
        loaded = ", ".join(map(str, workload.ranks))
        note(f"ranks {', '.join(map(str, workload.missing))} have no file: only ranks {loaded} are analysed")
    return workload


def _note_untimed(tables: Iterable[NodeTable]) -> None:
    """Say how many communication nodes have no duration (they count 0 in every analysis)."""
    untimed = sum(table.untimed_comm_nodes() for table in tables)
    if untimed:
        note(f"{untimed:,} communication nodes have no recorded duration and count 0 here; chakra simulate times them")


def _one_rank(where: str, rank: int | None) -> NodeTable:
    """One rank's table: ``where`` is a file, or a workload of which ``rank`` (default: the lowest) is
    taken; only that rank's file is read."""
    from chakra.workload import open_workload

    path = Path(where)
    named_file = path.is_file() and (rank is None or rank_of(path) == rank)
    opened = open_workload(where) if named_file else open_workload(where, whole=True)
    chosen = opened.ranks[0] if rank is None else rank
    if rank is None and chosen != 0 and not opened.single_file:
        note(f"the workload has no rank 0: rank {chosen} is used (--rank picks another)")
    with busy(f"loading {opened.path(chosen).name}"):
        return opened.table(chosen)


def _table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    table = plain_table(title, headers)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def _ranks(workload: Workload, rank: int | None) -> list[int]:
    if rank is None:
        return workload.ranks
    if rank not in workload.tables:
        raise ChakraInputError(f"the workload has no rank {rank} (ranks {workload.ranks})", path=workload.prefix)
    return [rank]


def _breakdowns(
    where: str,
    rank: int | None,
    timing: Timing,
    workers: int | None,
    scheduler: str | None,
    top: int = 0,
    by: RankBy = RankBy.TOTAL,
) -> tuple[dict[int, Breakdown], dict[int, list[OperatorStat]]]:
    """Each rank's breakdown and top operators, computed where its table is loaded and the table
    dropped (a workload of thousands of ranks in the memory of a few)."""
    from functools import partial

    from chakra.analyze.breakdown import breakdown_and_top
    from chakra.workload import open_workload

    with progress_bar() as bar:
        task = bar.add_task("analysing ranks", total=None)
        found = open_workload(where, None if rank is None else [rank]).map(
            partial(breakdown_and_top, timing=timing.value, n=top, by=by.value),
            workers=workers,
            scheduler=scheduler,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    if found.missing:
        note(f"ranks {rank_ranges(found.missing)} have no file: only ranks {rank_ranges(found.results)} are analysed")
    untimed = sum(b.untimed_comm_nodes for b, _ in found.results.values())
    if untimed:
        note(f"{untimed:,} communication nodes have no recorded duration and count 0 here; chakra simulate times them")
    return {r: b for r, (b, _) in found.results.items()}, {r: t for r, (_, t) in found.results.items()}


def _print_time_table(results: dict[int, Breakdown], per_rank: bool) -> None:
    from chakra.analyze.breakdown import TIME_HEADERS
    from chakra.cli.rank_view import rank_table

    table, remark = rank_table(
        "time breakdown (ms; comm: communication, overlap: comm hidden behind compute)",
        [*TIME_HEADERS, "timing"],
        {r: (*b.times_ns(), b.timing) for r, b in results.items()},
        [*([_ms] * len(TIME_HEADERS)), str],
        per_rank=per_rank,
    )
    print_table(table)
    if remark:
        stdout.print(Text(remark, style="dim"))


def _slowest(results: dict[int, Breakdown]) -> int:
    return max(results, key=lambda r: (results[r].span_ns, -r))


@analyze_app.command("summary")
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def summary_cmd(
    workload: str = WORKLOAD_ARG,
    rank: int | None = typer.Option(None, "--rank", help="Only this rank."),
    timing: Timing = TIMING_OPTION,
    as_json: bool = JSON_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
    per_rank: bool = PER_RANK_OPTION,
) -> None:
    """Per rank: time span, busy time per thread/stream, nodes by kind, collectives with their bytes.
    Past {MAX_LISTED_RANKS} ranks the spans are grouped and the slowest rank is shown (--per-rank: every rank).

    Example: chakra analyze summary out/job --rank 0
    """
    results, _ = _breakdowns(workload, rank, timing, workers, scheduler)
    if as_json:
        print_json({str(r): b.to_dict() for r, b in results.items()})
        return
    shown = list(results)
    if not lists_every_rank(len(results), per_rank):
        _print_time_table(results, per_rank)
        shown = [_slowest(results)]
        note(f"rank {shown[0]} (the slowest) in detail; --rank picks another, --per-rank shows every rank")
    for r in shown:
        b = results[r]
        stdout.print(f"[bold]rank {r}[/bold]: span {_ms(b.span_ns)} ms ({b.timing} timing)")
        print_table(
            _table(
                "busy time per track (ms)",
                ["track", "busy", "of span"],
                [
                    (track, _ms(ns), f"{ns / b.span_ns:.1%}" if b.span_ns else "-")
                    for track, ns in b.busy_by_track.items()
                ],
            )
        )
        print_table(_table("nodes by kind", ["kind", "nodes"], [(k, f"{v:,}") for k, v in b.nodes_by_category.items()]))
        if b.count_by_collective:
            print_table(
                _table(
                    "communication",
                    ["kind", "count", "bytes"],
                    [(k, f"{c:,}", f"{b.bytes_by_collective.get(k, 0):,}") for k, c in b.count_by_collective.items()],
                )
            )


@analyze_app.command("breakdown")
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def breakdown_cmd(
    workload: str = WORKLOAD_ARG,
    rank: int | None = typer.Option(None, "--rank", help="Only this rank (default: all)."),
    timing: Timing = TIMING_OPTION,
    top: int = TOP_OPTION,
    by: RankBy = typer.Option(
        RankBy.TOTAL, "--by", case_sensitive=False, help="Rank operators by total or exclusive time."
    ),
    as_json: bool = JSON_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
    per_rank: bool = PER_RANK_OPTION,
) -> None:
    """Compute / communication / memory / idle per rank, communication overlapped or exposed, and the top
    operators by total and exclusive time. Past {MAX_LISTED_RANKS} ranks the ranks are grouped (or summarized as
    min / median / max) and the slowest rank's operators are listed (--per-rank: every rank's).

    Example: chakra analyze breakdown out/job --top 20
    """
    results, tops = _breakdowns(workload, rank, timing, workers, scheduler, top, by)
    if as_json:
        print_json({str(r): {**b.to_dict(), "top_operators": [vars(s) for s in tops[r]]} for r, b in results.items()})
        return
    _print_time_table(results, per_rank)
    shown = list(results) if per_rank or len(results) <= 1 else [_slowest(results)]
    for r in shown:
        slowest = " (the slowest)" if len(shown) < len(results) else ""
        print_table(
            _table(
                f"rank {r}{slowest}: top operators (ms)",
                ["operator", "category", "count", "total", "exclusive"],
                [(s.name, s.category, f"{s.count:,}", _ms(s.total_ns), _ms(s.exclusive_ns)) for s in tops[r]],
            )
        )
    if len(shown) < len(results):
        note("--rank N lists another rank's operators, --per-rank every rank's")


@analyze_app.command("critical-path")
def critical_path_cmd(
    trace: str = WORKLOAD_ARG,
    rank: int | None = typer.Option(None, "--rank", help="The rank of a workload (default: rank 0)."),
    top: int = TOP_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """The longest dependency path with the recorded durations: its length, time by operator and kind, and
    the slack of the longest operators off the path.

    Example: chakra analyze critical-path out/job.0.et --top 10
    """
    from chakra.analyze.critical_path import critical_path

    table = _one_rank(trace, rank)
    with busy("finding the critical path"):
        path = critical_path(table, top=top)
    if as_json:
        print_json(path.to_dict())
        return
    _note_untimed([table])
    of_rank = f" of rank {table.rank}" if table.rank is not None else ""
    stdout.print(f"critical path{of_rank}: [bold]{_ms(path.length_ns)} ms[/bold] through {len(path.positions):,} nodes")
    print_table(_table("by kind (ms)", ["kind", "on the path"], [(k, _ms(v)) for k, v in path.by_category.items()]))
    print_table(
        _table(
            "by operator (ms)",
            ["operator", "on the path"],
            [(k, _ms(v)) for k, v in list(path.by_operator.items())[:top]],
        )
    )
    if path.slack:
        print_table(
            _table(
                "slack of the longest operators off the path (ms)",
                ["operator", "id", "duration", "slack"],
                [(s.name, s.node_id, _ms(s.dur_ns), _ms(s.slack_ns)) for s in path.slack],
            )
        )


def _digests(
    where: str, timing: Timing, workers: int | None, scheduler: str | None
) -> tuple[RankResults[RankDigest], RankComparison]:
    """Every rank's digest (made where its table is loaded; the tables are not kept) and the ranks
    compared."""
    from functools import partial

    from chakra.analyze.ranks import compare_digests, rank_digest
    from chakra.workload import open_workload

    with progress_bar() as bar:
        task = bar.add_task("analysing ranks", total=None)
        found = open_workload(where).map(
            partial(rank_digest, timing=timing.value),
            workers=workers,
            scheduler=scheduler,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    if found.missing:
        note(f"ranks {rank_ranges(found.missing)} have no file: only ranks {rank_ranges(found.results)} are analysed")
    untimed = sum(d.breakdown.untimed_comm_nodes for d in found.results.values())
    if untimed:
        note(f"{untimed:,} communication nodes have no recorded duration and count 0 here; chakra simulate times them")
    return found, compare_digests(found.results, found.comm_groups)


@analyze_app.command("ranks")
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def ranks_cmd(
    workload: str = WORKLOAD_ARG,
    timing: Timing = TIMING_OPTION,
    as_json: bool = JSON_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
    per_rank: bool = PER_RANK_OPTION,
) -> None:
    """Ranks side by side: imbalance, the slowest rank, and stragglers (ranks that reach collectives last).
    Past {MAX_LISTED_RANKS} ranks identical ranks share a row (or each figure shows min / median / max with the ranks
    at the extremes); --per-rank lists every rank.

    Example: chakra analyze ranks out/job
    """
    from chakra.cli.rank_view import rank_table

    _, comparison = _digests(workload, timing, workers, scheduler)
    if as_json:
        print_json(comparison.to_dict())
        return
    table, remark = rank_table(
        "ranks (ms)",
        ["nodes", "span", "compute", "communication", "exposed", "idle"],
        {
            r.rank: (r.nodes, r.span_ns, r.compute_ns, r.communication_ns, r.comm_exposed_ns, r.idle_ns)
            for r in comparison.rows
        },
        [lambda n: f"{n:,.0f}", *([_ms] * 5)],
        per_rank=per_rank,
    )
    print_table(table)
    if remark:
        stdout.print(Text(remark, style="dim"))
    imbalance = ", ".join(f"{k} {v:.1%}" for k, v in comparison.imbalance.items())
    stdout.print(f"imbalance (max / mean - 1): {imbalance}; slowest rank {comparison.slowest_rank}")
    if comparison.stragglers:
        listed = comparison.stragglers if per_rank else comparison.stragglers[:MAX_LISTED_RANKS]
        print_table(
            _table(
                "stragglers",
                ["rank", "times last", "late total (ms)", "late max (ms)"],
                [(s.rank, s.times_last, _ms(s.late_ns_total), _ms(s.late_ns_max)) for s in listed],
            )
        )
        if len(listed) < len(comparison.stragglers):
            note(f"the {len(listed)} latest of {len(comparison.stragglers):,} stragglers; --per-rank lists every one")
    elif comparison.note:
        stdout.print(Text(f"note: {comparison.note}", style="yellow"))
    else:
        stdout.print(f"no stragglers among {len(comparison.collectives):,} matched collectives")


@analyze_app.command("diff")
def diff_cmd(
    before: str = typer.Argument(..., help="The first run: a workload PREFIX, its folder, or one .et file."),
    after: str = typer.Argument(..., help="The second run of the same workload."),
    rank: int | None = typer.Option(None, "--rank", help="Compare this rank only (default: the whole workload)."),
    timing: Timing = TIMING_OPTION,
    top: int = TOP_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """What changed between two runs: operators added, removed, faster, slower, and the change in step time
    explained by category.

    Example: chakra analyze diff before/job after/job --top 20
    """
    from chakra.analyze.diff import diff_workloads

    first, second = _load(before), _load(after)
    result = diff_workloads(first, second, rank=rank, timing=timing)
    if as_json:
        print_json(result.to_dict())
        return
    for text in result.notes:
        note(text)
    _note_untimed([*first.tables.values(), *second.tables.values()])
    sign = "+" if result.delta_span_ns >= 0 else ""
    stdout.print(
        f"step: {_ms(result.span_a_ns)} ms -> {_ms(result.span_b_ns)} ms ({sign}{_ms(result.delta_span_ns)} ms)"
    )
    print_table(
        _table(
            "change explained (ms)",
            ["category", "before", "after", "change"],
            [(k, _ms(a), _ms(b), _ms(d)) for k, (a, b, d) in result.by_category.items()],
        )
    )
    print_table(
        _table("step change split (ms)", ["part", "change"], [(k, _ms(v)) for k, v in result.explained.items()])
    )
    print_table(
        _table(
            "operators (ms)",
            ["operator", "status", "count", "before", "after", "change"],
            [
                (o.name, o.status, f"{o.count_a} -> {o.count_b}", _ms(o.total_ns_a), _ms(o.total_ns_b), _ms(o.delta_ns))
                for o in result.ops[:top]
            ],
        )
    )


@viz_app.command("graph")
def graph_cmd(
    trace: str = typer.Argument(..., help="One .et file, or a workload PREFIX with --rank."),
    output: Path = typer.Option(..., "-o", "--output", help="OUT.dot, .gv, .svg, .pdf, .png or .graphml."),
    rank: int | None = typer.Option(None, "--rank", help="The rank of a workload (default: rank 0)."),
    around: int | None = typer.Option(None, "--around", help="Only this node id's neighbourhood."),
    depth: int = typer.Option(2, "--depth", help="Hops around --around, both directions."),
    comm_only: bool = typer.Option(False, "--comm-only", help="Only communication nodes (paths between them kept)."),
    collapse_cpu: bool = typer.Option(False, "--collapse-cpu", help="Leave CPU ops out (paths through them kept)."),
    max_nodes: int | None = typer.Option(
        None, "--max-nodes", min=0, help="Draw at most this many nodes (default: a few thousand; 0: no limit)."
    ),
) -> None:
    """Draw the dependency graph (Graphviz for SVG/PDF/PNG), with filters that keep real traces readable.

    Example: chakra viz graph out/job.0.et -o step.svg --comm-only
    """
    from chakra.viz import graph

    table = _one_rank(trace, rank)
    limit: dict[str, Any] = {} if max_nodes is None else {"max_nodes": max_nodes or None}
    with busy(f"drawing {output.name}"):
        view = graph.export_graph(
            table, output, around=around, depth=depth, comm_only=comm_only, collapse_cpu=collapse_cpu, **limit
        )
    stderr.print(f"wrote {output}: {len(view.positions):,} nodes, {len(view.edges):,} edges")
    for text in view.notes:
        note(text)


@viz_app.command("timeline")
def timeline_cmd(
    workload: str = WORKLOAD_ARG,
    output: Path = typer.Option(..., "-o", "--output", help="The Chrome/Perfetto trace JSON to write."),
    workers: int | None = WORKERS_OPTION,
) -> None:
    """A Chrome/Perfetto timeline from the trace's own start times: a process per rank, a track per
    thread/stream. (A simulated run's timeline: chakra simulate --timeline.)

    Example: chakra viz timeline out/job -o job.trace.json
    """
    from chakra.viz import timeline

    loaded = _load(workload, workers)
    with busy(f"writing {output.name}"):
        written = timeline.write_trace_timeline(loaded, output)
    # nodes without a start time are reported by the library's warning
    stderr.print(f"wrote {output}: {sum(written.timed.values()):,} nodes")


@viz_app.command("plot")
def plot_cmd(
    workload: str = WORKLOAD_ARG,
    kind: PlotKind = typer.Option(PlotKind.BREAKDOWN, "--kind", case_sensitive=False, help="What to plot."),
    output: Path = typer.Option(..., "-o", "--output", help="OUT.png or OUT.svg."),
    rank: int | None = typer.Option(None, "--rank", help="For critical-path: the rank (default: the slowest)."),
    timing: Timing = TIMING_OPTION,
) -> None:
    """Plot an analysis as PNG or SVG: a stacked breakdown per rank, the ranks side by side, or the
    operators of a critical path.

    Example: chakra viz plot out/job --kind breakdown -o breakdown.png
    """
    from chakra.viz.report import plot_analysis

    loaded = _load(workload)
    with busy(f"plotting {output.name}"):
        plot_analysis(loaded, kind, output, rank=rank, timing=timing)
    stderr.print(f"wrote {output}")


@app.command()
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def report(
    workload: str = WORKLOAD_ARG,
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write."),
    title: str | None = typer.Option(None, "--title", help="Page title (default: from the workload name)."),
    timing: Timing = TIMING_OPTION,
    top: int = TOP_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
) -> None:
    """One self-contained HTML page (tables and plots, readable offline) about a workload. Ranks are
    analysed one at a time (past {MAX_LISTED_RANKS}, identical ranks share a row); a rank whose dependencies have a
    cycle still gets what needs no schedule (operator totals, communication) and the cycle named.

    Example: chakra report out/job -o report.html
    """
    from chakra.viz.report import render_report, report_data_of, write_html

    with progress_bar() as bar:
        task = bar.add_task("analysing ranks", total=None)
        data = report_data_of(
            workload,
            timing=timing.value,
            top=top,
            workers=workers,
            scheduler=scheduler,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    with busy("plotting"):
        write_html(render_report(data, title=title), output)
    for rank, damaged in sorted(data.damaged.items())[:1]:
        more = f" (and {len(data.damaged) - 1:,} more ranks)" if len(data.damaged) > 1 else ""
        note(
            f"rank {rank}{more}: {damaged.cycle}; the report shows what needs no schedule "
            "(chakra adapt --target astra-sim writes a copy without the closing edges)"
        )
    stderr.print(f"wrote {output}: {len(data.nodes):,} rank{'s' if len(data.nodes) != 1 else ''}")
