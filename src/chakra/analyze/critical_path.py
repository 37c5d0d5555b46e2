"""The critical path of one rank: the longest chain of dependencies, weighted by recorded durations.

:func:`critical_path` finds the path, what it is made of (per operator name, per category) and the
slack of the longest nodes off it.

Semantics (all times integer ns):

* **Graph.** Nodes are weighted by ``dur_ns`` (:class:`~chakra.table.NodeTable`: the
  ``duration_ns`` attribute, else ``duration_micros``). Edges are ``data_deps`` and ``ctrl_deps``
  alike, as FeederV3 issues: a node may start once every node it depends on has finished.
  (PyTorch-derived traces put the call-tree parent in ``ctrl_deps``, so a host op and the ops it
  called count one after the other, as a simulator would run them.) Dependencies on ids missing
  from the file are ignored, as in the replay.
* **Earliest times** (forward pass, ASAP): ``earliest_start = max`` over parents of their
  ``earliest_finish`` (0 for roots), ``earliest_finish = earliest_start + dur``. There are **no
  resource constraints**: nodes of one thread or stream may overlap, so ``length_ns`` is the bound
  the dependencies alone set on the rank's span, not a prediction of it (see
  :mod:`chakra.schedule.rank` for one with resources).
* **Path.** ``length_ns = max earliest_finish``. The path ends at the node that finishes last (the
  lowest file position among ties) and is walked back through, at each step, the parent whose
  earliest finish equals the node's earliest start (the lowest position among ties) until a node
  without dependencies: deterministic, and its durations sum to ``length_ns``.
* **Slack** (backward pass): ``latest_finish`` of a node without children is ``length_ns``, else
  the ``min`` over its children of their ``latest_start = latest_finish - dur``;
  ``slack = latest_start - earliest_start``: how long the node could be delayed without lengthening
  the path. ``slack`` lists the ``top`` longest nodes off the reported path (ties by position);
  a node off it can still have slack 0 when another path is as long.

A dependency cycle, an empty trace and a trace whose durations are all 0 raise
:class:`~chakra.errors.ChakraInputError`. Both passes are iterative loops over int lists in
dependency order (file order when every dependency points backwards, else Kahn's order):
O(nodes + edges), no recursion.

Example:
    cp = critical_path(load_table("llama.0.et"))
    cp.length_ns, list(cp.by_operator.items())[:3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from chakra.analyze.frames import to_frame
from chakra.graph import CycleError, topological_order
from chakra.table import CATEGORY_NAMES, NodeTable

#: Nodes off the path listed with their slack unless told otherwise.
DEFAULT_TOP = 20


@dataclass
class SlackEntry:
    """A node off the critical path and how long it could slip (``slack_ns``) without lengthening it."""

    position: int
    node_id: int
    name: str
    category: str
    dur_ns: int
    slack_ns: int


@dataclass
class CriticalPath:
    """The longest dependency path of one rank (see the module doc).

    * ``length_ns``: sum of the durations along it; ``positions`` / ``node_ids``: its nodes in order
    * ``by_operator``: ns on the path per node name, most first (ties by name); ``by_category``: ns
      per category (every category, zeros included)
    * ``slack``: the longest nodes off the path with their slack
    * ``names``, ``categories``, ``dur_ns``, ``start_ns``: per path node, its name, category, duration
      and earliest start (on the path, earliest and latest start agree)
    """

    rank: int | None
    length_ns: int
    positions: list[int]
    node_ids: list[int]
    by_operator: dict[str, int]
    by_category: dict[str, int]
    slack: list[SlackEntry]
    names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    dur_ns: list[int] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """Every field, JSON-ready."""
        return asdict(self)

    def to_pandas(self):  # type: ignore[no-untyped-def]  # pandas is optional
        """One row per path node, in path order: ``position, node_id, name, category, dur_ns, start_ns``."""
        columns = ["position", "node_id", "name", "category", "dur_ns", "start_ns"]
        rows = zip(self.positions, self.node_ids, self.names, self.categories, self.dur_ns, self.start_ns, strict=True)
        return to_frame((dict(zip(columns, row, strict=True)) for row in rows), columns)


def critical_path(table: NodeTable, *, top: int = DEFAULT_TOP) -> CriticalPath:
    """The longest path through one rank's dependency graph, weighted by ``dur_ns``, with the slack of
    the ``top`` longest nodes off it (module doc).

    Example (a diamond ``a -> b, c -> d`` of 1, 5, 2, 1 µs): the path is ``a, b, d``, 7000 ns; ``c``
    has 3000 ns of slack.
    """
    table.require_durations()
    graph = table.graph
    n = len(table)
    dur = table.dur_ns.tolist()
    ptr = graph.dep_ptr.tolist()
    parents = graph.dep_pos.tolist()
    order = _dependency_order(table)
    finish = _earliest_finish(order, ptr, parents, dur)
    finish_np = np.array(finish, dtype=np.int64)
    end = int(np.argmax(finish_np))  # the first of the ties: the lowest position
    length_ns = finish[end]
    latest = _latest_finish(order, ptr, parents, dur, length_ns)
    path = _walk_back(end, ptr, parents, dur, finish)

    names = [table.names[pos] for pos in path]
    categories = [CATEGORY_NAMES[c] for c in table.category[path].tolist()]
    path_dur = [dur[pos] for pos in path]
    by_operator: dict[str, int] = {}
    by_category = dict.fromkeys(CATEGORY_NAMES, 0)
    for name, category, d in zip(names, categories, path_dur, strict=True):
        by_operator[name] = by_operator.get(name, 0) + d
        by_category[category] += d

    on_path = np.zeros(n, dtype=bool)
    on_path[path] = True
    off_path = np.flatnonzero(~on_path)
    longest = off_path[np.argsort(-table.dur_ns[off_path], kind="stable")[: max(top, 0)]].tolist()
    ids = table.ids
    slack = [
        SlackEntry(
            position=pos,
            node_id=int(ids[pos]),
            name=table.names[pos],
            category=CATEGORY_NAMES[table.category[pos]],
            dur_ns=dur[pos],
            slack_ns=latest[pos] - finish[pos],
        )
        for pos in longest
    ]
    return CriticalPath(
        rank=table.rank,
        length_ns=length_ns,
        positions=path,
        node_ids=ids[path].tolist(),
        by_operator=dict(sorted(by_operator.items(), key=lambda item: (-item[1], item[0]))),
        by_category=by_category,
        slack=slack,
        names=names,
        categories=categories,
        dur_ns=path_dur,
        start_ns=[finish[pos] - dur[pos] for pos in path],
    )


def _dependency_order(table: NodeTable) -> Sequence[int]:
    """Positions with every node after the nodes it depends on (:func:`chakra.graph.topological_order`:
    file order when every dependency points backwards, the common case).

    Raises :class:`chakra.graph.CycleError` naming the ids of a cycle when there is one.
    """
    try:
        order = topological_order(table.graph, path=table.path)
    except CycleError as error:
        raise CycleError(error.ids, error.blocked, path=table.path, what=", so there is no critical path") from None
    # the common case, file order: a range walks faster than a list of a million ints
    return range(len(order)) if bool((order == np.arange(len(order))).all()) else order.tolist()


def _earliest_finish(order: Sequence[int], ptr: list[int], parents: list[int], dur: list[int]) -> list[int]:
    """Per position, its earliest finish in ns (forward pass of the module doc)."""
    finish = [0] * len(dur)
    for pos in order:
        lo = ptr[pos]
        hi = ptr[pos + 1]
        if lo == hi:
            finish[pos] = dur[pos]
        elif hi - lo == 1:  # the common case, without building a list
            finish[pos] = finish[parents[lo]] + dur[pos]
        else:
            finish[pos] = max([finish[p] for p in parents[lo:hi]]) + dur[pos]
    return finish


def _latest_finish(
    order: Sequence[int], ptr: list[int], parents: list[int], dur: list[int], length_ns: int
) -> list[int]:
    """Per position, its latest finish in ns (backward pass): each node, once all its children have
    lowered its latest finish, lowers its parents' to its own latest start."""
    latest = [length_ns] * len(dur)
    for pos in reversed(order):
        start = latest[pos] - dur[pos]
        for k in range(ptr[pos], ptr[pos + 1]):
            parent = parents[k]
            if start < latest[parent]:
                latest[parent] = start
    return latest


def _walk_back(end: int, ptr: list[int], parents: list[int], dur: list[int], finish: list[int]) -> list[int]:
    """The path ending at ``end``, from a node without dependencies: each step goes to the
    lowest-position parent that finishes exactly when the node can start."""
    path = [end]
    pos = end
    while ptr[pos] < ptr[pos + 1]:
        start = finish[pos] - dur[pos]
        pos = min(p for p in parents[ptr[pos] : ptr[pos + 1]] if finish[p] == start)
        path.append(pos)
    path.reverse()
    return path
