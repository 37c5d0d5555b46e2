"""Which NPUs each phase's collective spans, per parallelism (ASTRA-sim's ``involved_dimensions``), and
the communicator groups that makes: the model-parallel size ``M`` (:func:`first_dimension`), the concrete
:class:`NpuPlacement` of a span (all NPUs, blocks of ``M``, strides of ``M``, a single NPU) and the groups of
the placements a graph uses (:func:`placement_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass

from chakra.errors import ChakraInputError
from chakra.text.parse import line_error
from chakra.text.workload import (
    DATA,
    DISTRIBUTED_INFERENCE,
    HYBRID_DATA_MODEL,
    HYBRID_DLRM,
    HYBRID_DLRM_ENHANCED,
    HYBRID_MODEL_DATA,
    HYBRID_TRANSFORMER,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    MICRO,
    MODEL,
    TRANSFORMER_KINDS,
    TextWorkload,
)

# The NPUs a phase's collective spans (ASTRA-sim's ``involved_dimensions``): all of them, no network
# dimension (ASTRA-sim finishes such a collective at once), the first dimension (blocks of M
# consecutive NPUs) or the other dimensions (NPUs with the same position in their block).
SPAN_ALL, SPAN_NOWHERE, SPAN_FIRST, SPAN_REST = "all", "nowhere", "first", "rest"
#: Per parallelism: the span of the (forward, input-gradient, weight-gradient) collectives
#: (``Workload::decode_involved_dimensions``).
SPANS: dict[str, tuple[str, str, str]] = {
    MICRO: (SPAN_NOWHERE, SPAN_NOWHERE, SPAN_ALL),
    DATA: (SPAN_NOWHERE, SPAN_NOWHERE, SPAN_ALL),
    HYBRID_DLRM: (SPAN_NOWHERE, SPAN_NOWHERE, SPAN_ALL),
    HYBRID_DLRM_ENHANCED: (SPAN_NOWHERE, SPAN_NOWHERE, SPAN_ALL),
    MODEL: (SPAN_ALL, SPAN_ALL, SPAN_NOWHERE),
    DISTRIBUTED_INFERENCE: (SPAN_ALL, SPAN_ALL, SPAN_NOWHERE),
    HYBRID_DATA_MODEL: (SPAN_FIRST, SPAN_FIRST, SPAN_REST),
    HYBRID_MODEL_DATA: (SPAN_REST, SPAN_REST, SPAN_FIRST),
    HYBRID_TRANSFORMER: (SPAN_FIRST, SPAN_FIRST, SPAN_REST),
    HYBRID_TRANSFORMER_FWD_IN_BCKWD: (SPAN_FIRST, SPAN_FIRST, SPAN_REST),
}
#: The DLRM embedding (layer 0) communicates over all NPUs in every phase.
DLRM_EMBEDDING_SPANS = (SPAN_ALL, SPAN_ALL, SPAN_ALL)

# Concrete placements of a collective once M and the NPU count are known.
BLOCK, STRIDE, SINGLE = "block", "stride", "single"


@dataclass(frozen=True)
class NpuPlacement:
    """The model-parallel size ``M`` (NPUs in the first dimension) and the NPU count, and how
    each span maps to NPUs: all of them, blocks of ``M``, strides of ``M`` or a single NPU."""

    num_npus: int
    first_dim: int | None

    def of(self, span: str) -> str:
        """``SPAN_ALL``, ``BLOCK``, ``STRIDE`` or ``SINGLE`` for a span other than ``SPAN_NOWHERE``."""
        if self.num_npus == 1:
            return SINGLE
        if span == SPAN_ALL or self.first_dim is None:
            return SPAN_ALL
        size = self.first_dim if span == SPAN_FIRST else self.num_npus // self.first_dim
        if size == 1:
            return SINGLE
        if size == self.num_npus:
            return SPAN_ALL
        return BLOCK if span == SPAN_FIRST else STRIDE


def first_dimension(
    workload: TextWorkload, num_npus: int, model_parallel_size: int | None, notes: list[str]
) -> int | None:
    """``M``: NPUs in the first network dimension, from the argument or the header; checked."""
    header = workload.model_parallel_npu_group
    size = model_parallel_size if model_parallel_size is not None else header
    if model_parallel_size is not None and header is not None and header != model_parallel_size:
        notes.append(
            f"--model-parallel-size {model_parallel_size} replaces the header's model_parallel_NPU_group: {header}"
        )
    if size is None:
        if workload.parallelism in TRANSFORMER_KINDS:
            raise line_error(
                workload.path, workload.header_line,
                f"{workload.parallelism} needs the model-parallel group size",
                f"write '{workload.parallelism} model_parallel_NPU_group: N' or give --model-parallel-size N",
            )  # fmt: skip
        return None
    if size < 1 or num_npus % size:
        where = "--model-parallel-size" if model_parallel_size is not None else "model_parallel_NPU_group"
        raise ChakraInputError(
            f"the model-parallel size {size} ({where}) does not divide the {num_npus} NPUs",
            path=workload.path,
            hint="give a number of NPUs that is a multiple of it, or another --model-parallel-size",
        )
    return size


def placement_groups(placement: NpuPlacement, used: set[str]) -> tuple[dict[int, list[int]], dict[str, int]]:
    """The groups of the used placements (blocks first, then strides), ids from 1, and the id of
    each placement's first group (a rank's group id is that plus its block or position)."""
    groups: dict[int, list[int]] = {}
    first_id: dict[str, int] = {}
    size, npus = placement.first_dim or 1, placement.num_npus
    for kind in (BLOCK, STRIDE):
        if kind not in used:
            continue
        first_id[kind] = len(groups) + 1
        if kind == BLOCK:
            members = [list(range(block * size, (block + 1) * size)) for block in range(npus // size)]
        else:
            members = [list(range(position, npus, size)) for position in range(size)]
        for ranks in members:
            groups[len(groups) + 1] = ranks
    return groups, first_id
