"""Simulating by classes of equivalent ranks: one representative per class, every rank's result.

A cluster's ranks repeat themselves: 8,192 ranks of a TP 8 x PP 8 job run 8 programs, each 1,024
times, on groups that are copies of each other. :func:`rank_classes` finds such classes in the
programs themselves (nothing is assumed from how they were made), and the engine then runs one
representative per class (:class:`ClassCollectives`, :class:`ClassMessages`); every rank's
statistics are its representative's (:func:`expand_result`).

Two ranks are in one class when, by colour refinement (the Weisfeiler-Lehman test of graph
isomorphism, on ranks joined by their groups and peers):

* their programs are equal but for group ids and peers: the same nodes, ids, dependencies, slots,
  durations, collective types and sizes, tags, and the network delay of each send;
* position by position, their collectives run on groups whose members fall into the same classes
  in the same numbers, and their sends and receives go to, and come from, ranks of the same class.

Members of a class then issue every node at the same time as their representative, by induction:
a collective starts when the last class among its members arrives, and a message arrives after
the same delay. What the induction also needs is checked while the simulation runs, once per kind
of collective instance: every copy of a group takes, member by member, the time its
representative's group takes (copies that sit differently in the network would not); and, before
it starts, that each rank sends to, and receives from, one rank per class and tag (so a
representative's channel stands for its class's). Where any of that fails, or where ranks share
something their programs do not show (the congestion-aware network's links, a custom collective
algorithm, a shared remote memory), the simulation runs rank by rank and says why
(:data:`RANK_BY_RANK_REASONS`, :class:`SymmetryBroken`).

>>> from chakra.sim.config import NetworkConfig
>>> rank_classes({}, {}, NetworkConfig(("Ring",), (4,), (50.0,), (500.0,)))
'no ranks'
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from chakra.sim.choices import NetworkModel
from chakra.sim.collectives import CollectiveTimes, collective_times, type_name
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.config.memory import MEMORY_POOL, PER_NODE_MEMORY_EXPANSION
from chakra.sim.matching import CollectiveMatcher, MessageKey, MessageMatcher
from chakra.sim.network import message_delays_ns
from chakra.sim.plans import collective_parts
from chakra.sim.program import DO_COLLECTIVE, DO_MEMORY, DO_RECV, DO_SEND, RankProgram
from chakra.sim.results import SimResult
from chakra.table import DEFAULT_GROUP_ID

#: Why a workload runs rank by rank before any class is looked for (the engine says which applied).
RANK_BY_RANK_REASONS = {
    "aware": "the congestion-aware network's links are shared by every rank",
    "custom": "custom collective algorithms run message by message",
    "memory": "remote memory shared by several NPUs",
    "partial": "not every NPU of the network has its program",
}
#: The columns of a program that say what it does, apart from its groups and peers.
_BEHAVIOUR = (
    "ids", "action", "slot", "time_ns", "dep_count", "child_ptr", "child_pos", "comm_pos", "comm_type",
    "comm_size", "comm_tag", "roofline_pos", "num_ops", "tensor_size", "memory_pos", "memory_size",
)  # fmt: skip


class SymmetryBroken(Exception):
    """The classes found do not behave alike in this simulation (the engine runs rank by rank)."""


@dataclass(frozen=True)
class RankClasses:
    """Classes of equivalent ranks (module docstring).

    ``class_of[rank]`` is a rank's class, ``reps[c]`` the representative of class ``c`` (its lowest
    rank) and ``ranks[c]`` its ranks; every group a representative uses has a *kind* (``kind_of[(rep,
    group)]``): copies of one group across the classes share it. ``copies[kind]`` lists the groups of
    that kind (all ranks: :data:`~chakra.table.DEFAULT_GROUP_ID`), ``kind_classes[kind]`` the
    classes among their members."""

    class_of: np.ndarray
    reps: list[int]
    ranks: list[list[int]]
    kind_of: dict[tuple[int, int], int]
    copies: dict[int, list[int]]
    kind_classes: dict[int, tuple[int, ...]]

    def __len__(self) -> int:
        return len(self.reps)

    def rep_of(self, rank: int) -> int:
        """The representative of ``rank``'s class."""
        return self.reps[int(self.class_of[rank])]


