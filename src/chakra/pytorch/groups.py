"""Process groups of a PyTorch workload, and which group each communication node used.

Where a trace records a collective's group (NCCL's ``record_param_comms``), that is the answer.
Gloo records none: the group is an opaque argument. Then, in this order:

1. the rank belongs to one group only (every job has the default group ``"0"``): that group;
2. several candidates: the ranks' collective sequences are *aligned*. A group's members issue its
   collectives in the same order with the same kind and size (and root), so the heads of the
   members' sequences are matched group by group; when several groups fit, the one whose members
   finished the collective closest together in time wins (one clock on one machine). When nothing
   tells them apart (no timing, or the same spread), the larger group is taken and the node is
   marked ambiguous;
3. nothing fits: the default group, marked ambiguous.

Every answer carries the method, which the conversion report counts. Group names become the
decimal ids ASTRA-sim reads (``pg_name``; PyTorch's own names are decimal already; others are
numbered after them), and non-default groups are listed in ``PREFIX.comm_groups.json``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chakra.pytorch.comms import CommNode
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    GATHER,
    SCATTER,
)

DEFAULT_GROUP = "0"

#: How a node's group was found (report keys).
RECORDED = "recorded in the trace"
ONLY_GROUP = "inferred: the only group of the rank"
NO_RECORDS = "assumed default group: no process-group records"
ALIGNED = "inferred: aligned across ranks"
AMBIGUOUS = "ambiguous: assumed default group"

#: Collectives whose per-rank sizes may differ (v-variants), so sizes do not have to agree.
_UNEVEN = frozenset({ALL_TO_ALL, GATHER, SCATTER})


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


def _align(
    collectives: Mapping[int, list[CommNode]],
    groups: Mapping[str, ProcessGroup],
    world_size: int,
    out: dict[int, dict[int, Resolution]],
) -> None:
    """Match the heads of the ranks' collective sequences group by group (module docstring)."""
    head = dict.fromkeys(collectives, 0)

    def fits(name: str, sig: tuple[Any, ...]) -> list[tuple[int, CommNode]] | None:
        """The members' head nodes if they can all be this group's next collective."""
        found = []
        for member in groups[name].members(world_size):
            seq = collectives.get(member)
            if seq is None:
                continue  # rank not converted: do not wait for it
            if head[member] >= len(seq):
                return None
            node = seq[head[member]]
            known = out[member].get(node.node_id)
            if _signature(node) != sig or (known is not None and known.pg_name != name):
                return None
            if known is None and name not in _candidates(node, member, groups):
                return None
            found.append((member, node))
        return found or None

    def spread(found: list[tuple[int, CommNode]]) -> float:
        ends = [n.end_us for _, n in found if n.end_us is not None]
        return max(ends) - min(ends) if len(ends) == len(found) else float("inf")

    def urgency(rank: int) -> tuple[float, int, int]:
        """Heads are settled earliest-finished first (else least advanced first), so no group's
        members run ahead of a group that shares members with it."""
        node = collectives[rank][head[rank]]
        return (node.end_us if node.end_us is not None else float("inf"), head[rank], rank)

    while True:
        waiting = sorted((r for r, seq in collectives.items() if head[r] < len(seq)), key=urgency)
        settled = False
        for rank in waiting:
            node = collectives[rank][head[rank]]
            known = out[rank].get(node.node_id)
            names = [known.pg_name] if known else _candidates(node, rank, groups)
            options = []
            for name in names:
                if name in groups and (found := fits(name, _signature(node))) is not None:
                    options.append((spread(found), -len(found), name, found))
            if not options:
                continue
            options.sort(key=lambda o: (o[0], o[1], o[2]))
            name, found = options[0][2], options[0][3]
            # several groups fit and timing does not single one out: the data cannot tell
            decided = len(options) == 1 or options[0][0] < options[1][0]
            for member, member_node in found:
                out[member].setdefault(member_node.node_id, Resolution(name, ALIGNED if decided else AMBIGUOUS))
                head[member] += 1
            settled = True
            break
        if not settled:
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
