"""Collectives whose messages share links (the congestion-aware network model, :mod:`chakra.sim.links`).

Under the congestion-unaware model a collective is timed on its own once its last member arrives
(:mod:`chakra.sim.collectives`): nothing else can slow its messages. When links are shared that no
longer holds, so here every member runs its part in the simulation's own time, from the moment it
issues the collective, and every message goes through the links:

* the collective is split into ``K`` chunk streams of ``C`` bytes (:func:`~chakra.sim.collectives.
  chunk_plan`), each a list of phases (:func:`~chakra.sim.plans.native_plan`: one over all members or
  a subgroup, or one per network dimension); a member runs each phase in its queue of that phase's
  dimension, at most ``active-chunks-per-dimension`` streams at a time, first come first served, and
  a stream that ends a phase joins the back of the next phase's queue (ASTRA-sim's scheduling, as
  :mod:`chakra.sim.streams` describes it; one set of queues per member and collective: streams of
  different collectives meet only on the links);
* a phase is run by a *line* of members (those differing only in the phase's dimension, or all of
  them), each starting its part when its own queue lets it:
* a ring phase (``Ring.cc``): the member sends its first message ``d`` (the endpoint delay) after
  the phase starts and posts the matching receive with it; receive ``k`` completes when both the
  predecessor's ``k``-th message has arrived and the receive is posted; ``d`` later (plus the
  reduction ``t_red`` on the reduced steps) the member sends again, and after its last receive and
  that delay the phase ends;
* a ``direct`` phase: each member's ``AllToAll`` state machine (:class:`~chakra.sim.algorithms.
  DirectMember`, the one the congestion-unaware model replays), its system events in ASTRA-sim's
  per-NPU buckets, its messages over the links;
* a ``halvingDoubling`` phase: ASTRA-sim's ``HalvingDoubling`` state machine
  (:class:`_HalvingDoublingStream`): each step's packet crosses the memory bus before its send, its
  reduction counted where that machine counts it;
* a ``doubleBinaryTree`` phase: the member's part of the chunk on one of the two alternating trees
  (:class:`~chakra.sim.algorithms.TreeReplay`, the trees chosen by :func:`~chakra.sim.plans.tree_roots`);
* a member's collective ends when its last stream leaves its last phase.

On one-dimensional networks this is ASTRA-sim's congestion-aware build, cycle for cycle
(``benchmarks/sim_vs_astra.py --congestion-aware``). Phases over several dimensions are this
package's extension (that build refuses multi-dimensional networks): the same scheduling, with
messages routed within each phase's dimension by :mod:`chakra.sim.links`. Gather, scatter,
broadcast, reduce and barrier, which ASTRA-sim does not simulate, keep this package's own
congestion-unaware models (a warning counts them).

Example:
    runner = ContendedCollectives(matcher, system, network, links, schedule, finished, present, events)
    runner.arrive(rank, pos, now_ns, comm_type, size_bytes, group)   # from the engine's issue
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
)
from chakra.sim.algorithms import (
    DIRECT,
    DOUBLE_BINARY_TREE,
    HALVING_DOUBLING,
    Algorithm,
    DirectMember,
    Span,
    TreeReplay,
    halving_doubling_steps,
    npu_span,
    ring_steps,
    size_after,
)
from chakra.sim.collectives import (
    SUBGROUP_ENDPOINT_DELAY_NS,
    chunk_plan,
    reduction_delay_ns,
    type_name,
)
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.events import SystemEvents
from chakra.sim.links import LinkNetwork
from chakra.sim.matching import CollectiveMatcher, Waiting
from chakra.sim.plans import ALGORITHM_LIST, Phase, native_plan, phase_lines, tree_roots

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


@dataclass(frozen=True)
class _PhaseShape:
    """One phase of a collective's chunk streams as its messages run it: the dimension queue it waits
    in, the lines of members that run it together (member indexes by position; each member's line
    and position), and its messages at the size the phase receives."""

    phase_type: int
    algorithm: Algorithm
    queue: int
    lines: Sequence[Sequence[int]]
    line_of: Sequence[int]
    position_of: Sequence[int]
    local: bool  # a subgroup's members (ASTRA-sim's Local ring)
    reverse: bool  # ring and direct go anticlockwise (a localBWAware all-reduce's all-gather phases)
    endpoint_ns: int
    steps: list[_Step]  # ring: a stream's steps in order (the state machines: none)
    message_bytes: int  # direct, tree: every message's size; halvingDoubling: the chunk's
    reduction_ns: int
    root_max: Callable[[int], bool]  # doubleBinaryTree: stream -> its chunk takes the RootMax tree


@dataclass(frozen=True)
class _Plan:
    """A collective's shape, the same on every turn of its type, size and group."""

    npus: tuple[int, ...]  # members in group order, their NPU ids
    positions: dict[int, int]  # NPU -> member index
    streams: int
    trees: bool  # a phase runs doubleBinaryTree (its trees alternate from turn to turn)
    phases: tuple[list[_PhaseShape], list[_PhaseShape]]  # by the first chunk's tree (0: RootMax)


