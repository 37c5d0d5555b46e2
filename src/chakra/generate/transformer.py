"""The nodes of one pipeline stage's transformer: shapes per rank, and the helpers that add nodes.

:class:`StageBuilder` holds the shapes of one rank of a pipeline stage (its share of heads, FFN,
vocabulary and tokens under tensor, sequence and context parallelism) and adds nodes to that stage's
:class:`~chakra.generate.template.RankTemplate` in program order: compute nodes with FLOPs, bytes
and a roofline duration, collectives of a group kind, and whole layers, embedding and head forward
and backward (``reference/workload-generators.md`` §1, §2.1-2.3, §2.7-2.8). The step programs that
call it are :mod:`chakra.generate.training` and :mod:`chakra.generate.inference`.

Example:
    >>> from chakra.generate.layout import Layout
    >>> from chakra.generate.specs import PRESETS, ParallelSpec, WorkloadSpec
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2))
    >>> st = StageBuilder(spec, Layout.of(spec.parallel), 0, {"tp": 2})
    >>> out = st.layer_forward(0, None, "fwd")
    >>> len(st.tmpl), st.q_r, st.f_r                   # nodes of one layer; q and FFN per TP rank
    (12, 2048, 7168)
"""

from __future__ import annotations

from collections.abc import Sequence

from chakra.generate.layout import Layout
from chakra.generate.specs import NORM_PARAMS_PER_HIDDEN, WorkloadSpec
from chakra.generate.template import RankTemplate
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from chakra.units import US_PER_S

#: Elementwise FLOPs per element (reference §1.1 conventions).
NORM_FLOPS = {"layernorm": 5, "rmsnorm": 4}
GELU_FLOPS = 8
SWIGLU_FLOPS = 5
CROSS_ENTROPY_FLOPS = 5
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


class StageBuilder:
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
    def norm(self, name: str, dep: int | None, gate: int | None = None) -> int:
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
        ln1 = self.norm(f"{pre}.ln1", x, gate)
        inp = self.sp_gather(f"{pre}.attn.sp_allgather", ln1)
        qkv = self.gemm(f"{pre}.attn.qkv", self.T, self.h, self.q_r + 2 * self.kv_r, "fwd", [inp])
        kv_block = 2 * self.T * self.kv_r * self.w_a
        kv = self.coll(f"{pre}.attn.cp_allgather", ALL_GATHER, kv_block, "cp", [qkv])
        attn = self.comp(f"{pre}.attn.core", self.attention_flops(), self._attention_bytes(), [qkv, kv])
        out = self.gemm(f"{pre}.attn.out", self.T, self.q_r, self.h, "fwd", [attn])
        red = self.tp_reduce(f"{pre}.attn.tp_reduce", out)
        res1 = self.elem(f"{pre}.residual1", self.T_sp * self.h, 1, 3, [red, x])
        ln2 = self.norm(f"{pre}.ln2", res1)
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
        ln2 = self.norm(f"{pre}.ln2", d_mlp)
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
        return self.norm(f"{pre}.ln1", red)

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
        norm = self.norm(f"final_norm.{tag}", x, gate)
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
        return self.norm("final_norm.bwd", red)
