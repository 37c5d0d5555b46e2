"""What a check reports: :class:`Finding` (severity, stable code, message, node, hint, rank) and the
collector that lists at most a few findings of one code and sums up the rest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

#: Per code, how many findings are listed one by one before the rest are summed up in one line.
DEFAULT_LIMIT_PER_CODE = 20


class Target(str, Enum):
    """A consumer whose own failure modes ``chakra validate --target`` adds to the checks."""

    ASTRA_SIM = "astra-sim"
    #: the per-rank ETs of a custom collective algorithm (ASTRA-sim's CustomAlgorithm)
    CUSTOM_COLLECTIVE = "custom-collective"


TARGETS = tuple(t.value for t in Target)
#: The fix hints name for what ``chakra adapt`` rewrites (findings it leaves no trace of).
ADAPT_FIX = "`chakra adapt PREFIX -o OUT --target astra-sim`"


@dataclass(frozen=True)
class Finding:
    """One problem: ``severity`` (error/warning/info), a stable ``code``, a message, the node it
    concerns (if any), how to fix it, and the ``rank`` (file) it was found in."""

    severity: str
    code: str
    message: str
    node_id: int | None = None
    hint: str | None = None
    rank: int | None = None
    count: int = 1  # > 1 for a summary line standing for several findings

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Collector:
    """Gathers findings, listing at most ``limit`` per code and summing up the rest."""

    rank: int | None
    limit: int | None
    findings: list[Finding] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    overflow: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def add(self, severity: str, code: str, message: str, node_id: int | None = None, hint: str | None = None) -> None:
        self.counts[code] += 1
        if self.limit is not None and self.counts[code] > self.limit:
            self.overflow[code] = (severity, hint)
            return
        self.findings.append(Finding(severity, code, message, node_id, hint, self.rank))

    def add_each(
        self,
        severity: str,
        code: str,
        node_ids: Sequence[int],
        message: Callable[[int], str],
        hint: str | None = None,
    ) -> None:
        """One finding per node of ``node_ids`` (``message(k)`` for the ``k``-th), building only the
        messages that are listed: a check over every node of a million-node file stays cheap."""
        listed = len(node_ids) if self.limit is None else max(0, min(len(node_ids), self.limit - self.counts[code]))
        for k in range(listed):
            self.findings.append(Finding(severity, code, message(k), int(node_ids[k]), hint, self.rank))
        self.counts[code] += len(node_ids)
        if listed < len(node_ids):
            self.overflow[code] = (severity, hint)

    def result(self) -> list[Finding]:
        out = list(self.findings)
        for code, (severity, hint) in self.overflow.items():
            extra = self.counts[code] - (self.limit or 0)
            out.append(Finding(severity, code, f"... and {extra} more like this", None, hint, self.rank, extra))
        out.sort(key=lambda f: SEVERITY_ORDER[f.severity])
        return out


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``, counting summary lines by what they stand for."""
    counts = {ERROR: 0, WARNING: 0, INFO: 0}
    for f in findings:
        counts[f.severity] += f.count
    return counts
