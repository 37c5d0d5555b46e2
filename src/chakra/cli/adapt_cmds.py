"""``chakra adapt``: rewrite a workload into what one consumer runs, with a report of each change."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.cli.console import late_help, note, print_json, print_table, stage_progress, stdout, write_json
from chakra.validate.findings import Target

# The adapting passes (protobuf, numpy) are imported in the command: start-up imports only the
# choice of target.
if TYPE_CHECKING:
    from chakra.adapt import AdaptResult

app = typer.Typer()

#: Details listed per change kind in the table (the JSON report has all of them).
DETAILS_SHOWN = 5


def _target_help() -> str:
    from chakra.adapt.rules import RULES

    described = "; ".join(f"{target.value}: {rules.description}" for target, rules in RULES.items())
    return f"The consumer to adapt for ({described})."


@app.command(cls=late_help(target=_target_help))
def adapt(
    source: Path = typer.Argument(
        ..., help="The workload: PREFIX (of PREFIX.{rank}.et), one of its files, or its folder."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Output prefix: writes OUT.{rank}.et (may be the input's own)."
    ),
    target: Target = typer.Option(
        # the help names each target's rules (_target_help), filled in when it is shown
        Target.ASTRA_SIM,
        "--target",
        case_sensitive=False,
        help="The consumer to adapt for.",
    ),
    workers: int | None = typer.Option(None, "--workers", help="Ranks adapted at once (default: CPU count)."),
    report: Path | None = typer.Option(None, "--report", help="Also write the full report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of a table."),
) -> None:
    """Rewrite a workload into what a consumer runs, and report every change by kind and count.

    For ASTRA-sim: METADATA and INVALID nodes are removed (their process groups go to
    OUT.comm_groups.json), collectives it refuses are written as the one it simulates (the type that
    ran kept in recorded_comm_type), dependencies on missing nodes are dropped, cycles are broken at
    named edges, attributes are rewritten into the value kind it reads, and host ops typed as
    communication become CPU compute. Everything else is copied byte for byte.

    Example: chakra adapt runs/job -o runs/job-astra --target astra-sim
    """
    from chakra.adapt import adapt_workload

    with stage_progress() as tell:
        result = adapt_workload(source, output, target, workers=workers, progress=tell)
    summary = result.to_dict()
    if report is not None:
        write_json(report, summary)
    if as_json:
        print_json(summary)
        return
    print_adapt_result(result)


def print_adapt_result(result: AdaptResult) -> None:
    """The table of an adapt pass's changes (also printed by ``convert --target``)."""
    from chakra.adapt import CHANGE_TEXT

    changes = result.changes
    ranks = len(result.paths)
    stdout.print(
        Text(
            f"adapted {ranks} rank{'s' if ranks != 1 else ''} for {result.target.value} -> {result.prefix}.{{rank}}.et"
            + (f" (+ {result.groups_path.name})" if result.groups_path else "")
        )
    )
    if not changes.total:
        stdout.print(Text("nothing to change: the files are copies of the input"))
    else:
        table = Table(show_header=True, header_style="bold")
        table.add_column("change", overflow="fold")
        table.add_column("count", justify="right", no_wrap=True)
        table.add_column("what", overflow="fold")
        for change, count in sorted(changes.counts.items(), key=lambda item: item[0].value):
            details = changes.details.get(change)
            shown = ""
            if details:
                top = details.most_common(DETAILS_SHOWN)
                shown = ", ".join(f"{what} x{n}" if n > 1 else what for what, n in top)
                if len(details) > DETAILS_SHOWN:
                    shown += f", ... ({len(details) - DETAILS_SHOWN} more)"
            table.add_row(change.value, f"{count:,}", CHANGE_TEXT[change] + (f"\n{shown}" if shown else ""))
        print_table(table)
        unchanged = result.unchanged_ranks
        if unchanged:
            stdout.print(Text(f"ranks copied unchanged: {unchanged}"))
    if result.removed:
        shown = ", ".join(path.name for path in result.removed[:5])
        note(f"removed {len(result.removed)} files of an earlier workload with this prefix: {shown}")
