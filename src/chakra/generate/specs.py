"""What a generated LLM workload describes: the model, its parallelism, the hardware and the step.

Plain dataclasses with the closed forms every generator and test needs (parameter counts, padded
vocabulary, tokens per micro-batch), well-known presets, and :func:`load_spec` for a YAML/JSON spec
file. Symbols follow ``reference/workload-generators.md`` §0: ``L`` layers, ``h`` hidden, ``a``
heads, ``g`` KV heads, ``f`` FFN size, ``V`` vocabulary, ``s`` sequence, ``t c d p e`` the tensor,
context, data, pipeline and expert sizes.

Example:
    >>> spec = WorkloadSpec(PRESETS["gpt3-175b"], ParallelSpec(tp=8, pp=8, dp=32), global_batch=1536)
    >>> spec.parallel.world_size, spec.micro_batches
    (2048, 48)
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError

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
    global_batch: int = 0  # 0: one micro-batch per pipeline (m = 1)
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


def check_spec(spec: WorkloadSpec, *, path: str | Path | None = None) -> None:
    """Raise :class:`ChakraInputError` for a spec that cannot be generated, saying which value and why."""

    def bad(message: str, hint: str) -> None:
        raise ChakraInputError(message, path=path, hint=hint)

    m, par = spec.model, spec.parallel
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len"):
        if getattr(m, name) < 1:
            bad(f"model.{name} must be at least 1, not {getattr(m, name)}", "give a positive size")
    for name in ("tp", "pp", "dp", "cp", "ep"):
        if getattr(par, name) < 1:
            bad(f"parallel.{name} must be at least 1, not {getattr(par, name)}", "1 turns a parallelism off")
    if m.norm not in NORM_PARAMS_PER_HIDDEN:
        bad(f"model.norm {m.norm!r} is not one of {', '.join(NORM_PARAMS_PER_HIDDEN)}", "pick one of them")
    if m.heads % m.kv_heads:
        bad(f"{m.heads} heads do not divide into {m.kv_heads} KV heads", "kv_heads must divide heads")
    if m.kv_heads % par.tp and par.tp % m.kv_heads:
        bad(
            f"{m.kv_heads} KV heads neither split over nor replicate evenly on tp={par.tp}",
            "tp must divide kv_heads, or kv_heads divide tp",
        )
    if m.heads % par.tp:
        bad(f"{m.heads} heads do not split over tp={par.tp}", "tp must divide the number of heads")
    if m.ffn_per_expert % par.tp or m.ffn % par.tp:
        bad(f"the FFN size does not split over tp={par.tp}", "tp must divide ffn")
    if m.seq_len % par.cp or (par.sp and (m.seq_len // par.cp) % par.tp):
        bad(f"sequence {m.seq_len} does not split over cp={par.cp} (and tp={par.tp} with sp)", "pick divisors")
    if par.cp > 1 and m.seq_len % (2 * par.cp):
        bad(
            f"sequence {m.seq_len} does not cut into 2·cp = {2 * par.cp} chunks for causal load balancing",
            "pick a sequence length that is a multiple of 2·cp",
        )
    if par.ep > 1 and not m.is_moe:
        bad(f"ep={par.ep} needs a mixture-of-experts model", "set model.experts or ep=1")
    if m.is_moe and (m.experts % par.ep or (par.dp * par.cp) % par.ep):
        bad(f"ep={par.ep} must divide the experts ({m.experts}) and dp·cp ({par.dp * par.cp})", "pick a divisor")
    if m.is_moe and not 1 <= m.top_k <= m.experts:
        bad(f"top_k={m.top_k} must be between 1 and the experts ({m.experts})", "pick a smaller top_k")
    if par.schedule not in SCHEDULES:
        bad(f"parallel.schedule {par.schedule!r} is not one of {', '.join(SCHEDULES)}", "use 1f1b or gpipe")
    if par.schedule == "interleaved" and (par.virtual_stages < 2 or par.pp < 2):
        bad(
            f"the interleaved schedule needs pp >= 2 and virtual_stages >= 2, not {par.pp} and {par.virtual_stages}",
            "give virtual_stages (--virtual-stages) 2 or more, or use 1f1b",
        )
    if par.schedule != "interleaved" and par.virtual_stages != 1:
        bad(f"virtual_stages={par.virtual_stages} needs schedule interleaved", "set schedule: interleaved")
    if par.schedule == "interleaved" and spec.step == "train" and spec.micro_batches % par.pp:
        bad(
            f"the interleaved schedule needs the micro-batches ({spec.micro_batches}) to be a multiple of pp",
            "pick a global batch giving m = k·pp",
        )
    if par.zero not in ZERO_STAGES:
        bad(f"parallel.zero {par.zero} is not a ZeRO stage", "use 0, 1, 2 or 3")
    if spec.step not in STEPS:
        bad(f"step {spec.step!r} is not one of {', '.join(STEPS)}", "use train or inference")
    if spec.recompute not in RECOMPUTE:
        bad(f"recompute {spec.recompute!r} is not one of {', '.join(RECOMPUTE)}", "use none, selective or full")
    for name in ("dtype", "grad_dtype"):
        if getattr(spec, name) not in DTYPE_BYTES:
            bad(f"{name} {getattr(spec, name)!r} is not one of {', '.join(DTYPE_BYTES)}", "use bf16, fp16, fp32 ...")
    virtual = spec.layers_of_virtual_stage()
    count = par.pp * par.virtual_stages
    if len(virtual) != count or sum(virtual) != m.layers or min(virtual) < 0:
        bad(f"layers_per_stage {virtual} must list {count} stages adding up to {m.layers} layers", "fix the split")
    if not par.layers_per_stage and m.layers < count:
        bad(f"{m.layers} layers do not fill {count} pipeline stages", "use fewer stages or give layers_per_stage")
    if spec.micro_batch < 1:
        bad(f"micro_batch must be at least 1, not {spec.micro_batch}", "give sequences per micro-batch")
    if spec.global_batch and spec.global_batch % (spec.micro_batch * par.dp):
        bad(
            f"global_batch {spec.global_batch} is not a multiple of micro_batch x dp = {spec.micro_batch * par.dp}",
            "pick a global batch that splits into whole micro-batches",
        )
    if spec.global_batch and spec.global_batch < spec.micro_batch * par.dp:
        bad(f"global_batch {spec.global_batch} is smaller than micro_batch x dp", "raise the global batch")
    if spec.step == "inference" and par.zero:
        bad("ZeRO does not apply to inference", "set zero to 0")
    if spec.dp_bucket_params < 0:
        bad(f"dp_bucket_params cannot be negative ({spec.dp_bucket_params})", "0 picks Megatron-Core's size")
    if spec.decode_steps < 0 or spec.prompt_len < 0:
        bad("decode_steps and prompt_len cannot be negative", "give 0 or more")


#: Spec-file sections and the dataclass each fills.
_SECTIONS = {"parallel": ParallelSpec, "hardware": HardwareSpec}


def _build(cls: type, values: dict[str, Any], where: str, path: Path) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ChakraInputError(
            f"unknown key{'s' if len(unknown) > 1 else ''} in {where}: {', '.join(unknown)}",
            path=path,
            hint=f"known keys: {', '.join(sorted(known))}",
        )
    if "layers_per_stage" in values:
        values = {**values, "layers_per_stage": tuple(values["layers_per_stage"])}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ChakraInputError(f"{where}: {exc}", path=path, hint="check the section's keys") from None


def load_spec(path: str | Path, *, check: bool = True, **overrides: Any) -> WorkloadSpec:
    """Read a YAML or JSON spec file. ``model`` is a preset name or a mapping (optionally with
    ``preset:`` plus the keys it changes); ``hardware`` a preset name or a mapping; the other keys
    are :class:`WorkloadSpec` fields. ``overrides`` replace top-level fields after reading; with
    ``check=False`` the result is not checked (a caller changing it further checks it then).

    Example file::

        model: {preset: llama3-70b, seq_len: 4096}
        parallel: {tp: 8, pp: 4, dp: 16, schedule: 1f1b}
        hardware: h100
        global_batch: 1024
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ChakraInputError(f"cannot read the spec: {exc.strerror}", path=path) from None
    data = _parse_spec_text(text, path)
    if not isinstance(data, dict):
        raise ChakraInputError("a spec file holds a mapping at the top", path=path, hint="see chakra generate llm -h")
    data = dict(data)
    model = data.pop("model", None)
    if model is None:
        raise ChakraInputError("the spec has no model", path=path, hint="add model: PRESET or a model mapping")
    spec_values: dict[str, Any] = {"model": model_from(model, path)}
    for key, cls in _SECTIONS.items():
        if key in data:
            value = data.pop(key)
            if key == "hardware" and isinstance(value, str):
                spec_values[key] = hardware_from(value, path)
            elif isinstance(value, dict):
                spec_values[key] = _build(cls, value, key, path)
            else:
                raise ChakraInputError(f"{key} must be a mapping", path=path, hint=f"{key}: {{...}}")
    spec = _build(WorkloadSpec, {**spec_values, **data}, "the spec", path)
    spec = dataclasses.replace(spec, **overrides)
    if check:
        check_spec(spec, path=path)
    return spec


