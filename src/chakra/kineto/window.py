"""Which part of a profiler trace becomes the ET: one ``ProfilerStep#N`` window, or the whole trace.

``torch.profiler`` marks each step the program reported with ``prof.step()`` by a
``ProfilerStep#N`` annotation on the thread that called it. A step *holds* the host events of every
thread that start inside its annotation, the runtime calls among them, and the device work those
calls launched, wherever it ran (a GPU runs behind its host); device work without a launching call
in the trace (CUPTI profiler ranges, an AMD copy without correlation) belongs to the step it starts
in. That is the rule HolisticTraceAnalysis assigns iterations by, so both read the same step.
Device work launched before the step that was still running in it (a device behind its host) is
kept too (:func:`chakra.kineto.view.window_events`): the step's own work waited for it.

A step is *complete* when every kernel one of its calls launched is in the trace: a
profiler stopped mid-step leaves its last step's device work out. :func:`choose_window` takes the
complete step of median span, the rule the XLA and TensorFlow front ends share
(:func:`chakra.steps.step_to_convert`), ``step=N`` takes ``ProfilerStep#N``, and a trace without
steps (or ``step=ALL_STEPS``) is converted whole.

Example:
    trace = load_kineto_trace("rank0.json")
    window = choose_window(trace, classify(trace))
    window.label, window.start_us, window.end_us
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chakra._kineto_events import step_spans
from chakra.errors import ChakraInputError
from chakra.pytorch.kineto import PROFILER_STEP_PREFIX, KinetoEvent, KinetoEvents, KinetoTrace
from chakra.steps import StepRun, step_note, step_to_convert

#: ``step=`` value that converts the whole trace, steps or not.
ALL_STEPS = "all"
_STEP_NAME = re.compile(rf"{PROFILER_STEP_PREFIX}\s*#\s*(\d+)\Z")


@dataclass(frozen=True)
class Window:
    """The host time window converted (µs on the trace's clock; ``None``: unbounded) and what it is."""

    label: str  # "ProfilerStep#12", or "the whole trace"
    start_us: float | None = None
    end_us: float | None = None
    notes: tuple[str, ...] = field(default=())

    def holds(self, ts_us: float) -> bool:
        """Whether a host event starting at ``ts_us`` belongs to the window."""
        return (self.start_us is None or ts_us >= self.start_us) and (self.end_us is None or ts_us < self.end_us)


WHOLE_TRACE = Window("the whole trace")


def profiler_steps(events: KinetoEvents) -> dict[int, KinetoEvent]:
    """The ``ProfilerStep#N`` annotations by step number (the first of a number, if repeated)."""
    steps: dict[int, KinetoEvent] = {}
    for event in events.step_marks:
        match = _STEP_NAME.match(event.name)
        if match is not None:
            steps.setdefault(int(match.group(1)), event)
    return dict(sorted(steps.items()))


def _step_runs(events: KinetoEvents, steps: dict[int, KinetoEvent]) -> list[StepRun]:
    """One :class:`StepRun` per step: its span over host and device work, and whether complete
    (``executions`` 1) or missing launched device work (0)."""
    order = sorted((event.ts, number) for number, event in steps.items())
    numbers = [number for _, number in order]
    spans, missing = step_spans(
        events.launches,
        events.device_ops,
        [start for start, _ in order],
        [steps[number].ts + steps[number].dur for number in numbers],
    )
    ends = dict(zip(numbers, spans, strict=True))
    incomplete = {number for number, count in zip(numbers, missing, strict=True) if count}
    return [
        StepRun(str(number), event.ts, ends[number] - event.ts, 0 if number in incomplete else 1)
        for number, event in steps.items()
    ]


def choose_window(trace: KinetoTrace, events: KinetoEvents, step: int | str | None = None) -> Window:
    """The window to convert: ``step`` (a ``ProfilerStep`` number), :data:`ALL_STEPS`, or ``None``
    for the complete step of median span (the whole trace when it has no steps). Raises
    :class:`ChakraInputError` for a step the trace does not have."""
    if step == ALL_STEPS:
        return WHOLE_TRACE
    steps = profiler_steps(events)
    if not steps:
        if step is not None:
            raise ChakraInputError(
                f"the trace has no ProfilerStep#{step}: it has no ProfilerStep annotations at all",
                path=trace.path,
                hint=f"leave out --step, or give --step {ALL_STEPS}: the whole trace is converted",
            )
        return Window("the whole trace", notes=("no ProfilerStep annotations: the whole trace converted",))
    if step is not None:
        number = int(step)
        if number not in steps:
            shown = ", ".join(str(n) for n in list(steps)[:12])
            raise ChakraInputError(
                f"the trace has no ProfilerStep#{number}",
                path=trace.path,
                hint=f"its steps are {shown}{', ...' if len(steps) > 12 else ''} (or --step {ALL_STEPS})",
            )
        chosen = steps[number]
        return Window(chosen.name, chosen.ts, chosen.ts + chosen.dur)
    runs = _step_runs(events, steps)
    run = step_to_convert(runs)
    chosen = steps[int(run.run)]
    notes = []
    note = step_note(runs, run)
    if note is not None:
        notes.append(note.replace(f"run {run.run} ", f"ProfilerStep#{run.run} ").replace("runs", "steps"))
    if run.executions == 0:
        notes.append(f"{chosen.name} lacks device work it launched: the profiler stopped before it ran")
    return Window(chosen.name, chosen.ts, chosen.ts + chosen.dur, tuple(notes))
