"""Process groups of a PyTorch workload, and which group each communication node used.

Where a trace records a collective's group (NCCL's ``record_param_comms``), that is the answer.
Gloo records none: the group is an opaque argument. Then, in this order:

1. the rank belongs to one group only (every job has the default group ``"0"``): that group;
2. several candidates: the ranks' collective sequences are *aligned*. A group's members issue its
   collectives in the same order with the same kind and size (and root, which must be a member of
   the group), so the heads of the members' sequences are matched group by group, the
   earliest-finished head first. When several groups fit, their timing decides (one clock on one
   machine). A collective cannot finish on a member before the members it waits for have arrived
   (all of them; in broadcast and scatter the root; in gather and reduce only the root waits, for
   all), and it finishes shortly after that. So a group is *impossible* when a member finished
   more than ``CLOCK_TOLERANCE_US`` before such an arrival, or when a member's node finished
   nearer to the others' next same-looking collectives than to their heads (a rank outside a
   subgroup that ran ahead to the next collective of the kind and waited there: :func:`runs_ahead`).
   Each possible group has a *completion lag* (:func:`completion_lag_us`): how long after the
   arrival they waited for the first waiting member finished. The true group's lag is short; a
   subgroup whose members sat waiting for ranks outside it has a long one, since their wait is
   left unexplained. A group *explains* the collective when its lag exceeds the best lag of the
   groups whose members wait for the same arrival (the same global root) by at most
   ``WAIT_RATIO`` times that best (at least the clock tolerance); the largest group that explains it
   is taken (where all wait for all, a superset's lag is never longer than its subset's: it wins
   unless impossible). It is marked ambiguous when another group explains it as well and nothing
   tells them apart, that is unless the other is a subgroup whose outsiders waited (first finished
   after their own last arrival) longer than that. Without timing the larger group is taken and
   marked ambiguous; when no group can have run any head, timing is set aside the same way.
   Limit: subgroups running collectives of the same kind and size at the same time (both
   data-parallel pairs at once) look like one collective of all their ranks: they come out as the
   larger group, marked ambiguous;
3. nothing fits: the default group, marked ambiguous.

Every answer carries the method, which the conversion report counts. Group names become the
decimal ids ASTRA-sim reads (``pg_name``; PyTorch's own names are decimal already; others are
numbered after them), and non-default groups are listed in ``PREFIX.comm_groups.json``.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chakra.pytorch.comms import CommNode
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_TO_ALL,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    GATHER,
    REDUCE,
    SCATTER,
)

DEFAULT_GROUP = "0"

#: How a node's group was found (report keys).
RECORDED = "recorded in the trace"
ONLY_GROUP = "inferred: the only group of the rank"
NO_RECORDS = "assumed default group: no process-group records"
ALIGNED = "inferred: aligned across ranks"
AMBIGUOUS = "ambiguous: assumed default group"
#: Several groups fit and nothing tells them apart: the largest was taken.
AMBIGUOUS_LARGEST = "ambiguous: the largest fitting group taken"

#: Collectives whose per-rank sizes may differ (v-variants), so sizes do not have to agree.
_UNEVEN = frozenset({ALL_TO_ALL, GATHER, SCATTER})
#: Collectives whose members wait for the root's data only (not for each other).
_FROM_ROOT = frozenset({BROADCAST, SCATTER})
#: Collectives whose root waits for every member's data while the others wait for nobody.
_TO_ROOT = frozenset({GATHER, REDUCE})

#: Clock jitter (us) between ranks on one machine: a member may seem to finish up to this long
#: before the last arrival it waited for (Kineto converts each process's clock on its own).
CLOCK_TOLERANCE_US = 50.0
#: A group explains a collective as well as the best-scoring group when its completion lag is no
#: longer than the best lag by more than this multiple of the best lag: a wait is evidence only
#: when it is long against the time the collective itself took after its last arrival.
WAIT_RATIO = 1.0


@dataclass(frozen=True)
class ProcessGroup:
    """One process group: ``ranks`` are global ranks in group-rank order, ``None`` = every rank."""

    name: str
    ranks: tuple[int, ...] | None
    desc: str = ""

    def contains(self, rank: int) -> bool:
        return self.ranks is None or rank in self.ranks

    def members(self, world_size: int) -> tuple[int, ...]:
        return tuple(range(world_size)) if self.ranks is None else self.ranks

    def global_rank(self, group_rank: int) -> int:
        """The global rank of ``group_rank`` (identity for the whole world)."""
        if self.ranks is None:
            return group_rank
        return self.ranks[group_rank] if 0 <= group_rank < len(self.ranks) else group_rank

    def group_rank(self, rank: int) -> int:
        return rank if self.ranks is None else self.ranks.index(rank)


def group_table(*sources: Iterable[Mapping[str, Any]], world_size: int | None = None) -> dict[str, ProcessGroup]:
    """Merge group records (the host trace's ``## process_group:init ##`` entries, Kineto's
    ``distributedInfo.pg_config``) by ``pg_name``; an explicit rank list wins over ``[]`` (= all).
    A group listing every rank of a ``world_size`` world is the whole world."""
    table: dict[str, ProcessGroup] = {}
    for source in sources:
        for entry in source:
            if not isinstance(entry, Mapping) or "pg_name" not in entry:
                continue
            name = str(entry["pg_name"])
            raw = entry.get("ranks")
            ranks = tuple(int(r) for r in raw) if isinstance(raw, list) and raw else None
            if ranks is not None and world_size is not None and sorted(ranks) == list(range(world_size)):
                ranks = None if ranks == tuple(range(world_size)) else ranks
            known = table.get(name)
            if known is None or (known.ranks is None and ranks is not None):
                table[name] = ProcessGroup(name, ranks, str(entry.get("pg_desc", "")))
    table.setdefault(DEFAULT_GROUP, ProcessGroup(DEFAULT_GROUP, None, "default_pg"))
    return table


def astra_ids(names: Iterable[str]) -> dict[str, str]:
    """Decimal group ids for ASTRA-sim's ``pg_name`` (it calls ``stoi``): decimal names are kept,
    others numbered after the largest."""
    names = sorted(set(names))
    numeric = {n: n for n in names if n.isdecimal()}
    next_id = max((int(n) for n in numeric), default=0) + 1
    for name in names:
        if name not in numeric:
            numeric[name] = str(next_id)
            next_id += 1
    return numeric


@dataclass
class Resolution:
    """A communication node's group and, for point-to-point, its global peer."""

    pg_name: str
    method: str
    peer_rank: int | None = None


