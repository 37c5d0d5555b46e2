"""Where threads waited, and the exclusive time of ops (linked mode, from timing): the call-tree
nesting of each CPU thread into :class:`~chakra.pytorch.items.Segment` stretches (:func:`nest`), the
split of an issuer at the moment its work started elsewhere (:func:`split_at_issue`), the waits a
thread resumed from (:func:`find_waits`, tied by :func:`tie_waits`), the parts an op spends after its
children (:func:`split_parts`), and the pick-up delay of worker-run transfers (:func:`absorb_pickup`).
The rules are in the module docstring of :mod:`chakra.pytorch.convert`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from operator import lt, not_
from typing import Any

from chakra._item_scans import part_candidates, wait_candidates
from chakra._items import gather, nest_thread
from chakra._parts import make_parts
from chakra.pytorch.items import Builder, Item, Segment, order_key, sort_by_attribute, sorted_by_end, starts_us
from chakra.pytorch.report import COMM_KIND_LABEL
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, METADATA_NODE

#: A thread that resumes this soon after an activity it waited for finished is taken to have
#: waited for it. Measured resume latencies: 5-40 µs after a gloo work completes (Python returning
#: from ``Work.wait``), a few µs after a CUDA sync; 50 µs covers both with margin.
WAIT_RESUME_TOLERANCE_US = 50.0
#: ... or within this share of the wait itself (long waits on a busy machine resume later).
WAIT_RESUME_SHARE = 0.25
#: Busy time an op spends after one of its children becomes a node of its own from this length on
#: (µs); shorter stretches stay in the op (at its start), which keeps small ops whole.
PART_MIN_US = 20.0
#: A thread idle for longer than this between two top-level ops (µs) ended a busy period: the op
#: after it was woken by another thread (:func:`chakra.pytorch.dependencies.inter_thread`). Shorter
#: gaps are its own bookkeeping between back-to-back ops.
INTER_THREAD_IDLE_US = 20.0
#: The node types of a communication transfer (:mod:`chakra.pytorch.transfers`).
TRANSFER_TYPES = frozenset({COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE})


def nest(by_thread: dict[Any, list[Item]]) -> dict[Any, list[Segment]]:
    """Per CPU thread: depth of every op, call-tree parents (``ctrl_deps``) and the segments of
    exclusive time where the thread ran no child (owner ``None``: between top-level ops), in start
    order (the passes after keep them so); each op's exclusive time is the sum of its segments
    (:func:`chakra._items.nest_thread`, in C).

    The open ops are a stack, each with a cursor where its exclusive time resumes: an op starting
    inside the top one cuts the top's time there; an op closing moves its parent's cursor past
    everything below it (a child may outlast its parent: gloo's recv runs on after ``c10d::recv_``
    returns, and that time is the child's, not the grandparent's)."""
    return {
        thread: nest_thread(items, Segment)
        for thread, items in by_thread.items()
        if not isinstance(thread, tuple)  # device streams have no nesting
    }


def _with_dependencies(builder: Builder) -> list[Item]:
    """The items, in the builder's order, that have data dependencies (picked in C: before the chains
    are added, most have none)."""
    items = list(builder.items.values())
    (dependencies,) = gather(items, (("data",),))
    return list(itertools.compress(items, dependencies))


def split_at_issue(builder: Builder, segments: dict[Any, list[Segment]]) -> None:
    """Where work on another thread started while the op that issued it was still running
    (a gloo ``c10d::`` op that stays busy after handing its work to the worker), split the
    issuer's time at that moment: the work depends on the issuer's first piece, the rest
    becomes a part (or a wait, if the issuer then waited for the work)."""
    issued: list[tuple[float, Item]] = []  # (when work started elsewhere, its issuer), in the items' order
    for item in _with_dependencies(builder):
        if item.ts_us is None or isinstance(item.thread, tuple):
            continue
        for dep in item.data:
            issuer = builder.items.get(dep)
            if (
                issuer is None
                or issuer.ts_us is None
                or isinstance(issuer.thread, tuple)
                or issuer.thread == item.thread
                or not issuer.ts_us < item.ts_us < issuer.end_us - PART_MIN_US
            ):
                continue
            issued.append((item.ts_us, issuer))
    if not issued:
        return
    issuers = {issuer.node_id for _, issuer in issued}  # only their segments are looked at
    by_owner: dict[int, list[Segment]] = defaultdict(list)
    for segs in segments.values():
        for segment in segs:
            if segment.owner is not None and segment.owner.node_id in issuers:
                by_owner[segment.owner.node_id].append(segment)
    grown: set[Any] = set()  # threads given a segment: sorted again, the later passes read them in start order
    for start_us, issuer in issued:
        for segment in by_owner.get(issuer.node_id, []):
            if segment.start_us < start_us < segment.end_us - PART_MIN_US:
                rest = Segment(start_us, segment.end_us, issuer, False)
                segment.end_us = start_us
                segments[issuer.thread].append(rest)
                by_owner[issuer.node_id].append(rest)
                grown.add(issuer.thread)
                break
    for thread in grown:
        sort_by_attribute(segments[thread], "start_us")


def find_waits(builder: Builder, by_thread: dict[Any, list[Item]], segments: dict[Any, list[Segment]]) -> None:
    """Dependencies for the places a thread waited (see :mod:`chakra.pytorch.convert`)."""
    cpu_threads = [t for t in by_thread if not isinstance(t, tuple)]
    issued: dict[Any, list[Item]] = defaultdict(list)  # thread -> async items it started
    for item in _with_dependencies(builder):
        if item.ts_us is None or item.node_type == METADATA_NODE:
            continue
        if isinstance(item.thread, tuple):
            continue  # device work: a host waits for it only through a sync (chakra.pytorch.syncs)
        for dep in item.data:
            parent = builder.items.get(dep)
            if parent is not None and parent.thread != item.thread and not isinstance(parent.thread, tuple):
                issued[parent.thread].append(item)
    tops: dict[Any, _TopLevel] = {}  # made when first asked: the threads' items do not change here
    # each thread's top-level items, for the others (none where there is one thread)
    top_items = {t: list(itertools.compress(by_thread[t], map(not_, gather(by_thread[t], (("depth",),))[0])))
                 for t in cpu_threads if len(cpu_threads) > 1}  # fmt: skip
    for thread in cpu_threads:
        items = by_thread[thread]
        issued_ends, issued_here = sorted_by_end(issued.get(thread, []))
        others = [i for t in cpu_threads if t != thread for i in top_items[t]]
        # inside an op: anything the thread could have waited for; between top-level ops only
        # what it issued itself (a worker thread idles between works without waiting for them)
        inside_ends, inside = sorted_by_end(issued_here + others)
        if not inside:
            continue  # nothing this thread could have waited for (inside holds what it issued too)
        starts = starts_us(items)
        lists = {True: (inside, inside_ends), False: (issued_here, issued_ends)}
        mine = {id(i) for i in issued_here}
        heads: list[Segment] = []
        segs = segments.get(thread, [])
        # most segments hold no end of what the thread could wait for: those that do are found in C
        looked_at = wait_candidates(segs, inside_ends, issued_ends)
        for segment in segs if looked_at is None else map(segs.__getitem__, looked_at):
            if segment.waited:
                continue  # a sync's wait (chakra.pytorch.syncs)
            seg_start, seg_end, owner = segment.start_us, segment.end_us, segment.owner
            candidates, ends = lists[owner is not None]
            k = bisect.bisect_right(ends, seg_end) - 1
            if k < 0 or ends[k] <= seg_start:
                continue
            waited = candidates[k]
            wait_start = seg_start
            if id(waited) not in mine and owner is not None:
                # waiting for another thread's work starts when that thread took it up: before,
                # this thread was still busy handing it over (Python calling backward())
                top_level = tops.get(waited.thread)
                if top_level is None:
                    top_level = tops[waited.thread] = _TopLevel(by_thread[waited.thread])
                wait_start = max(seg_start, min(top_level.busy_since(waited), ends[k]))
            wait_us = ends[k] - wait_start
            if seg_end - ends[k] > max(WAIT_RESUME_TOLERANCE_US, WAIT_RESUME_SHARE * wait_us):
                continue
            j = bisect.bisect_left(starts, seg_end)
            if j >= len(items):
                continue
            if wait_start > seg_start:
                heads.append(Segment(seg_start, wait_start, owner, segment.first))
                segment.start_us, segment.first = wait_start, False
            builder.wait_edges.append((waited, items[j]))
            if owner is not None:
                owner.excl_us = max(0.0, owner.excl_us - wait_us)
            segment.waited = True
            segment.wait_end_us = ends[k]
            segment.edge = len(builder.wait_edges) - 1
            builder.report.waits += 1
            builder.report.wait_us += wait_us
        if heads:
            segments[thread].extend(heads)
            sort_by_attribute(segments[thread], "start_us")


class _TopLevel:
    """A thread's top-level timed ops in time order, with their ends, for :meth:`busy_since`."""

    def __init__(self, items: list[Item]):
        self.tops = [i for i in items if i.depth == 0 and i.ts_us is not None]
        self.ends = [i.end_us for i in self.tops]
        self.ends_sorted = all(a <= b for a, b in itertools.pairwise(self.ends))

    def busy_since(self, item: Item) -> float:
        """When the busy period of ``item``'s thread that ``item`` ends began (µs): back through the
        thread's top-level ops that end by ``item``'s end while each starts within
        ``INTER_THREAD_IDLE_US`` of the one before."""
        end_us = item.end_us
        if self.ends_sorted:  # the usual case: those ending by then are a prefix
            count = bisect.bisect_right(self.ends, end_us)
            tops, ends = self.tops, self.ends
        else:
            kept = [k for k, end in enumerate(self.ends) if end <= end_us]
            tops, ends = [self.tops[k] for k in kept], [self.ends[k] for k in kept]
            count = len(kept)
        if count == 0:
            return item.ts_us or 0.0
        since = tops[count - 1].ts_us or 0.0
        for k in range(count - 2, -1, -1):
            if since - ends[k] > INTER_THREAD_IDLE_US:
                break
            since = tops[k].ts_us or 0.0
        return since


