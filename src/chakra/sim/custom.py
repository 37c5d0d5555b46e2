"""Collectives run by algorithms written as Chakra ETs: ASTRA-sim's custom collectives.

A system file's ``all-reduce-implementation-custom`` (``all-gather``, ``reduce-scatter`` and
``all-to-all`` likewise; ``per-node-custom-implementation`` per workload node) names a path prefix
of per-rank ETs of SEND, RECV and COMP nodes, the form
collective-algorithm languages (MSCCLang, TACOS) are compiled to. Each member of a collective of
that type runs ``PREFIX.{position}.et``, its position being its rank on the world, or its index
among the sorted members of a communicator group, as ASTRA-sim's ``CustomAlgorithm`` runs it:

* a member's run starts when it issues the collective, without waiting for the others, and ends
  when none of its algorithm's nodes is left (the collective node completes then);
* algorithm ranks (``comm_src``, ``comm_dst``) are positions in the group, mapped to NPUs through
  the group's members;
* nodes issue as their dependencies finish, those freed together in the order ASTRA-sim's feeder
  hands them out (:mod:`chakra.sim.feeder_order`);
* a SEND carries its own ``comm_size`` (the workload node's size is ignored) to its peer's NPU over
  the network model in use (each message its congestion-unaware delay, or the congestion-aware
  links), and finishes when the message arrives;
* a RECV finishes when the message of the same source, destination, tag and size arrives: at its
  arrival if the receive was posted (after the send's), else as a new event of the instant it is
  posted; sends and receives of one key pair up in order;
* a COMP takes its ``duration_micros`` (1 ns when 0), a system event of the member's NPU;
* no endpoint delay, memory-bus crossing or reduction time is added.

Refused as ASTRA-sim fails on them: ``preferred-dataset-splits`` other than 1 and all-gathers of 0
bytes (ASTRA-sim's collective waits for chunks the algorithm never runs: it never finishes), a
missing rank file or one without nodes (ASTRA-sim exits), nodes of other types (never finished), a
peer outside the group (ASTRA-sim reads past its member list), a group file listing its members
unsorted (ASTRA-sim's positions and peers then disagree).

Example:
    runner = CustomCollectives(matcher, system, network, transport, events, schedule, finished, groups)
    runner.arrive(rank, pos, now_ns, comm_type, size_bytes, group)   # from the engine's issue
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, CollectiveCommType
from chakra.sim.collectives import type_name
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.events import SystemEvents
from chakra.sim.feeder_order import FeederOrder, HashedSet
from chakra.sim.matching import CollectiveMatcher, Waiting
from chakra.sim.network import MessageNetwork, Schedule
from chakra.sim.program import DO_COMPUTE, DO_RECV, DO_SEND, RankProgram, program_of
from chakra.table import DEFAULT_GROUP_ID, MISSING, load_table

#: ASTRA-sim's front end maps a message's tag into its native space as ``tag % 500000000``.
TAG_SPACE = 500_000_000
#: A COMP node of ``duration_micros`` 0 takes 1 ns (``CustomAlgorithm::issue``).
MIN_COMP_NS = 1
#: ``finished(rank, pos, t_ns)``: the engine's completion of a member's collective node.
Finished = Callable[[int, int, int], None]
#: A message's key: source NPU, destination NPU, tag, bytes.
MessageKey = tuple[int, int, int, int]


@dataclass
class _Instance:
    """One collective (a group's turn) under way, for the totals."""

    comm_type: int
    members: int
    ended: int = 0
    last_arrival_ns: int = 0
    last_end_ns: int = 0


@dataclass(frozen=True)
class _Algorithm:
    """One rank file of a custom algorithm, read and checked: its program (positions in id order)
    and the order its feeder frees nodes in (positions)."""

    program: RankProgram
    free_at_start: HashedSet  # node ids
    children: list[list[int]]  # position -> children's positions, in the order they are freed
    position_of: dict[int, int]  # node id -> position


@dataclass
class _Run:
    """One member's run of its algorithm in one collective."""

    instance: _Instance
    key: tuple[int, int]  # (group, turn)
    algorithm: _Algorithm
    npus: Sequence[int]  # algorithm rank -> NPU
    npu: int
    node: int  # the member's collective node in its workload
    free: HashedSet  # node ids freed and not issued yet
    deps_left: list[int] = field(default_factory=list)
    in_flight: int = 0


class CustomCollectives:
    """The engine's collectives of the types the system file gives a custom algorithm (module docstring)."""

    def __init__(
        self,
        matcher: CollectiveMatcher,
        system: SystemConfig,
        network: NetworkConfig,
        transport: MessageNetwork,
        events: SystemEvents,
        schedule: Schedule,
        finished: Finished,
        listed_groups: Mapping[int, Sequence[int]] | None,
    ):
        self.matcher, self.system, self.network = matcher, system, network
        self.transport, self.events, self.schedule, self.finished = transport, events, schedule, finished
        self.listed = {int(group): tuple(ranks) for group, ranks in (listed_groups or {}).items()}
        self.prefixes = {
            CollectiveCommType.Value(name): prefix for name, prefix in system.custom_implementations.items()
        }
        self.per_node = system.per_node_custom
        # (rank, group, type) -> the algorithm of a communicator group's collectives of a type: ASTRA-sim
        # fixes a group's plan by its first collective of that type (CommunicatorGroup::get_collective_plan)
        self.group_plans: dict[tuple[int, int, int], Path | None] = {}
        self.algorithms: dict[Path, _Algorithm] = {}
        self.turns: dict[tuple[int, int], int] = {}  # (rank, group) -> collectives issued
        self.instances: dict[tuple[int, int], _Instance] = {}
        self.live: dict[int, _Run] = {}  # id -> the runs under way, for stuck()
        self.arrived: dict[MessageKey, int] = {}  # messages there before their receive
        self.posted: dict[MessageKey, deque[tuple[_Run, int]]] = {}  # receives waiting for their message

    def algorithm_for(self, rank: int, comm_type: int, node_id: int, group: int) -> Path | None:
        """The prefix of the custom algorithm ``rank``'s collective node ``node_id`` runs, or ``None``
        for the native algorithms: ``per-node-custom-implementation``'s entry for the node, else the
        type's custom algorithm (``CollectiveImplLookup``); on a communicator group, the choice of
        the rank's first collective of the type there."""
        kind = _phase_type(comm_type)
        if group == DEFAULT_GROUP_ID:
            return self.per_node.get(node_id, self.prefixes.get(kind))
        key = (rank, group, kind)
        if key not in self.group_plans:
            self.group_plans[key] = self.per_node.get(node_id, self.prefixes.get(kind))
        return self.group_plans[key]

    def arrive(
        self, rank: int, pos: int, now_ns: int, comm_type: int, size_bytes: int, group: int, prefix: Path
    ) -> None:
        """``rank`` issues its next collective on ``group`` at ``now_ns``: the algorithm ``prefix``
        (:meth:`algorithm_for`) starts now."""
        if self.system.preferred_dataset_splits != 1:
            raise ChakraInputError(
                f"a custom algorithm with preferred-dataset-splits {self.system.preferred_dataset_splits}: "
                "ASTRA-sim's collective then waits for chunks the algorithm never runs, and never finishes",
                path=self.system.path,
                hint='set "preferred-dataset-splits": 1 (the algorithm\'s ET sets its own message sizes)',
            )
        if _phase_type(comm_type) == ALL_GATHER and size_bytes == 0:
            raise ChakraInputError(
                "an all-gather of 0 bytes with a custom algorithm: ASTRA-sim counts its chunks as 0/0 and never "
                "finishes it",
                hint="give the collective node its comm_size",
            )
        turn = self.turns.get((rank, group), 0)
        self.turns[(rank, group)] = turn + 1
        members = self.matcher.members[group]
        npus = self._peers(group, members)
        instance = self.instances.get((group, turn))
        if instance is None:
            instance = self.instances[(group, turn)] = _Instance(comm_type, len(npus))
            total = self.matcher.totals.setdefault(type_name(comm_type), {"count": 0, "bytes": 0, "time_ns": 0})
            total["count"] += 1
            total["bytes"] += size_bytes
        instance.last_arrival_ns = now_ns
        position = members.index(rank) if members is not None else rank
        algorithm = self._algorithm(prefix, position, len(npus))
        run = _Run(
            instance, (group, turn), algorithm, npus, rank, pos, algorithm.free_at_start.copy(),
            list(algorithm.program.dep_count),
        )  # fmt: skip
        self.live[id(run)] = run
        self._issue_free(run, now_ns)

    def _peers(self, group: int, members: tuple[int, ...] | None) -> Sequence[int]:
        """Algorithm rank -> NPU: the group's members as its file lists them (the world: the ranks)."""
        if members is None:
            return range(self.network.num_npus)
        listed = self.listed.get(group, members)
        if tuple(listed) != members:
            raise ChakraInputError(
                f"communicator group {group} lists its members unsorted ({list(listed)[:8]}): ASTRA-sim reads a "
                "custom algorithm's file by the member's sorted position but maps its peers in the listed order, "
                "so the two disagree",
                hint="list every group's ranks in ascending order in the comm groups file",
            )
        return members

    def _algorithm(self, prefix: Path, position: int, ranks: int) -> _Algorithm:
        """The algorithm's ET of ``position``, read once and checked as ASTRA-sim would run it."""
        path = prefix.with_name(f"{prefix.name}.{position}.et")
        algorithm = self.algorithms.get(path)
        if algorithm is not None:
            return algorithm
        if not path.is_file():
            raise ChakraInputError(
                f"the custom algorithm has no file for position {position}: ASTRA-sim exits "
                '("Cannot access et file for collective algorithm")',
                path=path,
                hint=f"write one ET per rank of the group, {prefix.name}.0.et to {prefix.name}.{ranks - 1}.et",
            )
        table = load_table(path, position)
        if table.graph.missing_deps:
            raise ChakraInputError(
                f"{len(table.graph.missing_deps)} dependencies on node ids not in the file: ASTRA-sim's feeder "
                "refuses the custom algorithm's file and exits",
                path=path,
                hint="make every data_deps and ctrl_deps id name a node of the same file",
            )
        untagged = np.flatnonzero(table.comm.tag == MISSING)
        if len(untagged):
            node = int(table.ids[int(table.comm.pos[untagged[0]])])
            raise ChakraInputError(
                f"node {node} has no comm_tag: ASTRA-sim's feeder throws on a custom algorithm's message without one",
                path=path,
                hint="give every SEND and RECV its comm_tag (chakra validate --target custom-collective lists them)",
            )
        program = program_of(table, position).prepare()
        if not len(program):
            raise ChakraInputError(
                'the custom algorithm\'s file has no nodes: ASTRA-sim exits ("No dependancy free nodes found")',
                path=path,
            )
        for node, action in enumerate(program.action):
            if action not in (DO_SEND, DO_RECV, DO_COMPUTE):
                raise ChakraInputError(
                    f"node {program.ids[node]} ({program.names[node]}) is neither SEND, RECV nor COMP: ASTRA-sim's "
                    "custom algorithm never finishes it",
                    path=path,
                    hint="a custom algorithm holds COMM_SEND_NODE, COMM_RECV_NODE and COMP_NODE nodes only",
                )
            if action == DO_COMPUTE:
                continue
            spec = program.comm[node]
            peer = spec.dst if action == DO_SEND else spec.src
            if not 0 <= peer < ranks:
                role = "sends to" if action == DO_SEND else "receives from"
                raise ChakraInputError(
                    f"node {program.ids[node]} ({program.names[node]}) {role} algorithm rank {peer}, outside the "
                    f"collective's {ranks} members: the algorithm is written for another number of ranks (ASTRA-sim "
                    "reads past the group's member list)",
                    path=path,
                    hint="use an algorithm written for the group's size, or run the collective on a group that size",
                )
        graph = table.graph
        file_ids = graph.ids.tolist()
        parents = [[file_ids[dep] for dep in graph.parents(pos).tolist()] for pos in range(len(file_ids))]
        feeder = FeederOrder(file_ids, parents)
        position_of = {node_id: pos for pos, node_id in enumerate(program.ids)}
        children = [[position_of[child] for child in feeder.children[node_id]] for node_id in program.ids]
        algorithm = self.algorithms[path] = _Algorithm(program, feeder.free_at_start, children, position_of)
        return algorithm

    def _issue_free(self, run: _Run, now_ns: int) -> None:
        """Issue every node freed and not issued yet, in the feeder's order (``issue_dep_free_nodes``)."""
        free = run.free
        if not len(free):
            return
        position_of = run.algorithm.position_of
        for node_id in list(free):
            free.erase(node_id)
            self._issue(run, position_of[node_id], now_ns)

    def _issue(self, run: _Run, node: int, now_ns: int) -> None:
        """Issue one node of the member's algorithm (``CustomAlgorithm::issue``)."""
        program = run.algorithm.program
        action = program.action[node]
        run.in_flight += 1
        if action == DO_COMPUTE:
            took_ns = program.time_ns[node] or MIN_COMP_NS
            self.events.at(run.npu, now_ns + took_ns, partial(self._done, run, node))
            return
        spec = program.comm[node]
        tag = spec.tag % TAG_SPACE
        if action == DO_SEND:
            dst = run.npus[spec.dst]
            key = (run.npu, dst, tag, spec.size_bytes)
            self.transport.send(now_ns, run.npu, dst, spec.size_bytes, partial(self._arrived, run, node, key))
            return
        key = (run.npus[spec.src], run.npu, tag, spec.size_bytes)
        if self.arrived.get(key):
            self.arrived[key] -= 1
            self.schedule(now_ns, partial(self._done, run, node))
        else:
            self.posted.setdefault(key, deque()).append((run, node))

    def _arrived(self, run: _Run, node: int, key: MessageKey, now_ns: int) -> None:
        """A message arrived: its send finishes, then its receive if posted."""
        self._done(run, node, now_ns)
        waiting = self.posted.get(key)
        if waiting:
            receiver, receive = waiting.popleft()
            self._done(receiver, receive, now_ns)
        else:
            self.arrived[key] = self.arrived.get(key, 0) + 1

    def _done(self, run: _Run, node: int, now_ns: int) -> None:
        """A node finished: the nodes it frees issue, and the member's collective ends with its last node."""
        run.in_flight -= 1
        deps_left, ids = run.deps_left, run.algorithm.program.ids
        for child in run.algorithm.children[node]:
            deps_left[child] -= 1
            if not deps_left[child]:
                run.free.insert(ids[child])
        self._issue_free(run, now_ns)
        if run.in_flight:
            return
        del self.live[id(run)]
        self.finished(run.npu, run.node, now_ns)
        instance = run.instance
        instance.ended += 1
        instance.last_end_ns = max(instance.last_end_ns, now_ns)
        if instance.ended == instance.members:
            del self.instances[run.key]
            total = self.matcher.totals[type_name(instance.comm_type)]
            total["time_ns"] += instance.last_end_ns - instance.last_arrival_ns

    def stuck(self) -> list[Waiting]:
        """The members whose algorithm never ends (a receive whose message never comes)."""
        waiting = []
        for run in self.live.values():
            posted = [key for key, runs in self.posted.items() if any(r is run for r, _ in runs)]
            why = f"its custom {type_name(run.instance.comm_type)} algorithm ({run.algorithm.program.path.name})"
            if posted:
                src, _dst, tag, size = posted[0]
                why += f", whose receive of {size} bytes from NPU {src} (tag {tag}) is never sent"
            waiting.append((run.npu, run.node, why))
        return waiting


def _phase_type(comm_type: int) -> int:
    return REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