#: Remote memory that several NPUs share (their accesses queue behind each other's).
SHARED_MEMORY_TYPES = frozenset({MEMORY_POOL, PER_NODE_MEMORY_EXPANSION})


def class_plan(
    programs: Mapping[int, RankProgram],
    system: SystemConfig,
    network: NetworkConfig,
    remote_memory: RemoteMemoryConfig | None,
    comm_groups: Mapping[int, Sequence[int]] | None,
    network_model: NetworkModel,
) -> RankClasses | str:
    """The classes to simulate ``programs`` by, or why they run rank by rank."""
    if network_model is NetworkModel.CONGESTION_AWARE:
        return RANK_BY_RANK_REASONS["aware"]
    if system.custom_implementations or system.per_node_custom:
        return RANK_BY_RANK_REASONS["custom"]
    per_npu = remote_memory is None or remote_memory.memory_type not in SHARED_MEMORY_TYPES
    if uses_shared_memory(programs, per_npu):
        return RANK_BY_RANK_REASONS["memory"]
    members = {int(gid): tuple(sorted(ranks)) if ranks else None for gid, ranks in (comm_groups or {}).items()}
    found = rank_classes(programs, members, network)
    if isinstance(found, RankClasses) and len(found) == len(programs):
        return "no two ranks alike"
    return found


def rank_classes(
    programs: Mapping[int, RankProgram], members: Mapping[int, Sequence[int] | None], network: NetworkConfig
) -> RankClasses | str:
    """The classes of equivalent ranks of ``programs`` (rank -> program; every NPU of ``network``),
    whose groups are ``members`` (group id -> sorted global ranks, ``None``: every rank), or why
    they cannot be simulated by classes (a sentence)."""
    world = network.num_npus
    if not programs:
        return "no ranks"
    if sorted(programs) != list(range(world)):
        return RANK_BY_RANK_REASONS["partial"]
    everyone = tuple(range(world))
    groups = {gid: tuple(ranks) if ranks is not None else everyone for gid, ranks in members.items()}
    groups.setdefault(DEFAULT_GROUP_ID, everyone)
    gids = np.array(sorted(groups), dtype=np.int64)
    holds = {gid: frozenset(ranks) for gid, ranks in groups.items()}
    used: list[np.ndarray] = []  # per rank: the group of each collective, in order
    used_at: list[np.ndarray] = []  # the same as indices into gids
    sends: list[tuple[np.ndarray, np.ndarray]] = []  # per rank: (send peers, receive peers)
    base = np.empty(world, dtype=np.int64)
    seen: dict[bytes, int] = {}
    # by the identity of a program's columns (equal ranks share them when loaded; all are alive here)
    behaviour: dict[tuple[object, ...], bytes] = {}
    programs_of: list[bytes] = []  # per rank: the digest of what its program does
    moved: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per rank: its sends' (src, dst, size)
    for rank in range(world):
        program = programs[rank]
        c = program.columns
        kind = c.action[c.comm_pos]
        on = c.comm_group[kind == DO_COLLECTIVE]
        for gid in np.unique(on).tolist():
            if gid not in holds or rank not in holds[gid]:
                return f"rank {rank} issues a collective on group {gid}, which does not hold it"
        used.append(on)
        used_at.append(np.searchsorted(gids, on))
        sent = kind == DO_SEND
        sends.append((c.comm_dst[sent], c.comm_src[kind == DO_RECV]))
        same = (*(id(getattr(c, name)) for name in _BEHAVIOUR), tuple(program.slot_names),
                program.cpu_slots, program.missing_deps)  # fmt: skip
        found = behaviour.get(same)
        if found is None:
            found = behaviour[same] = _behaviour(program)
        programs_of.append(found)
        moved.append((c.comm_src[sent], c.comm_dst[sent], c.comm_size[sent]))
    src, dst, size = (np.concatenate([m[k] for m in moved]) for k in range(3))
    delays = np.split(message_delays_ns(network, src, dst, size), np.cumsum([len(m[0]) for m in moved])[:-1])
    for rank in range(world):
        base[rank] = seen.setdefault(programs_of[rank] + delays[rank].tobytes(), len(seen))
    color = base
    members_of = [np.asarray(groups[g], dtype=np.int64) for g in gids.tolist()]
    while True:
        # each group's colour: the multiset of its members' colours, numbered (exact keys, no hashes)
        shapes: dict[bytes, int] = {}
        sig = np.array([shapes.setdefault(np.sort(color[m]).tobytes(), len(shapes)) for m in members_of])
        refined: dict[tuple[object, ...], int] = {}
        new = np.empty(world, dtype=np.int64)
        for rank in range(world):
            send_to, recv_from = sends[rank]
            key = (int(color[rank]), sig[used_at[rank]].tobytes(), color[send_to].tobytes(), color[recv_from].tobytes())
            new[rank] = refined.setdefault(key, len(refined))
        if len(refined) == len(np.unique(color)):
            break
        color = new
    return _classes(color, groups, used, sends, programs)


