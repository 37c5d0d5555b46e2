"""What a front end's pipeline returns, in one shape: :class:`ConversionResult` holds the front end's
own conversion, the workload written and the fidelity check (:mod:`chakra.schedule.fidelity`), and
turns into one JSON report (``to_dict``): the prefix, what the front end converted (its ``report``),
and the check. The CLI only renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chakra.workload_writer import WrittenWorkload

if TYPE_CHECKING:  # the scheduler loads only where a check is asked for (a conversion's start-up is its time)
    from chakra.schedule.fidelity import FidelityCheck

#: A front end's own conversion (what it made of each input).
C = TypeVar("C")


@dataclass(frozen=True)
class ConversionResult(Generic[C]):
    """A front end's conversion, the files it wrote, and its fidelity check (``None`` when not asked for)."""

    conversion: C
    written: WrittenWorkload
    fidelity: FidelityCheck | None

    def report(self) -> dict[str, Any]:
        """What the front end converted, JSON-ready (each front end says)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": str(self.written.prefix),
            **self.report(),
            "fidelity": None if self.fidelity is None else self.fidelity.to_dict(),
        }
