"""Discrete-event simulation of a multi-rank Chakra workload, with ASTRA-sim's issue semantics.

Per rank (``reference/astra-sim.md`` §2.2-2.4):

* a node is *ready* when every node in its ``data_deps`` and ``ctrl_deps`` has finished (FeederV3
  gates on both); ready nodes are issued in ascending id order when their hardware slot is free;
* slots: CPU (``is_cpu_op`` true), GPU compute (other ``COMP_NODE``), GPU comm (collectives, sends,
  memory, metadata) -- one node each at a time; receives need no slot;
* compute: the recorded ``duration_micros`` (× ``compute_scale``; 1 ns when 0), or the roofline time
  from ``num_ops`` and ``tensor_size`` when the system enables it (GPU nodes);
* collectives: matched by group and turn (:class:`chakra.sim.matching.CollectiveMatcher`); one
  starts when the last member arrives and ends, for each member, after its time in
  :func:`chakra.sim.collectives.collective_times`;
  with the system key ``chakra-astra-compat`` a BROADCAST takes its recorded duration on its rank
  alone and REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK, BARRIER are refused, as in ASTRA-sim;
* sends and receives match on (source, destination, tag, size) in order
  (:class:`chakra.sim.matching.MessageMatcher`); a send completes when its message arrives, a
  receive at ``max(arrival, posting)``;
* memory loads/stores: remote-memory latency + bytes / bandwidth, one at a time per queue
  (:class:`chakra.sim.memory.MemoryQueues`).

The parts: :mod:`chakra.sim.program` (a rank's nodes as arrays and lists, :func:`~chakra.sim.program.program_of`),
:mod:`chakra.sim.events` (the event queue), :mod:`chakra.sim.matching`, :mod:`chakra.sim.memory`,
:mod:`chakra.sim.results`; here the event loop that drives them, with compute nodes (the common case)
issued and completed inline in the loop.

A workload that can never finish (a collective a member never reaches, a receive without a send, a
dependency cycle) ends with :class:`SimulationStuck`, which names the ranks and nodes that wait and
on what. Time is integer nanoseconds (ASTRA-sim's cycles).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from chakra.errors import ChakraInputError, PathLike
from chakra.sim.choices import NetworkModel
from chakra.sim.classes import ClassCollectives, ClassMessages, RankClasses, SymmetryBroken, class_plan, expand_result
from chakra.sim.collectives import REDUCING_TYPES, astra_compat_refusal, p2p_time_ns, replays_duration
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.contended import ContendedCollectives
from chakra.sim.custom import CustomCollectives
from chakra.sim.events import EventQueue, ScheduledEvents
from chakra.sim.links import LinkNetwork
from chakra.sim.matching import CollectiveMatcher, MessageMatcher, Waiting
from chakra.sim.memory import MemoryQueues
from chakra.sim.network import UnqueuedNetwork
from chakra.sim.program import (
    COMMUNICATING_ACTIONS,
    DO_COLLECTIVE,
    DO_COMPUTE,
    DO_INSTANT,
    DO_MEMORY,
    DO_SEND,
    NO_SLOT,
    SLOT_COMM,
    SLOT_NAMES,
    RankProgram,
)
from chakra.sim.results import RankStats, SimResult, SimulationStuck
from chakra.units import BYTES_PER_GB, FLOPS_PER_TFLOPS, NS_PER_S

# Kept importable from here, where they lived before the program and results had their own modules.
__all__ = [
    "SLOT_NAMES",
    "RankProgram",
    "RankState",
    "RankStats",
    "SimResult",
    "SimulationStuck",
    "compute_times_ns",
    "simulate",
]

#: ASTRA-sim runs a zero-duration node for one cycle (``reference/astra-sim.md`` §5.2).
MIN_NODE_NS = 1
#: Network events (a message's hops) pending at once, and in all, that the event queue has room for
#: under the congestion-aware model.
CALLBACK_SLOTS = 1 << 24
NETWORK_EVENTS = 1 << 48
#: How many completed nodes between two progress reports.
PROGRESS_EVERY = 1 << 16
#: How many stuck nodes a :class:`SimulationStuck` message lists (all are in its ``waiting``).
STUCK_SHOWN = 8

#: A rank's time split by what runs: index ``2 · (compute running) + (communication running)``.
IDLE_NS, EXPOSED_NS, COMPUTE_ONLY_NS, OVERLAP_NS = range(4)


@dataclass(slots=True)
class RankState:
    """One rank in the event loop: its program's columns, what is ready and running, and its time split (ns)."""

    rank: int
    program: RankProgram
    run_ns: list[int]  # each node's time when it runs as compute (:func:`compute_times_ns`)
    event_base: int  # the rank's part of its events' ints (:meth:`EventQueue.rank_key`)
    action: list[int] = field(init=False)
    slot: list[int] = field(init=False)
    children: list[list[int]] = field(init=False)
    deps_left: list[int] = field(init=False)  # per node, its dependencies not finished yet
    ready: list[list[int]] = field(init=False)  # per slot, a heap of the positions ready to issue
    busy: list[bool] = field(init=False)  # per slot
    issue_slots: list[int] = field(init=False)  # the slots that run one node at a time (all but NO_SLOT)
    cpu_slot: list[bool] = field(init=False)  # per slot: its compute counts as CPU time
    running_compute: int = 0
    running_comm: int = 0
    last_change_ns: int = 0  # when running_compute or running_comm last changed
    split_ns: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # by IDLE_NS, EXPOSED_NS, ...
    cpu_ns: int = 0
    gpu_ns: int = 0
    comm_ns: int = 0
    finish_ns: int = 0

    def __post_init__(self) -> None:
        program = self.program
        slots = range(len(program.slot_names))
        self.action, self.slot, self.children = program.action, program.slot, program.children
        self.deps_left = list(program.dep_count)
        self.ready = [[] for _ in slots]
        for pos, count in enumerate(self.deps_left):
            if count == 0:
                self.ready[self.slot[pos]].append(pos)  # ascending positions: already a heap
        self.busy = [False for _ in slots]
        self.issue_slots = [i for i in slots if i != NO_SLOT]
        self.cpu_slot = [i in program.cpu_slots for i in slots]

    def account(self, now_ns: int) -> None:
        """Add the time since the last change to the split of what was running."""
        elapsed = now_ns - self.last_change_ns
        if elapsed:
            self.split_ns[(self.running_compute > 0) * 2 + (self.running_comm > 0)] += elapsed
            self.last_change_ns = now_ns

    def stats(self) -> RankStats:
        return RankStats(
            self.rank,
            finish_ns=self.finish_ns,
            cpu_ns=self.cpu_ns,
            gpu_compute_ns=self.gpu_ns,
            comm_ns=self.comm_ns,
            nodes=len(self.program),
            compute_only_ns=self.split_ns[COMPUTE_ONLY_NS],
            comm_exposed_ns=self.split_ns[EXPOSED_NS],
            overlap_ns=self.split_ns[OVERLAP_NS],
            idle_ns=self.split_ns[IDLE_NS],
        )


