"""Discrete-event simulation of a multi-rank Chakra workload, with ASTRA-sim's issue semantics.

Per rank (``reference/astra-sim.md`` §2.2-2.4):

* a node is *ready* when every node in its ``data_deps`` and ``ctrl_deps`` has finished (FeederV3
  gates on both); ready nodes are issued in ascending id order when their hardware slot is free;
* slots: CPU (``is_cpu_op`` true), GPU compute (other ``COMP_NODE``), GPU comm (collectives, sends,
  memory, metadata) -- one node each at a time; receives need no slot;
* compute: the recorded ``duration_micros`` (× ``compute_scale``; 1 ns when 0), or the roofline time
  from ``num_ops`` and ``tensor_size`` when the system enables it (GPU nodes);
* collectives: the k-th collective a rank issues on a group is matched with the k-th of every other
  member (ASTRA-sim's rule: members issue a group's collectives in the same order); it starts when
  the last member arrives and lasts :func:`chakra.sim.collectives.collective_time_ns`;
* sends and receives match on (source, destination, tag, size) in order; a send completes when its
  message arrives, a receive at ``max(arrival, posting)``;
* memory loads/stores: remote-memory latency + bytes / bandwidth, one at a time per rank.

A workload that can never finish (a collective a member never reaches, a receive without a send, a
dependency cycle) ends with :class:`SimulationStuck`, which names the ranks and nodes that wait and
on what. Time is integer nanoseconds (ASTRA-sim's cycles).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chakra import io
from chakra.attrs import int_value, member_value
from chakra.errors import ChakraError, ChakraInputError
from chakra.graph import GraphBuilder
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    CollectiveCommType,
)
from chakra.sim.collectives import collective_time_ns, p2p_time_ns

NS_PER_US = 1000
#: ASTRA-sim runs a zero-duration node for one cycle (``reference/astra-sim.md`` §5.2).
MIN_NODE_NS = 1
#: How many completed nodes between two progress reports.
PROGRESS_EVERY = 1 << 16
#: The group every rank belongs to: ``pg_name`` empty or "0" (§2.5).
DEFAULT_GROUPS = frozenset({"", "0"})

#: Hardware slots (§2.3). With ``cpu_per_thread``/``gpu_per_stream`` a rank gets more slots, one per
#: host thread (``tid``) or device stream (``stream``), numbered after these.
SLOT_CPU, SLOT_GPU, SLOT_COMM, NO_SLOT = 0, 1, 2, 3
SLOT_NAMES = ("CPU", "GPU compute", "GPU comm", "none")

#: What a node does when issued.
DO_COMPUTE, DO_COLLECTIVE, DO_SEND, DO_RECV, DO_MEMORY, DO_INSTANT = range(6)
#: Actions that count as communication in the time breakdown (memory and instant nodes count as neither).
COMMUNICATING_ACTIONS = frozenset({DO_COLLECTIVE, DO_SEND, DO_RECV})


class SimulationStuck(ChakraError):
    """The workload cannot finish; ``waiting`` lists ``(rank, node id, name, what it waits for)``."""

    def __init__(self, message: str, waiting: list[tuple[int, int, str, str]], **kwargs: Any):
        super().__init__(message, **kwargs)
        self.waiting = waiting
        self._message, self._kwargs = message, kwargs

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt in the parent when raised in a worker process (chakra.parallel)
        return (_rebuild_stuck, (self._message, self.waiting, self._kwargs))


def _rebuild_stuck(message: str, waiting: list[tuple[int, int, str, str]], kwargs: dict[str, Any]) -> SimulationStuck:
    return SimulationStuck(message, waiting, **kwargs)


@dataclass
class RankProgram:
    """One rank's nodes as flat lists; positions in ascending id order (file order among equal ids)."""

    rank: int
    path: Path
    ids: list[int]
    names: list[str]
    action: list[int]
    slot: list[int]
    time_ns: list[int]  # recorded duration; the time of compute nodes (all nodes in replay-only mode)
    dep_count: list[int]
    children: list[list[int]]
    comm: dict[int, tuple[int, int, str, int, int, int]]  # pos -> (comm_type, size, pg_name, src, dst, tag)
    roofline: dict[int, tuple[int, int]]  # pos -> (num_ops, tensor_size) of GPU compute nodes
    memory_bytes: dict[int, int]  # pos -> tensor_size of memory loads and stores
    slot_names: list[str] = field(default_factory=lambda: list(SLOT_NAMES))
    cpu_slots: frozenset[int] = frozenset({SLOT_CPU})
    missing_deps: int = 0

    def __len__(self) -> int:
        return len(self.ids)


