"""What an ASTRA-sim text workload is: its parallelism kinds, comm types and layer columns, and the
parsed form (:class:`TextWorkload` of :class:`Layer` lines, each with three :class:`LayerPhase` steps).

The format is described in :mod:`chakra.text`; :mod:`chakra.text.parse` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER

# Parallelism kinds, spelled as in the first line of a workload (ASTRA-sim's ``decode_parallelsim``).
MICRO = "MICRO"
DATA = "DATA"
MODEL = "MODEL"
HYBRID_DATA_MODEL = "HYBRID_DATA_MODEL"
HYBRID_MODEL_DATA = "HYBRID_MODEL_DATA"
HYBRID_DLRM = "HYBRID_DLRM"
HYBRID_DLRM_ENHANCED = "HYBRID_DLRM_ENHANCED"
HYBRID_TRANSFORMER = "HYBRID_TRANSFORMER"
HYBRID_TRANSFORMER_FWD_IN_BCKWD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
HYBRID_CUSTOMIZED = "HYBRID_CUSTOMIZED"
DISTRIBUTED_INFERENCE = "DISTRIBUTED_INFERENCE"

PARALLELISMS = (
    MICRO,
    DATA,
    MODEL,
    HYBRID_DATA_MODEL,
    HYBRID_MODEL_DATA,
    HYBRID_DLRM,
    HYBRID_DLRM_ENHANCED,
    HYBRID_TRANSFORMER,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    HYBRID_CUSTOMIZED,
    DISTRIBUTED_INFERENCE,
)
#: What a HYBRID_CUSTOMIZED layer may name as its own parallelism (everything but itself).
LAYER_PARALLELISMS = tuple(kind for kind in PARALLELISMS if kind != HYBRID_CUSTOMIZED)
DLRM_KINDS = (HYBRID_DLRM, HYBRID_DLRM_ENHANCED)
TRANSFORMER_KINDS = (HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD)

#: Comm-type column text -> ``CollectiveCommType`` (et_def.proto); ``NONE`` means no collective.
COMM_TYPES = {"ALLREDUCE": ALL_REDUCE, "ALLTOALL": ALL_TO_ALL, "ALLGATHER": ALL_GATHER, "REDUCESCATTER": REDUCE_SCATTER}
NO_COMM = "NONE"

#: The twelve columns of a layer line, in order (upstream-behaviour.md §5.1).
LAYER_COLUMNS = (
    "layer name",
    "reserved",
    "forward compute time",
    "forward comm type",
    "forward comm size",
    "input-gradient compute time",
    "input-gradient comm type",
    "input-gradient comm size",
    "weight-gradient compute time",
    "weight-gradient comm type",
    "weight-gradient comm size",
    "weight-update time",
)

#: Header option keys (lower case) that :class:`TextWorkload` offers as properties.
MODEL_PARALLEL_KEY = "model_parallel_npu_group"
DLRM_KEY = "dlrm_last_bottom_layer"

#: The three steps of a layer (forward, input gradient, weight gradient), and how notes name them.
FWD, IG, WG = "fwd", "ig", "wg"
PHASE_LABEL = {FWD: "forward", IG: "input-gradient", WG: "weight-gradient"}


@dataclass(frozen=True)
class LayerPhase:
    """One step of a layer: compute time (µs, written to ``duration_micros``) and its collective.

    ``comm_type`` is the column text (``ALLREDUCE``, ..., ``NONE``), ``comm_size_bytes`` its size.
    """

    compute_us: int
    comm_type: str
    comm_size_bytes: int


@dataclass(frozen=True)
class Layer:
    """One layer line. ``line`` is its 1-based line number; ``parallelism`` is the layer's own
    parallelism (HYBRID_CUSTOMIZED only, else ``None``); ``update_us`` the weight-update time."""

    name: str
    line: int
    reserved: int
    fwd: LayerPhase
    ig: LayerPhase
    wg: LayerPhase
    update_us: int
    parallelism: str | None = None

    def phase(self, which: str) -> LayerPhase:
        return {FWD: self.fwd, IG: self.ig, WG: self.wg}[which]


@dataclass
class TextWorkload:
    """A parsed text workload.

    ``options`` holds the header's integer options by lower-case name (``model_parallel_npu_group``,
    ``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``pp_comm``, ``dlrm_last_bottom_layer``);
    ``unknown_options`` the others as written (name -> value text). ``checkpoints`` and
    ``checkpoint_initiates`` are layer indices (0-based, in file order).
    """

    path: Path
    text: str
    parallelism: str
    layers: list[Layer]
    header_line: int = 1
    options: dict[str, int] = field(default_factory=dict)
    unknown_options: dict[str, str] = field(default_factory=dict)
    checkpoints: tuple[int, ...] = ()
    checkpoint_initiates: tuple[int, ...] = ()

    @property
    def model_parallel_npu_group(self) -> int | None:
        return self.options.get(MODEL_PARALLEL_KEY)

    @property
    def dlrm_last_bottom_layer(self) -> int | None:
        return self.options.get(DLRM_KEY)