def compute_times_ns(program: RankProgram, system: SystemConfig, compute_scale: float = 1.0) -> list[int]:
    """Every node's time in ns when it runs as compute: its recorded time × ``compute_scale`` (at least
    ``MIN_NODE_NS``), or with the system's roofline on, ``max(num_ops / peak, tensor_size / local-mem-bw)``
    for GPU nodes that have both (0 for those ASTRA-sim skips as invalid: no tensor size or no rates).
    """
    if compute_scale == 1.0:
        times = [t or MIN_NODE_NS for t in program.time_ns]
    else:
        times = [max(MIN_NODE_NS, int(t * compute_scale)) if t else MIN_NODE_NS for t in program.time_ns]
    if system.roofline_enabled and not system.replay_only:
        peak_flops = system.peak_perf_tflops * FLOPS_PER_TFLOPS
        mem_bytes_per_s = system.local_mem_bw_gbps * BYTES_PER_GB
        for pos, (num_ops, tensor_size) in program.roofline.items():
            if tensor_size == 0 or peak_flops <= 0 or mem_bytes_per_s <= 0:
                times[pos] = 0
            else:
                times[pos] = int(max(num_ops / peak_flops, tensor_size / mem_bytes_per_s) * NS_PER_S)
    return times


def simulate(
    programs: Mapping[int, RankProgram],
    system: SystemConfig,
    network: NetworkConfig,
    *,
    remote_memory: RemoteMemoryConfig | None = None,
    comm_groups: Mapping[int, Sequence[int]] | None = None,
    comm_groups_path: PathLike | None = None,
    compute_scale: float = 1.0,
    keep_intervals: bool = False,
    progress: Callable[[int, int], None] | None = None,
    network_model: NetworkModel = NetworkModel.CONGESTION_UNAWARE,
    by_classes: bool = True,
) -> SimResult:
    """Run every rank of ``programs`` to completion (see the module docstring). With the system's
    ``replay-only`` every node takes its recorded duration and nothing is matched across ranks.
    ``network_model`` says how messages cross the network (:class:`~chakra.sim.choices.NetworkModel`;
    congestion-aware: :mod:`chakra.sim.links` and :mod:`chakra.sim.contended`, partial).

    ``comm_groups_path`` is the file ``comm_groups`` was read from (errors name it).
    ``progress(done, total)`` is called every ``PROGRESS_EVERY`` completed nodes and at the end.
    ``by_classes``: run one rank per class of equivalent ranks where the workload has such classes
    (:mod:`chakra.sim.classes`; the same result, ``result.classes`` says how many ran), else rank by
    rank (``result.rank_by_rank`` says why).
    """
    if not (math.isfinite(compute_scale) and compute_scale >= 0):
        raise ChakraInputError(
            f"compute scale {compute_scale:g} must be a finite number >= 0",
            hint="e.g. 0.5 halves every compute time (2x faster compute), 0 makes compute free",
        )
    world = network.num_npus
    outside = sorted(r for r in programs if r >= world)
    if outside:
        raise ChakraInputError(
            f"ranks {outside} have ET files but the network has only {world} NPUs",
            path=network.path,
            hint="make npus_count in the network configuration multiply to the number of ranks",
        )
    model = NetworkModel(network_model)
    setting = (system, network, remote_memory, comm_groups, compute_scale, keep_intervals, comm_groups_path, model)
    plan = class_plan(programs, system, network, remote_memory, comm_groups, model) if by_classes else "asked for"
    if isinstance(plan, RankClasses):
        try:
            run = _Run({rep: programs[rep] for rep in plan.reps}, *setting, classes=plan)
            run.loop(progress)
            result = expand_result(run.result(), plan, programs)
        except SymmetryBroken as broken:
            plan = str(broken)
        except (SimulationStuck, ChakraInputError):
            plan = "the representatives stopped: rank by rank says where, as it always did"
        else:
            if progress is not None:
                progress(run.total, run.total)
            return result
    run = _Run(programs, *setting)
    run.loop(progress)
    result = run.result()
    result.rank_by_rank = plan
    if progress is not None:
        progress(run.total, run.total)
    return result


