"""The FlexFlow front end: FlexFlow's task graphs and strategies -> Chakra ETs, one per device.

FlexFlow cannot be built here (a CMake build around Legion that needs CUDA, cuDNN and NCCL and
fetches its dependencies at configure time), so this front end reads the files FlexFlow writes:

* the simulator's task graph (``--taskgraph FILE``; FlexFlow's 2021 builds): every simulated task
  with its start and end (ms), no devices and no bytes;
* the strategy (``--export-strategy FILE``; text or protobuf) and the parallel computation graph
  (``--compgraph FILE --include-costs-dot-graph``): where each operator runs, and its bytes;
* upstream Chakra's labelled task graph (what its removed ``flexflow2chakra`` converter read):
  devices, transfers and bytes in the labels, durations but no schedule.

The modules: :mod:`~chakra.flexflow.dot` (the DOT FlexFlow writes, every error with line and
column), :mod:`~chakra.flexflow.taskgraph` (both task graph forms), :mod:`~chakra.flexflow.strategy`,
:mod:`~chakra.flexflow.compgraph`, :mod:`~chakra.flexflow.placement` (devices and bytes, inferred
where the task graph does not say them) and :mod:`~chakra.flexflow.convert` (the ETs and the report).

Example:
    result = convert_flexflow("mlp.taskgraph.dot", "out/mlp", strategy="mlp.strategy")
"""

from __future__ import annotations

from chakra.flexflow.convert import FLEXFLOW_FIDELITY_TOLERANCE, FlexFlowConversion, FlexFlowResult, convert_flexflow

__all__ = ["FLEXFLOW_FIDELITY_TOLERANCE", "FlexFlowConversion", "FlexFlowResult", "convert_flexflow"]
