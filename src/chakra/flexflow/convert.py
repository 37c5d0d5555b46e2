"""A FlexFlow task graph -> ``PREFIX.{device}.et`` for every device, with a report.

Per device (:func:`convert_flexflow`):

* a compute task (Forward, Backward, Update, Barrier) is a ``COMP_NODE`` named ``KIND NAME``
  (``Forward Dense_102``; ``Update`` alone), with its duration (``duration_micros`` and the exact
  ``duration_ns``), its start on FlexFlow's clock (``start_time_micros``, from 1 µs: 0 means not
  recorded), ``is_cpu_op`` false and ``stream`` 0 (one task at a time per device, as FlexFlow runs
  them); parallel operators (Repartition, Combine, Replicate, Reduction) keep their tasks;
* a transfer (:mod:`chakra.flexflow.placement`) is a ``COMM_SEND_NODE`` on its source device and a
  ``COMM_RECV_NODE`` on its destination, with one id, ``comm_src``, ``comm_dst``, a ``comm_tag``
  counting the transfers of the pair, ``comm_size`` (bytes), and its duration and start on both;
  the send's ``stream`` is ``1 + destination``: transfers to one peer go one at a time, as on
  FlexFlow's link between two devices;
* an edge becomes a data dependency; an edge between two devices that no transfer carries (the
  labelled form allows it) becomes an empty transfer (0 bytes, 0 µs), so the dependency is kept;
* node ids follow time (the task graph's starts; the labelled form's dependency order).

The files go through the core workload writer (all devices or none). With ``check`` (FlexFlow's
own task graph, which holds its simulated schedule) the workload is replayed with its own durations
across devices (:func:`chakra.schedule.ranks.schedule_ranks`) and the replayed makespan compared
with the task graph's, in the core's fidelity check (:class:`chakra.schedule.fidelity.FidelityCheck`,
its ``whole``).

Example:
    result = convert_flexflow("mlp.taskgraph.dot", "out/mlp", strategy="mlp.strategy")
    result.written.paths, result.conversion.inferred, result.fidelity.ok
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from chakra import io
from chakra.collector import gc_paused
from chakra.conversion import ConversionResult
from chakra.errors import ChakraInputError, PathLike
from chakra.flexflow.compgraph import read_compgraph
from chakra.flexflow.placement import LinkModel, Placed, Transfer, place
from chakra.flexflow.strategy import MAX_DEVICES, read_strategy
from chakra.flexflow.taskgraph import Form, TaskGraph, TaskKind, read_task_graph
from chakra.schedule.fidelity import check_fidelity
from chakra.schedule.ranks import schedule_ranks
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata
from chakra.table import load_table
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns
from chakra.workload_writer import WorkloadWriter

#: The first start written (µs; 0 means "not recorded" in the format).
FIRST_START_US = 1
#: Bytes per ns in one GB/s (decimal).
BYTES_PER_NS_PER_GBPS = 1.0
#: The replayed makespan must be within this fraction of the task graph's (issue 20).
FLEXFLOW_FIDELITY_TOLERANCE = 0.01
#: The compute stream of a device; a send to device d goes on stream 1 + d.
COMPUTE_STREAM = 0
EMPTY_TRANSFER = "empty transfer"


@dataclass
class FlexFlowConversion:
    """What :func:`convert_flexflow` made of a task graph: its form, tasks by kind, nodes and
    transfers written, how devices and bytes were found (``inferred``), what was left out and why
    (``dropped``), the task graph's makespan (µs; FlexFlow's form) and notes."""

    form: str
    tasks: Counter[str]
    nodes: int
    transfers: int
    empty_transfers: int
    inferred: Counter[str]
    dropped: Counter[str] = field(default_factory=Counter)
    makespan_us: float | None = None
    notes: list[str] = field(default_factory=list)


class FlexFlowResult(ConversionResult[FlexFlowConversion]):
    """What converting a task graph did: the conversion, the files written (one per device) and the
    fidelity check (the devices replayed together against the task graph's makespan; ``None`` when
    not asked for or the form holds no schedule)."""

    def report(self) -> dict[str, Any]:
        c = self.conversion
        return {
            "form": c.form, "devices": len(self.written.paths),
            "paths": {d: str(p) for d, p in self.written.paths.items()}, "tasks": dict(c.tasks), "nodes": c.nodes,
            "transfers": c.transfers, "empty_transfers": c.empty_transfers, "inferred": dict(c.inferred),
            "dropped": dict(c.dropped), "makespan_us": c.makespan_us, "notes": c.notes,
        }  # fmt: skip


def convert_flexflow(
    taskgraph: PathLike,
    output: PathLike,
    *,
    strategy: PathLike | None = None,
    compgraph: PathLike | None = None,
    bandwidth_gbps: float | None = None,
    latency_us: float = 0.0,
    time_unit: str | None = None,
    num_devices: int | None = None,
    check: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> FlexFlowResult:
    """Convert one task graph of either form (see the module docstring and :mod:`chakra.flexflow`)."""
    tell = progress or (lambda stage, done, total: None)
    if num_devices is not None and not 0 < num_devices <= MAX_DEVICES + 1:
        raise ChakraInputError(f"{num_devices:,} devices: FlexFlow's files name at most {MAX_DEVICES + 1:,}")
    # a few objects per task, freed at the end: the collector's passes over them would cost more than
    # the building (see chakra.collector)
    with gc_paused():
        graph = read_task_graph(taskgraph, time_unit=time_unit)
        tell("reading", 1, 3)
        link = LinkModel(bandwidth_gbps * BYTES_PER_NS_PER_GBPS, latency_us * NS_PER_US) if bandwidth_gbps else None
        placed = place(
            graph,
            read_strategy(strategy) if strategy is not None else None,
            read_compgraph(compgraph) if compgraph is not None else None,
            link=link,
            num_devices=num_devices,
            sources=tuple(str(p) for p in (strategy, compgraph) if p is not None),
        )
        tell("reading", 2, 3)
        nodes, report = _build(graph, placed)
        tell("reading", 3, 3)
    writer = WorkloadWriter(output)
    with writer:
        for done, device in enumerate(range(placed.num_devices), start=1):
            writer.write_payloads(device, GlobalMetadata(version=io.FORMAT_VERSION), nodes.get(device, []))
            tell("writing devices", done, placed.num_devices)
    written = writer.result
    assert written is not None
    makespan = graph.makespan_ns
    conversion = FlexFlowConversion(
        graph.form.value, Counter(k.value for k in graph.kind), sum(len(v) for v in nodes.values()),
        len(placed.transfers), report["empty"], placed.inferred, report["dropped"],
        makespan / NS_PER_US if makespan is not None else None,
    )  # fmt: skip
    if graph.form is Form.LABELLED:
        conversion.notes.append(
            "the labelled form holds durations but no schedule: node ids follow the dependencies, no start times"
        )
    fidelity = None
    if check and graph.form is Form.FLEXFLOW:
        together = schedule_ranks({d: load_table(p) for d, p in written.paths.items()})
        # what was measured is FlexFlow's simulated schedule: its makespan, not the starts' span
        together = replace(together, measured_span_us=conversion.makespan_us)
        fidelity = check_fidelity({}, FLEXFLOW_FIDELITY_TOLERANCE, whole=together)
    return FlexFlowResult(conversion, written, fidelity)


#: The attribute columns of the nodes, in the order a node lists them.
_COLUMNS = ("is_cpu_op", "stream", "comm_src", "comm_dst", "comm_tag", "comm_size", "duration_ns")


class _Item(msgspec.Struct, gc=False):
    """One ET node to write: where, what, when, and what it depends on (keys of other items). (A
    msgspec struct: one is made per task and transfer end, and a dataclass's ``__init__`` runs in
    Python.)"""

    device: int
    type: int
    name: str
    start_ns: int | None
    dur_ns: int
    order: tuple[float, int, int]
    transfer: Transfer | None = None
    deps: list[int] = msgspec.field(default_factory=list)


def _build(graph: TaskGraph, placed: Placed) -> tuple[dict[int, list[bytes]], dict[str, Any]]:
    start_ns, dur_ns, kind, name_of = graph.start_ns, graph.dur_ns, graph.kind, graph.name
    # a task's place in time: its start, else (the labelled form has none) its place in dependency order
    if None in start_ns:
        rank_in_order = {task: k for k, task in enumerate(graph.order())}
        at = [float(s) if s is not None else float(rank_in_order[t]) for t, s in enumerate(start_ns)]
    else:
        at = [float(s) for s in start_ns]  # type: ignore[arg-type]
    items: list[_Item] = []
    node_of: dict[int, int] = {}  # compute task -> item
    send_of: dict[int, int] = {}  # transfer -> its send item (its receive is the next)
    names: dict[tuple[TaskKind, str], str] = {}  # a model's operators recur over its graph
    for task, comm in enumerate(graph.is_comm):
        if not comm:
            device = placed.device[task]
            assert device is not None
            name = names.get((kind[task], name_of[task]))
            if name is None:
                name = names[(kind[task], name_of[task])] = (
                    f"{kind[task].value} {name_of[task]}" if name_of[task] else kind[task].value
                )
            node_of[task] = len(items)
            items.append(_Item(device, COMP_NODE, name, start_ns[task], dur_ns[task], (at[task], task, 0)))
    for number, transfer in enumerate(placed.transfers):
        order = (at[transfer.tasks[0]], transfer.tasks[0], 1)
        name = transfer.name or TaskKind.COMM.value
        send_of[number] = len(items)
        items.append(_Item(transfer.src, COMM_SEND_NODE, name, transfer.start_ns, transfer.dur_ns, order, transfer))
        # a receive depends on nothing on its own device: its send, on another, is its dependency
        items.append(_Item(transfer.dst, COMM_RECV_NODE, name, transfer.start_ns, transfer.dur_ns, order, transfer))

    dropped: Counter[str] = Counter()
    empty = 0
    transfer_of, transfers = placed.transfer_of, placed.transfers
    # the item an edge leaves from (a compute task's, a transfer's receive) and the one it reaches (a
    # compute task's, a transfer's send: an edge to its first hop; -1 for a later hop), by task
    leaves = [node_of[t] if tb is None else send_of[tb] + 1 for t, tb in enumerate(transfer_of)]
    reaches = [
        node_of[t] if tb is None else send_of[tb] if transfers[tb].tasks[0] == t else -1
        for t, tb in enumerate(transfer_of)
    ]
    device_of = [item.device for item in items]  # of the items made so far: an edge's ends are among them
    for a, b in zip(graph.sources, graph.targets, strict=True):
        ta, tb = transfer_of[a], transfer_of[b]
        if ta is not None and ta == tb:
            continue  # hops of one transfer
        source, target = leaves[a], reaches[b]
        if target < 0:
            dropped["dependencies on a later hop of a transfer (kept by the hops' order)"] += 1
            continue
        if device_of[source] == device_of[target]:
            items[target].deps.append(source)
            continue
        # a dependency across devices that no transfer carries: an empty transfer keeps it
        ordered = (items[source].order[0] + 0.5, items[source].order[1], 2)
        end = None if items[source].start_ns is None else items[source].start_ns + items[source].dur_ns  # type: ignore[operator]
        edge = Transfer([], None, None, items[source].device, items[target].device, 0, EMPTY_TRANSFER, 0, end, "")
        items.append(_Item(edge.src, COMM_SEND_NODE, EMPTY_TRANSFER, end, 0, ordered, edge, [source]))
        items.append(_Item(edge.dst, COMM_RECV_NODE, EMPTY_TRANSFER, end, 0, ordered, edge))
        items[target].deps.append(len(items) - 1)
        empty += 1
    return _records(items), {"dropped": dropped, "empty": empty}


def _records(items: list[_Item]) -> dict[int, list[bytes]]:
    """The items as node records per device (:func:`chakra.wire.encode_columns`), ids in time
    order, tags counted per pair of devices."""
    orders = [item.order for item in items]
    order = sorted(range(len(items)), key=orders.__getitem__)  # stable: equal orders by index
    node_id = [-1] * len(items)  # -1: not given one yet
    next_id = 0
    for i in order:
        item = items[i]
        if item.type == COMM_RECV_NODE and i > 0 and node_id[i - 1] >= 0 and items[i - 1].transfer is item.transfer:
            node_id[i] = node_id[i - 1]  # a transfer's send and receive share an id
            continue
        node_id[i] = next_id
        next_id += 1
    tags: Counter[tuple[int, int]] = Counter()
    tag_of: dict[int, int] = {}
    rows = len(order)
    columns: dict[str, list[Any]] = {name: [None] * rows for name in _COLUMNS}
    columns["is_cpu_op"] = [False] * rows
    columns["duration_ns"] = [items[i].dur_ns for i in order]
    stream, comm_src, comm_dst = columns["stream"], columns["comm_src"], columns["comm_dst"]
    comm_tag, comm_size = columns["comm_tag"], columns["comm_size"]
    for row, i in enumerate(order):
        item = items[i]
        transfer = item.transfer
        if transfer is None:
            stream[row] = COMPUTE_STREAM
            continue
        if item.type == COMM_SEND_NODE:
            tag_of[id(transfer)] = tags[(transfer.src, transfer.dst)]
            tags[(transfer.src, transfer.dst)] += 1
            stream[row] = COMPUTE_STREAM + 1 + transfer.dst
        comm_src[row] = transfer.src
        comm_dst[row] = transfer.dst
        comm_tag[row] = tag_of[id(transfer)]
        comm_size[row] = transfer.size_bytes
    ordered = [items[i] for i in order]
    done = encode_columns(
        [item.name for item in ordered],
        [item.type for item in ordered],
        [[]] * rows,
        [
            [node_id[deps[0]]] if len(deps) == 1 else sorted(set(map(node_id.__getitem__, deps)))
            for deps in (item.deps for item in ordered)
        ],  # each dependency's node id once, in order (most items have one)
        [round(item.start_ns / NS_PER_US) + FIRST_START_US if item.start_ns is not None else 0 for item in ordered],
        [round(item.dur_ns / NS_PER_US) for item in ordered],
        [None] * rows,
        [None] * rows,
        [AttrColumn(name, values) for name, values in columns.items()],
        node_ids=list(map(node_id.__getitem__, order)),
    )
    devices = [item.device for item in ordered]
    by_device: dict[int, list[bytes]] = {device: [] for device in dict.fromkeys(devices)}
    for device, payload in zip(devices, done.payloads, strict=True):
        by_device[device].append(payload)
    return by_device
