"""Remote-memory accesses: latency plus bytes over bandwidth, one access at a time per queue.

Which ranks share a queue follows the remote memory's ``memory-type`` (``reference/astra-sim.md``
§4.3, §5.8): every NPU its own (``PER_NPU_MEMORY_EXPANSION``), the NPUs of one node one queue
(``PER_NODE_MEMORY_EXPANSION``, ``num-npus-per-node`` ranks per node), or one pool for all
(``MEMORY_POOL``).

Example:
    >>> from chakra.sim.config import RemoteMemoryConfig
    >>> pool = MemoryQueues(RemoteMemoryConfig("MEMORY_POOL", latency_ns=100.0, bandwidth_bytes_per_ns=2.0))
    >>> pool.access(rank=0, now_ns=0, size_bytes=1000), pool.access(rank=1, now_ns=0, size_bytes=1000)
    (600, 1200)
"""

from __future__ import annotations

from collections import defaultdict

from chakra.sim.config import RemoteMemoryConfig
from chakra.sim.config.memory import MEMORY_POOL, NO_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION


class MemoryQueues:
    """When each remote-memory queue is free, and the time of an access on it (ns)."""

    def __init__(self, config: RemoteMemoryConfig | None):
        self.config = config if config is not None else RemoteMemoryConfig(NO_MEMORY_EXPANSION)
        self._free_at_ns: dict[int, int] = defaultdict(int)  # queue -> when its last access ends

    @property
    def enabled(self) -> bool:
        """Whether the system has remote memory at all (a memory node is an error otherwise)."""
        return self.config.memory_type != NO_MEMORY_EXPANSION

    def queue(self, rank: int) -> int:
        """The queue ``rank``'s accesses wait in."""
        if self.config.memory_type == PER_NODE_MEMORY_EXPANSION:
            return rank // (self.config.npus_per_node or 1)
        return 0 if self.config.memory_type == MEMORY_POOL else rank

    def access(self, rank: int, now_ns: int, size_bytes: int) -> int:
        """When an access of ``size_bytes`` issued by ``rank`` at ``now_ns`` completes, in ns."""
        queue = self.queue(rank)
        start_ns = max(now_ns, self._free_at_ns[queue])
        bandwidth = self.config.bandwidth_bytes_per_ns
        end_ns = start_ns + int(self.config.latency_ns) + (int(size_bytes / bandwidth) if bandwidth > 0 else 0)
        self._free_at_ns[queue] = end_ns
        return end_ns
