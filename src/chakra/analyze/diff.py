"""Compare two traces (two runs, two configurations, before and after a change): what got slower, and why.

:func:`diff_tables` compares two ranks, :func:`diff_workloads` two workloads. The result says how
the span changed, splits that change into disjoint causes, and lists every operator that was
added, removed, or got faster or slower.

* **Times** come from :func:`chakra.analyze.breakdown.breakdown` with ``timing`` (recorded starts
  when the trace has them, else the replay) for spans and categories, and from
  :func:`chakra.analyze.breakdown.operator_stats` for operators (``total_ns``: summed durations).
* **Explained span change.** The span of a rank is the sum of four disjoint pieces of time:

  - ``compute``: some compute runs (``compute_ns``),
  - ``comm_exposed``: communication runs and no compute does (``comm_exposed_ns``),
  - ``memory_exposed``: only memory operations run, neither compute nor communication;
    ``span - idle - compute - comm_exposed``, since ``compute + comm_exposed`` is the union of compute
    and communication and ``span - idle`` the union of all three (see the breakdown's definitions),
  - ``idle``: nothing runs (``idle_ns``).

  ``explained`` holds each piece's change ``b - a``, so the four sum exactly to ``delta_span_ns``:
  a step that got 3 ms slower because an all-reduce no longer hides behind compute shows
  ``comm_exposed: +3 ms`` even though ``communication`` itself did not change.
* **Operators** are matched by (name, category). ``status``: ``added`` (only in ``b``),
  ``removed`` (only in ``a``), ``slower``/``faster`` when ``total_ns`` changed by at least
  :data:`MIN_CHANGE_FRACTION` of ``a``'s *and* at least :data:`MIN_CHANGE_NS`, else ``unchanged``
  (a count that changed with a total that did not stays ``unchanged``; the counts are in the row).
  Sorted by ``|delta_ns|``, largest first, ties by name and category.
* **Workloads** (:func:`diff_workloads`): with ``rank`` given, that rank of each. With
  ``rank=None`` the step is compared: spans, categories and ``explained`` are those of each
  workload's slowest rank (the longest span; it sets the step time and may be a different rank in
  ``a`` and ``b``, see ``rank_a``/``rank_b``), operators are summed over every rank (a change
  anywhere shows).

Example:
    d = diff_workloads(chakra.open("before"), chakra.open("after"))
    d.delta_span_ns, d.explained, [op.name for op in d.slower()[:5]]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from chakra.analyze.breakdown import TIMING_AUTO, Breakdown, OperatorStat, breakdown, operator_stats
from chakra.analyze.frames import to_frame
from chakra.errors import ChakraInputError
from chakra.table import NodeTable
from chakra.workload import Workload

#: An operator is faster or slower only if its total time changed by at least this fraction of
#: ``a``'s: repeated steps of one job differ by a few per cent (clock, cache and scheduling jitter),
#: which is no change a user should act on.
MIN_CHANGE_FRACTION = 0.05
#: ... and by at least this many ns: 1 µs is the tick of ``duration_micros``, the resolution of
#: most recorded traces, so a smaller change is below what the trace can show.
MIN_CHANGE_NS = 1000

#: ``OpDelta.status`` values.
ADDED, REMOVED, FASTER, SLOWER, UNCHANGED = "added", "removed", "faster", "slower", "unchanged"

#: Keys of ``TraceDiff.by_category`` (fields of :class:`Breakdown` without ``_ns``).
CATEGORY_KEYS = ("compute", "communication", "memory", "idle", "comm_exposed")
#: Keys of ``TraceDiff.explained``: the disjoint pieces of a span (module doc).
EXPLAINED_KEYS = ("compute", "comm_exposed", "memory_exposed", "idle")


@dataclass
class OpDelta:
    """One operator (name, category) in both traces: counts, summed durations (ns), ``delta_ns = b - a``."""

    name: str
    category: str
    count_a: int
    count_b: int
    total_ns_a: int
    total_ns_b: int
    delta_ns: int
    status: str


@dataclass
class TraceDiff:
    """Trace ``b`` against trace ``a``; every delta is ``b - a`` in ns (see the module doc).

    * ``span_a_ns``, ``span_b_ns``, ``delta_span_ns``
    * ``by_category``: key of :data:`CATEGORY_KEYS` -> ``(a, b, b - a)``
    * ``explained``: key of :data:`EXPLAINED_KEYS` -> change of that disjoint piece; sums to ``delta_span_ns``
    * ``ops``: every operator, largest ``|delta_ns|`` first
    * ``rank_a``, ``rank_b``: the ranks whose spans and categories are compared
    * ``notes``: why the two may not compare like for like (timings or ranks that differ)
    """

    span_a_ns: int
    span_b_ns: int
    delta_span_ns: int
    by_category: dict[str, tuple[int, int, int]]
    explained: dict[str, int]
    ops: list[OpDelta]
    rank_a: int | None = None
    rank_b: int | None = None
    notes: list[str] = field(default_factory=list)

    def _with(self, status: str) -> list[OpDelta]:
        return [op for op in self.ops if op.status == status]

    def added(self) -> list[OpDelta]:
        """Operators only in ``b``."""
        return self._with(ADDED)

    def removed(self) -> list[OpDelta]:
        """Operators only in ``a``."""
        return self._with(REMOVED)

    def faster(self) -> list[OpDelta]:
        """Operators in both whose total time dropped (module doc for the thresholds)."""
        return self._with(FASTER)

    def slower(self) -> list[OpDelta]:
        """Operators in both whose total time grew (module doc for the thresholds)."""
        return self._with(SLOWER)

    def to_dict(self) -> dict[str, object]:
        return {
            "span_a_ns": self.span_a_ns,
            "span_b_ns": self.span_b_ns,
            "delta_span_ns": self.delta_span_ns,
            "rank_a": self.rank_a,
            "rank_b": self.rank_b,
            "by_category": {key: list(values) for key, values in self.by_category.items()},
            "explained": dict(self.explained),
            "ops": [asdict(op) for op in self.ops],
            "notes": list(self.notes),
        }

    def to_pandas(self):  # -> pandas.DataFrame
        """The operators as a DataFrame, one row each, in ``ops`` order."""
        return to_frame((asdict(op) for op in self.ops), list(OpDelta.__dataclass_fields__))


def _pieces(b: Breakdown) -> dict[str, int]:
    """The disjoint pieces of a span, in ns (module doc)."""
    memory_exposed = b.span_ns - b.idle_ns - b.compute_ns - b.comm_exposed_ns
    return {
        "compute": b.compute_ns,
        "comm_exposed": b.comm_exposed_ns,
        "memory_exposed": memory_exposed,
        "idle": b.idle_ns,
    }


def _status(count_a: int, count_b: int, total_a: int, delta: int) -> str:
    if not count_a:
        return ADDED
    if not count_b:
        return REMOVED
    if abs(delta) >= MIN_CHANGE_NS and abs(delta) >= MIN_CHANGE_FRACTION * total_a:
        return SLOWER if delta > 0 else FASTER
    return UNCHANGED


def _op_totals(stats: Iterable[OperatorStat]) -> dict[tuple[str, str], tuple[int, int]]:
    """(name, category) -> (count, total ns), summed over ``stats``."""
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    for s in stats:
        count, total = totals.get((s.name, s.category), (0, 0))
        totals[(s.name, s.category)] = (count + s.count, total + s.total_ns)
    return totals


def _op_deltas(a: dict[tuple[str, str], tuple[int, int]], b: dict[tuple[str, str], tuple[int, int]]) -> list[OpDelta]:
    ops = []
    for key in a.keys() | b.keys():
        count_a, total_a = a.get(key, (0, 0))
        count_b, total_b = b.get(key, (0, 0))
        delta = total_b - total_a
        ops.append(OpDelta(*key, count_a, count_b, total_a, total_b, delta, _status(count_a, count_b, total_a, delta)))
    ops.sort(key=lambda op: (-abs(op.delta_ns), op.name, op.category))
    return ops


def _diff(a: Breakdown, b: Breakdown, ops: list[OpDelta]) -> TraceDiff:
    by_category = {}
    for key in CATEGORY_KEYS:
        value_a, value_b = getattr(a, f"{key}_ns"), getattr(b, f"{key}_ns")
        by_category[key] = (value_a, value_b, value_b - value_a)
    pieces_a, pieces_b = _pieces(a), _pieces(b)
    explained = {key: pieces_b[key] - pieces_a[key] for key in EXPLAINED_KEYS}
    notes = []
    if a.timing != b.timing:
        notes.append(
            f"the first run is placed by {a.timing} timing, the second by {b.timing}: their spans measure "
            "different things (pass --timing replay to compare both replayed)"
        )
    return TraceDiff(a.span_ns, b.span_ns, b.span_ns - a.span_ns, by_category, explained, ops, a.rank, b.rank, notes)


def diff_tables(a: NodeTable, b: NodeTable, *, timing: str = TIMING_AUTO) -> TraceDiff:
    """Trace ``b`` against trace ``a`` (one rank each): span, categories, the explained span change
    and every operator, in ns (module doc).

    Raises :class:`ChakraInputError` when either trace has no nodes or no durations.

    Example:
        d = diff_tables(load_table("before.0.et"), load_table("after.0.et"))
        d.explained                          # {'compute': ..., 'comm_exposed': ..., ...}
    """
    ops = _op_deltas(_op_totals(operator_stats(a, timing=timing)), _op_totals(operator_stats(b, timing=timing)))
    return _diff(breakdown(a, timing=timing), breakdown(b, timing=timing), ops)


def _slowest(breakdowns: dict[int, Breakdown]) -> Breakdown:
    return breakdowns[max(breakdowns, key=lambda rank: (breakdowns[rank].span_ns, -rank))]


def diff_workloads(a: Workload, b: Workload, *, rank: int | None = None, timing: str = TIMING_AUTO) -> TraceDiff:
    """Workload ``b`` against workload ``a``: rank ``rank`` of each, or with ``rank=None`` the step
    (the slowest rank of each for spans and categories, operators summed over all ranks; module doc).

    Raises :class:`ChakraInputError` when a workload has no ranks or lacks ``rank``.
    """
    for workload in (a, b):
        if not workload.tables:
            raise ChakraInputError("the workload has no ranks", path=workload.prefix, hint="check the prefix")
        if rank is not None and rank not in workload.tables:
            raise ChakraInputError(
                f"the workload has no rank {rank}",
                path=workload.prefix,
                hint=f"its ranks are {workload.ranks}",
            )
    if rank is not None:
        return diff_tables(a.tables[rank], b.tables[rank], timing=timing)
    breakdowns = [{r: breakdown(t, timing=timing) for r, t in w.tables.items()} for w in (a, b)]
    totals = [_op_totals(s for t in w.tables.values() for s in operator_stats(t, timing=timing)) for w in (a, b)]
    result = _diff(_slowest(breakdowns[0]), _slowest(breakdowns[1]), _op_deltas(*totals))
    if a.ranks != b.ranks:
        result.notes.append(
            f"the runs have different ranks ({_rank_list(a.ranks)} and {_rank_list(b.ranks)}): operator totals "
            "sum different numbers of ranks, so they may not be the same workload"
        )
    return result


def _rank_list(ranks: list[int]) -> str:
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))
