"""Compare the ranks of a workload: per-rank time, load imbalance, collectives matched across ranks, stragglers.

:func:`compare_ranks` puts one :func:`chakra.analyze.breakdown.breakdown` per rank side by side and
adds the collectives matched across ranks; :func:`collective_arrivals` and :func:`stragglers` are
the two halves of the straggler analysis on their own.

* **Matching collectives.** A collective (``COMM_COLL_NODE``; sends and receives are not) belongs
  to the group of its ``pg_name``, where ``""`` and ``"0"`` are one group of every rank (as in
  ASTRA-sim, ``reference/astra-sim.md`` §2.5). The ``k``-th collective of a group on one member is
  matched with the ``k``-th on every other member, each rank's collectives ordered by recorded start
  time, ties by id (all members must issue a group's collectives in the same order, as NCCL, gloo
  and ASTRA-sim require). ``pg_name`` is read as :func:`chakra.groups.group_id` reads it (ASTRA-sim's
  ``stoi``). The members of a group are those of ``workload.comm_groups`` that are in the workload;
  for a group the file does not define, the ranks that issue collectives on it.
* **Unmatched** counts collective nodes (summed over ranks) in no matched collective: the ``k``-th
  collectives where some member has fewer than ``k + 1`` on that group, those whose members
  disagree on the collective type (the sequences have drifted apart there), those issued by a rank
  outside the group's members, and those without a recorded start in a trace that has start times.
* **Arrival** of a rank at a collective: the recorded start of its collective node, in ns from a
  common origin, the smallest recorded start over all ranks. Comparing starts across ranks assumes
  that the ranks' clocks agree (one host, or synchronized clocks), as HTA's straggler analysis also
  assumes; a skew between hosts shows up as lateness.
* **Lateness** of a collective: ``late_ns`` = last arrival - second-to-last arrival, the time every
  other member waited for the last rank alone (before that, at least one other member was still
  missing too). A tie for last is nobody's lateness (``late_ns`` 0). A rank is a straggler of a
  collective when it arrived last with ``late_ns > 0``.
* **Without start times** arrivals cannot be known: :func:`collective_arrivals` raises
  :class:`ChakraInputError`; :func:`compare_ranks` still compares the ranks (the breakdown then
  replays each rank) and returns no collectives and no stragglers, with ``note`` saying why, and
  ``unmatched`` from matching each rank without start times in id order (a rank with start times
  keeps its start order). Arrivals always come from recorded starts, whatever
  ``timing`` the breakdown uses.
* **Imbalance** of a quantity: ``max / mean - 1`` over the ranks (0 when perfectly balanced or the
  mean is 0); 0.25 means the heaviest rank carries 25 % more than the average one.

A workload too large to hold in memory compares from each rank's :class:`RankDigest`, made where the
rank's table is loaded: ``found = chakra.open("job").map(rank_digest)`` then
``compare_digests(found.results, found.comm_groups)``.

Example:
    comparison = compare_ranks(chakra.open("job"))
    comparison.slowest_rank, comparison.imbalance["compute"], comparison.stragglers[:1]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from chakra.analyze.across import rank_ranges
from chakra.analyze.breakdown import TIMING_AUTO, UNSPECIFIED_COLLECTIVE, Breakdown, breakdown
from chakra.analyze.frames import to_frame
from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, CollectiveCommType
from chakra.table import DEFAULT_GROUP_ID, INVALID_GROUP_ID, NO_COMM_TYPE, NodeTable
from chakra.units import NS_PER_US
from chakra.workload import Workload

#: The name this module reports for the group of every rank (``pg_name`` "" or "0", chakra.groups).
DEFAULT_GROUP = "0"

#: Quantities of :class:`RankRow` whose imbalance :class:`RankComparison` reports (name -> field).
IMBALANCE_FIELDS = {
    "nodes": "nodes",
    "span": "span_ns",
    "compute": "compute_ns",
    "communication": "communication_ns",
    "memory": "memory_ns",
    "idle": "idle_ns",
    "comm_exposed": "comm_exposed_ns",
}

NO_START_TIMES_NOTE = "no collective arrivals: ranks {ranks} record no start times (a converted recording has them)"


@dataclass
class RankRow:
    """One rank's totals in ns (see :class:`chakra.analyze.breakdown.Breakdown`); ``nodes``: its node count."""

    rank: int
    nodes: int
    span_ns: int
    compute_ns: int
    communication_ns: int
    memory_ns: int
    idle_ns: int
    comm_exposed_ns: int