def _signature(node: CommNode) -> tuple[Any, ...]:
    size = None if node.comm_type in _UNEVEN else node.size_bytes
    return (node.node_type, node.comm_type, size, node.root)


def _candidates(node: CommNode, rank: int, groups: Mapping[str, ProcessGroup]) -> list[str]:
    if node.pg_name is not None:
        return [node.pg_name]
    return [name for name, group in sorted(groups.items()) if group.contains(rank)]


def resolve(
    per_rank: Mapping[int, Sequence[CommNode]],
    groups: Mapping[str, ProcessGroup],
    world_size: int,
    *,
    have_records: bool = True,
    align: bool = True,
) -> dict[int, dict[int, Resolution]]:
    """The group (and p2p peer) of every communication node of every rank: ``rank -> node id ->
    Resolution``. ``per_rank`` holds each rank's nodes; ranks that are absent are not waited for.
    ``align=False`` (one rank alone) leaves nodes with several candidate groups ambiguous."""
    out: dict[int, dict[int, Resolution]] = {rank: {} for rank in per_rank}
    collectives: dict[int, list[CommNode]] = {}
    for rank, nodes in per_rank.items():
        ordered = sorted(nodes, key=lambda n: n.issue_order)
        collectives[rank] = [n for n in ordered if n.node_type == COMM_COLL_NODE]
        for node in ordered:
            cands = _candidates(node, rank, groups)
            if node.pg_name is not None:
                out[rank][node.node_id] = Resolution(node.pg_name, RECORDED)
            elif not have_records:
                out[rank][node.node_id] = Resolution(DEFAULT_GROUP, NO_RECORDS)
            elif len(cands) == 1:
                out[rank][node.node_id] = Resolution(cands[0], ONLY_GROUP)
    if align and any(n.node_id not in out[r] for r, nodes in collectives.items() for n in nodes):
        _align(collectives, groups, world_size, out)
    for rank, nodes in collectives.items():
        for node in nodes:
            out[rank].setdefault(node.node_id, Resolution(DEFAULT_GROUP, AMBIGUOUS))
    _peers(per_rank, groups, out)
    return out