def split_parts(builder: Builder, by_thread: dict[Any, list[Item]], segments: dict[Any, list[Segment]]) -> None:
    """Give busy exclusive time that an op spent *after* one of its children (at least
    ``PART_MIN_US``, or any time after a wait) a node of its own at that place in the thread,
    named like the op: left at the op's start it would delay the op's children and hide
    overlap with what they issued.

    A communication transfer keeps its busy time whole: all that a work op does outside the ops
    inside it is the collective's (gloo's all-gather moves its bytes between packing its buffers
    with ``aten::view``/``aten::empty`` and unpacking them with ``aten::copy_``; split, that time
    became CPU compute nodes and the collective the 50 µs before its first inner op). The inner
    ops stay what they are, after it in the graph.

    A stretch in which the op launched device work becomes a part whatever its length, and the
    work depends on that part: the work cannot start before its launch, which a dependency on the
    op's first node (placed at its start) would allow."""
    launched = _launches_by_owner(builder)
    for thread, segs in segments.items():
        # most segments are an op's first stretch or short: those that may hold a part are found in C,
        # and the parts made there, by the rule above
        candidates = part_candidates(segs, launched, PART_MIN_US)
        next_id = make_parts(
            segs, candidates, launched, thread, builder.next_id, Item, COMP_NODE, TRANSFER_TYPES, PART_MIN_US,
            builder.items, by_thread[thread], builder.wait_edges,
        )  # fmt: skip
        if next_id > builder.next_id:
            builder.report.parts += next_id - builder.next_id
            builder.next_id = next_id
            sort_by_attribute(by_thread[thread], "key")


