"""One rank's dependency graph as arrays, and the graph algorithms every consumer calls.

A :class:`TraceGraph` holds ids, types, times and the dependencies of one rank as numpy arrays;
positions are indices in file order. :func:`graph_from_arrays` builds one from decoded columns (the
node table does, :mod:`chakra.table`) and :func:`build_graph` from ``Node`` messages. The algorithms
are plain functions over a graph, in networkx's style: :func:`topological_order` (with its
tie-breaks), :func:`find_cycle`, :func:`break_cycles`, :func:`roots`, :func:`neighbourhood`,
:func:`transitive_reduction`.
A dependency cycle is one :class:`CycleError`, carrying the ids.

Both ``data_deps`` and ``ctrl_deps`` are edges (FeederV3 gates on both). A dependency on an id that is
not in the file is left out of the edges and listed in ``missing_deps``; with duplicated ids the last
node of an id is the one its dependents depend on (the C++ feeders' index).

Example:
    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> g = build_graph([Node(id=1), Node(id=2, data_deps=[1]), Node(id=3, ctrl_deps=[1])])
    >>> topological_order(g).tolist(), roots(g).tolist()
    ([0, 1, 2], [0])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from chakra._kahn import kahn_order
from chakra.errors import ChakraInputError, PathLike
from chakra.schema.protobuf.et_def_pb2 import Node

#: ``dep_kind`` values: which field of the child an edge came from.
DATA_DEP, CTRL_DEP = 0, 1
#: Node ids of a cycle quoted in its message.
CYCLE_IDS_SHOWN = 12
#: Largest view :func:`transitive_reduction` works on (its bitsets grow with the square of the nodes).
MAX_REDUCE_NODES = 20_000


class TieBreak(str, Enum):
    """Which ready node :func:`topological_order` places first."""

    #: the smallest file position
    POSITION = "position"
    #: the smallest node id: ASTRA-sim's issue order (``reference/astra-sim.md`` §2.2)
    ID = "id"


class CycleError(ChakraInputError):
    """The dependencies form a cycle. ``ids``: the node ids of one cycle, each depending on the next;
    ``blocked``: how many nodes can never run (the cycle and everything behind it)."""

    def __init__(self, ids: Sequence[int], blocked: int, *, path: PathLike | None = None, what: str = ""):
        self.ids = list(ids)
        self.blocked = blocked
        super().__init__(
            f"{cycle_text(self.ids)}; {blocked:,} nodes can never run{what}",
            path=path,
            hint="data_deps and ctrl_deps together must form a DAG: chakra adapt --target astra-sim writes a copy "
            "without the edges that close each cycle (and reports them); chakra validate lists every cycle",
        )


def cycle_text(ids: Sequence[int]) -> str:
    """How every message names a cycle: ``dependency cycle of 3 nodes: 1 -> 2 -> 3 -> 1 (...)``."""
    shown = " -> ".join(str(i) for i in ids[:CYCLE_IDS_SHOWN])
    tail = " -> ..." if len(ids) > CYCLE_IDS_SHOWN else (f" -> {ids[0]}" if ids else "")
    return (
        f"dependency cycle of {len(ids)} nodes: {shown}{tail} (each depends on the next, data and ctrl deps together)"
    )


@dataclass(frozen=True, eq=False)
class TraceGraph:
    """One rank's dependency graph as arrays; position ``i`` is the ``i``-th node of the file.

    * ``ids`` (uint64), ``node_type`` (int32, ``NodeType``; proto3 keeps values outside the enum, so a
      corrupt or newer file can hold any int32), ``dur_us`` and ``start_us`` (uint64, µs)
    * dependencies in CSR form: the parents of position ``i`` are
      ``dep_pos[dep_ptr[i]:dep_ptr[i+1]]``, data deps before ctrl deps, with ``dep_kind`` telling data (0)
      from ctrl (1); an id listed in both fields of a node gives two entries
    * ``missing_deps``: ``(child position, missing id, kind)`` for deps on ids not in the file
    * ``duplicate_ids``: ids that occur more than once (their last occurrence is the one depended on)
    """

    ids: np.ndarray
    node_type: np.ndarray
    dur_us: np.ndarray
    start_us: np.ndarray
    dep_ptr: np.ndarray
    dep_pos: np.ndarray
    dep_kind: np.ndarray
    missing_deps: list[tuple[int, int, int]] = field(default_factory=list)
    duplicate_ids: list[int] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return len(self.ids)

    @property
    def num_edges(self) -> int:
        return len(self.dep_pos)

    def parents(self, pos: int) -> np.ndarray:
        """Positions of the nodes ``pos`` depends on (data and ctrl)."""
        return self.dep_pos[self.dep_ptr[pos] : self.dep_ptr[pos + 1]]

    @cached_property
    def children(self) -> tuple[np.ndarray, np.ndarray]:
        """``(child_ptr, child_pos)``, the reverse CSR, computed once: the children of ``i`` are
        ``child_pos[child_ptr[i]:child_ptr[i+1]]``, in ascending position."""
        n = self.num_nodes
        child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
        order = np.argsort(self.dep_pos, kind="stable")
        counts = np.bincount(self.dep_pos, minlength=n)
        child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=child_ptr[1:])
        return child_ptr, child_of[order]

    def children_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`children` (kept for callers of the method form)."""
        return self.children

    @cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        return _id_index(self.ids)

    def position(self, node_id: int) -> int | None:
        """The position of the node with this id (its last occurrence), or ``None``."""
        found = self.positions(np.array([node_id], dtype=np.uint64))[0]
        return None if found < 0 else int(found)

    def positions(self, node_ids: np.ndarray) -> np.ndarray:
        """Positions of ``node_ids`` (int64; -1 where an id is not in the file)."""
        return _lookup(self._index, np.asarray(node_ids, dtype=np.uint64))

    @property
    def position_of(self) -> dict[int, int]:
        """Node id -> position as a dict (builds one entry per node: prefer :meth:`position`)."""
        unique_ids, unique_pos = self._index
        return dict(zip(unique_ids.tolist(), unique_pos.tolist(), strict=True))


