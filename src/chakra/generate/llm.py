"""Parametric transformer workloads: one Chakra ET per rank for training or inference steps.

:func:`generate_llm` turns a :class:`~chakra.generate.specs.WorkloadSpec` into ``PREFIX.{rank}.et``
and ``PREFIX.comm_groups.json``. Every formula is from ``reference/workload-generators.md`` (§ numbers
below refer to it):

* **Compute** (§1): every GEMM is a COMP node with ``num_ops`` = 2·M·K·N FLOPs and ``tensor_size`` =
  the bytes it reads and writes (§1.5); backward emits a dgrad and a wgrad node of the forward's
  size (§1.3); the attention core is one fused (FlashAttention) node, 4·b·s²·q·κ FLOPs forward and
  2.5x that backward (with ``flash_attention=False``: 2x, and the score matrix's bytes counted);
  MoE expert GEMMs read the weights of every local expert tokens reach; norms, activations, residual adds,
  embedding, cross-entropy and the optimizer are memory-bound elementwise nodes. The softmax inside
  the fused attention kernel is not counted (about 1 % of the attention FLOPs). With a hardware spec
  every COMP node also gets a roofline ``duration_micros`` = max(FLOPs / peak, bytes / bandwidth),
  rounded to whole µs, at least 1.
* **Communication** (§2): tensor parallelism's 4 all-reduces per layer and micro-batch (all-gathers
  and reduce-scatters with sequence parallelism, with Megatron's re-gather for the weight gradient),
  the vocabulary-parallel embedding, head and loss, context parallelism as the all-gather variant
  (K/V gathered forward, their gradients reduce-scattered backward), expert all-to-alls, data-parallel
  gradient buckets once per step over DP×CP (ZeRO-1: reduce-scatter + all-gather; ZeRO-2: reduce-
  scatter every micro-batch; ZeRO-3: all-gathers and reduce-scatters per layer, embedding and head
  unit), the tied-embedding all-reduce, the sequence-parallel all-reduce of the norm (and router)
  gradients, and pipeline SEND/RECV pairs. Sizes
  follow ASTRA-sim's ``comm_size`` convention (§2.0). Dimensions of size 1 emit nothing.
* **Schedules** (§3): 1F1B, GPipe or interleaved 1F1B (``virtual_stages`` chunks per rank, with
  the wrap-around transfers from the last stage to the first), encoded as in §3.3: compute nodes in
  one ctrl chain in schedule order, collectives in a second chain in program order (identical on
  every member of a group), receives without ctrl edges, sends depending only on their producer;
  node ids in schedule order. Tags: one per message of the step (micro-batch, virtual-stage boundary, direction).
* **Ranks** (§4, :mod:`chakra.generate.layout`): tensor parallelism innermost; each pipeline stage is
  built once and written for every rank of that stage with its own communicators and peers
  (:mod:`chakra.generate.template`).
* **Inference** (§5): a prefill and ``decode_steps`` decode steps in one file, chained; the decode
  attention reads the growing KV cache; the LM head runs on the last positions only; with pipeline
  parallelism the last stage sends the sampled tokens back to the first.

Not modelled (yet): zero-bubble schedules, the ring (P2P) and all-to-all variants of context
parallelism, ZeRO-3 with mixture-of-experts, sequence or context parallelism and interleaving in
inference, continuous batching, and imbalanced expert routing (routing is even). Without sequence
parallelism the MoE router runs on every TP rank (replicated compute, as in Megatron).

Example:
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2, pp=2, dp=2), HARDWARE_PRESETS["h100"],
    ...                     global_batch=8)
    >>> result = generate_llm(spec, "out/llama")            # out/llama.{0..7}.et + out/llama.comm_groups.json
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from chakra.attrs import get_attr
from chakra.errors import ChakraInputError
from chakra.generate.layout import Layout, comm_groups
from chakra.generate.specs import NORM_PARAMS_PER_HIDDEN, WorkloadSpec, check_spec
from chakra.generate.template import RankTemplate, prepare_prefix, remove_stale_files, write_ranks
from chakra.io import FORMAT_VERSION
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    REDUCE_SCATTER,
    CollectiveCommType,
    GlobalMetadata,
)
from chakra.trace import COMM_GROUPS_SUFFIX, write_comm_groups
from chakra.validate import astra_group_id_note

#: Elementwise FLOPs per element (reference §1.1 conventions).
NORM_FLOPS = {"layernorm": 5, "rmsnorm": 4}
GELU_FLOPS = 8
SWIGLU_FLOPS = 5
CROSS_ENTROPY_FLOPS = 5
#: Mixed-precision Adam per parameter updated (reference §1.5): about 12 FLOPs; reads master, m, v,
#: grad (16 B) and writes master, m, v and the bf16 copy (14 B).
ADAM_FLOPS_PER_PARAM = 12
ADAM_BYTES_PER_PARAM = 30
#: Passes over the score matrix of unfused attention, forward and again backward (reference §1.5).
UNFUSED_SCORE_PASSES = 4
#: FlashAttention's backward recomputes the scores: 2.5x its forward (reference §1.3).
FLASH_BACKWARD_FACTOR = 2.5
PLAIN_BACKWARD_FACTOR = 2.0
#: fp32 softmax statistics and token ids (4 bytes each).
FP32_BYTES = 4
TOKEN_ID_BYTES = 4
#: Cross-entropy's three vocabulary-parallel all-reduces: max, target logit, sum of exps (§2.3).
CROSS_ENTROPY_ALL_REDUCES = 3
#: Megatron-Core's data-parallel bucket: max(4e7, 1e6·DP) parameters (reference §2.4).
MIN_BUCKET_PARAMS = 40_000_000
BUCKET_PARAMS_PER_DP_RANK = 1_000_000
#: Microseconds per second, for roofline durations.
US_PER_S = 1e6
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

    @property
    def total_nodes(self) -> int:
        per_rank = self.world_size // len(self.nodes_per_stage)
        return per_rank * sum(self.nodes_per_stage)


class _Stage:
    """Builds the template of one pipeline stage: shapes, and the helpers that add nodes in order."""

    def __init__(self, spec: WorkloadSpec, layout: Layout, stage: int, group_sizes: dict[str, int]):
        self.spec, self.layout, self.stage = spec, layout, stage
        self.model = model = spec.model
        par = spec.parallel
        self.t, self.c, self.p, self.e = par.tp, par.cp, par.pp, par.ep
        self.sp = par.sp
        self.sizes = group_sizes
        self.tmpl = RankTemplate()
        self.last_compute: int | None = None
        self.last_collective: int | None = None
        self.w_a = spec.act_bytes
        self.w_w = spec.act_bytes
        self.w_g = spec.grad_bytes
        self.h = model.hidden
        self.q_r = model.q_dim // self.t
        self.kv_r = max(model.kv_heads // self.t, 1) * model.d_head  # KV heads replicated when g < t
        self.heads_r = model.heads // self.t
        self.f_r = model.ffn // self.t
        self.fe_r = model.ffn_per_expert // self.t
        self.vocab_r = model.padded_vocab(self.t) // self.t
        self.norm_k = NORM_PARAMS_PER_HIDDEN[model.norm]
        self.v = par.virtual_stages
        virtual = spec.layers_of_virtual_stage()
        starts = [sum(virtual[:k]) for k in range(len(virtual))]
        # chunk c of this rank is virtual stage c·p + stage (one chunk without interleaving)
        self.chunks = [
            list(range(starts[c * self.p + stage], starts[c * self.p + stage] + virtual[c * self.p + stage]))
            for c in range(self.v)
        ]
        self.layers = [layer for chunk in self.chunks for layer in chunk]
        self.is_first, self.is_last = stage == 0, stage == self.p - 1  # hold the embedding, the head
        hw = spec.hardware
        self._peak = hw.peak_flops if hw else 0.0
        self._bw = hw.mem_bw_bytes_per_s if hw else 0.0
        self.wgrads: list[int] = []  # weight-gradient nodes since the last gradient bucket
        self.set_tokens(spec.micro_batch, model.seq_len)

    def set_tokens(self, batch: int, seq: int, kv_len: int | None = None) -> None:
        """The pass's shapes: ``batch`` sequences of ``seq`` new tokens attending ``kv_len`` positions."""
        self.b, self.s = batch, seq
        self.kv_len = seq if kv_len is None else kv_len
        self.T = batch * seq // self.c  # tokens per CP rank
        self.T_sp = self.T // self.t if self.sp else self.T  # tokens in the replicated regions
        self.A = self.T * self.h * self.w_a  # one micro-batch's hidden state on one CP rank

    # ---- node helpers ------------------------------------------------------------------------
    def _duration_us(self, flops: float, size: float) -> int:
        if not self._peak:
            return 0
        seconds = max(flops / self._peak, size / self._bw)
        return max(round(seconds * US_PER_S), 1)

    def comp(self, name: str, flops: float, size: float, deps: Sequence[int | None]) -> int:
        ctrl = [self.last_compute] if self.last_compute is not None else []
        node = self.tmpl.compute(
            name,
            num_ops=int(flops),
            tensor_size=int(size),
            duration_us=self._duration_us(flops, size),
            deps=[d for d in deps if d is not None],
            ctrl=ctrl,
        )
        self.last_compute = node
        return node

    def coll(self, name: str, comm_type: int, size: float, group: str, deps: Sequence[int | None]) -> int | None:
        """A collective in ``group``; None (nothing emitted) when that group has one member."""
        if self.sizes.get(group, 1) < 2:
            return None
        ctrl = [self.last_collective] if self.last_collective is not None else []
        node = self.tmpl.collective(
            name, comm_type=comm_type, size_bytes=int(size), group=group, deps=[d for d in deps if d is not None],
            ctrl=ctrl,
        )  # fmt: skip
        self.last_collective = node
        return node

    def gemm(self, name: str, m: int, k: int, n: int, phase: str, deps: Sequence[int | None], weights: int = 1) -> int:
        """A GEMM ``[m×k]·[k×n]`` forward, or its dgrad/wgrad (same FLOPs; bytes per §1.5), over
        ``weights`` weight matrices of ``k×n`` (a grouped GEMM over several experts reads them all).
        Names read ``<scope>.<pass>.<op>``, with ``.dgrad``/``.wgrad`` appended in backward."""
        flops = 2 * m * k * n
        if phase == "wgrad":  # reads X and dY, accumulates into the gradient buffer (read + write)
            size = self.w_a * m * k + self.w_a * m * n + 2 * self.w_g * k * n * weights
        else:
            size = self.w_a * m * k + self.w_w * k * n * weights + self.w_a * m * n
        node = self.comp(name if phase == "fwd" else f"{name}.{phase}", flops, size, deps)
        if phase == "wgrad":
            self.wgrads.append(node)
        return node

    def elem(
        self, name: str, elements: int, flops_per: float, tensors: int, deps: Sequence[int | None], extra: float = 0
    ) -> int:
        """An elementwise op over ``elements`` reading and writing ``tensors`` activation tensors."""
        return self.comp(name, elements * flops_per, tensors * self.w_a * elements + extra, deps)

    def tp_reduce(self, name: str, dep: int) -> int:
        """The reduce after a row-parallel block: all-reduce, or reduce-scatter with SP (§2.1-2.2)."""
        out = self.coll(name, REDUCE_SCATTER if self.sp else ALL_REDUCE, self.A, "tp", [dep])
        return dep if out is None else out

    def sp_gather(self, name: str, dep: int) -> int:
        """The sequence-parallel all-gather before a column-parallel block (nothing without SP)."""
        if not self.sp:
            return dep
        out = self.coll(name, ALL_GATHER, self.A // self.t, "tp", [dep])
        return dep if out is None else out

    # ---- one layer ---------------------------------------------------------------------------
    def _norm(self, name: str, dep: int | None, gate: int | None = None) -> int:
        """A norm over the (sequence-sharded with SP) tokens: its weights and fp32 statistics besides
        the activations; after ``gate`` too (a ZeRO-3 all-gather) when given."""
        return self.elem(
            name,
            self.T_sp * self.h,
            NORM_FLOPS[self.model.norm],
            2,
            [dep, gate],
            self.w_w * self.h + 2 * FP32_BYTES * self.T_sp,
        )

    def attention_flops(self) -> float:
        """Forward FLOPs of the attention core on this rank: 4·b·s_q·s_kv·(q/t)·κ over the pass."""
        kappa = self.spec.kappa(self.kv_len) if self.s > 1 else 1.0
        return 4 * self.b * (self.s / self.c) * self.kv_len * self.q_r * kappa

    def layer_forward(self, layer: int, x: int | None, tag: str, gate: int | None = None) -> int:
        """One layer's forward from input node ``x`` (after ``gate``, e.g. its ZeRO-3 all-gather);
        returns the output node."""
        pre = f"layer{layer}.{tag}"
        ln1 = self._norm(f"{pre}.ln1", x, gate)
        inp = self.sp_gather(f"{pre}.attn.sp_allgather", ln1)
        qkv = self.gemm(f"{pre}.attn.qkv", self.T, self.h, self.q_r + 2 * self.kv_r, "fwd", [inp])
        kv_block = 2 * self.T * self.kv_r * self.w_a
        kv = self.coll(f"{pre}.attn.cp_allgather", ALL_GATHER, kv_block, "cp", [qkv])
        attn = self.comp(f"{pre}.attn.core", self.attention_flops(), self._attention_bytes(), [qkv, kv])
        out = self.gemm(f"{pre}.attn.out", self.T, self.q_r, self.h, "fwd", [attn])
        red = self.tp_reduce(f"{pre}.attn.tp_reduce", out)
        res1 = self.elem(f"{pre}.residual1", self.T_sp * self.h, 1, 3, [red, x])
        ln2 = self._norm(f"{pre}.ln2", res1)
        inp2 = self.sp_gather(f"{pre}.mlp.sp_allgather", ln2)
        y = self._moe_forward(pre, ln2, inp2) if self.model.is_moe else self._mlp_forward(pre, inp2)
        red2 = self.tp_reduce(f"{pre}.mlp.tp_reduce", y)
        return self.elem(f"{pre}.residual2", self.T_sp * self.h, 1, 3, [red2, res1])

    def _attention_bytes(self) -> float:
        """Fused attention: Q and O of the new tokens, K and V of the attended positions, fp32
        statistics; in inference also the KV cache written for the new tokens (§1.5, §5.1)."""
        q_and_o = 2 * self.T * self.q_r * self.w_a
        kv_read = 2 * self.b * self.kv_len * self.kv_r * self.w_a
        stats = FP32_BYTES * self.b * self.heads_r * (self.s // self.c)
        kv_write = 2 * self.T * self.kv_r * self.w_a if self.spec.step == "inference" else 0
        return q_and_o + kv_read + stats + kv_write + self._score_bytes()

    def _score_bytes(self) -> float:
        """Unfused attention materializes the score matrix: about four passes over it (scores
        written, read by softmax, probabilities written, read by P·V; §1.5); fused kernels none."""
        if self.spec.flash_attention:
            return 0.0
        kappa = self.spec.kappa(self.kv_len) if self.s > 1 else 1.0
        return UNFUSED_SCORE_PASSES * self.w_a * self.b * self.heads_r * (self.s / self.c) * self.kv_len * kappa

    def _activation(self, name: str, elements: int, dep: int) -> int:
        gated = self.model.gated_mlp
        return self.elem(name, elements, SWIGLU_FLOPS if gated else GELU_FLOPS, 3 if gated else 2, [dep])

    def _mlp_forward(self, pre: str, inp: int) -> int:
        up = self.gemm(f"{pre}.mlp.up", self.T, self.h, (self.model.mlp_matrices - 1) * self.f_r, "fwd", [inp])
        act = self._activation(f"{pre}.mlp.act", self.T * self.f_r, up)
        return self.gemm(f"{pre}.mlp.down", self.T, self.f_r, self.h, "fwd", [act])

    def _moe_tokens(self) -> int:
        return self.model.top_k * self.T

    def _local_experts(self) -> int:
        """Experts of this rank whose weights a grouped GEMM reads: all it hosts, unless fewer
        token-expert pairs arrive than that (decode)."""
        return min(self.model.experts // self.e, self._moe_tokens())

    def _moe_forward(self, pre: str, ln2: int, inp: int) -> int:
        """Router on the (sequence-sharded with SP) norm output, dispatch, the local experts'
        grouped GEMMs, combine (§1.2, §2.8)."""
        m = self.model
        router = self.gemm(f"{pre}.moe.router", self.T_sp, self.h, m.experts, "fwd", [ln2])
        routed = self._moe_tokens()
        permute = self.elem(f"{pre}.moe.permute", routed * self.h, 1, 2, [router, inp])
        a2a = self.coll(f"{pre}.moe.dispatch", ALL_TO_ALL, routed * self.h * self.w_a, "ep", [permute])
        n_up = (m.mlp_matrices - 1) * self.fe_r
        local = self._local_experts()
        up = self.gemm(f"{pre}.moe.expert_up", routed, self.h, n_up, "fwd", [permute, a2a], local)
        act = self._activation(f"{pre}.moe.act", routed * self.fe_r, up)
        down = self.gemm(f"{pre}.moe.expert_down", routed, self.fe_r, self.h, "fwd", [act], local)
        combine = self.coll(f"{pre}.moe.combine", ALL_TO_ALL, routed * self.h * self.w_a, "ep", [down])
        return self.elem(f"{pre}.moe.unpermute", routed * self.h, 1, 2, [down, combine])

    def layer_backward(self, layer: int, dy: int, gate: int | None = None) -> int:
        """One layer's backward from the gradient node ``dy`` (after ``gate``, e.g. its ZeRO-3
        all-gather); returns the input-gradient node."""
        spec = self.spec
        recomputed: int | None = None
        if spec.recompute == "full":  # the whole forward again, collectives included (§1.3)
            # from the layer's saved input; placed once the gradient has arrived, just before its use
            recomputed = self.layer_forward(layer, dy, "recompute", gate)
            gate = None
        pre = f"layer{layer}.bwd"
        g = [self.sp_gather(f"{pre}.mlp.sp_allgather", dy), gate, recomputed]
        d_mlp = self._moe_backward(pre, g) if self.model.is_moe else self._mlp_backward(pre, g)
        ln2 = self._norm(f"{pre}.ln2", d_mlp)
        g2 = self.sp_gather(f"{pre}.attn.sp_allgather", ln2)
        out_d = self.gemm(f"{pre}.attn.out", self.T, self.q_r, self.h, "dgrad", [g2])
        self.gemm(f"{pre}.attn.out", self.T, self.q_r, self.h, "wgrad", [g2])
        if spec.recompute == "selective":  # the attention core forward again (Megatron selective)
            out_d = self.comp(f"{pre}.attn.core.recompute", self.attention_flops(), self._attention_bytes(), [out_d])
        factor = FLASH_BACKWARD_FACTOR if spec.flash_attention else PLAIN_BACKWARD_FACTOR
        core_bytes: float = 4 * self.T * self.q_r * self.w_a + 4 * self.b * self.kv_len * self.kv_r * self.w_a
        core_bytes += self._score_bytes()  # the backward passes over the scores as often
        core = self.comp(f"{pre}.attn.core", factor * self.attention_flops(), core_bytes, [out_d])
        kv_block = 2 * self.T * self.kv_r * self.w_a
        dkv = self.coll(f"{pre}.attn.cp_reducescatter", REDUCE_SCATTER, self.c * kv_block, "cp", [core])
        qkv_n = self.q_r + 2 * self.kv_r
        qkv_d = self.gemm(f"{pre}.attn.qkv", self.T, self.h, qkv_n, "dgrad", [core, dkv])
        red = self.tp_reduce(f"{pre}.attn.tp_reduce", qkv_d)
        regather = self._regather(f"{pre}.attn.sp_regather", ln2)
        self.gemm(f"{pre}.attn.qkv", self.T, self.h, qkv_n, "wgrad", [core, dkv, regather])
        return self._norm(f"{pre}.ln1", red)

    def _regather(self, name: str, dep: int) -> int | None:
        """Megatron's SP re-gather of a column-parallel input for its weight gradient (§2.2)."""
        if not (self.sp and self.spec.parallel.sp_regather):
            return None
        return self.coll(name, ALL_GATHER, self.A // self.t, "tp", [dep])

    def _mlp_backward(self, pre: str, g: Sequence[int | None]) -> int:
        n_up = (self.model.mlp_matrices - 1) * self.f_r
        down_d = self.gemm(f"{pre}.mlp.down", self.T, self.f_r, self.h, "dgrad", g)
        self.gemm(f"{pre}.mlp.down", self.T, self.f_r, self.h, "wgrad", g)
        act = self._activation(f"{pre}.mlp.act", self.T * self.f_r, down_d)
        up_d = self.gemm(f"{pre}.mlp.up", self.T, self.h, n_up, "dgrad", [act])
        red = self.tp_reduce(f"{pre}.mlp.tp_reduce", up_d)
        regather = self._regather(f"{pre}.mlp.sp_regather", act)
        self.gemm(f"{pre}.mlp.up", self.T, self.h, n_up, "wgrad", [act, regather])
        return red

    def _moe_backward(self, pre: str, g: Sequence[int | None]) -> int:
        m = self.model
        routed = self._moe_tokens()
        a2a_bytes = routed * self.h * self.w_a
        unpermute = self.elem(f"{pre}.moe.unpermute", routed * self.h, 1, 2, g)
        combine = self.coll(f"{pre}.moe.combine", ALL_TO_ALL, a2a_bytes, "ep", [unpermute])
        local = self._local_experts()
        down_d = self.gemm(f"{pre}.moe.expert_down", routed, self.fe_r, self.h, "dgrad", [unpermute, combine], local)
        self.gemm(f"{pre}.moe.expert_down", routed, self.fe_r, self.h, "wgrad", [unpermute, combine], local)
        act = self._activation(f"{pre}.moe.act", routed * self.fe_r, down_d)
        n_up = (m.mlp_matrices - 1) * self.fe_r
        up_d = self.gemm(f"{pre}.moe.expert_up", routed, self.h, n_up, "dgrad", [act], local)
        self.gemm(f"{pre}.moe.expert_up", routed, self.h, n_up, "wgrad", [act], local)
        dispatch = self.coll(f"{pre}.moe.dispatch", ALL_TO_ALL, a2a_bytes, "ep", [up_d])
        permute = self.elem(f"{pre}.moe.permute", routed * self.h, 1, 2, [up_d, dispatch])
        router_d = self.gemm(f"{pre}.moe.router", self.T_sp, self.h, m.experts, "dgrad", [permute])
        self.gemm(f"{pre}.moe.router", self.T_sp, self.h, m.experts, "wgrad", [permute])
        return self.tp_reduce(f"{pre}.mlp.tp_reduce", router_d)

    # ---- embedding and head ------------------------------------------------------------------
    def embedding_forward(self, tag: str, dep: int | None, gate: int | None = None) -> int:
        """Vocabulary-parallel lookup (plus learned positions) and its TP reduction (§2.3)."""
        tokens_h = self.T * self.h
        size = self.w_w * tokens_h + self.w_a * tokens_h + TOKEN_ID_BYTES * self.T
        if self.model.learned_positions:
            size += self.w_w * tokens_h
        look = self.comp(f"embedding.{tag}", tokens_h, size, [dep, gate])
        return self.tp_reduce(f"embedding.{tag}.tp_reduce", look)

    def embedding_backward(self, dep: int, gate: int | None = None) -> int:
        g = self.sp_gather("embedding.bwd.sp_allgather", dep)
        tokens_h = self.T * self.h
        size = self.w_a * tokens_h + 2 * self.w_g * tokens_h + TOKEN_ID_BYTES * self.T  # scatter-add into the grad
        node = self.comp("embedding.bwd", tokens_h, size, [g, gate])
        self.wgrads.append(node)
        return node

    def head_forward(self, tag: str, x: int | None, gate: int | None = None) -> int:
        """Final norm, LM head over the vocabulary shard, vocabulary-parallel cross-entropy (§2.3)."""
        norm = self._norm(f"final_norm.{tag}", x, gate)
        inp = self.sp_gather(f"lm_head.{tag}.sp_allgather", norm)
        head = self.gemm(f"lm_head.{tag}", self.T, self.h, self.vocab_r, "fwd", [inp])
        loss = self.elem(
            f"cross_entropy.{tag}", self.T * self.vocab_r, CROSS_ENTROPY_FLOPS, 1, [head], FP32_BYTES * self.T
        )
        out = loss
        for i in range(CROSS_ENTROPY_ALL_REDUCES):
            red = self.coll(f"cross_entropy.{tag}.tp_allreduce{i}", ALL_REDUCE, FP32_BYTES * self.T, "tp", [out])
            out = red if red is not None else out
        return out

    def head_backward(self, dep: int, gate: int | None = None) -> int:
        ce = self.elem("cross_entropy.bwd", self.T * self.vocab_r, 2, 2, [dep, gate])
        head_d = self.gemm("lm_head.bwd", self.T, self.h, self.vocab_r, "dgrad", [ce])
        red = self.tp_reduce("lm_head.bwd.tp_reduce", head_d)
        regather = self._regather("lm_head.bwd.sp_regather", ce)
        self.gemm("lm_head.bwd", self.T, self.h, self.vocab_r, "wgrad", [ce, regather])
        return self._norm("final_norm.bwd", red)


# ---- parameters held by a rank (for gradient reductions and the optimizer) -----------------------
def _layer_params(st: _Stage) -> tuple[int, int]:
    """(dense, expert) parameters of one layer on one rank."""
    m, h = st.model, st.h
    bias = m.bias
    dense = h * (st.q_r + 2 * st.kv_r) + st.q_r * h + (st.q_r + 2 * st.kv_r + h if bias else 0)
    dense += 2 * st.norm_k * h
    if m.is_moe:
        per_expert = m.mlp_matrices * h * st.fe_r + ((m.mlp_matrices - 1) * st.fe_r + h if bias else 0)
        return dense + h * m.experts, (m.experts // st.e) * per_expert
    return dense + m.mlp_matrices * h * st.f_r + ((m.mlp_matrices - 1) * st.f_r + h if bias else 0), 0


def replicated_params(st: _Stage) -> int:
    """Parameters every TP rank holds in full (norms, row-parallel biases, MoE routers): their
    gradients are partial under sequence parallelism and all-reduced over TP once per step (§2.2)."""
    per_layer = 2 * st.norm_k * st.h + (2 * st.h if st.model.bias else 0)
    per_layer += st.h * st.model.experts  # the router sees the sequence shard too (Megatron-Core reduces it likewise)
    return per_layer * len(st.layers) + (st.norm_k * st.h if st.is_last else 0)


def stage_params(spec: WorkloadSpec, stage: int) -> tuple[int, int]:
    """(dense, expert) parameters held by one rank of ``stage``."""
    layout = _layout(spec)
    st = _Stage(spec, layout, stage, {})
    dense, expert = _layer_params(st)
    return dense * len(st.layers) + sum(_edge_units(st)), expert * len(st.layers)


# ---- the training step ------------------------------------------------------------------------
class _Buckets:
    """Data-parallel gradient buckets in reverse layer order (§2.4): a reduction is emitted whenever
    the parameters collected reach the bucket size, depending on the wgrads since the previous one."""

    def __init__(self, st: _Stage, group: str, limit_params: int):
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


def _schedule(kind: str, stage: int, stages: int, m: int, chunks: int = 1) -> list[tuple[str, int, int]]:
    """Units ``("F"|"B", micro-batch, chunk)`` of ``stage`` in schedule order (§3.1)."""
    if kind == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if kind == "interleaved":
        return _interleaved(stage, stages, m, chunks)
    warmup = min(stages - stage - 1, m)
    units = [("F", j, 0) for j in range(warmup)]
    for j in range(m - warmup):
        units += [("F", warmup + j, 0), ("B", j, 0)]
    return units + [("B", j, 0) for j in range(m - warmup, m)]


def _interleaved(stage: int, p: int, m: int, v: int) -> list[tuple[str, int, int]]:
    """Megatron's interleaved 1F1B (§3.1): virtual step ``k`` runs micro-batch
    ``(k div p·v)·p + k mod p`` of chunk ``(k mod p·v) div p`` forward (``v - 1 -`` that backward);
    ``min(2(p - i - 1) + (v - 1)·p, m·v)`` warm-up forwards, then forward/backward pairs, then the
    remaining backwards. Needs ``m`` to be a multiple of ``p``."""
    steps = m * v

    def unit(kind: str, k: int) -> tuple[str, int, int]:
        group = (k % (p * v)) // p
        return kind, (k // (p * v)) * p + k % p, group if kind == "F" else v - 1 - group

    warmup = min(2 * (p - stage - 1) + (v - 1) * p, steps)
    units = [unit("F", k) for k in range(warmup)]
    for k in range(steps - warmup):
        units += [unit("F", k + warmup), unit("B", k)]
    return units + [unit("B", k) for k in range(steps - warmup, steps)]


def schedule_units(spec: WorkloadSpec, stage: int) -> list[tuple[str, int, int]]:
    """The ``(F|B, micro-batch, chunk)`` order of ``stage`` under the spec's schedule (chunk 0
    unless interleaved; public for tests and tools)."""
    par = spec.parallel
    return _schedule(par.schedule, stage, par.pp, spec.micro_batches, par.virtual_stages)


def _zero3_unit_bytes(st: _Stage, params: int) -> int:
    shards = st.sizes.get("dpcp", 1)
    return math.ceil(params / shards) * st.w_w


def _p2p_tag(st: _Stage, micro_batch: int, boundary: int, backward: bool) -> int:
    """A tag unique per message of the step: the micro-batch, the virtual-stage boundary it crosses
    (``boundary`` → ``boundary + 1``) and the direction; well below ASTRA-sim's 5·10⁸ (§2.6)."""
    boundaries = st.p * st.v - 1
    return 2 * (micro_batch * boundaries + boundary) + int(backward)


def _edge_units(st: _Stage) -> tuple[int, int]:
    """Parameters of the embedding unit (first stage) and of the head unit (final norm and LM head,
    last stage) on one rank; 0 where the rank has none. With tied embeddings on a single stage the
    head is the embedding table itself."""
    m, h = st.model, st.h
    embedding = st.vocab_r * h + (m.seq_len * h if m.learned_positions else 0) if st.is_first else 0
    head = 0
    if st.is_last:
        head = st.norm_k * h + (0 if (m.tied_embeddings and st.is_first) else st.vocab_r * h)
    return embedding, head


def _build_training(st: _Stage) -> None:
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

    for unit, j, chunk in _schedule(par.schedule, st.stage, p, m, v):
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

    def __init__(self, st: _Stage, layers: list[int], unit_bytes: int, tag: str):
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


def _step_end(st: _Stage, dense: _Buckets, expert: _Buckets) -> None:
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


# ---- inference ----------------------------------------------------------------------------------
def _build_inference(st: _Stage) -> None:
    spec = st.spec
    stride = st.layout.stage_stride
    prompt = spec.prompt_len or spec.model.seq_len
    batch = spec.micro_batch
    last_offset = (st.p - 1) * stride
    for step in range(spec.decode_steps + 1):
        prefill = step == 0
        name = "prefill" if prefill else f"decode{step}"
        if prefill:
            st.set_tokens(batch, prompt)
        else:  # one new token per sequence, attending the cache plus itself
            st.set_tokens(batch, 1, kv_len=prompt + step)
        hidden_bytes = st.A
        x: int | None = None
        if st.is_first:
            if not prefill and st.p > 1:  # the tokens sampled by the last stage
                x = st.tmpl.p2p(
                    f"{name}.token.recv", send=False, size_bytes=TOKEN_ID_BYTES * batch, peer_offset=last_offset,
                    tag=2 * (step - 1) + 1,
                )  # fmt: skip
            x = st.embedding_forward(name, x)
        else:
            x = st.tmpl.p2p(f"{name}.recv", send=False, size_bytes=hidden_bytes, peer_offset=-stride, tag=2 * step)
        for layer in st.layers:
            x = st.layer_forward(layer, x, name)
        if not st.is_last:
            st.tmpl.p2p(f"{name}.send", send=True, size_bytes=hidden_bytes, peer_offset=stride, tag=2 * step, deps=[x])
            continue
        norm = st._norm(f"final_norm.{name}", x)
        head = st.gemm(f"lm_head.{name}", batch, st.h, st.vocab_r, "fwd", [norm])  # last positions only (§5.1)
        logits = st.coll(f"lm_head.{name}.tp_allgather", ALL_GATHER, batch * st.vocab_r * st.w_a, "tp", [head])
        sample = st.elem(f"sample.{name}", batch * st.vocab_r * st.t, 1, 1, [head, logits])
        if st.p > 1 and step < spec.decode_steps:
            st.tmpl.p2p(
                f"{name}.token.send", send=True, size_bytes=TOKEN_ID_BYTES * batch, peer_offset=-last_offset,
                tag=2 * step + 1, deps=[sample],
            )  # fmt: skip


# ---- the whole workload ---------------------------------------------------------------------------
def _layout(spec: WorkloadSpec) -> Layout:
    par = spec.parallel
    return Layout(tp=par.tp, cp=par.cp, dp=par.dp, pp=par.pp, ep=par.ep)


def _kinds_used(sizes: dict[str, int]) -> tuple[str, ...]:
    """The group kinds with more than one member (only those issue collectives)."""
    return tuple(kind for kind in ("tp", "cp", "dpcp", "ep", "edp", "emb") if sizes.get(kind, 1) > 1)


def build_stage(spec: WorkloadSpec, stage: int) -> RankTemplate:
    """The node template shared by every rank of pipeline ``stage`` (see the module doc)."""
    layout = _layout(spec)
    sizes = _group_sizes(spec, layout)
    st = _Stage(spec, layout, stage, sizes)
    if spec.step == "train":
        _build_training(st)
    else:
        _build_inference(st)
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


def generate_llm(
    spec: WorkloadSpec,
    prefix: str | Path,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> LlmWorkload:
    """Write ``PREFIX.{rank}.et`` for every rank and ``PREFIX.comm_groups.json``; returns what was
    written. Each pipeline stage is built once; ``progress(done, total)`` is called as ranks are written.

    Raises :class:`ChakraInputError` for a spec that cannot be generated (see :func:`check_spec`).
    """
    check_spec(spec)
    _check_generatable(spec)
    prefix = prepare_prefix(prefix)
    layout = _layout(spec)
    groups, ids = comm_groups(layout, _kinds_used(_group_sizes(spec, layout)))
    id_arrays = {kind: array.tolist() for kind, array in ids.items()}

    def group_id(kind: str, rank: int) -> int:
        return id_arrays[kind][rank]  # every kind a template uses has groups of two or more

    metadata = GlobalMetadata(version=FORMAT_VERSION)
    _record_spec(metadata, spec)
    world = layout.world_size
    per_stage = world // layout.pp
    files: list[Path] = [prefix.parent / f"{prefix.name}.{rank}.et" for rank in range(world)]
    nodes_per_stage: list[int] = []
    kinds_per_stage: list[dict[str, int]] = []
    written = 0
    for stage in range(layout.pp):
        template = build_stage(spec, stage)
        nodes_per_stage.append(len(template))
        kinds_per_stage.append(_count_kinds(template))
        frozen = template.freeze(metadata)
        ranks = range(stage * per_stage, (stage + 1) * per_stage)
        written += write_ranks(
            ((files[rank], partial(frozen.render, rank, group_id)) for rank in ranks),
            progress=None if progress is None else partial(_tell, progress, written, world),
        )
    groups_file = prefix.parent / f"{prefix.name}{COMM_GROUPS_SUFFIX}"
    if groups:
        write_comm_groups(groups_file, groups)
    removed = remove_stale_files(prefix.parent, prefix.name, set(files), None if groups else groups_file)
    notes = [note for note in (astra_group_id_note(max(groups, default=0)),) if note is not None]
    return LlmWorkload(
        prefix,
        world,
        files,
        groups_file if groups else None,
        len(groups),
        nodes_per_stage,
        kinds_per_stage,
        removed,
        notes,
    )


def _tell(progress: Callable[[int, int], None], before: int, total: int, done: int) -> None:
    progress(before + done, total)


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
