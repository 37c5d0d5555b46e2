"""Where one rank's time goes: compute, communication, memory, idle, overlap; time per operator.

:func:`breakdown` splits a rank's timeline into busy and idle time per category and per track and
measures how much communication hides behind compute; :func:`operator_stats` and
:func:`top_operators` add up time per operator name, inclusive and exclusive.

Semantics (all times integer ns):

* **Timing** (``timing=``): ``"recorded"`` places every node at its recorded ``start_time_micros``
  (reported as ``"simulated"`` for a simulated run written by ``chakra simulate --timed``)
  (relative to the first recorded start); nodes without one (0, proto3's "absent") have no place on
  the timeline and are left out of every interval (they still count in node, byte and operator
  totals). ``"replay"`` places every node where the list-scheduler replay of
  :mod:`chakra.schedule.rank` starts it (recorded durations, one op at a time per thread and
  stream), so generated or simulator-only workloads without start times can be analysed too.
  ``"auto"`` (default): recorded when any node records a start, else replay. ``"recorded"`` on a
  trace without start times is a :class:`~chakra.errors.ChakraInputError`.
* **Intervals.** A placed node occupies ``[start, start + dur_ns)``. Category times are lengths of
  interval *unions*, so nested or overlapping nodes of one category count once. Metadata and other
  nodes (category ``other``) are left out of busy and idle time.
* ``span_ns``: first start to last end over the placed compute, communication and memory nodes.
* ``idle_ns = span_ns - |K ∪ C ∪ M|`` (K, C, M: the compute, communication and memory unions), so
  by inclusion-exclusion ``|K| + |C| + |M| - |K∩C| - |K∩M| - |C∩M| + |K∩C∩M| + idle = span``; in
  particular ``max(compute, communication, memory) <= span - idle <= compute + communication + memory``,
  with ``span - idle = compute + communication - comm_overlapped`` when ``memory_ns`` is 0.
* ``comm_overlapped_ns``: time during which some communication *and* some compute run (any track),
  ``|C ∩ K| = |C| + |K| - |C ∪ K|``; ``comm_exposed_ns = communication_ns - comm_overlapped_ns``.
* ``busy_by_track``: union of the placed compute, communication and memory nodes of each track
  (threads, streams and the ASTRA-sim slots of :mod:`chakra.table`), every track of the
  table (0 when it has none), so each is at most ``span_ns - idle_ns``.
* ``bytes_by_collective`` / ``count_by_collective``: summed ``comm_size`` and node count per
  ``CollectiveCommType`` name for collectives (``"UNSPECIFIED"`` without ``comm_type``,
  ``"UNKNOWN_<n>"`` for a value outside the enum), ``"SEND"`` / ``"RECV"`` for point-to-point
  nodes, every communication node counted whether placed or not; largest volume first.
* ``untimed_comm_nodes``: communication nodes whose duration is 0. Generated workloads leave
  communication untimed for a simulator to decide; their communication time here is 0, which
  ``chakra simulate`` fills in.

**Exclusive time** (:func:`operator_stats`). Nesting is interval containment on one *resource* (a
host thread or device stream; the ASTRA-sim slots of nodes without either are not a call stack):
node ``j`` is nested in node ``i`` when both are placed on the same resource and
``start_i <= start_j`` and ``end_j <= end_i``; of two identical intervals the one later in the file
is nested in the earlier. The *parent* of a node is its innermost container (latest start, then
earliest end, then lowest position). A node's exclusive time is its duration minus the length of the
union of its children's intervals, i.e. the time inside it that no node nested in it covers (the
children enclose every deeper descendant). Unplaced nodes and nodes off the resources keep their
full duration. Computed after one sort per resource with a single pass of a stack of open
intervals (each node pushed and popped once) and vectorized unions: O(n log n).

Example:
    table = load_table("llama.0.et")
    b = breakdown(table)
    b.compute_ns, b.comm_exposed_ns, b.idle_ns
    [(s.name, s.exclusive_ns) for s in top_operators(table, 5, by="exclusive")]
"""

from __future__ import annotations

from array import array
from dataclasses import asdict, dataclass
from itertools import pairwise

import numpy as np