def _id_index(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ids and the position of each one's last occurrence."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    last = np.ones(len(ids), dtype=bool)
    last[:-1] = sorted_ids[1:] != sorted_ids[:-1]
    return sorted_ids[last], order[last]


def _lookup(index: tuple[np.ndarray, np.ndarray], ids: np.ndarray) -> np.ndarray:
    unique_ids, unique_pos = index
    at = np.searchsorted(unique_ids, ids)
    at_clipped = np.minimum(at, max(len(unique_ids) - 1, 0))
    found = (at < len(unique_ids)) & (unique_ids[at_clipped] == ids) if len(unique_ids) else np.zeros(len(ids), bool)
    return np.where(found, unique_pos[at_clipped] if len(unique_ids) else -1, -1).astype(np.int64)


def graph_from_arrays(
    ids: np.ndarray,
    node_type: np.ndarray,
    dur_us: np.ndarray,
    start_us: np.ndarray,
    data_counts: np.ndarray,
    data_ids: np.ndarray,
    ctrl_counts: np.ndarray,
    ctrl_ids: np.ndarray,
) -> TraceGraph:
    """A graph from per-node columns and the dependency ids of every node (``data_ids`` holds
    ``data_counts[i]`` ids for node ``i``, in node order; the same for ctrl), vectorized.

    >>> g = graph_from_arrays(np.array([5, 6], np.uint64), np.zeros(2, np.int32), np.zeros(2, np.uint64),
    ...     np.zeros(2, np.uint64), np.array([0, 1]), np.array([5], np.uint64), np.array([0, 1]),
    ...     np.array([9], np.uint64))
    >>> g.dep_pos.tolist(), g.missing_deps
    ([0], [(1, 9, 1)])
    """
    n = len(ids)
    # contiguous copies: the columns may be views into the decoder's rows (strided, and holding them)
    ids = np.ascontiguousarray(ids, dtype=np.uint64)
    data_counts = np.asarray(data_counts, dtype=np.int64)
    ctrl_counts = np.asarray(ctrl_counts, dtype=np.int64)
    counts = data_counts + ctrl_counts
    total = int(counts.sum())
    # each node's data deps, then its ctrl deps, in one array
    start_of = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(counts[:-1], out=start_of[1:])
    dep_ids = np.empty(total, dtype=np.uint64)
    dep_kind = np.empty(total, dtype=np.uint8)
    child = np.repeat(np.arange(n, dtype=np.int64), counts)
    for kind, kind_counts, kind_ids, skip in (
        (DATA_DEP, data_counts, data_ids, np.zeros(n, dtype=np.int64)),
        (CTRL_DEP, ctrl_counts, ctrl_ids, data_counts),
    ):
        m = int(kind_counts.sum())
        if not m:
            continue
        first = np.zeros(n, dtype=np.int64)
        np.cumsum(kind_counts[:-1], out=first[1:])
        rank_in_node = np.arange(m, dtype=np.int64) - np.repeat(first, kind_counts)
        slots = np.repeat(start_of + skip, kind_counts) + rank_in_node
        dep_ids[slots] = kind_ids
        dep_kind[slots] = kind
    index = _id_index(ids)
    dep_pos = _lookup(index, dep_ids)
    present = dep_pos >= 0
    missing: list[tuple[int, int, int]] = []
    if not present.all():
        gone = np.flatnonzero(~present)
        missing = list(zip(child[gone].tolist(), dep_ids[gone].tolist(), dep_kind[gone].tolist(), strict=True))
        counts = np.bincount(child[present], minlength=n)
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=dep_ptr[1:])
    unique_ids, _ = index
    duplicates: list[int] = []
    if len(unique_ids) < n:
        sorted_ids = np.sort(ids)
        duplicates = np.unique(sorted_ids[1:][sorted_ids[1:] == sorted_ids[:-1]]).tolist()
    graph = TraceGraph(
        ids=ids,
        node_type=np.ascontiguousarray(node_type, dtype=np.int32),
        dur_us=np.ascontiguousarray(dur_us, dtype=np.uint64),
        start_us=np.ascontiguousarray(start_us, dtype=np.uint64),
        dep_ptr=dep_ptr,
        dep_pos=dep_pos[present],
        dep_kind=dep_kind[present],
        missing_deps=missing,
        duplicate_ids=duplicates,
    )
    graph.__dict__["_index"] = index  # computed already
    return graph


