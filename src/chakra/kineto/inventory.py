"""What became of every event of a profiler trace: converted, folded or dropped, by category.

*Converted*: the event is a node of the ET (an operator, a kernel, a copy, a memset, a collective).
*Folded*: its content is in the ET in another form: a runtime call in the time of the operator
that made it and in the dependencies of the work it launched or waited for, a ``cuda_sync`` event
in dependencies, a flow in the correlation it repeats, a GPU-side annotation in its host
annotation, metadata in thread names. *Dropped*: outside the converted window, or of a kind the
format has no place for (Python frames, the profiler's own spans, instants); each with its reason.

Example:
    kinds = event_kinds(trace)  # before the events are let go
    counts = inventory(kinds, linked.events, window.label)
    counts["kernel"]   # {"converted": 245, "dropped: outside ProfilerStep#12": 490}
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from chakra._items import gather
from chakra._kineto_events import count_kinds
from chakra.pytorch.kineto import (
    DEVICE_OP_CATEGORIES,
    HOST_OP_CATEGORIES,
    RUNTIME_CATEGORIES,
    SYNC_CATEGORY,
    KinetoEvents,
    KinetoTrace,
)

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
#: The categories whose complete events the converter reads (each converted, folded or outside the
#: window), and those of them it folds (syncs: never a node of their own).
_READ_CATEGORIES = HOST_OP_CATEGORIES | DEVICE_OP_CATEGORIES | RUNTIME_CATEGORIES | {SYNC_CATEGORY}
_FOLDED_CATEGORIES = frozenset({SYNC_CATEGORY})
_CATEGORY_FATE = {
    "gpu_user_annotation": FOLDED_GPU_ANNOTATION,
    "python_function": DROPPED_PYTHON,
    "Trace": DROPPED_PROFILER,
    "overhead": DROPPED_PROFILER,
}


def event_kinds(trace: KinetoTrace) -> Counter[tuple[str, str]]:
    """How many events ``trace`` holds of each (category, phase), with the flows its loading left out
    (``flows_left_out``): what :func:`inventory` takes, counted before the events are let go."""
    kinds: Counter[tuple[str, str]] = Counter(count_kinds(trace.events))
    kinds.update(trace.flows_left_out)
    return kinds


def inventory(kinds: Mapping[tuple[str, str], int], events: KinetoEvents, window: str) -> dict[str, dict[str, int]]:
    """Per event category (``cpu_op``, ``kernel``, ``ac2g`` flows, ...), how many events met each
    fate. Host operators and device work outside the window are dropped with the window's name
    (``window``: its label).

    ``kinds`` counts the trace's events by (category, phase) (:func:`event_kinds`, taken before the
    events the conversion does not read are let go); what became of the complete
    events of the categories the converter reads is counted from the window's lists (``events``, as
    the profiler view keeps them: its operators, device work, runtime calls and syncs), the rest of
    each category being outside."""
    calls = [*events.launches.values(), *events.sync_calls, *events.event_records, *events.other_runtime]
    # counted in C over the categories' columns: a trace holds hundreds of thousands of events
    converted = Counter(gather(events.host_ops, (("cat",),))[0])
    converted.update(gather(events.device_ops, (("cat",),))[0])
    # the operators of runtime categories are the runtime calls outside every operator, made operators
    made_operators = Counter({cat: converted[cat] for cat in RUNTIME_CATEGORIES if cat in converted})
    (call_categories,) = gather(calls, (("cat",),))
    (sync_categories,) = gather(events.syncs, (("cat",),))
    folded = Counter(call_categories)
    folded.subtract(made_operators)
    folded.update(sync_categories)
    outside = f"dropped: outside {window or 'the window'}"
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for (category, phase), count in kinds.items():
        cat = category or "(none)"
        if phase != "X":
            label = {"s": "flow", "f": "flow", "t": "flow"}.get(phase)
            key = f"{cat} {label}" if label else {"M": "metadata", "i": "instant"}.get(phase, f"{cat} ({phase})")
            counts[key][_PHASE_FATE.get(phase, DROPPED_OTHER)] += count
        elif cat in _READ_CATEGORIES:
            made = converted[cat] if cat not in _FOLDED_CATEGORIES else 0
            kept_in = folded[cat] if cat in RUNTIME_CATEGORIES or cat == SYNC_CATEGORY else 0
            for fate, n in ((CONVERTED, made), (FOLDED_SYNC if cat == SYNC_CATEGORY else FOLDED_CALL, kept_in),
                            (outside, count - made - kept_in)):  # fmt: skip
                if n:
                    counts[cat][fate] += n
        else:
            counts[cat][_CATEGORY_FATE.get(cat, DROPPED_OTHER)] += count
    return {cat: dict(fates) for cat, fates in sorted(counts.items())}
