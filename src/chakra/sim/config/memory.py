"""ASTRA-sim's remote memory JSON file (``reference/astra-sim.md`` §4.3): read, typed, checked.

Latency in ns, bandwidth in bytes/ns (as the file gives them).

Example:
    >>> load_remote_memory(None).memory_type
    'NO_MEMORY_EXPANSION'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec

from chakra.errors import PathLike
from chakra.sim.config.reading import ConfigSource, Count, NonNegative, read_json_object

WHAT = "remote memory configuration"

#: Remote memory ``memory-type`` values (§4.3).
NO_MEMORY_EXPANSION = "NO_MEMORY_EXPANSION"
PER_NPU_MEMORY_EXPANSION = "PER_NPU_MEMORY_EXPANSION"
PER_NODE_MEMORY_EXPANSION = "PER_NODE_MEMORY_EXPANSION"
MEMORY_POOL = "MEMORY_POOL"
MEMORY_TYPES = (NO_MEMORY_EXPANSION, PER_NPU_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION, MEMORY_POOL)


class RemoteMemoryFile(msgspec.Struct, rename="kebab", kw_only=True):
    """The keys of a remote memory file, typed as ASTRA-sim's JSON reader takes them."""

    memory_type: str
    remote_mem_latency: Annotated[NonNegative, msgspec.Meta(description="it is a latency in ns")] = 0.0
    remote_mem_bw: Annotated[NonNegative, msgspec.Meta(description="it is a bandwidth in bytes/ns")] = 0.0
    num_nodes: Annotated[Count, msgspec.Meta(description="it counts nodes")] | None = None
    num_npus_per_node: Annotated[Count, msgspec.Meta(description="it counts NPUs")] | None = None


@dataclass(frozen=True)
class RemoteMemoryConfig:
    """An ASTRA-sim remote memory file (§4.3): latency in ns, bandwidth in bytes/ns."""

    memory_type: str
    latency_ns: float = 0.0
    bandwidth_bytes_per_ns: float = 0.0
    num_nodes: int | None = None
    npus_per_node: int | None = None
    path: Path | None = None


def load_remote_memory(path: PathLike | None) -> RemoteMemoryConfig:
    """Read and check an ASTRA-sim remote memory JSON file (§4.3); ``None`` means no remote memory.

    A zero ``remote-mem-bw`` is kept: it only matters if the workload has memory nodes, and the
    simulator refuses those then.
    """
    if path is None:
        return RemoteMemoryConfig(NO_MEMORY_EXPANSION)
    path = Path(path)
    required = {
        "memory-type": (
            "ASTRA-sim leaves the memory type undefined without it",
            f'add "memory-type": "{NO_MEMORY_EXPANSION}" (or one of {", ".join(MEMORY_TYPES[1:])})',
        )
    }
    source = ConfigSource(path, WHAT, required=required)
    typed = source.decode(read_json_object(path, WHAT), RemoteMemoryFile)
    memory_type = source.choice("memory-type", typed.memory_type, MEMORY_TYPES)
    if memory_type == PER_NODE_MEMORY_EXPANSION:
        for key, count in (("num-nodes", typed.num_nodes), ("num-npus-per-node", typed.num_npus_per_node)):
            if count is None:
                raise source.error(
                    f"{PER_NODE_MEMORY_EXPANSION} needs {key!r}: ASTRA-sim would divide by zero finding a rank's node",
                    hint='give "num-nodes" and "num-npus-per-node", e.g. 2 and 8',
                )
    return RemoteMemoryConfig(
        memory_type=memory_type,
        latency_ns=typed.remote_mem_latency,
        bandwidth_bytes_per_ns=typed.remote_mem_bw,
        num_nodes=typed.num_nodes,
        npus_per_node=typed.num_npus_per_node,
        path=path,
    )
