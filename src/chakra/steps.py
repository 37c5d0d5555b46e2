"""Which profiled step a converter turns into an ET: the front ends' one rule.

A profile holds several executions (runs) of a training step. The first one traces and compiles
the program, a profiler started or stopped mid-step cuts the runs at the window's edges, and a busy
machine preempts some steps between two operations. :func:`step_to_convert` takes, among the
complete runs (those with the most recorded executions), the one of median span (the lower median
for an even count), so that neither a cut step nor an outlier is the one converted.

Example:
    >>> runs = [StepRun("a", 0.0, 90.0, 3), StepRun("b", 100.0, 40.0, 12),
    ...         StepRun("c", 200.0, 41.0, 12), StepRun("d", 300.0, 400.0, 12)]
    >>> step_to_convert(runs).run
    'c'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepRun:
    """One run (executed step) of a program: its id in the profile, when it started and its span
    over every device (µs), and the operation executions the profile holds of it."""

    run: str
    start_us: float
    span_us: float
    executions: int


def step_to_convert(runs: Sequence[StepRun]) -> StepRun:
    """The complete run of median span (ties: the earlier). ``runs`` must not be empty."""
    most = max(r.executions for r in runs)
    complete = sorted((r for r in runs if r.executions == most), key=lambda r: (r.span_us, r.start_us))
    return complete[(len(complete) - 1) // 2]


def step_note(runs: Sequence[StepRun], chosen: StepRun) -> str | None:
    """The conversion report's line on the step chosen, or ``None`` for a single run."""
    if len(runs) < 2:
        return None
    spans = sorted(r.span_us for r in runs)
    complete = sum(r.executions == chosen.executions for r in runs)
    return (
        f"times from run {chosen.run} of {len(runs)} profiled steps ({complete} complete): the median span "
        f"({chosen.span_us:,.1f} µs; all from {spans[0]:,.1f} to {spans[-1]:,.1f} µs)"
    )
