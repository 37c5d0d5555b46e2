"""The nodes of one conversion under construction: an :class:`Item` per host op, device activity
and part, the :class:`Segment` stretches of an op's exclusive time, and the :class:`Builder` that
holds them (and the rest of a conversion's state) and makes the items. The steps that add
dependencies are in :mod:`chakra.pytorch.waits`, :mod:`chakra.pytorch.dependencies` and
:mod:`chakra.pytorch.transfers`; :mod:`chakra.pytorch.encode` writes the items as nodes.
"""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any

import msgspec

from chakra._item_passes import device_items, group_by_thread
from chakra._item_scans import untimed_or_named
from chakra._items import by_end, gather, sort_by_field, timed_in_order, timed_items
from chakra.pytorch.comms import find_calls
from chakra.pytorch.host import PROCESS_GROUP_NODE, HostNode, HostTrace
from chakra.pytorch.kineto import SYNC_CATEGORY
from chakra.pytorch.link import SYNTHETIC_HOST_OPS, DeviceActivity, LinkedTrace
from chakra.pytorch.report import ConversionReport
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, METADATA_NODE

#: Observer roots (``[pytorch|profiler|execution_trace|...]``): no work of their own, dropped. The ops
#: linking skips (no Kineto op by design): one set, as :meth:`Builder._timed_items` relies on it.
SYNTHETIC_ROOTS = SYNTHETIC_HOST_OPS
#: The first element of a device stream's thread key, ``("stream", device, stream)``.
STREAM_THREAD = "stream"


class Segment(msgspec.Struct, gc=False):
    """A stretch of an op's exclusive time on its thread (``owner`` None: between top-level ops).
    (msgspec structs: a conversion makes a few of these and of :class:`Item` per op, and a
    dataclass's ``__init__`` runs in Python.)"""

    start_us: float
    end_us: float
    owner: Item | None
    first: bool  # starts where the owner starts
    waited: bool = False  # the thread waited here until wait_end_us (for wait_edges[edge])
    wait_end_us: float = 0.0
    edge: int = -1


class Item(msgspec.Struct, gc=False):
    """One node under construction. :func:`order_key` orders nodes in time (ties: parents first): ``key``
    where an item is given one, else ``(ts_us, -dur_us, node_id)`` (a pass that moves an item's times gives
    it that key first; a whole trace's three hundred thousand items are a third smaller without a tuple
    and a float each)."""

    node_id: int
    name: str
    node_type: int
    key: tuple[float, float, int] | None = None
    thread: Any = None  # chain key: Kineto tid, host tid, or ("stream", device, stream)
    ts_us: float | None = None
    dur_us: float = 0.0
    excl_us: float = 0.0
    is_cpu: bool = True
    host: HostNode | None = None
    activity: DeviceActivity | None = None
    # the node ids it depends on: tuples (a third the size of a list of one id), added to with ``+=``
    data: tuple[int, ...] = ()
    ctrl: tuple[int, ...] = ()
    # attributes a step adds (a transfer's): one shared empty tuple until then, not a list per item
    attrs: tuple[tuple[str, Any], ...] = ()
    depth: int = 0
    part_of: Item | None = None  # for the later parts of an op split at its children

    @property
    def end_us(self) -> float:
        return (self.ts_us or 0.0) + self.dur_us


def order_key(item: Item) -> tuple[float, float, int]:
    """Where ``item`` comes in time order: its ``key``, else ``(ts_us, -dur_us, node_id)`` (µs).

    Example:
        >>> order_key(Item(7, "mm", 4, ts_us=5.0, dur_us=2.0)), order_key(Item(1, "op", 4, (1.0, 0.0, 1)))
        ((5.0, -2.0, 7), (1.0, 0.0, 1))
    """
    key = item.key
    return key if key is not None else (item.ts_us, -item.dur_us, item.node_id)  # type: ignore[return-value]


def sort_by_attribute(objects: list[Any], name: str) -> None:
    """Sorts ``objects`` in place as ``objects.sort(key=attrgetter(name))`` does, items by ``"key"`` as
    ``objects.sort(key=order_key)`` does: in C when every value is a float or an item's key (a pass sorts
    a thread's items, or its segments by ``start_us``, a few times over), else by that sort.

    Example:
        >>> spans = [Segment(3.0, 4.0, None, False), Segment(1.0, 2.0, None, False)]
        >>> sort_by_attribute(spans, "start_us")
        >>> [s.start_us for s in spans]
        [1.0, 3.0]
    """
    if not sort_by_field(objects, name):
        objects.sort(key=order_key if name == "key" else attrgetter(name))


def starts_us(items: list[Item]) -> list[float]:
    """When ``items`` start (µs, ``ts_us``; an item without a start at 0.0), read in C: the passes
    bisect a thread's starts.

    Example:
        >>> starts_us([Item(1, "a", 4, (5.0, -1.0, 1), ts_us=5.0), Item(2, "b", 4, (0.0, 0.0, 2))])
        [5.0, 0.0]
    """
    (starts,) = gather(items, (("ts_us",),))
    return [start or 0.0 for start in starts] if None in starts else starts


