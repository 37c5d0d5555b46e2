"""Congestion-aware network: messages routed over the topology's links, one at a time per link.

The model of ASTRA-sim's analytical congestion-aware backend (``astra-network-analytical``,
``congestion_aware/``), for one-dimensional networks as that backend takes them:

* **Links** are one-way, each with its own first-in-first-out queue: a Ring has a link each way
  between neighbours, a FullyConnected network one per ordered pair of NPUs, a Switch an up-link and
  a down-link per NPU to the switch, a device of its own (id ``npus``). Every link has the
  dimension's bandwidth (GB/s read as 2^30 bytes per 10^9 ns) and latency (ns).
* **Routes**: Ring the shorter way round, clockwise (rising ids) on a tie; Switch NPU -> switch ->
  NPU; FullyConnected the direct link.
* **A message is one chunk**, sent store-and-forward: on each link it starts when the link is free
  (in arrival order), holds the link for ``trunc(m / B)`` ns and reaches the next device
  ``trunc(L + m / B)`` ns after it started, where it is offered to the next link at once. An
  uncontended message of ``h`` hops arrives after ``h · trunc(L + m / B)``.
* **Order at one instant**: the engine's events run in the order they were scheduled; a hop
  schedules its arrival before its link's release, as ASTRA-sim does, so at a tie the arriving
  message is queued first and the release starts it.

The model schedules its events through the engine (``schedule(t_ns, callback)``), so they interleave
with the ranks' in time and push order. Multi-dimensional networks are refused: ASTRA-sim's
congestion-aware backend has none to compare with (yet: issue 31).

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

from chakra.errors import ChakraInputError
from chakra.sim.config import NetworkConfig
from chakra.sim.network import FULLY_CONNECTED, RING, SWITCH

#: ``schedule(t_ns, callback)``: run ``callback(t_ns)`` at ``t_ns`` (the engine's event queue).
Schedule = Callable[[int, Callable[[int], None]], None]


@dataclass
class _Message:
    """A message on its way: the devices still ahead of it (its current one first), and since when
    it waits for the link ahead (ns)."""

    size_bytes: int
    route: list[int]
    delivered: Callable[[int], None]
    waiting_since_ns: int = 0


@dataclass
class Link:
    """One one-way link: its delays for a message, whether it carries one now, who waits."""

    bytes_per_ns: float
    latency_ns: float
    busy: bool = False
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
    """The links of a one-dimensional network and the messages on them (module docstring)."""

    def __init__(self, network: NetworkConfig, schedule: Schedule, *, keep_hops: bool = False):
        if network.dims != 1:
            raise ChakraInputError(
                f"the congestion-aware network model takes one-dimensional networks; this one has {network.dims}",
                path=network.path,
                hint="use --network-model congestion-unaware for multi-dimensional networks",
            )
        self.topology = network.topology[0]
        self.npus = network.npus_count[0]
        self.schedule = schedule
        self.switch = self.npus  # the switch's device id, after the NPUs'
        bandwidth, latency = network.bandwidth_bytes_per_ns(0), network.latency_ns[0]
        self.links = {pair: Link(bandwidth, latency) for pair in self._pairs()}
        #: with ``keep_hops``, every hop: (link, waiting since ns, start ns, released ns, bytes)
        self.hops: list[tuple[tuple[int, int], int, int, int, int]] | None = [] if keep_hops else None

    def _pairs(self) -> list[tuple[int, int]]:
        n = self.npus
        if self.topology == RING:
            return [(i, (i + 1) % n) for i in range(n)] + [((i + 1) % n, i) for i in range(n)]
        if self.topology == SWITCH:
            return [(i, self.switch) for i in range(n)] + [(self.switch, i) for i in range(n)]
        if self.topology == FULLY_CONNECTED:
            return [(a, b) for a in range(n) for b in range(n) if a != b]
        raise ChakraInputError(
            f"the congestion-aware network model cannot route a {self.topology!r} network",
            hint=f"use one of {RING}, {SWITCH}, {FULLY_CONNECTED}",
        )

    def route(self, src: int, dst: int) -> list[int]:
        """The devices a message from NPU ``src`` to NPU ``dst`` passes, both ends included."""
        if self.topology == SWITCH:
            return [src, self.switch, dst]
        if self.topology == FULLY_CONNECTED or src == dst:
            return [src, dst] if src != dst else [src]
        n = self.npus
        clockwise = (dst - src) % n
        step = -1 if n - clockwise < clockwise else 1
        return [(src + step * k) % n for k in range((clockwise if step == 1 else n - clockwise) + 1)]

    def send(self, now_ns: int, src: int, dst: int, size_bytes: int, delivered: Callable[[int], None]) -> None:
        """Send ``size_bytes`` from NPU ``src`` to NPU ``dst`` at ``now_ns``; ``delivered(t_ns)`` runs
        when it has arrived. A message to itself arrives at once."""
        message = _Message(size_bytes, self.route(src, dst), delivered)
        if len(message.route) == 1:
            delivered(now_ns)
            return
        self._offer(now_ns, message)

    def _offer(self, now_ns: int, message: _Message) -> None:
        pair = (message.route[0], message.route[1])
        link = self.links[pair]
        message.waiting_since_ns = now_ns
        if link.busy:
            link.waiting.append(message)
        else:
            self._transmit(now_ns, link, message)

    def _transmit(self, now_ns: int, link: Link, message: _Message) -> None:
        link.busy = True
        size = message.size_bytes
        held_ns = link.serialization_ns(size)
        link.carried_bytes += size
        link.busy_ns += held_ns
        link.messages += 1
        if self.hops is not None:
            self.hops.append(
                ((message.route[0], message.route[1]), message.waiting_since_ns, now_ns, now_ns + held_ns, size)
            )
        self.schedule(now_ns + link.hop_ns(size), lambda t_ns: self._arrived(t_ns, message))
        self.schedule(now_ns + held_ns, lambda t_ns: self._released(t_ns, link))

    def _arrived(self, now_ns: int, message: _Message) -> None:
        message.route.pop(0)
        if len(message.route) == 1:
            message.delivered(now_ns)
        else:
            self._offer(now_ns, message)

    def _released(self, now_ns: int, link: Link) -> None:
        link.busy = False
        if link.waiting:
            message = link.waiting.popleft()
            link.queued_ns += now_ns - message.waiting_since_ns
            self._transmit(now_ns, link, message)

    def device_name(self, device: int) -> str:
        """``NPU 3``, or ``switch`` for a Switch network's switch."""
        return "switch" if self.topology == SWITCH and device == self.switch else f"NPU {device}"

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
