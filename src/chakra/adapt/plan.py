"""The first pass of ``adapt``: read one rank with the node table's decoder and decide every change.

Only what the decisions need is kept while the file streams by: the ids seen (for the dependencies,
:mod:`chakra.adapt.deps`) and the positions of the few nodes that change. The result, a
:class:`RankPlan`, is small: the positions taken out, and one :class:`NodeEdit` per node that
changes. :mod:`chakra.adapt.rewrite` applies it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chakra import io
from chakra.adapt.deps import DepScan, Edge, cycle_cuts
from chakra.adapt.report import Change, RankChanges
from chakra.adapt.rules import TargetRules
from chakra.chunks import COMMUNICATION, NodeChunk, categories, iter_chunks
from chakra.graph import CTRL_DEP, DATA_DEP
from chakra.groups import DEFAULT_GROUP, GroupNameError, group_id, parse_process_groups
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
    rewritten into their canonical member; ``pg_name``: the collective's group, written."""

    data_deps: list[int] | None = None
    ctrl_deps: list[int] | None = None
    pg_name: str | None = None
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
    #: the collectives of the default group that are not broadcasts (positions), and before each, in
    #: id order, how many such collectives of other groups the rank has (ASTRA-sim's tags count them)
    world_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    world_after: tuple[int, ...] = ()
    #: the largest group id a collective names (0 when none)
    max_group: int = 0

    @property
    def unchanged(self) -> bool:
        """Nothing in the file changes (it may still be decompressed)."""
        return not len(self.removed) and not self.edits


EditOf = Callable[[int], NodeEdit]


def plan_rank(path: Path, rank: int, rules: TargetRules) -> RankPlan:
    """Decide every change ``rules`` asks of the rank file ``path`` (one streaming read; a second
    one only for a file with dependencies on later nodes, which may hold cycles)."""
    _, chunks, _ = iter_chunks(path)
    changes = RankChanges()
    edits: dict[int, NodeEdit] = {}
    groups: dict[int, tuple[int, ...]] = {}
    scan = DepScan(rules.removed_node_types)
    order = _CollectiveOrder()

    def edit(pos: int) -> NodeEdit:
        found = edits.get(pos)
        if found is None:
            found = edits[pos] = NodeEdit()
        return found

    for chunk in chunks:
        rows, first = chunk.rows, chunk.first
        scan.add_chunk(chunk)
        order.add_chunk(chunk)
        kind_pos, kinds = chunk.ints["comm_type"]
        collective = rows["type"][kind_pos] == NodeType.COMM_COLL_NODE
        for pos, kind in zip(kind_pos[collective].tolist(), kinds[collective].tolist(), strict=True):
            stand_in = rules.stand_ins.get(kind)
            if stand_in is not None:
                node_edit = edit(first + pos)
                node_edit.comm_type, node_edit.recorded_comm_type = stand_in, kind
                changes.add(Change.STAND_IN, f"{_collective(kind)} as {_collective(stand_in)}")
        if rules.comm_off_cpu:
            _plan_cpu_comm(rows["type"], chunk.is_cpu, chunk.ints, first, edit, changes)
        for pos, name in zip(chunk.problem_pos, chunk.problem_name, strict=True):
            if name in rules.read_attrs:
                edit(pos).fix_attrs = True
        for node in chunk.metadata_nodes.values():
            # a text that does not parse is reported by validate (metadata-parse); the node goes all the same
            with contextlib.suppress(ValueError, json.JSONDecodeError):
                groups.update(parse_process_groups(node.inputs.values) if node.inputs.values else {})
    scan.finish()
    removed = np.array(sorted(scan.removed.values()), dtype=np.int64)
    for pos in removed.tolist():
        edits.pop(pos, None)
    for removed_type, change in _REMOVAL_CHANGE.items():
        if removed_type in rules.removed_node_types:
            changes.add(change, count=sum(1 for t in scan.removed_types_found if t == removed_type))
    for _, _, kind in scan.missing:
        changes.add(Change.MISSING_DEP_DROPPED, _DEP_FIELD[kind])
    cut: set[Edge] = set()
    if scan.forward:
        edges, named = cycle_cuts(path)
        cut = set(edges)
        for child_id, parent_id, kind in named:
            changes.add(Change.CYCLE_EDGE_DROPPED, f"{child_id} -> {parent_id} ({_DEP_FIELD[kind]})")
    for pos, (data_deps, ctrl_deps) in scan.new_deps(cut).items():
        node_edit = edit(pos)
        node_edit.data_deps, node_edit.ctrl_deps = data_deps, ctrl_deps
    world_pos, world_after = order.world()
    return RankPlan(
        rank, path, removed, edits, changes, groups, _compressed(path), world_pos, world_after, order.max_group
    )


class _CollectiveOrder:
    """The collectives of a file by id, as far as ASTRA-sim's tags for the default group need them."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.positions: list[int] = []
        self.default: list[bool] = []
        self.max_group = 0

    def add_chunk(self, chunk: NodeChunk) -> None:
        kinds = chunk.column("comm_type")
        types = chunk.rows["type"]
        for j, p in enumerate(chunk.comm_pos.tolist()):
            if types[p] != NodeType.COMM_COLL_NODE or kinds[p] == CollectiveCommType.BROADCAST:
                continue  # ASTRA-sim replays a broadcast: no tag counted
            try:
                group = group_id(chunk.comm_texts["pg_name"][j])
            except GroupNameError:
                continue  # validate reports it (astra-pg-name)
            self.ids.append(int(chunk.rows["id"][p]))
            self.positions.append(chunk.first + p)
            self.default.append(group is DEFAULT_GROUP)
            if group is not DEFAULT_GROUP:
                self.max_group = max(self.max_group, group)

    def world(self) -> tuple[np.ndarray, tuple[int, ...]]:
        """Positions of the default group's collectives, and before each, in id order (ASTRA-sim's
        issue order among ready nodes), how many collectives of other groups come."""
        by_id = np.argsort(np.array(self.ids, dtype=np.int64), kind="stable")
        others, after, positions = 0, [], []
        for k in by_id.tolist():
            if self.default[k]:
                after.append(others)
                positions.append(self.positions[k])
            else:
                others += 1
        return np.array(positions, dtype=np.int64), tuple(after)


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


def _collective(kind: int) -> str:
    return CollectiveCommType.Name(kind)  # type: ignore[arg-type]


def _compressed(path: Path) -> bool:
    return io.compression_for(path) is not None
