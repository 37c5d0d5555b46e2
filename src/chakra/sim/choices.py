"""The simulator's choices the ``chakra`` command offers at start-up, in a module that imports
nothing heavy (the CLI lists them without loading the simulator)."""

from __future__ import annotations

from enum import Enum


class NetworkModel(str, Enum):
    """How messages cross the network (:mod:`chakra.sim.network`, :mod:`chakra.sim.links`).

    ``congestion-unaware``: every message uses its links at full bandwidth whatever else is on them
    (ASTRA-sim's analytical congestion-unaware backend). ``congestion-aware``: messages are routed
    over the topology's links, each serving one message at a time in arrival order (ASTRA-sim's
    analytical congestion-aware backend)."""

    CONGESTION_UNAWARE = "congestion-unaware"
    CONGESTION_AWARE = "congestion-aware"
