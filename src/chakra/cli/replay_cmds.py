"""``chakra replay``: run a workload's ranks on this machine with PyTorch and measure them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from chakra.cli.console import EXIT_CHECKS_FAILED, busy, emit_results, print_table, stderr, stdout

if TYPE_CHECKING:
    from chakra.replay.launch import OverlapStudy, WorkloadReplay

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

#: How far a rank's replayed step may be from its recorded span before ``--check`` fails (issue 18).
CHECK_TOLERANCE = 0.15
#: The compute modes (chakra.replay.issue.ComputeMode), listed here so that --help needs no torch.
COMPUTE_MODES = ("duration", "kernels", "aten", "none")


@app.command("replay")
def replay_cmd(
    workload: Path = typer.Argument(..., help="A workload: PREFIX of PREFIX.{rank}.et, its folder, or one file."),
    compute: str = typer.Option(
        "duration",
        "--compute",
        help="duration: hold for the recorded time; kernels: a GEMM of num_ops FLOPs and a copy of "
        "tensor_size bytes; aten: the recorded ATen ops on tensors of their shapes (else kernels, counted); "
        "none: communication only.",
    ),
    compute_scale: float = typer.Option(1.0, "--compute-scale", min=0.0, help="Scale recorded durations."),
    comm: bool = typer.Option(True, "--comm/--no-comm", help="--no-comm: compute only (no collective, no send)."),
    warmup: int = typer.Option(1, "--warmup", min=0, help="Iterations run before the measured ones."),
    iterations: int = typer.Option(3, "--iterations", min=1, help="Measured iterations (min/median/max)."),
    timeout_s: float = typer.Option(60.0, "--timeout", min=1.0, help="Seconds without progress that count as a hang."),
    overlap: bool = typer.Option(
        False, "--overlap", help="Also replay compute only and communication only, and report the overlap."
    ),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when a rank's median step is more than 15 % from its recorded span."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the results as JSON here."),
    timeline: Path | None = typer.Option(
        None, "--timeline", help="Write the last iteration as a Chrome/Perfetto trace (a track per rank and kind)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of a table."),
) -> None:
    """Replay a workload on this machine: one process per rank (gloo), every node issued in dependency order.

    Collectives and sends run asynchronously and are waited for where a node depends on them. A
    replay that stops moving for --timeout seconds is stopped and diagnosed (which rank waits for
    what), exit 1.

    Example: chakra replay out/job --compute duration --iterations 5 --check
    """
    from chakra.replay.external import replay_this_rank, under_launcher
    from chakra.replay.issue import ComputeMode
    from chakra.replay.launch import ReplaySettings, write_timeline

    if compute not in COMPUTE_MODES:
        raise typer.BadParameter(f"one of {', '.join(COMPUTE_MODES)}", param_hint="--compute")
    if under_launcher():  # torchrun started this rank: run it here, rank 0 reports
        settings = ReplaySettings(ComputeMode(compute), compute_scale, comm, warmup, iterations,
                                  timeout_s=timeout_s, timeline=timeline is not None)  # fmt: skip
        joined = replay_this_rank(workload, settings)
        if joined is None:
            return
        result, study = joined, None
    else:
        result, study = _replay_here(workload, compute, compute_scale, comm, warmup, iterations, timeout_s,
                                     timeline is not None, overlap)  # fmt: skip
    if timeline is not None:
        write_timeline(result, timeline)
    if not emit_results(study.to_dict() if study is not None else result.to_dict(), report, as_json):
        table = Table(title=f"replay of {result.prefix} ({compute}{'' if comm else ', no communication'})")
        for column in ("rank", "step µs (median)", "min", "max", "recorded µs", "error", "compute µs", "waiting µs"):
            table.add_column(column, justify="right", overflow="fold")
        for rank, ranked in result.ranks.items():
            shown = ranked.to_dict()
            steps = shown["step_us"]
            recorded = ranked.recorded_span_us
            table.add_row(
                str(rank), f"{steps['median']:,.1f}", f"{steps['min']:,.1f}", f"{steps['max']:,.1f}",
                "-" if recorded is None else f"{recorded:,.1f}",
                "-" if ranked.error is None else f"{ranked.error:+.1%}",
                f"{shown['compute_us']:,.1f}", f"{shown['wait_us']:,.1f}",
            )  # fmt: skip
        print_table(table)
        if study is not None:
            for rank, hidden_us in study.overlap_us().items():
                stdout.print(
                    f"rank {rank}: compute only {study.compute_only.ranks[rank].median_step_us:,.1f} µs + "
                    f"communication only {study.comm_only.ranks[rank].median_step_us:,.1f} µs - whole "
                    f"{result.ranks[rank].median_step_us:,.1f} µs = {hidden_us:,.1f} µs overlapped"
                )
    if check:
        off = sorted(r for r, one in result.ranks.items() if one.error is None or abs(one.error) > CHECK_TOLERANCE)
        if off:
            stderr.print(f"replay check failed for ranks {off} (beyond {CHECK_TOLERANCE:.0%} of the recorded span)")
            raise typer.Exit(EXIT_CHECKS_FAILED)


def _replay_here(
    workload: Path,
    compute: str,
    compute_scale: float,
    comm: bool,
    warmup: int,
    iterations: int,
    timeout_s: float,
    timeline: bool,
    overlap: bool,
) -> tuple[WorkloadReplay, OverlapStudy | None]:
    """Every rank started here; a hang is printed with its diagnosis and exits 1."""
    from chakra.replay.issue import ComputeMode
    from chakra.replay.launch import ReplayHang, overlap_study, replay_workload

    run = functools.partial(
        replay_workload, compute_scale=compute_scale, warmup=warmup, iterations=iterations,
        timeout_s=timeout_s, timeline=timeline,
    )  # fmt: skip
    try:
        with busy(f"replaying {workload}"):
            study = overlap_study(workload, ComputeMode(compute), run) if overlap else None
            result = study.full if study is not None else run(workload, compute=ComputeMode(compute), comm=comm)
    except ReplayHang as hang:
        stderr.print(f"error: {hang}")
        raise typer.Exit(EXIT_CHECKS_FAILED) from None
    return result, study