def sorted_by_end(items: list[Item]) -> tuple[list[float], list[Item]]:
    """``items`` in the order they end (µs, ``end_us``; ties in list order), with those ends: as
    ``sorted(items, key=attrgetter("end_us"))`` sorts them, the ends read in C rather than through
    the property once an item (the passes sort a trace's items by end a few times over).

    Example:
        >>> first = Item(1, "a", 4, (5.0, -1.0, 1), ts_us=5.0, dur_us=1.0)
        >>> second = Item(2, "b", 4, (0.0, -2.0, 2), dur_us=2.0)  # no start: ends at its duration
        >>> ends, ordered = sorted_by_end([first, second])
        >>> ends, [item.node_id for item in ordered]
        ([2.0, 6.0], [2, 1])
    """
    found = by_end(items)  # in C where the times are floats and no end is NaN
    if found is not None:
        return found
    starts, durations = gather(items, (("ts_us",), ("dur_us",)))
    ends = [(start or 0.0) + duration for start, duration in zip(starts, durations, strict=True)]
    order = sorted(range(len(items)), key=ends.__getitem__)
    return [ends[k] for k in order], [items[k] for k in order]


class Builder:
    """Holds the state of one conversion; :func:`chakra.pytorch.convert.convert` drives it."""

    def __init__(self, host: HostTrace, linked: LinkedTrace | None, rank: int | None, data_deps: bool):
        self.host = host
        self.linked = linked
        self.rank = rank
        self.with_data_deps = data_deps
        self.report = ConversionReport(rank=rank, mode=linked.source if linked else "host-only")
        self.report.link = linked.report if linked else None
        self.items: dict[int, Item] = {}
        self.by_host_id = host.by_id()
        self.groups = host.process_groups()
        self.calls = find_calls(host.nodes, self.groups, self.by_host_id)
        self.metadata_item: Item | None = None
        self.wait_edges: list[tuple[Item, Item]] = []  # (waited, resumed), tied after split_parts
        self.activity_items: list[Item] = []  # the items of device work, in the order they were made
        self.next_id = max(self.by_host_id, default=0) + 1  # for nodes the host trace lacks

    def add_host_ops(self) -> None:
        """An item per host op, in time order where the ops are timed (the passes walk the items in
        that order, and objects made one after another lie together in memory); the dropped ops are
        reported in the file's order."""
        linked = self.linked is not None
        report, items = self.report, self.items
        report.host_ops += len(self.host.nodes)
        nodes = self.host.nodes
        if linked:
            assert self.linked is not None
            items.update(self._timed_items())
            # the ops without a timing, and the groups' record, are all the loop acts on (found in C)
            nodes = untimed_or_named(nodes, self.linked.timing, PROCESS_GROUP_NODE)
        for node in nodes:
            if linked and node.id in items:
                if node.name == PROCESS_GROUP_NODE:
                    self.metadata_item = items[node.id] = self._metadata_item(node)
                continue
            name = node.name
            if name in SYNTHETIC_ROOTS:
                report.drop(node.id, name, "observer root (no work of its own)")
                continue
            if name == PROCESS_GROUP_NODE:
                self.metadata_item = items[node.id] = self._metadata_item(node)
                continue
            if linked:
                reason = (
                    "recorded without an rf_id, so it cannot be timed"
                    if not node.rf_id
                    else "outside the profiled window (no Kineto op with its rf_id)"
                )
                report.drop(node.id, name, reason)
                continue
            items[node.id] = Item(node.id, name, COMP_NODE, (float(node.id), 0.0, node.id), thread=node.tid, host=node)

    @staticmethod
    def _metadata_item(node: HostNode) -> Item:
        """The process groups' record (its JSON in the inputs), first of all nodes."""
        return Item(node.id, node.name, METADATA_NODE, (float("-inf"), 0.0, node.id), host=node, is_cpu=False)

    def _timed_items(self) -> dict[int, Item]:
        """The items of the host ops that have a timing, by host id, made in time order: the passes walk
        each thread's items in that order, and objects made one after another lie together in memory
        (made in the file's order, children before their parent, the walks took twice as long)."""
        assert self.linked is not None
        timing = self.linked.timing
        return timed_items(timed_in_order(self.host.nodes, timing), timing, Item, COMP_NODE)  # in C

    def add_device_activities(self) -> None:
        """An item per device activity on its stream (``("stream", device, stream)``), after the host op
        that launched it (data and control); the sync events are dropped (made in C)."""
        if self.linked is None:
            return
        activities = self.linked.activities
        self.report.device_activities += len(activities)
        self.next_id, made, syncs = device_items(
            activities, self.items, Item, COMP_NODE, self.next_id, SYNC_CATEGORY, STREAM_THREAD
        )
        self.activity_items += made
        for activity in syncs:
            # orders streams (see dependencies.stream_waits); it does no work of its own
            self.report.drop(activity.name, activity.name, "synchronisation event (turned into dependencies)")

    def threads(self) -> dict[Any, list[Item]]:
        """The items but the groups' record by thread or stream, each in time order (``key``)."""
        by_thread: dict[Any, list[Item]] = defaultdict(list, group_by_thread(list(self.items.values()), METADATA_NODE))
        for items in by_thread.values():
            sort_by_attribute(items, "key")
        return by_thread