def reordered(graph: TraceGraph, order: np.ndarray) -> TraceGraph:
    """The same nodes and dependencies with the nodes placed in ``order``: position ``j`` of the result
    is position ``order[j]`` of ``graph`` (a permutation of its positions).

    >>> g = graph_from_arrays(np.array([5, 6], np.uint64), np.zeros(2, np.int32), np.zeros(2, np.uint64),
    ...     np.zeros(2, np.uint64), np.array([0, 1]), np.array([5], np.uint64), np.zeros(2), np.array([], np.uint64))
    >>> flipped = reordered(g, np.array([1, 0]))
    >>> flipped.ids.tolist(), flipped.parents(0).tolist()
    ([6, 5], [1])
    """
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    new_position = np.empty(n, dtype=np.int64)
    new_position[order] = np.arange(n, dtype=np.int64)
    counts = np.diff(graph.dep_ptr)[order]
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=dep_ptr[1:])
    # each new node's parents are a slice of the old CSR: gather the slices in the new order
    gather = np.repeat(graph.dep_ptr[:-1][order] - dep_ptr[:-1], counts) + np.arange(int(dep_ptr[-1]), dtype=np.int64)
    return TraceGraph(
        ids=graph.ids[order],
        node_type=graph.node_type[order],
        dur_us=graph.dur_us[order],
        start_us=graph.start_us[order],
        dep_ptr=dep_ptr,
        dep_pos=new_position[graph.dep_pos[gather]],
        dep_kind=graph.dep_kind[gather],
        missing_deps=[(int(new_position[child]), missing, kind) for child, missing, kind in graph.missing_deps],
        duplicate_ids=list(graph.duplicate_ids),
    )