@dataclass
class _Instance:
    """One collective (a group's turn) under way: its plan and every member's progress."""

    key: tuple[int, int]  # (group, turn)
    npus: tuple[int, ...]  # members in group order, their NPU ids
    comm_type: int
    streams: int
    phases: list[_PhaseShape]
    positions: dict[int, int]  # NPU -> member index
    node: dict[int, int] = field(default_factory=dict)  # member -> its node
    # (member, queue) -> (stream, phase) waiting for the queue, and streams the queue runs
    waiting: dict[tuple[int, int], deque[tuple[int, int]]] = field(default_factory=dict)
    running: dict[tuple[int, int], int] = field(default_factory=dict)
    left: dict[int, int] = field(default_factory=dict)  # member -> streams not through every phase
    runs: dict[tuple[int, int], _Line] = field(default_factory=dict)  # (phase, line) -> its run
    ended: int = 0
    last_arrival_ns: int = 0
    last_end_ns: int = 0


@dataclass
class _Line:
    """One phase of a collective on one line of its members, every stream: the messages between
    them and their state machines. Positions are the line's."""

    instance: _Instance
    phase: int
    shape: _PhaseShape
    members: Sequence[int]  # member indexes by position
    npus: tuple[int, ...]  # NPU ids by position
    # ring: (stream, receiving position, step) -> "arrived" or "posted"
    mailbox: dict[tuple[int, int, int], str] = field(default_factory=dict)
    # direct and halvingDoubling: (stream, source, destination position) -> messages there before
    # their receive, and receives posted before their message; each member's state machine per stream
    arrived: dict[tuple[int, int, int], int] = field(default_factory=dict)
    posted: dict[tuple[int, int, int], int] = field(default_factory=dict)
    machines: dict[tuple[int, int], _DirectStream | _HalvingDoublingStream] = field(default_factory=dict)
    trees: _TreeRun | None = None  # doubleBinaryTree: the replay of every member's chunks


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
        events: SystemEvents,
    ):
        """``events``: ASTRA-sim's per-NPU buckets of system events over the engine's queue
        (:class:`~chakra.sim.algorithms.ScheduledEvents`), shared with the engine's other models."""
        self.matcher, self.system, self.network = matcher, system, network
        self.links, self.schedule, self.finished = links, schedule, finished
        self.present = present
        self.events = events
        self.turns: dict[tuple[int, int], int] = {}  # (rank, group) -> collectives issued
        self.untaken: dict[str, int] = {}  # type name -> collectives timed without contention
        self.trees_taken: dict[int, int] = {}  # comm type -> doubleBinaryTree chunks so far
        self.instances: dict[tuple[int, int], _Instance] = {}
        self.plans: dict[tuple[int, int, int], _Plan] = {}  # (comm type, bytes, group) -> its plan

    def takes(self, comm_type: int) -> bool:
        """Whether collectives of ``comm_type`` run here: the types ASTRA-sim simulates. This
        package's own models of the others (gather, scatter, broadcast, reduce, barrier) stay the
        congestion-unaware ones (:meth:`uncontended` counts them for a warning)."""
        phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
        return phase_type in ALGORITHM_LIST

    def uncontended(self, comm_type: int) -> None:
        """A collective of a type :meth:`takes` refuses is timed without contention."""
        self.untaken[type_name(comm_type)] = self.untaken.get(type_name(comm_type), 0) + 1

    def warnings(self) -> list[str]:
        return [
            f"{count} {name} collectives were timed by this package's own model, without queueing on the links "
            "(the congestion-aware model runs ASTRA-sim's types only)"
            for name, count in sorted(self.untaken.items())
        ]

    def stuck(self) -> list[Waiting]:
        """The members of collectives that never end: some member never issues it, or (every member
        there) the chunk streams wait for each other in the dimension queues, as ASTRA-sim's do on
        some localBWAware plans."""
        waiting = []
        for (group, turn), instance in self.instances.items():
            absent = [npu for member, npu in enumerate(instance.npus) if member not in instance.node]
            label = "world" if self.matcher.members[group] is None else f"group {group}"
            if absent:
                why = f"collective #{turn} of the {label}: ranks {absent[:8]} never issue it"
            else:
                why = (
                    f"{type_name(instance.comm_type)} #{turn} of the {label}, its chunk streams deadlocked in the "
                    "dimension queues as ASTRA-sim's do (raise active-chunks-per-dimension or use baseline)"
                )
            for member, pos in instance.node.items():
                if instance.left[member]:
                    waiting.append((instance.npus[member], pos, why))
        return waiting

    def arrive(self, rank: int, pos: int, now_ns: int, comm_type: int, size_bytes: int, group: int) -> None:
        """``rank`` issues its next collective on ``group`` at ``now_ns``: its part starts now."""
        turn = self.turns.get((rank, group), 0)
        self.turns[(rank, group)] = turn + 1
        key = (group, turn)
        instance = self.instances.get(key)
        if instance is None:
            instance = self.instances[key] = self._instance(key, comm_type, size_bytes, group)
            total = self.matcher.totals.setdefault(type_name(comm_type), {"count": 0, "bytes": 0, "time_ns": 0})
            total["count"] += 1
            total["bytes"] += size_bytes
        instance.last_arrival_ns = now_ns
        member = instance.positions[rank]
        instance.node[member] = pos
        for shape in instance.phases:
            instance.waiting[(member, shape.queue)] = deque()
            instance.running[(member, shape.queue)] = 0
        first = instance.phases[0].queue
        instance.waiting[(member, first)].extend((stream, 0) for stream in range(instance.streams))
        instance.left[member] = instance.streams
        self._pump(instance, member, first, now_ns)

    def _instance(self, key: tuple[int, int], comm_type: int, size_bytes: int, group: int) -> _Instance:
        plan = self.plans.get((comm_type, size_bytes, group))
        if plan is None:
            plan = self.plans[(comm_type, size_bytes, group)] = self._plan(comm_type, size_bytes, group)
        first_tree = 0
        if plan.trees and len(plan.npus) == self.network.num_npus:
            # the two trees alternate over the chunks of every collective of a type on all NPUs
            first_tree = self.trees_taken.get(comm_type, 0) % 2
            self.trees_taken[comm_type] = self.trees_taken.get(comm_type, 0) + plan.streams
        return _Instance(key, plan.npus, comm_type, plan.streams, plan.phases[first_tree], plan.positions)

    def _plan(self, comm_type: int, size_bytes: int, group: int) -> _Plan:
        members = self.matcher.members[group]
        npus = tuple(members) if members is not None else tuple(range(self.network.num_npus))
        absent = [npu for npu in npus if npu not in self.present]
        if absent:
            raise _not_yet(f"a collective some of whose members are not simulated (ranks {absent[:8]})")
        phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
        subgroup = npu_span(self.network, npus, SUBGROUP_ENDPOINT_DELAY_NS, symmetric=False, local=True)
        plan = native_plan(phase_type, subgroup if members is not None else None, self.system, self.network)
        chunk_bytes, streams = chunk_plan(
            comm_type, size_bytes, self.system.preferred_dataset_splits, self.network.num_npus
        )
        by_first_tree: list[list[_PhaseShape]] = []
        for first_tree in (0, 1):
            phases = []
            size = chunk_bytes
            for phase, root_max in zip(plan, tree_roots(plan, first_tree), strict=True):
                phases.append(self._shape(phase, npus, size, root_max))
                size = size_after(phase.phase_type, phase.algorithm, size, phase.span.size)
            by_first_tree.append(phases)
        trees = any(phase.algorithm.name == DOUBLE_BINARY_TREE for phase in plan)
        positions = {npu: member for member, npu in enumerate(npus)}
        return _Plan(npus, positions, streams, trees, (by_first_tree[0], by_first_tree[1]))

    def _shape(
        self, phase: Phase, npus: tuple[int, ...], size_bytes: int, root_max: Callable[[int], bool]
    ) -> _PhaseShape:
        """One phase of the plan over the collective's members, its chunk ``size_bytes`` on entry."""
        lines, line_of, position_of = phase_lines(phase, npus, self.network)
        n, kind, name = phase.span.size, phase.phase_type, phase.algorithm.name

        def t_red(message_bytes: int) -> int:
            return reduction_delay_ns(message_bytes, self.system.local_mem_bw_gbps)

        steps: list[_Step] = []
        message = reduction = 0
        if name == DIRECT:
            message = size_bytes if kind == ALL_GATHER else size_bytes // n
            reduction = t_red(message) if kind in (ALL_REDUCE, REDUCE_SCATTER) else 0
        elif name == HALVING_DOUBLING:
            halving_doubling_steps(kind, n, size_bytes, t_red)  # refuses what ASTRA-sim cannot run
            message = size_bytes
        elif name == DOUBLE_BINARY_TREE:
            if n & (n - 1):
                raise _not_yet(f"doubleBinaryTree over {n} NPUs (ASTRA-sim's tree holds a power-of-two count)")
            message, reduction = size_bytes, t_red(size_bytes)
        else:  # ring
            count, piece, reduced = ring_steps(kind, n, size_bytes)
            to = [(p - 1) % n if phase.reverse else (p + 1) % n for p in range(n)]
            reduced_ns = t_red(piece) if reduced else 0
            steps = [_Step(to, piece, reduced_ns if k < reduced else 0) for k in range(count)]
        queue = phase.dim if phase.dim is not None else 0
        return _PhaseShape(
            kind, phase.algorithm, queue, lines, line_of, position_of, phase.span.local, phase.reverse,
            phase.span.endpoint_ns, steps, message, reduction, root_max,
        )  # fmt: skip

    def _pump(self, instance: _Instance, member: int, queue: int, now_ns: int) -> None:
        """Start the member's streams waiting for ``queue`` while it runs fewer than the active limit
        (ASTRA-sim's dimension queue: first come, first served)."""
        slot = (member, queue)
        waiting = instance.waiting[slot]
        while waiting and instance.running[slot] < self.system.active_chunks_per_dimension:
            instance.running[slot] += 1
            stream, phase = waiting.popleft()
            self._start(instance, member, stream, phase, now_ns)

    def _start(self, instance: _Instance, member: int, stream: int, phase: int, now_ns: int) -> None:
        """A member starts ``phase`` of ``stream`` on its line: the ring's first send ``d`` later, its
        state machine, or its part of the chunk's tree."""
        shape = instance.phases[phase]
        line = shape.line_of[member]
        run = instance.runs.get((phase, line))
        if run is None:
            members = shape.lines[line]
            run = instance.runs[(phase, line)] = _Line(
                instance, phase, shape, members, tuple(instance.npus[m] for m in members)
            )
        position = shape.position_of[member]
        name = shape.algorithm.name
        if name == DOUBLE_BINARY_TREE:
            if run.trees is None:
                run.trees = _TreeRun(self, run)
            run.trees.now = now_ns
            run.trees.begin(position, stream, shape.root_max(stream))
        elif name in (DIRECT, HALVING_DOUBLING):
            machine: _DirectStream | _HalvingDoublingStream = (
                _DirectStream(self, run, position, stream)
                if name == DIRECT
                else _HalvingDoublingStream(self, run, position, stream)
            )
            run.machines[(stream, position)] = machine
            self.events.entry(now_ns, machine.start)
        else:
            self.events.at(
                run.npus[position], now_ns + shape.endpoint_ns, partial(self._send, run, position, stream, 0)
            )

    def exchange(
        self, run: _Line, stream: int, position: int, to: int, source: int, size_bytes: int, now_ns: int,
        arrive: Callable[[int], None],
    ) -> None:  # fmt: skip
        """A state machine's step: send ``size_bytes`` from ``position`` to ``to`` and post the receive
        of ``source``'s message; ``arrive(t)`` runs when that has come (at once, as a new event, if it
        came first, as ASTRA-sim's late receive does)."""
        self.links.send(
            now_ns, run.npus[position], run.npus[to], size_bytes,
            partial(self.machine_delivered, run, stream, position, to),
        )  # fmt: skip
        slot = (stream, source, position)
        if run.arrived.get(slot, 0):
            run.arrived[slot] -= 1
            self.events.entry(now_ns, arrive)
        else:
            run.posted[slot] = run.posted.get(slot, 0) + 1

    def machine_delivered(self, run: _Line, stream: int, src: int, dst: int, now_ns: int) -> None:
        """A state machine's message from position ``src`` has reached ``dst``: its receive if posted."""
        slot = (stream, src, dst)
        if run.posted.get(slot, 0):
            run.posted[slot] -= 1
            run.machines[(stream, dst)].arrive(now_ns)
        else:
            run.arrived[slot] = run.arrived.get(slot, 0) + 1

    def _send(self, run: _Line, position: int, stream: int, step: int, now_ns: int) -> None:
        """Send step ``step`` of ``stream`` to the step's receiver and post the matching receive."""
        plan = run.shape.steps[step]
        to = plan.to[position]
        self.links.send(
            now_ns, run.npus[position], run.npus[to], plan.message_bytes,
            partial(self._delivered, run, stream, to, step),
        )  # fmt: skip
        slot = (stream, position, step)
        if run.mailbox.pop(slot, None) == "arrived":
            self.schedule(now_ns, partial(self._received, run, position, stream, step))
        else:
            run.mailbox[slot] = "posted"

    def _delivered(self, run: _Line, stream: int, position: int, step: int, now_ns: int) -> None:
        slot = (stream, position, step)
        if run.mailbox.pop(slot, None) == "posted":
            self._received(run, position, stream, step, now_ns)
        else:
            run.mailbox[slot] = "arrived"

    def _received(self, run: _Line, position: int, stream: int, step: int, now_ns: int) -> None:
        npu, reduction_ns = run.npus[position], run.shape.steps[step].reduction_ns
        if step + 1 < len(run.shape.steps):
            then: Callable[[int], None] = partial(self._send, run, position, stream, step + 1)
        else:
            then = partial(self.phase_ended, run, position, stream)
        # the memory bus (d), then the reduction: system events of the NPU, each in its bucket
        endpoint_ns = run.shape.endpoint_ns
        if reduction_ns:
            self.events.at(npu, now_ns + endpoint_ns, partial(self.events.later, npu, reduction_ns, then))
        else:
            self.events.at(npu, now_ns + endpoint_ns, then)

    def phase_ended(self, run: _Line, position: int, stream: int, now_ns: int) -> None:
        """The member at ``position`` of ``run``'s line ended its phase of ``stream``: the stream joins
        the member's queue of the next phase, or ends; both queues start what waits for them."""
        instance, phase = run.instance, run.phase
        member = run.members[position]
        queue = run.shape.queue
        instance.running[(member, queue)] -= 1
        if phase + 1 < len(instance.phases):
            following = instance.phases[phase + 1].queue
            instance.waiting[(member, following)].append((stream, phase + 1))
            self._pump(instance, member, queue, now_ns)
            self._pump(instance, member, following, now_ns)
            return
        instance.left[member] -= 1
        if instance.left[member] == 0:
            self.finished(instance.npus[member], instance.node[member], now_ns)
            instance.ended += 1
            instance.last_end_ns = max(instance.last_end_ns, now_ns)
            if instance.ended == len(instance.npus):
                del self.instances[instance.key]
                total = self.matcher.totals[type_name(instance.comm_type)]
                total["time_ns"] += instance.last_end_ns - instance.last_arrival_ns
            return
        self._pump(instance, member, queue, now_ns)


