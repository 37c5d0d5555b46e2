"""The fidelity check every front end runs on what it wrote, in one shape: each rank's ET scheduled
with its recorded durations (:mod:`chakra.schedule.rank`), its span against the measured one, the
tolerance, and the verdict.

A rank fails when its scheduled span is further than ``tolerance`` (relative) from the measured one,
or when nothing was measured to compare with. Where the ranks only make sense together (FlexFlow's
devices, whose measured schedule is one simulated makespan), the check holds the ranks replayed
together (``whole``, :func:`chakra.schedule.ranks.schedule_ranks`) against the whole measured span
instead, failing the same way. Each front end states its own tolerance beside the reason for it (a
recording's timing noise differs per framework); the check itself is this one.

>>> from chakra.schedule.rank import ScheduleResult
>>> import numpy as np
>>> def span(predicted_us, measured_us):
...     return ScheduleResult(predicted_us, measured_us, 1, 1, np.zeros(1), np.zeros(1), 0)
>>> check = check_fidelity({0: span(105.0, 100.0), 1: span(150.0, 100.0)}, tolerance=0.10)
>>> check.ok, check.failures()
(False, {1: 0.5})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chakra.schedule.rank import ScheduleResult, schedule_file
from chakra.schedule.ranks import WorkloadSchedule


@dataclass(frozen=True)
class FidelityCheck:
    """Each rank's schedule against its measurement (``results``), or the ranks replayed together
    against the whole measured span (``whole``), and the ``tolerance`` they are held to."""

    tolerance: float
    results: dict[int, ScheduleResult]
    whole: WorkloadSchedule | None = None

    def _off(self, error: float | None) -> bool:
        return error is None or abs(error) > self.tolerance

    def failures(self) -> dict[int, float | None]:
        """Rank -> its relative error, for the ranks off by more than the tolerance (``None``:
        nothing measured to compare with)."""
        return {rank: result.error for rank, result in self.results.items() if self._off(result.error)}

    @property
    def whole_failed(self) -> bool:
        """Whether the ranks replayed together are off by more than the tolerance (or unmeasured)."""
        return self.whole is not None and self._off(self.whole.error)

    @property
    def ok(self) -> bool:
        return not self.failures() and not self.whole_failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "tolerance": self.tolerance,
            "ok": self.ok,
            "ranks": {str(rank): result.to_dict() for rank, result in self.results.items()},
            "whole": None if self.whole is None else self.whole.to_dict(),
        }


def check_fidelity(
    results: Mapping[int, ScheduleResult], tolerance: float, *, whole: WorkloadSchedule | None = None
) -> FidelityCheck:
    """The verdict on ``results`` (rank -> schedule) and ``whole`` (the ranks together) at ``tolerance``.

    >>> together = WorkloadSchedule(99.0, 100.0, {}, {}, 0, 0)
    >>> check_fidelity({}, tolerance=0.01, whole=together).ok
    True
    """
    return FidelityCheck(tolerance, dict(sorted(results.items())), whole)


def schedule_files(paths: Mapping[int, Path]) -> dict[int, ScheduleResult]:
    """Each rank's file (rank -> path) scheduled with its recorded durations, against its measured span."""
    return {rank: schedule_file(path) for rank, path in sorted(paths.items())}
