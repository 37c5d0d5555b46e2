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

from chakra import io
from chakra.collector import gc_paused
from chakra.conversion import ConversionResult
from chakra.errors import ChakraInputError, PathLike
from chakra.flexflow.compgraph import read_compgraph
from chakra.flexflow.nodes import device_records
from chakra.flexflow.placement import LinkModel, place
from chakra.flexflow.strategy import MAX_DEVICES, read_strategy
from chakra.flexflow.taskgraph import Form, read_task_graph
from chakra.schedule.fidelity import check_fidelity
from chakra.schedule.ranks import schedule_ranks
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata
from chakra.table import load_table
from chakra.units import NS_PER_US
from chakra.workload_writer import WorkloadWriter

#: Bytes per ns in one GB/s (decimal).
BYTES_PER_NS_PER_GBPS = 1.0
#: The replayed makespan must be within this fraction of the task graph's (issue 20).
FLEXFLOW_FIDELITY_TOLERANCE = 0.01


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
        records = device_records(graph, placed)
        tell("reading", 3, 3)
    writer = WorkloadWriter(output)
    with writer:
        for done, device in enumerate(range(placed.num_devices), start=1):
            writer.write_payloads(device, GlobalMetadata(version=io.FORMAT_VERSION), records.by_device.get(device, []))
            tell("writing devices", done, placed.num_devices)
    written = writer.result
    assert written is not None
    makespan = graph.makespan_ns
    conversion = FlexFlowConversion(
        graph.form.value, Counter(k.value for k in graph.kind), sum(len(v) for v in records.by_device.values()),
        len(placed.transfers), records.empty_transfers, placed.inferred, records.dropped,
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
