"""``chakra analyze ...`` (where the time goes), ``chakra viz ...`` (graphs, timelines, plots) and
``chakra report`` (one HTML page)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from chakra.analyze.choices import RankBy, Timing
from chakra.cli.console import Group, busy, note, print_json, progress_bar, stderr, stdout
from chakra.errors import ChakraInputError
from chakra.paths import rank_of
from chakra.viz.choices import PlotKind

# The analyses, the node table and the plots (numpy, protobuf, matplotlib) are imported in the
# commands: start-up imports only the choices they offer.
if TYPE_CHECKING:
    from chakra.analyze.workload import Workload
    from chakra.table import NodeTable

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

#: Tables show ms; analyses return ns.
NS_PER_MS = 1e6
DEFAULT_TOP = 15

analyze_app = typer.Typer(
    cls=Group,
    help="Where the time goes: breakdown, critical path, ranks compared, two runs diffed.\n\n"
    "Example: chakra analyze breakdown out/job",
    no_args_is_help=True,
)
viz_app = typer.Typer(
    cls=Group,
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
    from chakra.analyze.workload import load_workload

    with progress_bar() as bar:
        task = bar.add_task("loading ranks", total=None)
        workload = load_workload(
            where,
            ranks=ranks,
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
    from chakra.table import load_table
    from chakra.trace import TraceSet

    path = Path(where)
    if path.is_file() and (rank is None or rank_of(path) == rank):
        with busy(f"loading {path.name}"):
            return load_table(path)
    traces = TraceSet.discover(where)
    chosen = min(traces.ranks) if rank is None else rank
    if chosen not in traces.ranks:
        raise ChakraInputError(f"the workload has no rank {chosen} (ranks {sorted(traces.ranks)})", path=traces.prefix)
    if rank is None and chosen != 0:
        note(f"the workload has no rank 0: rank {chosen} is used (--rank picks another)")
    with busy(f"loading {traces.ranks[chosen].name}"):
        return load_table(traces.ranks[chosen], chosen)


def _table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    # light rules and no outer padding: wide numeric tables fit an 80-column terminal unabridged
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i > 0, overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def _ranks(workload: Workload, rank: int | None) -> list[int]:
    if rank is None:
        return workload.ranks
    if rank not in workload.tables:
        raise ChakraInputError(f"the workload has no rank {rank} (ranks {workload.ranks})", path=workload.prefix)
    return [rank]


@analyze_app.command("summary")
def summary_cmd(
    workload: str = WORKLOAD_ARG,
    rank: int | None = typer.Option(None, "--rank", help="Only this rank."),
    timing: Timing = TIMING_OPTION,
    as_json: bool = JSON_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
) -> None:
    """Per rank: time span, busy time per thread/stream, nodes by kind, collectives with their bytes.

    Example: chakra analyze summary out/job --rank 0
    """
    from chakra.analyze.breakdown import breakdown

    loaded = _load(workload, workers, scheduler, ranks=None if rank is None else [rank])
    results = {r: breakdown(loaded.tables[r], timing=timing) for r in _ranks(loaded, rank)}
    if as_json:
        print_json({str(r): b.to_dict() for r, b in results.items()})
        return
    for r, b in results.items():
        stdout.print(f"[bold]rank {r}[/bold]: span {_ms(b.span_ns)} ms ({b.timing} timing)")
        stdout.print(
            _table(
                "busy time per track (ms)",
                ["track", "busy", "of span"],
                [
                    (track, _ms(ns), f"{ns / b.span_ns:.1%}" if b.span_ns else "-")
                    for track, ns in b.busy_by_track.items()
                ],
            )
        )
        stdout.print(
            _table("nodes by kind", ["kind", "nodes"], [(k, f"{v:,}") for k, v in b.nodes_by_category.items()])
        )
        if b.count_by_collective:
            stdout.print(
                _table(
                    "communication",
                    ["kind", "count", "bytes"],
                    [(k, f"{c:,}", f"{b.bytes_by_collective.get(k, 0):,}") for k, c in b.count_by_collective.items()],
                )
            )
    _note_untimed(loaded.tables[r] for r in results)


@analyze_app.command("breakdown")
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
) -> None:
    """Compute / communication / memory / idle per rank, communication overlapped or exposed, and the top
    operators by total and exclusive time.

    Example: chakra analyze breakdown out/job --top 20
    """
    from chakra.analyze.breakdown import TIME_HEADERS, breakdown, top_operators

    loaded = _load(workload, workers, scheduler, ranks=None if rank is None else [rank])
    ranks = _ranks(loaded, rank)
    results = {r: breakdown(loaded.tables[r], timing=timing) for r in ranks}
    tops = {r: top_operators(loaded.tables[r], top, by=by, timing=timing) for r in ranks}
    if as_json:
        print_json({str(r): {**b.to_dict(), "top_operators": [vars(s) for s in tops[r]]} for r, b in results.items()})
        return
    stdout.print(
        _table(
            "time breakdown (ms; comm: communication, overlap: comm hidden behind compute)",
            ["rank", *TIME_HEADERS, "timing"],
            [(r, *map(_ms, b.times_ns()), b.timing) for r, b in results.items()],
        )
    )
    for r in ranks:
        stdout.print(
            _table(
                f"rank {r}: top operators (ms)",
                ["operator", "category", "count", "total", "exclusive"],
                [(s.name, s.category, f"{s.count:,}", _ms(s.total_ns), _ms(s.exclusive_ns)) for s in tops[r]],
            )
        )
    _note_untimed(loaded.tables[r] for r in ranks)


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
    stdout.print(_table("by kind (ms)", ["kind", "on the path"], [(k, _ms(v)) for k, v in path.by_category.items()]))
    stdout.print(
        _table(
            "by operator (ms)",
            ["operator", "on the path"],
            [(k, _ms(v)) for k, v in list(path.by_operator.items())[:top]],
        )
    )
    if path.slack:
        stdout.print(
            _table(
                "slack of the longest operators off the path (ms)",
                ["operator", "id", "duration", "slack"],
                [(s.name, s.node_id, _ms(s.dur_ns), _ms(s.slack_ns)) for s in path.slack],
            )
        )


@analyze_app.command("ranks")
def ranks_cmd(
    workload: str = WORKLOAD_ARG,
    timing: Timing = TIMING_OPTION,
    as_json: bool = JSON_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
) -> None:
    """Ranks side by side: imbalance, the slowest rank, and stragglers (ranks that reach collectives last).

    Example: chakra analyze ranks out/job
    """
    from chakra.analyze.ranks import compare_ranks

    loaded = _load(workload, workers, scheduler)
    comparison = compare_ranks(loaded, timing=timing)
    if as_json:
        print_json(comparison.to_dict())
        return
    _note_untimed(loaded.tables.values())
    stdout.print(
        _table(
            "ranks (ms)",
            ["rank", "nodes", "span", "compute", "communication", "exposed", "idle"],
            [
                (
                    r.rank,
                    f"{r.nodes:,}",
                    _ms(r.span_ns),
                    _ms(r.compute_ns),
                    _ms(r.communication_ns),
                    _ms(r.comm_exposed_ns),
                    _ms(r.idle_ns),
                )
                for r in comparison.rows
            ],
        )
    )
    imbalance = ", ".join(f"{k} {v:.1%}" for k, v in comparison.imbalance.items())
    stdout.print(f"imbalance (max / mean - 1): {imbalance}; slowest rank {comparison.slowest_rank}")
    if comparison.stragglers:
        stdout.print(
            _table(
                "stragglers",
                ["rank", "times last", "late total (ms)", "late max (ms)"],
                [(s.rank, s.times_last, _ms(s.late_ns_total), _ms(s.late_ns_max)) for s in comparison.stragglers],
            )
        )
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
    stdout.print(
        _table(
            "change explained (ms)",
            ["category", "before", "after", "change"],
            [(k, _ms(a), _ms(b), _ms(d)) for k, (a, b, d) in result.by_category.items()],
        )
    )
    stdout.print(
        _table("step change split (ms)", ["part", "change"], [(k, _ms(v)) for k, v in result.explained.items()])
    )
    stdout.print(
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
def report(
    workload: str = WORKLOAD_ARG,
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write."),
    title: str | None = typer.Option(None, "--title", help="Page title (default: from the workload name)."),
    timing: Timing = TIMING_OPTION,
    top: int = TOP_OPTION,
    workers: int | None = WORKERS_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
) -> None:
    """One self-contained HTML page (tables and plots, readable offline) about a workload.

    Example: chakra report out/job -o report.html
    """
    from chakra.viz.report import write_report

    loaded = _load(workload, workers, scheduler)
    with busy("analysing and plotting"):
        write_report(loaded, output, title=title, timing=timing, top=top)
    stderr.print(f"wrote {output}")
