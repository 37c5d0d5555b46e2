"""A placed FlexFlow task graph as the node records of each device, built as columns.

:func:`device_records` makes an ET node of every compute task and two of every transfer (a send on
its source device, a receive on its destination, one id), turns the task graph's edges into data
dependencies, and encodes the nodes per device through the core encoder
(:func:`chakra.wire.encode_columns`). The rules (names, streams, tags, empty transfers) are
:mod:`chakra.flexflow.convert`'s docstring. Every column is an array, one entry per node: a task
graph holds hundreds of thousands of tasks and edges, and an object per node and a Python step per
edge were most of converting one.

Node ids follow time: nodes are ordered by their task's place in time (the first hop's for a
transfer; after the task it leaves from, for an empty transfer), then by task, then compute before
send and receive before an empty transfer's nodes, then as made.

Example:
    >>> import numpy as np
    >>> _rounded_us(np.array([499, 500, 1500, 2500, 2**62], dtype=np.int64)).tolist()
    [0, 0, 2, 2, 4611686018427388]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from chakra.flexflow.placement import Placed
from chakra.flexflow.taskgraph import TaskGraph, TaskKind
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns

#: The first start written (µs; 0 means "not recorded" in the format).
FIRST_START_US = 1
#: The compute stream of a device; a send to device d goes on stream 1 + d.
COMPUTE_STREAM = 0
EMPTY_TRANSFER = "empty transfer"
DROPPED_LATER_HOP = "dependencies on a later hop of a transfer (kept by the hops' order)"
#: The largest integer a float64 holds exactly: nanoseconds up to it are divided as Python divides them.
EXACT_FLOAT_INT = 2**53


@dataclass
class DeviceRecords:
    """The encoded node records of each device (devices without nodes absent), in id order; the
    edges dropped, by reason; and the empty transfers made for edges across devices."""

    by_device: dict[int, list[bytes]]
    dropped: Counter[str]
    empty_transfers: int


@dataclass
class _Nodes:
    """The nodes, one entry per node in the order made: compute tasks, then each transfer's send and
    receive, then each empty transfer's. ``start_ns`` is -1 where no start is known."""

    device: np.ndarray
    type: np.ndarray
    at: np.ndarray  # the place in time that orders them (float64): ns, or a rank in dependency order
    task: np.ndarray  # the task that orders them
    part: np.ndarray  # 0 compute, 1 transfer, 2 empty transfer
    start_ns: np.ndarray
    dur_ns: np.ndarray
    src: np.ndarray  # a transfer's source and destination devices and bytes (-1 for compute)
    dst: np.ndarray
    size_bytes: np.ndarray
    names: list[str]


def device_records(graph: TaskGraph, placed: Placed) -> DeviceRecords:
    """The node records of every device of a placed task graph (see the module docstring)."""
    heads = np.array([hops[0] for hops in placed.transfers.hops], dtype=np.int64)  # each transfer's first hop
    nodes, computes, send_of = _task_nodes(graph, placed, heads)
    dep_to, dep_from, dropped, nodes = _dependencies(graph, placed, heads, nodes, computes, send_of)
    return _records(nodes, dep_to, dep_from, dropped)


def _task_nodes(graph: TaskGraph, placed: Placed, heads: np.ndarray) -> tuple[_Nodes, np.ndarray, np.ndarray]:
    """The nodes of compute tasks and transfers; the compute tasks' indices; each transfer's send node."""
    n = len(graph)
    start_ns = graph.start_ns
    if None in start_ns:  # the labelled form has no schedule: a task's place in dependency order
        rank = [0] * n
        for k, task in enumerate(graph.order()):
            rank[task] = k
        at_task = np.array([rank[t] if s is None else s for t, s in enumerate(start_ns)], dtype=np.float64)
    else:
        at_task = np.array(start_ns, dtype=np.float64)
    computes = np.flatnonzero(~graph.comm)
    transfers = placed.transfers
    count, pairs = len(computes), 2 * len(transfers)
    both = np.repeat  # a transfer's send and receive: its values twice
    starts = np.array([-1 if s is None else s for s in start_ns], dtype=np.int64)
    src, dst = transfers.src, transfers.dst
    ends = np.empty(pairs, dtype=np.int64)
    ends[0::2], ends[1::2] = src, dst
    types = np.empty(pairs, dtype=np.int64)
    types[0::2], types[1::2] = COMM_SEND_NODE, COMM_RECV_NODE
    compute_names: dict[tuple[TaskKind, str], str] = {}  # a model's operators recur over its graph
    kind_of, name_of = graph.kind, graph.name
    names = []
    for task in computes.tolist():
        key = (kind_of[task], name_of[task])
        text = compute_names.get(key)
        if text is None:
            text = compute_names[key] = f"{key[0].value} {key[1]}" if key[1] else key[0].value
        names.append(text)
    for name in transfers.name:
        name = name or TaskKind.COMM.value
        names += (name, name)
    nodes = _Nodes(
        device=np.concatenate([placed.device[computes], ends]),
        type=np.concatenate([np.full(count, COMP_NODE, np.int64), types]),
        at=np.concatenate([at_task[computes], both(at_task[heads], 2)]),
        task=np.concatenate([computes, both(heads, 2)]),
        part=np.concatenate([np.zeros(count, np.int64), np.ones(pairs, np.int64)]),
        start_ns=np.concatenate([starts[computes], both(transfers.start_ns, 2)]),
        dur_ns=np.concatenate([np.array(graph.dur_ns, dtype=np.int64)[computes], both(transfers.dur_ns, 2)]),
        src=np.concatenate([np.full(count, -1, np.int64), both(src, 2)]),
        dst=np.concatenate([np.full(count, -1, np.int64), both(dst, 2)]),
        size_bytes=np.concatenate([np.full(count, -1, np.int64), both(np.array(transfers.size_bytes, np.int64), 2)]),
        names=names,
    )
    send_of = count + 2 * np.arange(len(transfers), dtype=np.int64)
    return nodes, computes, send_of


