"""Congestion-unaware analytical network: the delay of one message, in integer ns.

The model of ASTRA-sim's analytical backend (``reference/astra-sim.md`` §5.3): a message of ``m`` bytes
between two NPUs costs ``trunc(hops · latency + m / B)`` ns, computed in the **lowest dimension in
which the two NPUs' coordinates differ** (other differing dimensions cost nothing). Hops per
dimension: Ring = the shorter way round (links are bidirectional), FullyConnected = 1, Switch = 2
(NPU → switch → NPU). No queuing, no contention: concurrent messages do not slow each other.

``network`` is a :class:`~chakra.sim.config.NetworkConfig`: bandwidth in bytes/ns through
``bandwidth_bytes_per_ns(dim)`` (converted from GB/s with 2^30/1e9, §5.1), latency in ns per link,
coordinates with dimension 0 varying fastest.

Example:
    >>> from chakra.sim.config import NetworkConfig
    >>> ring = NetworkConfig(("Ring",), (8,), bandwidth_gbps=(50.0,), latency_ns=(500.0,))
    >>> message_delay_ns(ring, src=0, dst=3, size_bytes=1 << 20)  # 3 hops · 500 + 2^20 / (50 · 2^30 / 1e9)
    21031
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from chakra.errors import ChakraInputError
from chakra.sim.config import NetworkConfig

#: Topology names of the network YAML (§4.2) and the hop count of a message between two distinct
#: NPUs of one dimension, where it does not depend on their distance.
RING = "Ring"
FULLY_CONNECTED = "FullyConnected"
SWITCH = "Switch"
FULLY_CONNECTED_HOPS = 1  # a direct link to every peer
SWITCH_HOPS = 2  # NPU → switch → NPU: two link latencies (§4.2)


def dimension_hops(network: NetworkConfig, dim: int, a: int, b: int) -> int:
    """Links a message crosses between local coordinates ``a`` and ``b`` of dimension ``dim``.

    0 when ``a == b``; Ring: the shorter way round (``min(|a−b|, n−|a−b|)``); FullyConnected: 1;
    Switch: 2.
    """
    if a == b:
        return 0
    topology = network.topology[dim]
    if topology == RING:
        n = network.npus_count[dim]
        distance = abs(a - b) % n
        return min(distance, n - distance)
    if topology == FULLY_CONNECTED:
        return FULLY_CONNECTED_HOPS
    if topology == SWITCH:
        return SWITCH_HOPS
    raise ChakraInputError(
        f"unknown topology {topology!r} in network dimension {dim}",
        hint=f"use one of {RING}, {FULLY_CONNECTED}, {SWITCH}",
    )


def hop_delay_ns(network: NetworkConfig, dim: int, hops: int, size_bytes: int) -> int:
    """Delay in ns of ``size_bytes`` over ``hops`` links of dimension ``dim``: ``trunc(hops·L + m/B)``.

    Latency ``L`` is ns per link, ``B`` bytes per ns; the sum is truncated once, as ASTRA-sim does
    when it computes the delay of one message (§5.1).
    """
    return int(hops * network.latency_ns[dim] + size_bytes / network.bandwidth_bytes_per_ns(dim))


def message_delay_ns(network: NetworkConfig, src: int, dst: int, size_bytes: int) -> int:
    """Delay in ns of one ``size_bytes`` message from NPU ``src`` to NPU ``dst`` (global ids).

    Uses the lowest dimension in which the coordinates differ; ``src == dst`` costs 0.
    """
    if src == dst:
        return 0
    src_coords = network.coordinates(src)
    dst_coords = network.coordinates(dst)
    for dim, (a, b) in enumerate(zip(src_coords, dst_coords, strict=True)):
        if a != b:
            return hop_delay_ns(network, dim, dimension_hops(network, dim, a, b), size_bytes)
    return 0  # distinct ids with equal coordinates cannot happen for ids inside the network


def message_delays_ns(network: NetworkConfig, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray) -> np.ndarray:
    """:func:`message_delay_ns` of many messages at once (int64 arrays of equal length), each
    distinct (dimension, coordinates, size) computed once.

    >>> from chakra.sim.config import NetworkConfig
    >>> net = NetworkConfig(("Ring", "Switch"), (4, 2), (50.0, 25.0), (500.0, 700.0))
    >>> src, dst, size = np.array([0, 1, 3, 2]), np.array([1, 5, 0, 2]), np.array([64, 64, 8, 8])
    >>> message_delays_ns(net, src, dst, size).tolist() == [
    ...     message_delay_ns(net, s, d, n) for s, d, n in zip(src.tolist(), dst.tolist(), size.tolist())]
    True
    """
    counts = np.asarray(network.npus_count, dtype=np.int64)
    strides = np.concatenate([[1], np.cumprod(counts)[:-1]])
    src_coords = (np.asarray(src, dtype=np.int64)[:, None] // strides) % counts
    dst_coords = (np.asarray(dst, dtype=np.int64)[:, None] // strides) % counts
    differ = src_coords != dst_coords
    dim = np.argmax(differ, axis=1)
    rows = np.arange(len(dim))
    keys = np.stack([dim, src_coords[rows, dim], dst_coords[rows, dim], np.asarray(size_bytes, dtype=np.int64)], axis=1)
    distinct, back = np.unique(keys, axis=0, return_inverse=True)
    delays = np.array(
        [hop_delay_ns(network, d, dimension_hops(network, d, a, b), n) for d, a, b, n in distinct.tolist()],
        dtype=np.int64,
    )
    return np.where(differ.any(axis=1), delays[back.reshape(-1)] if len(distinct) else 0, 0).astype(np.int64)


#: ``schedule(t_ns, callback)``: run ``callback(t_ns)`` at ``t_ns`` (the engine's event queue).
Schedule = Callable[[int, Callable[[int], None]], None]


class MessageNetwork(Protocol):
    """What carries one message at a time through the engine's queue: the congestion-unaware
    :class:`UnqueuedNetwork` or the congestion-aware :class:`~chakra.sim.links.LinkNetwork`."""

    def send(self, now_ns: int, src: int, dst: int, size_bytes: int, delivered: Callable[[int], None]) -> None:
        """Send ``size_bytes`` from NPU ``src`` to NPU ``dst`` at ``now_ns``; ``delivered(t_ns)`` on arrival."""


class UnqueuedNetwork:
    """The congestion-unaware network one message at a time: each arrives :func:`message_delay_ns`
    after it is sent, whatever else is in flight (as ASTRA-sim's unaware backend sends a message).

    >>> from chakra.sim.config import NetworkConfig
    >>> events = []
    >>> ring = UnqueuedNetwork(NetworkConfig(("Ring",), (8,), (50.0,), (500.0,)), lambda t, call: events.append(t))
    >>> ring.send(100, 0, 3, 1 << 20, print); events
    [21131]
    """

    def __init__(self, network: NetworkConfig, schedule: Schedule):
        self.network, self.schedule = network, schedule

    def send(self, now_ns: int, src: int, dst: int, size_bytes: int, delivered: Callable[[int], None]) -> None:
        self.schedule(now_ns + message_delay_ns(self.network, src, dst, size_bytes), delivered)
