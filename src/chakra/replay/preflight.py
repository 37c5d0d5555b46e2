"""What a replay would run, read and checked without starting a process (``chakra replay --dry-run``).

:func:`plan_replay` reads every rank of a workload as :func:`chakra.replay.launch.replay_workload`
does before it starts one (each file through :func:`chakra.replay.program.issue_program`, so a bad
one is refused with its name) and counts what each rank would issue. It also looks for what would
make the replay hang, from counts alone:

* a communicator group whose members issue different numbers of collectives on it (the first
  collective a member never reaches waits forever), and a collective on a group the rank is not a
  member of (a collective on a group the workload does not define runs on every rank, as the
  replay issues it: :func:`chakra.replay.program.replayed_group`);
* sends from one rank to another that the other's receives from it do not match in number.

Counts are the check: two members issuing the same number of collectives in another order also
hang, which only running them shows.

Example:
    plan = plan_replay("out/job")
    plan.ranks[0].collectives, plan.problems()    # 277, [] for a workload that would not hang
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chakra.errors import ChakraInputError, PathLike
from chakra.replay.program import IssueProgram, Kind, issue_program, replayed_group
from chakra.table import DEFAULT_GROUP_ID, MISSING, NodeTable
from chakra.workload import open_workload


@dataclass(frozen=True)
class RankReplayPlan:
    """What one rank would issue per iteration."""

    rank: int
    path: str
    nodes: int
    compute: int
    collectives: int
    sends: int
    recvs: int
    recorded_span_us: float | None
    largest_message_bytes: int
    #: Collectives per communicator group (:data:`DEFAULT_GROUP_ID` for those without one).
    collectives_by_group: dict[int, int]
    #: Sends per destination rank, and receives per source rank.
    sends_to: dict[int, int]
    recvs_from: dict[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "path": self.path, "nodes": self.nodes, "compute": self.compute,
            "collectives": self.collectives, "sends": self.sends, "recvs": self.recvs,
            "recorded_span_us": self.recorded_span_us, "largest_message_bytes": self.largest_message_bytes,
            "collectives_by_group": {str(g): n for g, n in self.collectives_by_group.items()},
            "sends_to": {str(r): n for r, n in self.sends_to.items()},
            "recvs_from": {str(r): n for r, n in self.recvs_from.items()},
        }  # fmt: skip


@dataclass
class ReplayPlan:
    """Every rank's plan, and the workload's communicator groups (id -> member ranks)."""

    prefix: str
    groups: dict[int, tuple[int, ...]]
    ranks: dict[int, RankReplayPlan] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What would hang the replay, one sentence each (empty when the counts agree)."""
        found: list[str] = []
        world = tuple(sorted(self.ranks))
        users: dict[int, set[int]] = {}  # group id (as replayed) -> the ranks issuing collectives on it
        issued: dict[tuple[int, int], int] = {}  # (group id as replayed, rank) -> collectives
        received: dict[tuple[int, int], int] = {}  # (source, destination) -> receives posted
        for rank, plan in self.ranks.items():
            for recorded, count in plan.collectives_by_group.items():
                gid = replayed_group(recorded, self.groups)
                users.setdefault(gid, set()).add(rank)
                issued[gid, rank] = issued.get((gid, rank), 0) + count
            for src, count in plan.recvs_from.items():
                received[src, rank] = count
        for gid in sorted(users):
            members = world if gid == DEFAULT_GROUP_ID else self.groups[gid]
            name = "the world group" if gid == DEFAULT_GROUP_ID else f"group {gid}"
            outsiders = sorted(users[gid] - set(members))
            if outsiders:
                found.append(f"ranks {outsiders} issue collectives on {name} without being its members")
            counts = {r: issued.get((gid, r), 0) for r in members if r in self.ranks}
            if len(set(counts.values())) > 1:
                found.append(f"the members of {name} issue different numbers of collectives on it: {counts}")
        sent = {(src, dst): n for src, plan in self.ranks.items() for dst, n in plan.sends_to.items()}
        for src, dst in sorted(set(sent) | set(received)):
            if sent.get((src, dst), 0) != received.get((src, dst), 0):
                found.append(f"rank {src} posts {sent.get((src, dst), 0)} send(s) to rank {dst}, which posts "
                             f"{received.get((src, dst), 0)} receive(s) from it")  # fmt: skip
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "groups": {str(g): list(m) for g, m in self.groups.items()},
            "ranks": [plan.to_dict() for plan in self.ranks.values()],
            "problems": self.problems(),
        }


