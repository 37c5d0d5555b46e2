"""What a simulation gives: per-rank statistics (ns), collective totals, intervals, or why it could not finish."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chakra.errors import ChakraError


class SimulationStuck(ChakraError):
    """The workload cannot finish; ``waiting`` lists ``(rank, node id, name, what it waits for)``."""

    def __init__(self, message: str, waiting: list[tuple[int, int, str, str]], **kwargs: Any):
        super().__init__(message, **kwargs)
        self.waiting = waiting
        self._message, self._kwargs = message, kwargs

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt in the parent when raised in a worker process (chakra.parallel)
        return (_rebuild_stuck, (self._message, self.waiting, self._kwargs))


def _rebuild_stuck(message: str, waiting: list[tuple[int, int, str, str]], kwargs: dict[str, Any]) -> SimulationStuck:
    return SimulationStuck(message, waiting, **kwargs)


@dataclass
class RankStats:
    """What one rank did, in ns."""

    rank: int
    finish_ns: int = 0
    cpu_ns: int = 0  # summed durations of CPU nodes
    gpu_compute_ns: int = 0  # summed durations of GPU compute nodes (replay-only: every non-CPU node)
    comm_ns: int = 0  # collectives and sends, issue to completion (the comm slot's busy time)
    nodes: int = 0
    # time split by what was running (sums to finish_ns): compute only, communication only
    # (exposed), both (overlapped), neither (idle); communication = collectives, sends, receives
    compute_only_ns: int = 0
    comm_exposed_ns: int = 0
    overlap_ns: int = 0
    idle_ns: int = 0

    @property
    def astra_exposed_comm_ns(self) -> int:
        """ASTRA-sim's "exposed communication": finish time minus GPU compute time (CPU work and idle
        time count as exposed; :attr:`comm_exposed_ns` is the time communication ran alone)."""
        return self.finish_ns - self.gpu_compute_ns


@dataclass
class SimResult:
    """Per-rank statistics, per-collective-type totals and, when asked, every node's interval."""

    ranks: dict[int, RankStats]
    collectives: dict[str, dict[str, int]] = field(default_factory=dict)  # type -> count, bytes, time_ns
    intervals: dict[int, list[tuple[int, int, int, int]]] | None = None  # rank -> (node id, start, end, slot)
    names: dict[int, dict[int, str]] | None = None  # rank -> node id -> name (with intervals)
    slot_names: dict[int, list[str]] = field(default_factory=dict)  # rank -> name of each slot
    warnings: list[str] = field(default_factory=list)
    links: list[Any] | None = None  # congestion-aware: chakra.sim.links.LinkStats, busiest first
    # congestion-aware with intervals: every hop (link name, waiting since, start, released ns, bytes)
    link_hops: list[tuple[str, int, int, int, int]] | None = None
    # classes of equivalent ranks simulated (chakra.sim.classes), or None: rank by rank, and why
    classes: int | None = None
    rank_by_rank: str | None = None

    @property
    def finish_ns(self) -> int:
        return max((s.finish_ns for s in self.ranks.values()), default=0)

    def astra_lines(self) -> list[str]:
        """The per-rank lines ASTRA-sim prints."""
        return [
            f"sys[{r}] finished, {s.finish_ns} cycles, exposed communication {s.astra_exposed_comm_ns} cycles."
            for r, s in sorted(self.ranks.items())
        ]