def completion_lag_us(heads: Sequence[tuple[int, CommNode]], comm_type: int | None, root: int | None) -> float | None:
    """How long (us) after the arrival it waited for the first waiting member finished, if the
    nodes ``heads`` (``(global rank, node)``, one per member) were one collective of their group,
    whose root is global rank ``root``. A member waits for every member (for the root only in
    broadcast and scatter; in gather and reduce only the root waits, for everyone); it *waited*
    when one of them arrived after it. ``inf``: that group cannot have run it (a member finished
    more than ``CLOCK_TOLERANCE_US`` before an arrival it waited for); ``None``: no evidence (a
    node without timing, a missing root, nobody waited)."""
    starts: dict[int, float] = {}
    for rank, node in heads:
        if node.start_us is None or node.end_us is None:
            return None
        starts[rank] = node.start_us
    last_us = max(starts.values())
    needed = dict.fromkeys(starts, last_us)  # arrival each member waits for
    if comm_type in _FROM_ROOT or comm_type in _TO_ROOT:
        if root not in starts:
            return None
        from_root = {rank: starts[root] for rank in starts if rank != root}
        needed = from_root if comm_type in _FROM_ROOT else {root: last_us}
    lag_us: float | None = None
    for rank, node in heads:
        if rank in needed and needed[rank] > starts[rank]:
            waited_us = node.end_us - needed[rank]  # type: ignore[operator]  # timed above
            if waited_us < -CLOCK_TOLERANCE_US:
                return float("inf")
            lag_us = waited_us if lag_us is None else min(lag_us, waited_us)
    return lag_us


def _nearest_us(value_us: float, ordered_us: Sequence[float], exclude_us: float | None = None) -> float:
    """Distance (us) from ``value_us`` to the nearest of ``ordered_us`` (sorted), where one entry
    equal to ``exclude_us`` does not count; ``inf`` when none is left."""
    at = bisect.bisect_left(ordered_us, value_us)
    near = [ordered_us[i] for i in range(at - 2, at + 2) if 0 <= i < len(ordered_us)]
    if exclude_us is not None and exclude_us in near:
        near.remove(exclude_us)
    return min((abs(value_us - v) for v in near), default=float("inf"))


def runs_ahead(heads: Sequence[tuple[int, CommNode]], nexts: Mapping[int, CommNode | None]) -> bool:
    """Whether a member's head is a *later* collective than the others' heads: it finished nearer
    to the other members' next collectives than to their heads. ``nexts`` holds each member's node
    after its head where that looks the same (else ``None``); without them nothing is later. A rank
    outside a subgroup runs ahead to the next collective of the same kind and waits there until the
    subgroup's members come; taking its node for the subgroup's collective would shift its
    sequence by one. (A member of the true group that finishes late, by more than half the time the
    others take to their next collective of the kind, looks the same.)"""
    if any(node.end_us is None for _, node in heads):
        return False
    ends = sorted(node.end_us for _, node in heads if node.end_us is not None)
    later = {rank: n.end_us for rank, n in nexts.items() if n is not None and n.end_us is not None}
    later_us = sorted(later.values())
    for rank, node in heads:
        end_us = node.end_us
        assert end_us is not None  # checked above
        others_later = len(later) - (rank in later)
        if others_later < len(heads) - 1 or others_later == 0:
            continue  # some other member has no later collective of this kind
        if _nearest_us(end_us, later_us, later.get(rank)) < _nearest_us(end_us, ends, end_us):
            return True
    return False


def _margin_us(best_us: float) -> float:
    """How much longer (us) than the best completion lag a lag may be and still explain it."""
    return max(CLOCK_TOLERANCE_US, WAIT_RATIO * max(best_us, 0.0))


@dataclass
class _Option:
    """A group that fits a rank's head: its members' heads, the root as a global rank (``None``:
    unrooted) and their completion lag (us)."""

    name: str
    heads: list[tuple[int, CommNode]]
    root: int | None
    lag_us: float | None


def _own_lag_us(nodes: Sequence[CommNode]) -> float | None:
    """How long (us) after the last of ``nodes`` arrived the first of them finished (``None``:
    untimed): long when they sat waiting for a rank outside them."""
    starts = [n.start_us for n in nodes if n.start_us is not None]
    ends = [n.end_us for n in nodes if n.end_us is not None]
    if not nodes or len(starts) < len(nodes) or len(ends) < len(nodes):
        return None
    return min(ends) - max(starts)


