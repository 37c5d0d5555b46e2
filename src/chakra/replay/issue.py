"""Issuing one rank's program on real hardware with PyTorch: compute and communication.

:class:`Issuer` runs a :class:`~chakra.replay.program.IssueProgram` in issue order on one thread,
as a framework's host thread issues work: a node waits only for what it depends on (collectives
and transfers run asynchronously, ``async_op=True``, and are waited for where a dependent needs
them, as the recording or the generator meant); ``kernels`` and ``aten`` compute runs where it is
issued, ``duration`` compute is a timer on its track.

Compute (:class:`ComputeMode`):

* ``duration``: the node takes its recorded duration times ``compute_scale`` on its track (its
  recorded thread or stream: one node at a time on each, tracks in parallel, as recorded), a timer
  the loop holds the thread for only where communication must start after it;
* ``kernels``: a square matrix product of ``num_ops`` FLOPs (2·n³) and a copy of ``tensor_size``
  bytes, on buffers allocated once and bounded by ``max_buffer_bytes`` (a larger node is cut to the
  bound, counted);
* ``aten``: the recorded ATen operator on tensors of the recorded shapes and dtypes
  (:mod:`chakra.replay.aten`), falling back to ``kernels`` where a node has none, counted by reason;
* ``none``: no compute (the ET as a communication benchmark).

Communication, ``torch.distributed`` with the workload's groups, float32 tensors of ``comm_size``
bytes by the format's convention (an all-gather's bytes put in by each rank; a reduce-scatter's and
an all-to-all's the whole buffer, rounded up to the group size; the others the buffer): every
collective type of the format, roots at the group's first rank (the format records none); SEND and
RECV as ``isend``/``irecv`` with the recorded peer and tag. A ``comm_type`` the format does not
define moves the same bytes as an ``all_reduce``, counted in :attr:`Issuer.fallbacks`.

Example:
    issuer = Issuer(program, rank, groups, members, ComputeMode.DURATION)
    times = issuer.run()    # one iteration: what it measured
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chakra.replay.choices import ComputeMode
from chakra.replay.program import IssueProgram, Kind, replayed_group
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    SCATTER,
    CollectiveCommType,
)
from chakra.table import DEFAULT_GROUP_ID, MISSING
from chakra.units import FLOPS_PER_MAC, NS_PER_S

#: The tail of a held duration that is spun rather than slept (a sleep overshoots by tens of µs).
SPIN_NS = 200_000
#: Bytes of a float32, the element type of every replayed buffer.
ELEMENT_BYTES = 4
#: The default bound on the compute buffers of ``kernels`` (per buffer).
DEFAULT_MAX_BUFFER_BYTES = 64 << 20
#: The collective types the format defines.
COMM_TYPE_VALUES = frozenset(CollectiveCommType.values())


@dataclass
class IterationTimes:
    """What one iteration measured on one rank (ns from the iteration's start): its wall time, the
    time its compute took, the time the issuing thread was blocked waiting for communication, the
    nodes issued by kind, and the bytes each kind of communication put in (the input buffers handed
    to torch.distributed)."""

    wall_ns: int = 0
    compute_ns: int = 0
    wait_ns: int = 0
    issued: Counter[str] = field(default_factory=Counter)
    sent_bytes: Counter[str] = field(default_factory=Counter)  # communication type -> bytes put in
    #: (issue step, issued, finished) of every communication node that ran: finished is when the
    #: backend said it completed (a collective's future), else when the replay had waited for it (a
    #: send or receive: gloo gives them no future; an upper bound on its end)
    comm: list[tuple[int, int, int]] = field(default_factory=list)
    #: (issue step, start, end) of every compute node, when recorded
    spans: list[tuple[int, int, int]] = field(default_factory=list)


class Issuer:
    """Runs one rank's program (see the module's docstring); ``progress`` is told the issue step
    being issued or waited for, for the launcher's hang diagnosis; ``device`` is where buffers live
    (``cpu`` for gloo, a ``cuda`` device for NCCL)."""

    def __init__(
        self,
        program: IssueProgram,
        rank: int,
        groups: dict[int, Any],
        group_members: dict[int, tuple[int, ...]],
        compute: ComputeMode,
        *,
        compute_scale: float = 1.0,
        comm: bool = True,
        max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
        progress: Any = None,
        device: str = "cpu",
    ):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.program = program
        self.rank = rank
        self.groups = groups
        self.members = group_members
        self.compute = compute
        self.compute_scale = compute_scale
        self.comm = comm
        self.progress = progress
        self.device = torch.device(device)
        # CUDA work is asynchronous: the host waits for the device where it measures
        self._sync = torch.cuda.synchronize if self.device.type == "cuda" else None
        self.fallbacks: Counter[str] = Counter()
        self.cut_nodes = 0
        self._kinds: list[int] = program.kind.tolist()
        ptr = program.parent_ptr.tolist()
        flat = program.parent_step.tolist()
        self._parents = [flat[ptr[i] : ptr[i + 1]] for i in range(len(program))]
        self._kind_counts = Counter(self._kinds)
        self._durations: list[int] = program.dur_ns.tolist()
        self._tracks: list[int] = program.track.tolist()
        elements = max(1, max_buffer_bytes // ELEMENT_BYTES)
        self.max_side = int((elements) ** 0.5)
        if compute in (ComputeMode.KERNELS, ComputeMode.ATEN):
            self.a = torch.rand(elements, device=self.device)
            self.b = torch.rand(elements, device=self.device)
        self._aten: dict[int, Any] = {}
        if compute is ComputeMode.ATEN:
            self._prepare_aten(max_buffer_bytes)

    # ---- the loop --------------------------------------------------------------------------------
    def run(self, *, record: bool = False) -> IterationTimes:
        """One iteration of the program; with ``record`` every compute node's span is kept too.

        Every node finishes at a time (ns from the iteration's start) its dependents start after.
        With ``duration`` a compute node is a timer, not a wait: it starts when its parents have
        finished and its track is free, and ends its (scaled) duration later, so compute on
        different threads and streams overlaps as recorded while the loop goes on issuing; the loop
        holds the thread only where communication must not start before its parents' end. A
        communication node finishes when the backend completes it; it is waited for only where a
        dependent needs its end. Nodes that do nothing finish with their last parent. The loop
        reads plain lists made once (numpy scalars and slices cost microseconds a node)."""
        times = IterationTimes()
        kinds, parents, tracks = self._kinds, self._parents, self._tracks
        end = [0] * len(kinds)
        free = [0] * max(1, len(self.program.track_names))  # when each track is next free
        pending: dict[int, tuple[Any, int]] = {}  # communication in flight: step -> (work, issued)
        deferred: set[int] = set()  # nodes that do nothing, with a parent still in flight
        completed: dict[int, int] = {}  # step -> when the backend said it completed (absolute ns)
        timers = self.compute is ComputeMode.DURATION
        clock = time.perf_counter_ns
        start_ns = clock()

        def finish(step: int) -> None:
            work, issued = pending.pop(step)
            self._tell(step, waiting=True)
            waited = clock()
            work.wait()
            if self._sync is not None:
                self._sync()
            done = clock()
            times.wait_ns += done - waited
            end[step] = min(completed.pop(step, done), done) - start_ns
            times.comm.append((step, issued, end[step]))

        def resolve(step: int) -> None:
            """Finish ``step`` (waiting for what it needs), without recursion: chains can be long."""
            stack = [step]
            while stack:
                top = stack[-1]
                if top in pending:
                    finish(top)
                    stack.pop()
                elif top in deferred:
                    waiting = [p for p in parents[top] if p in pending or p in deferred]
                    if waiting:
                        stack.extend(waiting)
                        continue
                    deferred.discard(top)
                    end[top] = max((end[p] for p in parents[top]), default=0)
                    stack.pop()
                else:
                    stack.pop()

        for step, kind in enumerate(kinds):
            ready = 0
            unfinished = False
            for parent in parents[step]:
                if parent in pending or parent in deferred:
                    if kind == Kind.NOTHING:
                        unfinished = True
                        continue
                    resolve(parent)
                if end[parent] > ready:
                    ready = end[parent]
            if unfinished:
                deferred.add(step)
                continue
            self._tell(step, waiting=False)
            if kind == Kind.COMPUTE:
                if timers:
                    track = tracks[step]
                    began = max(ready, free[track]) if track >= 0 else ready
                    dur_ns = int(self._durations[step] * self.compute_scale)
                    end[step] = free[track] = began + dur_ns
                    times.compute_ns += dur_ns
                else:
                    began = clock() - start_ns
                    self._compute(step)
                    end[step] = clock() - start_ns
                    times.compute_ns += end[step] - began
                if record:
                    times.spans.append((step, began, end[step]))
            elif kind != Kind.NOTHING and self.comm:
                if timers:
                    hold_until(start_ns + ready)
                issued = clock()
                work = self._communicate(Kind(kind), step, times.sent_bytes)
                if work is None:
                    end[step] = max(ready, issued - start_ns)
                    continue
                pending[step] = (work, issued - start_ns)
                if kind == Kind.COLLECTIVE:
                    self._on_completion(work, step, completed)
            else:
                end[step] = ready
        for step in list(pending):
            finish(step)
        for step in list(deferred):
            resolve(step)
        last = max(end, default=0)
        self._tell(len(kinds), waiting=False)
        hold_until(start_ns + last)
        times.wall_ns = clock() - start_ns
        times.issued.update({Kind(k).name.lower(): n for k, n in self._kind_counts.items()})
        return times

    def _on_completion(self, work: Any, step: int, completed: dict[int, int]) -> None:
        """Note when ``work`` completes, as the backend tells its future (gloo and NCCL collectives)."""
        try:
            future = work.get_future()
        except RuntimeError:  # a backend without futures for this work: the wait's end is used
            return
        future.then(lambda _: completed.__setitem__(step, time.perf_counter_ns()))

    def _tell(self, step: int, *, waiting: bool) -> None:
        if self.progress is not None:
            self.progress(step, waiting)

    # ---- compute ---------------------------------------------------------------------------------
    def _compute(self, step: int) -> None:
        """Run a compute node's work (``kernels``, ``aten``; ``duration`` nodes are timers)."""
        if self.compute is ComputeMode.KERNELS:
            self._kernels(int(self.program.num_ops[step]), int(self.program.tensor_size[step]))
        elif self.compute is ComputeMode.ATEN:
            call = self._aten.get(step)
            if call is not None:
                call()
                if self._sync is not None:
                    self._sync()
            elif step not in self._outer:
                self._kernels(int(self.program.num_ops[step]), int(self.program.tensor_size[step]))

    def _prepare_aten(self, max_tensor_bytes: int) -> None:
        """Each compute node's ATen call (:func:`chakra.replay.aten.prepare_aten`); the others
        fall back to ``kernels``, counted by reason, and ops other ops run inside are skipped."""
        from chakra import io
        from chakra.replay.aten import outer_ops, prepare_aten

        _, nodes = io.read(self.program.path)
        by_id = {node.id: node for node in nodes}
        outer = outer_ops(nodes)
        self._outer: set[int] = set()
        for step, kind in enumerate(self._kinds):
            if kind != Kind.COMPUTE:
                continue
            node = by_id[int(self.program.ids[step])]
            if node.id in outer:
                self._outer.add(step)
                self.fallbacks["aten: not re-run, its inner ops are"] += 1
                continue
            call, reason = prepare_aten(node, max_tensor_bytes, str(self.device))
            if call is None:
                self.fallbacks[f"aten fallback to kernels: {reason}"] += 1
            else:
                self._aten[step] = call
                self.fallbacks["aten: re-run"] += 1

    def _kernels(self, flops: int, size_bytes: int) -> None:
        torch = self.torch
        if flops > 0 and flops != MISSING:
            side = max(1, round((flops / FLOPS_PER_MAC) ** (1 / 3)))
            if side > self.max_side:
                self.cut_nodes += 1
                side = self.max_side
            a = self.a[: side * side].view(side, side)
            b = self.b[: side * side].view(side, side)
            torch.mm(a, b)
        if size_bytes > 0 and size_bytes != MISSING:
            count = min(max(1, size_bytes // (2 * ELEMENT_BYTES)), len(self.a))
            self.b[:count].copy_(self.a[:count])
        if self._sync is not None:
            self._sync()

    # ---- communication ---------------------------------------------------------------------------
    def _group(self, step: int) -> tuple[Any, tuple[int, ...]]:
        gid = replayed_group(int(self.program.group[step]), self.groups)
        if gid == DEFAULT_GROUP_ID:
            return None, tuple(range(self.dist.get_world_size()))
        return self.groups[gid], self.members[gid]

    def _communicate(self, kind: Kind, step: int, sent: Counter[str]) -> Any:
        dist = self.dist
        zeros, empty = self._zeros, self._empty
        size = int(self.program.comm_size[step])
        count = max(1, -(-max(size, 0) // ELEMENT_BYTES)) if size != MISSING else 1
        if kind is Kind.SEND:
            sent["SEND"] += count * ELEMENT_BYTES
            return dist.isend(zeros(count), dst=int(self.program.peer[step]), tag=self._tag(step))
        if kind is Kind.RECV:
            return dist.irecv(empty(count), src=int(self.program.peer[step]), tag=self._tag(step))
        group, members = self._group(step)
        if self.rank not in members:
            return None
        n = len(members)
        root = members[0]
        kind_of = int(self.program.comm_type[step])
        if kind_of != BARRIER:  # a barrier moves no data
            name = CollectiveCommType.Name(kind_of) if kind_of in COMM_TYPE_VALUES else str(kind_of)
            sent[name] += count * ELEMENT_BYTES
        if kind_of == ALL_REDUCE:
            return dist.all_reduce(zeros(count), group=group, async_op=True)
        if kind_of == ALL_GATHER:
            return dist.all_gather_single(empty(count * n), zeros(count), group=group, async_op=True)
        if kind_of in (REDUCE_SCATTER, REDUCE_SCATTER_BLOCK):
            per = -(-count // n)
            return dist.reduce_scatter_single(empty(per), zeros(per * n), group=group, async_op=True)
        if kind_of == ALL_TO_ALL:
            whole = -(-count // n) * n
            return dist.all_to_all_single(empty(whole), zeros(whole), group=group, async_op=True)
        if kind_of == BROADCAST:
            return dist.broadcast(zeros(count), src=root, group=group, async_op=True)
        if kind_of == BARRIER:
            return dist.barrier(group=group, async_op=True)
        if kind_of == REDUCE:
            return dist.reduce(zeros(count), dst=root, group=group, async_op=True)
        if kind_of == GATHER:
            gathered = [empty(count) for _ in members] if self.rank == root else None
            return dist.gather(zeros(count), gather_list=gathered, dst=root, group=group, async_op=True)
        if kind_of == SCATTER:
            pieces = [zeros(count) for _ in members] if self.rank == root else None
            return dist.scatter(empty(count), scatter_list=pieces, src=root, group=group, async_op=True)
        self.fallbacks[f"comm_type {kind_of}: all_reduce of the same bytes"] += 1
        return dist.all_reduce(zeros(count), group=group, async_op=True)

    def _zeros(self, count: int) -> Any:
        return self.torch.zeros(count, device=self.device)

    def _empty(self, count: int) -> Any:
        return self.torch.empty(count, device=self.device)

    def _tag(self, step: int) -> int:
        tag = int(self.program.tag[step])
        return 0 if tag == MISSING else tag


def hold_until(t_ns: int) -> None:
    """Keep this thread busy until ``time.perf_counter_ns()`` reaches ``t_ns``: sleep, then spin
    the last :data:`SPIN_NS` (a sleep alone overshoots by tens of µs)."""
    left_ns = t_ns - time.perf_counter_ns()
    if left_ns > 2 * SPIN_NS:
        time.sleep((left_ns - SPIN_NS) / NS_PER_S)
    while time.perf_counter_ns() < t_ns:
        pass
