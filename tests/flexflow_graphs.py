"""FlexFlow's files written the way FlexFlow writes them, for the FlexFlow front end's tests.

FlexFlow cannot be built here, so :func:`simulate` follows its ``Simulator::simulate_runtime``
(FlexFlow 2021) on a chain of operators: a Forward and a Backward task per partition on the
partition's device, the Backward after the Forward; for each pair of partitions of consecutive
operators whose samples overlap, a direct edge when they share a device, else a Comm task
``seg 0 from X to Y`` on the link between the two devices lasting ``latency + bytes / bandwidth``
(and the same backward); with ``updates``, FlexFlow's bulk-synchronous weight update (a Barrier
per device after its Backward tasks, an Update per weight on its first partition's device fed
from the other partitions' Barriers, and transfers back to a final Barrier per device). Tasks run
in order of readiness, one at a time per device and per link. :func:`write_task_graph`,
:func:`write_strategy` and :func:`write_compgraph` write what FlexFlow writes for it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path

#: Bytes per ms of one GB/s (FlexFlow's machine model speaks bytes per ms).
BYTES_PER_MS_PER_GBPS = 1_000_000
FLOAT_BYTES = 4


@dataclass
class Op:
    """An operator: its partitions' devices (split along the samples) and times (ms per partition)."""

    name: str
    devices: list[int]
    forward_ms: float
    backward_ms: float
    activation_bytes: int  # of its whole output
    weight_bytes: int = 0


@dataclass
class SimTask:
    id: int
    name: str
    kind: str
    resource: tuple[int, ...]  # (device,) or (source, destination) of a link
    run_ms: float
    next: list[int] = field(default_factory=list)
    waiting: int = 0
    ready_ms: float = 0.0
    start_ms: float = 0.0
    end_ms: float = 0.0
    size_bytes: int = 0  # Comm tasks


def _overlap(a: int, parts_a: int, b: int, parts_b: int) -> float:
    """The fraction of the samples partition ``a`` of ``parts_a`` and ``b`` of ``parts_b`` share."""
    low, high = max(a / parts_a, b / parts_b), min((a + 1) / parts_a, (b + 1) / parts_b)
    return max(0.0, high - low)


def simulate(
    ops: list[Op], num_devices: int, *, link_gbps: float = 25.0, latency_ms: float = 0.001, updates: bool = False
) -> list[SimTask]:
    """FlexFlow's simulation of ``ops`` (see the module docstring): the tasks in the order they ran."""
    tasks: list[SimTask] = []

    def new(name: str, kind: str, resource: tuple[int, ...], run_ms: float, size: int = 0) -> SimTask:
        tasks.append(SimTask(len(tasks), name, kind, resource, run_ms, size_bytes=size))
        return tasks[-1]

    def link(a: SimTask, b: SimTask) -> None:
        a.next.append(b.id)
        b.waiting += 1

    def xfer(a: SimTask, b: SimTask, size: int) -> None:
        if a.resource == b.resource:
            link(a, b)
            return
        ms = latency_ms + size / (link_gbps * BYTES_PER_MS_PER_GBPS)
        comm = new(f"seg 0 from {a.name} to {b.name}", "Comm", (a.resource[0], b.resource[0]), ms, size)
        link(a, comm)
        link(comm, b)

    forward, backward = [], []
    for op in ops:
        fwd = [new(op.name, "Forward", (d,), op.forward_ms) for d in op.devices]
        bwd = [new(op.name, "Backward", (d,), op.backward_ms) for d in op.devices]
        for f, b in zip(fwd, bwd, strict=True):
            link(f, b)
        forward.append(fwd)
        backward.append(bwd)
    for i in range(1, len(ops)):
        pre, op = ops[i - 1], ops[i]
        for b in range(len(op.devices)):
            for a in range(len(pre.devices)):
                share = _overlap(a, len(pre.devices), b, len(op.devices))
                if share > 0:
                    size = round(share * pre.activation_bytes)
                    xfer(forward[i - 1][a], forward[i][b], size)
                    xfer(backward[i][b], backward[i - 1][a], size)
    if updates:
        finals = [new("", "Barrier", (d,), 0.0) for d in range(num_devices)]
        barriers = [new("", "Barrier", (d,), 0.0) for d in range(num_devices)]
        for bwd in backward:
            for task in bwd:
                link(task, barriers[task.resource[0]])
        for op, bwd in zip(ops, backward, strict=True):
            if op.weight_bytes:
                update = new("", "Update", (op.devices[0],), 0.0)
                link(barriers[op.devices[0]], update)
                for task in bwd[1:]:
                    xfer(barriers[task.resource[0]], update, op.weight_bytes)
                    xfer(update, finals[task.resource[0]], op.weight_bytes)
    ready = [(0.0, t.id) for t in tasks if t.waiting == 0]
    heapq.heapify(ready)
    free_at: dict[tuple[int, ...], float] = {}
    ran = []
    while ready:
        _, tid = heapq.heappop(ready)
        task = tasks[tid]
        task.start_ms = max(free_at.get(task.resource, 0.0), task.ready_ms)
        task.end_ms = task.start_ms + task.run_ms
        free_at[task.resource] = task.end_ms
        ran.append(task)
        for nid in task.next:
            nxt = tasks[nid]
            nxt.ready_ms = max(nxt.ready_ms, task.end_ms)
            nxt.waiting -= 1
            if nxt.waiting == 0:
                heapq.heappush(ready, (nxt.ready_ms, nid))
    assert len(ran) == len(tasks)
    return ran