def build_graph(nodes: Iterable[Node]) -> TraceGraph:
    """The graph of ``Node`` messages (one rank, file order)."""
    builder = GraphBuilder()
    for node in nodes:
        builder.add(node)
    return builder.build()


def topological_order(
    graph: TraceGraph,
    *,
    tie_break: TieBreak | str = TieBreak.POSITION,
    strict: bool = True,
    path: PathLike | None = None,
) -> np.ndarray:
    """Positions in dependency order (every node after all its parents).

    Among ready nodes the smallest file position goes first (``TieBreak.POSITION``) or the smallest
    id (``TieBreak.ID``: ASTRA-sim's issue order, which differs when a file is not sorted by id). On a
    cycle, ``strict`` raises :class:`CycleError` (``path`` names the file in it); otherwise the nodes on
    or behind cycles are left out, so the result is shorter than ``graph.num_nodes``.

    When every dependency already points to a node earlier in the tie-break order (the common case,
    checked in one vectorized step), that order is the answer and no heap is needed.
    """
    if tie_break not in TieBreak._value2member_map_ and not isinstance(tie_break, TieBreak):
        raise ValueError(f"tie_break must be one of {', '.join(t.value for t in TieBreak)}, not {tie_break!r}")
    tie_break = TieBreak(tie_break)
    n = graph.num_nodes
    key = np.arange(n, dtype=np.int64) if tie_break is TieBreak.POSITION else None
    if tie_break is TieBreak.ID:
        key = np.empty(n, dtype=np.int64)
        key[np.argsort(graph.ids, kind="stable")] = np.arange(n, dtype=np.int64)
    assert key is not None
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    if bool((key[graph.dep_pos] < key[child_of]).all()):
        return key if tie_break is TieBreak.POSITION else np.argsort(key, kind="stable")
    child_ptr, child_pos = graph.children
    indegree = np.diff(graph.dep_ptr).astype(np.int64)
    result = np.frombuffer(kahn_order(child_ptr.astype(np.int64), child_pos.astype(np.int64), indegree, key), np.int64)
    if strict and len(result) < n:
        raise cycle_error(graph, result, path=path)
    return result


def cycle_error(graph: TraceGraph, order: np.ndarray, *, path: PathLike | None = None, what: str = "") -> CycleError:
    """The :class:`CycleError` of a graph whose (non-strict) topological ``order`` left nodes out."""
    placed = np.zeros(graph.num_nodes, dtype=bool)
    placed[order] = True
    left = np.flatnonzero(~placed)
    cycle = find_cycle(graph, left)
    return CycleError(graph.ids[cycle].tolist(), len(left), path=path, what=what)


def find_cycle(graph: TraceGraph, candidates: np.ndarray | None = None) -> list[int]:
    """One dependency cycle as a list of positions (each depends on the next), or ``[]``.

    Iterative, so any depth works. ``candidates`` restricts the search to these positions
    (e.g. the ones :func:`topological_order` left out).
    """
    n = graph.num_nodes
    allowed = np.zeros(n, dtype=bool)
    if candidates is None:
        allowed[:] = True
    else:
        allowed[candidates] = True
    ptr = graph.dep_ptr.tolist()
    parents = graph.dep_pos.tolist()
    state = [0] * n  # 0 unvisited, 1 on the stack, 2 done
    for root in np.flatnonzero(allowed).tolist():
        if state[root]:
            continue
        stack = [(root, ptr[root])]
        path = [root]
        state[root] = 1
        while stack:
            node, k = stack[-1]
            if k < ptr[node + 1]:
                stack[-1] = (node, k + 1)
                parent = parents[k]
                if not allowed[parent]:
                    continue
                if state[parent] == 1:
                    return path[path.index(parent) :]
                if state[parent] == 0:
                    state[parent] = 1
                    stack.append((parent, ptr[parent]))
                    path.append(parent)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return []