def _dependencies(
    graph: TaskGraph, placed: Placed, heads: np.ndarray, nodes: _Nodes, computes: np.ndarray, send_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray, Counter[str], _Nodes]:
    """The data dependencies (node ``dep_to`` on node ``dep_from``) of the task graph's edges, the
    edges dropped, and the nodes with the empty transfers added."""
    n = len(graph)
    transfer_of = placed.transfer_of
    # every comm task is a hop of a transfer (find_chains refuses a hop no chain reaches): an index
    # of -1 below would read another node's values
    assert not (graph.comm & (transfer_of < 0)).any(), "a comm task in no transfer"
    node_of = np.full(n, -1, dtype=np.int64)
    node_of[computes] = np.arange(len(computes))
    comm = transfer_of >= 0
    # the node an edge leaves from (a compute task's, a transfer's receive) and the one it reaches (a
    # compute task's, a transfer's send: an edge to its first hop; -1 for a later hop), by task
    leaves, reaches = node_of.copy(), node_of.copy()
    leaves[comm] = send_of[transfer_of[comm]] + 1
    first_hop = comm.copy()
    first_hop[comm] = heads[transfer_of[comm]] == np.flatnonzero(comm)
    reaches[comm] = -1
    reaches[first_hop] = send_of[transfer_of[first_hop]]
    a, b = graph.sources, graph.targets
    kept = ~((transfer_of[a] >= 0) & (transfer_of[a] == transfer_of[b]))  # not between hops of one transfer
    source, target = leaves[a[kept]], reaches[b[kept]]
    dropped: Counter[str] = Counter()
    later = int(np.count_nonzero(target < 0))
    if later:
        dropped[DROPPED_LATER_HOP] = later
    source, target = source[target >= 0], target[target >= 0]
    same = nodes.device[source] == nodes.device[target]
    if same.all():
        return target, source, dropped, nodes
    # dependencies across devices that no transfer carries: an empty transfer keeps each, made in edge order
    across_from, across_to = source[~same], target[~same]
    made = len(nodes.names) + 2 * np.arange(len(across_from), dtype=np.int64)  # each one's send node
    starts = nodes.start_ns[across_from]
    ends = np.where(starts >= 0, starts + nodes.dur_ns[across_from], -1)
    pairs = 2 * len(across_from)
    peers = np.empty(pairs, dtype=np.int64)
    peers[0::2], peers[1::2] = nodes.device[across_from], nodes.device[across_to]
    types = np.empty(pairs, dtype=np.int64)
    types[0::2], types[1::2] = COMM_SEND_NODE, COMM_RECV_NODE
    src, dst = np.repeat(nodes.device[across_from], 2), np.repeat(nodes.device[across_to], 2)
    grown = _Nodes(
        device=np.concatenate([nodes.device, peers]),
        type=np.concatenate([nodes.type, types]),
        at=np.concatenate([nodes.at, np.repeat(nodes.at[across_from] + 0.5, 2)]),
        task=np.concatenate([nodes.task, np.repeat(nodes.task[across_from], 2)]),
        part=np.concatenate([nodes.part, np.full(pairs, 2, np.int64)]),
        start_ns=np.concatenate([nodes.start_ns, np.repeat(ends, 2)]),
        dur_ns=np.concatenate([nodes.dur_ns, np.zeros(pairs, np.int64)]),
        src=np.concatenate([nodes.src, src]),
        dst=np.concatenate([nodes.dst, dst]),
        size_bytes=np.concatenate([nodes.size_bytes, np.zeros(pairs, np.int64)]),
        names=nodes.names + [EMPTY_TRANSFER] * pairs,
    )
    # a send depends on the node its edge leaves from; the target on the receive
    dep_to = np.concatenate([target[same], made, across_to])
    dep_from = np.concatenate([source[same], across_from, made + 1])
    return dep_to, dep_from, dropped, grown