def _attrs(node: Any) -> dict[str, Any]:
    """The first attribute of each name (the one consumers read), as Python values."""
    out: dict[str, Any] = {}
    for attr in node.attr:
        if attr.name not in out:
            out[attr.name] = attr
    return out


def load_rank(
    path: str | Path, rank: int, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> RankProgram:
    """Read one rank's ET into a :class:`RankProgram` (streamed; the messages are not kept).

    ASTRA-sim gives a rank one CPU and one GPU-compute slot. ``cpu_per_thread`` gives every host
    thread (``tid``) its own CPU slot and ``gpu_per_stream`` every stream its own compute slot, as
    the recorded job had them (a PyTorch trace's autograd and gloo threads run side by side).
    """
    path = Path(path)
    slot_names = list(SLOT_NAMES)
    extra_slots: dict[tuple[str, int], int] = {}

    def extra_slot(kind: str, key: int) -> int:
        index = extra_slots.get((kind, key))
        if index is None:
            index = extra_slots[(kind, key)] = len(slot_names)
            slot_names.append(f"{kind} {key}")
        return index

    builder = GraphBuilder()
    names: list[str] = []
    action: list[int] = []
    slot: list[int] = []
    time_ns: list[int] = []
    comm: dict[int, tuple[int, int, str, int, int, int]] = {}
    roofline: dict[int, tuple[int, int]] = {}
    memory_bytes: dict[int, int] = {}
    for node in io.stream(path):
        pos = builder.add(node)
        names.append(node.name)
        attrs = _attrs(node)
        cpu_attr = attrs.get("is_cpu_op")
        is_cpu = bool(member_value(cpu_attr)) if cpu_attr is not None else False
        node_type = node.type
        duration = node.duration_micros * NS_PER_US
        if node_type == COMP_NODE:
            action.append(DO_COMPUTE)
            if is_cpu:
                tid = attrs.get("tid")
                slot.append(extra_slot("CPU thread", int_value(tid) or 0) if cpu_per_thread and tid else SLOT_CPU)
            else:
                stream = attrs.get("stream")
                if gpu_per_stream and stream is not None:
                    slot.append(extra_slot("GPU stream", int_value(stream) or 0))
                else:
                    slot.append(SLOT_GPU)
            time_ns.append(duration)
            if not is_cpu and "num_ops" in attrs and "tensor_size" in attrs:
                roofline[pos] = (int_value(attrs["num_ops"]) or 0, int_value(attrs["tensor_size"]) or 0)
        elif node_type in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE):
            if is_cpu:
                raise ChakraInputError(
                    f"node {node.id} ({node.name}) is a communication node marked is_cpu_op",
                    path=path,
                    hint="communication runs on the device: set is_cpu_op false (ASTRA-sim aborts too)",
                )
            action.append({COMM_COLL_NODE: DO_COLLECTIVE, COMM_SEND_NODE: DO_SEND}.get(node_type, DO_RECV))
            slot.append(NO_SLOT if node_type == COMM_RECV_NODE else SLOT_COMM)
            time_ns.append(duration)
            comm[pos] = _comm_attrs(node, attrs, rank, path)
        elif node_type in (MEM_LOAD_NODE, MEM_STORE_NODE):
            action.append(DO_MEMORY)
            slot.append(SLOT_COMM)
            size = attrs.get("tensor_size")
            memory_bytes[pos] = (int_value(size) or 0) if size is not None else 0
            time_ns.append(0)
        else:  # METADATA_NODE, INVALID_NODE: finish at once (§2.4)
            action.append(DO_INSTANT)
            slot.append(SLOT_COMM)
            time_ns.append(0)
    graph = builder.build()
    n = graph.num_nodes
    ids_np = graph.ids
    # Positions are renumbered in ascending id order (file order among equal ids), so a ready heap
    # holds plain positions and pops the lowest id first, as ASTRA-sim issues (§2.2).
    order = np.argsort(ids_np, kind="stable")
    in_id_order = bool(np.all(order == np.arange(n)))
    dep_pos_np = graph.dep_pos
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    if not in_id_order:
        new_pos = np.empty(n, dtype=np.int64)
        new_pos[order] = np.arange(n, dtype=np.int64)
        dep_pos_np = new_pos[dep_pos_np]
        child_of = new_pos[child_of]
        positions = order.tolist()
        names = [names[i] for i in positions]
        action = [action[i] for i in positions]
        slot = [slot[i] for i in positions]
        time_ns = [time_ns[i] for i in positions]
        remap = new_pos.tolist()
        comm = {remap[k]: v for k, v in comm.items()}
        roofline = {remap[k]: v for k, v in roofline.items()}
        memory_bytes = {remap[k]: v for k, v in memory_bytes.items()}
        ids_np = ids_np[order]
    # an id in both data_deps and ctrl_deps (or twice in one) counts once
    edges = np.unique(np.stack([dep_pos_np, child_of]), axis=1) if len(dep_pos_np) else np.zeros((2, 0), np.int64)
    parent_np, child_np = edges
    dep_count = np.bincount(child_np, minlength=n).tolist()
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent_np, minlength=n), out=child_ptr[1:])
    # edges are sorted by parent, then child: each node's children in ascending position
    flat_children = child_np.tolist()
    bounds = child_ptr.tolist()
    children = [flat_children[bounds[i] : bounds[i + 1]] for i in range(n)]
    return RankProgram(
        rank=rank,
        path=path,
        ids=ids_np.tolist(),
        names=names,
        action=action,
        slot=slot,
        time_ns=time_ns,
        dep_count=dep_count,
        children=children,
        comm=comm,
        roofline=roofline,
        memory_bytes=memory_bytes,
        slot_names=slot_names,
        cpu_slots=frozenset({SLOT_CPU} | {i for (kind, _), i in extra_slots.items() if kind == "CPU thread"}),
        missing_deps=len(graph.missing_deps),
    )


