"""Parametric transformer workloads: one Chakra ET per rank for training or inference steps.

:func:`generate_llm` turns a :class:`~chakra.generate.specs.WorkloadSpec` into ``PREFIX.{rank}.et``
and ``PREFIX.comm_groups.json``. Every formula is from ``reference/workload-generators.md`` (§ numbers
below refer to it); each part lives in its own module, this one builds the stages and writes them:

* **Compute** (§1, :mod:`chakra.generate.transformer`): every GEMM is a COMP node with ``num_ops`` =
  2·M·K·N FLOPs and ``tensor_size`` = the bytes it reads and writes (§1.5); backward emits a dgrad
  and a wgrad node of the forward's size (§1.3); the attention core is one fused (FlashAttention)
  node, 4·b·s²·q·κ FLOPs forward and 2.5x that backward (with ``flash_attention=False``: 2x, and the
  score matrix's bytes counted); MoE expert GEMMs read the weights of every local expert tokens
  reach; norms, activations, residual adds, embedding, cross-entropy and the optimizer are
  memory-bound elementwise nodes. The softmax inside the fused attention kernel is not counted
  (about 1 % of the attention FLOPs). With a hardware spec every COMP node also gets a roofline
  ``duration_micros`` = max(FLOPs / peak, bytes / bandwidth), rounded to whole µs, at least 1.
* **Communication** (§2, :mod:`~chakra.generate.transformer` within layers,
  :mod:`chakra.generate.training` for gradients and pipeline transfers): tensor parallelism's 4
  all-reduces per layer and micro-batch (all-gathers and reduce-scatters with sequence parallelism,
  with Megatron's re-gather for the weight gradient), the vocabulary-parallel embedding, head and
  loss, context parallelism as the all-gather variant (K/V gathered forward, their gradients
  reduce-scattered backward), expert all-to-alls, data-parallel gradient buckets once per step over
  DP×CP (ZeRO-1: reduce-scatter + all-gather; ZeRO-2: reduce-scatter every micro-batch; ZeRO-3:
  all-gathers and reduce-scatters per layer, embedding and head unit), the tied-embedding
  all-reduce, the sequence-parallel all-reduce of the norm (and router) gradients, and pipeline
  SEND/RECV pairs. Sizes follow ASTRA-sim's ``comm_size`` convention (§2.0). Dimensions of size 1
  emit nothing.
* **Schedules** (§3, :mod:`chakra.generate.schedules`): 1F1B, GPipe or interleaved 1F1B
  (``virtual_stages`` chunks per rank, with the wrap-around transfers from the last stage to the
  first), encoded as in §3.3: compute nodes in one ctrl chain in schedule order, collectives in a
  second chain in program order (identical on every member of a group), receives without ctrl edges,
  sends depending only on their producer; node ids in schedule order. Tags: one per message of the
  step (micro-batch, virtual-stage boundary, direction).
* **Ranks** (§4, :mod:`chakra.generate.layout`): tensor parallelism innermost; each pipeline stage
  is built once and written for every rank of that stage with its own communicators and peers
  (:mod:`chakra.generate.template`).
* **Inference** (§5, :mod:`chakra.generate.inference`): a prefill and ``decode_steps`` decode steps
  in one file, chained; the decode attention reads the growing KV cache; the LM head runs on the
  last positions only; with pipeline parallelism the last stage sends the sampled tokens back to the
  first.

Not modelled (yet): zero-bubble schedules, the ring (P2P) and all-to-all variants of context
parallelism, ZeRO-3 with mixture-of-experts, sequence or context parallelism and interleaving in
inference, continuous batching, and imbalanced expert routing (routing is even). Without sequence
parallelism the MoE router runs on every TP rank (replicated compute, as in Megatron).

Example:
    >>> import tempfile
    >>> from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ParallelSpec, WorkloadSpec
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2, pp=2, dp=2), HARDWARE_PRESETS["h100"],
    ...                     global_batch=8)
    >>> result = generate_llm(spec, f"{tempfile.mkdtemp()}/llama")  # llama.{0..7}.et + llama.comm_groups.json
    >>> result.world_size, result.group_count, result.nodes_per_stage
    (8, 8, [1702, 1734])
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from chakra.attrs import get_attr
from chakra.class_layout import ClassLayoutBuilder
from chakra.errors import ChakraInputError, PathLike
from chakra.generate.inference import build_inference
from chakra.generate.layout import Layout, comm_groups
from chakra.generate.specs import WorkloadSpec, check_spec
from chakra.generate.template import RankTemplate
from chakra.generate.training import build_training
from chakra.generate.transformer import StageBuilder
from chakra.groups import CommGroups, astra_group_id_note
from chakra.io import FORMAT_VERSION
from chakra.output_size import MAX_OUTPUT_BYTES, check_output_size
from chakra.paths import class_path
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    CollectiveCommType,
    GlobalMetadata,
)
from chakra.workload_writer import WorkloadWriter

#: Metadata attribute holding the spec a workload was generated from.
SPEC_ATTR = "chakra_generate_spec"


@dataclass
class LlmWorkload:
    """What :func:`generate_llm` wrote: ``files`` per rank, ``nodes_per_stage``, the number of
    communicator groups, per-stage node counts by kind (``"COMP"``, ``"ALL_REDUCE"``, ``"SEND"``...),
    and the files of an earlier workload of the same name it removed."""

    prefix: Path
    world_size: int
    files: list[Path]
    groups_file: Path | None
    group_count: int
    nodes_per_stage: list[int]
    kinds_per_stage: list[dict[str, int]] = field(default_factory=list)
    removed_stale: list[Path] = field(default_factory=list)  # files of an earlier, larger workload
    notes: list[str] = field(default_factory=list)  # what a consumer should know about the files
    #: written as classes (:mod:`chakra.class_layout`): one file per stage and the mapping; ``files`` empty
    class_files: list[Path] = field(default_factory=list)
    classes_file: Path | None = None

    @property
    def total_nodes(self) -> int:
        per_rank = self.world_size // len(self.nodes_per_stage)
        return per_rank * sum(self.nodes_per_stage)


def _kinds_used(sizes: dict[str, int]) -> tuple[str, ...]:
    """The group kinds with more than one member (only those issue collectives)."""
    return tuple(kind for kind in ("tp", "cp", "dpcp", "ep", "edp", "emb") if sizes.get(kind, 1) > 1)


def build_stage(spec: WorkloadSpec, stage: int) -> RankTemplate:
    """The node template shared by every rank of pipeline ``stage`` (see the module doc)."""
    layout = Layout.of(spec.parallel)
    sizes = _group_sizes(spec, layout)
    st = StageBuilder(spec, layout, stage, sizes)
    if spec.step == "train":
        build_training(st)
    else:
        build_inference(st)
    return st.tmpl


def _group_sizes(spec: WorkloadSpec, layout: Layout) -> dict[str, int]:
    par = spec.parallel
    sizes = {"tp": par.tp, "cp": par.cp, "dpcp": par.dp * par.cp}
    if spec.model.is_moe:
        sizes["ep"] = par.ep
        sizes["edp"] = par.dp * par.cp // par.ep
    sizes["emb"] = 2 if (layout.pp > 1 and spec.model.tied_embeddings) else 1
    if spec.step == "inference":  # replicas serve on their own: no gradient groups
        sizes["dpcp"] = sizes["edp"] = sizes["emb"] = 1
    return sizes


def _check_generatable(spec: WorkloadSpec) -> None:
    par = spec.parallel
    if par.zero == 3 and spec.model.is_moe:
        raise ChakraInputError(
            "ZeRO-3 with a mixture-of-experts model is not modelled yet", hint="use zero 0, 1 or 2 for MoE models"
        )
    if spec.step == "inference" and par.virtual_stages > 1:
        raise ChakraInputError("an interleaved pipeline is not modelled for inference", hint="use virtual_stages 1")
    if spec.step == "inference" and (par.sp or par.cp > 1):
        raise ChakraInputError(
            "sequence and context parallelism are not modelled for inference", hint="use sp false and cp 1"
        )


#: Bytes of a rank file per layer of its stage and per micro-batch (training) or step (inference),
#: an upper bound from the generator's output: GPT-3 175B at TP 8, PP 8, DP 32 with 8 micro-batches
#: writes 481 MiB for 2,048 ranks x 8 micro-batches x 12 layers per stage, 2.6 KB each. The two
#: extra "layers" stand for a stage's embedding, head and optimizer step.
BYTES_PER_LAYER_STEP = 3000
EXTRA_LAYERS = 2


def estimated_llm_output_bytes(spec: WorkloadSpec, *, as_classes: bool = False) -> int:
    """About how many bytes :func:`generate_llm` writes for ``spec`` (an upper bound; ``as_classes``:
    one rank per pipeline stage).

    >>> from chakra.generate.specs import PRESETS, ParallelSpec
    >>> gpt3 = WorkloadSpec(PRESETS["gpt3-175b"], ParallelSpec(tp=8, pp=8, dp=32), global_batch=256)
    >>> 481 << 20 < estimated_llm_output_bytes(gpt3) < 700 << 20
    True
    """
    par = spec.parallel
    steps = spec.micro_batches if spec.step == "train" else spec.micro_batches * (1 + spec.decode_steps)
    layers = -(-spec.model.layers // par.pp) + EXTRA_LAYERS
    return (par.pp if as_classes else par.world_size) * steps * layers * BYTES_PER_LAYER_STEP


def check_llm_output_size(
    spec: WorkloadSpec, max_bytes: int | None, *, path: PathLike | None = None, as_classes: bool = False
) -> None:
    """Refuse ``spec`` (read from ``path``) when it would write more than ``max_bytes``."""
    files = f"{spec.parallel.pp:,} classes" if as_classes else f"{spec.parallel.world_size:,} ranks"
    check_output_size(
        estimated_llm_output_bytes(spec, as_classes=as_classes),
        max_bytes,
        f"{files} x {spec.micro_batches:,} micro-batches",
        path=path,
        check="the global batch and the parallel sizes",
    )


def generate_llm(
    spec: WorkloadSpec,
    prefix: str | Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    max_output_bytes: int | None = MAX_OUTPUT_BYTES,
    as_classes: bool = False,
) -> LlmWorkload:
    """Write ``PREFIX.{rank}.et`` for every rank and ``PREFIX.comm_groups.json``; returns what was
    written. Each pipeline stage is built once; ``progress(done, total)`` is called as ranks are written.
    ``as_classes``: write one file per pipeline stage and the rank-to-class mapping instead
    (:mod:`chakra.class_layout`: chakra-et reads it, ``chakra expand`` writes the rank files).

    Raises :class:`ChakraInputError` for a spec that cannot be generated (see :func:`check_spec`),
    and before writing anything for one whose :func:`estimated_llm_output_bytes` is over
    ``max_output_bytes`` (``None``: no limit).
    """
    check_spec(spec)
    _check_generatable(spec)
    check_llm_output_size(spec, max_output_bytes, as_classes=as_classes)
    layout = Layout.of(spec.parallel)
    groups, ids = comm_groups(layout, _kinds_used(_group_sizes(spec, layout)))
    metadata = GlobalMetadata(version=FORMAT_VERSION)
    _record_spec(metadata, spec)
    stages = (build_stage(spec, stage) for stage in range(layout.pp))  # built one at a time, as written
    return _write_workload(prefix, layout, stages, metadata, groups, ids, progress, as_classes=as_classes)


def _write_workload(
    prefix: str | Path,
    layout: Layout,
    stages: Iterable[RankTemplate],
    metadata: GlobalMetadata,
    groups: dict[int, list[int]],
    ids: dict[str, np.ndarray],
    progress: Callable[[int, int], None] | None,
    *,
    as_classes: bool = False,
) -> LlmWorkload:
    """Write each stage's template for every rank of the stage (or once, as its class, with the
    mapping), the communicator groups, and remove the files of an earlier workload of the same
    prefix: every file this module writes."""
    id_arrays = {kind: array.tolist() for kind, array in ids.items()}

    def group_id(kind: str, rank: int) -> int:
        return id_arrays[kind][rank]  # every kind a template uses has groups of two or more

    world = layout.world_size
    per_stage = world // layout.pp
    nodes_per_stage: list[int] = []
    kinds_per_stage: list[dict[str, int]] = []
    tell = None if progress is None else partial(_tell, progress, layout.pp if as_classes else world)
    classes = ClassLayoutBuilder()
    with WorkloadWriter(prefix, progress=tell) as writer:
        for stage, template in enumerate(stages):
            nodes_per_stage.append(len(template))
            kinds_per_stage.append(_count_kinds(template))
            frozen = template.freeze(metadata)
            ranks = range(stage * per_stage, (stage + 1) * per_stage)
            if as_classes:
                writer.write_class_bytes(stage, frozen.render(ranks[0], group_id))
                _add_class(classes, class_path(writer.prefix, stage).name, template, ranks, group_id)
                continue
            for rank in ranks:
                writer.write_bytes(rank, frozen.render(rank, group_id))
        if as_classes:
            writer.classes = classes.build()
        if groups:
            writer.groups = CommGroups({k: tuple(v) for k, v in groups.items()})
    written = writer.result
    assert written is not None
    notes = [note for note in (astra_group_id_note(max(groups, default=0)),) if note is not None]
    return LlmWorkload(
        written.prefix,
        world,
        [written.paths[rank] for rank in sorted(written.paths)],
        written.groups_path,
        len(groups),
        nodes_per_stage,
        kinds_per_stage,
        list(written.removed),
        notes,
        list(written.class_paths),
        written.classes_path,
    )


def _add_class(
    classes: ClassLayoutBuilder, file: str, template: RankTemplate, ranks: range, group_id: Callable[[str, int], int]
) -> None:
    """Class ``file`` of a stage's ``ranks`` (the first the representative), each rank's groups by
    kind and peers at the template's offsets renamed from the representative's."""
    first = ranks[0]
    kinds = sorted({kind for kind, _ in template.open_kinds.values() if kind not in ("send", "recv")})
    offsets = sorted({offset for kind, offset in template.open_kinds.values() if kind in ("send", "recv")})
    index = classes.add_class(file, first, [str(group_id(kind, first)) for kind in kinds],
                              [first + offset for offset in offsets])  # fmt: skip
    for rank in ranks[1:]:
        names: dict[str, str] = {}
        for kind in kinds:
            mine = names.setdefault(str(group_id(kind, first)), str(group_id(kind, rank)))
            if mine != str(group_id(kind, rank)):
                raise ChakraInputError(
                    f"rank {rank} cannot be written as its stage's class: group kinds that are one group on "
                    f"rank {first} are two on it",
                    hint="write one file per rank",
                )
        classes.add_rank(rank, index, names.__getitem__, partial(operator.add, rank - first))


def _tell(progress: Callable[[int, int], None], total: int, done: int) -> None:
    progress(done, total)


def _record_spec(metadata: GlobalMetadata, spec: WorkloadSpec) -> None:
    """Record the spec (JSON) in the metadata, so a workload says how it was made."""
    attr = metadata.attr.add()
    attr.name = SPEC_ATTR
    attr.string_val = json.dumps(asdict(spec), sort_keys=True)


def _count_kinds(template: RankTemplate) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in template.nodes:
        if node.type == COMM_COLL_NODE:
            key = CollectiveCommType.Name(int(get_attr(node, "comm_type")))
        elif node.type == COMM_SEND_NODE:
            key = "SEND"
        elif node.type == COMM_RECV_NODE:
            key = "RECV"
        else:
            key = "COMP"
        counts[key] = counts.get(key, 0) + 1
    return counts