def _launches_by_owner(builder: Builder) -> dict[int, tuple[list[float], list[Item]]]:
    """Device work by the op that launched it: the launch times (sorted) and the work items."""
    works = builder.activity_items
    host_ids, launches = gather(works, (("activity", "host_id"), ("activity", "launch_ts_us")))
    times: dict[int, list[float]] = defaultdict(list)
    launched: dict[int, list[Item]] = defaultdict(list)
    for work, host_id, launch_ts_us in zip(works, host_ids, launches, strict=True):
        if host_id is not None and launch_ts_us is not None:
            times[host_id].append(launch_ts_us)
            launched[host_id].append(work)
    out = {}
    for owner, owner_times in times.items():
        owner_works = launched[owner]
        # most launch one work, the others in order already: sorted (stably) only if not
        if len(owner_times) > 1 and any(map(lt, owner_times[1:], owner_times)):
            order = sorted(range(len(owner_times)), key=owner_times.__getitem__)
            owner_times, owner_works = [owner_times[k] for k in order], [owner_works[k] for k in order]
        out[owner] = (owner_times, owner_works)
    return out


def tie_waits(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """The op that resumed after a wait depends on the *last* node of what it waited for: an op
    with children (a gloo work that copies, an autograd function) is only done when its last
    child or part is."""
    starts: dict[Any, list[float]] = {}  # a thread's starts, made when a wait first needs them
    for waited, resumed in builder.wait_edges:
        items = by_thread.get(waited.thread, [])
        if waited.thread not in starts:
            starts[waited.thread] = starts_us(items)
        k = bisect.bisect_left(starts[waited.thread], waited.end_us) - 1
        last = items[k] if k >= 0 and order_key(items[k]) >= order_key(waited) else waited
        if last.node_id not in resumed.data and last is not resumed:
            resumed.data += (last.node_id,)


def absorb_pickup(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """A transfer run by a worker thread (gloo) starts some time after its issuer handed it over
    and the worker was free (µs normally, ms for a group's first collective); nothing else
    explains that delay, so it counts as part of the communication as the program sees it:
    the transfer node starts at the hand-over."""
    for thread, items in by_thread.items():
        if isinstance(thread, tuple):
            continue
        (node_types,) = gather(items, (("node_type",),))
        for k in itertools.compress(range(len(items)), map(COMM_KIND_LABEL.__contains__, node_types)):  # transfers only
            item = items[k]
            if item.ts_us is None:
                continue
            issuers = [builder.items[d] for d in item.data if d in builder.items and builder.items[d].thread != thread]
            ready_us = max([i.end_us for i in issuers if i.ts_us is not None], default=None)
            if ready_us is None:
                continue
            if k > 0:
                ready_us = max(ready_us, items[k - 1].end_us)
            delay_us = item.ts_us - ready_us
            if delay_us > 0:
                # the node keeps its place in time order, where it was measured to start
                item.key = order_key(item)
                item.ts_us -= delay_us
                item.dur_us += delay_us
                item.excl_us += delay_us