def _records(nodes: _Nodes, dep_to: np.ndarray, dep_from: np.ndarray, dropped: Counter[str]) -> DeviceRecords:
    """The nodes encoded per device: ids in time order (a receive shares its send's id), tags counted
    per pair of devices in that order."""
    count = len(nodes.names)
    made = np.arange(count, dtype=np.int64)
    in_time = np.lexsort((made, nodes.part, nodes.task, nodes.at))
    receives = nodes.type[in_time] == COMM_RECV_NODE
    node_id = np.empty(count, dtype=np.int64)
    node_id[in_time] = np.cumsum(~receives) - 1  # a receive comes right after its send: made next, same keys
    # a send's tag: the sends between its two devices before it in time
    sends = in_time[nodes.type[in_time] == COMM_SEND_NODE]
    pair_key = nodes.src[sends] * (int(nodes.dst.max(initial=0)) + 1) + nodes.dst[sends]
    by_pair = np.argsort(pair_key, kind="stable")
    sorted_keys = pair_key[by_pair]
    first = np.searchsorted(sorted_keys, sorted_keys, side="left")
    tag = np.full(count, -1, dtype=np.int64)
    tag[sends[by_pair]] = np.arange(len(sends)) - first
    tag[sends + 1] = tag[sends]  # its receive's (made next)
    # written device by device, each in time order
    rows = in_time[np.argsort(nodes.device[in_time], kind="stable")]
    row_of = np.empty(count, dtype=np.int64)
    row_of[rows] = made
    deps = _dependency_lists(row_of[dep_to], node_id[dep_from], count)
    transfer = nodes.src[rows] >= 0
    types = nodes.type[rows]
    stream = np.where(types == COMM_SEND_NODE, COMPUTE_STREAM + 1 + nodes.dst[rows], COMPUTE_STREAM)
    columns = {
        "is_cpu_op": [False] * count,
        "stream": _where(types != COMM_RECV_NODE, stream),
        "comm_src": _where(transfer, nodes.src[rows]),
        "comm_dst": _where(transfer, nodes.dst[rows]),
        "comm_tag": _where(transfer, tag[rows]),
        "comm_size": _where(transfer, nodes.size_bytes[rows]),
        "duration_ns": nodes.dur_ns[rows].tolist(),
    }
    start_ns = nodes.start_ns[rows]
    starts = np.where(start_ns >= 0, _rounded_us(np.maximum(start_ns, 0)) + FIRST_START_US, 0)
    names = nodes.names
    done = encode_columns(
        [names[i] for i in rows.tolist()],
        types.tolist(),
        [[]] * count,
        deps,
        starts.tolist(),
        _rounded_us(nodes.dur_ns[rows]).tolist(),
        [None] * count,
        [None] * count,
        [AttrColumn(name, values) for name, values in columns.items()],
        node_ids=node_id[rows].tolist(),
    )
    devices = nodes.device[rows]
    found, first_row, per_device = np.unique(devices, return_index=True, return_counts=True)
    payloads = done.payloads
    by_device = {
        device: payloads[at : at + size]
        for device, at, size in zip(found.tolist(), first_row.tolist(), per_device.tolist(), strict=True)
    }
    return DeviceRecords(by_device, dropped, int(np.count_nonzero(nodes.part == 2)) // 2)


def _dependency_lists(rows: np.ndarray, ids: np.ndarray, count: int) -> list[list[int]]:
    """Per row, the ids it depends on, each once, in order."""
    order = np.lexsort((ids, rows))
    rows, ids = rows[order], ids[order]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]) | (ids[1:] != ids[:-1])
    rows, ids = rows[new], ids[new]
    bounds = np.searchsorted(rows, np.arange(count + 1)).tolist()
    flat = ids.tolist()
    return [flat[bounds[r] : bounds[r + 1]] for r in range(count)]


def _where(mask: np.ndarray, values: np.ndarray) -> list[int | None]:
    """``values`` where ``mask`` holds, ``None`` elsewhere (an attribute not written)."""
    out: list[int | None] = values.tolist()
    for k in np.flatnonzero(~mask).tolist():
        out[k] = None
    return out


def _rounded_us(ns: np.ndarray) -> np.ndarray:
    """``round(ns / 1000)`` of each (int64) value, as Python rounds the quotient of two ints."""
    us = np.rint(ns / NS_PER_US).astype(np.int64)  # the quotient of an exact float64, rounded once
    for k in np.flatnonzero(np.abs(ns) > EXACT_FLOAT_INT).tolist():
        us[k] = round(int(ns[k]) / NS_PER_US)
    return us
