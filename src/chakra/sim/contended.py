"""Collectives whose messages share links (the congestion-aware network model, :mod:`chakra.sim.links`).

Under the congestion-unaware model a collective is timed on its own once its last member arrives
(:mod:`chakra.sim.collectives`): nothing else can slow its messages. When links are shared that no
longer holds, so here every member runs its part in the simulation's own time, from the moment it
issues the collective, and every message goes through the links:

* the collective is split into ``K`` chunk streams of ``C`` bytes (:func:`~chakra.sim.collectives.
  chunk_plan`); each member runs at most ``active-chunks-per-dimension`` of them at a time, first come
  first served, starting the next when one ends (ASTRA-sim's dimension queue; one queue per member
  and collective: streams of different collectives meet only on the links);
* a stream's ring phase (``Ring.cc``): the member sends its first message ``d`` (the endpoint delay)
  after the stream starts and posts the matching receive with it; receive ``k`` completes when both
  the predecessor's ``k``-th message has arrived and the receive is posted; ``d`` later (plus the
  reduction ``t_red`` on the reduced steps) the member sends again, and after its last receive and
  that delay the stream ends;
* a stream's ``direct`` phase: each member's ``AllToAll`` state machine
  (:class:`~chakra.sim.algorithms.DirectMember`, the one the congestion-unaware model replays), its
  system events in ASTRA-sim's per-NPU buckets, its messages over the links;
* a member's collective ends when its last stream does.

Gather, scatter, broadcast, reduce and barrier, which ASTRA-sim does not simulate, keep this
package's own congestion-unaware models (a warning counts them).

* a stream's ``doubleBinaryTree`` phase: the replay of every member's chunks on the two alternating
  trees (:class:`~chakra.sim.algorithms.TreeReplay`), members joining when they issue it;

* a stream's ``halvingDoubling`` phase: ASTRA-sim's ``HalvingDoubling`` state machine
  (:class:`_HalvingDoublingStream`): each step's packet crosses the memory bus before its send, its
  reduction counted where that machine counts it;

**Partial** (issue 31): a collective runs in one phase over all its members' links; on a
multi-dimensional network (:mod:`chakra.sim.links` routes messages over one, an extension of
ASTRA-sim's congestion-aware backend, which has none) a collective's plan in phases per dimension is
refused in one line.

Example:
    runner = ContendedCollectives(matcher, system, network, links, schedule, finished, present)
    runner.arrive(rank, pos, now_ns, comm_type, size_bytes, group)   # from the engine's issue
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    CollectiveCommType,
)
from chakra.sim.algorithms import (
    DIRECT,
    DOUBLE_BINARY_TREE,
    HALVING_DOUBLING,
    Algorithm,
    DirectMember,
    Span,
    SystemEvents,
    TreeReplay,
    halving_doubling_steps,
    npu_span,
    ring_steps,
)
from chakra.sim.collectives import (
    SUBGROUP_ENDPOINT_DELAY_NS,
    chunk_plan,
    reduction_delay_ns,
)
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.links import LinkNetwork
from chakra.sim.matching import CollectiveMatcher
from chakra.sim.plans import ALGORITHM_LIST, native_plan

#: ``finished(rank, pos, t_ns)``: the engine's completion of a member's collective node.
Finished = Callable[[int, int, int], None]
Schedule = Callable[[int, Callable[[int], None]], None]


@dataclass(frozen=True)
class _Step:
    """One step of a ring phase: whom each position sends to (and so receives from), the message's
    bytes, and the reduction after its receive (ns)."""

    to: Sequence[int]
    message_bytes: int
    reduction_ns: int


@dataclass
class _Instance:
    """One collective (a group's turn) under way: its shape and every member's progress."""

    npus: tuple[int, ...]  # members in ring order (group order), their NPU ids
    comm_type: int
    algorithm: Algorithm
    local: bool  # a subgroup's members (ASTRA-sim's Local ring)
    phase_type: int
    streams: int
    steps: list[_Step]  # ring: a stream's steps in order (the state machines: none)
    message_bytes: int  # direct, tree: every message's size; halvingDoubling: the chunk's
    endpoint_ns: int
    reduction_ns: int
    positions: dict[int, int] = field(default_factory=dict)  # NPU -> position
    node: dict[int, int] = field(default_factory=dict)  # position -> the member's node
    waiting: dict[int, deque[int]] = field(default_factory=dict)  # position -> streams not started
    running: dict[int, int] = field(default_factory=dict)
    left: dict[int, int] = field(default_factory=dict)  # position -> streams not ended
    # (stream, receiving position, step) -> "arrived" or "posted"
    mailbox: dict[tuple[int, int, int], str] = field(default_factory=dict)
    # direct and halvingDoubling: (stream, source, destination position) -> messages there before
    # their receive, and receives posted before their message; each member's state machine per stream
    arrived: dict[tuple[int, int, int], int] = field(default_factory=dict)
    posted: dict[tuple[int, int, int], int] = field(default_factory=dict)
    machines: dict[tuple[int, int], _DirectStream | _HalvingDoublingStream] = field(default_factory=dict)
    trees: _TreeRun | None = None  # doubleBinaryTree: the replay of every member's chunks
    first_tree: int = 0  # doubleBinaryTree: the tree of the first chunk (0: RootMax)
    ended: int = 0
    last_arrival_ns: int = 0
    last_end_ns: int = 0


class ContendedCollectives:
    """The engine's collectives under the congestion-aware model (module docstring)."""

    def __init__(
        self,
        matcher: CollectiveMatcher,
        system: SystemConfig,
        network: NetworkConfig,
        links: LinkNetwork,
        schedule: Schedule,
        finished: Finished,
        present: frozenset[int],
    ):
        self.matcher, self.system, self.network = matcher, system, network
        self.links, self.schedule, self.finished = links, schedule, finished
        self.present = present
        # ASTRA-sim's per-NPU buckets of system events, over the engine's queue (the state machines')
        self.events = _EngineEvents(schedule)
        self.turns: dict[tuple[int, int], int] = {}  # (rank, group) -> collectives issued
        self.untaken: dict[str, int] = {}  # type name -> collectives timed without contention
        self.trees_taken: dict[int, int] = {}  # comm type -> doubleBinaryTree chunks so far
        self.instances: dict[tuple[int, int], _Instance] = {}

    def takes(self, comm_type: int) -> bool:
        """Whether collectives of ``comm_type`` run here: the types ASTRA-sim simulates. This
        package's own models of the others (gather, scatter, broadcast, reduce, barrier) stay the
        congestion-unaware ones (:meth:`uncontended` counts them for a warning)."""
        phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
        return phase_type in ALGORITHM_LIST

    def uncontended(self, comm_type: int) -> None:
        """A collective of a type :meth:`takes` refuses is timed without contention."""
        self.untaken[_type_name(comm_type)] = self.untaken.get(_type_name(comm_type), 0) + 1

    def warnings(self) -> list[str]:
        return [
            f"{count} {name} collectives were timed by this package's own model, without queueing on the links "
            "(the congestion-aware model runs ASTRA-sim's types only)"
            for name, count in sorted(self.untaken.items())
        ]

    def arrive(self, rank: int, pos: int, now_ns: int, comm_type: int, size_bytes: int, group: int) -> None:
        """``rank`` issues its next collective on ``group`` at ``now_ns``: its part starts now."""
        turn = self.turns.get((rank, group), 0)
        self.turns[(rank, group)] = turn + 1
        key = (group, turn)
        instance = self.instances.get(key)
        if instance is None:
            instance = self.instances[key] = self._instance(comm_type, size_bytes, group)
            total = self.matcher.totals.setdefault(_type_name(comm_type), {"count": 0, "bytes": 0, "time_ns": 0})
            total["count"] += 1
            total["bytes"] += size_bytes
        instance.last_arrival_ns = now_ns
        position = instance.positions[rank]
        instance.node[position] = pos
        instance.waiting[position] = deque(range(instance.streams))
        instance.running[position] = 0
        instance.left[position] = instance.streams
        if instance.algorithm.name == DOUBLE_BINARY_TREE:
            self._start_tree(instance, position, now_ns, key)
            return
        self._pump(instance, position, now_ns, key)

    def _instance(self, comm_type: int, size_bytes: int, group: int) -> _Instance:
        members = self.matcher.members[group]
        npus = tuple(members) if members is not None else tuple(range(self.network.num_npus))
        absent = [npu for npu in npus if npu not in self.present]
        if absent:
            raise _not_yet(f"a collective some of whose members are not simulated (ranks {absent[:8]})")
        phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
        subgroup = npu_span(self.network, npus, SUBGROUP_ENDPOINT_DELAY_NS, symmetric=False, local=True)
        plan = native_plan(phase_type, subgroup if members is not None else None, self.system, self.network)
        if len(plan) != 1:
            algorithms = ", ".join(phase.algorithm.name for phase in plan)
            raise _not_yet(f"the {algorithms} algorithms over {len(plan)} phases (one phase only)")
        if plan[0].span.size != len(npus):
            # ASTRA-sim's plan when the system file lists fewer algorithms than the network has
            # dimensions: the collective runs over the first dimension's lines only
            raise _not_yet(
                f"a collective over the lines of dimension {plan[0].dim} of a multi-dimensional network "
                f"({plan[0].span.size} of its {len(npus)} NPUs at a time)"
            )
        algorithm = plan[0].algorithm
        chunk_bytes, streams = chunk_plan(
            comm_type, size_bytes, self.system.preferred_dataset_splits, self.network.num_npus
        )
        n = len(npus)

        def t_red(message_bytes: int) -> int:
            return reduction_delay_ns(message_bytes, self.system.local_mem_bw_gbps)

        steps: list[_Step] = []
        message = reduction = first_tree = 0
        if algorithm.name == DIRECT:
            message = chunk_bytes if phase_type == ALL_GATHER else chunk_bytes // n
            reduction = t_red(message) if phase_type in (ALL_REDUCE, REDUCE_SCATTER) else 0
        elif algorithm.name == HALVING_DOUBLING:
            halving_doubling_steps(phase_type, n, chunk_bytes, t_red)  # refuses what ASTRA-sim cannot run
            message = chunk_bytes
        elif algorithm.name == DOUBLE_BINARY_TREE:
            if n & (n - 1):
                raise _not_yet(f"doubleBinaryTree over {n} NPUs (ASTRA-sim's tree holds a power-of-two count)")
            message, reduction = chunk_bytes, t_red(chunk_bytes)
            if len(npus) == self.network.num_npus:
                # the two trees alternate over the chunks of every collective of a type on all NPUs
                first_tree = self.trees_taken.get(comm_type, 0) % 2
                self.trees_taken[comm_type] = self.trees_taken.get(comm_type, 0) + streams
        else:  # ring
            count, piece, reduced = ring_steps(phase_type, n, chunk_bytes)
            successor = [(p + 1) % n for p in range(n)]
            reduced_ns = t_red(piece) if reduced else 0
            steps = [_Step(successor, piece, reduced_ns if k < reduced else 0) for k in range(count)]
        endpoint_ns = SUBGROUP_ENDPOINT_DELAY_NS if members is not None else int(self.system.endpoint_delay_ns)
        instance = _Instance(
            npus, comm_type, algorithm, members is not None, phase_type, streams, steps, message, endpoint_ns,
            reduction,
        )  # fmt: skip
        instance.positions = {npu: p for p, npu in enumerate(npus)}
        instance.first_tree = first_tree
        return instance

    def _pump(self, instance: _Instance, position: int, now_ns: int, key: tuple[int, int]) -> None:
        """Start the member's waiting streams while it runs fewer than the active limit."""
        waiting = instance.waiting[position]
        while waiting and instance.running[position] < self.system.active_chunks_per_dimension:
            instance.running[position] += 1
            self._start(instance, position, waiting.popleft(), now_ns, key)

    def _start_tree(self, instance: _Instance, position: int, now_ns: int, key: tuple[int, int]) -> None:
        """A member joins a doubleBinaryTree collective: its chunks through the collective's replay."""
        if instance.trees is None:
            instance.trees = _TreeRun(self, instance, key)
        instance.trees.join(position, now_ns)

    def _start(self, instance: _Instance, position: int, stream: int, now_ns: int, key: tuple[int, int]) -> None:
        """A stream starts on a member: the ring's first send ``d`` later, or its state machine."""
        if instance.algorithm.name in (DIRECT, HALVING_DOUBLING):
            member: _DirectStream | _HalvingDoublingStream = (
                _DirectStream(self, instance, position, stream, key)
                if instance.algorithm.name == DIRECT
                else _HalvingDoublingStream(self, instance, position, stream, key)
            )
            instance.machines[(stream, position)] = member
            self.events.entry(now_ns, member.start)
            return
        self.events.at(
            instance.npus[position],
            now_ns + instance.endpoint_ns,
            lambda t: self._send(instance, position, stream, 0, t, key),
        )

    def exchange(
        self,
        instance: _Instance,
        stream: int,
        position: int,
        to: int,
        source: int,
        size_bytes: int,
        now_ns: int,
        arrive: Callable[[int], None],
    ) -> None:
        """A state machine's step: send ``size_bytes`` from ``position`` to ``to`` and post the receive
        of ``source``'s message; ``arrive(t)`` runs when that has come (at once, as a new event, if it
        came first, as ASTRA-sim's late receive does)."""
        self.links.send(
            now_ns,
            instance.npus[position],
            instance.npus[to],
            size_bytes,
            lambda t: self.machine_delivered(instance, stream, position, to, t),
        )
        slot = (stream, source, position)
        if instance.arrived.get(slot, 0):
            instance.arrived[slot] -= 1
            self.events.entry(now_ns, arrive)
        else:
            instance.posted[slot] = instance.posted.get(slot, 0) + 1

    def machine_delivered(self, instance: _Instance, stream: int, src: int, dst: int, now_ns: int) -> None:
        """A state machine's message from position ``src`` has reached ``dst``: its receive if posted."""
        slot = (stream, src, dst)
        if instance.posted.get(slot, 0):
            instance.posted[slot] -= 1
            instance.machines[(stream, dst)].arrive(now_ns)
        else:
            instance.arrived[slot] = instance.arrived.get(slot, 0) + 1

    def stream_ended(
        self, instance: _Instance, position: int, now_ns: int, key: tuple[int, int], *, last: bool = False
    ) -> None:
        """A member's stream ended (its state machine says so), or (``last``) its last chunk of
        a doubleBinaryTree collective, whose replay starts the member's chunks itself."""
        if last:
            instance.left[position] = 1
            instance.running[position] = 1
        self._stream_ended(instance, position, now_ns, key)

    def _send(
        self, instance: _Instance, position: int, stream: int, step: int, now_ns: int, key: tuple[int, int]
    ) -> None:
        """Send step ``step`` of ``stream`` to the step's receiver and post the matching receive."""
        plan = instance.steps[step]
        to = plan.to[position]
        self.links.send(
            now_ns,
            instance.npus[position],
            instance.npus[to],
            plan.message_bytes,
            lambda t: self._delivered(instance, stream, to, step, t, key),
        )
        slot = (stream, position, step)
        if instance.mailbox.pop(slot, None) == "arrived":
            self.schedule(now_ns, lambda t: self._received(instance, position, stream, step, t, key))
        else:
            instance.mailbox[slot] = "posted"

    def _delivered(
        self, instance: _Instance, stream: int, position: int, step: int, now_ns: int, key: tuple[int, int]
    ) -> None:
        slot = (stream, position, step)
        if instance.mailbox.pop(slot, None) == "posted":
            self._received(instance, position, stream, step, now_ns, key)
        else:
            instance.mailbox[slot] = "arrived"

    def _received(
        self, instance: _Instance, position: int, stream: int, step: int, now_ns: int, key: tuple[int, int]
    ) -> None:
        npu, reduction_ns = instance.npus[position], instance.steps[step].reduction_ns
        if step + 1 < len(instance.steps):
            then: Callable[[int], None] = lambda t: self._send(instance, position, stream, step + 1, t, key)  # noqa: E731
        else:
            then = lambda t: self._stream_ended(instance, position, t, key)  # noqa: E731
        # the memory bus (d), then the reduction: system events of the NPU, each in its bucket
        if reduction_ns:
            self.events.at(npu, now_ns + instance.endpoint_ns, lambda t: self.events.at(npu, t + reduction_ns, then))
        else:
            self.events.at(npu, now_ns + instance.endpoint_ns, then)

    def _stream_ended(self, instance: _Instance, position: int, now_ns: int, key: tuple[int, int]) -> None:
        instance.running[position] -= 1
        instance.left[position] -= 1
        if instance.left[position] == 0:
            self.finished(instance.npus[position], instance.node[position], now_ns)
            instance.ended += 1
            instance.last_end_ns = max(instance.last_end_ns, now_ns)
            if instance.ended == len(instance.npus):
                del self.instances[key]
                total = self.matcher.totals[_type_name(instance.comm_type)]
                total["time_ns"] += instance.last_end_ns - instance.last_arrival_ns
            return
        self._pump(instance, position, now_ns, key)


class _EngineEvents(SystemEvents):
    """:class:`~chakra.sim.algorithms.SystemEvents` whose global entries are the engine's events."""

    def __init__(self, schedule: Schedule):
        super().__init__()
        self.schedule = schedule

    def entry(self, time_ns: int, call: Callable[[int], None]) -> None:
        self.schedule(time_ns, call)


class _DirectStream(DirectMember):
    """One member's ``AllToAll`` state machine for one stream, its messages over the shared links."""

    def __init__(self, runner: ContendedCollectives, instance: _Instance, position: int, stream: int, key):
        n = len(instance.npus)
        super().__init__(
            instance.phase_type, n, instance.algorithm.window, instance.endpoint_ns, instance.reduction_ns, [],
            runner.events, instance.npus[position], instance.local,
        )  # fmt: skip
        self.runner, self.instance, self.position, self.stream, self.key = runner, instance, position, stream, key
        self.finished = False

    def transmit(self, now: int, offset: int) -> None:
        """Send to the member ``offset`` ahead and post the receive from the one ``offset`` behind."""
        p, n = self.position, self.n
        self.runner.exchange(
            self.instance,
            self.stream,
            p,
            (p + offset) % n,
            (p - offset) % n,
            self.instance.message_bytes,
            now,
            self.arrive,
        )

    def general(self, now: int) -> None:
        super().general(now)
        if self.end_ns >= 0 and not self.finished:
            self.finished = True
            self.runner.stream_ended(self.instance, self.position, now, self.key)


class _TreeRun(TreeReplay):
    """A doubleBinaryTree collective's chunks (:class:`~chakra.sim.algorithms.TreeReplay`), members
    joining when they issue it, messages over the shared links, events in the engine's queue."""

    def __init__(self, runner: ContendedCollectives, instance: _Instance, key: tuple[int, int]):
        n = len(instance.npus)
        span = Span(n, instance.endpoint_ns, lambda a, b, size: 0, symmetric=False)
        super().__init__(
            span, instance.message_bytes, instance.streams, runner.system.active_chunks_per_dimension,
            instance.first_tree, instance.reduction_ns,
        )  # fmt: skip
        self.events = runner.events
        self.runner, self.instance, self.key = runner, instance, key

    def join(self, member: int, now_ns: int) -> None:
        """``member`` issues the collective: its first chunks start now."""
        self.now = now_ns
        for _ in range(min(self.active, self.streams)):
            self.start(member)

    def bus(self, member: int, then: Callable[[], None]) -> None:
        super().bus(self.instance.npus[member], then)

    def reduce(self, member: int, then: Callable[[], None]) -> None:
        super().reduce(self.instance.npus[member], then)

    def carry(self, src: int, dst: int, arrive: Callable[[int], None]) -> None:
        npus = self.instance.npus
        self.runner.links.send(self.now, npus[src], npus[dst], self.size, arrive)

    def end(self, member: int) -> None:
        self.done[member] += 1
        if self.done[member] == self.streams:
            self.runner.stream_ended(self.instance, member, self.now, self.key, last=True)
        if self.next_chunk[member] < self.streams:
            self.start(member)


class _HalvingDoublingStream:
    """One member's ``HalvingDoubling`` state machine for one stream (``HalvingDoubling.cc``), its
    messages over the shared links: one packet in flight (``parallel_reduce`` 1); every packet is
    inserted with the message size and partner of its step and crosses the memory bus alone (``d``,
    then the reduction when its batch processes it: the second batch of each pair for all-reduce,
    every batch but the first packet for reduce-scatter); the step's send goes out when the bus frees
    the packet; partners at distance 1, 2, 4, ... (all-gather: n/2, n/4, ...; all-reduce: up, then
    down again), each after the receive of the step before."""

    def __init__(
        self, runner: ContendedCollectives, instance: _Instance, position: int, stream: int, key: tuple[int, int]
    ):
        self.runner, self.instance, self.position, self.stream, self.key = runner, instance, position, stream, key
        self.events = runner.events
        self.npu = instance.npus[position]
        self.n = n = len(instance.npus)
        levels = n.bit_length() - 1
        kind = instance.phase_type
        self.msg_bytes = instance.message_bytes if kind == ALL_GATHER else instance.message_bytes // 2
        self.offset = n // 2 if kind == ALL_GATHER else 1
        self.multiplier = 0.5 if kind == ALL_GATHER else 2.0
        self.stream_count = 2 * levels if kind == ALL_REDUCE else levels
        self.levels = levels
        self.receiver = self._partner(self.offset)
        self.zero = self.non_zero = self.free = 0
        self.toggle = False
        self.packets: deque[tuple[int, int]] = deque()  # (bytes, receiver position)
        self.ended = False

    def _partner(self, offset: int) -> int:
        """``specify_direction`` and ``get_receiver``: ``offset`` ahead when ``p / offset`` is even, else behind."""
        if offset == 0:
            return self.position
        step = 1 if (self.position // offset) % 2 == 0 else -1
        return (self.position + step * offset) % self.n

    def start(self, now: int) -> None:
        """``StreamInit``."""
        self.insert(now)

    def arrive(self, now: int) -> None:
        """``PacketReceived``: the step's message is here."""
        self.insert(now)

    def insert(self, now: int) -> None:
        """``insert_packet`` and ``process_max_count``: queue the next step's packet and release it."""
        kind = self.instance.phase_type
        if self.zero == 0 and self.non_zero == 0:
            self.zero, self.non_zero = 1, self.levels - 1
            self.toggle = not self.toggle
        self.packets.append((self.msg_bytes, self.receiver))
        if self.zero > 0:
            processed = False
            self.zero -= 1
        else:
            processed = kind == REDUCE_SCATTER or (kind == ALL_REDUCE and self.toggle)
            self.non_zero -= 1
        size = self.msg_bytes
        if processed:
            reduction = reduction_delay_ns(size, self.runner.system.local_mem_bw_gbps)
            self.events.at(
                self.npu,
                now + self.instance.endpoint_ns,
                lambda t: self.events.at(self.npu, t + reduction, self.general),
            )
        else:
            self.events.at(self.npu, now + self.instance.endpoint_ns, self.general)
        self.offset = int(self.offset * self.multiplier)
        self.msg_bytes = int(self.msg_bytes / self.multiplier)
        if self.offset == self.n and kind == ALL_REDUCE:
            self.multiplier = 0.5
            self.offset = int(self.offset * self.multiplier)
            self.msg_bytes = int(self.msg_bytes / self.multiplier)
        self.receiver = self._partner(self.offset)

    def general(self, now: int) -> None:
        """``General``: the bus freed a packet; send the next step if one is queued, or end."""
        self.free += 1
        if self.packets and self.stream_count > 0 and self.free > 0:
            size, receiver = self.packets.popleft()
            self._transmit(now, receiver, size)
            self.stream_count -= 1
            self.free -= 1
        if self.stream_count == 0 and self.free == 1 and not self.ended:
            self.ended = True
            self.runner.stream_ended(self.instance, self.position, now, self.key)

    def _transmit(self, now: int, partner: int, size: int) -> None:
        """Send to ``partner`` and post the receive of its message of this step."""
        self.runner.exchange(self.instance, self.stream, self.position, partner, partner, size, now, self.arrive)


def _type_name(comm_type: int) -> str:
    return CollectiveCommType.Name(comm_type) if comm_type in CollectiveCommType.values() else str(comm_type)


def _not_yet(what: str) -> ChakraInputError:
    return ChakraInputError(
        f"the congestion-aware network model does not simulate {what} yet",
        hint="use --network-model congestion-unaware, or the ring algorithm on a one-dimensional network",
    )
