"""The dependency side of ``adapt``'s first pass, in memory that does not grow with the file.

A dependency on a node written earlier in the file cannot be part of a cycle and is not missing.
So while the chunks stream by, only the ids seen so far are kept (:class:`IdSet`: a flag per id,
about one byte a node for the usual dense ids) and every dependency is classed at once: *backward*
(on an id already seen: nothing to do), on a removed node (its dependent is recorded), or *pending*
(on an id not seen yet). At the end a pending dependency is either missing (its id never came) or
*forward* (it came later). Only a file with forward dependencies can have a cycle; for it
:func:`cycle_cuts` reads the file once more into a whole graph and breaks the cycles
(:func:`chakra.graph.break_cycles`): the one case whose memory grows with the file.

The dependency lists of the few nodes that may change (dependents of removed nodes, nodes with
pending dependencies, the removed nodes themselves) are recorded as ids, and :meth:`DepScan.new_deps`
rewrites them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chakra.chunks import NodeChunk, iter_chunks
from chakra.graph import CTRL_DEP, DATA_DEP, break_cycles, graph_from_arrays

#: Ids below this are flags in an array (at most this many bytes); larger ones go to a set.
FLAG_IDS_LIMIT = 1 << 26
#: First size of the flag array, doubled as larger ids come.
FIRST_FLAGS = 1 << 16

Edge = tuple[int, int, int]  # (child position, parent id, DATA_DEP or CTRL_DEP)


class IdSet:
    """Node ids seen so far: a flag per id below :data:`FLAG_IDS_LIMIT`, a set for the rest."""

    def __init__(self) -> None:
        self._flags = np.zeros(FIRST_FLAGS, dtype=bool)
        self._large: set[int] = set()

    def add(self, ids: np.ndarray) -> None:
        small = ids < FLAG_IDS_LIMIT
        if not small.all():
            self._large.update(ids[~small].tolist())
        ids = ids[small].astype(np.int64)
        if len(ids):
            top = int(ids.max())
            if top >= len(self._flags):
                size = len(self._flags)
                while size <= top:
                    size *= 2
                grown = np.zeros(size, dtype=bool)
                grown[: len(self._flags)] = self._flags
                self._flags = grown
            self._flags[ids] = True

    def contains(self, ids: np.ndarray) -> np.ndarray:
        found = np.zeros(len(ids), dtype=bool)
        small = ids < len(self._flags)
        found[small] = self._flags[ids[small].astype(np.int64)]
        if self._large:
            large = np.flatnonzero(~small)
            found[large] = [int(i) in self._large for i in ids[large].tolist()]
        return found


@dataclass
class DepScan:
    """The dependency facts of one file, gathered chunk by chunk (module docstring)."""

    removed_types: frozenset[int]
    seen: IdSet = field(default_factory=IdSet)
    removed: dict[int, int] = field(default_factory=dict)  # removed node id -> position
    removed_types_found: list[int] = field(default_factory=list)  # the type of each removed node
    recorded: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)  # position -> (data, ctrl)
    pending: list[Edge] = field(default_factory=list)
    missing: set[Edge] = field(default_factory=set)
    forward: list[Edge] = field(default_factory=list)

    def add_chunk(self, chunk: NodeChunk) -> None:
        """Class every dependency of the chunk's nodes; record the nodes that may change."""
        rows, first = chunk.rows, chunk.first
        n = len(rows)
        ids = rows["id"]
        removed_here = np.flatnonzero(_among(rows["type"], list(self.removed_types)))
        for k in removed_here.tolist():
            self.removed[int(ids[k])] = first + k
            self.removed_types_found.append(int(rows["type"][k]))
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        removed_ids = np.fromiter(self.removed, dtype=np.uint64, count=len(self.removed))
        touched = np.zeros(n, dtype=bool)
        touched[removed_here] = True
        for kind, counts, deps in (
            (DATA_DEP, rows["n_data"], chunk.data_deps),
            (CTRL_DEP, rows["n_ctrl"], chunk.ctrl_deps),
        ):
            if not len(deps):
                continue
            child = np.repeat(np.arange(n, dtype=np.int64), counts)
            back = self.seen.contains(deps)
            # an id of this chunk, written before its dependent, is backward too
            at = np.minimum(np.searchsorted(sorted_ids, deps), n - 1)
            here = (sorted_ids[at] == deps) & (order[at] < child)
            back |= here
            on_removed = back & _among(deps, removed_ids)
            touched[child[on_removed | ~back]] = True
            for k in np.flatnonzero(~back).tolist():
                self.pending.append((first + int(child[k]), int(deps[k]), kind))
        self.seen.add(ids)
        if touched.any():
            data_at = np.concatenate(([0], np.cumsum(rows["n_data"], dtype=np.int64)))
            ctrl_at = np.concatenate(([0], np.cumsum(rows["n_ctrl"], dtype=np.int64)))
            for k in np.flatnonzero(touched).tolist():
                self.recorded[first + k] = (
                    chunk.data_deps[data_at[k] : data_at[k + 1]].tolist(),
                    chunk.ctrl_deps[ctrl_at[k] : ctrl_at[k + 1]].tolist(),
                )

    def finish(self) -> None:
        """Settle the pending dependencies: missing, or forward (on a node written later)."""
        if not self.pending:
            return
        present = self.seen.contains(np.array([dep for _, dep, _ in self.pending], dtype=np.uint64))
        for edge, there in zip(self.pending, present.tolist(), strict=True):
            if there:
                self.forward.append(edge)
            else:
                self.missing.add(edge)
        self.pending = []

    def new_deps(self, cut: set[Edge]) -> dict[int, tuple[list[int], list[int]]]:
        """Position -> new ``(data_deps, ctrl_deps)`` of every kept node whose dependencies change:
        missing and ``cut`` edges dropped, a removed node replaced by what it waited for (through
        chains of removed nodes)."""
        inherited: dict[int, list[int]] = {}

        def kept(pos: int, ids: list[int], kind: int, visiting: frozenset[int]) -> list[int]:
            out: list[int] = []
            for dep in ids:
                if (pos, dep, kind) in self.missing or (pos, dep, kind) in cut:
                    continue
                if dep in self.removed:
                    out.extend(through(dep, visiting))
                else:
                    out.append(dep)
            return list(dict.fromkeys(out))

        def through(removed_id: int, visiting: frozenset[int]) -> list[int]:
            if removed_id in inherited:
                return inherited[removed_id]
            if removed_id in visiting:  # removed nodes waiting on each other: nothing outside to wait for
                return []
            pos = self.removed[removed_id]
            data, ctrl = self.recorded.get(pos, ([], []))
            inside = visiting | {removed_id}
            found = list(dict.fromkeys(kept(pos, data, DATA_DEP, inside) + kept(pos, ctrl, CTRL_DEP, inside)))
            inherited[removed_id] = found
            return found

        removed_positions = set(self.removed.values())
        out: dict[int, tuple[list[int], list[int]]] = {}
        for pos, (data, ctrl) in self.recorded.items():
            if pos in removed_positions:
                continue
            new = (kept(pos, data, DATA_DEP, frozenset()), kept(pos, ctrl, CTRL_DEP, frozenset()))
            if new != (data, ctrl):
                out[pos] = new
        return out