def break_cycles(graph: TraceGraph) -> list[int]:
    """Edges to leave out so that no dependency cycle is left: indices into ``graph.dep_pos``, sorted.

    Within each strongly connected part of the graph, the dependencies on a node written at or after
    the dependent one (itself included) are left out: producers write nodes in program order, so those
    are the edges least likely to be real, and what is left of the part only points backwards in file
    order, which cannot cycle. Only the nodes a topological pass cannot place are searched.

    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> g = build_graph([Node(id=1, ctrl_deps=[2]), Node(id=2, data_deps=[1]), Node(id=3, data_deps=[2])])
    >>> [(int(g.ids[0]), int(g.ids[g.dep_pos[k]])) for k in break_cycles(g)]
    [(1, 2)]
    """
    n = graph.num_nodes
    order = topological_order(graph, strict=False)
    if len(order) == n:
        return []
    placed = np.zeros(n, dtype=bool)
    placed[order] = True
    left = np.flatnonzero(~placed)
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    local = np.full(n, -1, dtype=np.int64)
    local[left] = np.arange(len(left))
    inside = np.flatnonzero(~placed[child_of] & ~placed[graph.dep_pos])
    edge_child = local[child_of[inside]]
    edge_parent = local[graph.dep_pos[inside]]
    part = _strong_parts(len(left), edge_child.tolist(), edge_parent.tolist())
    # positions grow with the local index (``left`` is sorted), so comparing local indices compares them
    forward = (part[edge_child] == part[edge_parent]) & (edge_parent >= edge_child)
    return inside[forward].tolist()


def _strong_parts(n: int, edge_child: list[int], edge_parent: list[int]) -> np.ndarray:
    """Strongly connected component of each of ``n`` nodes (Tarjan's algorithm, iterative), over the
    edges ``edge_child[k] -> edge_parent[k]``."""
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for c, q in zip(edge_child, edge_parent, strict=True):
        adjacency[c].append(q)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    part = np.full(n, -1, dtype=np.int64)
    stack: list[int] = []
    counter = parts = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, k = work[-1]
            if k < len(adjacency[node]):
                work[-1] = (node, k + 1)
                nxt = adjacency[node][k]
                if index[nxt] < 0:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    part[member] = parts
                    if member == node:
                        break
                parts += 1
    return part


def roots(graph: TraceGraph) -> np.ndarray:
    """Positions of nodes without dependencies (what a feeder can issue first)."""
    return np.flatnonzero(np.diff(graph.dep_ptr) == 0)


def neighbourhood(graph: TraceGraph, center: int, depth: int, *, up: bool = True, down: bool = True) -> np.ndarray:
    """Mask of the positions at most ``depth`` dependency hops from ``center``: towards its
    dependencies (``up``), its dependents (``down``), or both.

    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> chain = build_graph([Node(id=i, data_deps=[i - 1] if i else []) for i in range(5)])
    >>> np.flatnonzero(neighbourhood(chain, 2, 1)).tolist()
    [1, 2, 3]
    """
    seen = np.zeros(graph.num_nodes, dtype=bool)
    seen[center] = True
    directions = ([(graph.dep_ptr, graph.dep_pos)] if up else []) + ([graph.children] if down else [])
    for ptr, neighbours in directions:
        seen |= _within_hops(ptr, neighbours, center, depth, graph.num_nodes)
    return seen


