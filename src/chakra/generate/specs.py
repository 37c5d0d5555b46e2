"""What a generated LLM workload describes: the model, its parallelism, the hardware and the step.

Plain dataclasses with the closed forms every generator and test needs (parameter counts, padded
vocabulary, tokens per micro-batch), well-known presets, and :func:`check_spec`, which refuses a spec
that cannot be generated, naming each key and value involved. Reading spec files and overrides is
:mod:`chakra.generate.spec_input`. Symbols follow ``reference/workload-generators.md`` §0: ``L``
layers, ``h`` hidden, ``a`` heads, ``g`` KV heads, ``f`` FFN size, ``V`` vocabulary, ``s`` sequence,
``t c d p e`` the tensor, context, data, pipeline and expert sizes.

Example:
    >>> spec = WorkloadSpec(PRESETS["gpt3-175b"], ParallelSpec(tp=8, pp=8, dp=32), global_batch=1536)
    >>> spec.parallel.world_size, spec.micro_batches
    (2048, 48)
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from chakra.errors import ChakraInputError, PathLike

#: Bytes per element of the dtypes a spec may name (reference §0).
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}

#: Megatron-LM pads the vocabulary to a multiple of 128 x TP (reference §2.3).
VOCAB_PAD_MULTIPLE = 128

#: Norm kinds and their parameters per norm: LayerNorm has a scale and a bias, RMSNorm a scale.
NORM_PARAMS_PER_HIDDEN = {"layernorm": 2, "rmsnorm": 1}

SCHEDULES = ("1f1b", "gpipe", "interleaved")
RECOMPUTE = ("none", "selective", "full")
STEPS = ("train", "inference")
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer. ``ffn`` is the MLP inner size (per expert for MoE when
    ``expert_ffn`` is not given); ``gated_mlp`` means SwiGLU/GeGLU (three MLP matrices, not two)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    head_dim: int = 0  # 0: hidden / heads
    gated_mlp: bool = False
    norm: str = "layernorm"
    tied_embeddings: bool = False
    learned_positions: bool = False
    bias: bool = False
    experts: int = 0  # 0: dense MLP in every layer
    top_k: int = 2
    expert_ffn: int = 0  # 0: ffn

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """``q = a·d_h``."""
        return self.heads * self.d_head

    @property
    def kv_dim(self) -> int:
        """``kv = g·d_h``."""
        return self.kv_heads * self.d_head

    @property
    def mlp_matrices(self) -> int:
        """``n_mlp``: 3 for a gated MLP, 2 otherwise."""
        return 3 if self.gated_mlp else 2

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def ffn_per_expert(self) -> int:
        return self.expert_ffn or self.ffn

    def padded_vocab(self, tp: int) -> int:
        """``V' = ceil(V / (128·t))·128·t`` (Megatron's padding)."""
        step = VOCAB_PAD_MULTIPLE * tp
        return math.ceil(self.vocab / step) * step

    def layer_matmul_params(self) -> int:
        """Weights of one layer that take part in a GEMM per token (MoE: the ``top_k`` active experts
        and the router)."""
        attention = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        if self.is_moe:
            mlp = self.top_k * self.mlp_matrices * self.hidden * self.ffn_per_expert + self.hidden * self.experts
        else:
            mlp = self.mlp_matrices * self.hidden * self.ffn
        return attention + mlp

    def matmul_params(self, tp: int = 1) -> int:
        """``N_mm``: the layers' GEMM weights plus the LM head (with the vocabulary padded for ``tp``)."""
        return self.layers * self.layer_matmul_params() + self.padded_vocab(tp) * self.hidden

    def layer_params(self) -> int:
        """Every parameter of one layer (all experts, biases, norms)."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        attention = h * (q + 2 * kv) + q * h + (q + 2 * kv + h if self.bias else 0)
        if self.is_moe:
            f = self.ffn_per_expert
            mlp = self.experts * (self.mlp_matrices * h * f + ((self.mlp_matrices - 1) * f + h if self.bias else 0))
            mlp += h * self.experts
        else:
            mlp = self.mlp_matrices * h * self.ffn + ((self.mlp_matrices - 1) * self.ffn + h if self.bias else 0)
        return attention + mlp + 2 * NORM_PARAMS_PER_HIDDEN[self.norm] * h

    def total_params(self) -> int:
        """``N``: every parameter, the unpadded embedding once (twice when untied), learned positions."""
        embedding = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        final_norm = NORM_PARAMS_PER_HIDDEN[self.norm] * self.hidden
        return self.layers * self.layer_params() + embedding + positions + final_norm


@dataclass(frozen=True)
class ParallelSpec:
    """How the model is split. ``layers_per_stage`` (optional) overrides the even split (with
    ``virtual_stages`` > 1: one entry per virtual stage, in virtual-stage order); ``ep`` is carved
    out of ``dp·cp`` (Megatron-Core); ``zero`` is the ZeRO stage (3 = FSDP full shard);
    ``virtual_stages`` is the model chunks per pipeline rank of the interleaved schedule."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    sp: bool = False
    zero: int = 0
    schedule: str = "1f1b"
    virtual_stages: int = 1
    layers_per_stage: tuple[int, ...] = ()
    #: Megatron re-gathers a sequence-parallel GEMM input for the weight gradient (reference §2.2).
    sp_regather: bool = True

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp


