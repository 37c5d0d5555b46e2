"""``chakra jsonize``/``dejsonize`` (.et <-> JSON) and ``chakra convert`` (other formats -> .et)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.cli.adapt_cmds import print_adapt_result
from chakra.cli.console import (
    EXIT_CHECKS_FAILED,
    CommandGroup,
    busy,
    emit_results,
    late_help,
    note,
    print_table,
    stage_progress,
    stderr,
    stdout,
)
from chakra.errors import ChakraInputError
from chakra.validate.findings import Target

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

# The converters and jsonize (protobuf, numpy, msgspec) are imported in the commands: start-up
# imports only the choices they offer.
if TYPE_CHECKING:
    from chakra.flexflow import FlexFlowResult
    from chakra.pytorch.workload import PyTorchResult
    from chakra.schedule.fidelity import FidelityCheck
    from chakra.workload_writer import WrittenWorkload
    from chakra.xla.convert import XlaConversion


def _check_help() -> str:
    from chakra.pytorch.workload import PYTORCH_FIDELITY_TOLERANCE

    return f"Replay each rank with its durations; exit 1 if off by more than {PYTORCH_FIDELITY_TOLERANCE:.0%}."


@app.command("jsonize")
def jsonize_cmd(
    input_file: Path = typer.Argument(..., help="The .et file (plain, .gz or .zst)."),
    output_file: Path = typer.Argument(..., help="Where to write the JSON (.json, or .jsonl with --lines)."),
    lines: bool = typer.Option(False, "--lines", help="Write JSON Lines: metadata first, then one node per line."),
) -> None:
    """Write a trace as one valid JSON document (or JSON Lines), in the proto3 JSON mapping.

    Example: chakra jsonize llama.0.et llama.0.json
    """
    from chakra import jsonize as jsonize_lib

    with busy(f"writing {output_file}"):
        result = jsonize_lib.jsonize(input_file, output_file, lines=lines)
    stdout.print(Text(f"wrote {result.nodes:,} nodes to {output_file}"))
    if result.nodes_with_unknown_fields:
        stderr.print(
            Text(
                f"warning: {result.nodes_with_unknown_fields:,} nodes carry protobuf fields unknown to "
                "this schema; JSON cannot hold them and they were dropped",
                style="yellow",
            )
        )


@app.command("dejsonize")
def dejsonize_cmd(
    input_file: Path = typer.Argument(
        ..., help="JSON from `chakra jsonize` (document or lines) or upstream chakra_jsonizer."
    ),
    output_file: Path = typer.Argument(..., help="The .et file to write (.gz/.zst compress)."),
) -> None:
    """Turn JSON back into the identical .et file.

    Example: chakra dejsonize llama.0.json llama.0.et
    """
    from chakra import jsonize as jsonize_lib

    with busy(f"writing {output_file}"):
        count = jsonize_lib.dejsonize(input_file, output_file)
    stdout.print(Text(f"wrote {count:,} nodes to {output_file}"))


convert_app = typer.Typer(
    cls=CommandGroup,
    help="Produce Chakra ETs from other formats.\n\nExample: chakra convert pytorch --host 'traces/host.{rank}.json' "
    "--device 'traces/device.{rank}.json' -o out/job",
    no_args_is_help=True,
)
app.add_typer(convert_app, name="convert")


@convert_app.command("pytorch", cls=late_help(check=_check_help))
def convert_pytorch(
    host: str = typer.Option(..., "--host", help="Host execution traces: a path with {rank}, or one file."),
    device: str | None = typer.Option(
        None, "--device", help="Kineto traces, same form. Without it: host-only (no timing, no device work)."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{rank}.et."),
    data_deps: bool = typer.Option(False, "--data-deps", help="Also add tensor producer -> consumer edges."),
    target: Target | None = typer.Option(
        None,
        "--target",
        case_sensitive=False,
        help="Then adapt the workload for this consumer, as `chakra adapt` does (reported). Without it the "
        "files record what ran: every collective as its recorded type, the process groups as upstream's "
        "METADATA node and in PREFIX.comm_groups.json.",
    ),
    check: bool = typer.Option(
        False,
        "--check",
        # the tolerance is quoted by _check_help, filled in when the help is shown
        help="Replay each rank with its durations; exit 1 if off by more than the tolerance.",
    ),
    workers: int | None = typer.Option(None, "--workers", help="Ranks converted at once (default: CPU count)."),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Dask scheduler address (tcp://host:8786), or 'local' for a local Dask cluster."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the full conversion report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
    rank: int | None = typer.Option(
        None,
        "--rank",
        min=0,
        help="The rank of a single host trace (default: the device trace's, else the one its comms name).",
    ),
) -> None:
    """Convert a PyTorch job (host execution traces + Kineto traces, one pair per rank) to Chakra ETs.

    Writes PREFIX.{rank}.et for every rank and PREFIX.comm_groups.json (ASTRA-sim's format).

    Example: chakra convert pytorch --host 'traces/host.{rank}.json'
    --device 'traces/device.{rank}.json' -o out/job --check
    """
    from chakra.pytorch.workload import convert_workload

    with stage_progress() as tell:
        result = convert_workload(
            host,
            device,
            output,
            data_deps=data_deps,
            target=target,
            check=check,
            workers=workers,
            scheduler=scheduler,
            progress=tell,
            rank=rank,
        )
    _finish_conversion(result, report, as_json)


def _finish_conversion(result: PyTorchResult, report: Path | None, as_json: bool) -> None:
    """Show ``result`` (or write its report), then exit 1 when its fidelity check (if asked for) failed."""
    if not emit_results(result.to_dict(), report, as_json):
        _print_conversion(result)
    _fail_fidelity(result.fidelity, "ranks")


def _kineto_check_help() -> str:
    from chakra.kineto.workload import KINETO_FIDELITY_TOLERANCE

    return f"Replay each rank's step with its durations; exit 1 if off by more than {KINETO_FIDELITY_TOLERANCE:.0%}."


@convert_app.command("kineto", cls=late_help(check=_kineto_check_help))
def convert_kineto(
    traces: list[str] = typer.Argument(
        ..., help="PyTorch profiler traces, one per rank: files (.json, .json.gz), folders or globs."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{rank}.et."),
    step: str | None = typer.Option(
        None,
        "--step",
        help="The ProfilerStep#N to convert, or 'all' for the whole trace "
        "(default: the complete step of median span; the whole trace when it has no steps).",
    ),
    rank: int | None = typer.Option(
        None, "--rank", min=0, help="The rank of a single trace (default: its distributedInfo, else its file name)."
    ),
    target: Target | None = typer.Option(
        None,
        "--target",
        case_sensitive=False,
        help="Then adapt the workload for this consumer, as `chakra adapt` does (reported).",
    ),
    check: bool = typer.Option(
        False, "--check", help="Replay each rank's step with its durations; exit 1 if off by more than the tolerance."
    ),
    workers: int | None = typer.Option(None, "--workers", help="Ranks converted at once (default: CPU count)."),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Dask scheduler address (tcp://host:8786), or 'local' for a local Dask cluster."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the full conversion report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
) -> None:
    """Convert PyTorch profiler (Kineto) traces alone, without host execution traces, to Chakra ETs.

    Operators nest by time on each thread, launches join their kernels, copies and memsets by
    correlation, streams keep their recorded order, cuda_sync events (or the recorded
    cudaEventRecord/cudaStreamWaitEvent order) order streams and make the host wait, and NCCL/gloo
    collectives become communication nodes with their type, bytes and group.

    Example: chakra convert kineto traces/ -o out/job --check
    """
    from chakra.kineto.window import ALL_STEPS
    from chakra.kineto.workload import convert_kineto_workload

    chosen: int | str | None = step
    if step is not None and step != ALL_STEPS:
        if not step.isdecimal():
            raise ChakraInputError(
                f"--step {step!r} is no step number", hint=f"give N of ProfilerStep#N, or {ALL_STEPS}"
            )
        chosen = int(step)
    with stage_progress() as tell:
        result = convert_kineto_workload(
            traces,
            output,
            rank=rank,
            step=chosen,
            target=target,
            check=check,
            workers=workers,
            scheduler=scheduler,
            progress=tell,
        )
    _finish_conversion(result, report, as_json)


def _xla_check_help() -> str:
    from chakra.xla.pipeline import XLA_FIDELITY_TOLERANCE

    return f"Replay each device with its measured durations; exit 1 if off by more than {XLA_FIDELITY_TOLERANCE:.0%}."


def _tf_check_help() -> str:
    from chakra.tensorflow.pipeline import TF_FIDELITY_TOLERANCE

    return f"Replay each rank with its measured durations; exit 1 if off by more than {TF_FIDELITY_TOLERANCE:.0%}."


@convert_app.command("xla", cls=late_help(check=_xla_check_help))
def convert_xla_cmd(
    module: Path = typer.Argument(..., help="A serialized HLO module (.pb), plain or compressed."),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{device}.et."),
    devices: int | None = typer.Option(
        None, "--devices", min=1, help="Devices the program runs on (default: those its collectives name)."
    ),
    profile: Path | None = typer.Option(
        None, "--profile", help="A JAX profile (the folder jax.profiler.start_trace wrote, or its trace.json.gz)."
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Replay each device with its measured durations; exit 1 if off by more than the tolerance.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
    max_size: str = typer.Option(
        "4GiB", "--max-size", help="Refuse to write more than this (estimated before converting): 64GiB, 500MB."
    ),
) -> None:
    """Convert an XLA program (a JAX step, TensorFlow with jit_compile) to one Chakra ET per device.

    While loops of known trip count (lax.scan) are unrolled, others kept as one node and reported.
    With --profile every node gets its measured start and duration; without one the nodes carry
    FLOPs and bytes only (chakra simulate times them).

    Example: chakra convert xla step.hlo.pb -o out/step --profile prof/ --check
    """
    from chakra.generate.sizes import parse_size
    from chakra.xla.pipeline import convert_xla_files

    with busy(f"converting {module.name}"):
        result = convert_xla_files(module, output, devices=devices, profile=profile, check=check,
                                   max_bytes=parse_size(max_size, what="--max-size"))  # fmt: skip
    if as_json:
        stdout.print_json(json.dumps(result.to_dict()))
    else:
        _print_xla(result.conversion, result.written, result.fidelity)
    _fail_fidelity(result.fidelity, "devices")


def _print_xla(conversion: XlaConversion, written: WrittenWorkload, fidelity: FidelityCheck | None) -> None:
    table = Table(title=f"{written.prefix}.{{device}}.et", title_justify="left")
    for column in ("instructions", "count", "became"):
        table.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    outcomes = (
        ("nodes", conversion.converted),
        ("folded", conversion.folded),
        ("unrolled", conversion.unrolled),
        ("kept whole", conversion.kept),
    )
    for what, counts in outcomes:
        for opcode, count in counts.most_common():
            table.add_row(opcode, f"{count:,}", what)
    print_table(table)
    nodes = len(conversion.payloads[0]) if conversion.payloads else 0
    stdout.print(
        f"wrote {conversion.devices} files of {nodes:,} nodes and {len(conversion.groups)} communicator groups"
    )
    _print_fidelity(fidelity, "device")
    for text in conversion.notes:
        note(text)


@convert_app.command("tensorflow", cls=late_help(check=_tf_check_help))
def convert_tensorflow_cmd(
    recordings: list[Path] = typer.Argument(
        ..., help="What chakra.tensorflow.collect wrote: a worker's folder, or the folder of every worker's."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{rank}.et."),
    check: bool = typer.Option(
        False, "--check", help="Replay each rank with its measured durations; exit 1 if off by more than the tolerance."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
) -> None:
    """Convert a TensorFlow step (MirroredStrategy, MultiWorkerMirroredStrategy) to one ET per device.

    Reads each worker's run_metadata.pb (the step function's graphs, one per device) and profile/;
    ranks are numbered worker-major, device-minor. Functions compiled with XLA (jit_compile=True)
    go through `chakra convert xla` instead.

    Example: chakra convert tensorflow out/ -o out/et/step --check
    """
    from chakra.tensorflow.pipeline import convert_tensorflow_recordings

    with busy("converting the TensorFlow step"):
        result = convert_tensorflow_recordings(recordings, output, check=check)
    if as_json:
        stdout.print_json(json.dumps(result.to_dict()))
    else:
        conversion = result.conversion
        _print_graph_conversion(result.written, conversion.converted, conversion.folded, conversion.events)
        for rank, device in enumerate(conversion.devices):
            stdout.print(f"rank {rank}: {device}")
        _print_fidelity(result.fidelity, "rank")
        for text in conversion.notes:
            note(text)
    _fail_fidelity(result.fidelity, "ranks")


def _print_graph_conversion(
    written: WrittenWorkload, converted: Counter[str], folded: Counter[str], events: Counter[str]
) -> None:
    table = Table(title=f"{written.prefix}.{{rank}}.et", title_justify="left")
    for column in ("ops", "count", "became"):
        table.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    for what, counts in (("nodes", converted), ("folded", folded)):
        for op, count in counts.most_common():
            table.add_row(op, f"{count:,}", what)
    print_table(table)
    if events:
        stdout.print("profile events: " + ", ".join(f"{n:,} {what}" for what, n in events.most_common()))
    stdout.print(f"wrote {len(written.paths)} files")


def _print_fidelity(fidelity: FidelityCheck | None, unit: str) -> None:
    if fidelity is None:
        return
    for index, result in fidelity.results.items():
        shown = "-" if result.error is None else f"{result.error:+.1%}"
        measured = f"{result.measured_span_us:,.1f}" if result.measured_span_us is not None else "-"
        stdout.print(f"{unit} {index}: replayed {result.predicted_span_us:,.1f} µs, measured {measured} µs ({shown})")


def _fail_fidelity(fidelity: FidelityCheck | None, units: str) -> None:
    """Exit 1 naming the ranks (or devices) the fidelity check failed."""
    if fidelity is not None and not fidelity.ok:
        off = sorted(fidelity.failures())
        stderr.print(
            Text(f"fidelity check failed for {units} {off} (beyond {fidelity.tolerance:.0%})", style="bold red")
        )
        raise typer.Exit(EXIT_CHECKS_FAILED)


#: The time units of the labelled FlexFlow form (chakra.flexflow.taskgraph.NS_PER), for --help without imports.
FLEXFLOW_TIME_UNITS = ("ms", "s", "us")


def _flexflow_check_help() -> str:
    from chakra.flexflow import FLEXFLOW_FIDELITY_TOLERANCE

    return (
        "Replay the devices together with their own durations; exit 1 if the makespan is off by more than "
        f"{FLEXFLOW_FIDELITY_TOLERANCE:.0%}."
    )


@convert_app.command("flexflow", cls=late_help(check=_flexflow_check_help))
def convert_flexflow_cmd(
    taskgraph: Path = typer.Argument(
        ..., help="A task graph: FlexFlow's (--taskgraph, with START/END per task) or upstream's labelled one."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{device}.et."),
    strategy: Path | None = typer.Option(
        None, "--strategy", help="FlexFlow's --export-strategy file (text or protobuf): where each operator runs."
    ),
    compgraph: Path | None = typer.Option(
        None, "--compgraph", help="FlexFlow's --compgraph file (with costs): devices and bytes per operator."
    ),
    bandwidth: float | None = typer.Option(
        None, "--bandwidth", help="Link GB/s: sizes the transfers the computation graph does not size."
    ),
    latency_us: float = typer.Option(0.0, "--latency", help="Link latency (µs), with --bandwidth."),
    time_unit: str | None = typer.Option(
        None, "--time-unit", help="Unit of the labelled form's times: ms (FlexFlow's; default), s (upstream's), us."
    ),
    num_npus: int | None = typer.Option(None, "--num-npus", min=1, help="Devices (default: the highest named + 1)."),
    check: bool = typer.Option(
        # the tolerance is quoted by _flexflow_check_help, filled in when the help is shown
        False,
        "--check",
        help="Replay the devices together with their own durations; exit 1 if off by more.",
    ),
    report: Path | None = typer.Option(None, "--report", help="Write the report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
) -> None:
    """Convert a FlexFlow task graph to one Chakra ET per device.

    Compute tasks become compute nodes and transfers matched SEND/RECV pairs, with their
    durations, peers, tags and bytes. FlexFlow's own task graph names no devices and no bytes: give
    its strategy (or its computation graph), and the report says what was inferred.

    Example: chakra convert flexflow mlp.taskgraph.dot --strategy mlp.strategy -o out/mlp --check
    """
    from chakra.flexflow import convert_flexflow

    if time_unit is not None and time_unit not in FLEXFLOW_TIME_UNITS:
        raise typer.BadParameter(f"one of {', '.join(FLEXFLOW_TIME_UNITS)}", param_hint="--time-unit")
    with stage_progress() as tell:
        result = convert_flexflow(
            taskgraph, output, strategy=strategy, compgraph=compgraph, bandwidth_gbps=bandwidth,
            latency_us=latency_us, time_unit=time_unit, num_devices=num_npus, check=check, progress=tell,
        )  # fmt: skip
    if not emit_results(result.to_dict(), report, as_json):
        print_flexflow(result)
    _fail_fidelity(result.fidelity, "devices")


def print_flexflow(result: FlexFlowResult) -> None:
    """The tables of a FlexFlow conversion (also printed by ``chakra_converter FlexFlow``)."""
    conversion = result.conversion
    table = Table(title=f"{result.written.prefix}.{{device}}.et ({conversion.form} task graph)", title_justify="left")
    table.add_column("what")
    table.add_column("count", justify="right")
    for kind, count in sorted(conversion.tasks.items()):
        table.add_row(f"{kind} tasks", f"{count:,}")
    table.add_row("transfers (SEND/RECV pairs)", f"{conversion.transfers:,}")
    table.add_row("dependencies across devices kept as empty transfers", f"{conversion.empty_transfers:,}")
    for what, count in sorted(conversion.inferred.items()):
        table.add_row(what, f"{count:,}")
    for what, count in sorted(conversion.dropped.items()):
        table.add_row(f"dropped: {what}", f"{count:,}")
    print_table(table)
    stdout.print(f"wrote {len(result.written.paths)} files of {conversion.nodes:,} nodes in all")
    together = result.fidelity.whole if result.fidelity is not None else None
    if together is not None and together.measured_span_us is not None:
        shown = "-" if together.error is None else f"{together.error:+.2%}"
        stdout.print(
            f"replayed makespan {together.predicted_span_us:,.1f} µs, "
            f"task graph {together.measured_span_us:,.1f} µs ({shown})"
        )
    for text in conversion.notes:
        note(text)


@convert_app.command("text")
def convert_text_cmd(
    input_file: Path = typer.Argument(..., help="ASTRA-sim text workload (first line: DATA, MODEL, HYBRID_..., ...)."),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{npu}.et."),
    num_npus: int = typer.Option(..., "--num-npus", help="NPUs to write a file for (ASTRA-sim's total NPUs)."),
    num_passes: int = typer.Option(1, "--num-passes", help="Training steps, one after the other."),
    model_parallel_size: int | None = typer.Option(
        None,
        "--model-parallel-size",
        help="NPUs in the first network dimension: the model-parallel group of HYBRID_DATA_MODEL and the "
        "transformer kinds, the data-parallel one of HYBRID_MODEL_DATA (default: the header's "
        "model_parallel_NPU_group).",
    ),
    time_unit: str = typer.Option(
        "us",
        "--time-unit",
        help="Unit of the compute-time columns: us (as upstream's converter) or ns (ASTRA-sim 1.0's cycles, SimAI).",
    ),
    max_size: str = typer.Option(
        "4GiB", "--max-size", help="Refuse to write more than this (estimated before writing): 64GiB, 500MB, ..."
    ),
) -> None:
    """Convert an ASTRA-sim text workload to Chakra ETs, one per NPU.

    Writes PREFIX.{npu}.et for every NPU and PREFIX.comm_groups.json when a collective runs on a subgroup.
    Compute times go to duration_micros as µs, as upstream's converter reads them (--time-unit ns for
    ASTRA-sim 1.0 and SimAI files, which hold ns).

    Example: chakra convert text resnet50.txt -o out/resnet50 --num-npus 8 --num-passes 2
    """
    from chakra.generate.sizes import parse_size
    from chakra.text import convert_text

    max_bytes = parse_size(max_size, what="--max-size")
    with busy(f"writing {output}.{{npu}}.et"):
        result = convert_text(
            input_file,
            output,
            num_npus=num_npus,
            num_passes=num_passes,
            model_parallel_size=model_parallel_size,
            time_unit=time_unit,
            max_output_bytes=max_bytes,
        )
    shared = ""
    if result.num_npus > 1:
        shared = ", identical" if result.distinct_files == 1 else f", {result.distinct_files} distinct"
    passes = f"{result.num_passes} pass" + ("es" if result.num_passes != 1 else "")
    stdout.print(
        Text(
            f"wrote {result.num_npus} files {result.prefix}.{{0..{result.num_npus - 1}}}.et ({result.parallelism}, "
            f"{passes}, {result.nodes_per_rank:,} nodes and {result.collectives_per_rank:,} collectives each{shared})"
        )
    )
    if result.comm_groups_path is not None:
        stdout.print(Text(f"wrote {result.comm_groups_path} ({len(result.groups)} groups)"))
    for text in result.notes:
        note(text)


def _comm_summary(comm: Counter[str]) -> str:
    """``14 collectives, 2 send, 2 recv`` (the types are in the JSON report)."""
    collectives = sum(count for kind, count in comm.items() if kind not in ("send", "recv"))
    parts = [f"{collectives} collectives"] if collectives else []
    parts += [f"{comm[kind]} {kind}" for kind in ("send", "recv") if comm.get(kind)]
    return ", ".join(parts) or "-"


def _print_conversion(result: PyTorchResult) -> None:
    from chakra.analyze.across import rank_ranges

    conversion, written = result.conversion, result.written
    checked = result.fidelity.results if result.fidelity is not None else {}
    table = Table(title=f"{written.prefix}.{{rank}}.et", title_justify="left")
    for column in ("rank", "mode", "nodes", "comm", "dropped", "waits", "fidelity"):
        numeric = column not in ("mode", "comm")
        table.add_column(column, justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")
    for rank, rep in conversion.reports.items():
        fidelity = checked.get(rank)
        table.add_row(
            str(rank),
            rep.mode,
            f"{rep.node_count:,}",
            _comm_summary(rep.comm),
            f"{sum(rep.dropped.values()):,}",
            f"{rep.waits:,}",
            "-" if fidelity is None or fidelity.error is None else f"{fidelity.error:+.1%}",
        )
    print_table(table)
    if conversion.group_methods:
        stdout.print(
            "process groups: "
            + "; ".join(f"{count} {method}" for method, count in conversion.group_methods.most_common())
        )
    dropped: Counter[str] = Counter()
    synced: Counter[str] = Counter()
    for rep in conversion.reports.values():
        dropped.update(rep.dropped)
        synced.update(rep.sync_deps)
    for reason, count in dropped.most_common():
        stdout.print(Text(f"dropped {count:,}: {reason}", style="dim"))
    if synced:
        stdout.print("GPU synchronisation: " + "; ".join(f"{count:,} {how}" for how, count in synced.most_common()))
    _print_events(result)
    said: dict[str, list[int]] = {}
    for rank, rep in conversion.reports.items():
        for text in rep.notes:
            said.setdefault(text, []).append(rank)
    for text, ranks in said.items():
        note(f"rank {rank_ranges(ranks)}: {text}")
    lacking = next((rep for rep in conversion.reports.values() if rep.lacks), None)
    if lacking is not None:
        stderr.print(Text(f"{lacking.mode}: the ETs lack " + "; ".join(lacking.lacks), style="yellow"))
    stdout.print(f"wrote {len(written.paths)} rank files and {written.groups_path}")
    if written.removed:
        note(f"removed {len(written.removed)} files of an earlier workload with this prefix")
    if conversion.adapted is not None:
        print_adapt_result(conversion.adapted)


def _print_events(result: PyTorchResult) -> None:
    """A profiler trace's events by category and fate, added up over the ranks."""
    fates: dict[str, Counter[str]] = {}
    windows: set[str] = set()
    for rep in result.conversion.reports.values():
        if rep.window is not None:
            windows.add(rep.window)
        for cat, counts in (rep.events or {}).items():
            fates.setdefault(cat, Counter()).update(counts)
    if not fates:
        return
    table = Table(title="events: " + ", ".join(sorted(windows)) + " converted", title_justify="left")
    for column in ("category", "converted", "folded", "dropped", "why"):
        table.add_column(column, justify="left" if column in ("category", "why") else "right", overflow="fold")
    for cat, counts in fates.items():
        kinds = {"converted": 0, "folded": 0, "dropped": 0}
        reasons = []
        for fate, count in counts.items():
            kind = fate.split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + count
            if kind != "converted":
                reasons.append(fate.split(": ", 1)[-1])
        table.add_row(cat, *(f"{kinds[k]:,}" for k in ("converted", "folded", "dropped")), "; ".join(reasons))
    print_table(table)
