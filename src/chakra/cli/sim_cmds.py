"""``chakra simulate``: run a workload on a modelled system (ASTRA-sim's inputs and output lines)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from chakra.cli.main import EXIT_CHECKS_FAILED, app, busy, stderr, stdout


@app.command()
def simulate(
    workload: str = typer.Option(
        ..., "--workload", "--workload-configuration", help="Workload: PREFIX of PREFIX.{rank}.et (or its folder)."
    ),
    system: Path = typer.Option(..., "--system", "--system-configuration", help="ASTRA-sim system JSON."),
    network: Path = typer.Option(..., "--network", "--network-configuration", help="ASTRA-sim network YAML."),
    comm_groups: Path | None = typer.Option(
        None,
        "--comm-groups",
        "--comm-group-configuration",
        help="Communicator groups JSON (default: PREFIX.comm_groups.json when it exists).",
    ),
    remote_memory: Path | None = typer.Option(
        None, "--remote-memory", "--remote-memory-configuration", help="ASTRA-sim remote memory JSON."
    ),
    compute_scale: float = typer.Option(1.0, "--compute-scale", help="Multiply compute durations (0.5: 2x faster)."),
    bandwidth_scale: float = typer.Option(1.0, "--bandwidth-scale", help="Multiply every link bandwidth."),
    latency_scale: float = typer.Option(1.0, "--latency-scale", help="Multiply every link latency."),
    overrides: list[str] = typer.Option(
        [], "--set", help="Override a system key: --set preferred-dataset-splits=8 (repeatable)."
    ),
    network_overrides: list[str] = typer.Option(
        [], "--set-network", help="Override a network key: --set-network bandwidth=[100,50] (repeatable)."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the report as JSON (.json) or CSV (.csv)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
) -> None:
    """Simulate a workload of Chakra ETs on a modelled system and print ASTRA-sim's per-rank lines.

    Example: chakra simulate --workload out/job --system sys.json --network net.yml --bandwidth-scale 2
    """
    from chakra.sim import config
    from chakra.sim.engine import SimulationStuck
    from chakra.sim.report import report_dict, write_report
    from chakra.sim.run import simulate_workload

    system_config = config.load_system(system, dict(config.parse_override(o) for o in overrides))
    network_config = config.load_network(network, dict(config.parse_override(o) for o in network_overrides))
    network_config = config.scale_network(network_config, bandwidth_scale=bandwidth_scale, latency_scale=latency_scale)
    memory_config = config.load_remote_memory(remote_memory)
    for key in getattr(system_config, "unknown_keys", ()):
        stderr.print(Text(f"warning: {system}: unknown key {key!r} ignored", style="yellow"))
    try:
        with busy("simulating"):
            result = simulate_workload(
                workload,
                system_config,
                network_config,
                remote_memory=memory_config,
                comm_groups_path=comm_groups,
                compute_scale=compute_scale,
            )
    except SimulationStuck as stuck:
        stderr.print(Text(f"error: {stuck}", style="bold red"), soft_wrap=True)
        raise typer.Exit(EXIT_CHECKS_FAILED) from None
    summary = report_dict(result)
    if report is not None:
        write_report(result, report)
    if as_json:
        stdout.print_json(json.dumps(summary))
        return
    for line in result.astra_lines():
        stdout.print(line, highlight=False)
    table = Table(title="per rank (µs)", title_justify="left")
    for column in ("rank", "finish", "CPU", "GPU compute", "exposed comm"):
        table.add_column(column, justify="right")
    for rank, stats in sorted(result.ranks.items()):
        table.add_row(
            str(rank),
            f"{stats.finish_ns / 1e3:,.1f}",
            f"{stats.cpu_ns / 1e3:,.1f}",
            f"{stats.gpu_compute_ns / 1e3:,.1f}",
            f"{stats.exposed_comm_ns / 1e3:,.1f}",
        )
    stdout.print(table)
    for warning in result.warnings:
        stderr.print(Text(f"warning: {warning}", style="yellow"))
