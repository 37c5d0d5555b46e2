"""GPU synchronisation as dependencies: where a host thread waited for a stream, and a stream for
another (linked and profiler-only conversions alike).

A stream runs its work in launch order, so "the work a sync waits for" is the last activity of a
stream launched before a moment. The moments and streams come from the trace's ``cuda_sync``
events when it has them (``enable_cuda_sync_events``, reference §2.7), joined to the runtime call by
``correlation``; otherwise they are inferred from the calls alone, and the report says so.

* ``cudaStreamSynchronize`` (``Stream Sync``): the host waits for the stream's last activity
  launched before the call. Without the sync event the stream is unknown: the stream whose last
  activity launched before the call ends during it is taken (inferred).
* ``cudaDeviceSynchronize`` (``Context Sync``): the host waits for every stream of the device.
* ``cudaEventSynchronize`` (``Event Sync``): the host waits for the last activity of
  ``wait_on_stream`` launched before the ``cudaEventRecord`` whose correlation is
  ``wait_on_cuda_event_record_corr_id``; inferred like a stream sync without the event.
  ``cudaEventQuery`` also leaves an ``Event Sync``, but a query does not block: no dependency.
* a copy or memset whose runtime call returned only after it finished (``cudaMemcpy``, a copy to
  pageable memory) held the host: a blocking copy.
* ``cudaStreamWaitEvent`` (``Stream Wait Event``): the first activity of the waiting stream
  launched after the call depends on the last activity of ``wait_on_stream`` launched before the
  event's record. Without the event, the record is the thread's last ``cudaEventRecord`` before
  the call, the awaited stream the one the thread launched on last before the record, the waiting
  stream the one it launches on next (inferred from the recorded order).
* device work that started well after its launch and its stream's previous work, with neither
  explaining the delay, waited for the other stream whose work ended just before it started
  (inferred from timing: :func:`timed_stream_waits`).

A host wait is a wait of :mod:`chakra.pytorch.waits`: the operator's exclusive time loses the
waiting, what it did after the wait becomes a part that depends on the awaited work.

Example:
    sync_waits(builder, by_thread, segments)   # in chakra.pytorch.convert, linked mode
    stream_waits(builder, by_thread)
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from functools import cached_property
from itertools import chain, compress, repeat
from operator import is_not
from typing import Any

from chakra._item_scans import late_starts
from chakra._items import gather
from chakra.pytorch.items import STREAM_THREAD, Builder, Item, Segment, sorted_by_end, starts_us
from chakra.pytorch.kineto import KinetoEvent
from chakra.pytorch.link import DeviceActivity

STREAM_SYNC = frozenset({"cudaStreamSynchronize", "hipStreamSynchronize"})
DEVICE_SYNC = frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize"})
EVENT_SYNC = frozenset({"cudaEventSynchronize", "hipEventSynchronize"})
STREAM_WAIT = frozenset({"cudaStreamWaitEvent", "hipStreamWaitEvent"})
#: A copy's runtime call that returns this soon (µs) after the copy ended waited for it.
BLOCKING_COPY_TOLERANCE_US = 1.0
#: Device work idle for longer than this (µs) after its launch and its stream's previous work
#: waited for something (a stream starts queued work within a few µs).
DEVICE_IDLE_US = 20.0
#: ... for the work of another stream that ended within this share of the delay before it started.
DEVICE_RESUME_SHARE = 0.1
#: Report keys of the dependencies added, by how they were found.
HOST_STREAM, HOST_STREAM_INFERRED = "host waits for a stream (Stream Sync)", "host waits for a stream (inferred)"
HOST_DEVICE = "host waits for the device (Context Sync)"
HOST_EVENT, HOST_EVENT_INFERRED = "host waits for an event (Event Sync)", "host waits for an event (inferred)"
HOST_COPY = "host waits for a blocking copy"
STREAM_EVENT = "stream waits for a stream (Stream Wait Event)"
STREAM_EVENT_INFERRED = "stream waits for a stream (inferred from cudaEventRecord/cudaStreamWaitEvent order)"
STREAM_TIMED = "stream waits for a stream (inferred from timing)"
DEVICE_AFTER_HOST_TIMED = "device work without its launch waits for the host (inferred from timing)"


class _Streams:
    """The device activities of a conversion by stream, in execution order, with their launch times."""

    def __init__(self, builder: Builder, by_thread: dict[Any, list[Item]]):
        self.by_stream = {key: items for key, items in by_thread.items() if isinstance(key, tuple)}
        linked = builder.linked
        assert linked is not None
        self.linked = linked
        self.sync_events: dict[int, DeviceActivity] = {
            a.correlation: a for a in linked.activities if a.cat == "cuda_sync" and a.correlation is not None
        }
        # their correlations as KinetoEvent.correlation reads them, gathered in C (an event record per kernel, at times)
        (correlations,) = gather(linked.event_records, (("args", "correlation"),))
        self.records = {
            correlation: record
            for correlation, record in zip(correlations, linked.event_records, strict=True)
            if isinstance(correlation, int) and not isinstance(correlation, bool)
        }
        # what only some calls need is made when first asked for (a trace may have none of them)
        self._launched: dict[Any, list[float]] = {}
        self._record_times: dict[Any, list[float]] = {}
        self._launch_times: dict[Any, list[float]] = {}

    @cached_property
    def records_by_thread(self) -> dict[Any, list[KinetoEvent]]:
        """The event records by the thread that made them, in the trace's order."""
        found: dict[Any, list[KinetoEvent]] = {}
        for record in self.linked.event_records:
            found.setdefault(record.tid, []).append(record)
        return found

    @cached_property
    def launches_by_thread(self) -> dict[Any, list[tuple[float, Item]]]:
        """Each thread's device work (launch time µs, item), in launch order."""
        found: dict[Any, list[tuple[float, Item]]] = {}
        for items in self.by_stream.values():
            for item in items:
                activity = item.activity
                if activity is not None and activity.launch_ts_us is not None:
                    found.setdefault(activity.launch_thread, []).append((activity.launch_ts_us, item))
        for launches in found.values():
            launches.sort(key=lambda pair: pair[0])
        return found

    def record_times(self, thread: Any) -> list[float]:
        """When the event records of ``thread`` were made (µs, ascending; computed once)."""
        if thread not in self._record_times:
            self._record_times[thread] = [r.ts for r in self.records_by_thread.get(thread, [])]
        return self._record_times[thread]

    def launch_times(self, thread: Any) -> list[float]:
        """When ``thread`` launched its device work (µs, ascending; computed once)."""
        if thread not in self._launch_times:
            self._launch_times[thread] = [t for t, _ in self.launches_by_thread.get(thread, [])]
        return self._launch_times[thread]

    def launched(self, key: Any) -> list[float] | None:
        """When the activities of stream ``key`` were launched (µs, their start where the launch is
        unknown), in the stream's order; None for no such stream (computed once)."""
        if key not in self._launched:
            items = self.by_stream.get(key)
            if items is None:
                return None
            (launches,) = gather(items, (("activity", "launch_ts_us"),))
            # work without its launch counts from its start
            self._launched[key] = [_launch_us(i) for i in items] if None in launches else launches
        return self._launched[key]

    def last_before(self, key: Any, t_us: float) -> Item | None:
        """The last activity of stream ``key`` launched before ``t_us``."""
        launched = self.launched(key)
        if not launched:
            return None
        at = bisect.bisect_left(launched, t_us) - 1
        return self.by_stream[key][at] if at >= 0 else None

    def first_after(self, key: Any, t_us: float) -> Item | None:
        """The first activity of stream ``key`` launched after ``t_us``."""
        launched = self.launched(key)
        if not launched:
            return None
        at = bisect.bisect_right(launched, t_us)
        return self.by_stream[key][at] if at < len(launched) else None

    def streams_of(self, device: Any) -> list[Any]:
        return [key for key in self.by_stream if device is None or key[1] == device]

    def ending_during(self, call: KinetoEvent) -> Item | None:
        """Inferred: among every stream's last activity launched before ``call``, the one that
        ends latest while the call runs (``None`` when none does: nothing was waited for)."""
        best: Item | None = None
        for key in self.by_stream:
            item = self.last_before(key, call.ts)
            during = item is not None and call.ts < item.end_us <= call.ts + call.dur + BLOCKING_COPY_TOLERANCE_US
            if during and (best is None or item.end_us > best.end_us):  # type: ignore[union-attr]
                best = item
        return best


