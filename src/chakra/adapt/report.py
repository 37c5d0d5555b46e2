"""What ``chakra adapt`` changed: every change by kind, with counts and the details that name it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from chakra.validate.findings import Target


class Change(str, Enum):
    """A kind of change ``adapt`` makes; the value is its stable name in reports."""

    METADATA_NODE_REMOVED = "metadata-node-removed"
    INVALID_NODE_REMOVED = "invalid-node-removed"
    STAND_IN = "collective-stand-in"
    MISSING_DEP_DROPPED = "missing-dep-dropped"
    CYCLE_EDGE_DROPPED = "cycle-edge-dropped"
    ATTR_MEMBER = "attr-member-rewritten"
    CPU_COMM_AS_COMPUTE = "cpu-comm-node-as-compute"
    COMM_OFF_CPU = "comm-node-off-cpu"
    GROUPS_MOVED = "groups-moved-to-file"
    WORLD_GROUP = "world-collectives-in-explicit-group"
    DECOMPRESSED = "written-uncompressed"


#: What each change means, for the report's readers.
CHANGE_TEXT: dict[Change, str] = {
    Change.METADATA_NODE_REMOVED: "METADATA nodes removed (their dependents wait for their dependencies instead)",
    Change.INVALID_NODE_REMOVED: "INVALID nodes removed (their dependents wait for their dependencies instead)",
    Change.STAND_IN: "collectives the consumer refuses written as the one it simulates (type that ran kept in "
    "recorded_comm_type)",
    Change.MISSING_DEP_DROPPED: "dependencies on ids that are not in the file dropped",
    Change.CYCLE_EDGE_DROPPED: "dependencies dropped to break cycles (child -> parent)",
    Change.ATTR_MEMBER: "attributes rewritten into the value kind the consumer reads (value unchanged)",
    Change.CPU_COMM_AS_COMPUTE: "communication nodes on the CPU without communication attributes written as CPU "
    "compute (node type kept in recorded_node_type)",
    Change.COMM_OFF_CPU: "communication nodes marked is_cpu_op=true moved to the device",
    Change.GROUPS_MOVED: "process groups of METADATA nodes written to the comm groups file",
    Change.WORLD_GROUP: "collectives of all ranks written with an explicit group of every rank: ASTRA-sim tags the "
    "default group's by how many collectives a rank issued, which differ here (it would hang); the explicit group "
    "runs the same plan",
    Change.DECOMPRESSED: "compressed rank files written uncompressed",
}


@dataclass
class RankChanges:
    """The changes to one rank: ``counts[change]`` and, per change, ``details`` (what it was, counted:
    ``"BARRIER as ALL_REDUCE"``, ``"comm_size: uint64_val -> int64_val"``, ``"3317 -> 3318 (ctrl)"``)."""

    counts: Counter[Change] = field(default_factory=Counter)
    details: dict[Change, Counter[str]] = field(default_factory=dict)

    def add(self, change: Change, detail: str | None = None, count: int = 1) -> None:
        if count <= 0:
            return
        self.counts[change] += count
        if detail is not None:
            self.details.setdefault(change, Counter())[detail] += count

    def merge(self, other: RankChanges) -> None:
        for change, count in other.counts.items():
            self.counts[change] += count
        for change, details in other.details.items():
            self.details.setdefault(change, Counter()).update(details)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            change.value: {"count": count, "details": dict(self.details.get(change, {}))}
            for change, count in sorted(self.counts.items(), key=lambda item: item[0].value)
        }


@dataclass
class AdaptResult:
    """One adapted workload: where it went, what changed per rank and in all, and what was left."""

    target: Target
    prefix: Path
    paths: dict[int, Path]
    groups_path: Path | None
    ranks: dict[int, RankChanges]
    removed: list[Path] = field(default_factory=list)

    @property
    def changes(self) -> RankChanges:
        """Every rank's changes added up."""
        total = RankChanges()
        for changes in self.ranks.values():
            total.merge(changes)
        return total

    @property
    def unchanged_ranks(self) -> list[int]:
        return [rank for rank, changes in sorted(self.ranks.items()) if not changes.total]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target.value,
            "prefix": str(self.prefix),
            "paths": {rank: str(path) for rank, path in self.paths.items()},
            "comm_groups_path": str(self.groups_path) if self.groups_path else None,
            "changes": self.changes.to_dict(),
            "ranks": {rank: changes.to_dict() for rank, changes in sorted(self.ranks.items())},
            "unchanged_ranks": self.unchanged_ranks,
            "removed": [str(path) for path in self.removed],
        }
