"""One training step of a pipeline stage: the schedule's units, pipeline transfers, gradient
reductions, the optimizer and ZeRO's collectives (``reference/workload-generators.md`` §2.4-2.6, §3).

:func:`build_training` runs the stage's units in schedule order (:mod:`chakra.generate.schedules`),
each layer through :class:`~chakra.generate.transformer.StageBuilder`: receives and sends between
(virtual) stages with one tag per message, data-parallel gradient buckets once per step (ZeRO-2:
every micro-batch; ZeRO-3: a reduce-scatter per unit and prefetched parameter all-gathers), then the
step end (tied-embedding and sequence-parallel norm reductions, Adam, ZeRO's parameter gathers).
:func:`stage_params` is the parameter count those reductions and the optimizer use.

Example:
    >>> from chakra.generate.specs import PRESETS, ParallelSpec, WorkloadSpec
    >>> stage_params(WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2, pp=2)), 1)  # (dense, expert)
    (2007633920, 0)
"""

from __future__ import annotations

import math

from chakra.generate.layout import Layout
from chakra.generate.schedules import pipeline_units
from chakra.generate.specs import WorkloadSpec
from chakra.generate.transformer import StageBuilder
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER

#: Mixed-precision Adam per parameter updated (reference §1.5): about 12 FLOPs; reads master, m, v,
#: grad (16 B) and writes master, m, v and the bf16 copy (14 B).
ADAM_FLOPS_PER_PARAM = 12
ADAM_BYTES_PER_PARAM = 30
#: Megatron-Core's data-parallel bucket: max(4e7, 1e6·DP) parameters (reference §2.4).
MIN_BUCKET_PARAMS = 40_000_000
BUCKET_PARAMS_PER_DP_RANK = 1_000_000


