"""The defaults of the microbenchmark parameters, in a module of their own: ``chakra generate micro``
shows them as its options' defaults at start-up without importing the families (protobuf, numpy).
:mod:`chakra.generate.micro_families` (:class:`~chakra.generate.micro_families.MicroParams`) and
:mod:`chakra.generate.micro` re-export them."""

from __future__ import annotations

# Defaults of upstream chakra_generator's flags (upstream-behaviour.md §6).
DEFAULT_NUM_NPUS = 64  # --num_npus
DEFAULT_RUNTIME_US = 5  # --default_runtime
DEFAULT_TENSOR_SIZE_BYTES = 1024  # --default_tensor_size
DEFAULT_COMM_SIZE_BYTES = 65536  # --default_comm_size
#: Nodes in ``comp_chain`` unless asked otherwise: long enough to show a chain, short enough to read.
DEFAULT_CHAIN_LENGTH = 8
