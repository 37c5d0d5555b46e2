"""Matching communication across ranks: collectives by group and turn, messages by peers, tag and size.

* :class:`CollectiveMatcher`: the k-th collective a rank issues on a group is matched with the k-th
  of every other member present (ASTRA-sim's rule: members issue a group's collectives in the same
  order, ``reference/astra-sim.md`` §2.5); each member starts its part when it issues it, and
  the members' ends come from :func:`chakra.sim.collectives.collective_times` once the last arrived.
* :class:`MessageMatcher`: sends and receives match on ``(src, dst, tag, size)``, first come first
  matched, whichever side comes first waiting for the other (§2.4).

Both say, when the simulation ends with work left, who still waits and for what (:meth:`stuck`).

Example:
    >>> messages = MessageMatcher()
    >>> messages.receive((0, 1, 7, 64), rank=1, pos=3, now_ns=10) is None  # posted, no message yet
    True
    >>> messages.send((0, 1, 7, 64), arrival_ns=500)  # the waiting receive: (rank, pos, posted at)
    (1, 3, 10)
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Collection, Mapping, Sequence

from chakra.errors import ChakraInputError, PathLike
from chakra.sim.collectives import CollectiveTimes, collective_times, type_name
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.plans import collective_parts
from chakra.table import DEFAULT_GROUP_ID

#: How messages name the default group (``pg_name`` "" or "0", §2.5).
DEFAULT_GROUP_LABEL = "0"

#: A message's match key: (source rank, destination rank, tag, size in bytes).
MessageKey = tuple[int, int, int, int]
#: A rank still waiting at the end, and why: (rank, position, what it waits for).
Waiting = tuple[int, int, str]
#: The totals kept per collective type.
_TOTALS = ("count", "bytes", "time_ns")


def check_groups(comm_groups: Mapping[int, Sequence[int]] | None, world: int, path: PathLike | None = None) -> None:
    """Raise unless every group lists each of its ranks once, all inside the network's ``world`` NPUs
    (``path``: the comm groups file, named in the error)."""
    for key, ranks in (comm_groups or {}).items():
        outside = sorted(r for r in ranks if not 0 <= r < world)
        if outside:
            raise ChakraInputError(
                f"communicator group {key} lists ranks {outside}, outside the network's {world} NPUs",
                path=path,
                hint="check the comm groups file against npus_count in the network configuration",
            )
        if len(set(ranks)) != len(ranks):
            raise ChakraInputError(
                f"communicator group {key} lists a rank more than once: {list(ranks)}",
                path=path,
                hint="list each member of a group once in the comm groups file",
            )


class CollectiveMatcher:
    """Collectives matched by group and turn, timed when the last member arrives, totalled by type."""

    def __init__(
        self,
        comm_groups: Mapping[int, Sequence[int]] | None,
        present: Collection[int],
        world: int,
        system: SystemConfig,
        network: NetworkConfig,
        groups_path: PathLike | None = None,
    ):
        """``comm_groups``: group id -> member ranks (the comm groups file, read from ``groups_path``);
        ``present``: the ranks simulated; ``world``: the network's NPUs. Raises as :func:`check_groups`."""
        check_groups(comm_groups, world, groups_path)
        self._groups_file = os.fspath(groups_path) if groups_path is not None else None
        # group id (chakra.groups.group_id; DEFAULT_GROUP_ID: all ranks) -> members, None for all
        self.members: dict[int, tuple[int, ...] | None] = {DEFAULT_GROUP_ID: None}
        for key, ranks in (comm_groups or {}).items():
            self.members[int(key)] = tuple(sorted(ranks)) if ranks else None
        self._member_sets = {name: frozenset(ranks) for name, ranks in self.members.items() if ranks is not None}
        self._present = present
        # how many of a group's members are simulated: a collective starts when they all arrived
        self._expected = {
            name: sum(1 for r in (ranks if ranks is not None else present) if r in present)
            for name, ranks in self.members.items()
        }
        self._system, self._network = system, network
        self._turn: dict[tuple[int, int], int] = defaultdict(int)  # (rank, group) -> collectives issued
        # (group, turn) -> rank -> (arrival ns, pos, comm type, size) of the members arrived so far
        self._arrived: dict[tuple[int, int], dict[int, tuple[int, int, int, int]]] = {}
        # (type, size, group, first tree) -> times: the model is pure
        self._times: dict[tuple[int, int, int, int], CollectiveTimes] = {}
        self._present_set = frozenset(present)
        # (type, group) -> the parts of its members that run apart (None: one part), and per
        # (group, turn) the members whose part already ended
        self._parts: dict[tuple[int, int], list[frozenset[int]] | None] = {}
        self._done: dict[tuple[int, int], set[int]] = {}
        self._trees: dict[int, int] = defaultdict(int)  # type -> doubleBinaryTree trees taken (default group)
        self.totals: dict[str, dict[str, int]] = {}  # type name -> count, bytes, time_ns
        self.warnings: list[str] = []

    def refusal(self, rank: int, group: int) -> tuple[str, str] | None:
        """Why ``rank`` cannot issue a collective on ``group`` (an unknown group, one it is not in), with
        a hint, or ``None`` when it can."""
        source = self._groups_file
        if group not in self.members:
            if source is None:
                return f"uses communicator group {group}, which no comm groups file defines", (
                    "pass --comm-groups PREFIX.comm_groups.json"
                )
            return f"uses communicator group {group}, which {source} does not define", (
                "the comm groups file does not match the workload: pass the one written with it"
            )
        members = self._member_sets.get(group)
        if members is not None and rank not in members:
            listed = f"whose members in {source} are" if source is not None else "whose members are"
            return f"issues a collective on communicator group {group}, {listed} {sorted(members)}", (
                "the comm groups file does not match the workload: pass the one written with it"
            )
        return None

    def arrive(
        self, rank: int, pos: int, now_ns: int, comm_type: int, size_bytes: int, group: int
    ) -> list[tuple[int, int, int]] | None:
        """``rank`` issues its next collective on ``group`` (checked with :meth:`refusal`) at ``now_ns``.

        When it completes a part (the last member of the collective, or of the NPUs its plan runs
        together, :func:`~chakra.sim.collectives.collective_parts`): each of those members'
        ``(rank, pos, end time in ns)``. Members that disagree on type or size are simulated as the
        largest, with a warning.
        """
        turn = self._turn[(rank, group)]
        self._turn[(rank, group)] = turn + 1
        arrivals = self._arrived.setdefault((group, turn), {})
        arrivals[rank] = (now_ns, pos, comm_type, size_bytes)
        if len(arrivals) == self._expected[group]:
            del self._arrived[(group, turn)]
            done = self._done.pop((group, turn), set())
            return self._complete(group, turn, {r: a for r, a in arrivals.items() if r not in done}, last=True)
        part = self._part(comm_type, group, rank)
        if part is None or any(r not in arrivals for r in part):
            return None
        # a collective whose plan leaves NPUs apart (dimensions beyond the configured algorithm
        # list): this part's members end without waiting for the others
        self._done.setdefault((group, turn), set()).update(part)
        return self._complete(group, turn, {r: arrivals[r] for r in part}, last=False)

    def _part(self, comm_type: int, group: int, rank: int) -> frozenset[int] | None:
        """The simulated members whose part of a ``comm_type`` collective on ``group`` runs with
        ``rank``'s, when the plan leaves some members apart; ``None`` when it joins them all."""
        key = (comm_type, group)
        if key not in self._parts:
            found = collective_parts(comm_type, self.members[group], self._system, self._network)
            self._parts[key] = None if len(found) == 1 else [part & self._present_set for part in found]
        parts = self._parts[key]
        if parts is None:
            return None
        return next(part for part in parts if rank in part)

    def _complete(
        self, group: int, turn: int, arrivals: dict[int, tuple[int, int, int, int]], *, last: bool
    ) -> list[tuple[int, int, int]]:
        """Time the collective for the members of ``arrivals`` (all there): their ``(rank, pos, end ns)``.
        ``last``: these are the collective's last members (its totals and trees are counted)."""
        first_ns = min(a[0] for a in arrivals.values())
        last_ns = max(a[0] for a in arrivals.values())
        kinds = {(a[2], a[3]) for a in arrivals.values()}
        comm_type, size_bytes = max(kinds, key=lambda kind: kind[1])
        if len(kinds) > 1:
            self.warnings.append(
                f"collective #{turn} of group {_label(group)}: members disagree on type/size {sorted(kinds)}; "
                f"simulated as the largest"
            )
        members = self.members[group]
        everyone = members is None or len(members) == self._network.num_npus  # the trees' alternation is shared
        first_tree = self._trees[comm_type] % 2 if everyone else 0
        if first_ns == last_ns:
            key = (comm_type, size_bytes, group, first_tree)
            times = self._times.get(key)
            if times is None:
                times = collective_times(
                    comm_type, size_bytes, members, self._system, self._network, first_tree=first_tree
                )
                self._times[key] = times
        else:
            # each member starts its part when it issues it; a rank not simulated (or, for a part,
            # outside it) starts with the last
            ranks = members if members is not None else range(self._network.num_npus)
            offsets = tuple((arrivals[r][0] if r in arrivals else last_ns) - first_ns for r in ranks)
            times = collective_times(
                comm_type, size_bytes, members, self._system, self._network, first_tree=first_tree, offsets_ns=offsets
            )
        if last:
            if everyone:
                self._trees[comm_type] += times.trees
            total = self.totals.setdefault(type_name(comm_type), dict.fromkeys(_TOTALS, 0))
            total["count"] += 1
            total["bytes"] += size_bytes
            total["time_ns"] += times.longest_ns - (last_ns - first_ns)
        return [(r, a[1], first_ns + times.of(r)) for r, a in arrivals.items()]

    def stuck(self) -> list[Waiting]:
        """The ranks waiting in a collective that some member never issues."""
        waiting = []
        for (group, turn), arrivals in self._arrived.items():
            members = self.members.get(group)
            expected = [r for r in (members if members is not None else self._present) if r in self._present]
            absent = [r for r in expected if r not in arrivals]
            done = self._done.get((group, turn), set())
            for rank, (_, pos, _, _) in arrivals.items():
                if rank in done:
                    continue
                waiting.append(
                    (rank, pos, f"collective #{turn} of group {_label(group)}: ranks {absent} never issue it")
                )
        return waiting