def _layer_params(st: StageBuilder) -> tuple[int, int]:
    """(dense, expert) parameters of one layer on one rank."""
    m, h = st.model, st.h
    bias = m.bias
    dense = h * (st.q_r + 2 * st.kv_r) + st.q_r * h + (st.q_r + 2 * st.kv_r + h if bias else 0)
    dense += 2 * st.norm_k * h
    if m.is_moe:
        per_expert = m.mlp_matrices * h * st.fe_r + ((m.mlp_matrices - 1) * st.fe_r + h if bias else 0)
        return dense + h * m.experts, (m.experts // st.e) * per_expert
    return dense + m.mlp_matrices * h * st.f_r + ((m.mlp_matrices - 1) * st.f_r + h if bias else 0), 0


def replicated_params(st: StageBuilder) -> int:
    """Parameters every TP rank holds in full (norms, row-parallel biases, MoE routers): their
    gradients are partial under sequence parallelism and all-reduced over TP once per step (§2.2)."""
    per_layer = 2 * st.norm_k * st.h + (2 * st.h if st.model.bias else 0)
    per_layer += st.h * st.model.experts  # the router sees the sequence shard too (Megatron-Core reduces it likewise)
    return per_layer * len(st.layers) + (st.norm_k * st.h if st.is_last else 0)


def stage_params(spec: WorkloadSpec, stage: int) -> tuple[int, int]:
    """(dense, expert) parameters held by one rank of ``stage``."""
    st = StageBuilder(spec, Layout.of(spec.parallel), stage, {})
    dense, expert = _layer_params(st)
    return dense * len(st.layers) + sum(_edge_units(st)), expert * len(st.layers)


class _Buckets:
    """Data-parallel gradient buckets in reverse layer order (§2.4): a reduction is emitted whenever
    the parameters collected reach the bucket size, depending on the wgrads since the previous one."""

    def __init__(self, st: StageBuilder, group: str, limit_params: int):
        self.st, self.group, self.limit = st, group, limit_params
        self.pending = 0
        self.deps: list[int] = []
        self.emitted: list[tuple[int, int]] = []  # (micro-batch, parameters) of every bucket, in order

    def add(self, params: int, wgrads: list[int], reduce_type: int, micro_batch: int) -> None:
        self.pending += params
        self.deps.extend(wgrads)
        if self.pending >= self.limit:
            self.flush(reduce_type, micro_batch)

    def flush(self, reduce_type: int, micro_batch: int) -> None:
        if not self.pending:
            return
        st = self.st
        name = f"grad_bucket{len(self.emitted)}.{self.group}"
        st.coll(name, reduce_type, self.pending * st.w_g, self.group, list(self.deps))
        self.emitted.append((micro_batch, self.pending))
        self.pending = 0
        self.deps = []

    def of_micro_batch(self, micro_batch: int) -> list[int]:
        """Parameters of each bucket reduced in ``micro_batch``, in order."""
        return [params for j, params in self.emitted if j == micro_batch]


def _zero3_unit_bytes(st: StageBuilder, params: int) -> int:
    shards = st.sizes.get("dpcp", 1)
    return math.ceil(params / shards) * st.w_w


def _p2p_tag(st: StageBuilder, micro_batch: int, boundary: int, backward: bool) -> int:
    """A tag unique per message of the step: the micro-batch, the virtual-stage boundary it crosses
    (``boundary`` → ``boundary + 1``) and the direction; well below ASTRA-sim's 5·10⁸ (§2.6)."""
    boundaries = st.p * st.v - 1
    return 2 * (micro_batch * boundaries + boundary) + int(backward)


def _edge_units(st: StageBuilder) -> tuple[int, int]:
    """Parameters of the embedding unit (first stage) and of the head unit (final norm and LM head,
    last stage) on one rank; 0 where the rank has none. With tied embeddings on a single stage the
    head is the embedding table itself."""
    m, h = st.model, st.h
    embedding = st.vocab_r * h + (m.seq_len * h if m.learned_positions else 0) if st.is_first else 0
    head = 0
    if st.is_last:
        head = st.norm_k * h + (0 if (m.tied_embeddings and st.is_first) else st.vocab_r * h)
    return embedding, head


def build_training(st: StageBuilder) -> None:
    """One training step of the stage: the schedule's units, each pipeline transfer, gradient
    reductions (once per step, ZeRO-2 every micro-batch, ZeRO-3 per unit) and the step end."""
    spec, par = st.spec, st.spec.parallel
    m, p, v = spec.micro_batches, st.p, st.v
    stride = st.layout.stage_stride
    wrap = (p - 1) * stride  # between stage p-1 and stage 0: the next chunk of an interleaved pipeline
    last_virtual = p * v - 1
    p2p_bytes = st.A // st.t if st.sp else st.A
    dense_layer, expert_layer = _layer_params(st)
    embedding_params, head_params = _edge_units(st)
    zero = par.zero
    limit = spec.dp_bucket_params or max(MIN_BUCKET_PARAMS, BUCKET_PARAMS_PER_DP_RANK * st.sizes.get("dpcp", 1))
    dense_buckets = _Buckets(st, "dpcp", limit)
    expert_buckets = _Buckets(st, "edp", limit)
    reduce_type = ALL_REDUCE if zero == 0 else REDUCE_SCATTER
    unit_bytes = _zero3_unit_bytes(st, dense_layer)
    outputs: dict[tuple[int, int], int] = {}

    def zero3_gather(name: str, params: int) -> int | None:
        return (
            st.coll(f"{name}.zero3_allgather", ALL_GATHER, _zero3_unit_bytes(st, params), "dpcp", [])
            if zero == 3
            else None
        )

    def reduce_grads(name: str, params: int, expert: int, micro_batch: int) -> None:
        """The gradients of one unit just computed (``st.wgrads``): ZeRO-3 scatters them now, the
        others collect them into buckets on the micro-batch they are reduced in."""
        if zero == 3:
            st.coll(f"{name}.zero3_reducescatter", REDUCE_SCATTER, params * st.w_g, "dpcp", st.wgrads)
        elif micro_batch == m - 1 or zero == 2:  # once per step (last micro-batch); ZeRO-2 every one
            dense_buckets.add(params, st.wgrads, reduce_type, micro_batch)
            if expert:
                expert_buckets.add(expert, list(st.wgrads), reduce_type, micro_batch)

    for unit, j, chunk in pipeline_units(par.schedule, st.stage, p, m, v):
        virtual = chunk * p + st.stage
        layers = st.chunks[chunk]
        if unit == "F":
            if virtual == 0:
                x = st.embedding_forward("fwd", None, zero3_gather("embedding.fwd", embedding_params))
            else:
                tag = _p2p_tag(st, j, virtual - 1, backward=False)
                offset = -stride if st.stage else wrap
                x = st.tmpl.p2p(f"mb{j}.fwd.recv", send=False, size_bytes=p2p_bytes, peer_offset=offset, tag=tag)
            gathers = _Zero3Gathers(st, layers, unit_bytes, "fwd") if zero == 3 else None
            for index, layer in enumerate(layers):
                x = st.layer_forward(layer, x, "fwd", gathers.before(index) if gathers else None)
            if virtual == last_virtual:
                x = st.head_forward("fwd", x, zero3_gather("lm_head.fwd", head_params))
            else:
                tag = _p2p_tag(st, j, virtual, backward=False)
                offset = stride if st.stage < p - 1 else -wrap
                st.tmpl.p2p(f"mb{j}.fwd.send", send=True, size_bytes=p2p_bytes, peer_offset=offset, tag=tag, deps=[x])
            outputs[(j, chunk)] = x
            continue
        if virtual == last_virtual:
            st.wgrads = []
            dy = st.head_backward(outputs[(j, chunk)], zero3_gather("lm_head.bwd", head_params))
            reduce_grads("lm_head", head_params, 0, j)
        else:
            tag = _p2p_tag(st, j, virtual, backward=True)
            offset = stride if st.stage < p - 1 else -wrap
            dy = st.tmpl.p2p(f"mb{j}.bwd.recv", send=False, size_bytes=p2p_bytes, peer_offset=offset, tag=tag)
        backward_layers = list(reversed(layers))
        gathers = _Zero3Gathers(st, backward_layers, unit_bytes, "bwd") if zero == 3 else None
        for index, layer in enumerate(backward_layers):
            gate = gathers.before(index) if gathers else None
            st.wgrads = []
            dy = st.layer_backward(layer, dy, gate)
            reduce_grads(f"layer{layer}", dense_layer, expert_layer, j)
        if virtual == 0:
            st.wgrads = []
            dy = st.embedding_backward(dy, zero3_gather("embedding.bwd", embedding_params))
            reduce_grads("embedding", embedding_params, 0, j)
        else:
            tag = _p2p_tag(st, j, virtual - 1, backward=True)
            offset = -stride if st.stage else wrap
            st.tmpl.p2p(f"mb{j}.bwd.send", send=True, size_bytes=p2p_bytes, peer_offset=offset, tag=tag, deps=[dy])
        dense_buckets.flush(reduce_type, j)  # a no-op unless this unit collected gradients
        expert_buckets.flush(reduce_type, j)
    _step_end(st, dense_buckets, expert_buckets)


class _Zero3Gathers:
    """ZeRO-3/FSDP parameter all-gathers of ``layers`` in their order, prefetched one layer ahead
    (§2.5): the first is emitted at once, the one of the next layer just before a layer computes,
    so it overlaps that layer without running further ahead (a bounded prefetch window)."""

    def __init__(self, st: StageBuilder, layers: list[int], unit_bytes: int, tag: str):
        self.st, self.layers, self.unit_bytes, self.tag = st, layers, unit_bytes, tag
        self.gate: dict[int, int | None] = {}
        if layers:
            self._gather(layers[0])

    def _gather(self, layer: int) -> None:
        self.gate[layer] = self.st.coll(
            f"layer{layer}.{self.tag}.zero3_allgather", ALL_GATHER, self.unit_bytes, "dpcp", []
        )

    def before(self, index: int) -> int | None:
        """Call before layer ``layers[index]`` computes; returns the gather its first node waits for."""
        if index + 1 < len(self.layers):
            self._gather(self.layers[index + 1])
        return self.gate[self.layers[index]]


def _step_end(st: StageBuilder, dense: _Buckets, expert: _Buckets) -> None:
    """Tied-embedding and SP norm reductions, the optimizer, and ZeRO's parameter all-gathers (§3.3.6)."""
    spec, zero = st.spec, st.spec.parallel.zero
    # after the whole backward too: issued earlier, a step-end collective could hold the rank's one
    # communication slot while the last pipeline send waits behind it (a cross-stage deadlock)
    backward_done = st.last_compute
    last_reduction = st.last_collective
    if spec.model.tied_embeddings and (st.is_first or st.is_last):
        table_grad_bytes = st.vocab_r * st.h * st.w_g
        red = st.coll("embedding.tied_allreduce", ALL_REDUCE, table_grad_bytes, "emb", [last_reduction, backward_done])
        last_reduction = red if red is not None else last_reduction
    if st.sp:
        norm_grad_bytes = replicated_params(st) * st.w_g
        red = st.coll("norms.sp_allreduce", ALL_REDUCE, norm_grad_bytes, "tp", [last_reduction, backward_done])
        last_reduction = red if red is not None else last_reduction
    dense_layer, expert_layer = _layer_params(st)
    held = dense_layer * len(st.layers) + sum(_edge_units(st))
    experts = expert_layer * len(st.layers)
    if zero:
        held = math.ceil(held / st.sizes.get("dpcp", 1))
        experts = math.ceil(experts / st.sizes.get("edp", 1))
    updated = held + experts
    st.comp("optimizer.step", ADAM_FLOPS_PER_PARAM * updated, ADAM_BYTES_PER_PARAM * updated, [last_reduction])
    if zero in (1, 2):
        optimizer = st.last_compute
        last_micro_batch = spec.micro_batches - 1
        for group, buckets in (("dpcp", dense), ("edp", expert)):
            shards = st.sizes.get(group, 1)
            # the updated shards of one step's gradients, bucket by bucket (ZeRO-2 reduced every micro-batch)
            for i, params in enumerate(buckets.of_micro_batch(last_micro_batch)):
                st.coll(
                    f"param_bucket{i}.{group}.allgather",
                    ALL_GATHER,
                    math.ceil(params / shards) * st.w_w,
                    group,
                    [optimizer],
                )