#: The categories of copies and fills: a synchronous one holds its host thread until it is done.
_COPY_CATEGORIES = frozenset({"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})


def _launch_us(item: Item) -> float:
    activity = item.activity
    if activity is not None and activity.launch_ts_us is not None:
        return activity.launch_ts_us
    return item.ts_us or 0.0


def _int_arg(activity: DeviceActivity, key: str) -> int | None:
    value = activity.args.get(key)
    return value if isinstance(value, int) and value >= 0 else None


def _awaited(streams: _Streams, call: KinetoEvent) -> tuple[list[Item], str] | None:
    """What host sync ``call`` waited for, and how that was found (``None``: not a host wait)."""
    event = streams.sync_events.get(call.correlation) if call.correlation is not None else None
    device = event.device if event is not None else None
    if call.name in DEVICE_SYNC:
        found = [streams.last_before(key, call.ts) for key in streams.streams_of(device)]
        return [i for i in found if i is not None], HOST_DEVICE
    if call.name in STREAM_SYNC:
        stream = _int_arg(event, "stream") if event is not None else None
        if stream is not None:
            item = streams.last_before((STREAM_THREAD, device, stream), call.ts)
            return ([item] if item is not None else []), HOST_STREAM
        inferred = streams.ending_during(call)
        return ([inferred] if inferred is not None else []), HOST_STREAM_INFERRED
    if call.name in EVENT_SYNC:
        stream = _int_arg(event, "wait_on_stream") if event is not None else None
        if stream is not None and event is not None:
            record = streams.records.get(_int_arg(event, "wait_on_cuda_event_record_corr_id"))  # type: ignore[arg-type]
            item = streams.last_before((STREAM_THREAD, device, stream), record.ts if record is not None else call.ts)
            return ([item] if item is not None else []), HOST_EVENT
        inferred = streams.ending_during(call)
        return ([inferred] if inferred is not None else []), HOST_EVENT_INFERRED
    return None


def _segment_at(segs: Sequence[Segment], starts: Sequence[float], t_us: float) -> Segment | None:
    at = bisect.bisect_right(starts, t_us) - 1
    if at >= 0 and segs[at].start_us <= t_us < segs[at].end_us:
        return segs[at]
    return None


def _wait(
    builder: Builder,
    thread_items: list[Item],
    item_starts: list[float],
    segs: list[Segment],
    starts: list[float],
    waited: Item,
    from_us: float,
    until_us: float,
    after_us: float,
) -> bool:
    """Register that the thread waited from ``from_us`` until ``until_us`` for ``waited`` inside
    the segment there: the segment is split at ``from_us``, its tail marked waited (a part after
    the wait depends on ``waited``). Without a wait (done before), the thread's next item after
    ``after_us`` depends on ``waited``. Returns whether a dependency was added."""
    if until_us > from_us:
        segment = _segment_at(segs, starts, from_us)
        if segment is not None and not segment.waited and segment.owner is not None:
            tail = segment
            if from_us > segment.start_us:
                tail = Segment(from_us, segment.end_us, segment.owner, False)
                segment.end_us = from_us
                at = bisect.bisect_right(starts, from_us)
                segs.insert(at, tail)
                starts.insert(at, from_us)
            until_us = min(until_us, tail.end_us)
            j = bisect.bisect_left(item_starts, tail.end_us)
            resumed = thread_items[j] if j < len(thread_items) else None
            tail.waited, tail.wait_end_us = True, until_us
            builder.wait_edges.append((waited, resumed if resumed is not None else waited))
            tail.edge = len(builder.wait_edges) - 1
            wait_us = until_us - from_us
            tail.owner.excl_us = max(0.0, tail.owner.excl_us - wait_us)  # type: ignore[union-attr]
            builder.report.waits += 1
            builder.report.wait_us += wait_us
            return True
    j = bisect.bisect_left(item_starts, after_us)
    if j < len(thread_items) and waited.node_id not in thread_items[j].data:
        thread_items[j].data += (waited.node_id,)
        return True
    return False


def sync_waits(builder: Builder, by_thread: dict[Any, list[Item]], segments: dict[Any, list[Segment]]) -> None:
    """Host waits for device work (module docstring), as waits in ``segments``; count them."""
    linked = builder.linked
    if linked is None:
        return
    streams = _Streams(builder, by_thread)
    counts = builder.report.sync_deps
    # a thread's segments (in start order: waits.nest) with their starts, made when first needed
    ordered: dict[Any, tuple[list[Segment], list[float]]] = {}

    def segments_of(thread: Any) -> tuple[list[Segment], list[float]]:
        if thread not in ordered:
            segs = segments[thread]
            ordered[thread] = (segs, gather(segs, (("start_us",),))[0])
        return ordered[thread]

    item_starts_of: dict[Any, list[float]] = {}

    def starts_of(thread: Any, thread_items: list[Item]) -> list[float]:
        if thread not in item_starts_of:
            item_starts_of[thread] = starts_us(thread_items)
        return item_starts_of[thread]

    for call in linked.sync_calls:
        found = _awaited(streams, call)
        thread_items = by_thread.get(call.tid)
        if found is None or not found[0] or thread_items is None or call.tid not in segments:
            continue
        items, how = found
        last = max(items, key=lambda i: i.end_us)
        segs, starts = segments_of(call.tid)
        end_us = call.ts + call.dur
        # the host resumes after the last of them to finish
        item_starts = starts_of(call.tid, thread_items)
        if _wait(builder, thread_items, item_starts, segs, starts, last, call.ts, min(last.end_us, end_us), end_us):
            counts[how] += 1
    for items in streams.by_stream.values():
        (categories,) = gather(items, (("activity", "cat"),))
        for item in compress(items, map(_COPY_CATEGORIES.__contains__, categories)):
            activity = item.activity
            assert activity is not None
            launch, call_end = activity.launch_ts_us, activity.launch_end_us
            if launch is None or call_end is None or activity.launch_thread not in segments:
                continue
            if launch <= item.ts_us <= item.end_us <= call_end + BLOCKING_COPY_TOLERANCE_US:  # type: ignore[operator]
                segs, starts = segments_of(activity.launch_thread)
                thread_items = by_thread.get(activity.launch_thread, [])
                item_starts = starts_of(activity.launch_thread, thread_items)
                if _wait(builder, thread_items, item_starts, segs, starts, item, item.ts_us, item.end_us, call_end):  # type: ignore[arg-type]
                    counts[HOST_COPY] += 1


def stream_waits(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """Stream-to-stream dependencies of ``cudaStreamWaitEvent`` (module docstring); count them."""
    linked = builder.linked
    if linked is None:
        return
    streams = _Streams(builder, by_thread)
    counts = builder.report.sync_deps
    for call in linked.sync_calls:
        if call.name not in STREAM_WAIT:
            continue
        event = streams.sync_events.get(call.correlation) if call.correlation is not None else None
        waiting_key: Any = None
        awaited_key: Any = None
        record_us = call.ts
        if (
            event is not None
            and _int_arg(event, "stream") is not None
            and _int_arg(event, "wait_on_stream") is not None
        ):
            waiting_key = (STREAM_THREAD, event.device, _int_arg(event, "stream"))
            awaited_key = (STREAM_THREAD, event.device, _int_arg(event, "wait_on_stream"))
            record = streams.records.get(_int_arg(event, "wait_on_cuda_event_record_corr_id"))  # type: ignore[arg-type]
            if record is not None:
                record_us = record.ts
            how = STREAM_EVENT
        else:
            records = streams.records_by_thread.get(call.tid, [])
            at = bisect.bisect_left(streams.record_times(call.tid), call.ts) - 1
            launches = streams.launches_by_thread.get(call.tid, [])
            times = streams.launch_times(call.tid)
            if at < 0 or not launches:
                continue
            record_us = records[at].ts
            before = bisect.bisect_left(times, record_us) - 1
            after = bisect.bisect_right(times, call.ts)
            if before < 0 or after >= len(launches):
                continue
            awaited_key, waiting_key = launches[before][1].thread, launches[after][1].thread
            how = STREAM_EVENT_INFERRED
        if awaited_key == waiting_key:
            continue
        source = streams.last_before(awaited_key, record_us)
        target = streams.first_after(waiting_key, call.ts)
        if source is None or target is None or source.node_id in target.data:
            continue
        if source.end_us > (target.ts_us or 0.0) + BLOCKING_COPY_TOLERANCE_US:
            counts["stream wait not added: the waiting work started before the awaited work ended"] += 1
            continue
        target.data += (source.node_id,)
        counts[how] += 1


def timed_stream_waits(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """Device work that started later than its launch and its stream's previous work, by more
    than :data:`DEVICE_IDLE_US`, waited for something the trace does not name (a filtered trace,
    a wait without sync events): it depends on the work of another stream of its device that ended
    last before it started, when that ended within :func:`_resume_us` of its start. Device work
    without its launch in the trace (a CUDA graph's replay, a call the profiler left out) may also
    have waited for its host: there the host's ops are candidates too (inferred from timing,
    counted as such)."""
    streams = [(key, items) for key, items in by_thread.items() if isinstance(key, tuple)]
    if not streams:
        return
    on_device: dict[Any, list[Item]] = {}
    for key, items in streams:
        on_device.setdefault(key[1], []).extend(items)
    ends = {device: _by_end(items) for device, items in on_device.items()}
    host_items = list(chain.from_iterable(items for key, items in by_thread.items() if not isinstance(key, tuple)))
    host: tuple[list[float], list[Item]] | None = None  # by end, made when work without a launch needs it
    counts = builder.report.sync_deps
    # the first work of a stream, launched before the trace or the window, was ready when it began
    (starts,) = gather(host_items + [s[0] for _, s in streams if s], (("ts_us",),))
    first_us = min(compress(starts, map(is_not, starts, repeat(None))), default=0.0)
    for key, items in streams:
        for item, ready_us in _late_starts(items, first_us):
            start_us = item.ts_us or 0.0
            launch_us = item.activity.launch_ts_us if item.activity is not None else None
            delay_us = start_us - ready_us
            found = [(_last_ended(*ends[key[1]], key, start_us), STREAM_TIMED)]
            if launch_us is None:
                if host is None:
                    host = _by_end(host_items)
                found.append((_last_ended(*host, key, start_us), DEVICE_AFTER_HOST_TIMED))
            ended = [(source, how) for source, how in found if source is not None and source.end_us > ready_us]
            if not ended:
                continue
            source, how = max(ended, key=lambda pair: pair[0].end_us)
            if start_us - source.end_us <= _resume_us(delay_us) and source.node_id not in item.data:
                item.data += (source.node_id,)
                counts[how] += 1


def _late_starts(items: list[Item], first_us: float) -> list[tuple[Item, float]]:
    """The items of one stream (in order) that started more than :data:`DEVICE_IDLE_US` after they
    were ready, with when that was (µs): the later of their launch and the end of the stream's work
    before them (``first_us`` before the first). In C (:func:`chakra._items.late_starts`) where the
    times are floats."""
    found = late_starts(items, first_us, DEVICE_IDLE_US)
    if found is not None:
        return [(items[k], ready_us) for k, ready_us in zip(*found, strict=True)]
    late = []
    prev_end = first_us
    for item in items:
        start_us = item.ts_us or 0.0
        launch_us = item.activity.launch_ts_us if item.activity is not None else None
        ready_us = max(prev_end, launch_us if launch_us is not None else float("-inf"))
        prev_end = max(prev_end, item.end_us)
        if not start_us - ready_us <= DEVICE_IDLE_US:
            late.append((item, ready_us))
    return late


def _by_end(items: list[Item]) -> tuple[list[float], list[Item]]:
    """``items`` (the timed ones) sorted by when they ended, with those ends (µs)."""
    return sorted_by_end([i for i in items if i.ts_us is not None])


def _last_ended(times: list[float], items: list[Item], track: Any, t_us: float) -> Item | None:
    """The item of ``items`` (sorted by end, ``times``) that ended last at or before ``t_us``,
    not on ``track``."""
    at = bisect.bisect_right(times, t_us) - 1
    while at >= 0 and items[at].thread == track:
        at -= 1
    return items[at] if at >= 0 else None


def _resume_us(delay_us: float) -> float:
    """How soon (µs) after the awaited work ended a stream that waited for it starts again."""
    return max(DEVICE_IDLE_US, DEVICE_RESUME_SHARE * delay_us)