def _choose(options: list[_Option]) -> tuple[_Option, bool]:
    """The group that explains a head best and whether the timing decided it (module docstring).
    ``options`` are the possible ones (no ``inf`` lag). Lags are compared only between groups
    whose members wait for the same arrival (the same global root): groups whose roots differ
    measure different ranks' waits, and one member slow to finish (descheduled on a busy machine)
    would otherwise make the true group look worse than any other root."""

    def explains(option: _Option) -> bool:
        lag_us = option.lag_us
        comparable = [o.lag_us for o in options if o.root == option.root and o.lag_us is not None]
        best_us = min(comparable, default=None)
        return lag_us is None or best_us is None or lag_us <= best_us + _margin_us(best_us)

    explaining = [o for o in options if explains(o)]
    untimed_last = float("inf")
    explaining.sort(key=lambda o: (-len(o.heads), untimed_last if o.lag_us is None else o.lag_us, o.name))
    chosen = explaining[0]
    chosen_us = chosen.lag_us
    if chosen_us is None:
        return chosen, len(options) == 1
    members = {rank for rank, _ in chosen.heads}

    def refuted(other: _Option) -> bool:
        """``other`` is a subgroup whose outsiders waited for its members: only ``chosen`` explains that."""
        inside = {rank for rank, _ in other.heads}
        if not inside < members:
            return False
        lag_us = _own_lag_us([node for rank, node in chosen.heads if rank not in inside])
        return lag_us is not None and lag_us > chosen_us + _margin_us(chosen_us)

    return chosen, all(refuted(o) for o in explaining[1:])


def _align(
    collectives: Mapping[int, list[CommNode]],
    groups: Mapping[str, ProcessGroup],
    world_size: int,
    out: dict[int, dict[int, Resolution]],
) -> None:
    """Match the heads of the ranks' collective sequences group by group (module docstring)."""
    head = dict.fromkeys(collectives, 0)

    def fits(name: str, node: CommNode) -> list[tuple[int, CommNode]] | None:
        """The members' head nodes if they can all be this group's next collective like ``node``."""
        sig = _signature(node)
        members = groups[name].members(world_size)
        if node.root is not None and not 0 <= node.root < len(members):
            return None  # the root is no member of this group
        found = []
        for member in members:
            seq = collectives.get(member)
            if seq is None:
                continue  # rank not converted: do not wait for it
            if head[member] >= len(seq):
                return None
            other = seq[head[member]]
            known = out[member].get(other.node_id)
            if _signature(other) != sig or (known is not None and known.pg_name != name):
                return None
            if known is None and name not in _candidates(other, member, groups):
                return None
            found.append((member, other))
        return found or None

    def following(rank: int, like: CommNode) -> CommNode | None:
        """``rank``'s node after its head, when it looks like ``like`` (same signature)."""
        seq = collectives[rank]
        nxt = seq[head[rank] + 1] if head[rank] + 1 < len(seq) else None
        return nxt if nxt is not None and _signature(nxt) == _signature(like) else None

    def urgency(rank: int) -> tuple[float, int, int]:
        """Heads are settled earliest-finished first (untimed last, then least advanced first): a
        member's earlier collective finished before it arrived at this one, and this one finished
        nowhere before that arrival, so a member's unsettled earlier head comes first, however far
        apart the ranks arrive (what is left, a rank run ahead to a later collective, is
        :func:`runs_ahead`'s)."""
        node = collectives[rank][head[rank]]
        return (node.end_us if node.end_us is not None else float("inf"), head[rank], rank)

    def settle(rank: int, strict: bool) -> bool:
        """Settle ``rank``'s head if some group fits it (``strict``: and can have run it)."""
        node = collectives[rank][head[rank]]
        known = out[rank].get(node.node_id)
        names = [known.pg_name] if known else _candidates(node, rank, groups)
        options: list[_Option] = []
        for name in names:
            if name not in groups or (found := fits(name, node)) is None:
                continue
            root = None if node.root is None else groups[name].global_rank(node.root)
            lag_us = completion_lag_us(found, node.comm_type, root)
            if runs_ahead(found, {m: following(m, node) for m, _ in found}):
                lag_us = float("inf")  # a member's node belongs to a later collective
            if lag_us == float("inf") and not strict:
                lag_us = None  # nothing could have run it: timing is no evidence here
            if lag_us != float("inf"):
                options.append(_Option(name, found, root, lag_us))
        if not options:
            return False
        chosen, decided = _choose(options)
        for member, member_node in chosen.heads:
            method = ALIGNED if decided else AMBIGUOUS_LARGEST
            out[member].setdefault(member_node.node_id, Resolution(chosen.name, method))
            head[member] += 1
        return True

    while True:
        waiting = sorted((r for r, seq in collectives.items() if head[r] < len(seq)), key=urgency)
        # groups that can have run a head first; when none can, the timing is taken as no evidence
        if not any(settle(rank, True) for rank in waiting) and not any(settle(rank, False) for rank in waiting):
            break
    for rank, seq in collectives.items():
        for node in seq[head[rank] :]:
            out[rank].setdefault(node.node_id, Resolution(DEFAULT_GROUP, AMBIGUOUS))


