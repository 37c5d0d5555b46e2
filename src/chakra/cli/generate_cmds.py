"""``chakra generate``: write synthetic workloads (``micro``: microbenchmark families and sweeps;
``llm``: transformer training and inference steps for every rank of a parallel job)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.cli.console import CommandGroup, note, print_table, progress_bar, stderr, stdout
from chakra.errors import ChakraInputError
from chakra.generate import micro_defaults as defaults

#: This module's commands; chakra.cli.main adds them to the ``chakra`` app.
app = typer.Typer()

# The generators (protobuf, numpy) are imported in the commands: start-up imports only the defaults
# the options show.
if TYPE_CHECKING:
    from chakra.generate.llm import LlmWorkload
    from chakra.generate.micro import WrittenMicroWorkload
    from chakra.generate.specs import WorkloadSpec

generate_app = typer.Typer(
    cls=CommandGroup,
    help="Write synthetic Chakra workloads.\n\n"
    "Example: chakra generate micro ALL_REDUCE send_recv_ring -o micro --ranks 8",
    no_args_is_help=True,
)
app.add_typer(generate_app, name="generate")


@generate_app.command("micro")
def micro(
    families: list[str] | None = typer.Argument(
        None,
        help="Families to write (default: all of them; --list shows them). With --sizes/--rank-counts: "
        "the collectives to sweep (default: every collective but BARRIER).",
        show_default=False,
    ),
    output: Path | None = typer.Option(None, "-o", "--output", help="Directory for DIR/NAME.{rank}.et."),
    ranks: int = typer.Option(defaults.DEFAULT_NUM_NPUS, "--ranks", help="Ranks (NPUs) of every workload."),
    runtime_us: int = typer.Option(defaults.DEFAULT_RUNTIME_US, "--runtime-us", help="Compute node time in µs."),
    tensor_size: str = typer.Option(
        str(defaults.DEFAULT_TENSOR_SIZE_BYTES), "--tensor-size", help="tensor_size of compute and memory nodes."
    ),
    comm_size: str = typer.Option(
        str(defaults.DEFAULT_COMM_SIZE_BYTES), "--comm-size", help="comm_size of collectives and transfers."
    ),
    sizes: str | None = typer.Option(
        None, "--sizes", help="Sweep collectives over these comm sizes: 1KiB,1MiB,... (default: --comm-size)."
    ),
    rank_counts: str | None = typer.Option(
        None, "--rank-counts", help="Sweep collectives over these rank counts: 8,16,... (default: --ranks)."
    ),
    chain_length: int = typer.Option(defaults.DEFAULT_CHAIN_LENGTH, "--chain-length", help="Nodes of comp_chain."),
    list_families: bool = typer.Option(False, "--list", help="List the families, one line each, and exit."),
) -> None:
    """Write microbenchmark workloads (upstream chakra_generator's families and more), or sweep collectives.

    Without --sizes/--rank-counts: the named families (all without names). With them: every named
    collective at every size and rank count, as COLLECTIVE.SIZE.Nr. Sizes take units: 512, 64KiB,
    1MiB, 1GiB, 10KB, 10MB. Each workload is DIR/NAME.{rank}.et, node ids from 0 in every file.

    ASTRA-sim refuses BARRIER, REDUCE, GATHER and SCATTER (chakra simulate models them) and only
    replays BROADCAST's duration; one_comm_send_node and one_comm_recv_node are the two halves of
    send_recv_ring. The notes printed after the table say so for what was written.

    Example: chakra generate micro -o micro --ranks 8; chakra generate micro ALL_REDUCE ALL_GATHER
    -o sweep --sizes 64KiB,1MiB,16MiB --rank-counts 8,16
    """
    from chakra.generate import micro as micro_lib

    if list_families:
        _print_families()
        return
    if output is None:
        raise ChakraInputError("no output directory", hint="pass -o DIR (or --list to see the families)")
    params = micro_lib.MicroParams(
        num_npus=ranks,
        runtime_us=runtime_us,
        tensor_size_bytes=micro_lib.parse_size(tensor_size, what="--tensor-size"),
        comm_size_bytes=micro_lib.parse_size(comm_size, what="--comm-size"),
        chain_length=chain_length,
    )
    if sizes is not None or rank_counts is not None:
        written = micro_lib.sweep_collectives(
            output,
            families or micro_lib.SWEEP_COLLECTIVES,
            micro_lib.parse_sizes(sizes, what="--sizes") if sizes is not None else [params.comm_size_bytes],
            micro_lib.parse_counts(rank_counts, what="--rank-counts") if rank_counts is not None else [ranks],
            runtime_us=params.runtime_us,
        )
    else:
        written = micro_lib.generate(output, families, params)
    print_written(written, output)


def _print_families() -> None:
    from chakra.generate import micro as micro_lib

    width = max(map(len, micro_lib.FAMILIES))
    for family in micro_lib.FAMILIES.values():
        origin = "" if family.upstream else "; not in upstream"
        line = f"{family.name:<{width}}  {family.summary} (ASTRA-sim: {family.astra_sim}{origin})"
        stdout.print(Text(line), soft_wrap=True)


def print_written(written: list[WrittenMicroWorkload], out_dir: Path) -> None:
    """The table of written workloads, then their notes (each once, with the workloads it concerns)."""
    from chakra.generate import micro as micro_lib

    table = Table(title=f"{out_dir}/NAME.{{rank}}.et", title_justify="left")
    for column in ("workload", "ranks", "nodes/rank", "ASTRA-sim"):
        numeric = column in ("ranks", "nodes/rank")
        table.add_column(column, justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")
    notes: dict[str, list[str]] = defaultdict(list)
    for item in written:
        workload = item.workload
        counts = sorted({len(nodes) for nodes in workload.ranks})
        table.add_row(
            workload.name + (" (+ comm groups)" if item.comm_groups_path is not None else ""),
            str(workload.num_ranks),
            "-".join(map(str, (counts[0], counts[-1]) if len(counts) > 1 else counts)),
            micro_lib.FAMILIES[workload.family].astra_sim,
        )
        for text in workload.notes:
            notes[text].append(workload.name)
    print_table(table)
    for text, names in notes.items():
        note(f"{text} ({', '.join(names)})")
    removed = [path for item in written for path in item.removed_stale]
    if removed:
        shown = ", ".join(p.name for p in removed[:5]) + (" ..." if len(removed) > 5 else "")
        stderr.print(
            Text(f"removed {len(removed)} files of earlier workloads with the same names: {shown}", style="yellow"),
            soft_wrap=True,
        )
    file_count = sum(len(item.paths) + (item.comm_groups_path is not None) for item in written)
    stdout.print(f"wrote {len(written)} workloads ({file_count} files) to {out_dir}")


def _csv_ints(value: str | None, what: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise ChakraInputError(
            f"{what} must be integers separated by commas, not {value!r}", hint="e.g. 11,12,12,13"
        ) from None


@generate_app.command("llm")
def llm(
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Workload prefix: writes PREFIX.{rank}.et and PREFIX.comm_groups.json."
    ),
    preset: str | None = typer.Option(None, "--preset", help="A model preset (--list-presets shows them)."),
    spec_file: Path | None = typer.Option(
        None, "--spec", help="A YAML/JSON spec file (model, parallel, hardware, ...)."
    ),
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel size."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline stages."),
    dp: int | None = typer.Option(None, "--dp", help="Data-parallel size."),
    cp: int | None = typer.Option(None, "--cp", help="Context-parallel size."),
    ep: int | None = typer.Option(None, "--ep", help="Expert-parallel size (carved out of dp x cp)."),
    sp: bool | None = typer.Option(None, "--sp/--no-sp", help="Megatron sequence parallelism.", show_default=False),
    zero: int | None = typer.Option(None, "--zero", help="ZeRO stage 0-3 (3 = FSDP full shard)."),
    schedule: str | None = typer.Option(None, "--schedule", help="Pipeline schedule: 1f1b, gpipe or interleaved."),
    virtual_stages: int | None = typer.Option(
        None, "--virtual-stages", help="Model chunks per pipeline rank (interleaved schedule)."
    ),
    layers_per_stage: str | None = typer.Option(None, "--layers-per-stage", help="Layers of each stage: 11,12,12,13."),
    micro_batch: int | None = typer.Option(None, "--micro-batch", help="Sequences per micro-batch."),
    global_batch: int | None = typer.Option(None, "--global-batch", help="Sequences per optimizer step."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Sequence length (default: the model's)."),
    step: str | None = typer.Option(None, "--step", help="train, or inference (a prefill and decode steps)."),
    prompt_len: int | None = typer.Option(None, "--prompt-len", help="Inference prompt length."),
    decode_steps: int | None = typer.Option(None, "--decode-steps", help="Inference decode steps after the prefill."),
    recompute: str | None = typer.Option(None, "--recompute", help="Activation recomputation: none, selective, full."),
    hardware: str | None = typer.Option(None, "--hardware", help="Roofline durations for h100 (default), a100, b200."),
    no_durations: bool = typer.Option(False, "--no-durations", help="Write no duration_micros (roofline only)."),
    list_presets: bool = typer.Option(False, "--list-presets", help="List the model presets and exit."),
    max_size: str = typer.Option(
        "4GiB", "--max-size", help="Refuse to write more than this (estimated before writing): 64GiB, 500MB, ..."
    ),
    as_classes: bool = typer.Option(
        False,
        "--classes",
        help="Write one file per pipeline stage (PREFIX.class{k}.et) and the rank-to-class mapping "
        "(PREFIX.classes.json) instead of one file per rank: chakra-et's own layout, read by its commands; "
        "`chakra expand` writes the rank files ASTRA-sim reads.",
    ),
) -> None:
    """Write a transformer training or inference step for every rank of a parallel job.

    Compute nodes carry num_ops (FLOPs), tensor_size (bytes) and a roofline duration; collectives
    run in their process groups (PREFIX.comm_groups.json); pipeline stages exchange SEND/RECV pairs.
    Each pipeline stage is built once and written for all of its ranks (or, with --classes, once).
    A spec file sets anything; options given here override it.

    Example: chakra generate llm --preset gpt3-175b --tp 8 --pp 8 --dp 32 --global-batch 256 -o out/gpt3
    """
    import time

    from chakra.generate import llm as llm_lib
    from chakra.generate import specs
    from chakra.generate.sizes import parse_size as parse_size_text
    from chakra.generate.spec_input import resolve_spec

    if list_presets:
        for name, model in specs.PRESETS.items():
            stdout.print(
                f"{name}: {model.layers} layers, hidden {model.hidden}, {model.heads} heads ({model.kv_heads} KV), "
                f"FFN {model.ffn}, vocabulary {model.vocab}, sequence {model.seq_len}, "
                f"{model.total_params() / 1e9:.1f} B parameters"
                + (f", {model.experts} experts" if model.is_moe else "")
            )
        return
    if output is None:
        raise ChakraInputError("no output prefix", hint="pass -o PREFIX (writes PREFIX.{rank}.et)")
    if (preset is None) == (spec_file is None):
        raise ChakraInputError("give a model with either --preset or --spec", hint="--list-presets shows the presets")
    given = {
        "parallel.tp": tp, "parallel.pp": pp, "parallel.dp": dp, "parallel.cp": cp, "parallel.ep": ep,
        "parallel.sp": sp, "parallel.zero": zero, "parallel.schedule": schedule,
        "parallel.virtual_stages": virtual_stages,
        "parallel.layers_per_stage": _csv_ints(layers_per_stage, "--layers-per-stage"),
        "micro_batch": micro_batch, "global_batch": global_batch, "model.seq_len": seq_len, "step": step,
        "prompt_len": prompt_len, "decode_steps": decode_steps, "recompute": recompute, "hardware": hardware,
    }  # fmt: skip
    overrides = {key: value for key, value in given.items() if value is not None}
    # every override key's option is its last part in dashes: parallel.virtual_stages is --virtual-stages
    labels = {key: "--" + key.rpartition(".")[2].replace("_", "-") for key in overrides}
    if preset is not None:
        labels["model"] = "--preset"
    spec = resolve_spec(preset, spec_file, overrides=overrides, labels=labels, durations=not no_durations)
    max_bytes = parse_size_text(max_size, what="--max-size")
    llm_lib.check_llm_output_size(spec, max_bytes, path=spec_file, as_classes=as_classes)
    started = time.perf_counter()
    with progress_bar() as progress:
        what, total = (
            ("writing classes", spec.parallel.pp) if as_classes else ("writing ranks", spec.parallel.world_size)
        )
        task = progress.add_task(what, total=total)
        result = llm_lib.generate_llm(
            spec,
            output,
            progress=lambda done, _: progress.update(task, completed=done),
            max_output_bytes=max_bytes,
            as_classes=as_classes,
        )
    elapsed_s = time.perf_counter() - started
    _print_llm(spec, result, elapsed_s)


#: Node kinds in table order, with the short column names that keep the table within 80 columns.
_KIND_COLUMNS = {
    "COMP": "COMP",
    "ALL_REDUCE": "AR",
    "ALL_GATHER": "AG",
    "REDUCE_SCATTER": "RS",
    "ALL_TO_ALL": "A2A",
    "SEND": "SEND",
    "RECV": "RECV",
}


def _print_llm(spec: WorkloadSpec, result: LlmWorkload, elapsed_s: float) -> None:
    par = spec.parallel
    stdout.print(
        f"{spec.model.name}: {spec.step}, tp {par.tp} x cp {par.cp} x dp {par.dp} x pp {par.pp}"
        + (f", ep {par.ep}" if par.ep > 1 else "")
        + (", sequence parallel" if par.sp else "")
        + (f", ZeRO-{par.zero}" if par.zero else "")
        + (
            f", {par.schedule}, {spec.micro_batches} micro-batches of {spec.micro_batch}"
            if spec.step == "train"
            else ""
        )
    )
    present = {k for counts in result.kinds_per_stage for k in counts}
    kinds = [k for k in _KIND_COLUMNS if k in present] + sorted(present - set(_KIND_COLUMNS))
    table = Table(
        title=f"nodes per rank, by stage ({result.world_size // par.pp} ranks each; "
        "AR all-reduce, AG all-gather, RS reduce-scatter, A2A all-to-all)",
        title_justify="left",
    )
    for column in ("stage", "nodes", *(_KIND_COLUMNS.get(k, k) for k in kinds)):
        table.add_column(
            column, justify="left" if column == "stage" else "right", no_wrap=column != "stage", overflow="fold"
        )
    for stage, (nodes, counts) in enumerate(zip(result.nodes_per_stage, result.kinds_per_stage, strict=True)):
        table.add_row(str(stage), f"{nodes:,}", *(f"{counts.get(k, 0):,}" for k in kinds))
    print_table(table)
    for text in result.notes:
        note(text)
    if result.removed_stale:
        stderr.print(Text(f"removed {len(result.removed_stale)} files of an earlier, larger workload", style="yellow"))
    groups = f" and {result.groups_file} ({result.group_count} groups)" if result.groups_file else ""
    if result.classes_file is not None:
        stdout.print(
            f"wrote {result.world_size:,} ranks ({result.total_nodes:,} nodes) as {len(result.class_files)} classes "
            f"to {result.prefix}.class{{k}}.et, the mapping {result.classes_file}{groups} in {elapsed_s:.1f} s"
        )
        return
    stdout.print(
        f"wrote {result.world_size:,} ranks ({result.total_nodes:,} nodes) to {result.prefix}.{{rank}}.et{groups} "
        f"in {elapsed_s:.1f} s"
    )


@app.command("expand")
def expand(
    source: Path = typer.Argument(
        ..., help="A workload written as classes: its PREFIX, its PREFIX.classes.json, or its folder."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Output prefix: writes OUT.{rank}.et and OUT.comm_groups.json (may be the input's)."
    ),
) -> None:
    """Write one file per rank from a workload written as classes (`chakra generate llm --classes`).

    ASTRA-sim and other tools read PREFIX.{rank}.et; chakra-et's commands read the classes as they are.
    The files are byte for byte what the generator writes without --classes. Given the input's own
    prefix, the rank files replace the class files and the mapping.

    Example: chakra expand out/gpt3 -o out/gpt3_ranks
    """
    import time

    from chakra.class_expansion import expand_classes
    from chakra.workload import open_workload

    started = time.perf_counter()
    workload = open_workload(source)
    with progress_bar() as progress:
        task = progress.add_task("writing ranks", total=len(workload))
        written = expand_classes(workload, output, progress=lambda done, _: progress.update(task, completed=done))
    if (removed := written.removed_note()) is not None:
        note(removed)
    groups = f" and {written.groups_path}" if written.groups_path is not None else ""
    stdout.print(
        f"wrote {len(written.paths):,} ranks to {written.prefix}.{{rank}}.et{groups} "
        f"in {time.perf_counter() - started:.1f} s"
    )
