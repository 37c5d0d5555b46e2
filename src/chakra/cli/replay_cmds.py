"""``chakra replay``: run a workload's ranks on this machine with PyTorch and measure them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from chakra.cli.console import EXIT_CHECKS_FAILED, busy, emit_results, print_table, stage_progress, stderr, stdout
from chakra.replay.choices import REPLAY_CHECK_TOLERANCE, Backend, ComputeMode

if TYPE_CHECKING:
    from chakra.replay.launch import OverlapStudy, ReplaySettings, WorkloadReplay

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()


@app.command("replay")
def replay_cmd(
    workload: Path = typer.Argument(..., help="A workload: PREFIX of PREFIX.{rank}.et, its folder, or one file."),
    compute: ComputeMode = typer.Option(
        ComputeMode.DURATION,
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
        False,
        "--check",
        help=f"Exit 1 when a rank's median step is more than {REPLAY_CHECK_TOLERANCE:.0%} from its reference.",
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the results as JSON here."),
    timeline: Path | None = typer.Option(
        None, "--timeline", help="Write the last iteration as a Chrome/Perfetto trace (tracks: rank, stream, group)."
    ),
    backend: Backend = typer.Option(
        Backend.AUTO, "--backend", help="auto: NCCL with a CUDA device per rank, else gloo."
    ),
    system: Path | None = typer.Option(
        None, "--system", help="With --network: compare ranks without recorded times with the simulator's prediction."
    ),
    network: Path | None = typer.Option(None, "--network", help="The network of the --system prediction."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Read and check every rank, count what each would issue and what would hang (exit 1); start no process.",
    ),
) -> None:
    """Replay a workload on this machine: one process per rank (gloo), every node issued in dependency order.

    Collectives and sends run asynchronously and are waited for where a node depends on them. A
    replay that stops moving for --timeout seconds is stopped and diagnosed (which rank waits for
    what), exit 1. Each rank's step is compared with its recorded span, or with the simulator's
    prediction on --system/--network when the ET has no times; time per node kind is put beside
    the recorded durations, and every kind of collective gets nccl-tests' algbw and busbw.

    --dry-run reads every rank as a replay would, counts per rank what it would issue, and reports
    what would hang from the counts alone (members of a group issuing different numbers of
    collectives, sends without their receives); exit 1 when it finds any.

    Example: chakra replay out/job --compute duration --iterations 5 --check --timeline replay.json
    """
    from chakra.replay.external import replay_this_rank, under_launcher
    from chakra.replay.launch import ReplaySettings
    from chakra.replay.reference import simulated_reference
    from chakra.replay.timeline import write_timeline

    if (system is None) != (network is None):
        raise typer.BadParameter("give both --system and --network, or neither", param_hint="--system")
    if dry_run:
        _dry_run(workload, report, as_json)
        return
    settings = ReplaySettings(compute, compute_scale, comm, warmup, iterations,
                              timeout_s=timeout_s, timeline=timeline is not None, backend=backend.value)  # fmt: skip
    if under_launcher():  # torchrun started this rank: run it here, rank 0 reports
        joined = replay_this_rank(workload, settings)
        if joined is None:
            return
        result, study = joined, None
    else:
        result, study = _replay_here(workload, settings, overlap)
    if system is not None and network is not None and any(r.reference is None for r in result.ranks.values()):
        with busy(f"simulating {workload} for the reference"):
            simulated_reference(result, system, network, compute_scale=compute_scale)
    if timeline is not None:
        write_timeline(result, timeline)
    if not emit_results(study.to_dict() if study is not None else result.to_dict(), report, as_json):
        _print_replay(result, compute.value, comm)
        if study is not None:
            for rank, hidden_us in study.overlap_us().items():
                stdout.print(
                    f"rank {rank}: compute only {study.compute_only.ranks[rank].median_step_us:,.1f} µs + "
                    f"communication only {study.comm_only.ranks[rank].median_step_us:,.1f} µs - whole "
                    f"{result.ranks[rank].median_step_us:,.1f} µs = {hidden_us:,.1f} µs overlapped"
                )
            stdout.print(f"the job (slowest rank of each): {study.job_overlap_us():,.1f} µs overlapped")
    if check:
        off = result.check_failures()
        if off:
            stderr.print(f"replay check failed for ranks {off} (beyond {REPLAY_CHECK_TOLERANCE:.0%} of the reference)")
            raise typer.Exit(EXIT_CHECKS_FAILED)


def _replay_here(workload: Path, settings: ReplaySettings, overlap: bool) -> tuple[WorkloadReplay, OverlapStudy | None]:
    """Every rank started here; a hang is printed with its diagnosis and exits 1."""
    from chakra.replay.launch import ReplayHang, overlap_study, replay_workload

    run = functools.partial(
        replay_workload, compute_scale=settings.compute_scale, warmup=settings.warmup,
        iterations=settings.iterations, timeout_s=settings.timeout_s, timeline=settings.timeline,
        backend=settings.backend,
    )  # fmt: skip
    try:
        with busy(f"replaying {workload}"):
            study = overlap_study(workload, settings.compute, run) if overlap else None
            result = study.full if study is not None else run(workload, compute=settings.compute, comm=settings.comm)
    except ReplayHang as hang:
        stderr.print(f"error: {hang}")
        raise typer.Exit(EXIT_CHECKS_FAILED) from None
    return result, study


def _dry_run(workload: Path, report: Path | None, as_json: bool) -> None:
    """What a replay of ``workload`` would issue, per rank, and what would hang it (exit 1)."""
    from chakra.replay.preflight import plan_replay

    with stage_progress() as tell:
        plan = plan_replay(workload, progress=tell)
    problems = plan.problems()
    if not emit_results(plan.to_dict(), report, as_json):
        table = Table(title=f"what a replay of {plan.prefix} would issue per iteration ({len(plan.groups)} groups)")
        for column in ("rank", "nodes", "compute", "collectives", "sends", "receives", "largest message bytes",
                       "recorded span µs"):  # fmt: skip
            table.add_column(column, justify="right")
        for rank, one in plan.ranks.items():
            span = "-" if one.recorded_span_us is None else f"{one.recorded_span_us:,.1f}"
            table.add_row(str(rank), f"{one.nodes:,}", f"{one.compute:,}", f"{one.collectives:,}", f"{one.sends:,}",
                          f"{one.recvs:,}", f"{one.largest_message_bytes:,}", span)  # fmt: skip
        print_table(table)
        if not problems:
            stdout.print("no hang predicted from the counts (an order mismatch shows only when run)")
    for problem in problems:
        stderr.print(f"would hang: {problem}")
    if problems:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print_replay(result: WorkloadReplay, compute: str, comm: bool) -> None:
    """Three tables: the ranks' steps against their references, time by node kind against the
    recording (all ranks together), and the collectives' bandwidths."""
    backends = sorted({f"{r.backend} on {r.device}" for r in result.ranks.values()})
    table = Table(title=f"replay of {result.prefix} ({compute}{'' if comm else ', no communication'}; "
                        f"{', '.join(backends)})")  # fmt: skip
    for column in ("rank", "step µs (median)", "min", "max", "reference µs", "error", "compute µs", "waiting µs"):
        table.add_column(column, justify="right", overflow="fold")
    for rank, ranked in result.ranks.items():
        shown = ranked.to_dict()
        steps = shown["step_us"]
        reference = "-" if ranked.reference_us is None else f"{ranked.reference_us:,.1f} ({ranked.reference})"
        table.add_row(
            str(rank), f"{steps['median']:,.1f}", f"{steps['min']:,.1f}", f"{steps['max']:,.1f}", reference,
            "-" if ranked.error is None else f"{ranked.error:+.1%}",
            f"{shown['compute_us']:,.1f}", f"{shown['wait_us']:,.1f}",
        )  # fmt: skip
    print_table(table)
    kinds = Table(title="time by node kind, all ranks (communication: issue to completion)")
    for column in ("kind", "nodes", "replayed µs", "recorded µs", "replayed / recorded"):
        kinds.add_column(column, justify="right", no_wrap=column == "kind")
    for name, total in result.kind_totals().items():
        ratio = f"{total.replayed_us / total.recorded_us:.2f}" if total.recorded_us > 0 else "-"
        kinds.add_row(name, f"{total.count:,}", f"{total.replayed_us:,.1f}", f"{total.recorded_us:,.1f}", ratio)
    print_table(kinds)
    rows = result.collectives()
    if rows:
        bandwidth = Table(title="communication by type and size (slowest rank; nccl-tests' algbw and busbw)")
        for column in ("type", "ranks", "bytes", "per step", "µs each", "algbw GB/s", "busbw GB/s"):
            bandwidth.add_column(column, justify="right", no_wrap=column in ("type", "bytes"))
        for row in rows:
            bandwidth.add_row(
                row.key.comm_type, str(row.key.group_size), f"{row.key.size_bytes:,}", str(row.count),
                f"{row.time_us:,.1f}", "-" if row.algbw_gbps is None else f"{row.algbw_gbps:.3f}",
                "-" if row.busbw_gbps is None else f"{row.busbw_gbps:.3f}",
            )  # fmt: skip
        print_table(bandwidth)