def _label(group: int) -> str:
    return DEFAULT_GROUP_LABEL if group == DEFAULT_GROUP_ID else str(group)


class MessageMatcher:
    """Sends and receives matched on ``(src, dst, tag, size)`` in the order they come."""

    def __init__(self) -> None:
        self._arrivals: dict[MessageKey, deque[int]] = defaultdict(deque)  # sent, not yet received: arrival ns
        self._posted: dict[MessageKey, deque[tuple[int, int, int]]] = defaultdict(deque)  # (rank, pos, posted ns)

    def send(self, key: MessageKey, arrival_ns: int) -> tuple[int, int, int] | None:
        """A message that arrives at ``arrival_ns``: the receive waiting for it ``(rank, pos, posted ns)``,
        or ``None`` (the message waits for its receive)."""
        posted = self._posted.get(key)
        if posted:
            return posted.popleft()
        self._arrivals[key].append(arrival_ns)
        return None

    def receive(self, key: MessageKey, rank: int, pos: int, now_ns: int) -> int | None:
        """A receive posted at ``now_ns``: the arrival time of the message sent for it, or ``None`` (it waits)."""
        arrivals = self._arrivals.get(key)
        if arrivals:
            return arrivals.popleft()
        self._posted[key].append((rank, pos, now_ns))
        return None

    def stuck(self) -> list[Waiting]:
        """The receives whose message is never sent."""
        return [
            (rank, pos, f"a receive of {size} bytes from rank {src} (tag {tag}) that is never sent")
            for (src, _dst, tag, size), posts in self._posted.items()
            for rank, pos, _ in posts
        ]