def _comm_attrs(node: Any, attrs: dict[str, Any], rank: int, path: Path) -> tuple[int, int, str, int, int, int]:
    def number(name: str, default: int | None = None) -> int:
        attr = attrs.get(name)
        value = int_value(attr) if attr is not None else None
        if value is None:
            if default is None:
                raise ChakraInputError(
                    f"node {node.id} ({node.name}) has no {name}",
                    path=path,
                    hint="run chakra validate --target astra-sim on the workload",
                )
            return default
        return value

    pg = attrs.get("pg_name")
    pg_name = str(member_value(pg)) if pg is not None else ""
    if node.type == COMM_COLL_NODE:
        return (number("comm_type"), number("comm_size"), pg_name, rank, rank, 0)
    src = number("comm_src", rank)
    dst = number("comm_dst", rank)
    return (0, number("comm_size"), pg_name, src, dst, number("comm_tag", 0))


@dataclass
class RankStats:
    """What one rank did, in ns."""

    rank: int
    finish_ns: int = 0
    cpu_ns: int = 0  # summed durations of CPU nodes
    gpu_compute_ns: int = 0  # summed durations of GPU compute nodes (replay-only: every non-CPU node)
    comm_ns: int = 0  # collectives and sends, issue to completion (the comm slot's busy time)
    nodes: int = 0
    # time split by what was running (sums to finish_ns): compute only, communication only
    # (exposed), both (overlapped), neither (idle); communication = collectives, sends, receives
    compute_only_ns: int = 0
    comm_exposed_ns: int = 0
    overlap_ns: int = 0
    idle_ns: int = 0

    @property
    def exposed_comm_ns(self) -> int:
        """ASTRA-sim's "exposed communication": finish time minus GPU compute time."""
        return self.finish_ns - self.gpu_compute_ns