from chakra.analyze.choices import RankBy, Scope, Timing
from chakra.analyze.frames import to_frame
from chakra.attrs import TIMING_ATTR, TIMING_SIMULATED
from chakra.errors import ChakraInputError
from chakra.schedule.rank import scheduled_starts_ns
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, CollectiveCommType
from chakra.table import CATEGORY_NAMES, COMMUNICATION, COMPUTE, MEMORY, NO_COMM_TYPE, OTHER, NodeTable

# Timing and RankBy are defined in chakra.analyze.choices, which the CLI imports without numpy; they
# are documented and used here, and importable from here as before.
TIMING_RECORDED, TIMING_REPLAY, TIMING_AUTO = Timing.RECORDED.value, Timing.REPLAY.value, Timing.AUTO.value
TIMINGS = tuple(t.value for t in Timing)

#: Keys of point-to-point nodes in ``bytes_by_collective``, after their node types.
SEND_KEY, RECV_KEY = "SEND", "RECV"
#: Key of a collective node without a ``comm_type`` attribute.
UNSPECIFIED_COLLECTIVE = "UNSPECIFIED"


BY_TOTAL, BY_EXCLUSIVE = RankBy.TOTAL.value, RankBy.EXCLUSIVE.value
#: Operators :func:`top_operators` returns unless told otherwise.
DEFAULT_TOP = 20

#: Room for one name's code below the category in the combined grouping key of :func:`operator_stats`.
_CATEGORY_SLOTS = len(CATEGORY_NAMES)


#: Short headers of :meth:`Breakdown.times_ns` (comm: communication; overlap: hidden behind compute).
TIME_HEADERS = ("span", "compute", "comm", "overlap", "exposed", "memory", "idle")


@dataclass
class Breakdown:
    """Where one rank's time goes; all times in ns (see the module doc for each quantity)."""

    rank: int | None
    timing: str
    span_ns: int
    compute_ns: int
    communication_ns: int
    memory_ns: int
    idle_ns: int
    comm_overlapped_ns: int
    comm_exposed_ns: int
    busy_by_track: dict[str, int]
    nodes_by_category: dict[str, int]
    bytes_by_collective: dict[str, int]
    count_by_collective: dict[str, int]
    untimed_comm_nodes: int = 0

    def to_dict(self) -> dict[str, object]:
        """Every field, JSON-ready."""
        return asdict(self)

    def times_ns(self) -> tuple[int, ...]:
        """The times tables show, in the order of :data:`TIME_HEADERS` (ns)."""
        return (
            self.span_ns,
            self.compute_ns,
            self.communication_ns,
            self.comm_overlapped_ns,
            self.comm_exposed_ns,
            self.memory_ns,
            self.idle_ns,
        )

    def to_pandas(self):  # type: ignore[no-untyped-def]  # pandas is optional
        """One row per quantity: ``rank, timing, quantity, key, value``; ``key`` names the track,
        category or collective of the per-key quantities and is empty for the scalars."""
        rows = []
        for quantity, value in asdict(self).items():
            if quantity in ("rank", "timing"):
                continue
            items = value.items() if isinstance(value, dict) else [("", value)]
            rows.extend(
                {"rank": self.rank, "timing": self.timing, "quantity": quantity, "key": key, "value": v}
                for key, v in items
            )
        return to_frame(rows, ["rank", "timing", "quantity", "key", "value"])


@dataclass
class OperatorTotal:
    """Time of every node sharing one name and category: ``total_ns``, the sum of their durations,
    over ``count`` nodes (needs no schedule: :func:`operator_totals`)."""

    name: str
    category: str
    count: int
    total_ns: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class OperatorStat(OperatorTotal):
    """:class:`OperatorTotal` with ``exclusive_ns``, the sum of the nodes' exclusive times (see the
    module doc), which needs the nodes placed in time."""

    exclusive_ns: int


