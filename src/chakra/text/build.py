"""The graph of one rank of a text workload, in the order of ASTRA-sim's workload loop (``Workload.cc``):
:class:`TextWorkloadBuilder` turns each layer step into a compute node and a collective, and the order in which the
loop computes, issues and waits for collectives into data dependencies (one ``_pass_*`` method per
parallelism). Every rank's graph is the same but for the ``pg_name`` of subgroup collectives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, Node
from chakra.text.placement import DLRM_EMBEDDING_SPANS, SINGLE, SPAN_ALL, SPAN_NOWHERE, SPANS, NpuPlacement
from chakra.text.workload import (
    COMM_TYPES,
    DATA,
    DISTRIBUTED_INFERENCE,
    DLRM_KINDS,
    FWD,
    HYBRID_DLRM,
    HYBRID_DLRM_ENHANCED,
    HYBRID_TRANSFORMER,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    IG,
    MICRO,
    MODEL,
    NO_COMM,
    PHASE_LABEL,
    WG,
    Layer,
    TextWorkload,
)
from chakra.trace import new_node

#: Node name suffixes of each step: compute, collective, and a recomputed forward (both kinds).
_COMPUTE_SUFFIX = {FWD: "FWD", IG: "BWD_IG", WG: "BWD_WG"}
_COMM_SUFFIX = {FWD: "FWD", IG: "IG", WG: "WG"}
_RECOMPUTE = "FWD_RECOMPUTE"


class TextWorkloadBuilder:
    """Builds one rank's graph (every rank's is the same but for ``pg_name``).

    ``cursor`` holds what the workload loop waits for before its next step; ``wg_comm`` the WG
    collective of each layer in the pass just built (the next pass's forward waits for it).
    Steps that emit no collective are recorded in ``skipped`` (reason -> layer steps) for the notes.
    """

    def __init__(self, workload: TextWorkload, placement: NpuPlacement, units_per_us: int = 1):
        self.workload = workload
        self.placement = placement
        self.units_per_us = units_per_us  # compute-time units per µs: 1 (µs) or 1,000 (ns)
        self.rounded_up = 0  # nonzero compute times that would round to 0 µs
        self.nodes: list[Node] = []
        self.placements: list[str | None] = []  # per node: BLOCK/STRIDE when it needs a pg_name
        self.cursor: list[int] = []
        self.wg_comm: dict[int, int] = {}
        self.skipped: dict[str, dict[tuple[int, str], None]] = {}
        self.fallback_spans: set[str] = set()  # layer parallelisms whose groups fell back to all NPUs
        self.splits_npus = False  # whether some collective spans one part of the dimensions

    # -- nodes

    def _add(
        self,
        name: str,
        node_type: int,
        deps: Sequence[int],
        placement: str | None = None,
        *,
        duration_us: int = 0,
        **attrs: Any,
    ) -> int:
        """A device node (``is_cpu_op`` false, after the node's own attributes, as upstream writes it)."""
        node = new_node(
            len(self.nodes), name, node_type, data_deps=sorted(set(deps)), duration_us=duration_us, **attrs,
            is_cpu_op=False,
        )  # fmt: skip
        self.nodes.append(node)
        self.placements.append(placement)
        return node.id

    def compute(self, layer: Layer, which: str, deps: Sequence[int], *, recompute: bool = False) -> int:
        suffix = _RECOMPUTE if recompute else _COMPUTE_SUFFIX[which]
        duration_us = self._duration_us(layer.phase(which).compute_us)
        return self._add(f"COMP_NODE_{layer.name}_{suffix}", COMP_NODE, deps, duration_us=duration_us)

    def _duration_us(self, value: int) -> int:
        if self.units_per_us == 1:
            return value
        duration_us = round(value / self.units_per_us)
        if value and not duration_us:
            self.rounded_up += 1
            return 1  # a real step never takes no time; 0 would read as "no duration recorded"
        return duration_us

    def skip(self, index: int, which: str, reason: str) -> None:
        """Record that layer ``index``'s ``which`` collective is not emitted, unless it is NONE anyway."""
        if self.workload.layers[index].phase(which).comm_type != NO_COMM:
            self.skipped.setdefault(reason, {})[(index, which)] = None

    def collective(self, index: int, which: str, deps: Sequence[int], *, recompute: bool = False) -> int | None:
        """Layer ``index``'s collective of step ``which``, or ``None`` where nothing is emitted."""
        layer = self.workload.layers[index]
        phase = layer.phase(which)
        if phase.comm_type == NO_COMM:
            self.skipped.setdefault("comm type NONE (dependents wait on the compute node)", {})[(index, which)] = None
            return None
        if phase.comm_size_bytes == 0:
            self.skip(index, which, "comm size 0")
            return None
        kind = layer.parallelism or self.workload.parallelism
        # ASTRA-sim gives layer 0 every dimension only when the workload itself is DLRM
        embedding = self.workload.parallelism in DLRM_KINDS and index == 0
        spans = DLRM_EMBEDDING_SPANS if embedding else SPANS[kind]
        span = spans[(FWD, IG, WG).index(which)]
        if span == SPAN_NOWHERE:
            label = PHASE_LABEL[which]
            reason = f"{kind} runs {label} collectives over no network dimension (ASTRA-sim finishes them at once)"
            self.skip(index, which, reason)
            return None
        if span != SPAN_ALL:
            self.splits_npus = True
            if self.placement.first_dim is None:
                self.fallback_spans.add(kind)
        placement = self.placement.of(span)
        if placement == SINGLE:
            self.skip(index, which, "its group has a single NPU")
            return None
        suffix = _RECOMPUTE if recompute else _COMM_SUFFIX[which]
        return self._add(
            f"COMM_COLL_NODE_{layer.name}_{suffix}_{phase.comm_type}",
            COMM_COLL_NODE,
            deps,
            None if placement == SPAN_ALL else placement,
            comm_type=COMM_TYPES[phase.comm_type],
            comm_size=phase.comm_size_bytes,
        )

    # -- one pass per parallelism (the order of ASTRA-sim's ``Workload::iterate_*``)

    def build(self, num_passes: int) -> None:
        kind = self.workload.parallelism
        step = {
            MICRO: self._pass_micro,
            DATA: self._pass_data,
            MODEL: self._pass_model,
            DISTRIBUTED_INFERENCE: self._pass_inference,
            HYBRID_DLRM: self._pass_dlrm,
            HYBRID_DLRM_ENHANCED: self._pass_dlrm,
            HYBRID_TRANSFORMER: self._pass_transformer,
            HYBRID_TRANSFORMER_FWD_IN_BCKWD: self._pass_transformer,
        }.get(kind, self._pass_hybrid)  # HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED
        for _ in range(num_passes):
            step()

    def _forward(self, index: int) -> None:
        """Layer ``index``'s forward compute after the cursor and its previous WG collective, then
        its forward collective, which the next step waits for."""
        prev = self.wg_comm.get(index)
        fwd = self.compute(self.workload.layers[index], FWD, self.cursor + ([prev] if prev is not None else []))
        comm = self.collective(index, FWD, [fwd])
        self.cursor = [fwd if comm is None else comm]

    def _pass_micro(self) -> None:
        # ASTRA-sim's micro benchmark issues layer 0's WG collective alone, once per pass
        # (Workload::iterate_micro_benchmark); the other lines of the file are never read
        for index in range(len(self.workload.layers)):
            self.skip(index, FWD, "MICRO issues weight-gradient collectives only")
            self.skip(index, IG, "MICRO issues weight-gradient collectives only")
            if index:
                self.skip(index, WG, "MICRO issues layer 0's collective only, as ASTRA-sim")
        self.collective(0, WG, [])

    def _pass_data(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            prev = self.wg_comm.get(index)
            self.cursor = [self.compute(layers[index], FWD, self.cursor + ([prev] if prev is not None else []))]
            self.skip(index, FWD, "DATA issues no forward collectives")
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            wg = self.compute(layers[index], WG, self.cursor)
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
            self.skip(index, IG, "DATA issues no input-gradient collectives")
            if index > 0:
                self.cursor = [self.compute(layers[index], IG, self.cursor)]
        self.wg_comm = wg_comm

    def _pass_model(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            self._forward(index)
        for index in reversed(range(len(layers))):
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self._input_gradient_comm(index, ig)
            wg = self.compute(layers[index], WG, [ig])
            self.skip(index, WG, "MODEL issues no weight-gradient collectives")
            self.cursor = [wg] + ([ig_comm] if ig_comm is not None else [])

    def _pass_inference(self) -> None:
        for index in range(len(self.workload.layers)):
            self._forward(index)
            self.skip(index, IG, "DISTRIBUTED_INFERENCE has no backward pass")
            self.skip(index, WG, "DISTRIBUTED_INFERENCE has no backward pass")

    def _input_gradient_comm(self, index: int, ig: int) -> int | None:
        """The IG collective, issued without waiting; layer 0 has none (nothing below needs it)."""
        if index == 0:
            self.skip(index, IG, "layer 0's input gradient is not communicated (nothing below needs it)")
            return None
        return self.collective(index, IG, [ig])

    def _pass_hybrid(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            self._forward(index)
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self._input_gradient_comm(index, ig)
            wg = self.compute(layers[index], WG, [ig])
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg] + ([ig_comm] if ig_comm is not None else [])
        self.wg_comm = wg_comm

    def _pass_transformer(self) -> None:
        """Like the hybrids, but the IG collective (every layer's) blocks the WG compute; with
        FWD_IN_BCKWD a layer in ``checkpoint_initiates`` first recomputes the forward of the
        layers from the nearest checkpoint at or below it up to the layer before it."""
        workload = self.workload
        layers = workload.layers
        recompute = workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD
        for index in range(len(layers)):
            self._forward(index)
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            if recompute and index in workload.checkpoint_initiates:
                start = max(c for c in workload.checkpoints if c <= index)
                for again in range(start, index):
                    fwd = self.compute(layers[again], FWD, self.cursor, recompute=True)
                    comm = self.collective(again, FWD, [fwd], recompute=True)
                    self.cursor = [fwd if comm is None else comm]
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self.collective(index, IG, [ig])
            wg = self.compute(layers[index], WG, [ig if ig_comm is None else ig_comm])
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
        self.wg_comm = wg_comm

    def _pass_dlrm(self) -> None:
        """Forward: only all-to-all collectives are issued, without waiting; the layer after the
        last bottom layer waits for the embedding's (unless that layer issued one itself).
        Backward: WG then IG per layer; the embedding's IG collective is issued after the IG
        compute of the first top layer; HYBRID_DLRM (not _ENHANCED) waits for it at the end."""
        layers = self.workload.layers
        bottom = self.workload.dlrm_last_bottom_layer
        enhanced = self.workload.parallelism == HYBRID_DLRM_ENHANCED
        embedding_fwd: int | None = None
        for index in range(len(layers)):
            prev = self.wg_comm.get(index)
            fwd = self.compute(layers[index], FWD, self.cursor + ([prev] if prev is not None else []))
            self.cursor = [fwd]
            if layers[index].fwd.comm_type == "ALLTOALL":
                comm = self.collective(index, FWD, [fwd])
                if index == 0:
                    embedding_fwd = comm
            else:
                self.skip(index, FWD, "DLRM issues only all-to-all forward collectives")
            if index == bottom and layers[index].fwd.comm_type != "ALLTOALL" and embedding_fwd is not None:
                self.cursor.append(embedding_fwd)
        wg_comm: dict[int, int] = {}
        embedding_ig: int | None = None
        if bottom is not None and bottom + 1 >= len(layers):
            reason = (
                "DLRM issues the embedding's input-gradient collective after the first top layer, and there is none"
            )
            self.skip(0, IG, reason)
        for index in reversed(range(len(layers))):
            wg = self.compute(layers[index], WG, self.cursor)
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
            if index == 0 and not enhanced and embedding_ig is not None:
                self.cursor.append(embedding_ig)
            if index > 0:
                ig = self.compute(layers[index], IG, self.cursor)
                self.skip(index, IG, "DLRM communicates only the embedding's input gradient")
                if bottom is not None and index == bottom + 1:
                    embedding_ig = self.collective(0, IG, [ig])
                self.cursor = [ig]
        self.wg_comm = wg_comm
