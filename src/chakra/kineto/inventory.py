"""What became of every event of a profiler trace: converted, folded or dropped, by category.

*Converted*: the event is a node of the ET (an operator, a kernel, a copy, a memset, a collective).
*Folded*: its content is in the ET in another form: a runtime call in the time of the operator
that made it and in the dependencies of the work it launched or waited for, a ``cuda_sync`` event
in dependencies, a flow in the correlation it repeats, a GPU-side annotation in its host
annotation, metadata in thread names. *Dropped*: outside the converted window, or of a kind the
format has no place for (Python frames, the profiler's own spans, instants); each with its reason.

Example:
    counts = inventory(trace, linked, conversion.report)
    counts["kernel"]   # {"converted": 245, "dropped: outside ProfilerStep#12": 490}
"""

from __future__ import annotations

from collections import Counter, defaultdict

from chakra.pytorch.kineto import (
    DEVICE_OP_CATEGORIES,
    HOST_OP_CATEGORIES,
    RUNTIME_CATEGORIES,
    SYNC_CATEGORY,
    KinetoTrace,
)
from chakra.pytorch.link import LinkedTrace
from chakra.pytorch.report import ConversionReport

CONVERTED = "converted"
FOLDED_CALL = "folded: into the time of its operator and the dependencies of the work it launched or waited for"
FOLDED_SYNC = "folded: into dependencies"
FOLDED_FLOW = "folded: repeats a correlation or sequence number"
FOLDED_GPU_ANNOTATION = "folded: the device-side copy of a host annotation"
FOLDED_METADATA = "folded: process and thread names"
DROPPED_PYTHON = "dropped: Python frames (with_stack); their time is in the operators below them"
DROPPED_PROFILER = "dropped: the profiler's own spans and instants"
DROPPED_OTHER = "dropped: a category the converter does not read"

#: Phases that are not complete events, by what becomes of them.
_PHASE_FATE = {"s": FOLDED_FLOW, "f": FOLDED_FLOW, "t": FOLDED_FLOW, "M": FOLDED_METADATA, "i": DROPPED_PROFILER}
_CATEGORY_FATE = {
    "gpu_user_annotation": FOLDED_GPU_ANNOTATION,
    "python_function": DROPPED_PYTHON,
    "Trace": DROPPED_PROFILER,
    "overhead": DROPPED_PROFILER,
}


def inventory(trace: KinetoTrace, linked: LinkedTrace, report: ConversionReport) -> dict[str, dict[str, int]]:
    """Per event category (``cpu_op``, ``kernel``, ``ac2g`` flows, ...), how many events met each
    fate. Host operators and device work outside the window are dropped with the window's name."""
    events = linked.events
    assert events is not None, "a profiler view keeps its events"
    kept = {id(e) for e in events.host_ops}
    kept.update(id(e) for e in events.device_ops)
    folded = {id(e) for e in events.syncs}
    calls = {id(e) for e in events.launches.values()}
    calls.update(id(e) for group in (events.sync_calls, events.event_records, events.other_runtime) for e in group)
    window = report.window or "the window"
    outside = f"dropped: outside {window}"
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for event in trace.events:
        cat = event.cat or "(none)"
        if event.ph != "X":
            label = {"s": "flow", "f": "flow", "t": "flow"}.get(event.ph)
            key = f"{cat} {label}" if label else {"M": "metadata", "i": "instant"}.get(event.ph, f"{cat} ({event.ph})")
            counts[key][_PHASE_FATE.get(event.ph, DROPPED_OTHER)] += 1
            continue
        if cat in HOST_OP_CATEGORIES or cat in DEVICE_OP_CATEGORIES:
            counts[cat][CONVERTED if id(event) in kept else outside] += 1
        elif cat in RUNTIME_CATEGORIES:
            counts[cat][(CONVERTED if id(event) in kept else FOLDED_CALL) if id(event) in calls else outside] += 1
        elif cat == SYNC_CATEGORY:
            counts[cat][FOLDED_SYNC if id(event) in folded else outside] += 1
        else:
            counts[cat][_CATEGORY_FATE.get(cat, DROPPED_OTHER)] += 1
    return {cat: dict(fates) for cat, fates in sorted(counts.items())}
