"""How NPUs run a collective's chunk streams through their dimension queues, as ASTRA-sim schedules them.

ASTRA-sim (``Sys::generate_collective``, ``Sys::proceed_to_next_vnet_baseline``, ``Sys::SchedulerUnit``)
splits a collective into ``K`` chunk streams, each a list of phases, and runs a phase on its
network dimension's queue of every NPU. The analytical frontends build one queue per dimension
(``--num-queues-per-dim`` 1), so a localBWAware all-reduce's reduce-scatter and all-gather phases of
a dimension share one. Each queue runs at most ``active-chunks-per-dimension`` streams at once,
first come first served (one collective's streams share a priority, so ``Sys::insert_stream`` puts a
newcomer behind them): a stream that finishes a phase joins the back of its next phase's queue, and
the queue it left starts its next waiting stream at once. A phase of a stream is run by a *line* of
NPUs together (those that differ only in that dimension's coordinate, or every member of a flat or
subgroup phase); each starts its part when its own queue lets it, and its end comes from the
phase's dataflow (:mod:`chakra.sim.dataflow`) once every member of the line has started.

Measured against ASTRA-sim's binary: every multi-dimensional case of the comparison grid (792
with the members starting together) and every late-member case end where this schedule says.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chakra.errors import ChakraInputError

#: A phase's dataflow: (stream, each line member's start by position) -> each member's end, ns.
PhaseEnds = Callable[[int, Sequence[int]], list[int]]


@dataclass(frozen=True)
class LinePhase:
    """One phase of every stream: the queue it waits in on each NPU, and the lines that run it.

    NPUs are indexes ``0 … N−1`` of the collective's NPUs; ``lines[j]`` lists line ``j``'s NPUs by
    position, ``line_of[i]``/``position_of[i]`` place NPU ``i``.
    """

    queue: int
    lines: Sequence[Sequence[int]]
    line_of: Sequence[int]
    position_of: Sequence[int]
    ends: PhaseEnds
    #: stream -> by position, how long before its end a member's last event was registered (ns). Two
    #: streams ending together on an NPU join their next queue in that order: ASTRA-sim runs an NPU's
    #: events of one tick in the order they were registered (``Sys::try_register_event``).
    lags: Callable[[int], Sequence[int]] | None = None


def schedule_ns(starts_ns: Sequence[int], phases: Sequence[LinePhase], streams: int, active: int) -> list[int]:
    """Each NPU's end, ns, of ``streams`` chunk streams through ``phases``, NPU ``i`` starting at
    ``starts_ns[i]``, ``active`` streams at a time per queue.

    Raises :class:`ChakraInputError` when the queues deadlock (a line waits for a member whose queue
    is full of streams that wait for it), as ASTRA-sim's do on some localBWAware plans.

    >>> single = [LinePhase(0, [[0]], [0], [0], lambda s, inits: [inits[0] + 100])]
    >>> schedule_ns([5], single, streams=3, active=2)  # two at once, then the third
    [205]
    """
    npus = len(starts_ns)
    waiting: dict[tuple[int, int], deque[tuple[int, int]]] = {}
    running: dict[tuple[int, int], int] = {}
    for phase in phases:
        for i in range(npus):
            waiting.setdefault((i, phase.queue), deque())
            running.setdefault((i, phase.queue), 0)
    started: dict[tuple[int, int, int], list[int | None]] = {}  # (stream, phase, line) -> starts by position
    ends_heap: list[tuple[int, int, int, int, int, int]] = []  # (end ns, registered ns, order, npu, stream, phase)
    order = 0
    finish = [0] * npus
    left = [streams] * npus

    def begin(i: int, stream: int, k: int, now_ns: int) -> None:
        nonlocal order
        phase = phases[k]
        line = phase.line_of[i]
        key = (stream, k, line)
        inits = started.setdefault(key, [None] * len(phase.lines[line]))
        inits[phase.position_of[i]] = now_ns
        if any(t is None for t in inits):
            return
        del started[key]
        ends = phase.ends(stream, [t for t in inits if t is not None])
        lags = phase.lags(stream) if phase.lags is not None else [0] * len(ends)
        for position, member in enumerate(phase.lines[line]):
            order += 1
            end_ns = ends[position]
            heapq.heappush(ends_heap, (end_ns, end_ns - lags[position], order, member, stream, k))

    def pump(i: int, queue: int, now_ns: int) -> None:
        slot = (i, queue)
        lined_up = waiting[slot]
        while lined_up and running[slot] < active:
            stream, k = lined_up.popleft()
            running[slot] += 1
            begin(i, stream, k, now_ns)

    for i in range(npus):
        first = phases[0].queue
        waiting[(i, first)].extend((stream, 0) for stream in range(streams))
        pump(i, first, starts_ns[i])
    while ends_heap:
        now_ns, _, _, i, stream, k = heapq.heappop(ends_heap)
        queue = phases[k].queue
        running[(i, queue)] -= 1
        if k + 1 < len(phases):
            waiting[(i, phases[k + 1].queue)].append((stream, k + 1))
        else:
            left[i] -= 1
            finish[i] = max(finish[i], now_ns)
        pump(i, queue, now_ns)
        if k + 1 < len(phases):
            pump(i, phases[k + 1].queue, now_ns)
    if any(left):
        raise ChakraInputError(
            "the collective's chunk streams deadlock in the dimension queues (a phase waits for NPUs whose "
            "queue is full of streams waiting for it); ASTRA-sim hangs on this configuration too",
            hint="raise active-chunks-per-dimension, use collective-optimization baseline, or another algorithm",
        )
    return finish


def queue_schedule_ns(phases: Sequence[tuple[int, int]], streams: int, active: int) -> int:
    """End in ns of ``streams`` streams whose phases take the same time on every NPU: ``phases`` lists
    each phase's (queue, ns); the NPUs run in step, so one stands for all.

    >>> queue_schedule_ns([(0, 100), (1, 50), (0, 80)], streams=2, active=1)  # RS d0, AR d1, AG d0
    360
    """

    def taking(ns: int) -> PhaseEnds:
        return lambda stream, inits: [inits[0] + ns]

    single = [LinePhase(queue, [[0]], [0], [0], taking(ns)) for queue, ns in phases]
    return schedule_ns([0], single, streams, active)[0]