class _DirectStream(DirectMember):
    """One member's ``AllToAll`` state machine for one stream, its messages over the shared links."""

    def __init__(self, runner: ContendedCollectives, run: _Line, position: int, stream: int):
        shape = run.shape
        super().__init__(
            shape.phase_type, len(run.npus), shape.algorithm.window, shape.endpoint_ns, shape.reduction_ns, [],
            runner.events, run.npus[position], shape.local,
        )  # fmt: skip
        self.runner, self.run_on, self.position, self.stream = runner, run, position, stream
        self.finished = False

    def transmit(self, now: int, offset: int) -> None:
        """Send to the member ``offset`` ahead and post the receive from the one ``offset`` behind
        (the other way round on an anticlockwise phase)."""
        p, n = self.position, self.n
        ahead = -offset if self.run_on.shape.reverse else offset
        self.runner.exchange(
            self.run_on, self.stream, p, (p + ahead) % n, (p - ahead) % n, self.run_on.shape.message_bytes, now,
            self.arrive,
        )  # fmt: skip

    def general(self, now: int) -> None:
        super().general(now)
        if self.end_ns >= 0 and not self.finished:
            self.finished = True
            self.runner.phase_ended(self.run_on, self.position, self.stream, now)


class _TreeRun(TreeReplay):
    """A doubleBinaryTree phase on one line (:class:`~chakra.sim.algorithms.TreeReplay`): each member
    begins a chunk when its queue starts the stream, messages over the shared links, events in the
    engine's queue."""

    def __init__(self, runner: ContendedCollectives, run: _Line):
        n, shape = len(run.npus), run.shape
        span = Span(n, shape.endpoint_ns, lambda a, b, size: 0, symmetric=False)
        streams, active = run.instance.streams, runner.system.active_chunks_per_dimension
        super().__init__(span, shape.message_bytes, streams, active, 0, shape.reduction_ns)
        self.events = runner.events
        self.runner, self.run_on = runner, run

    def bus(self, member: int, then: Callable[[], None]) -> None:
        super().bus(self.run_on.npus[member], then)

    def reduce(self, member: int, then: Callable[[], None]) -> None:
        super().reduce(self.run_on.npus[member], then)

    def carry(self, src: int, dst: int, arrive: Callable[[int], None]) -> None:
        npus = self.run_on.npus
        self.runner.links.send(self.now, npus[src], npus[dst], self.size, arrive)

    def end(self, member: int, chunk: int) -> None:
        self.runner.phase_ended(self.run_on, member, chunk, self.now)