def breakdown(table: NodeTable, *, timing: str = TIMING_AUTO, scope: Scope = Scope.ALL) -> Breakdown:
    """Busy, idle and overlapped time of one rank, per category and track, in ns (module doc).
    ``scope=Scope.DEVICE`` counts only the nodes that are no CPU ops (kernels, copies and
    memsets, communication): a GPU's time split, idle being the time between its first start and
    last end when none of them ran.

    Raises :class:`ChakraInputError` for an empty trace, one whose durations are all 0, a
    ``timing`` it does not know, or ``timing="recorded"`` without recorded start times.

    Example:
        b = breakdown(table)
        b.comm_exposed_ns / b.span_ns                          # share of the step lost to communication
    """
    table.require_durations()
    used, start_ns, placed = node_starts(table, timing)
    if Scope(scope) is Scope.DEVICE:
        placed = placed & ~table.is_cpu
    end_ns = start_ns + table.dur_ns
    category = table.category
    busy = placed & (category != OTHER)
    compute = placed & (category == COMPUTE)
    comm = placed & (category == COMMUNICATION)
    memory = placed & (category == MEMORY)
    compute_ns = _union_ns(start_ns[compute], end_ns[compute])
    communication_ns = _union_ns(start_ns[comm], end_ns[comm])
    either = compute | comm
    overlapped_ns = compute_ns + communication_ns - _union_ns(start_ns[either], end_ns[either])
    span_ns = int(end_ns[busy].max() - start_ns[busy].min()) if busy.any() else 0
    bytes_by, count_by = collective_volume(table)
    return Breakdown(
        rank=table.rank,
        timing=TIMING_SIMULATED if used == TIMING_RECORDED and _simulated(table) else used,
        span_ns=span_ns,
        compute_ns=compute_ns,
        communication_ns=communication_ns,
        memory_ns=_union_ns(start_ns[memory], end_ns[memory]),
        idle_ns=span_ns - _union_ns(start_ns[busy], end_ns[busy]),
        comm_overlapped_ns=overlapped_ns,
        comm_exposed_ns=communication_ns - overlapped_ns,
        busy_by_track=_busy_by_track(table, start_ns, end_ns, busy),
        nodes_by_category=_count_by_category(category),
        bytes_by_collective=bytes_by,
        count_by_collective=count_by,
        untimed_comm_nodes=table.untimed_comm_nodes(),
    )


