"""Join a host execution trace with its Kineto trace: timing for host ops, device work under them.

No HolisticTraceAnalysis or PARAM: the joins are the ids of ``reference/pytorch-traces.md`` §3.

* host op <-> Kineto host op: host ``rf_id`` = Kineto ``Record function id``; for traces without
  record-function ids (PyTorch 2.0/2.1, host schema 1.0.1) host ``rf_id`` = Kineto ``External id``;
* device activity (kernel, memcpy, memset, sync) -> its runtime call by ``correlation`` -> the
  innermost Kineto host op on the runtime call's thread that encloses it in time -> host op;
* exclusive durations per thread: an op's time minus its direct children's (stack sweep).

Everything runs in one sort per thread plus linear sweeps. :func:`link` returns a
:class:`LinkedTrace` with a :class:`LinkReport` that counts and names every host op without timing
and every device activity left unattached, with the reason. Traces from different runs are
refused: their ids may coincide, but the names of the joined ops do not.

Example:
    linked = link(load_host_trace("host.0.json"), load_kineto_trace("device.0.json"))
    linked.report.host_matched, linked.timing[42].dur_us
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec

from chakra._items import gather, sort_by_field
from chakra._kineto_events import join_index, nest_by_thread
from chakra._link_join import attach_device_work, join_host_ops
from chakra._link_join import enclosing_ops as enclosing_in_c
from chakra.collector import gc_paused
from chakra.errors import ChakraInputError
from chakra.pytorch.host import PROCESS_GROUP_NODE, PROCESS_ROOT_NAMES, THREAD_ROOT_NAMES, HostTrace
from chakra.pytorch.kineto import (
    PROFILER_STEP_PREFIX,
    ActivityArgs,
    KinetoEvent,
    KinetoEvents,
    KinetoIdArgs,
    KinetoTrace,
    classify,
)

#: Below this share of joined ops whose names agree, the two traces are from different runs
#: (the mismatched PARAM pair: 23 %; traces of one session: 100 %).
MIN_NAME_AGREEMENT = 0.9

#: Host ops the observer adds itself: they have no Kineto counterpart by design.
SYNTHETIC_HOST_OPS = frozenset(THREAD_ROOT_NAMES + PROCESS_ROOT_NAMES)

#: How many unmatched items a report lists by name (all are counted).
REPORT_EXAMPLES = 20


class HostTiming(msgspec.Struct, frozen=True, gc=False):
    """Measured timing of one host op (µs; ``ts_us`` on the Kineto clock, Unix epoch)."""

    ts_us: float
    dur_us: float
    exclusive_us: float
    thread: Any  # the Kineto tid


class DeviceActivity(msgspec.Struct, frozen=True):
    """One kernel, memcpy, memset or sync on a device stream, attached to the host op that launched it."""

    name: str
    cat: str
    device: Any
    stream: Any
    ts_us: float
    dur_us: float
    correlation: int | None
    host_id: int | None  # the launching host op, None when it could not be found
    launch: str  # the runtime call that issued it
    args: Any  # KinetoIdArgs (or KinetoArgs) or ActivityArgs (read with .get), or a dict
    launch_ts_us: float | None = None  # when the runtime call that issued it started
    launch_end_us: float | None = None  # ... and returned
    launch_thread: Any = None  # the Kineto tid of that call


@dataclass
class LinkReport:
    """What joined and what did not, with reasons (counts and a few examples of each)."""

    join_key: str  # "Record function id" or "External id"
    host_ops: int = 0
    host_matched: int = 0
    host_unmatched: Counter[str] = field(default_factory=Counter)  # reason -> count
    host_unmatched_examples: list[tuple[int, str, str]] = field(default_factory=list)  # (id, name, reason)
    kineto_ops: int = 0
    kineto_matched: int = 0
    name_agreement: float = 1.0
    device_activities: int = 0
    device_attached: int = 0
    device_unattached: Counter[str] = field(default_factory=Counter)
    device_unattached_examples: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)
    duplicate_correlations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "join_key": self.join_key,
            "host_ops": self.host_ops,
            "host_matched": self.host_matched,
            "host_unmatched": dict(self.host_unmatched),
            "kineto_ops": self.kineto_ops,
            "kineto_matched": self.kineto_matched,
            "name_agreement": self.name_agreement,
            "device_activities": self.device_activities,
            "device_attached": self.device_attached,
            "device_unattached": dict(self.device_unattached),
            "duplicate_correlations": self.duplicate_correlations,
        }


@dataclass
class LinkedTrace:
    """The host trace with ``timing`` (host id -> :class:`HostTiming`) and the device activities
    in time order (``host_id`` names the launching host op)."""

    host: HostTrace
    device: KinetoTrace
    timing: dict[int, HostTiming]
    activities: list[DeviceActivity]
    report: LinkReport
    source: str = "linked"  # "linked": host + Kineto; "kineto-only": a profiler trace alone (chakra.kineto)
    # the runtime calls that make a thread or a stream wait, and the event records they wait for
    # (chakra.pytorch.syncs turns them into dependencies)
    sync_calls: list[KinetoEvent] = field(default_factory=list)
    event_records: list[KinetoEvent] = field(default_factory=list)
    events: KinetoEvents | None = None  # the Kineto events joined, by role (a profiler trace alone: its window's)


#: Why a device activity has no host op, by the code :func:`chakra._link_join.attach_device_work` gives.
_UNATTACHED = (
    "no runtime call with its correlation id",
    "its runtime call is outside every recorded host op",
    "the host op that launched it is not in the host trace",
)
#: The Kineto args a host op joins by (``KinetoIdArgs`` fields), and the host trace's names for them.
_RECORD_FUNCTION_ID, _EXTERNAL_ID = "Record function id", "External id"
_ID_FIELDS = {_RECORD_FUNCTION_ID: "rf_id", _EXTERNAL_ID: "external_id"}


def _join_index(host_ops: list[KinetoEvent]) -> tuple[str, dict[int, int]]:
    """The key host ops join by (record-function ids when the Kineto trace has them, observer
    attached, else External ids) and the index in ``host_ops`` of the first op of each id (the
    outermost, for External ids several ops share)."""
    first, with_rf = join_index(host_ops, _ID_FIELDS[_RECORD_FUNCTION_ID])
    if with_rf and with_rf >= len(host_ops) / 2:
        return _RECORD_FUNCTION_ID, first
    return _EXTERNAL_ID, join_index(host_ops, _ID_FIELDS[_EXTERNAL_ID])[0]


def nest_events(events: list[KinetoEvent]) -> tuple[list[float], list[int]]:
    """Exclusive µs and call-stack parent (an index in ``events``, -1 for none) of each host event,
    ``events`` sorted by (ts, -dur): an event's children are the events of its thread (``tid``)
    that start inside it; its exclusive time is its duration minus theirs (clipped to it), at least 0.

    Example:
        >>> from chakra.pytorch.kineto import KinetoEvent
        >>> nest_events([KinetoEvent(tid=1, ts=0.0, dur=10.0), KinetoEvent(tid=1, ts=2.0, dur=3.0),
        ...              KinetoEvent(tid=2, ts=3.0, dur=1.0)])
        ([7.0, 3.0, 1.0], [-1, 0, -1])
    """
    return nest_by_thread(events)


def enclosing_ops(ops: list[KinetoEvent], parents: list[int] | None, calls: list[KinetoEvent]) -> list[int]:
    """For each call, the index in ``ops`` (host events sorted by start, longer first, as
    :func:`nest_events` takes them; ``parents``: what it finds for them) of the innermost op of the
    call's thread open at its start (one that starts with it counts, one that ends at it does not), -1
    for none. ``ProfilerStep#N`` annotations never count: a step launches nothing.

    The ops open at a call are the last op of its thread started by then and the ops it is nested in
    (its parents): found with arrays, thread by thread, then the parents climbed past the ops already
    closed, for all the calls at once. Callers that have nested the ops already, for their exclusive
    times, give the nesting; with ``parents`` None it is found here, as :func:`nest_events` finds it.

    Example:
        >>> from chakra.pytorch.kineto import KinetoEvent
        >>> ops = [KinetoEvent(name="a", tid=1, ts=0.0, dur=10.0), KinetoEvent(name="b", tid=1, ts=2.0, dur=3.0)]
        >>> calls = [KinetoEvent(tid=1, ts=3.0), KinetoEvent(tid=1, ts=6.0), KinetoEvent(tid=2, ts=3.0),
        ...          KinetoEvent(tid=1, ts=10.0)]
        >>> enclosing_ops(ops, nest_events(ops)[1], calls)
        [1, 0, -1, -1]
    """
    if not ops or not calls:
        return [-1] * len(calls)
    found_in_c = enclosing_in_c(ops, parents, calls, PROFILER_STEP_PREFIX)  # None where a time is not a float
    if found_in_c is not None:
        return found_in_c
    if parents is None:
        parents = nest_events(ops)[1]
    # numpy loads here, not with the module: converting a trace without device work never needs it,
    # and loading it took the PyTorch conversion's modules from 23 to 34 MiB (convert_bench.py)
    import numpy as np

    found = np.full(len(calls), -1, dtype=np.int64)
    parent = np.array(parents, dtype=np.int64)
    op_ts, op_dur, op_tid, op_name = gather(ops, (("ts",), ("dur",), ("tid",), ("name",)))
    call_ts, call_tid = gather(calls, (("ts",), ("tid",)))
    # threads, names: a few values shared by many events, each looked at once
    thread_of = {tid: number for number, tid in enumerate(dict.fromkeys(op_tid))}
    op_thread = np.fromiter(map(thread_of.__getitem__, op_tid), np.int64, len(ops))
    call_thread = np.fromiter(map(thread_of.get, call_tid, repeat(-1)), np.int64, len(calls))
    is_step = {name: name.startswith(PROFILER_STEP_PREFIX) for name in dict.fromkeys(op_name)}
    step = np.fromiter(map(is_step.__getitem__, op_name), bool, len(ops))
    start = np.array(op_ts, dtype=np.float64)
    if (np.diff(start) < 0).any():
        raise ValueError("enclosing_ops takes the ops sorted by start, as nest_events does")
    end = start + np.array(op_dur, dtype=np.float64)
    at = np.array(call_ts, dtype=np.float64)
    # the last op of its thread started at or before each call (a thread's ops keep their order)
    ops_by_thread, calls_by_thread = np.argsort(op_thread, kind="stable"), np.argsort(call_thread, kind="stable")
    op_bounds = np.searchsorted(op_thread[ops_by_thread], np.arange(len(thread_of) + 1)).tolist()
    call_bounds = np.searchsorted(call_thread[calls_by_thread], np.arange(len(thread_of) + 1)).tolist()
    for thread in range(len(thread_of)):
        members = ops_by_thread[op_bounds[thread] : op_bounds[thread + 1]]
        here = calls_by_thread[call_bounds[thread] : call_bounds[thread + 1]]
        last = np.searchsorted(start[members], at[here], side="right") - 1
        found[here] = np.where(last >= 0, members[np.maximum(last, 0)], -1)
    # then out through its parents while the op is closed by the call's start, or a step
    while True:
        live = np.flatnonzero(found >= 0)
        passed = live[step[found[live]] | (end[found[live]] <= at[live])]
        if not passed.size:
            return found.tolist()
        found[passed] = parent[found[passed]]


def link(host: HostTrace, device: KinetoTrace, *, min_name_agreement: float = MIN_NAME_AGREEMENT) -> LinkedTrace:
    """Join ``host`` and ``device`` (one rank). Raises :class:`ChakraInputError` when they come from
    different runs (names of id-joined ops disagree), naming the measured rates."""
    with gc_paused():  # builds a few objects per op and frees none: see jsonfile.gc_paused
        return _link(host, device, min_name_agreement)


def _link(host: HostTrace, device: KinetoTrace, min_name_agreement: float) -> LinkedTrace:
    events = classify(device)
    host_ops = events.host_ops
    key, index_of = _join_index(host_ops)
    report = LinkReport(join_key=key, kineto_ops=len(host_ops))
    report.duplicate_correlations = len(events.duplicate_correlations)
    exclusive, parents = nest_events(host_ops)  # host_ops are in (ts, -dur) order

    timing, host_of_kineto, report.host_ops, joined, agree, unmatched = join_host_ops(
        host.nodes, SYNTHETIC_HOST_OPS, index_of, host_ops, exclusive, HostTiming
    )
    for node in unmatched:
        if node.name == PROCESS_GROUP_NODE:
            reason = "process-group record (written when the observer starts, no Kineto event by design)"
        elif not node.rf_id:
            reason = "no rf_id (op recorded without an id)"
        else:
            reason = "no Kineto op with this id (outside the profiled window?)"
        report.host_unmatched[reason] += 1
        if len(report.host_unmatched_examples) < REPORT_EXAMPLES:
            report.host_unmatched_examples.append((node.id, node.name, reason))
    report.host_matched = len(timing)
    report.kineto_matched = len(host_of_kineto)
    report.name_agreement = agree / joined if joined else 1.0
    if joined and report.name_agreement < min_name_agreement:
        raise ChakraInputError(
            f"host trace {host.path.name if host.path else '(in memory)'} and this device trace are from "
            f"different runs: {joined} of "
            f"{report.host_ops} host ops share an id with a Kineto op, but only {report.name_agreement:.0%} of "
            "those have the same name",
            path=device.path,
            hint="record both in one profiler session (chakra.pytorch.collect does)",
        )

    activities = attach_activities(events, parents, host_of_kineto, report)
    return LinkedTrace(
        host, device, timing, activities, report, sync_calls=events.sync_calls, event_records=events.event_records
    )


def attach_activities(
    events: KinetoEvents,
    parents: list[int],
    host_of_kineto: dict[int, int] | None,
    report: LinkReport,
    *,
    kept_args: type[ActivityArgs] | None = None,
) -> list[DeviceActivity]:
    """Every device activity and sync event of ``events``, in time order, each attached to the host
    op that launched it: its runtime call by ``correlation`` (every kernel of a CUDA graph shares its
    ``cudaGraphLaunch``'s), then the innermost Kineto host op enclosing that call (``parents``: the
    host ops' nesting, :func:`nest_events`), then ``host_of_kineto`` (``id()`` of a Kineto op -> host
    id; None: the op at index k of ``events.host_ops`` is host op k + 1, as a profiler view numbers
    them). Counts go to ``report``. With ``kept_args`` (:class:`~chakra.pytorch.kineto.ActivityArgs`),
    each activity holds what the conversion reads of its event's args, for a caller that lets the events
    go (see :func:`chakra._link_join.attach_device_work`)."""
    calls = dict(events.launches)  # correlation -> the runtime call that caused device work
    for call in events.sync_calls:
        if call.correlation is not None:
            calls.setdefault(call.correlation, call)
    enclosing = enclosing_ops(events.host_ops, parents, list(calls.values()))
    # each event's activity, made in C; the events that are not attached, with why
    activities, unattached = attach_device_work(
        events.device_ops + events.syncs, calls, enclosing, events.host_ops, host_of_kineto, DeviceActivity,
        KinetoIdArgs, kept_args,
    )  # fmt: skip
    report.device_activities += len(activities)
    report.device_attached += len(activities) - len(unattached)
    for at, reason in unattached:
        report.device_unattached[_UNATTACHED[reason]] += 1
        if len(report.device_unattached_examples) < REPORT_EXAMPLES:
            report.device_unattached_examples.append((activities[at].name, _UNATTACHED[reason]))
    if not sort_by_field(activities, "ts_us"):  # in C where every start is a float
        activities.sort(key=attrgetter("ts_us"))
    return activities
