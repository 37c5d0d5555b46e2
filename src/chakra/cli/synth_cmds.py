"""``chakra synth fit|sample|compare``: synthetic workloads learned from real ones."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from chakra.cli.console import EXIT_CHECKS_FAILED, CommandGroup, busy, emit_results, print_table, stderr, stdout

if TYPE_CHECKING:
    from chakra.synth.fidelity import FidelityReport

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()
synth_app = typer.Typer(
    cls=CommandGroup,
    help="Learn a statistical model of real workloads and sample synthetic ones from it.\n\n"
    "Example: chakra synth fit runs/job -o job.synth.json && chakra synth sample job.synth.json -o synthetic/job",
    no_args_is_help=True,
)
app.add_typer(synth_app, name="synth")

SYSTEM_OPTION = typer.Option(
    None, "--system", help="ASTRA-sim system JSON: with --network, the simulated step time is compared."
)
NETWORK_OPTION = typer.Option(None, "--network", help="ASTRA-sim network YAML for the source.")
SAMPLE_NETWORK_OPTION = typer.Option(None, "--sample-network", help="Network YAML for a sample of another size.")
REPORT_OPTION = typer.Option(None, "--report", help="Write the report as JSON here.")
JSON_OPTION = typer.Option(False, "--json", help="Print the report as JSON instead of tables.")


@synth_app.command("fit")
def fit_cmd(
    workloads: list[Path] = typer.Argument(
        ..., help="Workloads (PREFIX of PREFIX.{rank}.et): structure from the first."
    ),
    out: Path = typer.Option(..., "-o", "--output", help="The model file to write (JSON)."),
    report: Path | None = REPORT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Fit a model: the repeated motifs of every rank (steps, layers), the duration and size
    distributions of every node class, the communication pattern and which ranks behave alike.

    The model holds numbers and its own vocabulary only: before it is written, every string of the
    sources is searched for in it, and a hit fails the command (exit 1).

    Example: chakra synth fit runs/job runs/job-rerun -o job.synth.json
    """
    import msgspec

    from chakra.synth.fit import fit_workload, model_leaks
    from chakra.synth.model import save_model

    with busy(f"fitting {workloads[0]}"):
        model, result = fit_workload(workloads)
    leaks = model_leaks(msgspec.json.encode(model), result.strings)
    if leaks:
        for text in leaks[:20]:
            stderr.print(f"leak: the model holds {text!r} from the sources")
        stderr.print("leakage check failed: the model was not written")
        raise typer.Exit(EXIT_CHECKS_FAILED)
    size = save_model(model, out)
    data = {**result.to_dict(), "model": str(out), "model_bytes": size}
    if emit_results(data, report, as_json):
        return
    table = Table(title=f"model of {', '.join(map(str, workloads))} -> {out}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("ranks, nodes", f"{result.ranks}, {result.nodes:,}")
    table.add_row("programs (classes of alike ranks)", str(result.programs))
    table.add_row("node classes, templates", f"{result.keys}, {result.symbols:,}")
    dp = result.data_parallel
    table.add_row("data-parallel axis", "none found" if dp is None else f"{dp.size} ranks, stride {dp.stride}")
    for what, count in sorted(result.dropped.items()):
        table.add_row(f"dropped: {what}", f"{count:,}")
    table.add_row("model size", f"{size:,} bytes")
    print_table(table)
    motifs = Table(title="motifs (repeated blocks)")
    for column in ("program", "role", "nodes per copy", "copies", "depth"):
        motifs.add_column(column, justify="right" if column != "role" else "left")
    for motif in [m for m in result.motifs if m.role != "repeat"][:40]:
        motifs.add_row(str(motif.program), motif.role, f"{motif.nodes:,}", str(motif.count), str(motif.depth))
    print_table(motifs)
    stdout.print(f"leakage check passed: none of the sources' strings is in {out}")


@synth_app.command("sample")
def sample_cmd(
    model_path: Path = typer.Argument(..., help="A model file written by `chakra synth fit`."),
    out: Path = typer.Option(..., "-o", "--output", help="The synthetic workload's prefix (OUT.{rank}.et)."),
    steps: int | None = typer.Option(None, "--steps", help="Copies of the step motif (default: as fitted)."),
    layers: str | None = typer.Option(
        None, "--layers", help="Copies of every layer motif: a count (24) or a factor (2x)."
    ),
    ranks: int | None = typer.Option(
        None, "--ranks", help="Ranks, the data-parallel groups widened (default: as fitted)."
    ),
    seed: int = typer.Option(0, "--seed", help="The seed of the draws."),
    max_size: str = typer.Option(
        "4GiB", "--max-size", help="Refuse to write more than this (estimated before sampling): 64GiB, 500MB."
    ),
    compare: Path | None = typer.Option(None, "--compare", help="Compare the sample with this workload (its source)."),
    system: Path | None = SYSTEM_OPTION,
    network: Path | None = NETWORK_OPTION,
    sample_network: Path | None = SAMPLE_NETWORK_OPTION,
    report: Path | None = REPORT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Sample a synthetic workload from a model, at the fitted scale or another one.

    Example: chakra synth sample job.synth.json -o synthetic/job --layers 2x --ranks 16 --seed 3
    """
    from chakra.generate.sizes import parse_size
    from chakra.synth.model import load_model
    from chakra.synth.sample import LayerScale, sample_workload

    scale = LayerScale.parse(layers) if layers is not None else None
    model = load_model(model_path)
    with busy(f"sampling {model_path}"):
        result = sample_workload(
            model, out, steps=steps, layers=scale, ranks=ranks, seed=seed,
            max_bytes=parse_size(max_size, what="--max-size"),
        )  # fmt: skip
    data: dict[str, object] = result.to_dict()
    fidelity = None
    if compare is not None:
        fidelity = _compare(compare, out, system, network, sample_network)
        data["fidelity"] = fidelity.to_dict()
    if not emit_results(data, report, as_json):
        dropped = sum(result.dropped.values())
        stdout.print(
            f"wrote {result.ranks} ranks ({result.nodes:,} nodes, {result.groups} groups) to {out}.{{rank}}.et;"
            f" {dropped:,} dependencies dropped"
        )
        if fidelity is not None:
            _print_fidelity(fidelity)
    if fidelity is not None and not fidelity.ok:
        raise typer.Exit(EXIT_CHECKS_FAILED)


@synth_app.command("compare")
def compare_cmd(
    source: Path = typer.Argument(..., help="The source workload (PREFIX)."),
    sample: Path = typer.Argument(..., help="The synthetic workload (PREFIX)."),
    system: Path | None = SYSTEM_OPTION,
    network: Path | None = NETWORK_OPTION,
    sample_network: Path | None = SAMPLE_NETWORK_OPTION,
    report: Path | None = REPORT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """The fidelity report: breakdown shares, critical path, bytes per collective, nodes per kind,
    duration distributions (KS per operator class) and the simulated step time, each with its bound;
    exit 1 when one is exceeded.

    Example: chakra synth compare runs/job synthetic/job --system sys.json --network net.yml
    """
    fidelity = _compare(source, sample, system, network, sample_network)
    if not emit_results(fidelity.to_dict(), report, as_json):
        _print_fidelity(fidelity)
    if not fidelity.ok:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _compare(
    source: Path, sample: Path, system: Path | None, network: Path | None, sample_network: Path | None
) -> FidelityReport:
    from chakra.synth.fidelity import compare_workloads

    with busy(f"comparing {sample} with {source}"):
        return compare_workloads(source, sample, system=system, network=network, sample_network=sample_network)


def _print_fidelity(fidelity: FidelityReport) -> None:
    table = Table(
        title=f"{fidelity.sample} ({fidelity.sample_ranks} ranks) against {fidelity.source} ({fidelity.source_ranks})"
    )
    for column in ("figure", "source", "sample", "difference", "bound", ""):
        table.add_column(column, justify="left" if column in ("figure", "") else "right")
    for row in fidelity.rows:
        relative = row.group not in ("share of span", "duration KS")
        shown = f"{row.difference:.1%}" if relative else f"{row.difference:.3f}"
        bound = "-" if row.bound is None else (f"{row.bound:.0%}" if relative else f"{row.bound:.2f}")
        value = "{:,.0f}" if row.group != "share of span" else "{:.3f}"
        table.add_row(f"{row.group}: {row.name}", value.format(row.source), value.format(row.sample), shown, bound,
                      "ok" if row.ok else "[red]over[/red]")  # fmt: skip
    print_table(table)
    stdout.print(
        "fidelity: every figure within its bound"
        if fidelity.ok
        else f"fidelity: {len(fidelity.failed())} figures over their bound"
    )
