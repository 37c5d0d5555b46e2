"""ASTRA-sim text workloads (the ``.txt`` files of ASTRA-sim 1.0 and the SimAI/AICB flavour) -> Chakra ETs.

A text workload describes one training step as layers, each with a forward, an input-gradient (IG)
and a weight-gradient (WG) step: a compute time and a collective (type and size) per step. The
first line names the parallelism and may carry ``key: value`` options, the second the number of
layers; then one line per layer (``reference/upstream-behaviour.md`` §5.1)::

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 0 checkpoint_initiates: 1 2
    3
    embed -1 100 ALLREDUCE 4096 100 NONE 0 100 ALLREDUCE 8192 10
    ...

:func:`parse_text_workload` reads such a file into a :class:`TextWorkload` (every bad token is a
:class:`~chakra.errors.ChakraInputError` naming the line, the column and a fix);
:func:`convert_text` writes ``PREFIX.{npu}.et`` for every NPU plus ``PREFIX.comm_groups.json``
when some collective runs on a subgroup, and returns a :class:`TextConversion` with notes on
everything the ETs do not carry.

What each parallelism becomes follows ASTRA-sim's own workload loop (``Workload.cc``): the order
in which it computes, issues and waits for collectives becomes data dependencies, and the network
dimensions each phase's collective spans become communicator groups (``pg_name``):

* dimensions: DATA, MICRO and the DLRM kinds reduce weight gradients over all NPUs (the DLRM
  embedding, layer 0, uses all NPUs for every collective); MODEL and DISTRIBUTED_INFERENCE
  communicate forward and input gradients over all NPUs; HYBRID_DATA_MODEL and the transformer
  kinds run forward/IG collectives in the first network dimension (model parallel, blocks of
  ``M`` consecutive NPUs) and WG collectives across the others (data parallel: the NPUs with the
  same position in their block); HYBRID_MODEL_DATA the other way round. ``M`` is
  ``model_parallel_size`` or the header's ``model_parallel_NPU_group``. HYBRID_CUSTOMIZED takes
  the dimensions of each layer's own parallelism.
* order: see the ``_pass_*`` methods of :class:`~chakra.text.build.TextWorkloadBuilder`; passes follow each
  other, and a layer's forward step waits for its WG collective of the previous pass.

Differences from upstream's ``chakra_converter Text`` (Part B items 34-37): ``NONE`` and
zero-byte steps emit no collective (their dependents wait on the compute node), every kind of
ASTRA-sim is read, node ids start at 0 in every file, every node has ``is_cpu_op = false``,
collectives on a subgroup carry ``pg_name``, blank lines are ignored, and the header's layer
count must match. Compute times are written to ``duration_micros`` as µs, as upstream does
(ASTRA-sim 1.0 itself read them as cycles, SimAI as ns: ``time_unit="ns"`` converts those).

Speed: every NPU runs the same graph; only the ``pg_name`` of subgroup collectives differs. The
graph is built and serialized once; a rank's file is those bytes with the rank's ``pg_name``
attribute appended to the nodes that need one (``attr`` is the last field of ``Node``, so the
result is the canonical encoding), and ranks with the same groups share one byte string.

The package: :mod:`~chakra.text.workload` (kinds, columns, the parsed form), :mod:`~chakra.text.parse`
(reading), :mod:`~chakra.text.placement` (spans and groups), :mod:`~chakra.text.build` (the graph) and
:mod:`~chakra.text.convert` (notes and writing).

Example:
    conversion = convert_text("resnet50.txt", "out/resnet", num_npus=8)
    conversion.paths[0], conversion.nodes_per_rank, conversion.notes
"""

from __future__ import annotations

from chakra.text.convert import TIME_UNIT_NS, TIME_UNIT_US, TIME_UNITS, TextConversion, convert_text
from chakra.text.parse import parse_text, parse_text_workload
from chakra.text.workload import (
    COMM_TYPES,
    DATA,
    DISTRIBUTED_INFERENCE,
    FWD,
    HYBRID_CUSTOMIZED,
    HYBRID_DATA_MODEL,
    HYBRID_DLRM,
    HYBRID_DLRM_ENHANCED,
    HYBRID_MODEL_DATA,
    HYBRID_TRANSFORMER,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    IG,
    LAYER_COLUMNS,
    LAYER_PARALLELISMS,
    MICRO,
    MODEL,
    NO_COMM,
    PARALLELISMS,
    WG,
    Layer,
    LayerPhase,
    TextWorkload,
)
from chakra.units import NS_PER_US

__all__ = [
    "COMM_TYPES",
    "DATA",
    "DISTRIBUTED_INFERENCE",
    "FWD",
    "HYBRID_CUSTOMIZED",
    "HYBRID_DATA_MODEL",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_MODEL_DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "IG",
    "LAYER_COLUMNS",
    "LAYER_PARALLELISMS",
    "MICRO",
    "MODEL",
    "NO_COMM",
    "NS_PER_US",
    "PARALLELISMS",
    "TIME_UNITS",
    "TIME_UNIT_NS",
    "TIME_UNIT_US",
    "WG",
    "Layer",
    "LayerPhase",
    "TextConversion",
    "TextWorkload",
    "convert_text",
    "parse_text",
    "parse_text_workload",
]
