"""Congestion-aware network: messages routed over the topology's links, one at a time per link.

The model of ASTRA-sim's analytical congestion-aware backend (``astra-network-analytical``,
``congestion_aware/``), which takes one-dimensional networks; multi-dimensional ones are this
package's extension of it (each dimension's lines built as that dimension's topology, a message
crossing the dimensions whose coordinates differ in turn, the lowest first):

* **Links** are one-way, each with its own first-in-first-out queue: a Ring has a link each way
  between neighbours, a FullyConnected network one per ordered pair of NPUs, a Switch an up-link and
  a down-link per NPU to the switch, a device of its own (ids after the NPUs', one per line of a
  Switch dimension). Every link has its dimension's bandwidth (GB/s read as 2^30 bytes per 10^9 ns)
  and latency (ns).
* **Routes**: Ring the shorter way round, clockwise (rising ids) on a tie; Switch NPU -> switch ->
  NPU; FullyConnected the direct link.
* **A message is one chunk**, sent store-and-forward: on each link it starts when the link is free
  (in arrival order), holds the link for ``trunc(m / B)`` ns and reaches the next device
  ``trunc(L + m / B)`` ns after it started, where it is offered to the next link at once. An
  uncontended message of ``h`` hops arrives after ``h · trunc(L + m / B)``.
* **Order at one instant**: the engine's events run in the order they were scheduled. A message
  offered to a link at the instant it is released starts at that instant, as in ASTRA-sim (where
  the hop's arrival is scheduled before the link's release, so the message queues and the release
  starts it). A link schedules its release only when a message waits for it: a free link is one whose
  ``free_at_ns`` has passed (a quarter fewer events on a Llama step; the same cycles).

The model schedules its events through the engine (``schedule(t_ns, callback)``), so they interleave
with the ranks' in time and push order.

Example:
    >>> from chakra.sim.config import NetworkConfig
    >>> events = []
    >>> ring = LinkNetwork(NetworkConfig(("Ring",), (8,), bandwidth_gbps=(50.0,), latency_ns=(500.0,)),
    ...                    lambda t, callback: events.append((t, callback)))
    >>> ring.route(0, 3), ring.route(0, 5), ring.route(0, 4)
    ([0, 1, 2, 3], [0, 7, 6, 5], [0, 1, 2, 3, 4])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise

from chakra.errors import ChakraInputError
from chakra.sim.config import NetworkConfig
from chakra.sim.network import FULLY_CONNECTED, RING, SWITCH

#: ``schedule(t_ns, callback)``: run ``callback(t_ns)`` at ``t_ns`` (the engine's event queue).
Schedule = Callable[[int, Callable[[int], None]], None]


@dataclass(slots=True)
class _Message:
    """A message on its way: the links of its route (device pairs and links, in order), the one it
    is at, and since when it waits for that link (ns)."""

    size_bytes: int
    hops: tuple[tuple[tuple[int, int], Link], ...]
    delivered: Callable[[int], None]
    at: int = 0
    waiting_since_ns: int = 0


@dataclass
class Link:
    """One one-way link: its delays for a message, whether it carries one now, who waits."""

    bytes_per_ns: float
    latency_ns: float
    free_at_ns: int = 0  # when the message on it now has been put on it
    waiting: deque[_Message] = field(default_factory=deque)
    carried_bytes: int = 0
    busy_ns: int = 0  # time it carried a message (its serializations)
    messages: int = 0
    queued_ns: int = 0  # time messages waited for it, added up

    def serialization_ns(self, size_bytes: int) -> int:
        """How long a message holds the link (ns, truncated as ASTRA-sim does)."""
        return int(size_bytes / self.bytes_per_ns)

    def hop_ns(self, size_bytes: int) -> int:
        """When a message that starts now reaches the link's far end (ns, one truncation of the sum)."""
        return int(self.latency_ns + size_bytes / self.bytes_per_ns)