def _behaviour(program: RankProgram) -> bytes:
    """A digest of what ``program`` does, apart from its groups, peers and node names."""
    c = program.columns
    digest = hashlib.blake2b(digest_size=16)
    for name in _BEHAVIOUR:
        digest.update(np.ascontiguousarray(getattr(c, name)).tobytes())
    digest.update(repr((program.slot_names, sorted(program.cpu_slots), program.missing_deps)).encode())
    return digest.digest()


def _classes(
    color: np.ndarray,
    groups: Mapping[int, tuple[int, ...]],
    used: list[np.ndarray],
    sends: list[tuple[np.ndarray, np.ndarray]],
    programs: Mapping[int, RankProgram],
) -> RankClasses | str:
    """The classes of the stable colouring ``color``, or why a representative would not stand for its class."""
    _, class_of = np.unique(color, return_inverse=True)
    ranks: dict[int, list[int]] = defaultdict(list)
    for rank, found in enumerate(class_of.tolist()):
        ranks[found].append(rank)
    ordered = sorted(ranks.values())  # classes numbered by their lowest rank
    class_of = np.empty(len(color), dtype=np.int64)
    for index, members in enumerate(ordered):
        class_of[members] = index
    users: dict[int, set[int]] = defaultdict(set)
    for rank, on in enumerate(used):
        for gid in np.unique(on).tolist():
            users[gid].add(rank)
    for gid, ranks_using in users.items():
        if len(ranks_using) < len(groups[gid]):
            return f"some members of group {gid} never issue a collective on it"
    # a group's role on a rank: the order of its first collective among the rank's groups (a tensor
    # and a data parallel pair of one class differ by it)
    role: dict[tuple[int, int], int] = {}
    for rank, on in enumerate(used):
        groups_used, first = np.unique(on, return_index=True)
        for order, gid in enumerate(groups_used[np.argsort(first)].tolist()):
            role[(rank, gid)] = order
    kinds: dict[tuple[object, ...], int] = {}
    kind_of_group: dict[int, int] = {}
    copies: dict[int, list[int]] = defaultdict(list)
    kind_classes: dict[int, tuple[int, ...]] = {}
    for gid in sorted(users):
        group = groups[gid]
        shape = tuple(sorted(Counter(class_of[list(group)].tolist()).items()))
        roles = tuple(sorted({(class_of[m].item(), role[(m, gid)]) for m in group}))
        kind = kinds.setdefault((shape, roles), len(kinds))
        kind_of_group[gid] = kind
        copies[kind].append(gid)
        kind_classes[kind] = tuple(c for c, _ in shape)
    kind_of: dict[tuple[int, int], int] = {}
    for rank in range(len(color)):
        distinct = np.unique(used[rank]).tolist()
        if len({kind_of_group[g] for g in distinct}) < len(distinct):
            return f"rank {rank} issues collectives on two groups that look alike"
        if ordered[int(class_of[rank])][0] == rank:
            kind_of.update({(rank, g): kind_of_group[g] for g in distinct})
        for peers, action in ((sends[rank][0], DO_SEND), (sends[rank][1], DO_RECV)):
            channels: dict[tuple[int, int, int], set[int]] = defaultdict(set)
            for key, peer in zip(_channels(programs[rank], class_of, action), peers.tolist(), strict=True):
                channels[key].add(peer)
            if any(len(found) > 1 for found in channels.values()):
                return f"rank {rank} exchanges messages of one tag and size with several ranks of one class"
    return RankClasses(class_of, [members[0] for members in ordered], ordered, kind_of, dict(copies), kind_classes)