@dataclass
class SimResult:
    """Per-rank statistics, per-collective-type totals and, when asked, every node's interval."""

    ranks: dict[int, RankStats]
    collectives: dict[str, dict[str, int]] = field(default_factory=dict)  # type -> count, bytes, time_ns
    intervals: dict[int, list[tuple[int, int, int, int]]] | None = None  # rank -> (node id, start, end, slot)
    names: dict[int, dict[int, str]] | None = None  # rank -> node id -> name (with intervals)
    slot_names: dict[int, list[str]] = field(default_factory=dict)  # rank -> name of each slot
    warnings: list[str] = field(default_factory=list)

    @property
    def finish_ns(self) -> int:
        return max((s.finish_ns for s in self.ranks.values()), default=0)

    def astra_lines(self) -> list[str]:
        """The per-rank lines ASTRA-sim prints."""
        return [
            f"sys[{r}] finished, {s.finish_ns} cycles, exposed communication {s.exposed_comm_ns} cycles."
            for r, s in sorted(self.ranks.items())
        ]


def simulate(
    programs: Mapping[int, RankProgram],
    system: Any,
    network: Any,
    *,
    remote_memory: Any = None,
    comm_groups: Mapping[int, Sequence[int]] | None = None,
    compute_scale: float = 1.0,
    keep_intervals: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Run every rank of ``programs`` to completion (see the module docstring). With the system's
    ``replay-only`` every node takes its recorded duration and nothing is matched across ranks."""
    if not (math.isfinite(compute_scale) and compute_scale >= 0):
        raise ChakraInputError(
            f"compute scale {compute_scale:g} must be a finite number >= 0",
            hint="e.g. 0.5 halves every compute time (2x faster compute), 0 makes compute free",
        )
    world = network.num_npus
    missing = sorted(r for r in programs if r >= world)
    if missing:
        raise ChakraInputError(
            f"ranks {missing} have ET files but the network has only {world} NPUs",
            path=network.path,
            hint="make npus_count in the network configuration multiply to the number of ranks",
        )
    groups: dict[str, tuple[int, ...] | None] = {name: None for name in DEFAULT_GROUPS}
    for key, members in (comm_groups or {}).items():
        outside = sorted(r for r in members if not 0 <= r < world)
        if outside:
            raise ChakraInputError(
                f"communicator group {key} lists ranks {outside}, outside the network's {world} NPUs",
                hint="check the comm groups file against npus_count in the network configuration",
            )
        if len(set(members)) != len(members):
            raise ChakraInputError(
                f"communicator group {key} lists a rank more than once: {list(members)}",
                hint="list each member of a group once in the comm groups file",
            )
        groups[str(key)] = tuple(sorted(members))
    member_sets = {name: frozenset(members) for name, members in groups.items() if members is not None}
    roofline = bool(getattr(system, "roofline_enabled", False))
    replay_only = bool(getattr(system, "replay_only", False))
    peak_flops = getattr(system, "peak_perf_tflops", 0.0) * 1e12
    mem_bytes_per_s = getattr(system, "local_mem_bw_gbps", 0.0) * 1e9

    total = sum(len(p) for p in programs.values())
    done = 0
    intervals: dict[int, list[tuple[int, int, int, int]]] | None = {r: [] for r in programs} if keep_intervals else None
    start_of: dict[tuple[int, int], int] = {}
    coll_seen: dict[tuple[int, str], int] = defaultdict(int)
    coll_waiting: dict[tuple[str, int], dict[int, tuple[int, int, int, int]]] = {}
    coll_totals: dict[str, dict[str, int]] = {}
    messages: dict[tuple[int, int, int, int], deque[int]] = defaultdict(deque)  # key -> arrival times
    posted: dict[tuple[int, int, int, int], deque[tuple[int, int, int]]] = defaultdict(deque)  # (rank, pos, t)
    memory_free_at: dict[int, int] = defaultdict(int)  # memory queue -> when it is free (§5.8)
    memory_type = getattr(remote_memory, "memory_type", "NO_MEMORY_EXPANSION")
    # FeederV3 refuses such files; the simulation goes on but says so
    warnings: list[str] = [
        f"rank {r}: {p.missing_deps} dependencies on node ids not in the file were ignored"
        for r, p in programs.items()
        if p.missing_deps
    ]
    comm_started: dict[tuple[int, int], int] = {}  # (rank, pos) -> issue time of comm-slot nodes

    # An event -- node ``pos`` of ``rank`` completes at ``t`` -- is one int, so the heap compares ints,
    # not tuples: t, then a sequence number (ties run in insertion order, §5.9), then rank and pos.
    pos_bits = max((len(p) for p in programs.values()), default=1).bit_length()
    rank_bits = max(programs, default=0).bit_length()
    seq_bits = total.bit_length()  # every node completes exactly once: at most ``total`` pushes
    pos_mask, rank_mask = (1 << pos_bits) - 1, (1 << rank_bits) - 1
    seq_shift = pos_bits + rank_bits
    time_shift = seq_shift + seq_bits
    events: list[int] = []
    next_seq = itertools.count().__next__
    push, pop = heapq.heappush, heapq.heappop

    def run_times(program: RankProgram) -> list[int]:
        """Every node's time when it is compute (replay, scaled, or roofline), computed once."""
        if compute_scale == 1.0:
            times = [t or MIN_NODE_NS for t in program.time_ns]
        else:
            times = [max(MIN_NODE_NS, int(t * compute_scale)) if t else MIN_NODE_NS for t in program.time_ns]
        if roofline and not replay_only:
            for pos, (num_ops, tensor_size) in program.roofline.items():
                if tensor_size == 0 or peak_flops <= 0 or mem_bytes_per_s <= 0:
                    times[pos] = 0  # ASTRA-sim skips such nodes as invalid
                else:
                    times[pos] = int(max(num_ops / peak_flops, tensor_size / mem_bytes_per_s) * 1e9)
        return times

    # Everything the event loop touches for one rank, unpacked in one step per event.
    ranks: list[_RankState | None] = [None] * (max(programs, default=0) + 1)
    for r, p in programs.items():
        cpu_lane = [i in p.cpu_slots for i in range(len(p.slot_names))]
        ranks[r] = (
            p.action, p.slot, p.children, list(p.dep_count), [[] for _ in p.slot_names], [False] * len(p.slot_names),
            run_times(p), [0] * _STATE_SIZE, [i for i in range(len(p.slot_names)) if i != NO_SLOT], cpu_lane,
            r << pos_bits,
        )  # fmt: skip

    def complete_at(t: int, rank: int, pos: int) -> None:
        push(events, (t << time_shift) | (next_seq() << seq_shift) | (rank << pos_bits) | pos)

    members_present = {
        name: sum(1 for r in (members if members is not None else programs) if r in programs)
        for name, members in groups.items()
    }
    collective_ns: dict[tuple[int, int, str], int] = {}  # the model is pure: one call per distinct collective
    type_names = {value: CollectiveCommType.Name(value) for value in CollectiveCommType.values()}

    def start_collective(key: tuple[str, int], arrivals: dict[int, tuple[int, int, int, int]]) -> None:
        t0 = max(a[0] for a in arrivals.values())
        kinds = {(a[2], a[3]) for a in arrivals.values()}
        comm_type, size = max(kinds, key=lambda kind: kind[1])
        if len(kinds) > 1:
            warnings.append(
                f"collective #{key[1]} of group {key[0]}: members disagree on type/size {sorted(kinds)}; "
                f"simulated as the largest"
            )
        members = groups[key[0]]
        cache_key = (comm_type, size, key[0])
        duration = collective_ns.get(cache_key)
        if duration is None:
            duration = collective_ns[cache_key] = collective_time_ns(comm_type, size, members, system, network)
        for rank, (_, pos, _, _) in arrivals.items():
            complete_at(t0 + duration, rank, pos)
        name = type_names.get(comm_type, str(comm_type))
        total_of = coll_totals.setdefault(name, {"count": 0, "bytes": 0, "time_ns": 0})
        total_of["count"] += 1
        total_of["bytes"] += size
        total_of["time_ns"] += duration

    def memory_queue(rank: int) -> int:
        if memory_type == "PER_NODE_MEMORY_EXPANSION":
            return rank // max(1, getattr(remote_memory, "npus_per_node", None) or 1)
        return 0 if memory_type == "MEMORY_POOL" else rank

    def issue_other(rank: int, pos: int, now: int) -> None:
        """Issue a node that is not compute (compute is issued inline in the event loop)."""
        program = programs[rank]
        state = ranks[rank][_STATE]  # type: ignore[index]
        action = program.action[pos]
        lane = program.slot[pos]
        if keep_intervals:
            start_of[(rank, pos)] = now
        if action in COMMUNICATING_ACTIONS:
            _account(state, now)
            state[_RUN_COMM] += 1
        if lane == SLOT_COMM:
            comm_started[(rank, pos)] = now
        if replay_only and action != DO_INSTANT:
            # replay-only: every node takes its recorded time, communication included (§2.4)
            took = ranks[rank][_RUN_NS][pos]  # type: ignore[index]
            state[_CPU_NS if lane in program.cpu_slots else _GPU_NS] += took
            complete_at(now + took, rank, pos)
        elif action == DO_INSTANT:
            complete_at(now, rank, pos)
        elif action == DO_MEMORY:
            if memory_type == "NO_MEMORY_EXPANSION":
                raise ChakraInputError(
                    f"rank {rank} node {program.ids[pos]} ({program.names[pos]}) is a remote-memory access, "
                    "but the remote memory configuration has no memory expansion",
                    path=getattr(remote_memory, "path", None),
                    hint="pass --remote-memory with a memory-type such as PER_NPU_MEMORY_EXPANSION",
                )
            latency = getattr(remote_memory, "latency_ns", 0.0)
            bandwidth = getattr(remote_memory, "bandwidth_bytes_per_ns", 0.0)
            size = program.memory_bytes.get(pos, 0)
            queue = memory_queue(rank)
            t0 = max(now, memory_free_at[queue])
            t = t0 + int(latency) + (int(size / bandwidth) if bandwidth > 0 else 0)
            memory_free_at[queue] = t
            complete_at(t, rank, pos)
        elif action == DO_COLLECTIVE:
            comm_type, size, pg_name, _, _, _ = program.comm[pos]
            if pg_name not in groups:
                raise ChakraInputError(
                    f"rank {rank} node {program.ids[pos]} ({program.names[pos]}) uses communicator group "
                    f"{pg_name!r}, which no comm groups file defines",
                    path=program.path,
                    hint="pass --comm-groups PREFIX.comm_groups.json",
                )
            if pg_name in member_sets and rank not in member_sets[pg_name]:
                raise ChakraInputError(
                    f"rank {rank} node {program.ids[pos]} ({program.names[pos]}) issues a collective on "
                    f"communicator group {pg_name}, whose members are {list(groups[pg_name] or ())}",
                    path=program.path,
                    hint="the comm groups file does not match the workload: pass the one written with it",
                )
            group_key = "0" if pg_name in DEFAULT_GROUPS else pg_name
            k = coll_seen[(rank, group_key)]
            coll_seen[(rank, group_key)] += 1
            arrivals = coll_waiting.setdefault((group_key, k), {})
            arrivals[rank] = (now, pos, comm_type, size)
            if len(arrivals) == members_present[pg_name]:
                del coll_waiting[(group_key, k)]
                start_collective((group_key, k), arrivals)
        elif action == DO_SEND:
            _, size, _, src, dst, tag = program.comm[pos]
            arrival = now + p2p_time_ns(src, dst, size, network)
            complete_at(arrival, rank, pos)
            key = (src, dst, tag, size)
            waiting = posted.get(key)
            if waiting:
                r_rank, r_pos, r_time = waiting.popleft()
                complete_at(max(arrival, r_time), r_rank, r_pos)
            else:
                messages[key].append(arrival)
        else:  # DO_RECV
            _, size, _, src, dst, tag = program.comm[pos]
            key = (src, dst, tag, size)
            arrived = messages.get(key)
            if arrived:
                complete_at(max(arrived.popleft(), now), rank, pos)
            else:
                posted[key].append((rank, pos, now))

    def finish_other(rank: int, pos: int, now: int, action: int, lane: int) -> None:
        """Bookkeeping when a node that is not compute completes."""
        state = ranks[rank][_STATE]  # type: ignore[index]
        if action in COMMUNICATING_ACTIONS:
            _account(state, now)
            state[_RUN_COMM] -= 1
        if lane == SLOT_COMM:
            state[_COMM_NS] += now - comm_started.pop((rank, pos), now)

    for rank, program in programs.items():
        lanes = ranks[rank][_LANES]  # type: ignore[index]
        for pos, count in enumerate(program.dep_count):
            if count == 0:
                lanes[program.slot[pos]].append(pos)  # ascending positions: already a heap

    # Each turn takes what happens next on one rank -- first every rank's start at time 0, then node
    # completions in time order -- updates the rank and issues, on every free slot, its lowest-id
    # ready node, then every ready receive. One loop, as the hot path lives here.
    starting = sorted(programs, reverse=True)
    now = 0
    while starting or events:
        if starting:
            rank, pos = starting.pop(), -1
        else:
            key = pop(events)
            pos = key & pos_mask
            rank = (key >> pos_bits) & rank_mask
            now = key >> time_shift
        action, slot, children, counts, lanes, busy, run_ns, state, lane_order, cpu_lane, base = ranks[rank]  # type: ignore[misc]
        if pos >= 0:  # node ``pos`` completes
            lane = slot[pos]
            if action[pos] == DO_COMPUTE:
                busy[lane] = False
                elapsed = now - state[_LAST]
                if elapsed:
                    state[_bucket(state)] += elapsed
                    state[_LAST] = now
                state[_RUN_COMPUTE] -= 1
            else:
                if lane != NO_SLOT:
                    busy[lane] = False
                finish_other(rank, pos, now, action[pos], lane)
            state[_FINISH_NS] = now  # events come in time order
            done += 1
            if progress is not None and done % PROGRESS_EVERY == 0:
                progress(done, total)
            if intervals is not None:
                intervals[rank].append((programs[rank].ids[pos], start_of.pop((rank, pos), now), now, lane))
            for child in children[pos]:
                left = counts[child] - 1
                counts[child] = left
                if not left:
                    push(lanes[slot[child]], child)
        for lane in lane_order:
            if lanes[lane] and not busy[lane]:
                pos = pop(lanes[lane])
                busy[lane] = True
                if action[pos] == DO_COMPUTE:  # the common case, inline
                    if keep_intervals:
                        start_of[(rank, pos)] = now
                    elapsed = now - state[_LAST]
                    if elapsed:
                        state[_bucket(state)] += elapsed
                        state[_LAST] = now
                    state[_RUN_COMPUTE] += 1
                    took = run_ns[pos]
                    state[_CPU_NS if cpu_lane[lane] else _GPU_NS] += took
                    push(events, ((now + took) << time_shift) | (next_seq() << seq_shift) | base | pos)
                else:
                    issue_other(rank, pos, now)
        receives = lanes[NO_SLOT]
        while receives:
            issue_other(rank, pop(receives), now)

    if done < total:
        raise _diagnose(programs, {r: ranks[r][_COUNTS] for r in programs}, coll_waiting, posted, groups)  # type: ignore[index]
    stats: dict[int, RankStats] = {}
    for rank, program in programs.items():
        state = ranks[rank][_STATE]  # type: ignore[index]
        stats[rank] = RankStats(
            rank,
            finish_ns=state[_FINISH_NS],
            cpu_ns=state[_CPU_NS],
            gpu_compute_ns=state[_GPU_NS],
            comm_ns=state[_COMM_NS],
            nodes=len(program),
            compute_only_ns=state[_COMPUTE_ONLY],
            comm_exposed_ns=state[_EXPOSED],
            overlap_ns=state[_OVERLAP],
            idle_ns=state[_IDLE],
        )
    if progress is not None:
        progress(total, total)
    return SimResult(
        stats,
        coll_totals,
        intervals,
        {r: dict(zip(p.ids, p.names, strict=True)) for r, p in programs.items()} if keep_intervals else None,
        {r: p.slot_names for r, p in programs.items()},
        warnings,
    )


# One rank's mutable state in the event loop: a list of ints, indexed by these.
_RUN_COMPUTE, _RUN_COMM, _LAST = 0, 1, 2  # compute / communication nodes running; time of the last change
# the time split by what was running (sums to the finish time): compute only, communication only
# (exposed), both (overlapped), neither (idle); communication = collectives, sends, receives
_COMPUTE_ONLY, _EXPOSED, _OVERLAP, _IDLE = 3, 4, 5, 6
_CPU_NS, _GPU_NS, _COMM_NS, _FINISH_NS = 7, 8, 9, 10
_STATE_SIZE = 11
# The fields of a rank's tuple in the event loop (see ``ranks`` in :func:`simulate`).
_RankState = tuple[Any, ...]
_LANES, _COUNTS, _RUN_NS, _STATE = 4, 3, 6, 7


def _bucket(state: list[int]) -> int:
    """Which time bucket the interval since ``state[_LAST]`` belongs to."""
    if state[_RUN_COMPUTE]:
        return _OVERLAP if state[_RUN_COMM] else _COMPUTE_ONLY
    return _EXPOSED if state[_RUN_COMM] else _IDLE


def _account(state: list[int], now: int) -> None:
    """Add the time since the last change to the bucket of what was running."""
    elapsed = now - state[_LAST]
    if elapsed:
        state[_bucket(state)] += elapsed
        state[_LAST] = now


def _diagnose(
    programs: Mapping[int, RankProgram],
    remaining: dict[int, list[int]],
    coll_waiting: dict[tuple[str, int], dict[int, tuple[int, int, int, int]]],
    posted: dict[tuple[int, int, int, int], deque[tuple[int, int, int]]],
    groups: Mapping[str, tuple[int, ...] | None],
) -> SimulationStuck:
    """Say who waits for what when no event is left but nodes are."""
    waiting: list[tuple[int, int, str, str]] = []
    for (group, k), arrivals in coll_waiting.items():
        members = groups.get(group)
        expected = [r for r in (members if members is not None else programs) if r in programs]
        absent = [r for r in expected if r not in arrivals]
        for rank, (_, pos, _, _) in arrivals.items():
            program = programs[rank]
            why = f"collective #{k} of group {group}: ranks {absent} never issue it"
            waiting.append((rank, program.ids[pos], program.names[pos], why))
    for (src, _dst, tag, size), posts in posted.items():
        for rank, pos, _ in posts:
            program = programs[rank]
            why = f"a receive of {size} bytes from rank {src} (tag {tag}) that is never sent"
            waiting.append((rank, program.ids[pos], program.names[pos], why))
    blocked = 0
    for rank, program in programs.items():
        stuck = [p for p, c in enumerate(remaining[rank]) if c > 0]
        if stuck:
            blocked += len(stuck)
            if not any(w[0] == rank for w in waiting):
                pos = stuck[0]
                why = "dependencies that never finish (a cycle?)"
                waiting.append((rank, program.ids[pos], program.names[pos], why))
    lines = "; ".join(f"rank {r} node {i} ({n}) waits for {why}" for r, i, n, why in waiting[:8])
    more = f" (+{len(waiting) - 8} more)" if len(waiting) > 8 else ""
    return SimulationStuck(
        f"the workload cannot finish: {lines}{more}; {blocked} nodes never became ready",
        waiting,
        hint="run chakra validate --target astra-sim on the workload",
    )