@dataclass
class Straggler:
    """A rank that arrived last at ``times_last`` collectives, keeping the others waiting
    ``late_ns_total`` ns in all and ``late_ns_max`` ns at worst."""

    rank: int
    times_last: int
    late_ns_total: int
    late_ns_max: int


@dataclass
class CollectiveArrival:
    """One collective matched across its group: the ``seq``-th (from 0) of group ``group``.

    ``arrivals_ns``: rank -> arrival in ns from the common origin; ``last_rank`` arrived last,
    ``late_ns`` after the second-to-last; ``size_bytes``: the largest ``comm_size`` of its members.
    """

    group: str
    seq: int
    comm_type: str
    size_bytes: int
    last_rank: int
    late_ns: int
    arrivals_ns: dict[int, int]

    def to_dict(self) -> dict[str, object]:
        record = asdict(self)
        record["arrivals_ns"] = {str(rank): ns for rank, ns in self.arrivals_ns.items()}  # JSON keys are strings
        return record


@dataclass
class RankComparison:
    """The ranks of a workload side by side (see the module docstring for every definition).

    * ``rows``: one :class:`RankRow` per rank, by rank
    * ``imbalance``: quantity (:data:`IMBALANCE_FIELDS`) -> ``max / mean - 1`` over the ranks
    * ``slowest_rank``: the rank of the longest span (the lowest of equals)
    * ``stragglers``: by ``late_ns_total``, largest first; ``collectives``: every matched collective,
      by arrival of its last rank
    * ``unmatched``: collective nodes in no matched collective; ``note``: why there are no
      arrivals, ``None`` when there are
    """

    rows: list[RankRow]
    imbalance: dict[str, float]
    slowest_rank: int
    stragglers: list[Straggler]
    collectives: list[CollectiveArrival]
    unmatched: int
    note: str | None = field(default=None)

    def to_dict(self) -> dict[str, object]:
        return {
            "rows": [asdict(row) for row in self.rows],
            "imbalance": dict(self.imbalance),
            "slowest_rank": self.slowest_rank,
            "stragglers": [asdict(s) for s in self.stragglers],
            "collectives": [c.to_dict() for c in self.collectives],
            "unmatched": self.unmatched,
            "note": self.note,
        }

    def to_pandas(self):  # -> pandas.DataFrame
        """The per-rank rows as a DataFrame, one row per rank."""
        return to_frame((asdict(row) for row in self.rows), list(RankRow.__dataclass_fields__))


def _comm_type_name(value: int) -> str:
    """The collective's name as :class:`chakra.analyze.breakdown.Breakdown` keys it."""
    if value == NO_COMM_TYPE:
        return UNSPECIFIED_COLLECTIVE
    return CollectiveCommType.Name(value) if value in CollectiveCommType.values() else f"UNKNOWN_{value}"


def _group_key(group: int, pg_name: str) -> str:
    """A collective's group as this module names it: its id (:func:`chakra.groups.group_id`, so
    ``" 1"`` and ``"1"`` are one group), :data:`DEFAULT_GROUP`, or a ``pg_name`` that names no id."""
    if group == DEFAULT_GROUP_ID:
        return DEFAULT_GROUP
    return pg_name if group == INVALID_GROUP_ID else str(group)


@dataclass
class _Slots:
    """Collectives matched across a group: ``positions[i, k]`` is the index, in the member's list of
    that group's collectives, of ``members[i]``'s ``k``-th matched collective (-1: the members disagree
    on its type)."""

    group: str
    members: list[int]
    positions: np.ndarray  # int64 (len(members), matched)


@dataclass
class GroupCollectives:
    """One rank's collectives on one group, in matching order: recorded start (µs, 0: none),
    collective type and ``comm_size`` of each."""

    start_us: np.ndarray  # int64
    comm_type: np.ndarray  # int64
    size_bytes: np.ndarray  # int64


@dataclass
class RankDigest:
    """What the rank comparison keeps of one rank once its table is gone (:func:`rank_digest`): its
    breakdown, node count, earliest recorded start and its collectives per group. A workload of
    thousands of ranks compares from digests (:func:`compare_digests`) in the memory of a few tables.

    ``collectives`` are in start order (ties by id) when the rank has start times, else in id order;
    ``untimed_collectives`` counts those left out for having no start in a rank that has start times.
    """

    rank: int
    nodes: int
    breakdown: Breakdown
    has_start_times: bool
    first_start_us: int | None
    collectives: dict[str, GroupCollectives]
    untimed_collectives: int