def _channels(program: RankProgram, class_of: np.ndarray, action: int) -> list[tuple[int, int, int]]:
    """Each send's (``action`` DO_SEND) or receive's (DO_RECV) (class of its peer, tag, size)."""
    c = program.columns
    mine = c.action[c.comm_pos] == action
    peers = class_of[(c.comm_dst if action == DO_SEND else c.comm_src)[mine]].tolist()
    return list(zip(peers, c.comm_tag[mine].tolist(), c.comm_size[mine].tolist(), strict=True))


class ClassCollectives(CollectiveMatcher):
    """Collectives of the representatives, matched by group kind and turn: an instance starts when the
    last class among its members arrives, and each representative ends after the time its own group
    takes with its members arriving as their classes did. Each kind of instance (its kind, type, size
    and the classes' arrival offsets) is checked once against every copy of its group; the totals count
    every copy."""

    def __init__(self, classes: RankClasses, comm_groups: Mapping[int, Sequence[int]] | None,
                 system: SystemConfig, network: NetworkConfig):  # fmt: skip
        super().__init__(comm_groups, frozenset(range(network.num_npus)), network.num_npus, system, network)
        self.classes = classes
        self._kind_turn: dict[tuple[int, int], int] = defaultdict(int)  # (rep, kind) -> collectives issued
        # (kind, turn) -> rep -> (arrival ns, pos, comm type, size, group)
        self._pending: dict[tuple[int, int], dict[int, tuple[int, int, int, int, int]]] = {}
        self._checked: set[tuple[object, ...]] = set()
        self._member_classes: dict[int, np.ndarray] = {}  # group -> its members' classes

    def refusal(self, rank: int, group: int) -> tuple[str, str] | None:
        return None  # every rank's groups were checked when the classes were found

    def arrive(
        self, rank: int, pos: int, now_ns: int, comm_type: int, size_bytes: int, group: int
    ) -> list[tuple[int, int, int]] | None:
        kind = self.classes.kind_of[(rank, group)]
        turn = self._kind_turn[(rank, kind)]
        self._kind_turn[(rank, kind)] = turn + 1
        arrivals = self._pending.setdefault((kind, turn), {})
        arrivals[rank] = (now_ns, pos, comm_type, size_bytes, group)
        if len(arrivals) < len(self.classes.kind_classes[kind]):
            return None
        del self._pending[(kind, turn)]
        return self._complete_kind(kind, arrivals)

    def _complete_kind(
        self, kind: int, arrivals: dict[int, tuple[int, int, int, int, int]]
    ) -> list[tuple[int, int, int]]:
        first_ns = min(a[0] for a in arrivals.values())
        last_ns = max(a[0] for a in arrivals.values())
        if len({(a[2], a[3]) for a in arrivals.values()}) > 1:
            raise SymmetryBroken("the members of a collective disagree on its type or size")
        _, _, comm_type, size_bytes, _ = next(iter(arrivals.values()))
        world = self._network.num_npus
        everyone = len(self._group(self.classes.copies[kind][0])) == world  # the trees' alternation is shared
        first_tree = self._trees[comm_type] % 2 if everyone else 0
        at_ns = {self.classes.class_of[rep].item(): arrivals[rep][0] - first_ns for rep in arrivals}
        times = {rep: self._times_of(comm_type, size_bytes, a[4], first_tree, at_ns) for rep, a in arrivals.items()}
        check = (kind, comm_type, size_bytes, first_tree, tuple(sorted(at_ns.items())))
        if check not in self._checked:
            self._check_copies(kind, comm_type, size_bytes, first_tree, at_ns, times)
            self._checked.add(check)
        longest = next(iter(times.values()))
        if everyone:
            self._trees[comm_type] += longest.trees
        copies = len(self.classes.copies[kind])
        total = self.totals.setdefault(type_name(comm_type), {"count": 0, "bytes": 0, "time_ns": 0})
        total["count"] += copies
        total["bytes"] += copies * size_bytes
        total["time_ns"] += copies * (longest.longest_ns - (last_ns - first_ns))
        return [(rep, a[1], first_ns + times[rep].of(rep)) for rep, a in arrivals.items()]

    def _group(self, group: int) -> tuple[int, ...]:
        members = self.members[group]
        return members if members is not None else tuple(range(self._network.num_npus))

    def _times_of(
        self, comm_type: int, size_bytes: int, group: int, first_tree: int, at_ns: Mapping[int, int]
    ) -> CollectiveTimes:
        """The times of ``group``'s collective, its members arriving as their classes (``at_ns``) did."""
        classes = self._member_classes.get(group)
        if classes is None:
            classes = self._member_classes[group] = self.classes.class_of[list(self._group(group))]
        by_class = np.zeros(len(self.classes.reps), dtype=np.int64)
        by_class[list(at_ns)] = list(at_ns.values())
        offsets = tuple(by_class[classes].tolist())
        return collective_times(
            comm_type, size_bytes, self.members[group], self._system, self._network,
            first_tree=first_tree, offsets_ns=offsets,
        )  # fmt: skip

    def _check_copies(
        self,
        kind: int,
        comm_type: int,
        size_bytes: int,
        first_tree: int,
        at_ns: Mapping[int, int],
        times: Mapping[int, CollectiveTimes],
    ) -> None:
        """Raise :class:`SymmetryBroken` unless every copy of the group kind times each member as its
        class's representative is timed (and runs as one part)."""
        reps = self.classes.reps
        for group in self.classes.copies[kind]:
            if len(collective_parts(comm_type, self.members[group], self._system, self._network)) > 1:
                raise SymmetryBroken("a collective's plan runs its members in parts")
            copy = self._times_of(comm_type, size_bytes, group, first_tree, at_ns)
            for member in self._group(group):
                rep = reps[self.classes.class_of[member].item()]
                if copy.of(member) != times[rep].of(rep):
                    raise SymmetryBroken(
                        f"a {type_name(comm_type)} on group {group} takes {copy.of(member)} ns on rank "
                        f"{member}, {times[rep].of(rep)} ns on its class's rank {rep}"
                    )

    def stuck(self) -> list[tuple[int, int, str]]:
        return [
            (rank, a[1], f"collective #{turn} of a group kind that ranks of another class never issue")
            for (_, turn), arrivals in self._pending.items()
            for rank, a in arrivals.items()
        ]


