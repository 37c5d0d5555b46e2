"""``chakra info`` and ``chakra validate``: look at traces without changing them."""

from __future__ import annotations

import dataclasses
import glob
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.analyze.across import MAX_LISTED_RANKS
from chakra.cli.console import EXIT_CHECKS_FAILED, print_table, progress_bar, quoting, stdout
from chakra.cli.rank_view import PER_RANK_OPTION
from chakra.errors import ChakraInputError
from chakra.units import US_PER_MS, US_PER_S
from chakra.validate import (
    DEFAULT_LIMIT_PER_CODE,
    ERROR,
    Finding,
    Target,
    count_by_severity,
    iter_validate_set,
    validate_file,
)

# The readers (protobuf, numpy) are imported in the commands: chakra.validate imports its checks
# only when one runs, so start-up imports only its vocabulary.
if TYPE_CHECKING:
    from chakra.analyze.summary import TraceSummary
    from chakra.workload import Workload

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _fmt_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.2f} {unit}"
        value /= 1024
    return f"{n} B"


def _fmt_us(us: int | None) -> str:
    if us is None:
        return "n/a (no start times)"
    if us >= 1_000_000:
        return f"{us / US_PER_S:,.3f} s"
    if us >= 1_000:
        return f"{us / US_PER_MS:,.3f} ms"
    return f"{us:,} µs"


#: A metadata value longer than this (or of several lines: a whole program, a generator's spec) gets
#: one line in the table, its start and its size; --json gives it whole.
METADATA_SHOWN_CHARS = 80


def _one_line(value: str) -> str:
    """``value`` as one line of the table: whole when short, else its start and its size.

    >>> _one_line("1.0.2")
    '1.0.2'
    >>> _one_line("<algo>\\n  <gpu/>\\n" + "x" * 100)[:40]
    '<algo> <gpu/> xxxxxxxxxxxxxxxxxxxxxxxxxx'
    >>> _one_line("<algo>\\n  <gpu/>\\n" + "x" * 100)[-48:]
    '(116 characters, 3 lines; --json shows it whole)'
    """
    if len(value) <= METADATA_SHOWN_CHARS and "\n" not in value:
        return value
    lines = value.count("\n") + 1
    start = " ".join(value.split())[:METADATA_SHOWN_CHARS]
    return f"{start}… ({len(value):,} characters, {lines:,} lines; --json shows it whole)"


def _render_summary(s: TraceSummary, *, ranks: str | None = None) -> None:
    """One file's summary, or a workload's (``ranks``: the ranks it adds up; no attribute coverage)."""
    head = Table.grid(padding=(0, 2))
    head.add_row("workload" if ranks is not None else "file", Text(str(s.path)))
    head.add_row("ranks" if ranks is not None else "rank", ranks or (str(s.rank) if s.rank is not None else "-"))
    head.add_row("version", Text(s.version or "(empty)"))
    for key, value in s.metadata.items():
        head.add_row(Text(f"metadata.{key}"), Text(_one_line(str(value))))
    head.add_row("nodes", f"{s.num_nodes:,}")
    head.add_row("deps", f"{s.num_data_deps:,} data, {s.num_ctrl_deps:,} ctrl")
    head.add_row(
        "durations", f"{_fmt_us(s.total_dur_us)} total, {_fmt_us(s.cpu_dur_us)} CPU, {_fmt_us(s.device_dur_us)} device"
    )
    head.add_row("time span", _fmt_us(s.span_us))
    head.add_row("comm_size total", _fmt_bytes(s.comm_size_total))
    stdout.print(head)

    types = Table(title="node types", title_justify="left")
    types.add_column("type", overflow="fold")
    types.add_column("nodes", justify="right", no_wrap=True)
    for name, count in sorted(s.by_type.items(), key=lambda kv: -kv[1]):
        types.add_row(name, f"{count:,}")
    print_table(types)

    if s.collectives or s.p2p:
        comm = Table(title="communication", title_justify="left")
        comm.add_column("kind", overflow="fold")
        comm.add_column("count", justify="right", no_wrap=True)
        comm.add_column("bytes", justify="right", no_wrap=True)
        for name, entry in sorted({**s.collectives, **s.p2p}.items()):
            comm.add_row(name, f"{entry['count']:,}", _fmt_bytes(entry["bytes"]))
        print_table(comm)

    if s.attr_nodes and ranks is None:
        cover = Table(title="attribute coverage", title_justify="left")
        cover.add_column("attribute", overflow="fold")
        cover.add_column("nodes", justify="right", no_wrap=True)
        cover.add_column("%", justify="right", no_wrap=True)
        cover.add_column("stored as", overflow="fold")
        for name, count in sorted(s.attr_nodes.items(), key=lambda kv: (-kv[1], kv[0])):
            members = ", ".join(f"{m} ({c:,})" for m, c in s.attr_members[name].most_common())
            cover.add_row(Text(name), f"{count:,}", f"{100 * count / max(s.num_nodes, 1):.1f}", members)
        print_table(cover)


