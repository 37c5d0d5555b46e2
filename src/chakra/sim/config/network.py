"""ASTRA-sim's analytical network YAML file (``reference/astra-sim.md`` §4.2): read, typed, checked, scaled.

Per dimension: topology, NPU count, link bandwidth in GB/s (converted GiB-based, §5.1) and latency in ns.

Example:
    network = load_network("examples/astra/ring2.yml")
    network.num_npus, scale_network(network, bandwidth_scale=2).bandwidth_gbps
    # (2, (100.0,))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import msgspec

from chakra.errors import ChakraInputError, PathLike
from chakra.sim.config.overrides import check_override_keys
from chakra.sim.config.reading import ConfigSource, Count, NonNegative, Positive, read_yaml_mapping
from chakra.units import BYTES_PER_GIB, NS_PER_S

WHAT = "network configuration"


#: Network ``topology`` names as ASTRA-sim writes them (§4.2).
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
#: The four network keys, each a per-dimension list (§4.2).
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
#: Keys of the older network format that the analytical backend no longer reads (§4.2).
_OLD_NETWORK_KEYS = ("dimensions-count", "units-count", "links-count")

_NETWORK_EXAMPLE = "topology: [ Ring ], npus_count: [ 8 ], bandwidth: [ 50.0 ], latency: [ 500.0 ]"


class NetworkFile(msgspec.Struct, kw_only=True):
    """The keys of a network file, each one entry per dimension, typed as ASTRA-sim's YAML reader takes them."""

    topology: list[str]
    npus_count: list[Annotated[Count, msgspec.Meta(description="a dimension without NPUs has no links")]]
    bandwidth: list[
        Annotated[Positive, msgspec.Meta(description="a link of 0 GB/s would take forever for every message")]
    ]
    latency: list[Annotated[NonNegative, msgspec.Meta(description="it is a link latency in ns")]]


@dataclass(frozen=True)
class NetworkConfig:
    """An analytical network: per dimension its topology, NPU count, link bandwidth (GB/s) and latency (ns)."""

    topology: tuple[str, ...]
    npus_count: tuple[int, ...]
    bandwidth_gbps: tuple[float, ...]
    latency_ns: tuple[float, ...]
    path: Path | None = None

    def __post_init__(self) -> None:
        lengths = {len(self.topology), len(self.npus_count), len(self.bandwidth_gbps), len(self.latency_ns)}
        if len(lengths) != 1:
            raise ValueError("NetworkConfig needs one topology, npus_count, bandwidth and latency per dimension")

    @property
    def num_npus(self) -> int:
        """Total NPUs: the product of ``npus_count`` (how ASTRA-sim counts them, §1)."""
        return math.prod(self.npus_count)

    @property
    def dims(self) -> int:
        """Number of network dimensions."""
        return len(self.topology)

    def bandwidth_bytes_per_ns(self, dim: int) -> float:
        """Link bandwidth of dimension ``dim`` in bytes/ns, converted as ASTRA-sim does (GiB-based, §5.1)."""
        # same operation order as the C++ (bw * 2^30 / 1e9) so results agree to the last bit
        return self.bandwidth_gbps[dim] * BYTES_PER_GIB / NS_PER_S

    def coordinates(self, npu: int) -> tuple[int, ...]:
        """Per-dimension coordinates of NPU ``npu``; dimension 0 varies fastest (§4.2)."""
        if not 0 <= npu < self.num_npus:
            raise ChakraInputError(
                f"NPU {npu} is outside the network's {self.num_npus} NPUs",
                path=self.path,
                hint="make npus_count multiply to the number of ranks in the workload",
            )
        coords = []
        for count in self.npus_count:
            npu, coord = divmod(npu, count)
            coords.append(coord)
        return tuple(coords)


def load_network(path: PathLike, overrides: Mapping[str, Any] | None = None) -> NetworkConfig:
    """Read and check an analytical network YAML file (§4.2); ``overrides`` replace whole keys first.

    A key written as a scalar is a one-dimension list.
    """
    path = Path(path)
    raw = read_yaml_mapping(path, WHAT, _NETWORK_EXAMPLE)
    overrides = dict(overrides or {})
    old = [key for key in _OLD_NETWORK_KEYS if key in raw]
    hint = f"write {_NETWORK_EXAMPLE}"
    if old:
        hint = f"{', '.join(old)} belong to an older format ASTRA-sim no longer reads; {hint}"
    required = {key: ("a list with one entry per dimension", hint) for key in NETWORK_KEYS}
    source = ConfigSource(path, WHAT, frozenset(overrides), required)
    check_override_keys(source, overrides, NETWORK_KEYS)
    raw.update(overrides)
    lists = {key: value if isinstance(value, list) else [value] for key, value in raw.items() if key in NETWORK_KEYS}
    typed = source.decode(lists, NetworkFile, numbers_as_text=True)

    lengths = {key: len(lists[key]) for key in NETWORK_KEYS}
    if len(set(lengths.values())) != 1 or not lengths["topology"]:
        counts = ", ".join(f"{key} {n}" for key, n in lengths.items())
        raise source.error(
            f"{', '.join(NETWORK_KEYS)} must each list one entry per dimension, but have {counts} entries",
            hint="give every key the same number of entries (at least one)",
        )
    by_lower_name = {name.lower(): name for name in TOPOLOGIES}
    topology = []
    for index, name in enumerate(typed.topology):
        if name.lower() not in by_lower_name:
            raise source.error(
                f"{source.describe('topology', name, index)} is not one of {', '.join(TOPOLOGIES)}",
                hint=f"use {', '.join(TOPOLOGIES)}",
            )
        topology.append(by_lower_name[name.lower()])
    # a single dimension of one NPU is a one-GPU system (replaying a single-rank trace); ASTRA-sim
    # itself wants two or more
    if len(typed.npus_count) > 1 and 1 in typed.npus_count:
        index = typed.npus_count.index(1)
        raise source.error(
            f"{source.describe('npus_count', lists['npus_count'][index], index)} must be > 1: "
            "a dimension of one NPU has no links",
            hint="drop the dimension or give it at least 2 NPUs",
        )
    return NetworkConfig(
        tuple(topology), tuple(typed.npus_count), tuple(typed.bandwidth), tuple(typed.latency), path=path
    )


def scale_network(network: NetworkConfig, *, bandwidth_scale: float = 1.0, latency_scale: float = 1.0) -> NetworkConfig:
    """``network`` with every link bandwidth multiplied by ``bandwidth_scale`` and latency by ``latency_scale``."""
    if not (math.isfinite(bandwidth_scale) and bandwidth_scale > 0):
        raise ChakraInputError(
            f"bandwidth scale {bandwidth_scale:g} must be a finite number > 0",
            hint="e.g. 2 doubles every link's bandwidth, 0.5 halves it",
        )
    if not (math.isfinite(latency_scale) and latency_scale >= 0):
        raise ChakraInputError(
            f"latency scale {latency_scale:g} must be a finite number >= 0",
            hint="e.g. 0.5 halves every link's latency, 0 removes it",
        )
    return replace(
        network,
        bandwidth_gbps=tuple(b * bandwidth_scale for b in network.bandwidth_gbps),
        latency_ns=tuple(lat * latency_scale for lat in network.latency_ns),
    )