class ClassMessages(MessageMatcher):
    """Messages between representatives: a rank's channel to a class stands for its class's
    (``(src, dst, tag, size)`` with both ends replaced by their representatives)."""

    def __init__(self, classes: RankClasses):
        super().__init__()
        self._rep = [classes.reps[c] for c in classes.class_of.tolist()]

    def send(self, key: MessageKey, arrival_ns: int) -> tuple[int, int, int] | None:
        src, dst, tag, size = key
        return super().send((self._rep[src], self._rep[dst], tag, size), arrival_ns)

    def receive(self, key: MessageKey, rank: int, pos: int, now_ns: int) -> int | None:
        src, dst, tag, size = key
        return super().receive((self._rep[src], self._rep[dst], tag, size), rank, pos, now_ns)


def expand_result(result: SimResult, classes: RankClasses, programs: Mapping[int, RankProgram]) -> SimResult:
    """The result of every rank from its representative's (``result`` of the representatives)."""
    ranks = {}
    intervals: dict[int, list[tuple[int, int, int, int]]] | None = {} if result.intervals is not None else None
    for rep, members in zip(classes.reps, classes.ranks, strict=True):
        for rank in members:
            ranks[rank] = dataclasses.replace(result.ranks[rep], rank=rank)
            if intervals is not None and result.intervals is not None:
                intervals[rank] = result.intervals[rep]
    return dataclasses.replace(
        result,
        ranks=dict(sorted(ranks.items())),
        intervals=dict(sorted(intervals.items())) if intervals is not None else None,
        names={r: dict(zip(p.ids, p.names, strict=True)) for r, p in sorted(programs.items())}
        if result.names is not None
        else None,
        slot_names={r: p.slot_names for r, p in sorted(programs.items())},
        classes=len(classes),
    )


def uses_shared_memory(programs: Mapping[int, RankProgram], per_npu: bool) -> bool:
    """Whether some rank accesses remote memory that other NPUs share (``per_npu``: each has its own)."""
    return not per_npu and any(bool((p.columns.action == DO_MEMORY).any()) for p in programs.values())