@dataclass(frozen=True)
class HardwareSpec:
    """Peak compute (FLOP/s) and memory bandwidth (B/s) for the roofline durations."""

    name: str
    peak_flops: float
    mem_bw_bytes_per_s: float


@dataclass(frozen=True)
class WorkloadSpec:
    """A whole workload: model, parallelism, hardware and step. ``micro_batch`` and
    ``global_batch`` are in sequences; ``causal`` counts the attention scores actually computed
    (κ = (s+1)/2s) rather than all of them (κ = 1)."""

    model: ModelSpec
    parallel: ParallelSpec = field(default_factory=ParallelSpec)
    hardware: HardwareSpec | None = None
    step: str = "train"
    micro_batch: int = 1
    global_batch: int | None = None  # None: one micro-batch per pipeline (m = 1)
    dtype: str = "bf16"
    grad_dtype: str = "fp32"  # Megatron-LM reduces gradients in fp32 (reference §2.4)
    recompute: str = "none"
    flash_attention: bool = True
    causal: bool = True
    dp_bucket_params: int = 0  # 0: Megatron-Core's max(4e7, 1e6·DP) (reference §2.4)
    prompt_len: int = 0  # inference: 0 = the model's seq_len
    decode_steps: int = 4  # inference: decode steps after the prefill

    @property
    def micro_batches(self) -> int:
        """``m = B / (b·d)``."""
        if not self.global_batch:
            return 1
        return self.global_batch // (self.micro_batch * self.parallel.dp)

    @property
    def act_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def grad_bytes(self) -> int:
        return DTYPE_BYTES[self.grad_dtype]

    def kappa(self, seq_len: int) -> float:
        """The computed fraction of the score matrix (reference §0)."""
        return (seq_len + 1) / (2 * seq_len) if self.causal else 1.0

    def layers_of_virtual_stage(self) -> list[int]:
        """Layers of each virtual stage ``c·p + i`` (chunk ``c`` of pipeline rank ``i``; the stages
        themselves without interleaving): the explicit split, else even with the remainder on the
        early ones."""
        count = self.parallel.pp * self.parallel.virtual_stages
        if self.parallel.layers_per_stage:
            return list(self.parallel.layers_per_stage)
        base, extra = divmod(self.model.layers, count)
        return [base + (1 if i < extra else 0) for i in range(count)]

    def layers_of_stage(self) -> list[int]:
        """Layers held by each pipeline rank (all its chunks)."""
        p = self.parallel.pp
        virtual = self.layers_of_virtual_stage()
        return [sum(virtual[stage::p]) for stage in range(p)]


def _h100() -> HardwareSpec:
    # NVIDIA H100 SXM datasheet: 989 TFLOP/s dense BF16, 3.35 TB/s HBM3
    return HardwareSpec("h100", 989e12, 3.35e12)


HARDWARE_PRESETS = {
    "h100": _h100(),
    # NVIDIA A100 SXM 80 GB datasheet: 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e
    "a100": HardwareSpec("a100", 312e12, 2.039e12),
    # NVIDIA B200 datasheet: 2.25 PFLOP/s dense BF16, 8 TB/s HBM3e
    "b200": HardwareSpec("b200", 2.25e15, 8e12),
}

#: Published shapes (reference §1.6); the sequence length is the one each was trained with.
PRESETS = {
    "gpt3-175b": ModelSpec(
        "gpt3-175b", layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=50257, seq_len=2048,
        norm="layernorm", tied_embeddings=True, learned_positions=True, bias=True,
    ),
    "llama3-8b": ModelSpec(
        "llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq_len=8192,
        gated_mlp=True, norm="rmsnorm",
    ),
    "llama3-70b": ModelSpec(
        "llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, seq_len=8192,
        gated_mlp=True, norm="rmsnorm",
    ),
    "llama3-405b": ModelSpec(
        "llama3-405b", layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256, seq_len=8192,
        gated_mlp=True, norm="rmsnorm",
    ),
    "mixtral-8x7b": ModelSpec(
        "mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, seq_len=4096,
        gated_mlp=True, norm="rmsnorm", experts=8, top_k=2,
    ),
}  # fmt: skip


