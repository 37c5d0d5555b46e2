"""ASTRA-sim configuration files: system JSON, network YAML, remote memory JSON (``reference/astra-sim.md`` §4).

Each loader reads one file, applies optional overrides (``--set key=value``, ASTRA-sim key spellings),
types it (a msgspec struct per file), checks every value ASTRA-sim would crash on, hang on or silently
misread, and returns a frozen dataclass. Problems raise :class:`~chakra.errors.ChakraInputError`
naming the file, the key and the value (and the override when one supplied it), with a fix hint.
Communicator group files are read by :meth:`chakra.groups.CommGroups.read`.

One module per file: :mod:`.system`, :mod:`.network`, :mod:`.memory`; :mod:`.overrides` parses
``--set``; :mod:`.reading` holds what they share (file reading, typed decoding, error wording).
"""

from chakra.sim.config.memory import MEMORY_TYPES, RemoteMemoryConfig, load_remote_memory
from chakra.sim.config.network import NETWORK_KEYS, TOPOLOGIES, NetworkConfig, load_network, scale_network
from chakra.sim.config.overrides import parse_override
from chakra.sim.config.system import (
    ALGORITHM_NAMES,
    COLLECTIVE_OPTIMIZATIONS,
    IMPLEMENTATION_KEYS,
    KNOWN_SYSTEM_KEYS,
    SCHEDULING_POLICIES,
    SystemConfig,
    load_system,
)

__all__ = [
    "ALGORITHM_NAMES",
    "COLLECTIVE_OPTIMIZATIONS",
    "IMPLEMENTATION_KEYS",
    "KNOWN_SYSTEM_KEYS",
    "MEMORY_TYPES",
    "NETWORK_KEYS",
    "SCHEDULING_POLICIES",
    "TOPOLOGIES",
    "NetworkConfig",
    "RemoteMemoryConfig",
    "SystemConfig",
    "load_network",
    "load_remote_memory",
    "load_system",
    "parse_override",
    "scale_network",
]