class LinkNetwork:
    """The links of a network and the messages on them (module docstring)."""

    def __init__(self, network: NetworkConfig, schedule: Schedule, *, keep_hops: bool = False):
        self.network = network
        self.schedule = schedule
        self.npus = network.num_npus
        self.lines: dict[tuple[int, tuple[int, ...]], int] = {}  # (dim, other coordinates) -> switch device
        self.links: dict[tuple[int, int], Link] = {}
        for dim in range(network.dims):
            bandwidth, latency = network.bandwidth_bytes_per_ns(dim), network.latency_ns[dim]
            for line in self._lines(dim):
                for pair in self._pairs(dim, line):
                    self.links[pair] = Link(bandwidth, latency)
        self._routes: dict[tuple[int, int], tuple[tuple[tuple[int, int], Link], ...]] = {}
        #: with ``keep_hops``, every hop: (link, waiting since ns, start ns, released ns, bytes)
        self.hops: list[tuple[tuple[int, int], int, int, int, int]] | None = [] if keep_hops else None

    def _lines(self, dim: int) -> list[list[int]]:
        """The NPUs of each line of dimension ``dim`` (the same other coordinates), by coordinate."""
        lines: dict[tuple[int, ...], list[int]] = {}
        for npu in range(self.npus):
            coords = self.network.coordinates(npu)
            lines.setdefault(coords[:dim] + coords[dim + 1 :], []).append(npu)
        return list(lines.values())

    def _switch(self, dim: int, npu: int) -> int:
        """The device id of the switch of ``npu``'s line in dimension ``dim`` (after the NPUs')."""
        coords = self.network.coordinates(npu)
        key = (dim, coords[:dim] + coords[dim + 1 :])
        if key not in self.lines:
            self.lines[key] = self.npus + len(self.lines)
        return self.lines[key]

    def _pairs(self, dim: int, line: list[int]) -> list[tuple[int, int]]:
        n, topology = len(line), self.network.topology[dim]
        if n == 1:
            return []
        if topology == RING:
            return [(line[i], line[(i + 1) % n]) for i in range(n)] + [(line[(i + 1) % n], line[i]) for i in range(n)]
        if topology == SWITCH:
            switch = self._switch(dim, line[0])
            return [(npu, switch) for npu in line] + [(switch, npu) for npu in line]
        if topology == FULLY_CONNECTED:
            return [(a, b) for a in line for b in line if a != b]
        raise ChakraInputError(
            f"the congestion-aware network model cannot route a {topology!r} network dimension",
            path=self.network.path,
            hint=f"use one of {RING}, {SWITCH}, {FULLY_CONNECTED}",
        )

    def route(self, src: int, dst: int) -> list[int]:
        """The devices a message from NPU ``src`` to NPU ``dst`` passes, both ends included: through
        each dimension whose coordinate differs in turn, the lowest first (within a dimension as its
        topology routes: a Ring the shorter way round, clockwise on a tie; a Switch through the line's
        switch; FullyConnected directly)."""
        path = [src]
        current = list(self.network.coordinates(src))
        target = self.network.coordinates(dst)
        for dim, (a, b) in enumerate(zip(current, target, strict=True)):
            if a == b:
                continue
            n, topology = self.network.npus_count[dim], self.network.topology[dim]

            def npu_at(coordinate: int, dim: int = dim) -> int:
                current[dim] = coordinate
                return self._npu(current)

            if topology == SWITCH:
                path.append(self._switch(dim, path[-1]))
                path.append(npu_at(b))
            elif topology == FULLY_CONNECTED:
                path.append(npu_at(b))
            else:
                clockwise = (b - a) % n
                step, hops = (1, clockwise) if n - clockwise >= clockwise else (-1, n - clockwise)
                path.extend(npu_at((a + step * k) % n) for k in range(1, hops + 1))
        return path

    def _npu(self, coords: list[int]) -> int:
        npu, scale = 0, 1
        for coordinate, count in zip(coords, self.network.npus_count, strict=True):
            npu += coordinate * scale
            scale *= count
        return npu

    def send(self, now_ns: int, src: int, dst: int, size_bytes: int, delivered: Callable[[int], None]) -> None:
        """Send ``size_bytes`` from NPU ``src`` to NPU ``dst`` at ``now_ns``; ``delivered(t_ns)`` runs
        when it has arrived. A message to itself arrives at once."""
        hops = self._routes.get((src, dst))
        if hops is None:
            hops = tuple((pair, self.links[pair]) for pair in pairwise(self.route(src, dst)))
            self._routes[src, dst] = hops
        if not hops:
            delivered(now_ns)
            return
        self._offer(now_ns, _Message(size_bytes, hops, delivered))

    def _offer(self, now_ns: int, message: _Message) -> None:
        link = message.hops[message.at][1]
        message.waiting_since_ns = now_ns
        if now_ns < link.free_at_ns or link.waiting:
            if not link.waiting:
                self.schedule(link.free_at_ns, partial(self._released, link))
            link.waiting.append(message)
        else:
            self._transmit(now_ns, link, message)

    def _transmit(self, now_ns: int, link: Link, message: _Message) -> None:
        size = message.size_bytes
        held_ns = int(size / link.bytes_per_ns)  # Link.serialization_ns and hop_ns inline: the hot path
        link.carried_bytes += size
        link.busy_ns += held_ns
        link.messages += 1
        if self.hops is not None:
            self.hops.append((message.hops[message.at][0], message.waiting_since_ns, now_ns, now_ns + held_ns, size))
        self.schedule(now_ns + int(link.latency_ns + size / link.bytes_per_ns), partial(self._arrived, message))
        link.free_at_ns = now_ns + held_ns

    def _arrived(self, message: _Message, now_ns: int) -> None:
        message.at += 1
        if message.at == len(message.hops):
            message.delivered(now_ns)
        else:
            self._offer(now_ns, message)

    def _released(self, link: Link, now_ns: int) -> None:
        message = link.waiting.popleft()
        link.queued_ns += now_ns - message.waiting_since_ns
        self._transmit(now_ns, link, message)
        if link.waiting:
            self.schedule(link.free_at_ns, partial(self._released, link))

    def device_name(self, device: int) -> str:
        """``NPU 3``, or ``switch`` (a one-dimensional Switch network's), or ``switch 2`` (the third
        line switch of a multi-dimensional one)."""
        if device < self.npus:
            return f"NPU {device}"
        return "switch" if len(self.lines) == 1 else f"switch {device - self.npus}"

    def link_name(self, pair: tuple[int, int]) -> str:
        return f"{self.device_name(pair[0])} -> {self.device_name(pair[1])}"

    def named_hops(self) -> list[tuple[str, int, int, int, int]]:
        """The hops kept (``keep_hops``), each with its link's name."""
        return [(self.link_name(pair), since, start, end, size) for pair, since, start, end, size in self.hops or []]

    def stats(self) -> list[LinkStats]:
        """What every link that carried a message did, busiest first."""
        used = [
            LinkStats(
                self.device_name(a),
                self.device_name(b),
                link.carried_bytes,
                link.busy_ns,
                link.messages,
                link.queued_ns,
            )
            for (a, b), link in self.links.items()
            if link.messages
        ]
        return sorted(used, key=lambda stats: (-stats.busy_ns, stats.source, stats.target))


@dataclass(frozen=True)
class LinkStats:
    """One link's work over a simulation: bytes, the time it carried them (ns), messages, and the
    time messages waited for it (ns, added up over the messages)."""

    source: str
    target: str
    bytes: int
    busy_ns: int
    messages: int
    queued_ns: int