class KeyNames:
    """How a message names a spec key and its value: ``parallel.tp = 3`` as in a spec file, or the
    label of the override that set it (``--tp 3``, ``overrides['parallel.tp'] = 3``)."""

    def __init__(self, labels: Mapping[str, str] | None = None):
        self.labels = labels or {}

    def __call__(self, key: str, value: object) -> str:
        shown = list(value) if isinstance(value, tuple) else value
        label = self.labels.get(key)
        return f"{key} = {shown!r}" if label is None else f"{label} {shown!r}"


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice nearest to ``word``, case aside (``"1F1B"`` finds ``"1f1b"``), or None when none is near."""
    by_folded = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), sorted(by_folded), n=1)
    return by_folded[close[0]] if close else None


def refuse_choice(say: KeyNames, key: str, value: str, allowed: Iterable[str], path: PathLike | None) -> None:
    """Raise for ``value`` of ``key`` unless it is one of ``allowed``, suggesting the closest."""
    allowed = tuple(allowed)
    if value in allowed:
        return
    close = closest(value, allowed)
    raise ChakraInputError(
        f"{say(key, value)} is not one of {', '.join(allowed)}",
        path=path,
        hint=f"did you mean {close!r}?" if close else "pick one of them",
    )


def check_spec(spec: WorkloadSpec, *, path: PathLike | None = None, labels: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ChakraInputError` for a spec that cannot be generated, naming each key and value
    involved. ``labels`` say how to name keys an override set (``{"parallel.tp": "--tp"}``).

    Example:
        >>> check_spec(WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(pp=0)), labels={"parallel.pp": "--pp"})
        Traceback (most recent call last):
        chakra.errors.ChakraInputError: --pp 0 must be at least 1 (hint: 1 turns it off)
    """
    say = KeyNames(labels)

    def bad(message: str, hint: str) -> None:
        raise ChakraInputError(message, path=path, hint=hint)

    m, par, hw = spec.model, spec.parallel, spec.hardware
    at_least_one = {
        "model.layers": m.layers, "model.hidden": m.hidden, "model.heads": m.heads, "model.kv_heads": m.kv_heads,
        "model.ffn": m.ffn, "model.vocab": m.vocab, "model.seq_len": m.seq_len,
        "parallel.tp": par.tp, "parallel.pp": par.pp, "parallel.dp": par.dp, "parallel.cp": par.cp,
        "parallel.ep": par.ep, "parallel.virtual_stages": par.virtual_stages, "micro_batch": spec.micro_batch,
    }  # fmt: skip
    for key, value in at_least_one.items():
        if value < 1:
            bad(f"{say(key, value)} must be at least 1", "1 turns it off" if "parallel." in key else "give a size")
    not_negative = {
        "model.head_dim": m.head_dim, "model.experts": m.experts, "model.expert_ffn": m.expert_ffn,
        "dp_bucket_params": spec.dp_bucket_params, "prompt_len": spec.prompt_len, "decode_steps": spec.decode_steps,
    }  # fmt: skip
    for key, value in not_negative.items():
        if value < 0:
            bad(f"{say(key, value)} cannot be negative", "give 0 or more (0 picks the default)")
    if hw is not None:
        rates = {"hardware.peak_flops": hw.peak_flops, "hardware.mem_bw_bytes_per_s": hw.mem_bw_bytes_per_s}
        for key, rate in rates.items():
            if not (math.isfinite(rate) and rate > 0):
                bad(f"{say(key, rate)} must be a positive number", "give the datasheet's peak per second")
    refuse_choice(say, "model.norm", m.norm, NORM_PARAMS_PER_HIDDEN, path)
    refuse_choice(say, "parallel.schedule", par.schedule, SCHEDULES, path)
    refuse_choice(say, "step", spec.step, STEPS, path)
    refuse_choice(say, "recompute", spec.recompute, RECOMPUTE, path)
    refuse_choice(say, "dtype", spec.dtype, DTYPE_BYTES, path)
    refuse_choice(say, "grad_dtype", spec.grad_dtype, DTYPE_BYTES, path)
    if par.zero not in ZERO_STAGES:
        bad(f"{say('parallel.zero', par.zero)} is not a ZeRO stage", "use 0, 1, 2 or 3")
    heads, kv_heads, tp = say("model.heads", m.heads), say("model.kv_heads", m.kv_heads), say("parallel.tp", par.tp)
    if not m.head_dim and m.hidden % m.heads:
        bad(f"{say('model.hidden', m.hidden)} does not split into {heads}", "give head_dim, or a multiple of heads")
    if m.heads % m.kv_heads:
        bad(f"{heads} do not divide into {kv_heads} (KV heads)", "kv_heads must divide heads")
    if m.heads % par.tp:
        bad(f"{heads} do not split over {tp}", "tp must divide the heads")
    if m.kv_heads % par.tp and par.tp % m.kv_heads:
        bad(
            f"{kv_heads} (KV heads) neither split over nor replicate evenly on {tp}",
            "tp must divide kv_heads, or kv_heads divide tp",
        )
    for key, size in (("model.ffn", m.ffn), ("model.expert_ffn", m.ffn_per_expert)):
        if size % par.tp:
            bad(f"{say(key, size)} (the FFN size) does not split over {tp}", "tp must divide ffn")
    seq, cp = say("model.seq_len", m.seq_len), say("parallel.cp", par.cp)
    if m.seq_len % par.cp:
        bad(f"{seq} does not split over {cp}", "cp must divide the sequence length")
    if par.sp and (m.seq_len // par.cp) % par.tp:
        bad(f"{seq} does not split over {cp} and {tp} (sequence parallelism)", "pick divisors")
    if par.cp > 1 and m.seq_len % (2 * par.cp):
        bad(
            f"{seq} does not cut into 2·cp = {2 * par.cp} chunks for causal load balancing",
            "pick a sequence length that is a multiple of 2·cp",
        )
    ep = say("parallel.ep", par.ep)
    if par.ep > 1 and not m.is_moe:
        bad(f"{ep} needs a mixture-of-experts model", "set model.experts or ep=1")
    if m.is_moe and (m.experts % par.ep or (par.dp * par.cp) % par.ep):
        bad(f"{ep} must divide {say('model.experts', m.experts)} and dp·cp = {par.dp * par.cp}", "pick a divisor")
    if m.is_moe and not 1 <= m.top_k <= m.experts:
        bad(f"{say('model.top_k', m.top_k)} must be between 1 and the experts ({m.experts})", "pick a smaller top_k")
    schedule, virtual = say("parallel.schedule", par.schedule), say("parallel.virtual_stages", par.virtual_stages)
    if par.schedule == "interleaved" and (par.virtual_stages < 2 or par.pp < 2):
        bad(
            f"{schedule} needs pp >= 2 and virtual_stages >= 2, not {say('parallel.pp', par.pp)} and {virtual}",
            "give virtual_stages (--virtual-stages) 2 or more, or use 1f1b",
        )
    if par.schedule != "interleaved" and par.virtual_stages != 1:
        bad(f"{virtual} needs schedule interleaved", "set schedule: interleaved")
    batch = say("global_batch", spec.global_batch)
    if spec.global_batch is not None and spec.global_batch < 1:
        bad(f"{batch} must be at least 1", "leave it out for one micro-batch per pipeline")
    if spec.global_batch and spec.global_batch % (spec.micro_batch * par.dp):
        bad(
            f"{batch} is not a multiple of micro_batch x dp = {spec.micro_batch * par.dp}",
            "pick a global batch that splits into whole micro-batches",
        )
    if spec.global_batch and spec.global_batch < spec.micro_batch * par.dp:
        bad(f"{batch} is smaller than micro_batch x dp = {spec.micro_batch * par.dp}", "raise the global batch")
    if par.schedule == "interleaved" and spec.step == "train" and spec.micro_batches % par.pp:
        bad(
            f"{schedule} needs the micro-batches ({spec.micro_batches}) to be a multiple of pp = {par.pp}",
            "pick a global batch giving m = k·pp",
        )
    stages = spec.layers_of_virtual_stage()
    count = par.pp * par.virtual_stages
    split = say("parallel.layers_per_stage", par.layers_per_stage)
    if par.layers_per_stage and (len(stages) != count or sum(stages) != m.layers or min(stages) < 0):
        bad(f"{split} must list {count} stages adding up to {m.layers} layers", "fix the split")
    if not par.layers_per_stage and m.layers < count:
        bad(
            f"{say('model.layers', m.layers)} do not fill {count} pipeline stages",
            "use fewer stages or give layers_per_stage",
        )
    if spec.step == "inference" and par.zero:
        bad(f"{say('parallel.zero', par.zero)}: ZeRO does not apply to inference", "set zero to 0")
