"""``chakra anonymize``: a workload safe to share, checked for leaks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer
from rich.table import Table

from chakra.cli.console import EXIT_CHECKS_FAILED, emit_results, print_table, stage_progress, stderr, stdout

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

#: The size bucketings (chakra.share.anonymize.SizeBuckets), listed here so that --help needs no numpy.
SIZE_BUCKETS = ("none", "pow2")
PERCENT = 100


def _fraction(text: str) -> float:
    """``2%`` or ``0.02`` as 0.02."""
    try:
        return float(text[:-1]) / PERCENT if text.endswith("%") else float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a fraction (2% or 0.02)", param_hint="--time-noise") from None


@app.command("anonymize")
def anonymize_cmd(
    workload: Path = typer.Argument(..., help="A workload: PREFIX of PREFIX.{rank}.et, its folder, or one file."),
    out: Path = typer.Option(..., "-o", "--output", help="The anonymized workload's prefix (OUT.{rank}.et)."),
    key: str | None = typer.Option(
        None, "--key", help="The key of the name tokens (same key, same tokens across runs); default: a random one."
    ),
    keep_op_kinds: bool = typer.Option(
        False, "--keep-op-kinds", help="Names keep their coarse class: matmul:t4mz..., attention:..., elementwise:..."
    ),
    keep_attrs: list[str] = typer.Option(
        [], "--keep-attr", help="Keep this attribute outside the registry (text tokenized; repeatable)."
    ),
    size_buckets: str = typer.Option(
        "none", "--size-buckets", help="pow2: sizes and shapes rounded up to a power of two."
    ),
    time_noise: str = typer.Option("0", "--time-noise", help="Jitter every duration within this bound (2% or 0.02)."),
    shuffle: bool = typer.Option(False, "--shuffle", help="Write nodes in a random dependency-respecting order."),
    seed: int = typer.Option(0, "--seed", help="The seed of --time-noise and --shuffle."),
    mapping: Path | None = typer.Option(
        None, "--mapping", help="Write token -> original name here (JSON, for the owner; never share it)."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
) -> None:
    """Write a copy of a workload with every name tokenized and every free text removed, then check it.

    Structure, node kinds, dependencies, collective types, groups, byte counts and durations are
    kept (unless coarsened), so analyses and simulations answer as for the original. After writing,
    every string of the input longer than 3 characters is searched for in the output: a hit fails
    the command (exit 1), naming the file and field.

    Example: chakra anonymize runs/job -o share/job --keep-op-kinds --key "$KEY" --mapping owner/job.tokens.json
    """
    from chakra.share.anonymize import AnonymizeOptions, SizeBuckets, anonymize_workload

    if size_buckets not in SIZE_BUCKETS:
        raise typer.BadParameter(f"one of {', '.join(SIZE_BUCKETS)}", param_hint="--size-buckets")
    options = AnonymizeOptions(
        keep_op_kinds=keep_op_kinds, keep_attrs=frozenset(keep_attrs), size_buckets=SizeBuckets(size_buckets),
        time_noise=_fraction(time_noise), shuffle=shuffle, seed=seed,
    )  # fmt: skip
    if key is not None:
        options = dataclasses.replace(options, key=key.encode())
    with stage_progress() as tell:
        result = anonymize_workload(workload, out, options, mapping=mapping, progress=tell)
    if not emit_results(result.to_dict(), report, as_json):
        table = Table(title=f"anonymized {workload} -> {out}")
        table.add_column("what")
        table.add_column("count", justify="right")
        table.add_row("ranks", str(result.ranks))
        table.add_row("nodes", f"{result.nodes:,}")
        table.add_row("names tokenized (distinct)", f"{result.tokens:,}")
        for what, count in sorted(result.removed.items()):
            table.add_row(f"removed: {what}", f"{count:,}")
        for name, count in sorted(result.dropped_attrs.items()):
            table.add_row(f"dropped attribute {name!r} (not in the registry)", f"{count:,}")
        for what, count in sorted(result.coarsened.items()):
            table.add_row(f"coarsened: {what}", f"{count:,}")
        table.add_row("input strings searched for in the output", f"{result.strings_checked:,}")
        print_table(table)
    if result.leaks:
        for leak in result.leaks[:20]:
            stderr.print(f"leak: {leak}")
        stderr.print(f"leakage check failed: {len(result.leaks)} input strings are in the output")
        raise typer.Exit(EXIT_CHECKS_FAILED)
    if not as_json:
        stdout.print(f"leakage check passed: none of {result.strings_checked:,} input strings is in the output")