def _operator_groups(table: NodeTable) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray, np.ndarray]:
    """``(name and category of each group, group of each node, node count and total ns of each group)``."""
    index: dict[str, int] = {}
    setdefault = index.setdefault
    name_code = np.fromiter((setdefault(name, len(index)) for name in table.names), dtype=np.int64, count=len(table))
    key = name_code * _CATEGORY_SLOTS + table.category
    keys, group = np.unique(key, return_inverse=True)
    names = list(index)
    labels = [(names[k // _CATEGORY_SLOTS], CATEGORY_NAMES[k % _CATEGORY_SLOTS]) for k in keys.tolist()]
    return labels, group, np.bincount(group, minlength=len(keys)), _sum_by_group(group, table.dur_ns, len(keys))


def _simulated(table: NodeTable) -> bool:
    """Whether the table's recorded times are a simulated run's (:mod:`chakra.sim.timed`)."""
    return any(a.name == TIMING_ATTR and a.string_val.startswith(TIMING_SIMULATED) for a in table.metadata.attr)


def operator_totals(table: NodeTable) -> list[OperatorTotal]:
    """Total ns per (node name, category), most first (ties by name, then category), from the
    durations alone: no schedule, so it answers on a trace whose dependencies have a cycle.

    Raises :class:`ChakraInputError` for an empty trace.
    """
    table.require_nodes()
    labels, _, counts, totals = _operator_groups(table)
    stats = [
        OperatorTotal(name, category, c, t)
        for (name, category), c, t in zip(labels, counts.tolist(), totals.tolist(), strict=True)
    ]
    stats.sort(key=lambda s: (-s.total_ns, s.name, s.category))
    return stats


def operator_stats(table: NodeTable, *, timing: str = TIMING_AUTO) -> list[OperatorStat]:
    """Total and exclusive ns per (node name, category), every one of them, most total time first
    (ties by name, then category). ``timing`` places the nodes for the nesting (module doc).

    Raises :class:`ChakraInputError` for an empty trace or a ``timing`` that does not fit.
    """
    table.require_nodes()
    _, start_ns, placed = node_starts(table, timing)
    exclusive = exclusive_ns(table, start_ns, placed)
    labels, group, counts, totals = _operator_groups(table)
    exclusives = _sum_by_group(group, exclusive, len(labels))
    stats = [
        OperatorStat(name, category, c, t, e)
        for (name, category), c, t, e in zip(labels, counts.tolist(), totals.tolist(), exclusives.tolist(), strict=True)
    ]
    stats.sort(key=lambda s: (-s.total_ns, s.name, s.category))
    return stats


def top_operators(
    table: NodeTable, n: int = DEFAULT_TOP, *, by: str = BY_TOTAL, timing: str = TIMING_AUTO
) -> list[OperatorStat]:
    """The ``n`` operators (name and category) with the most ``by="total"`` or ``by="exclusive"``
    time, most first (ties by name, then category); see :func:`operator_stats`."""
    if by not in (BY_TOTAL, BY_EXCLUSIVE):
        raise ChakraInputError(f"by must be {BY_TOTAL!r} or {BY_EXCLUSIVE!r}, not {by!r}")
    stats = operator_stats(table, timing=timing)
    if by == BY_EXCLUSIVE:
        stats.sort(key=lambda s: (-s.exclusive_ns, s.name, s.category))
    return stats[: max(n, 0)]


def breakdown_and_top(
    table: NodeTable, *, timing: str = TIMING_AUTO, n: int = DEFAULT_TOP, by: str = BY_TOTAL
) -> tuple[Breakdown, list[OperatorStat]]:
    """:func:`breakdown` and :func:`top_operators` of one table together: what a workload command
    keeps of each rank (:meth:`chakra.workload.Workload.map`) once the table is gone."""
    return breakdown(table, timing=timing), top_operators(table, n, by=by, timing=timing)


def node_starts(table: NodeTable, timing: str = TIMING_AUTO) -> tuple[str, np.ndarray, np.ndarray]:
    """``(timing used, start_ns, placed)``: each node's start in ns (int64) under ``timing`` and
    whether it has a place on the timeline (bool; always true under replay). See the module doc.

    Raises :class:`ChakraInputError` for an unknown ``timing``, ``"recorded"`` without start times,
    and (replay) a dependency cycle.
    """
    if timing not in TIMINGS:
        raise ChakraInputError(
            f"timing must be one of {', '.join(TIMINGS)}, not {timing!r}", path=table.path, hint="use auto"
        )
    table.require_nodes()
    if timing == TIMING_RECORDED or (timing == TIMING_AUTO and table.has_start_times):
        return TIMING_RECORDED, table.start_ns(), table.start_us > 0
    return TIMING_REPLAY, scheduled_starts_ns(table), np.ones(len(table), dtype=bool)


def exclusive_ns(table: NodeTable, start_ns: np.ndarray, placed: np.ndarray) -> np.ndarray:
    """Per node, its duration minus the union of its children's intervals on its resource (int64 ns;
    nesting as in the module doc); ``start_ns`` and ``placed`` as from :func:`node_starts`.

    Example: on one thread ``a = [0, 10)`` holding ``b = [2, 5)`` and ``c = [4, 8)`` (``c`` is not
    inside ``b``): ``a`` keeps ``10 - |[2, 8)| = 4``, ``b`` 3, ``c`` 4.
    """
    dur_ns = table.dur_ns
    exclusive = dur_ns.copy()
    resource = table.resource()
    nested = np.flatnonzero(placed & (resource >= 0))
    if not len(nested):
        return exclusive
    end_ns = start_ns + dur_ns
    # resource, then start, then the longest first (a container before what it holds), then position
    order = nested[np.lexsort((nested, -end_ns[nested], start_ns[nested], resource[nested]))]
    parent = _innermost_containers(resource[order], end_ns[order])
    has_parent = np.flatnonzero(parent >= 0)
    if not len(has_parent):
        return exclusive
    # children grouped by parent, in start order within a group (a stable sort keeps it)
    children = has_parent[np.argsort(parent[has_parent], kind="stable")]
    parents = parent[children]
    parent_pos = order[parents]
    child_pos = order[children]
    first = np.flatnonzero(np.r_[True, parents[1:] != parents[:-1]])
    # each parent's children shifted past the previous parent's duration, so one running maximum
    # over all groups never carries an end from one group into the next
    group_dur = dur_ns[parent_pos[first]]
    offset = np.zeros(len(first), dtype=np.int64)
    np.cumsum(group_dur[:-1] + 1, out=offset[1:])
    shift = np.repeat(offset, np.diff(np.r_[first, len(children)])) - start_ns[parent_pos]
    covered = _covered_sorted(start_ns[child_pos] + shift, end_ns[child_pos] + shift)
    exclusive[parent_pos[first]] -= np.add.reduceat(covered, first)
    return exclusive


def _innermost_containers(resource: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For intervals sorted by (resource, start, end descending, position): the index of each one's
    innermost container (the nearest earlier interval on its resource that ends no earlier), -1 for none.

    Every earlier interval of a resource starts no later, so "ends no earlier" is containment.
    """
    parent = array("q", bytes(8 * len(end_ns)))
    ends = end_ns.tolist()
    bounds = np.flatnonzero(np.r_[True, resource[1:] != resource[:-1], True]).tolist()
    for lo, hi in pairwise(bounds):
        stack: list[int] = []
        pop, push = stack.pop, stack.append
        for k in range(lo, hi):
            end = ends[k]
            while stack and ends[stack[-1]] < end:
                pop()
            parent[k] = stack[-1] if stack else -1
            push(k)
    return np.frombuffer(parent, dtype=np.int64)


def _covered_sorted(start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Per interval (sorted by start), the time it adds to the union of the ones before it."""
    reach = np.maximum.accumulate(end_ns)
    before = np.empty_like(reach)
    before[:1] = start_ns[:1]
    before[1:] = reach[:-1]
    return np.maximum(reach - np.maximum(start_ns, before), 0)


def _union_ns(start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Length of the union of the intervals ``[start, end)``, in ns."""
    if not len(start_ns):
        return 0
    order = np.argsort(start_ns, kind="stable")
    return int(_covered_sorted(start_ns[order], end_ns[order]).sum())


def _busy_by_track(table: NodeTable, start_ns: np.ndarray, end_ns: np.ndarray, counted: np.ndarray) -> dict[str, int]:
    """Union of the ``counted`` nodes' intervals per track name, every track in track order (0 for none)."""
    busy = dict.fromkeys(table.track_names, 0)
    on_track = np.flatnonzero(counted & (table.track >= 0))
    if not len(on_track):
        return busy
    order = on_track[np.lexsort((start_ns[on_track], table.track[on_track]))]
    tracks = table.track[order]
    bounds = np.flatnonzero(np.r_[True, tracks[1:] != tracks[:-1], True]).tolist()
    for lo, hi in pairwise(bounds):
        positions = order[lo:hi]
        busy[table.track_names[tracks[lo]]] = int(_covered_sorted(start_ns[positions], end_ns[positions]).sum())
    return busy


def collective_volume(table: NodeTable) -> tuple[dict[str, int], dict[str, int]]:
    """``(bytes, count)`` per collective name (``SEND``/``RECV`` for p2p), most bytes first, ties by
    name: the volumes :class:`Breakdown` reports, from the node table alone (no schedule)."""
    node_type = table.graph.node_type
    keys: list[str] = []
    volumes: list[int] = []
    counts: list[int] = []
    coll = node_type == COMM_COLL_NODE
    types, group = np.unique(table.comm_type[coll], return_inverse=True)
    sizes = _sum_by_group(group, table.comm_size[coll], len(types))
    keys.extend(_collective_name(comm_type) for comm_type in types.tolist())
    volumes.extend(sizes.tolist())
    counts.extend(np.bincount(group, minlength=len(types)).tolist())
    for key, kind in ((SEND_KEY, COMM_SEND_NODE), (RECV_KEY, COMM_RECV_NODE)):
        mask = node_type == kind
        if mask.any():
            keys.append(key)
            volumes.append(int(table.comm_size[mask].sum()))
            counts.append(int(mask.sum()))
    ranked = sorted(range(len(keys)), key=lambda i: (-volumes[i], keys[i]))
    return {keys[i]: volumes[i] for i in ranked}, {keys[i]: counts[i] for i in ranked}


def _collective_name(comm_type: int) -> str:
    if comm_type == NO_COMM_TYPE:
        return UNSPECIFIED_COLLECTIVE
    if comm_type in CollectiveCommType.values():
        return CollectiveCommType.Name(comm_type)
    return f"UNKNOWN_{comm_type}"


def _sum_by_group(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per group index (``np.bincount`` would go through float64)."""
    sums = np.zeros(groups, dtype=np.int64)
    np.add.at(sums, group, values)
    return sums


def _count_by_category(category: np.ndarray) -> dict[str, int]:
    counts = np.bincount(category, minlength=len(CATEGORY_NAMES)).tolist()
    return dict(zip(CATEGORY_NAMES, counts, strict=True))