class _Run:
    """One simulation: the ranks' states, the event queue, the matchers, and what is recorded."""

    def __init__(
        self,
        programs: Mapping[int, RankProgram],
        system: SystemConfig,
        network: NetworkConfig,
        remote_memory: RemoteMemoryConfig | None,
        comm_groups: Mapping[int, Sequence[int]] | None,
        compute_scale: float,
        keep_intervals: bool,
        comm_groups_path: PathLike | None = None,
        network_model: NetworkModel = NetworkModel.CONGESTION_UNAWARE,
        classes: RankClasses | None = None,
    ):
        """``classes``: ``programs`` are these classes' representatives (:mod:`chakra.sim.classes`)."""
        self.programs = programs
        self.network = network
        self.replay_only = system.replay_only
        self.system = system
        self.collectives = (
            CollectiveMatcher(comm_groups, frozenset(programs), network.num_npus, system, network, comm_groups_path)
            if classes is None
            else ClassCollectives(classes, comm_groups, system, network)
        )
        self.messages = MessageMatcher() if classes is None else ClassMessages(classes)
        self.memory = MemoryQueues(remote_memory)
        self.total = sum(len(p) for p in programs.values())
        aware = network_model is NetworkModel.CONGESTION_AWARE
        # messages one by one (the aware model's, custom algorithms') run as callbacks of the engine's
        # queue, on a rank of their own after the last
        custom = bool(system.custom_implementations or system.per_node_custom)
        callbacks = aware or custom
        self.callback_rank = max(programs, default=0) + 1
        self.queue = EventQueue(
            max_rank=self.callback_rank,
            max_positions=max([len(p) for p in programs.values()] + [CALLBACK_SLOTS if callbacks else 1]),
            # every node completes exactly once; the network adds events of its own
            max_events=self.total + (NETWORK_EVENTS if callbacks else 0),
        )
        self.callback_key = self.queue.rank_key(self.callback_rank)
        # the network's pending callbacks by slot (the event's position), and the slots free again
        self.callbacks: list[Callable[[int], None] | None] = []
        self.free_slots: list[int] = []
        self.schedule = self._scheduler()
        self.links = LinkNetwork(network, self.schedule, keep_hops=keep_intervals) if aware else None
        # ASTRA-sim's per-NPU buckets of system events, shared by the models that run event by event
        self.system_events = ScheduledEvents(self.schedule)

        def finished(rank: int, pos: int, t_ns: int) -> None:
            self.queue.push(t_ns, rank, pos)

        self.contended = (
            ContendedCollectives(
                self.collectives,
                system,
                network,
                self.links,
                self.schedule,
                finished,
                frozenset(programs),
                self.system_events,
            )
            if self.links is not None
            else None
        )
        self.custom = (
            CustomCollectives(
                self.collectives,
                system,
                network,
                self.links if self.links is not None else UnqueuedNetwork(network, self.schedule),
                self.system_events,
                self.schedule,
                finished,
                comm_groups,
            )
            if custom
            else None
        )
        self.ranks: list[RankState | None] = [None] * (self.callback_rank + 1)
        for rank, program in programs.items():
            run_ns = compute_times_ns(program, system, compute_scale)
            self.ranks[rank] = RankState(rank, program, run_ns, self.queue.rank_key(rank))
        self.keep_intervals = keep_intervals
        self.intervals: dict[int, list[tuple[int, int, int, int]]] | None = (
            {r: [] for r in programs} if keep_intervals else None
        )
        self.start_of: dict[tuple[int, int], int] = {}  # (rank, pos) -> issue time, with intervals
        self.comm_started: dict[tuple[int, int], int] = {}  # (rank, pos) -> issue time of comm-slot nodes
        self.done = 0
        # FeederV3 refuses such files; the simulation goes on but says so
        self.warnings = [
            f"rank {r}: {p.missing_deps} dependencies on node ids not in the file were ignored"
            for r, p in programs.items()
            if p.missing_deps
        ]
        if system.local_mem_bw_gbps == 0 and any(_reduces(p) for p in programs.values()):
            self.warnings.append(
                "local-mem-bw is 0 or missing: reductions take no time, as in ASTRA-sim's binaries (its "
                "size / 0 overflows); set local-mem-bw (GB/s) to time them"
            )

    def loop(self, progress: Callable[[int, int], None] | None) -> None:
        """Run until no event is left.

        Each turn takes what happens next on one rank -- first every rank's start at time 0, then
        node completions in time order -- updates the rank and issues, on every free slot, its
        lowest-id ready node, then every ready receive. Compute nodes are issued and completed here,
        inline (the hot path); the others through :meth:`issue` and :meth:`finish`.
        """
        # ranks without a program (None) never have an event, so the loop reads states only
        ranks = cast("list[RankState]", self.ranks)
        total, intervals, start_of = self.total, self.intervals, self.start_of
        keep_intervals = self.keep_intervals
        issue, finish = self.issue, self.finish
        queue = self.queue
        events, next_seq = queue.heap, queue.next_seq
        pos_bits, pos_mask, rank_mask = queue.pos_bits, queue.pos_mask, queue.rank_mask
        seq_shift, time_shift = queue.seq_shift, queue.time_shift
        push, pop = heapq.heappush, heapq.heappop
        done = self.done
        callbacks, free_slots = self.callbacks, self.free_slots
        starting = sorted(self.programs, reverse=True)
        now_ns = 0
        while starting or events:
            if starting:
                state = ranks[starting.pop()]
                pos = -1
            else:
                key = pop(events)
                pos = key & pos_mask
                state = ranks[(key >> pos_bits) & rank_mask]
                now_ns = key >> time_shift
                if state is None:  # an event of the network's (the callback rank has no state)
                    callback = callbacks[pos]
                    callbacks[pos] = None
                    free_slots.append(pos)
                    callback(now_ns)  # type: ignore[misc]  # a pending slot holds its callback
                    continue
            action, slot, ready, busy = state.action, state.slot, state.ready, state.busy
            if pos >= 0:  # node ``pos`` completes
                lane = slot[pos]
                if action[pos] == DO_COMPUTE:
                    busy[lane] = False
                    elapsed = now_ns - state.last_change_ns  # state.account(now_ns), inline
                    if elapsed:
                        state.split_ns[(state.running_compute > 0) * 2 + (state.running_comm > 0)] += elapsed
                        state.last_change_ns = now_ns
                    state.running_compute -= 1
                else:
                    if lane != NO_SLOT:
                        busy[lane] = False
                    finish(state, pos, now_ns, action[pos], lane)
                state.finish_ns = now_ns  # events come in time order
                done += 1
                if progress is not None and done % PROGRESS_EVERY == 0:
                    progress(done, total)
                if intervals is not None:
                    node_id = state.program.ids[pos]
                    intervals[state.rank].append((node_id, start_of.pop((state.rank, pos), now_ns), now_ns, lane))
                deps_left = state.deps_left
                for child in state.children[pos]:
                    left = deps_left[child] - 1
                    deps_left[child] = left
                    if not left:
                        push(ready[slot[child]], child)
            for lane in state.issue_slots:
                if ready[lane] and not busy[lane]:
                    pos = pop(ready[lane])
                    busy[lane] = True
                    if action[pos] == DO_COMPUTE:
                        if keep_intervals:
                            start_of[(state.rank, pos)] = now_ns
                        elapsed = now_ns - state.last_change_ns  # state.account(now_ns), inline
                        if elapsed:
                            state.split_ns[(state.running_compute > 0) * 2 + (state.running_comm > 0)] += elapsed
                            state.last_change_ns = now_ns
                        state.running_compute += 1
                        took_ns = state.run_ns[pos]
                        if state.cpu_slot[lane]:
                            state.cpu_ns += took_ns
                        else:
                            state.gpu_ns += took_ns
                        end_ns = now_ns + took_ns
                        push(events, (end_ns << time_shift) | (next_seq() << seq_shift) | state.event_base | pos)
                    else:
                        issue(state, pos, now_ns)
            receives = ready[NO_SLOT]
            while receives:
                issue(state, pop(receives), now_ns)
        self.done = done

    def _scheduler(self) -> Callable[[int, Callable[[int], None]], None]:
        """``schedule(t_ns, callback)``: run ``callback(t_ns)`` at ``t_ns``, in push order with the
        ranks' events at that time. The congestion-aware model's hot path: a closure over the queue's
        fields, :meth:`EventQueue.push` inline."""
        queue, callbacks, free_slots = self.queue, self.callbacks, self.free_slots
        heap, next_seq, push = queue.heap, queue.next_seq, heapq.heappush
        time_shift, seq_shift, callback_key = queue.time_shift, queue.seq_shift, self.callback_key

        def schedule(t_ns: int, callback: Callable[[int], None]) -> None:
            if free_slots:
                slot = free_slots.pop()
                callbacks[slot] = callback
            else:
                slot = len(callbacks)
                if slot >= CALLBACK_SLOTS:
                    raise ChakraInputError(
                        f"more than {CALLBACK_SLOTS:,} network events pending at once",
                        hint="the congestion-aware model keeps every message's next hop as an event: "
                        "simulate fewer ranks",
                    )
                callbacks.append(callback)
            push(heap, (t_ns << time_shift) | (next_seq() << seq_shift) | callback_key | slot)

        return schedule

    def issue(self, state: RankState, pos: int, now_ns: int) -> None:
        """Issue a node that is not compute (compute is issued inline in :meth:`loop`)."""
        program, rank, queue = state.program, state.rank, self.queue
        action = state.action[pos]
        lane = state.slot[pos]
        if self.keep_intervals:
            self.start_of[(rank, pos)] = now_ns
        if action in COMMUNICATING_ACTIONS:
            state.account(now_ns)
            state.running_comm += 1
        if lane == SLOT_COMM:
            self.comm_started[(rank, pos)] = now_ns
        if self.replay_only and action != DO_INSTANT:
            # replay-only: every node takes its recorded time, communication included (§2.4)
            took_ns = state.run_ns[pos]
            if state.cpu_slot[lane]:
                state.cpu_ns += took_ns
            else:
                state.gpu_ns += took_ns
            queue.push(now_ns + took_ns, rank, pos)
        elif action == DO_INSTANT:
            queue.push(now_ns, rank, pos)
        elif action == DO_MEMORY:
            if not self.memory.enabled:
                configured = self.memory.config.path
                raise ChakraInputError(
                    f"rank {rank} node {program.ids[pos]} ({program.names[pos]}) is a remote-memory access, "
                    "but the remote memory configuration"
                    + (f" ({configured})" if configured is not None else " (none given)")
                    + " has no memory expansion",
                    path=program.path,
                    hint="pass --remote-memory with a memory-type such as PER_NPU_MEMORY_EXPANSION",
                )
            queue.push(self.memory.access(rank, now_ns, program.memory_bytes.get(pos, 0)), rank, pos)
        elif action == DO_COLLECTIVE:
            comm_type, size, group, _, _, _ = program.comm[pos]
            refusal = self.collectives.refusal(rank, group) or astra_compat_refusal(comm_type, self.system)
            if refusal is not None:
                why, hint = refusal
                raise ChakraInputError(
                    f"rank {rank} node {program.ids[pos]} ({program.names[pos]}) {why}", path=program.path, hint=hint
                )
            if replays_duration(comm_type, self.system):  # ASTRA-sim's BROADCAST: the rank alone, unmatched
                queue.push(now_ns + (program.time_ns[pos] or MIN_NODE_NS), rank, pos)
                return
            try:
                algorithm = (
                    self.custom.algorithm_for(rank, comm_type, program.ids[pos], group)
                    if self.custom is not None
                    else None
                )
                if algorithm is not None and self.custom is not None:
                    self.custom.arrive(rank, pos, now_ns, comm_type, size, group, algorithm)
                    return
                if self.contended is not None and self.contended.takes(comm_type):
                    self.contended.arrive(rank, pos, now_ns, comm_type, size, group)
                    return
                if self.contended is not None:
                    self.contended.uncontended(comm_type)
                started = self.collectives.arrive(rank, pos, now_ns, comm_type, size, group)
            except ChakraInputError as error:  # the model refused it: say which collective, where
                where = f"rank {rank} node {program.ids[pos]} ({program.names[pos]}): "
                raise ChakraInputError(
                    where + error.message, path=error.path or program.path, hint=error.hint
                ) from None
            for member, member_pos, end_ns in started or ():
                queue.push(end_ns, member, member_pos)
        elif action == DO_SEND and self.links is not None:
            _, size, _, src, dst, tag = program.comm[pos]
            self.links.send(now_ns, src, dst, size, lambda t_ns: self.delivered(t_ns, rank, pos, (src, dst, tag, size)))
        elif action == DO_SEND:
            _, size, _, src, dst, tag = program.comm[pos]
            arrival_ns = now_ns + p2p_time_ns(src, dst, size, self.network)
            queue.push(arrival_ns, rank, pos)
            receive = self.messages.send((src, dst, tag, size), arrival_ns)
            if receive is not None:
                receiver, receive_pos, posted_ns = receive
                queue.push(max(arrival_ns, posted_ns), receiver, receive_pos)
        else:  # DO_RECV
            _, size, _, src, dst, tag = program.comm[pos]
            sent_ns = self.messages.receive((src, dst, tag, size), rank, pos, now_ns)
            if sent_ns is not None:
                queue.push(max(sent_ns, now_ns), rank, pos)

    def delivered(self, now_ns: int, rank: int, pos: int, key: tuple[int, int, int, int]) -> None:
        """A message has arrived (congestion-aware): its send completes, and its receive if posted
        (both now, the send first, as ASTRA-sim runs their callbacks)."""
        self.queue.push(now_ns, rank, pos)
        receive = self.messages.send(key, now_ns)
        if receive is not None:
            receiver, receive_pos, _ = receive
            self.queue.push(now_ns, receiver, receive_pos)

    def finish(self, state: RankState, pos: int, now_ns: int, action: int, lane: int) -> None:
        """Bookkeeping when a node that is not compute completes."""
        if action in COMMUNICATING_ACTIONS:
            state.account(now_ns)
            state.running_comm -= 1
        if lane == SLOT_COMM:
            state.comm_ns += now_ns - self.comm_started.pop((state.rank, pos), now_ns)

    def result(self) -> SimResult:
        """The statistics of a finished run; :class:`SimulationStuck` when nodes were left."""
        if self.done < self.total:
            raise self.stuck()
        states = {rank: self.ranks[rank] for rank in self.programs}
        return SimResult(
            {rank: state.stats() for rank, state in states.items() if state is not None},
            self.collectives.totals,
            self.intervals,
            {r: dict(zip(p.ids, p.names, strict=True)) for r, p in self.programs.items()}
            if self.keep_intervals
            else None,
            {r: p.slot_names for r, p in self.programs.items()},
            self.warnings + self.collectives.warnings + (self.contended.warnings() if self.contended else []),
            self.links.stats() if self.links is not None else None,
            self.links.named_hops() if self.links is not None and self.links.hops is not None else None,
        )

    def stuck(self) -> SimulationStuck:
        """Who waits for what when no event is left but nodes are."""
        found: list[Waiting] = self.collectives.stuck() + self.messages.stuck()
        if self.contended is not None:
            found += self.contended.stuck()
        if self.custom is not None:
            found += self.custom.stuck()
        blocked = 0
        for state in self.ranks:
            if state is None:
                continue
            never_ready = [pos for pos, left in enumerate(state.deps_left) if left > 0]
            blocked += len(never_ready)
            if never_ready and not any(rank == state.rank for rank, _, _ in found):
                found.append((state.rank, never_ready[0], "dependencies that never finish (a cycle?)"))
        waiting = [
            (rank, self.programs[rank].ids[pos], self.programs[rank].names[pos], why) for rank, pos, why in found
        ]
        lines = "; ".join(f"rank {r} node {i} ({n}) waits for {why}" for r, i, n, why in waiting[:STUCK_SHOWN])
        more = f" (+{len(waiting) - STUCK_SHOWN} more)" if len(waiting) > STUCK_SHOWN else ""
        return SimulationStuck(
            f"the workload cannot finish: {lines}{more}; {blocked} nodes never became ready",
            waiting,
            hint="run chakra validate --target astra-sim on the workload",
        )


def _reduces(program: RankProgram) -> bool:
    """Whether ``program`` has a collective that reduces (it needs ``local-mem-bw``)."""
    columns = program.columns
    collective = columns.action[columns.comm_pos] == DO_COLLECTIVE
    return bool(np.isin(columns.comm_type[collective], list(REDUCING_TYPES)).any())