def rank_digest(table: NodeTable, *, timing: str = TIMING_AUTO, rank: int | None = None) -> RankDigest:
    """The :class:`RankDigest` of one rank's table (``rank``: default the table's own, else 0)."""
    timed = table.has_start_times
    graph = table.graph
    pos = np.flatnonzero(graph.node_type == COMM_COLL_NODE)
    skipped = 0
    if timed:
        recorded = graph.start_us[pos] > 0
        skipped = int((~recorded).sum())
        pos = pos[recorded]
        order = np.lexsort((graph.ids[pos], graph.start_us[pos]))
    else:
        order = np.argsort(graph.ids[pos], kind="stable")
    pos = pos[order]
    by_group: dict[str, list[int]] = defaultdict(list)
    comm = table.comm
    at = np.searchsorted(comm.pos, pos).tolist()
    groups = comm.group.tolist()
    for p, k in zip(pos.tolist(), at, strict=True):  # one entry per collective, not per node
        by_group[_group_key(groups[k], comm.pg_name[k])].append(p)
    collectives = {}
    for group, ps in by_group.items():
        where = np.array(ps, dtype=np.int64)
        collectives[group] = GroupCollectives(
            table.start_us[where].astype(np.int64),
            table.comm_type[where].astype(np.int64),
            table.comm_size[where].astype(np.int64),
        )
    starts = table.start_us[table.start_us > 0]
    chosen = rank if rank is not None else (table.rank if table.rank is not None else 0)
    return RankDigest(
        rank=chosen,
        nodes=len(table),
        breakdown=breakdown(table, timing=timing),
        has_start_times=timed,
        first_start_us=int(starts.min()) if len(starts) else None,
        collectives=collectives,
        untimed_collectives=skipped,
    )


def _group_members(present: set[int], groups: CommGroups | None, group: str, issuers: set[int]) -> list[int]:
    if group == DEFAULT_GROUP:
        return sorted(present)
    defined = groups.members(int(group), max(present) + 1) if groups and group.isdigit() else None
    if defined is not None:
        return sorted(present.intersection(defined))
    return sorted(issuers)


def _match(digests: dict[int, RankDigest], groups: CommGroups | None) -> tuple[list[_Slots], int]:
    """Every group's collectives matched by sequence number, and the count of unmatched collective nodes."""
    unmatched = sum(d.untimed_collectives for d in digests.values())
    issuers: dict[str, set[int]] = defaultdict(set)
    for rank, digest in digests.items():
        for group in digest.collectives:
            issuers[group].add(rank)
    empty = GroupCollectives(*(np.zeros(0, dtype=np.int64) for _ in range(3)))
    matched: list[_Slots] = []
    for group in sorted(issuers):
        members = _group_members(set(digests), groups, group, issuers[group])
        outsiders = issuers[group].difference(members)
        unmatched += sum(len(digests[rank].collectives[group].start_us) for rank in outsiders)
        lists = [digests[rank].collectives.get(group, empty) for rank in members]
        count = min((len(c.start_us) for c in lists), default=0)
        unmatched += sum(len(c.start_us) - count for c in lists)
        if not count:
            continue
        types = np.stack([c.comm_type[:count] for c in lists])
        agree = (types == types[0]).all(axis=0)
        unmatched += int((~agree).sum()) * len(members)
        positions = np.broadcast_to(np.arange(count, dtype=np.int64), (len(members), count))
        matched.append(_Slots(group, members, np.where(agree, positions, -1)))
    return matched, unmatched


def _arrivals(digests: dict[int, RankDigest], slots: list[_Slots]) -> list[CollectiveArrival]:
    """The matched collectives with their arrivals (every rank has start times)."""
    origin_us = min(d.first_start_us for d in digests.values() if d.first_start_us is not None)
    result: list[tuple[int, str, int, CollectiveArrival]] = []
    for slot in slots:
        seqs = np.flatnonzero(slot.positions[0] >= 0)
        lists = [digests[rank].collectives[slot.group] for rank in slot.members]
        arrive_ns = np.stack([(c.start_us[seqs] - origin_us) * NS_PER_US for c in lists])
        sizes = np.stack([c.size_bytes[seqs] for c in lists]).max(axis=0)
        last = arrive_ns.argmax(axis=0)
        ranked = np.sort(arrive_ns, axis=0)
        late_ns = ranked[-1] - ranked[-2] if len(slot.members) > 1 else np.zeros(len(seqs), dtype=np.int64)
        comm_types = lists[0].comm_type[seqs]
        for j, seq in enumerate(seqs.tolist()):
            arrival = CollectiveArrival(
                group=slot.group,
                seq=seq,
                comm_type=_comm_type_name(int(comm_types[j])),
                size_bytes=int(sizes[j]),
                last_rank=slot.members[int(last[j])],
                late_ns=int(late_ns[j]),
                arrivals_ns=dict(zip(slot.members, arrive_ns[:, j].tolist(), strict=True)),
            )
            result.append((int(ranked[-1, j]), slot.group, seq, arrival))
    result.sort(key=lambda item: item[:3])
    return [item[3] for item in result]