@app.command()
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def info(
    inputs: list[Path] = typer.Argument(..., help=".et files (plain, .gz or .zst), or a workload PREFIX or directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (a summary per file) instead of tables."),
    per_rank: bool = PER_RANK_OPTION,
) -> None:
    """Show what a trace holds: node and collective counts, bytes, time span, attribute coverage.

    A workload PREFIX (or folder) is shown as its totals and a table of its ranks (grouped past {MAX_LISTED_RANKS}
    ranks); --per-rank adds every rank's own summary.

    Example: chakra info llama.0.et llama.1.et --json
    """
    from chakra.analyze.summary import summarize_file

    targets = _targets_of(inputs)
    files = list(
        dict.fromkeys(p for item in targets for p in ([item] if isinstance(item, Path) else item.files.values()))
    )
    summaries: dict[Path, TraceSummary] = {}
    with progress_bar() as progress:
        task = progress.add_task("reading", total=len(files))
        for path in files:
            summaries[path] = summarize_file(path)
            progress.advance(task)
    # a workload written as classes: each rank counts as its class's file, under its own rank
    shown = [[summaries[item]] if isinstance(item, Path) else _rank_summaries(item, summaries) for item in targets]
    if as_json:
        stdout.print_json(json.dumps([s.to_dict() for found in shown for s in found]))
        return
    for i, (item, found) in enumerate(zip(targets, shown, strict=True)):
        if i:
            stdout.rule()
        if isinstance(item, Path):
            _render_summary(found[0])
        else:
            _render_workload(item, found, per_rank)


def _render_workload(traces: Workload, summaries: list[TraceSummary], per_rank: bool) -> None:
    from chakra.analyze.across import rank_ranges
    from chakra.analyze.summary import combine_summaries
    from chakra.cli.rank_view import rank_table

    ranks = sorted(traces.files)
    _render_summary(combine_summaries(summaries, path=traces.prefix), ranks=rank_ranges(ranks))
    if traces.missing:
        stdout.print(Text(f"missing ranks: {rank_ranges(traces.missing)}", style="yellow"))
    rows = {
        s.rank if s.rank is not None else r: (s.num_nodes, s.total_dur_us, s.comm_size_total, s.span_us)
        for r, s in zip(ranks, summaries, strict=True)
    }
    table, remark = rank_table(
        "ranks",
        ["nodes", "durations", "comm_size", "time span"],
        rows,
        [lambda n: f"{n:,.0f}", _fmt_us_compact, _fmt_bytes, _fmt_us_compact],
        per_rank=per_rank,
    )
    print_table(table)
    if remark:
        stdout.print(Text(f"{remark}; attribute coverage: chakra info on one rank file", style="dim"))
    if per_rank:
        for s in summaries:
            stdout.rule()
            _render_summary(s)


def _fmt_us_compact(us: float | None) -> str:
    return "n/a" if us is None else _fmt_us(round(us))


def _render_findings(title: str, findings: list[Finding]) -> None:
    counts = count_by_severity(findings)
    status = Text("OK", style="bold green") if not counts[ERROR] else Text("FAILED", style="bold red")
    stdout.print(
        Text.assemble(
            (title, "bold"),
            "  ",
            status,
            f"  {counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes",
        )
    )
    if not findings:
        return
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("severity", overflow="fold")
    table.add_column("code", overflow="fold")
    table.add_column("node", justify="right", no_wrap=True)
    table.add_column("message", overflow="fold")
    for f in findings:
        message = Text(f.message)
        if f.hint:
            message.append(f"\nfix: {f.hint}", style="dim")
        table.add_row(
            Text(f.severity, style=SEVERITY_STYLE[f.severity]),
            f.code,
            "" if f.node_id is None else str(f.node_id),
            message,
        )
    print_table(table)


def _targets_of(inputs: list[Path]) -> list[Path | Workload]:
    """Each input is a file (checked alone) or a workload prefix/directory (checked across ranks)."""
    from chakra.paths import prefix_of_classes
    from chakra.workload import open_workload

    out: list[Path | Workload] = []
    for item in inputs:
        if item.is_file() and prefix_of_classes(item) is None:  # a classes mapping names its workload
            out.append(item)
            continue
        try:
            out.append(open_workload(item, whole=True))
        except ChakraInputError:
            if not item.exists() and not any(item.parent.glob(f"{glob.escape(item.name)}.*")):
                raise ChakraInputError(
                    "no such file, workload prefix or directory",
                    path=item,
                    hint="pass .et files, a PREFIX of PREFIX.{rank}.et, or their directory",
                ) from None
            raise
    return out


