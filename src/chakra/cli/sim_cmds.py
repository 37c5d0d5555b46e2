"""``chakra simulate`` (a workload on a modelled system, ASTRA-sim's inputs and output lines) and ``chakra sweep``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.analyze.across import MAX_LISTED_RANKS
from chakra.cli.console import EXIT_CHECKS_FAILED, busy, note, print_table, progress_bar, quoting, stderr, stdout
from chakra.cli.rank_view import PER_RANK_OPTION
from chakra.sim.choices import NetworkModel
from chakra.units import NS_PER_MS

if TYPE_CHECKING:
    from chakra.sim.results import SimResult

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()


# The inputs `simulate` and `sweep` share, under ASTRA-sim's flag names too.
WORKLOAD_OPTION = typer.Option(
    ..., "--workload", "--workload-configuration", help="Workload: PREFIX of PREFIX.{rank}.et (or its folder)."
)
SYSTEM_OPTION = typer.Option(..., "--system", "--system-configuration", help="ASTRA-sim system JSON.")
NETWORK_OPTION = typer.Option(..., "--network", "--network-configuration", help="ASTRA-sim network YAML.")
COMM_GROUPS_OPTION = typer.Option(
    None,
    "--comm-groups",
    "--comm-group-configuration",
    help="Communicator groups JSON (default: PREFIX.comm_groups.json when it exists).",
)
REMOTE_MEMORY_OPTION = typer.Option(
    None, "--remote-memory", "--remote-memory-configuration", help="ASTRA-sim remote memory JSON."
)


@app.command("simulate")
@quoting(MAX_LISTED_RANKS=MAX_LISTED_RANKS)
def simulate_cmd(
    workload: str = WORKLOAD_OPTION,
    system: Path = SYSTEM_OPTION,
    network: Path = NETWORK_OPTION,
    comm_groups: Path | None = COMM_GROUPS_OPTION,
    remote_memory: Path | None = REMOTE_MEMORY_OPTION,
    compute_scale: float = typer.Option(1.0, "--compute-scale", help="Multiply compute durations (0.5: 2x faster)."),
    bandwidth_scale: float = typer.Option(1.0, "--bandwidth-scale", help="Multiply every link bandwidth."),
    latency_scale: float = typer.Option(1.0, "--latency-scale", help="Multiply every link latency."),
    overrides: list[str] = typer.Option(
        [], "--set", help="Override a system key: --set preferred-dataset-splits=8 (repeatable)."
    ),
    network_overrides: list[str] = typer.Option(
        [], "--set-network", help="Override a network key: --set-network bandwidth=[100,50] (repeatable)."
    ),
    cpu_per_thread: bool = typer.Option(
        False, "--cpu-per-thread", help="A CPU slot per host thread (ASTRA-sim: one per rank); for PyTorch traces."
    ),
    gpu_per_stream: bool = typer.Option(
        False, "--gpu-per-stream", help="A GPU compute slot per stream (ASTRA-sim: one per rank)."
    ),
    astra_compat: bool = typer.Option(
        False,
        "--astra-compat",
        help="Do what ASTRA-sim does where our models differ on purpose: replay a BROADCAST's duration, refuse "
        "REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK and BARRIER (same as --set chakra-astra-compat=1).",
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the report as JSON (.json) or CSV (.csv)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
    timeline: Path | None = typer.Option(
        None, "--timeline", help="Write every node's simulated interval as a Chrome/Perfetto trace JSON here."
    ),
    timed: Path | None = typer.Option(
        None,
        "--timed",
        help="Also write the workload with every node's simulated start and duration to TIMED.{rank}.et, "
        "for chakra analyze, report and viz.",
    ),
    per_rank: bool = PER_RANK_OPTION,
    network_model: NetworkModel = typer.Option(
        NetworkModel.CONGESTION_UNAWARE,
        "--network-model",
        case_sensitive=False,
        help="congestion-unaware: every message has its links to itself (ASTRA-sim's analytical backend); "
        "congestion-aware: messages queue on shared links (its congestion-aware backend; collectives on "
        "one-dimensional networks or in one phase so far).",
    ),
    rank_by_rank: bool = typer.Option(
        False,
        "--rank-by-rank",
        help="Run every rank, not one rank per class of equivalent ranks (the same result, slower; to compare).",
    ),
) -> None:
    """Simulate a workload of Chakra ETs on a modelled system: ASTRA-sim's per-rank lines, then each
    rank's time split (compute only, exposed communication, overlap, idle). Past {MAX_LISTED_RANKS} ranks identical
    ranks share a row and ASTRA-sim's lines are left out (--per-rank prints them all).

    Example: chakra simulate --workload out/job --system sys.json --network net.yml --bandwidth-scale 2
    --timeline job.trace.json --timed sim/job
    """
    from chakra.sim.report import check_report_path, report_dict, write_sim_report
    from chakra.sim.results import SimulationStuck
    from chakra.sim.run import simulate_workload
    from chakra.sim.scenario import Scenario

    if report is not None:
        check_report_path(report)  # before the run, not after it

    scenario = Scenario.from_texts(
        system, network, overrides, network_overrides, remote_memory_path=remote_memory,
        bandwidth_scale=bandwidth_scale, latency_scale=latency_scale, compute_scale=compute_scale,
        astra_compat=astra_compat, network_model=network_model,
    )  # fmt: skip
    system_config, network_config, memory_config = scenario.load()
    for key in system_config.unknown_keys:
        stderr.print(Text(f"warning: {system}: unknown key {key!r} ignored", style="yellow"))
    try:
        with busy("simulating"):
            result = simulate_workload(
                workload,
                system_config,
                network_config,
                remote_memory=memory_config,
                comm_groups_path=comm_groups,
                compute_scale=scenario.compute_scale,
                keep_intervals=timeline is not None or timed is not None,
                cpu_per_thread=cpu_per_thread,
                gpu_per_stream=gpu_per_stream,
                network_model=scenario.network_model,
                by_classes=not rank_by_rank,
            )
    except SimulationStuck as stuck:
        stderr.print(Text(f"error: {stuck}", style="bold red"), soft_wrap=True)
        raise typer.Exit(EXIT_CHECKS_FAILED) from None
    summary = report_dict(result)
    if report is not None:
        write_sim_report(result, report)
    if timeline is not None:
        from chakra.viz.timeline import write_simulation_timeline

        write_simulation_timeline(result, timeline)
    if timed is not None:
        from chakra.sim.timed import write_timed_workload

        with busy(f"writing {timed.name}"):
            written = write_timed_workload(
                result, workload, timed, note=f"system {system.name}, network {network.name}"
            )
        stderr.print(f"wrote {written.ranks:,} ranks with simulated times to {timed}.{{rank}}.et")
        for rank, count in sorted(written.unrun.items()):
            note(f"rank {rank}: {count:,} nodes the simulation did not run have no start")
    if as_json:
        stdout.print_json(json.dumps(summary))
        return
    _print_simulation(result, per_rank)


def _print_simulation(result: SimResult, per_rank: bool) -> None:
    """ASTRA-sim's line per rank (for scripts that read it; every rank when few or ``per_rank``),
    then the time split of each rank, which adds up to its finish."""
    from chakra.analyze.across import rank_ranges
    from chakra.cli.rank_view import lists_every_rank, rank_table

    if lists_every_rank(len(result.ranks), per_rank):
        for line in result.astra_lines():
            stdout.print(line, highlight=False)
    table, remark = rank_table(
        "simulated time per rank (ms): finish = compute only + exposed comm + overlap + idle",
        ["finish", "compute only", "exposed comm", "overlap", "idle"],
        {
            rank: (s.finish_ns, s.compute_only_ns, s.comm_exposed_ns, s.overlap_ns, s.idle_ns)
            for rank, s in result.ranks.items()
        },
        [_ms] * 5,
        per_rank=per_rank,
    )
    print_table(table)
    if remark:
        stdout.print(Text(f"{remark} (and prints ASTRA-sim's line for each)", style="dim"))
    slowest = max(result.ranks.values(), key=lambda s: (s.finish_ns, -s.rank), default=None)
    if slowest is not None:
        stdout.print(
            f"finish {_ms(result.finish_ns)} ms (rank {slowest.rank} of {rank_ranges(result.ranks)}); "
            'ASTRA-sim\'s "exposed communication" (finish - GPU compute) also counts CPU work and idle time'
        )
    if result.classes is not None:
        stdout.print(
            Text(
                "simulated as one class of equivalent ranks, one rank of it"
                if result.classes == 1
                else f"simulated as {result.classes:,} classes of equivalent ranks, one rank of each",
                style="dim",
            )
        )
    elif result.rank_by_rank is not None and len(result.ranks) > 1:
        stdout.print(Text(f"simulated rank by rank: {result.rank_by_rank}", style="dim"))
    if result.links:
        _print_links(result)
    for warning in result.warnings:
        stderr.print(Text(f"warning: {warning}", style="yellow"))


#: Links the table of the busiest shows (the report lists every one).
BUSIEST_SHOWN = 8


def _print_links(result: SimResult) -> None:
    """The busiest links of a congestion-aware run: bytes, busy time, utilization, queueing."""
    links = result.links or []
    table = Table(title=f"busiest links ({min(BUSIEST_SHOWN, len(links))} of {len(links)})", title_justify="left")
    for column in ("link", "MiB", "busy (ms)", "utilization", "messages", "queued (ms)"):
        table.add_column(column, justify="left" if column == "link" else "right", no_wrap=True)
    for link in links[:BUSIEST_SHOWN]:
        share = link.busy_ns / result.finish_ns if result.finish_ns else 0.0
        table.add_row(
            f"{link.source} -> {link.target}",
            f"{link.bytes / 2**20:,.2f}",
            _ms(link.busy_ns),
            f"{share:.1%}",
            f"{link.messages:,}",
            _ms(link.queued_ns),
        )
    print_table(table)


def _ms(ns: float) -> str:
    return f"{ns / NS_PER_MS:,.3f}"


@app.command()
def sweep(
    workload: str = WORKLOAD_OPTION,
    system: Path = SYSTEM_OPTION,
    network: Path = NETWORK_OPTION,
    axes: list[str] = typer.Option(
        [],
        "--axis",
        help="A knob and its values: compute-scale, bandwidth-scale, latency-scale, a system key or "
        "network.KEY (network.bandwidth), e.g. --axis bandwidth-scale=0.5,1,2 (repeatable; every "
        "combination is simulated).",
    ),
    comm_groups: Path | None = COMM_GROUPS_OPTION,
    remote_memory: Path | None = REMOTE_MEMORY_OPTION,
    plot: Path | None = typer.Option(None, "--plot", help="Plot finish time against the x axis (.png or .svg)."),
    x_axis: str | None = typer.Option(None, "--x-axis", help="The axis the plot's x runs along (default: the first)."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write one row per point (knobs, results in ns)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of a table."),
    workers: int | None = typer.Option(None, "--workers", help="Points simulated at once (default: CPU count)."),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Dask scheduler address (tcp://host:8786), or 'local' for a local Dask cluster."
    ),
    network_model: NetworkModel = typer.Option(
        NetworkModel.CONGESTION_UNAWARE,
        "--network-model",
        case_sensitive=False,
        help="How messages cross the network at every point (see chakra simulate --help).",
    ),
) -> None:
    """Simulate a workload over every combination of what-if knobs and compare the finish times.

    Example: chakra sweep --workload out/job --system sys.json --network net.yml
    --axis bandwidth-scale=0.5,1,2,4 --axis compute-scale=0.5,1 --plot sweep.png
    """
    from chakra.errors import ChakraInputError
    from chakra.sim import sweep as sw
    from chakra.sim.results import SimulationStuck
    from chakra.sim.scenario import Scenario

    grid_axes: dict[str, list[object]] = {}
    for text in axes:
        name, values = sw.parse_axis(text)
        if name in grid_axes:
            raise ChakraInputError(f"axis {name!r} is given twice", hint=f"list every value once: --axis {name}=1,2")
        grid_axes[name] = values
    x_axis = x_axis or next(iter(grid_axes), sw.BANDWIDTH_SCALE)
    if plot is not None and x_axis not in grid_axes:
        shown = ", ".join(grid_axes) or "none"
        raise ChakraInputError(f"--x-axis {x_axis!r} is not one of the swept axes ({shown})", hint="give it an --axis")
    points = sw.grid(grid_axes)
    try:
        with progress_bar() as progress:
            task = progress.add_task("simulating", total=len(points))
            results = sw.run_sweep(
                workload,
                Scenario(system, network, remote_memory, network_model=network_model),
                points,
                comm_groups_path=comm_groups,
                workers=workers,
                scheduler=scheduler,
                progress=lambda done, _total: progress.update(task, completed=done),
            )
    except SimulationStuck as stuck:
        stderr.print(Text(f"error: {stuck}", style="bold red"), soft_wrap=True)
        raise typer.Exit(EXIT_CHECKS_FAILED) from None
    if csv_path is not None:
        sw.write_csv(results, csv_path)
    if plot is not None:
        sw.write_plot(results, plot, x_axis)
    if as_json:
        stdout.print_json(json.dumps(sw.sweep_dict(results)))
        return
    base = sw.baseline_index(results)
    title = f"{len(results)} points; speed-up vs {results[base].point.label()}" if base is not None else ""
    table = Table(title=title, title_justify="left")
    columns = list(grid_axes)
    for column in (*columns, "finish (ms)", "max exposed comm (ms)", "speed-up"):
        table.add_column(column, justify="right", no_wrap=True)
    for result, speedup in zip(results, sw.speedups(results), strict=True):
        knobs = result.point.knobs()
        table.add_row(
            *(sw.show_value(knobs[name]) for name in columns),
            f"{result.finish_ns / NS_PER_MS:,.3f}",
            f"{result.max_comm_exposed_ns / NS_PER_MS:,.3f}",
            f"{speedup:.2f}x" if speedup is not None else "-",
        )
    print_table(table)