def _within_hops(ptr: np.ndarray, neighbours: np.ndarray, start: int, depth: int, n: int) -> np.ndarray:
    """Mask of the positions at most ``depth`` hops from ``start`` along a CSR adjacency."""
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    for _ in range(depth):
        lo = ptr[frontier]
        counts = ptr[frontier + 1] - lo
        total = int(counts.sum())
        if not total:
            break
        # the CSR slices of every frontier node, gathered in one index array
        index = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
        reached = np.unique(neighbours[index])
        frontier = reached[~seen[reached]]
        seen[frontier] = True
    return seen


def transitive_reduction(num_nodes: int, edges: Iterable[tuple[int, int]]) -> set[tuple[int, int]] | None:
    """The ``(parent, child)`` edges among ``edges`` (over nodes ``0..num_nodes-1``) that a longer path
    implies: leaving them out is the transitive reduction. ``None`` above :data:`MAX_REDUCE_NODES`.

    The nodes are put in dependency order, a cycle broken where the order stalls by placing the first
    waiting node (edges going backwards are never implied). One sweep in reverse order carries each
    node's descendants as a bitset (a Python int, bit = rank in the order); an edge ``v -> c`` is
    implied when ``c`` is below another child of ``v``.

    >>> sorted(transitive_reduction(3, [(0, 1), (1, 2), (0, 2)]))
    [(0, 2)]
    """
    if num_nodes > MAX_REDUCE_NODES:
        return None
    children: list[set[int]] = [set() for _ in range(num_nodes)]
    for parent, child in edges:
        if parent != child:
            children[parent].add(child)
    indegree = [0] * num_nodes
    for kids in children:
        for c in kids:
            indegree[c] += 1
    placed = [False] * num_nodes
    ready = deque(v for v in range(num_nodes) if indegree[v] == 0)
    order: list[int] = []
    waiting = 0
    while len(order) < num_nodes:
        if not ready:
            while placed[waiting]:
                waiting += 1
            ready.append(waiting)
        v = ready.popleft()
        if placed[v]:
            continue
        placed[v] = True
        order.append(v)
        for c in children[v]:
            if not placed[c]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
    rank = [0] * num_nodes
    for r, v in enumerate(order):
        rank[v] = r
    below = [0] * num_nodes  # descendants of each node along forward edges, as bits of their rank
    implied: set[tuple[int, int]] = set()
    for v in reversed(order):
        forward = [c for c in children[v] if rank[c] > rank[v]]
        reach = 0
        for c in forward:
            reach |= below[c]
        for c in forward:
            if reach >> rank[c] & 1:
                implied.add((v, c))
        for c in forward:
            reach |= 1 << rank[c]
        below[v] = reach
    return implied


class GraphBuilder:
    """Builds a :class:`TraceGraph` from nodes fed one at a time (a file streamed without keeping its
    messages).

    Example:
        builder = GraphBuilder()
        for node in reader: builder.add(node)
        graph = builder.build()
    """

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._types: list[int] = []
        self._dur: list[int] = []
        self._start: list[int] = []
        self._data_counts: list[int] = []
        self._ctrl_counts: list[int] = []
        self._data: list[int] = []
        self._ctrl: list[int] = []

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, node: Node) -> int:
        """Record ``node``; returns its position."""
        pos = len(self._ids)
        self._ids.append(node.id)
        self._types.append(node.type)
        self._dur.append(node.duration_micros)
        self._start.append(node.start_time_micros)
        self._data_counts.append(len(node.data_deps))
        self._ctrl_counts.append(len(node.ctrl_deps))
        self._data.extend(node.data_deps)
        self._ctrl.extend(node.ctrl_deps)
        return pos

    def build(self) -> TraceGraph:
        """The graph of every node added so far."""
        return graph_from_arrays(
            np.array(self._ids, dtype=np.uint64),
            np.array(self._types, dtype=np.int32),
            np.array(self._dur, dtype=np.uint64),
            np.array(self._start, dtype=np.uint64),
            np.array(self._data_counts, dtype=np.int64),
            np.array(self._data, dtype=np.uint64),
            np.array(self._ctrl_counts, dtype=np.int64),
            np.array(self._ctrl, dtype=np.uint64),
        )
