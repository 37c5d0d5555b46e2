"""One what-if of a simulated system, as one value: :class:`Scenario` names the system, network and
remote-memory files and what is changed on top of them (system and network keys, bandwidth and
latency scales, compute scale, ASTRA-sim compatibility, the network model). ``chakra simulate``
runs one scenario; ``chakra sweep`` varies one over its points (:meth:`chakra.sim.sweep.SweepPoint.on`). Both load the
configurations through :meth:`Scenario.load`, so an override means the same in each.

Example:
    scenario = Scenario("sys.json", "ring.yml", bandwidth_scale=2.0)
    system, network, memory = scenario.load()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra.errors import PathLike
from chakra.sim import config
from chakra.sim.choices import NetworkModel
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.config.system import ASTRA_COMPAT_KEY


@dataclass(frozen=True)
class Scenario:
    """The configuration files of a simulated system and what is changed on top of them."""

    system_path: PathLike
    network_path: PathLike
    remote_memory_path: PathLike | None = None
    system_overrides: Mapping[str, Any] = field(default_factory=dict)
    network_overrides: Mapping[str, Any] = field(default_factory=dict)
    bandwidth_scale: float = 1.0
    latency_scale: float = 1.0
    compute_scale: float = 1.0
    #: ASTRA-sim's own quirks reproduced (the system key :data:`ASTRA_COMPAT_KEY`).
    astra_compat: bool = False
    network_model: NetworkModel = NetworkModel.CONGESTION_UNAWARE

    @classmethod
    def from_texts(
        cls, system_path: PathLike, network_path: PathLike, system_sets: Iterable[str] = (),
        network_sets: Iterable[str] = (), **settings: Any,
    ) -> Scenario:  # fmt: skip
        """A scenario whose overrides are ``KEY=VALUE`` texts (``--set``, ``--network-set``)."""
        return cls(system_path, network_path, system_overrides=dict(config.parse_override(t) for t in system_sets),
                   network_overrides=dict(config.parse_override(t) for t in network_sets), **settings)  # fmt: skip

    def load(self) -> tuple[SystemConfig, NetworkConfig, RemoteMemoryConfig]:
        """The system, network (scaled) and remote-memory configurations, read and checked."""
        overrides = dict(self.system_overrides)
        if self.astra_compat:
            overrides[ASTRA_COMPAT_KEY] = 1
        system = config.load_system(Path(self.system_path), overrides)
        network = config.load_network(Path(self.network_path), dict(self.network_overrides))
        network = config.scale_network(network, bandwidth_scale=self.bandwidth_scale, latency_scale=self.latency_scale)
        return system, network, config.load_remote_memory(self.remote_memory_path)
