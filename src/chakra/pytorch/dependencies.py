"""Dependencies that are not waits: each thread's and stream's order (:func:`chain`), a thread
woken by another (:func:`inter_thread`), the structure of a host-only conversion
(:func:`host_only_structure`) and, on request, tensor producer -> consumer edges across threads
(:func:`tensor_deps`). GPU synchronisation is :mod:`chakra.pytorch.syncs`'. The rules are in the module docstring of
:mod:`chakra.pytorch.convert`.
"""

from __future__ import annotations

import bisect
from typing import Any

import msgspec

from chakra._item_passes import chain_items
from chakra._item_scans import gap_starts, idle_starts
from chakra.pytorch.items import Builder, Item, sort_by_attribute, sorted_by_end
from chakra.pytorch.waits import INTER_THREAD_IDLE_US
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, METADATA_NODE

_decode_json = msgspec.json.Decoder().decode


def chain(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """Each op of a thread or stream after the one before it (the first after the groups' record)."""
    for items in by_thread.values():
        chain_items(items, builder.metadata_item)  # in C: a quarter of a million items in a whole trace


def inter_thread(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """A top-level op that starts a busy period of its thread depends on the op that finished
    last on another CPU thread before it started."""
    cpu_threads = [t for t in by_thread if not isinstance(t, tuple)]
    if len(cpu_threads) < 2:
        return
    finished_ends: dict[Any, list[float]] = {}  # each thread's items by end: made when first needed
    finished: dict[Any, list[Item]] = {}
    for thread in cpu_threads:
        for item in _idle_starts(by_thread[thread]):
            ts = item.ts_us or 0.0
            if any(
                not isinstance(builder.items[d].thread, tuple) and builder.items[d].thread != thread
                for d in item.data
                if d in builder.items
            ):
                continue  # already tied to another thread (an issued transfer)
            if not finished:
                for t in cpu_threads:
                    finished_ends[t], finished[t] = sorted_by_end(by_thread[t])
            best: Item | None = None
            for other in cpu_threads:
                if other == thread:
                    continue
                k = bisect.bisect_right(finished_ends[other], ts) - 1
                if k >= 0 and (best is None or finished_ends[other][k] > best.end_us):
                    best = finished[other][k]
            if best is not None and best.node_id not in item.data:
                item.data += (best.node_id,)
                builder.report.inter_thread_deps += 1


def _idle_starts(items: list[Item]) -> list[Item]:
    """A thread's top-level items that start more than :data:`INTER_THREAD_IDLE_US` after the latest
    end of the top-level items before them: a busy period's first. In C (:func:`chakra._item_scans.
    idle_starts`) where the times are floats."""
    found = idle_starts(items, INTER_THREAD_IDLE_US)
    if found is not None:
        return list(map(items.__getitem__, found))
    starts = []
    last_end = float("-inf")
    for item in items:
        if item.depth != 0:
            continue
        idle = (item.ts_us or 0.0) - last_end
        last_end = max(last_end, item.end_us)
        if not idle <= INTER_THREAD_IDLE_US:
            starts.append(item)
    return starts


#: Name of a node for time a thread spent between its top-level operators, busy but inside none of
#: them (the autograd engine between functions, Python between calls): no operator recorded it.
OUTSIDE_OPERATORS = "[outside operators]"


def busy_gaps(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """Time a CPU thread spent between two top-level ops that nothing explains as a wait becomes a
    node of its own (:data:`OUTSIDE_OPERATORS`) between them: dropped, the replay would run the
    thread's later ops early. A gap is a wait, and stays empty, when the op after it depends on
    work of another thread or a device that ended during the gap (the thread resumed on it)."""
    for thread, items in by_thread.items():
        if isinstance(thread, tuple):
            continue
        added: list[Item] = []
        for item, prev in _gap_starts(items):
            assert item.ts_us is not None and prev.ts_us is not None
            prev_end = prev.end_us
            woke = any(
                (dep := builder.items.get(d)) is not None and dep.thread != thread and dep.end_us > prev_end
                for d in item.data
            )
            if not woke:
                gap_us = item.ts_us - prev_end
                node_id = builder.next_id
                builder.next_id += 1
                gap = Item(
                    node_id, OUTSIDE_OPERATORS, COMP_NODE, thread=thread, ts_us=prev_end, dur_us=gap_us, excl_us=gap_us,
                    data=(prev.node_id,),
                )  # fmt: skip
                item.data += (node_id,)
                builder.items[node_id] = gap
                added.append(gap)
                builder.report.gaps += 1
                builder.report.gap_us += gap_us
        if added:
            items.extend(added)
            sort_by_attribute(items, "key")


def _gap_starts(items: list[Item]) -> list[tuple[Item, Item]]:
    """A thread's timed top-level items that start at least :data:`INTER_THREAD_IDLE_US` after the
    end of the top-level item that ended last before them (the first to reach that end), each with
    that item. In C (:func:`chakra._item_scans.gap_starts`) where the times are floats."""
    found = gap_starts(items, INTER_THREAD_IDLE_US)
    if found is not None:
        return [(items[k], items[j]) for k, j in zip(*found, strict=True)]
    starts = []
    prev_end = None
    prev: Item | None = None
    for item in items:
        if item.depth != 0 or item.ts_us is None:
            continue
        if prev is not None and prev_end is not None and item.ts_us - prev_end >= INTER_THREAD_IDLE_US:
            starts.append((item, prev))
        if prev_end is None or item.end_us >= prev_end:
            prev, prev_end = item, item.end_us
    return starts


def host_only_structure(builder: Builder, by_thread: dict[Any, list[Item]]) -> None:
    """Without timing: call-tree parents as ``ctrl_deps``; transfers leave their thread's
    chain (they run asynchronously) and synchronous calls hold the thread until they finish."""
    transfers = {
        i.node_id: i for i in builder.items.values() if i.node_type in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE)
    }
    for items in by_thread.values():
        kept = [i for i in items if i.node_id not in transfers]
        items[:] = kept
    for item in builder.items.values():
        parent = item.host.parent if item.host is not None else None
        if parent is not None and parent != item.node_id and parent in builder.items and parent not in item.ctrl:
            item.ctrl += (parent,)
    for call in builder.calls.values():
        transfer = next((transfers[m] for m in call.member_ids if m in transfers), None)
        issuer = builder.items.get(call.root_id)
        if transfer is None or issuer is None:
            continue
        if transfer is not issuer and issuer.node_id not in transfer.data:
            transfer.data += (issuer.node_id,)
        if call.async_op is False:
            after = max(call.member_ids)
            items = by_thread.get(issuer.thread, [])
            k = bisect.bisect_right([i.node_id for i in items], after)
            if k < len(items):
                items[k].data += (transfer.node_id,)


def tensor_deps(builder: Builder) -> None:
    """Producer -> consumer edges across threads, by tensor id, among leaf ops and transfers."""
    has_child = {i.host.parent for i in builder.items.values() if i.host is not None}
    writer: dict[int, Item] = {}
    ordered = list(builder.items.values())
    sort_by_attribute(ordered, "key")
    for item in ordered:
        if item.host is None or item.node_type == METADATA_NODE:
            continue
        is_transfer = item.node_type != COMP_NODE
        if item.node_id in has_child and not is_transfer:
            continue
        inputs = _tensor_ids(_safe_values(item.host.inputs.raw_values))
        for tensor in inputs:
            producer = writer.get(tensor)
            if producer is not None and producer.thread != item.thread and producer.node_id not in item.data:
                item.data += (producer.node_id,)
                builder.report.data_deps += 1
        outputs = _tensor_ids(_safe_values(item.host.outputs.raw_values))
        for tensor in outputs + (inputs if is_transfer else []):
            writer[tensor] = item


def _safe_values(raw: bytes) -> Any:
    try:
        return _decode_json(raw)
    except msgspec.DecodeError:
        return []


def _tensor_ids(value: Any) -> list[int]:
    """Tensor ids (first field of ``[tensor_id, storage_id, offset, numel, itemsize, device]``)."""
    found: list[int] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if not isinstance(v, list):
            continue
        if len(v) == 6 and isinstance(v[5], str) and isinstance(v[0], int):
            found.append(v[0])
        else:
            stack.extend(v)
    return found