#: Up to this many values, membership is tested by comparisons (np.isin sorts, which costs more).
FEW_VALUES = 8


def _among(values: np.ndarray, wanted: np.ndarray | list[int]) -> np.ndarray:
    """``np.isin(values, wanted)``, fast for the usual handful of ``wanted`` values."""
    if len(wanted) > FEW_VALUES:
        return np.isin(values, wanted)
    found = np.zeros(len(values), dtype=bool)
    for value in wanted:
        found |= values == value
    return found


def cycle_cuts(path: Path) -> tuple[list[Edge], list[tuple[int, int, int]]]:
    """The edges to drop so that ``path`` has no cycle (:func:`chakra.graph.break_cycles` over the
    whole file, read once more): as ``(child position, parent id, kind)``, and as ``(child id,
    parent id, kind)`` for the report."""
    ids, n_data, n_ctrl, data, ctrl = [], [], [], [], []
    _, chunks, _ = iter_chunks(path)
    for chunk in chunks:
        ids.append(chunk.rows["id"].copy())
        n_data.append(chunk.rows["n_data"].astype(np.int64))
        n_ctrl.append(chunk.rows["n_ctrl"].astype(np.int64))
        data.append(chunk.data_deps.copy())
        ctrl.append(chunk.ctrl_deps.copy())
    all_ids = np.concatenate(ids)
    n = len(all_ids)
    zeros = np.zeros(n, dtype=np.uint64)
    graph = graph_from_arrays(
        all_ids, np.zeros(n, dtype=np.int32), zeros, zeros,
        np.concatenate(n_data), np.concatenate(data), np.concatenate(n_ctrl), np.concatenate(ctrl),
    )  # fmt: skip
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    edges, named = [], []
    for k in break_cycles(graph):
        child, parent_id, kind = int(child_of[k]), int(graph.ids[graph.dep_pos[k]]), int(graph.dep_kind[k])
        edges.append((child, parent_id, kind))
        named.append((int(graph.ids[child]), parent_id, kind))
    return edges, named