def _parse_spec_text(text: str, path: Path) -> Any:
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ChakraInputError(f"invalid JSON at line {exc.lineno}: {exc.msg}", path=path) from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ChakraInputError(f"invalid YAML{where}", path=path, hint="check indentation and colons") from None


def model_from(value: Any, path: str | Path | None = None) -> ModelSpec:
    """A preset name, or a mapping of :class:`ModelSpec` fields (``preset:`` starts from a preset)."""
    if isinstance(value, str):
        if value not in PRESETS:
            raise ChakraInputError(f"unknown model preset {value!r}", path=path, hint=f"presets: {', '.join(PRESETS)}")
        return PRESETS[value]
    if not isinstance(value, dict):
        raise ChakraInputError("model must be a preset name or a mapping", path=path, hint="model: llama3-8b")
    values = dict(value)
    preset = values.pop("preset", None)
    if preset is not None:
        base = model_from(preset, path)
        return _build(ModelSpec, {**dataclasses.asdict(base), **values}, "model", Path(path or "spec"))
    values.setdefault("name", "custom")
    return _build(ModelSpec, values, "model", Path(path or "spec"))


def hardware_from(name: str, path: str | Path | None = None) -> HardwareSpec:
    """A hardware preset by name."""
    if name not in HARDWARE_PRESETS:
        raise ChakraInputError(
            f"unknown hardware preset {name!r}", path=path, hint=f"presets: {', '.join(HARDWARE_PRESETS)}"
        )
    return HARDWARE_PRESETS[name]