def write_task_graph(ran: list[SimTask], path: Path) -> Path:
    """FlexFlow's ``--taskgraph`` file: DotFile numbers nodes as they are first named, a node's line
    then its edges, times as C++ streams print floats (6 significant digits), no newline after the
    header (the 2021 builds)."""
    number: dict[int, int] = {}

    def node(tid: int) -> str:
        return f"node{number.setdefault(tid, len(number))}"

    by_id = {t.id: t for t in ran}
    lines = ["digraph taskgraph {"]
    for task in ran:
        name = f"{task.name} | " if task.name else ""
        label = f'"{{ {name}{task.kind} | {{ {task.start_ms:g} | {task.end_ms:g} }} }}"'
        lines.append(f"  {node(task.id)} [label={label},shape=record];\n")
        for nid in task.next:
            lines.append(f"  {node(task.id)} -> {node(by_id[nid].id)};\n")
    path.write_text("".join(lines) + "}")
    return path


def write_strategy(ops: list[Op], path: Path) -> Path:
    """FlexFlow's text strategy (``strategy.cc``): operators by name, samples split in the last dimension."""
    out = [f"{len(ops)}\n"]
    for op in sorted(ops, key=lambda o: o.name):
        dims = [1, len(op.devices)]
        out.append(f"{op.name}\n0\n{len(dims)}\n" + "".join(f"{d}\t" for d in dims) + "\n")
        out.append(f"{len(op.devices)}\n" + "".join(f"{d}\t" for d in op.devices) + "\n")
    path.write_text("".join(out))
    return path


def write_compgraph(ops: list[Op], path: Path, guid_base: int = 100) -> Path:
    """FlexFlow's ``--compgraph`` file with costs: machine views, ms per partition, bytes per partition."""
    lines = ["digraph taskgraph {\n"]
    for k, op in enumerate(ops):
        parts = len(op.devices)
        previous = ops[k - 1].activation_bytes if k else op.activation_bytes
        fields = [
            op.name, str(guid_base + k), "{ 1 | " + str(parts) + " }", "{ " + " | ".join(map(str, op.devices)) + " }",
            "{ fwd | bwd | sync | secs }", f"{{ {op.forward_ms:e} | {op.backward_ms:e} | {0:e} }}",
            "{ in | out | weight | bytes }",
            f"{{ {previous // parts} | {op.activation_bytes // parts} | {op.weight_bytes} }}",
        ]  # fmt: skip
        lines.append(f'  node{k} [label="{{ {" | ".join(fields)} }}",shape=record];\n')
        if k:
            lines.append(f"  node{k - 1} -> node{k};\n")
    path.write_text("".join(lines) + "}")
    return path


def large_model(num_devices: int = 64, layers: int = 48) -> list[Op]:
    """A chain of ``layers`` operators on ``num_devices`` devices, most data parallel over all of them,
    every fourth on the first eighth of the devices (a model-parallel head): about 10k tasks."""
    ops = []
    for i in range(layers):
        devices = list(range(num_devices)) if i % 4 != 3 else list(range(num_devices // 8))
        ops.append(Op(f"Dense_{100 + i}", devices, 0.05 + 0.01 * (i % 5), 0.1 + 0.02 * (i % 3), 1 << 22, 1 << 20))
    return ops