def _peers(
    per_rank: Mapping[int, Sequence[CommNode]],
    groups: Mapping[str, ProcessGroup],
    out: dict[int, dict[int, Resolution]],
) -> None:
    """Global peers of sends and receives. With an unknown group, the candidate group whose
    translation finds a matching transfer (peer, tag, size) on the peer's side wins."""
    posted: dict[tuple[int, int, int, int], int] = Counter()  # (src, dst, tag, size) -> count
    p2p = [(r, n) for r, nodes in per_rank.items() for n in nodes if n.node_type in (COMM_SEND_NODE, COMM_RECV_NODE)]

    def endpoints(rank: int, node: CommNode, group: ProcessGroup) -> tuple[int, int] | None:
        if node.peer is None or (group.ranks is not None and rank not in group.ranks):
            return None
        peer = group.global_rank(node.peer)
        return (rank, peer) if node.node_type == COMM_SEND_NODE else (peer, rank)

    choices: dict[tuple[int, int], list[tuple[str, tuple[int, int]]]] = defaultdict(list)
    for rank, node in p2p:
        known = out[rank].get(node.node_id)
        names = [known.pg_name] if known else _candidates(node, rank, groups) or [DEFAULT_GROUP]
        for name in names:
            group = groups.get(name, ProcessGroup(name, None))
            ends = endpoints(rank, node, group)
            if ends is not None:
                choices[(rank, node.node_id)].append((name, ends))
                posted[(*ends, node.tag or 0, node.size_bytes)] += 1
    for rank, node in p2p:
        options = choices.get((rank, node.node_id), [])
        known = out[rank].get(node.node_id)
        # a transfer is confirmed when both sides posted the same (src, dst, tag, size)
        confirmed = [o for o in options if posted[(*o[1], node.tag or 0, node.size_bytes)] >= 2]
        name, ends = (confirmed or options or [(known.pg_name if known else DEFAULT_GROUP, None)])[0]  # type: ignore[list-item]
        peer = None if ends is None else (ends[1] if node.node_type == COMM_SEND_NODE else ends[0])
        if known is not None:
            known.peer_rank = peer
        else:
            method = ALIGNED if len(options) > 1 and confirmed else (ONLY_GROUP if len(options) == 1 else AMBIGUOUS)
            out[rank][node.node_id] = Resolution(name, method, peer)


def comm_groups_json(groups: Mapping[str, ProcessGroup], used: Iterable[str], world_size: int) -> dict[int, list[int]]:
    """ASTRA-sim communicator groups (``{id: [global ranks]}``) for the non-default groups in ``used``."""
    ids = astra_ids(groups)
    out: dict[int, list[int]] = {}
    for name in sorted(set(used)):
        group = groups.get(name)
        if group is None or name == DEFAULT_GROUP:
            continue
        out[int(ids[name])] = sorted(group.members(world_size))
    return out


def node_attributes(
    nodes: Sequence[CommNode],
    resolution: Mapping[int, Resolution],
    groups: Mapping[str, ProcessGroup],
    rank: int,
) -> dict[int, list[tuple[str, Any]]]:
    """The group-dependent attributes of one rank's communication nodes: ``pg_name`` (ASTRA-sim id),
    ``comm_src``/``comm_dst``/``comm_tag`` of sends and receives, the root as a global rank
    (``comm_root``) and ``comm_seq``: the node's position among the rank's collectives of the same
    group (sends/receives: of the same source, destination and tag), in issue order -- the same
    number on every rank for the same collective."""
    ids = astra_ids(groups)
    counters: Counter[Any] = Counter()
    out: dict[int, list[tuple[str, Any]]] = {}
    for node in sorted(nodes, key=lambda n: n.issue_order):
        found = resolution.get(node.node_id) or Resolution(DEFAULT_GROUP, AMBIGUOUS)
        group = groups.get(found.pg_name, ProcessGroup(found.pg_name, None))
        attrs: list[tuple[str, Any]] = [("pg_name", ids.get(found.pg_name, found.pg_name))]
        if node.node_type == COMM_COLL_NODE:
            key: Any = ("coll", found.pg_name)
            if node.root is not None:
                attrs.append(("comm_root", group.global_rank(node.root)))
        else:
            peer = found.peer_rank if found.peer_rank is not None else -1
            src, dst = (rank, peer) if node.node_type == COMM_SEND_NODE else (peer, rank)
            attrs += [("comm_src", src), ("comm_dst", dst), ("comm_tag", node.tag or 0)]
            key = ("p2p", src, dst, node.tag or 0)
        attrs.append(("comm_seq", counters[key]))
        counters[key] += 1
        out[node.node_id] = attrs
    return out