@app.command()
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def validate(
    inputs: list[Path] = typer.Argument(..., help=".et files, or a workload PREFIX (PREFIX.{rank}.et) or directory."),
    target: Target | None = typer.Option(
        None, "--target", case_sensitive=False, help="Also check what a consumer needs."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print findings as JSON."),
    max_per_code: int = typer.Option(
        DEFAULT_LIMIT_PER_CODE,
        "--max-per-code",
        min=0,
        help="List at most this many findings of one kind per file (0: all).",
    ),
    per_rank: bool = PER_RANK_OPTION,
) -> None:
    """Check traces for structural errors and consumer incompatibilities. Exit 1 when there are errors.

    A workload prefix or directory is checked rank by rank and across ranks (missing ranks,
    unmatched send/recv, collectives in different orders); past {MAX_LISTED_RANKS} ranks, the rank files without
    findings are counted in one line (--per-rank lists every one).

    Example: chakra validate runs/llama --target astra-sim
    """
    limit = max_per_code or None
    results: list[tuple[str, list[Finding]]] = []
    sets: list[tuple[str, list[tuple[str, list[Finding]]]]] = []  # a workload's name and its files' results
    work = _targets_of(inputs)
    total = sum(1 if isinstance(item, Path) else len(item) + 1 for item in work)
    with progress_bar() as progress:
        task = progress.add_task("validating", total=total)
        for item in work:
            if isinstance(item, Path):
                results.append((str(item), validate_file(item, target=target, limit_per_code=limit)))
                progress.advance(task)
                continue
            mine: list[tuple[str, list[Finding]]] = []
            for rank, findings in iter_validate_set(item, target=target, limit_per_code=limit):
                name = _rank_name(item, rank) if rank is not None else f"{item.prefix} (across ranks)"
                mine.append((name, findings))
                progress.advance(task)
            results.extend(mine)
            sets.append((str(item.prefix), mine))
    failed = any(count_by_severity(f)[ERROR] for _, f in results)
    if as_json:
        stdout.print_json(
            json.dumps(
                {
                    "ok": not failed,
                    "files": [
                        {"file": name, "counts": count_by_severity(f), "findings": [x.to_dict() for x in f]}
                        for name, f in results
                    ],
                }
            )
        )
    else:
        in_sets = {name for _, files in sets for name, _ in files}
        for name, findings in results:
            if name not in in_sets:
                _render_findings(name, findings)
        for prefix, files in sets:
            _render_workload_findings(prefix, files, per_rank)
    if failed:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _render_workload_findings(prefix: str, files: list[tuple[str, list[Finding]]], per_rank: bool) -> None:
    """Every rank file with findings (at most :data:`MAX_LISTED_RANKS` unless ``per_rank``), the rest
    as one line, then the checks across ranks."""
    from chakra.cli.rank_view import lists_every_rank

    *ranks, across = files
    if lists_every_rank(len(ranks), per_rank):
        for name, findings in files:
            _render_findings(name, findings)
        return
    with_findings = [(name, f) for name, f in ranks if f]
    for name, findings in with_findings[:MAX_LISTED_RANKS]:
        _render_findings(name, findings)
    clean = len(ranks) - len(with_findings)
    left = with_findings[MAX_LISTED_RANKS:]
    totals = count_by_severity([x for _, f in ranks for x in f])
    stdout.print(
        Text.assemble(
            (f"{prefix}: {len(ranks):,} rank files", "bold"),
            "  ",
            Text("OK", style="bold green") if not totals[ERROR] else Text("FAILED", style="bold red"),
            f"  {clean:,} without findings; {totals['error']:,} errors, {totals['warning']:,} warnings, "
            f"{totals['info']:,} notes in all",
        )
    )
    if left:
        codes: dict[str, int] = {}
        for _, findings in left:
            for x in findings:
                codes[x.code] = codes.get(x.code, 0) + 1
        listed = ", ".join(f"{code} ({n:,})" for code, n in sorted(codes.items(), key=lambda kv: -kv[1]))
        stdout.print(f"{len(left):,} more rank files with findings not listed: {listed}; --per-rank lists them")
    _render_findings(*across)


def _rank_summaries(workload: Workload, summaries: dict[Path, TraceSummary]) -> list[TraceSummary]:
    """Each rank's summary; in a workload written as classes, its class file's under its own rank."""
    if workload.classes is None:
        return [summaries[path] for path in workload.files.values()]
    return [dataclasses.replace(summaries[path], rank=rank) for rank, path in workload.files.items()]


def _rank_name(workload: Workload, rank: int) -> str:
    """How findings name a rank: its file, or its rank and class file in a workload written as classes."""
    path = workload.files[rank]
    return f"rank {rank} ({path})" if workload.classes is not None else str(path)