def _digests(workload: Workload, timing: str = TIMING_AUTO) -> dict[int, RankDigest]:
    if not workload.tables:
        raise ChakraInputError("the workload has no ranks", path=workload.prefix, hint="check the prefix")
    return {rank: rank_digest(workload.tables[rank], timing=timing, rank=rank) for rank in workload.ranks}


def collective_arrivals(workload: Workload) -> list[CollectiveArrival]:
    """Every collective matched across its group with each member's arrival (ns from the earliest
    recorded start of the workload), by arrival of its last rank.

    Raises :class:`ChakraInputError` when a rank has no start times.

    Example:
        [(c.comm_type, c.last_rank, c.late_ns) for c in collective_arrivals(workload)]
    """
    if not workload.tables:
        raise ChakraInputError("the workload has no ranks", path=workload.prefix, hint="check the prefix")
    for table in workload.tables.values():
        table.require_start_times()
    digests = _digests(workload)
    slots, _ = _match(digests, workload.comm_groups)
    return _arrivals(digests, slots)


def stragglers(arrivals: list[CollectiveArrival]) -> list[Straggler]:
    """The ranks that arrived last at a collective with ``late_ns > 0``, by total lateness (ns),
    largest first (ties: more collectives first, then by rank)."""
    found: dict[int, Straggler] = {}
    for arrival in arrivals:
        if arrival.late_ns <= 0:
            continue
        entry = found.setdefault(arrival.last_rank, Straggler(arrival.last_rank, 0, 0, 0))
        entry.times_last += 1
        entry.late_ns_total += arrival.late_ns
        entry.late_ns_max = max(entry.late_ns_max, arrival.late_ns)
    return sorted(found.values(), key=lambda s: (-s.late_ns_total, -s.times_last, s.rank))


def _imbalance(values: np.ndarray) -> float:
    mean = float(values.mean())
    return float(values.max()) / mean - 1.0 if mean > 0 else 0.0


def compare_ranks(workload: Workload, *, timing: str = TIMING_AUTO) -> RankComparison:
    """Every rank's breakdown (``timing`` as in :func:`chakra.analyze.breakdown.breakdown`), the load
    imbalance, and the collectives matched across ranks with their stragglers (from recorded starts).

    Example:
        c = compare_ranks(chakra.open("job"))
        c.slowest_rank, c.imbalance["span"], [s.rank for s in c.stragglers]
    """
    return compare_digests(_digests(workload, timing), workload.comm_groups)


def compare_digests(digests: dict[int, RankDigest], groups: CommGroups | None = None) -> RankComparison:
    """:func:`compare_ranks` from each rank's :class:`RankDigest` (``digests[rank]``) and the
    workload's communicator groups: what :meth:`chakra.workload.Workload.map` returns for
    :func:`rank_digest`, without any table in memory."""
    if not digests:
        raise ChakraInputError("the workload has no ranks", hint="check the prefix")
    rows = []
    for rank in sorted(digests):
        d = digests[rank]
        b = d.breakdown
        rows.append(
            RankRow(
                rank=rank,
                nodes=d.nodes,
                span_ns=b.span_ns,
                compute_ns=b.compute_ns,
                communication_ns=b.communication_ns,
                memory_ns=b.memory_ns,
                idle_ns=b.idle_ns,
                comm_exposed_ns=b.comm_exposed_ns,
            )
        )
    imbalance = {
        name: _imbalance(np.array([getattr(row, column) for row in rows], dtype=np.float64))
        for name, column in IMBALANCE_FIELDS.items()
    }
    slowest = max(rows, key=lambda row: (row.span_ns, -row.rank)).rank
    untimed = [rank for rank in sorted(digests) if not digests[rank].has_start_times]
    slots, unmatched = _match(digests, groups)
    if untimed:
        return RankComparison(
            rows, imbalance, slowest, [], [], unmatched, NO_START_TIMES_NOTE.format(ranks=rank_ranges(untimed))
        )
    arrivals = _arrivals(digests, slots)
    return RankComparison(rows, imbalance, slowest, stragglers(arrivals), arrivals, unmatched)
