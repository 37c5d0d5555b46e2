"""Text workload -> Chakra ETs: :func:`convert_text` parses the workload, builds the graph
(:mod:`chakra.text.build`), writes ``PREFIX.{npu}.et`` for every NPU (plus ``PREFIX.comm_groups.json``
when some collective runs on a subgroup) and returns a :class:`TextConversion` with notes on everything
the ETs do not carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chakra import io
from chakra.errors import ChakraInputError, PathLike
from chakra.generate.template import RankTemplate
from chakra.groups import CommGroups
from chakra.output_size import MAX_OUTPUT_BYTES, check_output_size
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, GlobalMetadata
from chakra.text.build import TextWorkloadBuilder
from chakra.text.parse import parse_text_workload
from chakra.text.placement import BLOCK, NpuPlacement, first_dimension, placement_groups
from chakra.text.workload import (
    DATA,
    DISTRIBUTED_INFERENCE,
    DLRM_KINDS,
    FWD,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    IG,
    MICRO,
    PHASE_LABEL,
    WG,
    TextWorkload,
)
from chakra.units import NS_PER_US
from chakra.workload_writer import WorkloadWriter

#: What the compute-time columns may hold (``convert_text(time_unit=...)``).
TIME_UNIT_US, TIME_UNIT_NS = "us", "ns"
TIME_UNITS = (TIME_UNIT_US, TIME_UNIT_NS)
#: Options that say something this converter does not model, with what it means, noted when the value is not 1.
_UNMODELLED = {
    "ep": "expert parallelism",
    "pp": "pipeline parallelism: every NPU runs every layer",
    "vpp": "virtual pipeline stages",
    "ga": "gradient accumulation: one pass per --num-passes",
}

#: How many layer steps a note names before it says "...".
_NOTE_EXAMPLES = 3


@dataclass
class TextConversion:
    """What :func:`convert_text` wrote.

    ``paths``: ``PREFIX.{npu}.et`` in NPU order; ``comm_groups_path``: the groups file, or ``None``
    when every collective spans all NPUs; ``groups``: group id -> sorted ranks; ``nodes_per_rank``
    and ``collectives_per_rank``: the same in every file; ``distinct_files``: how many different
    files there are (ranks with the same groups share one); ``notes``: what the ETs do not carry.
    """

    prefix: Path
    parallelism: str
    num_npus: int
    num_passes: int
    paths: list[Path]
    comm_groups_path: Path | None
    groups: dict[int, list[int]]
    nodes_per_rank: int
    collectives_per_rank: int
    distinct_files: int
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": str(self.prefix),
            "parallelism": self.parallelism,
            "num_npus": self.num_npus,
            "num_passes": self.num_passes,
            "paths": [str(p) for p in self.paths],
            "comm_groups_path": None if self.comm_groups_path is None else str(self.comm_groups_path),
            "groups": {str(k): v for k, v in self.groups.items()},
            "nodes_per_rank": self.nodes_per_rank,
            "collectives_per_rank": self.collectives_per_rank,
            "distinct_files": self.distinct_files,
            "notes": self.notes,
        }


def _count(number: int, noun: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _workload_notes(workload: TextWorkload, num_npus: int) -> list[str]:
    """Notes on header options and compute times the ETs do not carry."""
    notes = []
    for key, meaning in _UNMODELLED.items():
        value = workload.options.get(key)
        if value is not None and value != 1 and not (key == "vpp" and workload.options.get("pp", 1) == 1):
            notes.append(f"header {key}: {value} ({meaning}) is not modelled")
    all_gpus = workload.options.get("all_gpus")
    if all_gpus is not None and all_gpus != num_npus:
        notes.append(f"header all_gpus: {all_gpus} differs from --num-npus {num_npus}; the ETs are for {num_npus}")
    if workload.options.get("pp_comm"):
        notes.append(f"header pp_comm: {workload.options['pp_comm']} (pipeline transfers) is not modelled")
    for name, text in workload.unknown_options.items():
        notes.append(f"header option {name!r} (value {text!r}) is unknown and ignored")
    if workload.parallelism != HYBRID_TRANSFORMER_FWD_IN_BCKWD and (
        workload.checkpoints or workload.checkpoint_initiates
    ):
        notes.append(
            f"checkpoints are used by HYBRID_TRANSFORMER_FWD_IN_BCKWD only; ignored for {workload.parallelism}"
        )
    if workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        own = [i for i in workload.checkpoint_initiates if i in workload.checkpoints]
        if own:
            notes.append(
                f"checkpoint_initiates layers {own} are checkpoints themselves: nothing to recompute there "
                "(ASTRA-sim would run the forward on past them)"
            )
    updates = sum(1 for layer in workload.layers if layer.update_us)
    if updates:
        notes.append(f"weight-update times (last column, {_count(updates, 'layer')}) are not modelled, as upstream")
    kind = workload.parallelism
    unused = {MICRO: (FWD, IG, WG), DISTRIBUTED_INFERENCE: (IG, WG)}.get(kind, ())
    timed = sum(1 for layer in workload.layers if any(layer.phase(w).compute_us for w in unused))
    if timed:
        what = "collectives only" if kind == MICRO else "the forward pass only"
        notes.append(f"{kind} runs {what}: the compute times of {_count(timed, 'layer')} are not used")
    first_ig_us = workload.layers[0].ig.compute_us
    if kind in (DATA, *DLRM_KINDS) and first_ig_us:
        notes.append(f"layer 0's input-gradient compute ({first_ig_us} µs) is not run: {kind} skips it, as ASTRA-sim")
    return notes


def _skipped_notes(builder: TextWorkloadBuilder) -> list[str]:
    notes = []
    layers = builder.workload.layers
    for reason, steps in builder.skipped.items():
        shown = ", ".join(f"{layers[i].name} {PHASE_LABEL[w]}" for i, w in list(steps)[:_NOTE_EXAMPLES])
        more = ", ..." if len(steps) > _NOTE_EXAMPLES else ""
        notes.append(f"no collective for {_count(len(steps), 'layer step')} ({shown}{more}): {reason}")
    for kind in sorted(builder.fallback_spans):
        notes.append(
            f"{kind} without a model-parallel size: its collectives run over all NPUs, as upstream; "
            "give --model-parallel-size N (the NPUs of the first network dimension) for ASTRA-sim's groups"
        )
    return notes


def _metadata(workload: TextWorkload, num_npus: int, num_passes: int) -> GlobalMetadata:
    metadata = GlobalMetadata(version=io.FORMAT_VERSION)
    metadata.attr.add(name="input_file", string_val=workload.text)
    metadata.attr.add(name="parallelism", string_val=workload.parallelism)
    metadata.attr.add(name="num_npus", int64_val=num_npus)
    metadata.attr.add(name="num_passes", int64_val=num_passes)
    return metadata


#: Upper bounds for the estimate: a layer is at most three compute and three communication nodes
#: per pass (forward, input and weight gradient); a node about 100 bytes on disk (measured: 98 on the
#: ResNet-50 excerpt); a rank file's metadata and name about 64.
NODES_PER_LAYER = 6
BYTES_PER_NODE = 100
BYTES_PER_FILE = 64


def estimated_text_output_bytes(workload: TextWorkload, num_npus: int, num_passes: int) -> int:
    """About how many bytes converting ``workload`` for ``num_npus`` NPUs writes (an upper bound)."""
    nodes = len(workload.layers) * NODES_PER_LAYER * num_passes
    return num_npus * (BYTES_PER_FILE + nodes * BYTES_PER_NODE)


def check_text_output_size(workload: TextWorkload, num_npus: int, num_passes: int, max_bytes: int | None) -> None:
    """Refuse a conversion that would write more than ``max_bytes`` (``None``: no limit)."""
    check_output_size(
        estimated_text_output_bytes(workload, num_npus, num_passes),
        max_bytes,
        f"{num_npus:,} NPUs x {num_passes} passes in {num_npus:,} files",
        path=workload.path,
        check="--num-npus",
    )


def convert_text(
    input_path: PathLike,
    output_prefix: PathLike,
    *,
    num_npus: int,
    num_passes: int = 1,
    model_parallel_size: int | None = None,
    time_unit: str = TIME_UNIT_US,
    max_output_bytes: int | None = MAX_OUTPUT_BYTES,
) -> TextConversion:
    """Convert an ASTRA-sim text workload to ``OUTPUT_PREFIX.{npu}.et`` for ``npu`` in ``0..num_npus-1``.

    ``num_passes``: training steps one after the other; ``model_parallel_size``: NPUs in the first
    network dimension (the model-parallel group of the hybrid and transformer kinds), which
    overrides the header's ``model_parallel_NPU_group``; ``time_unit``: what the compute-time
    columns hold, ``"us"`` (upstream converter's reading, written to ``duration_micros`` as they
    are) or ``"ns"`` (ASTRA-sim 1.0's cycles at 1 GHz and SimAI's ns: divided by 1,000, rounded,
    at least 1 µs where not 0). Writes ``OUTPUT_PREFIX.comm_groups.json`` when a collective runs
    on a subgroup. Every file is written atomically.
    """
    if time_unit not in TIME_UNITS:
        raise ChakraInputError(f"time unit {time_unit!r} is not one of {', '.join(TIME_UNITS)}", hint="use us or ns")
    for name, value in (("--num-npus", num_npus), ("--num-passes", num_passes)):
        if value < 1:
            raise ChakraInputError(f"{name} is {value}", hint=f"{name} is at least 1")
    if model_parallel_size is not None and model_parallel_size < 1:
        raise ChakraInputError(f"--model-parallel-size is {model_parallel_size}", hint="it is at least 1")
    workload = parse_text_workload(input_path)
    check_text_output_size(workload, num_npus, num_passes, max_output_bytes)
    prefix = Path(output_prefix)  # its folder is made by the writer, and removed again if writing fails
    notes: list[str] = []
    first_dim = first_dimension(workload, num_npus, model_parallel_size, notes)
    builder = TextWorkloadBuilder(
        workload, NpuPlacement(num_npus, first_dim), NS_PER_US if time_unit == TIME_UNIT_NS else 1
    )
    builder.build(num_passes)
    notes += _workload_notes(workload, num_npus) + _skipped_notes(builder)
    if time_unit == TIME_UNIT_US:
        notes.append(
            "compute times are written as µs, as upstream's converter reads them; ASTRA-sim 1.0 and SimAI "
            "read the same columns as ns (cycles): --time-unit ns converts them"
        )
    elif builder.rounded_up:
        notes.append(
            f"{builder.rounded_up} compute times under 0.5 µs are written as 1 µs (duration_micros is whole µs)"
        )
    if model_parallel_size is not None and not builder.splits_npus:
        notes.append(f"--model-parallel-size {model_parallel_size} is not used: every collective spans all NPUs")
    if not builder.nodes:
        raise ChakraInputError(
            "nothing to simulate: the workload emits no node (" + "; ".join(notes) + ")",
            path=workload.path,
            hint="give the layers a collective other than NONE, or compute times",
        )
    used = {p for p in builder.placements if p is not None}
    groups, first_id = placement_groups(builder.placement, used)
    return _write(workload, builder, prefix, num_passes, groups, first_id, notes)


def _write(
    workload: TextWorkload,
    builder: TextWorkloadBuilder,
    prefix: Path,
    num_passes: int,
    groups: dict[int, list[int]],
    first_id: dict[str, int],
    notes: list[str],
) -> TextConversion:
    """Serialize the graph once, then write each rank's file with its communicators filled in
    (:mod:`chakra.generate.template`); ranks with the same groups share one rendering."""
    placement = builder.placement
    num_npus, size = placement.num_npus, placement.first_dim or 1
    open_kinds = {node.id: (where, 0) for node, where in zip(builder.nodes, builder.placements, strict=True) if where}
    frozen = RankTemplate(builder.nodes, open_kinds).freeze(_metadata(workload, num_npus, num_passes))

    def group_of(where: str, rank: int) -> int:
        return first_id[where] + (rank // size if where == BLOCK else rank % size)

    placements = sorted(first_id)
    ranks_of: dict[tuple[int, ...], list[int]] = {}
    for rank in range(num_npus):
        ranks_of.setdefault(tuple(group_of(where, rank) for where in placements), []).append(rank)
    with WorkloadWriter(prefix) as writer:
        for ranks in ranks_of.values():
            data = frozen.render(ranks[0], group_of)  # ranks of one key have the same groups, the same bytes
            for rank in ranks:
                writer.write_bytes(rank, data)
        if groups:
            writer.groups = CommGroups({k: tuple(v) for k, v in groups.items()})
    written = writer.result
    assert written is not None
    paths = [written.paths[rank] for rank in range(num_npus)]
    groups_path = written.groups_path
    removed = written.removed_note()
    if removed:
        notes.append(removed)
    return TextConversion(
        prefix=prefix,
        parallelism=workload.parallelism,
        num_npus=num_npus,
        num_passes=num_passes,
        paths=paths,
        comm_groups_path=groups_path,
        groups=groups,
        nodes_per_rank=len(builder.nodes),
        collectives_per_rank=sum(1 for node in builder.nodes if node.type == COMM_COLL_NODE),
        distinct_files=len(ranks_of),
        notes=notes,
    )
