"""Which part of one rank's dependency graph a picture draws: :func:`select` returns a
:class:`GraphView` (positions, edges, notes) by the rules of :mod:`chakra.viz.graph`.

Example (a chain 0 -> 1 -> 2 -> 3 -> 4):
    view = select(table, around=2, depth=1)
    table.ids[view.positions]                                        # [1, 2, 3]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chakra.analyze.frames import to_frame
from chakra.errors import ChakraInputError
from chakra.graph import CTRL_DEP, DATA_DEP, TraceGraph, neighbourhood, topological_order
from chakra.table import COMMUNICATION, NodeTable

#: Nodes drawn unless told otherwise: Graphviz layout time grows much faster than the node count
#: and ``dot`` is unusable beyond a few thousand nodes (reference/upstream-behaviour.md item 41).
DEFAULT_MAX_NODES = 2000
#: Hops kept on each side of the ``around`` node by default.
DEFAULT_DEPTH = 2
#: Nearest drawn ancestors remembered per hidden node when bridging paths: bounds the sweep to
#: O(edges x this); beyond it the farthest ones are forgotten (and the notes say so).
MAX_BRIDGE_SOURCES = 32

#: Edge kinds of :attr:`GraphView.edges` (GraphML ``dependency`` values, upstream's words).
DATA, CONTROL, PATH = "data", "control", "path"
_KIND_OF_DEP = {DATA_DEP: DATA, CTRL_DEP: CONTROL}


@dataclass
class GraphView:
    """The subgraph to draw.

    * ``positions``: file positions of the drawn nodes (ascending)
    * ``edges``: ``(parent position, child position, kind)``, kind :data:`DATA`, :data:`CONTROL` or
      :data:`PATH` (a dependency path through hidden nodes)
    * ``dropped``: nodes of the trace not drawn
    * ``notes``: what was left out and why (shown in the picture)
    * ``around_position``: the node asked for with ``around`` (drawn with a thick border), if any
    """

    positions: np.ndarray
    edges: list[tuple[int, int, str]]
    dropped: int
    notes: list[str] = field(default_factory=list)
    around_position: int | None = None
    #: the edges a picture draws and its notes, per ``all_edges``: worked out once (a reduction)
    _pictures: dict[bool, tuple[list[tuple[int, int, str]], list[str]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "positions": self.positions.tolist(),
            "edges": [list(edge) for edge in self.edges],
            "dropped": self.dropped,
            "notes": list(self.notes),
            "around_position": self.around_position,
        }

    def to_pandas(self) -> Any:
        """The edges as a DataFrame: ``parent_pos``, ``child_pos``, ``dependency``."""
        columns = ["parent_pos", "child_pos", "dependency"]
        return to_frame((dict(zip(columns, edge, strict=True)) for edge in self.edges), columns)


# ---------------------------------------------------------------------------------------------
# Selecting


def select(
    table: NodeTable,
    *,
    around: int | None = None,
    depth: int = DEFAULT_DEPTH,
    comm_only: bool = False,
    collapse_cpu: bool = False,
    max_nodes: int | None = DEFAULT_MAX_NODES,
) -> GraphView:
    """The nodes and edges to draw (see the module docstring for the rules).

    ``around`` is a node id; ``max_nodes=None`` draws every selected node. Raises
    :class:`ChakraInputError` for an empty trace, an id not in the file, or filters that leave nothing.

    Example (a chain 0 -> 1 -> 2 -> 3 -> 4):
        view = select(table, around=2, depth=1)
        table.ids[view.positions]                                        # [1, 2, 3]
    """
    table.require_nodes()
    if depth < 0:
        raise ChakraInputError(
            f"depth must be 0 or more, not {depth}", path=table.path, hint=f"try depth {DEFAULT_DEPTH}"
        )
    if max_nodes is not None and max_nodes < 1:
        raise ChakraInputError(
            f"max_nodes must be 1 or more, not {max_nodes}", path=table.path, hint="max_nodes=None draws every node"
        )
    graph = table.graph
    n = len(table)
    notes: list[str] = []
    scope = np.ones(n, dtype=bool)
    center: int | None = None
    if around is not None:
        center = _position_of(table, around)
        scope = neighbourhood(graph, center, depth)
        notes.append(f"neighbourhood of node {around}: {int(scope.sum()):,} nodes within {depth} hops up and down")
    keep = scope.copy()
    if comm_only:
        keep &= table.category == COMMUNICATION
    if collapse_cpu:
        keep &= ~table.is_cpu
    if center is not None:
        keep[center] = True
    order: np.ndarray | None = None
    path_edges: list[tuple[int, int]] = []
    if comm_only or collapse_cpu:
        filters = " and ".join(
            text for on, text in ((comm_only, "communication only"), (collapse_cpu, "CPU ops hidden")) if on
        )
        if not keep.any():
            raise ChakraInputError(
                f"nothing to draw: {filters} leaves none of {int(scope.sum()):,} nodes",
                path=table.path,
                hint="draw without comm_only / collapse_cpu",
            )
        order = _dependency_order(graph, notes)
        path_edges, capped = _bridge(graph, scope, keep, order)
        notes.append(
            f"{filters}: {int(scope.sum() - keep.sum()):,} nodes hidden; dotted 'path' edges stand for dependency "
            "paths through hidden nodes"
        )
        if capped:
            notes.append(
                f"{capped:,} hidden nodes lie behind more than {MAX_BRIDGE_SOURCES} drawn nodes: "
                "path edges from the farthest ones are left out"
            )
    selected = int(keep.sum())
    if max_nodes is not None and selected > max_nodes:
        if order is None:
            order = _dependency_order(graph, notes)
        first = order[keep[order]][:max_nodes]
        keep = np.zeros(n, dtype=bool)
        keep[first] = True
        if center is not None and not keep[center]:
            keep[first[-1]] = False
            keep[center] = True
        path_edges = [(a, b) for a, b in path_edges if keep[a] and keep[b]]
        notes.append(
            f"first {max_nodes:,} of {selected:,} nodes in dependency order (max_nodes; raise it or "
            "filter to see the rest)"
        )
    edges = _direct_edges(graph, keep)
    edges.extend((a, b, PATH) for a, b in path_edges)
    missing = sum(1 for child, _, _ in graph.missing_deps if keep[child])
    if missing:
        notes.append(f"{missing:,} dependencies on ids not in the file are not drawn")
    if graph.duplicate_ids:
        notes.append(f"{len(graph.duplicate_ids):,} ids occur more than once: dependencies go to the last occurrence")
    positions = np.flatnonzero(keep)
    return GraphView(positions, edges, n - len(positions), notes, center)


def _position_of(table: NodeTable, node_id: int) -> int:
    pos = table.graph.position(int(node_id))
    if pos is None:
        ids = table.ids
        raise ChakraInputError(
            f"node id {node_id} is not in the trace",
            path=table.path,
            hint=f"its {len(ids):,} node ids run from {int(ids.min())} to {int(ids.max())}",
        )
    return pos


def _dependency_order(graph: TraceGraph, notes: list[str]) -> np.ndarray:
    """Topological order of every position; nodes on or behind a cycle follow in file order."""
    order = topological_order(graph, strict=False)
    if len(order) < graph.num_nodes:
        placed = np.zeros(graph.num_nodes, dtype=bool)
        placed[order] = True
        rest = np.flatnonzero(~placed)
        notes.append(f"{len(rest):,} nodes on or behind dependency cycles have no dependency order: they come last")
        order = np.concatenate([order, rest])
    return order


def _bridge(
    graph: TraceGraph, scope: np.ndarray, keep: np.ndarray, order: np.ndarray
) -> tuple[list[tuple[int, int]], int]:
    """Path edges ``(ancestor, descendant)`` between kept nodes joined through hidden nodes of the scope only.

    One sweep in dependency order carries, for each hidden node, its nearest kept ancestors (at most
    :data:`MAX_BRIDGE_SOURCES`, the latest in the order). A pair that also has a direct edge gets
    none. Returns the edges and the number of hidden nodes whose ancestor set was cut.
    """
    ptr = graph.dep_ptr.tolist()
    parents = graph.dep_pos.tolist()
    keep_l = keep.tolist()
    scope_l = scope.tolist()
    rank = np.empty(graph.num_nodes, dtype=np.int64)
    rank[order] = np.arange(len(order))
    rank_of = rank.tolist().__getitem__
    near: list[tuple[int, ...]] = [()] * graph.num_nodes
    edges: list[tuple[int, int]] = []
    capped = 0
    for v in order.tolist():
        if not scope_l[v]:
            continue
        lo, hi = ptr[v], ptr[v + 1]
        sources: set[int] = set()
        if keep_l[v]:
            for k in range(lo, hi):
                p = parents[k]
                if not keep_l[p]:
                    sources.update(near[p])
            if sources:
                sources.difference_update(parents[lo:hi])
                edges.extend((a, v) for a in sorted(sources))
        else:
            for k in range(lo, hi):
                p = parents[k]
                if keep_l[p]:
                    sources.add(p)
                else:
                    sources.update(near[p])
            if len(sources) > MAX_BRIDGE_SOURCES:
                capped += 1
                sources = set(sorted(sources, key=rank_of, reverse=True)[:MAX_BRIDGE_SOURCES])
            near[v] = tuple(sources)
    return edges, capped


def _direct_edges(graph: TraceGraph, keep: np.ndarray) -> list[tuple[int, int, str]]:
    """Dependencies between kept nodes, one per (parent, child, kind), sorted by child then parent."""
    n = graph.num_nodes
    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    parent = graph.dep_pos
    both = keep[parent] & keep[child]
    key = np.unique((child[both] * n + parent[both]) * 2 + graph.dep_kind[both])
    pair = key // 2
    kinds = [_KIND_OF_DEP[k] for k in (key % 2).tolist()]
    return list(zip((pair % n).tolist(), (pair // n).tolist(), kinds, strict=True))