def plan_replay(workload: PathLike, *, progress: Callable[[str, int, int], None] | None = None) -> ReplayPlan:
    """Every rank of ``workload`` (a prefix, its folder or one file) read and counted; raises
    :class:`chakra.errors.ChakraInputError` naming the file a replay would refuse. ``progress`` is
    told ``("reading ranks", done, total)`` after each rank.

    >>> import tempfile
    >>> from chakra.generate.micro import MicroParams, generate
    >>> folder = tempfile.mkdtemp()
    >>> ring, sends_only = generate(folder, ["send_recv_ring", "one_comm_send_node"], MicroParams(num_npus=4))
    >>> plan = plan_replay(ring.prefix)
    >>> len(plan.ranks), plan.ranks[0].sends_to, plan.ranks[0].recvs_from, plan.problems()
    (4, {1: 1}, {3: 1}, [])
    >>> plan_replay(sends_only.prefix).problems()[0]
    'rank 0 posts 1 send(s) to rank 1, which posts 0 receive(s) from it'
    """
    traces = open_workload(workload, whole=True)
    traces.require_rank_files("replay")
    ranks = sorted(traces.files)
    if ranks != list(range(len(ranks))):
        raise ChakraInputError(f"ranks {ranks[:8]} are not 0..{len(ranks) - 1}", path=traces.prefix,
                               hint="replay needs every rank file of the workload")  # fmt: skip
    groups = {gid: tuple(members) for gid, members in sorted((traces.comm_groups or {}).items())}
    plan = ReplayPlan(str(traces.prefix), groups)
    told = (lambda done, total: progress("reading ranks", done, total)) if progress is not None else None
    # one rank at a time in this process: a dry run starts no processes, and no table is kept
    plan.ranks.update(traces.map(_rank_plan, workers=1, progress=told).results)
    return plan


def _rank_plan(table: NodeTable) -> RankReplayPlan:
    assert table.rank is not None  # chakra.open names every table's rank
    return rank_replay_plan(issue_program(table), table.rank)


def rank_replay_plan(program: IssueProgram, rank: int) -> RankReplayPlan:
    """What ``program`` (rank ``rank``'s) would issue, counted.

    >>> import numpy as np
    >>> from chakra.replay.program import Kind
    >>> kind = np.array([Kind.COMPUTE, Kind.COLLECTIVE, Kind.SEND], dtype=np.int8)
    >>> program = IssueProgram("r.0.et", np.arange(3), ["mm", "ar", "s"], kind, np.zeros(3, np.int64),
    ...     np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, np.int64), np.array([-1, 64, 8]),
    ...     np.array([-1, 1, -1]), np.array([-1, -1, 1]), np.zeros(3, np.int64), np.zeros(3, np.int64), [],
    ...     np.zeros(4, np.int64), np.zeros(0, np.int64), None)
    >>> plan = rank_replay_plan(program, 0)
    >>> plan.collectives_by_group, plan.sends_to, plan.largest_message_bytes
    ({1: 1}, {1: 1}, 64)
    """
    kind = program.kind
    collective = kind == Kind.COLLECTIVE
    comm = collective | (kind == Kind.SEND) | (kind == Kind.RECV)
    groups = np.where(program.group[collective] == MISSING, DEFAULT_GROUP_ID, program.group[collective])
    sizes = program.comm_size[comm]
    sizes = sizes[sizes != MISSING]
    return RankReplayPlan(
        rank=rank,
        path=program.path,
        nodes=len(program),
        compute=int((kind == Kind.COMPUTE).sum()),
        collectives=int(collective.sum()),
        sends=int((kind == Kind.SEND).sum()),
        recvs=int((kind == Kind.RECV).sum()),
        recorded_span_us=program.recorded_span_us,
        largest_message_bytes=int(sizes.max()) if len(sizes) else 0,
        collectives_by_group=_counts(groups),
        sends_to=_counts(program.peer[kind == Kind.SEND]),
        recvs_from=_counts(program.peer[kind == Kind.RECV]),
    )


def _counts(values: np.ndarray) -> dict[int, int]:
    return dict(sorted(Counter(int(v) for v in values.tolist()).items()))
