"""What converting one rank gives: the :class:`Conversion` (metadata, the encoded nodes, the
communication nodes) and its :class:`ConversionReport` (what became of every input item), with the
labels of the node kinds the report counts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chakra.errors import PathLike
from chakra.io import EtWriter, framed_batches
from chakra.pytorch.comms import CommNode
from chakra.pytorch.groups import ProcessGroup
from chakra.pytorch.link import REPORT_EXAMPLES, LinkReport
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, GlobalMetadata, Node

#: Labels of the node kinds the report counts.
KIND_CPU, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = "cpu op", "kernel", "memcpy", "memset"
KIND_COLL, KIND_SEND, KIND_RECV, KIND_METADATA = "collective", "send", "recv", "metadata"
COMM_KIND_LABEL: dict[int, str] = {COMM_COLL_NODE: KIND_COLL, COMM_SEND_NODE: KIND_SEND, COMM_RECV_NODE: KIND_RECV}


@dataclass
class ConversionReport:
    """What a conversion did with every input item, and what the result lacks.

    ``dropped`` counts items not written, by reason (``dropped_examples`` names a few); every
    host op and device activity is either a node (counted in ``nodes`` by kind) or dropped.
    """

    rank: int | None
    mode: str  # "linked", "kineto-only" or "host-only"
    host_ops: int = 0
    device_activities: int = 0
    nodes: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_examples: list[tuple[int | str, str, str]] = field(default_factory=list)
    comm: Counter[str] = field(default_factory=Counter)  # "ALL_REDUCE", "send", ...
    comm_notes: Counter[str] = field(default_factory=Counter)  # how sizes were found, odd cases
    comm_groups: Counter[str] = field(default_factory=Counter)  # how each node's group was found
    waits: int = 0
    wait_us: float = 0.0
    sync_deps: Counter[str] = field(default_factory=Counter)  # GPU synchronisation, by how it was found
    inter_thread_deps: int = 0
    parts: int = 0  # extra nodes for exclusive time an op spent after a child (PART_MIN_US)
    gaps: int = 0  # nodes for busy time between a thread's top-level ops (dependencies.busy_gaps)
    gap_us: float = 0.0
    data_deps: int = 0
    edges_against_time: int = 0
    measured_span_us: float | None = None
    lacks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    link: LinkReport | None = None
    # a profiler trace alone (chakra.kineto): the window converted, and what became of every event
    window: str | None = None
    events: dict[str, dict[str, int]] | None = None

    def drop(self, key: int | str, name: str, reason: str) -> None:
        self.dropped[reason] += 1
        if len(self.dropped_examples) < REPORT_EXAMPLES:
            self.dropped_examples.append((key, name, reason))

    @property
    def node_count(self) -> int:
        return sum(self.nodes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "mode": self.mode,
            "host_ops": self.host_ops,
            "device_activities": self.device_activities,
            "nodes": dict(self.nodes),
            "node_count": self.node_count,
            "dropped": dict(self.dropped),
            "dropped_examples": [list(e) for e in self.dropped_examples],
            "comm": dict(self.comm),
            "comm_notes": dict(self.comm_notes),
            "comm_groups": dict(self.comm_groups),
            "waits": self.waits,
            "wait_us": round(self.wait_us, 3),
            "sync_deps": dict(self.sync_deps),
            "inter_thread_deps": self.inter_thread_deps,
            "parts": self.parts,
            "gaps": self.gaps,
            "gap_us": round(self.gap_us, 3),
            "data_deps": self.data_deps,
            "edges_against_time": self.edges_against_time,
            "measured_span_us": self.measured_span_us,
            "lacks": self.lacks,
            "notes": self.notes,
            "link": self.link.to_dict() if self.link else None,
            "window": self.window,
            "events": self.events,
        }


@dataclass
class Conversion:
    """The result for one rank: metadata, the encoded nodes (id ``i`` at position ``i``), its
    communication nodes and the report. ``nodes`` decodes them into messages on first use."""

    metadata: GlobalMetadata
    payloads: list[bytes]
    comm_nodes: list[CommNode]
    report: ConversionReport
    rank: int | None
    groups: dict[str, ProcessGroup] = field(default_factory=dict)
    group_attrs: dict[int, list[tuple[str, Any]]] = field(default_factory=dict)  # what apply_groups wrote
    _nodes: list[Node] | None = None

    @property
    def nodes(self) -> list[Node]:
        if self._nodes is None:
            self._nodes = [Node.FromString(payload) for payload in self.payloads]
        return self._nodes

    def add_attrs(self, node_id: int, fields: list[bytes]) -> None:
        """Append encoded attributes (:class:`chakra.wire.AttrEncoder`) to node ``node_id``."""
        self.payloads[node_id] += b"".join(fields)
        self._nodes = None

    def write(self, path: PathLike, *, compress: str | None = "auto") -> None:
        """Write the ET atomically."""
        with EtWriter(path, self.metadata, compress=compress) as writer:
            for records, count in framed_batches(self.payloads, path):
                writer.write_framed(records, count)
