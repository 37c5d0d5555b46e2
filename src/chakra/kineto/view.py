"""A profiler (Kineto) trace alone, seen as the host trace and link the PyTorch converter takes.

The PyTorch front end converts a host execution trace linked with its Kineto trace
(:func:`chakra.pytorch.convert.convert`). A Kineto trace holds most of what the host trace would
add: the operators with their call nesting (by time, per thread), their input shapes and types,
scalar arguments (``Concrete Inputs``), autograd sequence numbers, and the collective arguments of
``record_param_comms``. :func:`profiler_view` builds from it a :class:`HostTrace` whose nodes are
the window's host operators and a :class:`LinkedTrace` whose timing is the events' own, so one
converter, with one set of GPU semantics (streams, syncs, NCCL, copies), serves both inputs:

* every ``cpu_op`` and ``user_annotation`` of a host thread is an operator; its parent is the
  innermost operator of its thread it starts inside, its id its place in start order (entry order,
  as the observer numbers ops);
* a runtime call (launch, copy, sync, event record, ``cudaMalloc``) is part of the operator it
  runs inside; one outside every operator becomes an operator of its own, so that its time and the
  work it launched keep their place;
* ``Input Dims`` and ``Input type`` become the operator's input shapes and types, ``Concrete
  Inputs`` its values (numbers as numbers: peers, tags and roots of collectives), the arguments of
  ``record_param_comms`` its collective attributes (``collective_name``, ``in_msg_nelems``,
  ``dtype``, ``pg_name``, ... as the host trace names them);
* device work, ``cuda_sync`` events and the sync and record calls are attached as linking does.

What a profiler trace lacks against a host trace: tensor identities (so no ``--data-deps``), operator
schemas, and the process-group record (groups come from ``distributedInfo.pg_config``).

Example:
    trace = load_kineto_trace("rank0.json")
    linked = profiler_view(trace, WHOLE_TRACE)
    conversion = convert(linked.host, linked=linked)
"""

from __future__ import annotations

import bisect
import math
from operator import attrgetter
from typing import Any

import msgspec

from chakra._kineto_events import sort_by_start, window_work
from chakra._kineto_view import own_copies, view_nodes
from chakra.collector import gc_paused
from chakra.kineto.window import Window
from chakra.pytorch.host import HostNode, HostTrace, IOLists
from chakra.pytorch.kineto import (
    NO_VALUE,
    ActivityArgs,
    KinetoEvent,
    KinetoEvents,
    KinetoInputArgs,
    KinetoTrace,
    classify,
)
from chakra.pytorch.link import HostTiming, LinkedTrace, LinkReport, attach_activities, enclosing_ops, nest_events

#: How the report names the join of a profiler trace alone.
JOIN_KEY = "none: the profiler trace alone"
#: ``scope`` of ``record_function`` ranges (RecordScope USER_SCOPE), of every other operator 0.
USER_SCOPE, FUNCTION_SCOPE = 7, 0
#: Categories of host events that are ranges of user code rather than operators.
_ANNOTATION_CATEGORIES = frozenset({"user_annotation"})
#: Operators whose scalar arguments matter to the converter (peers, tags, roots, async flags).
_CALL_PREFIXES = ("c10d::", "nccl:", "gloo:", "record_param_comms")
#: ``record_param_comms`` arguments and the host trace's names for them (reference §2.6).
_COMM_ATTRS = (
    ("collective_name", "collective_name"),
    ("in_msg_nelems", "in_msg_nelems"),
    ("out_msg_nelems", "out_msg_nelems"),
    ("dtype", "dtype"),
    ("pg_name", "pg_name"),
    ("pg_desc", "pg_desc"),
    ("group_size", "pg_size"),
    ("global_rank_start", "global_rank_start"),
    ("global_rank_stride", "global_rank_stride"),
    ("in_split_size", "in_split_size"),
    ("out_split_size", "out_split_size"),
)
_EMPTY = msgspec.Raw(b"[]")
_NO_IO = IOLists()
_NO_ATTRS: dict[str, Any] = {}
_START = attrgetter("ts")
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def window_events(events: KinetoEvents, window: Window) -> KinetoEvents:
    """The events of ``window``: host events starting in it, the device work and sync events of
    the calls among them (by correlation), device work without a call that starts in it, and device
    work launched before the window that ran in it (a device running behind its host: that work
    delayed the window's own, and without it a replay would run the window's work early).
    ``earlier_work`` counts the last kind."""
    if window.start_us is None and window.end_us is None:
        return events
    start_us = window.start_us if window.start_us is not None else -math.inf
    end_us = window.end_us if window.end_us is not None else math.inf
    out = KinetoEvents()
    # the lists are in start order: the window's events are one slice of each
    out.host_ops = _starting_in(events.host_ops, start_us, end_us)
    out.sync_calls = _starting_in(events.sync_calls, start_us, end_us)
    out.event_records = _starting_in(events.event_records, start_us, end_us)
    out.step_marks = _starting_in(events.step_marks, start_us, end_us)
    out.launches = {corr: e for corr, e in events.launches.items() if start_us <= e.ts < end_us}
    out.other_runtime = [e for e in events.other_runtime if start_us <= e.ts < end_us]
    kept = set(out.launches)
    kept.update(e.correlation for e in out.sync_calls if e.correlation is not None)
    known = set(events.launches)
    known.update(e.correlation for e in events.sync_calls if e.correlation is not None)
    # device work of the window, and work launched before it that ran in it (the device behind its host)
    out.device_ops, out.earlier_work = window_work(
        events.device_ops, kept, known, events.launches, start_us, end_us, True
    )
    out.syncs, _ = window_work(events.syncs, kept, known, events.launches, start_us, end_us, False)
    out.duplicate_correlations = events.duplicate_correlations
    return out


