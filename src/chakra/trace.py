"""The trace model: :class:`Trace` (one rank's file, its messages to edit) and :func:`new_node`, the
one factory every producer builds node messages with (a workload is written by
:class:`chakra.workload_writer.WorkloadWriter` and opened by :func:`chakra.workload.open_workload`).

Example:
    trace = Trace.load("llama.0.et")
    trace.node(42).name
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from chakra import io
from chakra.attrs import set_attr
from chakra.graph import TraceGraph, build_graph, topological_order
from chakra.paths import (
    COMM_GROUPS_SUFFIX,
    groups_path,
    prefix_of,
    rank_of,
    rank_path,
)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
from chakra.table import NodeTable, table_from_nodes

if TYPE_CHECKING:
    pass


def new_node(
    node_id: int,
    name: str,
    node_type: int,
    *,
    data_deps: Iterable[int] = (),
    ctrl_deps: Iterable[int] = (),
    duration_us: int = 0,
    **attrs: Any,
) -> Node:
    """A ``Node`` (the one factory every producer builds nodes with): its fields, and ``attrs`` written
    through :func:`chakra.attrs.set_attr` in keyword order, each in the value kind consumers read.

    >>> node = new_node(3, "ar", 7, data_deps=[2], comm_type=0, comm_size=1 << 20)
    >>> [(a.name, a.WhichOneof("value")) for a in node.attr]
    [('comm_type', 'int64_val'), ('comm_size', 'int64_val')]
    """
    node = Node(id=node_id, name=name, duration_micros=duration_us)
    node.type = node_type  # type: ignore[assignment]  # NodeType is an open enum: a plain int
    node.data_deps.extend(data_deps)
    node.ctrl_deps.extend(ctrl_deps)
    for key, value in attrs.items():
        set_attr(node, key, value)
    return node


class Trace:
    """One rank: ``metadata`` (GlobalMetadata), ``nodes`` in file order, and an id index.

    The index and graph are built on first use and cached; after changing ``nodes`` directly call
    :meth:`reindex` (or add nodes with :meth:`add`, which keeps the index).
    """

    def __init__(
        self, metadata: GlobalMetadata | None = None, nodes: Iterable[Node] = (), path: str | Path | None = None
    ):
        self.metadata = metadata if metadata is not None else GlobalMetadata(version=io.FORMAT_VERSION)
        self.nodes: list[Node] = list(nodes)
        self.path = Path(path) if path is not None else None
        self._index: dict[int, int] | None = None
        self._graph: TraceGraph | None = None

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a whole ``.et`` file (plain, ``.gz`` or ``.zst``)."""
        metadata, nodes = io.read(path)
        return cls(metadata, nodes, path)

    def save(self, path: str | Path, *, compress: str | None = "auto") -> None:
        """Write atomically; compression by suffix unless ``compress`` says otherwise."""
        io.write(path, self.metadata, self.nodes, compress=compress)

    @property
    def rank(self) -> int | None:
        return rank_of(self.path) if self.path is not None else None

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __repr__(self) -> str:
        where = f" {self.path}" if self.path else ""
        return f"<Trace{where}: {len(self.nodes)} nodes>"

    def reindex(self) -> None:
        """Forget cached index and graph (after editing ``nodes`` in place)."""
        self._index = None
        self._graph = None

    @property
    def index(self) -> dict[int, int]:
        """Node id -> position in ``nodes``; for a duplicated id the last one wins (as in the C++ feeders)."""
        if self._index is None:
            self._index = {node.id: i for i, node in enumerate(self.nodes)}
        return self._index

    def node(self, node_id: int) -> Node:
        """The node with this id; ``KeyError`` if absent."""
        return self.nodes[self.index[node_id]]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.index

    def add(self, node: Node) -> Node:
        """Append ``node`` (copied into a fresh message) and return the stored message."""
        stored = Node()
        stored.CopyFrom(node)
        if self._index is not None:
            self._index[stored.id] = len(self.nodes)
        self.nodes.append(stored)
        self._graph = None
        return stored

    def children(self) -> dict[int, list[int]]:
        """Parent id -> ids of nodes that depend on it (data or ctrl), each child listed once."""
        result: dict[int, list[int]] = {}
        for node in self.nodes:
            for parent in dict.fromkeys([*node.data_deps, *node.ctrl_deps]):
                result.setdefault(parent, []).append(node.id)
        return result

    def graph(self) -> TraceGraph:
        """The compact array view (cached): ids, types, durations, CSR of deps."""
        if self._graph is None:
            self._graph = build_graph(self.nodes)
        return self._graph

    def table(self) -> NodeTable:
        """The node table of these nodes (:mod:`chakra.table`): what every consumer reads of them."""
        return table_from_nodes(self.nodes, metadata=self.metadata, path=self.path, rank=self.rank)

    def topological_order(self) -> list[Node]:
        """Nodes with every node after its dependencies; :class:`chakra.graph.CycleError` on a cycle."""
        order = topological_order(self.graph(), path=self.path)
        return [self.nodes[i] for i in order.tolist()]

    def durations_us(self) -> np.ndarray:
        return self.graph().dur_us


__all__ = [
    "COMM_GROUPS_SUFFIX",
    "Trace",
    "groups_path",
    "new_node",
    "prefix_of",
    "rank_of",
    "rank_path",
]
