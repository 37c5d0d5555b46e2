"""The first pass of ``adapt``: read one rank with the node table's decoder and decide every change.

Only what the decisions need is kept while the file streams by: per node its id, type and
dependency ids (the graph: missing dependencies, cycles, the nodes to take out), and the positions of
the few nodes that change. The result, a :class:`RankPlan`, is small: the positions taken out, and
one :class:`NodeEdit` per node that changes. :mod:`chakra.adapt.rewrite` applies it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chakra import io
from chakra.adapt.report import Change, RankChanges
from chakra.adapt.rules import TargetRules
from chakra.chunks import COMMUNICATION, categories, iter_chunks
from chakra.graph import CTRL_DEP, DATA_DEP, TraceGraph, break_cycles, graph_from_arrays
from chakra.groups import parse_process_groups
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, NodeType

#: Change kind of each node type a target takes out.
_REMOVAL_CHANGE = {
    NodeType.METADATA_NODE: Change.METADATA_NODE_REMOVED,
    NodeType.INVALID_NODE: Change.INVALID_NODE_REMOVED,
}
_DEP_FIELD = {DATA_DEP: "data_deps", CTRL_DEP: "ctrl_deps"}


@dataclass
class NodeEdit:
    """How one node changes. ``data_deps``/``ctrl_deps``: the new dependency ids (``None``: kept);
    ``comm_type``: the stand-in collective written in place of ``recorded_comm_type``, the one that ran;
    ``as_compute``: a host op typed as communication becomes a CPU ``COMP_NODE``; ``off_cpu``: a
    communication node's ``is_cpu_op`` becomes false; ``fix_attrs``: attributes the target reads are
    rewritten into their canonical member."""

    data_deps: list[int] | None = None
    ctrl_deps: list[int] | None = None
    comm_type: int | None = None
    recorded_comm_type: int | None = None
    as_compute: bool = False
    off_cpu: bool = False
    fix_attrs: bool = False


@dataclass
class RankPlan:
    """Every change to one rank's file: positions removed (sorted), edits by position, the changes
    counted so far, and the process groups its METADATA nodes define (group id -> ranks)."""

    rank: int
    path: Path
    removed: np.ndarray
    edits: dict[int, NodeEdit]
    changes: RankChanges
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)
    compressed: bool = False

    @property
    def unchanged(self) -> bool:
        """Nothing in the file changes (it may still be decompressed)."""
        return not len(self.removed) and not self.edits


EditOf = Callable[[int], NodeEdit]


def plan_rank(path: Path, rank: int, rules: TargetRules) -> RankPlan:
    """Decide every change ``rules`` asks of the rank file ``path`` (one streaming read)."""
    metadata, chunks, _ = iter_chunks(path)
    del metadata
    changes = RankChanges()
    edits: dict[int, NodeEdit] = {}
    groups: dict[int, tuple[int, ...]] = {}
    ids, types, n_data, n_ctrl, data, ctrl = [], [], [], [], [], []

    def edit(pos: int) -> NodeEdit:
        found = edits.get(pos)
        if found is None:
            found = edits[pos] = NodeEdit()
        return found

    for chunk in chunks:
        rows, first = chunk.rows, chunk.first
        ids.append(rows["id"].copy())
        types.append(rows["type"].copy())
        n_data.append(rows["n_data"].astype(np.int64))
        n_ctrl.append(rows["n_ctrl"].astype(np.int64))
        data.append(chunk.data_deps.copy())
        ctrl.append(chunk.ctrl_deps.copy())
        kind_pos, kinds = chunk.ints["comm_type"]
        collective = rows["type"][kind_pos] == NodeType.COMM_COLL_NODE
        for pos, kind in zip(kind_pos[collective].tolist(), kinds[collective].tolist(), strict=True):
            stand_in = rules.stand_ins.get(kind)
            if stand_in is not None:
                node_edit = edit(first + pos)
                node_edit.comm_type, node_edit.recorded_comm_type = stand_in, kind
                changes.add(Change.STAND_IN, f"{_collective(kind)} as {_collective(stand_in)}")
        if rules.comm_off_cpu:
            _plan_cpu_comm(chunk.rows["type"], chunk.is_cpu, chunk.ints, first, edit, changes)
        for pos, name in zip(chunk.problem_pos, chunk.problem_name, strict=True):
            if name in rules.read_attrs:
                edit(pos).fix_attrs = True
        for node in chunk.metadata_nodes.values():
            # a text that does not parse is reported by validate (metadata-parse); the node goes all the same
            with contextlib.suppress(ValueError, json.JSONDecodeError):
                groups.update(parse_process_groups(node.inputs.values) if node.inputs.values else {})
    if not ids:
        return RankPlan(rank, path, np.zeros(0, dtype=np.int64), edits, changes, groups, _compressed(path))
    n_nodes = sum(len(part) for part in ids)
    zeros = np.zeros(n_nodes, dtype=np.uint64)
    graph = graph_from_arrays(
        np.concatenate(ids),
        np.concatenate(types),
        zeros,
        zeros,
        np.concatenate(n_data),
        np.concatenate(data),
        np.concatenate(n_ctrl),
        np.concatenate(ctrl),
    )
    removed = np.flatnonzero(np.isin(graph.node_type, list(rules.removed_node_types)))
    for node_type, change in _REMOVAL_CHANGE.items():
        if node_type in rules.removed_node_types:
            changes.add(change, count=int(np.count_nonzero(graph.node_type[removed] == node_type)))
    for pos in removed.tolist():
        edits.pop(pos, None)
    for _, _, kind in graph.missing_deps:
        changes.add(Change.MISSING_DEP_DROPPED, _DEP_FIELD[kind])
    cut = np.zeros(graph.num_edges, dtype=bool)
    child_of = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.dep_ptr))
    for k in break_cycles(graph):
        cut[k] = True
        child, parent = int(child_of[k]), int(graph.dep_pos[k])
        what = _DEP_FIELD[int(graph.dep_kind[k])]
        changes.add(Change.CYCLE_EDGE_DROPPED, f"{int(graph.ids[child])} -> {int(graph.ids[parent])} ({what})")
    _plan_deps(graph, removed, cut, edit)
    return RankPlan(rank, path, removed, edits, changes, groups, _compressed(path))


def _plan_cpu_comm(
    types: np.ndarray,
    is_cpu: np.ndarray,
    ints: dict[str, tuple[np.ndarray, np.ndarray]],
    first: int,
    edit: EditOf,
    changes: RankChanges,
) -> None:
    """Communication nodes marked as CPU work: with the attributes their type needs they are real
    communication marked wrongly (moved off the CPU); without them, host ops a converter typed as
    communication by their name (written as CPU compute)."""
    on_cpu = np.flatnonzero((categories(types) == COMMUNICATION) & is_cpu)
    if not len(on_cpu):
        return
    has_size = np.zeros(len(types), dtype=bool)
    has_size[ints["comm_size"][0]] = True
    has_type = np.zeros(len(types), dtype=bool)
    has_type[ints["comm_type"][0]] = True
    for pos in on_cpu.tolist():
        node_type = int(types[pos])
        complete = has_size[pos] and (has_type[pos] or node_type != NodeType.COMM_COLL_NODE)
        if complete:
            edit(first + pos).off_cpu = True
            changes.add(Change.COMM_OFF_CPU, NodeType.Name(node_type))
        else:
            edit(first + pos).as_compute = True
            changes.add(Change.CPU_COMM_AS_COMPUTE, NodeType.Name(node_type))


def _plan_deps(graph: TraceGraph, removed: np.ndarray, cut: np.ndarray, edit: EditOf) -> None:
    """New dependency lists of the nodes whose dependencies change: those with a dependency on a
    missing id or a cut edge, and the dependents of removed nodes (which inherit the removed node's
    own dependencies, through chains of removed nodes)."""
    n = graph.num_nodes
    is_removed = np.zeros(n, dtype=bool)
    is_removed[removed] = True
    affected = np.zeros(n, dtype=bool)
    if graph.missing_deps:
        affected[[child for child, _, _ in graph.missing_deps]] = True
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    affected[child_of[cut]] = True
    affected[child_of[is_removed[graph.dep_pos]]] = True
    affected &= ~is_removed
    ptr, parents, kinds, ids = graph.dep_ptr, graph.dep_pos, graph.dep_kind, graph.ids
    inherited: dict[int, list[int]] = {}
    on_stack: set[int] = set()

    def through(pos: int) -> list[int]:
        """The ids of the kept nodes removed node ``pos`` waits for (directly or via removed nodes)."""
        stack = [pos]
        on_stack.add(pos)
        while stack:
            top = stack[-1]
            pending = [
                int(parents[k]) for k in range(ptr[top], ptr[top + 1])
                if not cut[k] and is_removed[parents[k]] and int(parents[k]) not in inherited
                and int(parents[k]) not in on_stack
            ]  # fmt: skip
            if pending:
                stack.extend(pending)
                on_stack.update(pending)
                continue
            stack.pop()
            on_stack.discard(top)
            found: list[int] = []
            for k in range(ptr[top], ptr[top + 1]):
                parent = int(parents[k])
                if not cut[k]:
                    found.extend(inherited.get(parent, []) if is_removed[parent] else [int(ids[parent])])
            inherited[top] = list(dict.fromkeys(found))
        return inherited[pos]

    for pos in np.flatnonzero(affected).tolist():
        new: dict[int, list[int]] = {DATA_DEP: [], CTRL_DEP: []}
        for k in range(ptr[pos], ptr[pos + 1]):
            if cut[k]:
                continue
            parent = int(parents[k])
            new[int(kinds[k])].extend(through(parent) if is_removed[parent] else [int(ids[parent])])
        node_edit = edit(pos)
        node_edit.data_deps = list(dict.fromkeys(new[DATA_DEP]))
        node_edit.ctrl_deps = list(dict.fromkeys(new[CTRL_DEP]))


def _collective(kind: int) -> str:
    return CollectiveCommType.Name(kind)  # type: ignore[arg-type]


def _compressed(path: Path) -> bool:
    return io.compression_for(path) is not None
