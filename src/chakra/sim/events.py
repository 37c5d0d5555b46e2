"""The event queue of the simulator (node completions in time order, each event one int), and
ASTRA-sim's system events with their per-NPU buckets (:class:`SystemEvents`, for the replays and the
message-level models).

An event -- node ``pos`` of ``rank`` completes at ``t_ns`` -- is the int
``t_ns << time_shift | seq << seq_shift | rank << pos_bits | pos``, so the heap compares ints, not
tuples: by time, then by a sequence number (events at the same time run in the order they were
pushed, as ASTRA-sim's event queue does, ``reference/astra-sim.md`` §5.9), and the rank and
position come back out with shifts and masks. The engine's event loop pushes and pops compute
events with these fields inline (the hot path); everything else goes through :meth:`EventQueue.push`.

Example:
    >>> queue = EventQueue(max_rank=3, max_positions=100, max_events=10)
    >>> queue.push(50, rank=2, pos=7); queue.push(20, rank=1, pos=9); queue.push(50, rank=0, pos=1)
    >>> [queue.pop() for _ in range(3)]
    [(20, 1, 9), (50, 2, 7), (50, 0, 1)]
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from functools import partial

#: A callback of the system events: called with the time in ns.
Call = Callable[[int], None]


class EventQueue:
    """A min-heap of int-encoded completion events (see the module docstring for the layout)."""

    __slots__ = ("heap", "next_seq", "pos_bits", "pos_mask", "rank_mask", "seq_shift", "time_shift")

    def __init__(self, *, max_rank: int, max_positions: int, max_events: int):
        """Room for ranks up to ``max_rank``, positions below ``max_positions`` and ``max_events`` pushes."""
        self.pos_bits = max(max_positions, 1).bit_length()
        rank_bits = max_rank.bit_length()
        self.pos_mask = (1 << self.pos_bits) - 1
        self.rank_mask = (1 << rank_bits) - 1
        self.seq_shift = self.pos_bits + rank_bits
        self.time_shift = self.seq_shift + max_events.bit_length()
        self.heap: list[int] = []
        self.next_seq = itertools.count().__next__

    def rank_key(self, rank: int) -> int:
        """The rank's part of its events' ints (``rank << pos_bits``)."""
        return rank << self.pos_bits

    def push(self, t_ns: int, rank: int, pos: int) -> None:
        """Node ``pos`` of ``rank`` completes at ``t_ns``."""
        key = (t_ns << self.time_shift) | (self.next_seq() << self.seq_shift) | (rank << self.pos_bits) | pos
        heapq.heappush(self.heap, key)

    def pop(self) -> tuple[int, int, int]:
        """The next event as ``(t_ns, rank, pos)``."""
        key = heapq.heappop(self.heap)
        return key >> self.time_shift, (key >> self.pos_bits) & self.rank_mask, key & self.pos_mask

    def __len__(self) -> int:
        return len(self.heap)


class SystemEvents:
    """ASTRA-sim's global event queue with per-NPU buckets of system events (``Sys::register_event``):
    a call registered for an NPU and a time joins that NPU's bucket of the time, which one global
    entry runs, in registration order (calls registered while it runs join it); messages' arrivals
    are global entries of their own. The replays of :mod:`chakra.sim.algorithms` run on one; the
    message-level models on :class:`ScheduledEvents`, over the engine's queue."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, int, Call]] = []
        self.entries = 0
        self.buckets: dict[tuple[int, int], list[Call]] = {}  # (npu, time) -> calls

    def entry(self, time_ns: int, call: Call) -> None:
        """A global entry: a message arrival, a late receive."""
        self.entries += 1
        heapq.heappush(self.queue, (time_ns, self.entries, call))

    def at(self, npu: int, time_ns: int, call: Call) -> None:
        """A system event of ``npu`` (``Sys::register_event``): joins that NPU's bucket of ``time_ns``."""
        bucket = self.buckets.get((npu, time_ns))
        if bucket is None:
            bucket = self.buckets[(npu, time_ns)] = []
            self.entry(time_ns, partial(self._run_bucket, npu))
        bucket.append(call)

    def later(self, npu: int, delay_ns: int, call: Call, now: int) -> None:
        """At ``now``, the system event ``call`` of ``npu`` ``delay_ns`` later (a bundle's reduction
        after its bus crossing)."""
        self.at(npu, now + delay_ns, call)

    def _run_bucket(self, npu: int, now: int) -> None:
        for call in self.buckets[(npu, now)]:  # grows while it runs: zero-delay events join it
            call(now)
        del self.buckets[(npu, now)]

    def run(self) -> None:
        while self.queue:
            now, _, call = heapq.heappop(self.queue)
            call(now)


class ScheduledEvents(SystemEvents):
    """:class:`SystemEvents` whose global entries go to another queue: ``schedule(t_ns, call)`` (the
    engine's, so the buckets' events interleave with everything else in time and push order)."""

    def __init__(self, schedule: Callable[[int, Call], None]):
        super().__init__()
        self.entry = schedule  # type: ignore[method-assign,assignment]  # the queue itself: no call between