def _starting_in(events: list[KinetoEvent], start_us: float, end_us: float) -> list[KinetoEvent]:
    """The events, in start order, that start in [``start_us``, ``end_us``)."""
    first = bisect.bisect_left(events, start_us, key=_START)
    return events[first : bisect.bisect_left(events, end_us, lo=first, key=_START)]


def _runtime_calls(events: KinetoEvents) -> list[KinetoEvent]:
    return [*events.launches.values(), *events.sync_calls, *events.event_records, *events.other_runtime]


def _outside_operators(events: KinetoEvents) -> list[KinetoEvent]:
    """Runtime calls that no operator of their thread encloses (``ProfilerStep#N`` marks a step,
    it launches nothing: linking never takes it for a call's operator)."""
    calls = _runtime_calls(events)
    return [call for call, op in zip(calls, enclosing_ops(events.host_ops, None, calls), strict=True) if op < 0]


def _values(event: KinetoEvent, args: KinetoInputArgs) -> msgspec.Raw:
    """``Concrete Inputs`` as host-trace values: numbers and flags parsed for the operators whose
    scalar arguments the converter reads, the recorded texts for the rest."""
    raw = args.concrete_inputs
    if raw is NO_VALUE or raw == b"null":
        return _EMPTY
    if not event.name.startswith(_CALL_PREFIXES):
        return raw
    values: list[Any] = []
    for text in _decode(raw):
        if isinstance(text, str):
            stripped = text.strip()
            if stripped in ("True", "False"):
                values.append(stripped == "True")
                continue
            try:
                values.append(int(stripped))
                continue
            except ValueError:
                pass
        values.append(text)
    return msgspec.Raw(_encode(values))


def _inputs(event: KinetoEvent) -> IOLists:
    args = event.args
    if not isinstance(args, KinetoInputArgs):  # a trace loaded without them
        return _NO_IO
    if args.input_dims is NO_VALUE and args.input_type is NO_VALUE and args.concrete_inputs is NO_VALUE:
        return _NO_IO
    dims = _EMPTY if args.input_dims is NO_VALUE else args.input_dims
    types = _EMPTY if args.input_type is NO_VALUE else args.input_type
    return IOLists(_values(event, args), dims, types)


def _comm_attrs(event: KinetoEvent) -> dict[str, Any]:
    args = event.args
    if args.collective_name is None:
        return _NO_ATTRS
    found = {name: getattr(args, key) for key, name in _COMM_ATTRS if getattr(args, key) is not None}
    if isinstance(found.get("pg_name"), int):
        found["pg_name"] = str(found["pg_name"])
    return found


def profiler_view(trace: KinetoTrace, window: Window, events: KinetoEvents | None = None) -> LinkedTrace:
    """``trace``'s events of ``window`` as a host trace linked with them (``source`` "kineto-only")."""
    with gc_paused():
        return _view(trace, window, events if events is not None else classify(trace))


def _view(trace: KinetoTrace, window: Window, every: KinetoEvents) -> LinkedTrace:
    events = window_events(every, window)
    orphans = _outside_operators(events)
    operators = events.host_ops + orphans
    sort_by_start(operators)
    events.host_ops = operators
    exclusive, parents = nest_events(operators)
    # an operator's node is its place, from 1; made in C, with its timing and its thread numbered
    nodes, timing = view_nodes(
        operators, exclusive, parents, HostNode, HostTiming, KinetoInputArgs, _NO_IO, NO_VALUE, _NO_ATTRS,
        _ANNOTATION_CATEGORIES, (USER_SCOPE, FUNCTION_SCOPE), _inputs, _comm_attrs,
    )  # fmt: skip

    host = HostTrace(path=trace.path, schema="", layout="kineto", nodes=nodes, notes=list(window.notes))
    if events.earlier_work:
        host.notes.append(
            f"{events.earlier_work} device activities launched before {window.label} ran in it (the device ran "
            "behind its host): kept at the head of their streams"
        )
    if orphans:
        host.notes.append(f"{len(orphans)} runtime calls outside every operator made operators of their own")
    report = LinkReport(join_key=JOIN_KEY, host_ops=len(nodes), host_matched=len(nodes))
    report.kineto_ops = report.kineto_matched = len(operators)
    report.duplicate_correlations = len(events.duplicate_correlations)
    # what the conversion keeps of the events past the view (the activities' args, sync calls, event
    # records) is its own: a whole trace's conversion lets the events go, and these, one in each of the
    # allocator's pools, kept every pool of them in use (a tenth of its peak)
    activities = attach_activities(events, parents, None, report, kept_args=ActivityArgs)  # op k is node k + 1
    return LinkedTrace(
        host,
        trace,
        timing,
        activities,
        report,
        source="kineto-only",
        sync_calls=own_copies(events.sync_calls),
        event_records=own_copies(events.event_records),
        events=events,
    )