class _HalvingDoublingStream:
    """One member's ``HalvingDoubling`` state machine for one stream (``HalvingDoubling.cc``), its
    messages over the shared links: one packet in flight (``parallel_reduce`` 1); every packet is
    inserted with the message size and partner of its step and crosses the memory bus alone (``d``,
    then the reduction when its batch processes it: the second batch of each pair for all-reduce,
    every batch but the first packet for reduce-scatter); the step's send goes out when the bus frees
    the packet; partners at distance 1, 2, 4, ... (all-gather: n/2, n/4, ...; all-reduce: up, then
    down again), each after the receive of the step before."""

    def __init__(self, runner: ContendedCollectives, run: _Line, position: int, stream: int):
        self.runner, self.run_on, self.position, self.stream = runner, run, position, stream
        self.events = runner.events
        self.npu = run.npus[position]
        self.n = n = len(run.npus)
        self.endpoint_ns = run.shape.endpoint_ns
        levels = n.bit_length() - 1
        self.kind = kind = run.shape.phase_type
        self.msg_bytes = run.shape.message_bytes if kind == ALL_GATHER else run.shape.message_bytes // 2
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
        kind = self.kind
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
                now + self.endpoint_ns,
                partial(self.events.later, self.npu, reduction, self.general),
            )
        else:
            self.events.at(self.npu, now + self.endpoint_ns, self.general)
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
            self.runner.phase_ended(self.run_on, self.position, self.stream, now)

    def _transmit(self, now: int, partner: int, size: int) -> None:
        """Send to ``partner`` and post the receive of its message of this step."""
        self.runner.exchange(self.run_on, self.stream, self.position, partner, partner, size, now, self.arrive)


def _not_yet(what: str) -> ChakraInputError:
    return ChakraInputError(
        f"the congestion-aware network model does not simulate {what} yet",
        hint="use --network-model congestion-unaware",
    )
