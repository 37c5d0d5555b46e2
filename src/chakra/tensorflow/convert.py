"""TensorFlow steps to Chakra ETs: one ``PREFIX.{rank}.et`` per device of a recorded step.

Input: what :mod:`chakra.tensorflow.collect` wrote for each worker, read by
:func:`chakra.tensorflow.recording.load_recorded_workers`. :func:`convert_workers` turns the step function's
partition graphs (:func:`chakra.tensorflow.graph.step_graphs`) into nodes, one rank per device,
numbered worker-major, device-minor (:func:`chakra.tensorflow.graph.rank_order`):

* ops that do no work (``FOLDED_OPS``: constants, identities, arguments, no-ops) are folded: what
  depends on them depends on what they depend on; every one is counted;
* ``_Send``/``_Recv`` between two collected devices are COMM_SEND/COMM_RECV nodes with the peer's
  rank, a tag shared by the pair (one per rendezvous key) and the bytes of the tensor sent;
* collective ops (``COLLECTIVES``) are COMM_COLL nodes of their type, ``comm_size`` the bytes of
  their input (the format's convention: an all-gather's bytes put in by each device), and the group
  of every device that runs a collective of that ``group_key`` (checked against ``group_size``);
* every other op is a COMP node with ``num_ops`` (:mod:`chakra.tensorflow.costs`) and
  ``tensor_size`` (bytes of its inputs and outputs) where its shapes are known;
* data inputs become ``data_deps``, control inputs ``ctrl_deps``; the back edge of a loop
  (``NextIteration``) is dropped and counted.

Times: with a profile, every node gets the start and duration of its execution in one step
(:func:`chakra.tensorflow.recording.step_times`: the complete step of median span, joined across
workers by the collectives' instance keys), and ``tid``, the
profiler's thread line it ran on, which is the resource the fidelity replay serializes on. A node
that ran more than once in the step (a loop) gets its first start and the sum of its durations.

Example:
    conversion = convert_workers(load_workers(["out"]))  # chakra.tensorflow.recording.load_recorded_workers
    write_tf_workload(conversion, "out/et/step")
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from chakra import io
from chakra.collector import gc_paused
from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
    CollectiveCommType,
    GlobalMetadata,
    Node,
    NodeType,
)
from chakra.schema.tensorflow.tf_subset_pb2 import GraphDef, NodeDef
from chakra.steps import StepRun, step_note
from chakra.tensorflow.costs import op_flops
from chakra.tensorflow.graph import (
    FOLDED_OPS,
    const_int,
    dtype_bytes,
    input_name,
    output_shapes,
    rank_order,
    tensor_elements,
)
from chakra.tensorflow.profile import OpExecution
from chakra.tensorflow.recording import Worker, step_times
from chakra.trace import WorkloadWriter, WrittenWorkload
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns

SEND_OPS = frozenset({"_Send", "_HostSend"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
#: The source of a loop's back edge in a TensorFlow graph.
LOOP_BACK_OP = "NextIteration"
#: Ops whose output is their input (output ``k`` is input ``k`` for IdentityN).
PASS_THROUGH_OPS = frozenset({"Identity", "IdentityN", "Snapshot", "StopGradient", "PreventGradient"})


@dataclass(frozen=True)
class CollectiveOp:
    """How a collective op is read: its type, and the input positions of its data (``None``: it
    has none, its output is the buffer), ``group_size`` and ``group_key`` (``None``: attributes)."""

    comm_type: CollectiveCommType
    data: int | None
    group_size: int | None
    group_key: int | None


#: Collective ops by name (tensorflow/core/ops/collective_ops.cc, nccl_ops.cc).
COLLECTIVES = {
    "CollectiveReduceV2": CollectiveOp(ALL_REDUCE, 0, 1, 2),
    "CollectiveReduceV3": CollectiveOp(ALL_REDUCE, 0, None, None),
    "CollectiveReduce": CollectiveOp(ALL_REDUCE, 0, None, None),
    "CollectiveGatherV2": CollectiveOp(ALL_GATHER, 0, 1, 2),
    "CollectiveGather": CollectiveOp(ALL_GATHER, 0, None, None),
    "CollectiveAllToAllV2": CollectiveOp(ALL_TO_ALL, 0, 1, 2),
    "CollectiveAllToAllV3": CollectiveOp(ALL_TO_ALL, 0, None, None),
    "CollectiveReduceScatterV2": CollectiveOp(REDUCE_SCATTER, 0, 1, 2),
    "CollectiveBcastSendV2": CollectiveOp(BROADCAST, 0, 1, 2),
    "CollectiveBcastSend": CollectiveOp(BROADCAST, 0, None, None),
    "CollectiveBcastRecvV2": CollectiveOp(BROADCAST, None, 0, 1),
    "CollectiveBcastRecv": CollectiveOp(BROADCAST, None, None, None),
    "NcclAllReduce": CollectiveOp(ALL_REDUCE, 0, None, None),
}


@dataclass
class TfConversion:
    """Every rank's nodes, the communicator groups, and what became of each graph node and event."""

    devices: list[str]  # rank -> device name
    payloads: dict[int, list[bytes]]  # rank -> its nodes, encoded
    groups: CommGroups
    converted: Counter[str] = field(default_factory=Counter)  # op -> nodes written (all ranks)
    folded: Counter[str] = field(default_factory=Counter)  # op -> graph nodes folded
    untimed: Counter[str] = field(default_factory=Counter)  # op -> nodes with no execution in the step
    unsized: Counter[str] = field(default_factory=Counter)  # op -> communication of unknown bytes
    dropped: Counter[str] = field(default_factory=Counter)  # why -> edges or nodes left out
    events: Counter[str] = field(default_factory=Counter)  # what -> profile events
    repeated: Counter[str] = field(default_factory=Counter)  # op -> nodes run more than once in the step
    step_runs: list[StepRun] = field(default_factory=list)
    step_run: StepRun | None = None
    profiled: bool = False
    group_notes: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> dict[int, list[Node]]:
        """Every rank's nodes as messages (decoded from :attr:`payloads` at each call)."""
        return {rank: [Node.FromString(p) for p in payloads] for rank, payloads in self.payloads.items()}

    @property
    def notes(self) -> list[str]:
        out = []
        if not self.profiled:
            out.append("no profile: nodes carry FLOPs and bytes but no durations (chakra simulate times them)")
        if self.step_run is not None and (said := step_note(self.step_runs, self.step_run)) is not None:
            out.append(said)
        out.extend(f"{n:,} {op} nodes have no execution in the step: no duration" for op, n in self.untimed.items())
        out.extend(
            f"{n:,} {op} nodes move a tensor whose size is known only at run time: no comm_size"
            for op, n in self.unsized.items()
        )
        out.extend(f"{n:,} {op} nodes ran more than once in the step: first start, summed duration"
                   for op, n in self.repeated.items())  # fmt: skip
        out.extend(f"dropped {n:,}: {why}" for why, n in self.dropped.items())
        return out + self.group_notes


def convert_workers(workers: list[Worker]) -> TfConversion:
    """Every device's nodes (see the module's docstring)."""
    devices = rank_order([d for w in workers for d in w.graphs])
    if len(set(devices)) != len(devices):
        repeated = sorted(d for d, n in Counter(devices).items() if n > 1)
        raise ChakraInputError(f"device {repeated[0]} is in two recordings", path=workers[0].path,
                               hint="pass each worker's folder once")  # fmt: skip
    conversion = TfConversion(devices, {}, CommGroups())
    conversion.profiled = all(w.profile is not None for w in workers)
    executions: dict[str, dict[str, list[OpExecution]]] = {}
    if conversion.profiled:
        times = step_times(workers)
        executions, conversion.step_runs, conversion.step_run = times.executions, times.runs, times.chosen
        conversion.events.update(times.events)
    with gc_paused():  # a few objects per node, kept to the end: see chakra.collector
        context = _Context(workers, devices, executions)
        conversion.groups = context.comm_groups(conversion)
        for worker in workers:
            for device, graph in worker.graphs.items():
                rank = devices.index(device)
                conversion.payloads[rank] = _Device(context, conversion, rank, graph).emit()
    conversion.payloads = dict(sorted(conversion.payloads.items()))
    return conversion


class _Context:
    """What every device's conversion shares: ranks, transfer tags and sizes, collective groups."""

    def __init__(self, workers: list[Worker], devices: list[str], executions: dict[str, dict[str, list[OpExecution]]]):
        self.rank_of = {device: rank for rank, device in enumerate(devices)}
        self.executions = executions
        self.graphs = {device: graph for w in workers for device, graph in w.graphs.items()}
        self.by_name = {device: {n.name: n for n in graph.node} for device, graph in self.graphs.items()}
        #: device -> node -> its inputs as (node, output port, is a control edge), parsed once
        self.inputs = {
            device: {n.name: tuple(map(input_name, n.input)) for n in graph.node}
            for device, graph in self.graphs.items()
        }
        self.sends: dict[tuple[str, str, str], NodeDef] = {}
        keys: set[tuple[str, str, str]] = set()
        for graph in self.graphs.values():
            for node in graph.node:
                if node.op in SEND_OPS or node.op in RECV_OPS:
                    keys.add(_rendezvous(node))
                    if node.op in SEND_OPS:
                        self.sends[_rendezvous(node)] = node
        self.tags = {key: tag for tag, key in enumerate(sorted(keys))}
        self.group_key_of: dict[tuple[str, str], int | None] = {}
        self._bytes: dict[tuple[str, str, int], int | None] = {}
        self._shapes: dict[tuple[str, str], list[list[int] | None]] = {}

    def data_inputs(self, device: str, node: NodeDef) -> list[tuple[str, int]]:
        """``node``'s data inputs: (node, output port)."""
        return [(source, port) for source, port, control in self.inputs[device][node.name] if not control]

    def input_bytes(self, device: str, node: NodeDef, index: int) -> int | None:
        """Bytes of ``node``'s data input ``index``."""
        data = self.data_inputs(device, node)
        if index >= len(data):
            return None
        source, port = data[index]
        producer = self.by_name[device].get(source)
        return None if producer is None else self.output_bytes(device, producer, port)

    def shapes(self, device: str, node: NodeDef) -> list[list[int] | None]:
        """``node``'s output shapes, read once (a SplitV of packed gradients has hundreds)."""
        memo = (device, node.name)
        found = self._shapes.get(memo)
        if found is None:
            found = self._shapes[memo] = output_shapes(node)
        return found

    def _static_bytes(self, device: str, node: NodeDef, port: int) -> int | None:
        shapes = self.shapes(device, node)
        dtype = _dtype(node)
        if port >= len(shapes) or dtype is None:
            return None
        count, size = tensor_elements(shapes[port]), dtype_bytes(dtype)
        return None if count is None or size is None else count * size

    def sent_bytes(self, key: tuple[str, str, str]) -> int | None:
        """Bytes a transfer moves: what its ``_Send`` is given."""
        send = self.sends.get(key)
        return None if send is None or key[0] not in self.by_name else self.input_bytes(key[0], send, 0)

    def output_bytes(self, device: str, node: NodeDef, port: int) -> int | None:
        """Bytes of one output: from ``_output_shapes`` and the node's type; where TensorFlow could
        not infer it statically, a ``_Recv`` has what its ``_Send`` was given and an identity what
        it is given (shape inference stops at a partition's edge)."""
        memo = (device, node.name, port)
        if memo not in self._bytes:
            self._bytes[memo] = None  # a cycle reads as unknown
            size = self._static_bytes(device, node, port)
            if size is None and node.op in RECV_OPS:
                size = self.sent_bytes(_rendezvous(node))
            elif size is None and node.op in PASS_THROUGH_OPS:
                size = self.input_bytes(device, node, port if node.op == "IdentityN" else 0)
            self._bytes[memo] = size
        return self._bytes[memo]

    def group_key(self, device: str, node: NodeDef) -> int | None:
        """A collective's group key: from its execution in the step, else its graph constant."""
        runs = self.executions.get(device, {}).get(node.name)
        if runs and runs[0].group_key is not None:
            return runs[0].group_key
        rule = COLLECTIVES[node.op]
        if rule.group_key is None:
            return int(node.attr["group_key"].i) if "group_key" in node.attr else None
        return self._const_input(device, node, rule.group_key)

    def group_size(self, device: str, node: NodeDef) -> int | None:
        rule = COLLECTIVES[node.op]
        if rule.group_size is None:
            return int(node.attr["group_size"].i) if "group_size" in node.attr else None
        return self._const_input(device, node, rule.group_size)

    def _const_input(self, device: str, node: NodeDef, index: int) -> int | None:
        data = self.data_inputs(device, node)
        if index >= len(data):
            return None
        producer = self.by_name[device].get(data[index][0])
        while producer is not None and producer.op == "Identity" and (inputs := self.inputs[device][producer.name]):
            producer = self.by_name[device].get(inputs[0][0])
        return None if producer is None else const_int(producer)

    def comm_groups(self, conversion: TfConversion) -> CommGroups:
        """Group ids by member ranks: the devices running collectives of one group key."""
        members: dict[int, set[int]] = defaultdict(set)
        sizes: dict[int, set[int]] = defaultdict(set)
        for device, graph in self.graphs.items():
            for node in graph.node:
                if node.op not in COLLECTIVES:
                    continue
                key = self.group_key(device, node)
                self.group_key_of[(device, node.name)] = key
                if key is not None:
                    members[key].add(self.rank_of[device])
                    if (size := self.group_size(device, node)) is not None:
                        sizes[key].add(size)
        self.gid_of_key: dict[int, int] = {}
        groups: dict[tuple[int, ...], int] = {}
        for key in sorted(members):
            ranks = tuple(sorted(members[key]))
            self.gid_of_key[key] = groups.setdefault(ranks, len(groups) + 1)
            for size in sizes[key] - {len(ranks)}:
                conversion.group_notes.append(
                    f"group key {key}: group_size {size} but {len(ranks)} collected devices run it "
                    "(record every worker to have the whole group)"
                )
        return CommGroups({gid: list(ranks) for ranks, gid in groups.items()})


def _rendezvous(node: NodeDef) -> tuple[str, str, str]:
    """A transfer's rendezvous key: (send device, receive device, tensor name)."""
    # a damaged recording may hold bytes that are not UTF-8: they still key the rendezvous
    return (
        node.attr["send_device"].s.decode(errors="replace"),
        node.attr["recv_device"].s.decode(errors="replace"),
        node.attr["tensor_name"].s.decode(errors="replace"),
    )


def _dtype(node: NodeDef) -> int | None:
    for name in ("T", "dtype", "tensor_type", "out_type"):
        if name in node.attr and node.attr[name].WhichOneof("value") == "type":
            return int(node.attr[name].type)
    return None


#: The attribute columns of a device's nodes, in the order a node lists them; a send names its peer
#: as ``comm_dst`` before its own rank, a receive its peer as ``comm_src`` before its own.
_COLUMNS = (
    "op_type", "duration_ns", "tid", "is_cpu_op", "send_peer", "comm_src", "recv_self", "comm_tag", "comm_type",
    "comm_size", "pg_name", "num_ops", "tensor_size",
)  # fmt: skip
#: Columns named for their role, written as these attributes.
_COLUMN_ATTR = {"send_peer": "comm_dst", "recv_self": "comm_dst"}


class _Device:
    """One device's nodes, emitted in dependency order (ties: as measured, then as in the graph),
    built as columns and encoded at the end (:func:`chakra.wire.encode_columns`)."""

    def __init__(self, context: _Context, conversion: TfConversion, rank: int, graph: GraphDef):
        self.context = context
        self.conversion = conversion
        self.rank = rank
        self.device = conversion.devices[rank]
        self.graph = graph
        self.runs = context.executions.get(self.device, {})
        self.names: list[str] = []
        self.types: list[int] = []
        self.data: list[list[int]] = []
        self.ctrl: list[list[int]] = []
        self.starts: list[int] = []
        self.durations: list[int] = []
        self.attrs: dict[str, dict[int, object]] = {column: {} for column in _COLUMNS}  # column -> row -> value

    def order(self) -> list[NodeDef]:
        """Kahn's order over data and control edges, the loop back edges dropped."""
        by_name = self.context.by_name[self.device]
        inputs = self.context.inputs[self.device]
        children: dict[str, list[str]] = defaultdict(list)
        waiting: dict[str, int] = {}
        for node in self.graph.node:
            parents = {source for source, _, _ in inputs[node.name]} & by_name.keys()
            back = {p for p in parents if by_name[p].op == LOOP_BACK_OP}
            if back:
                self.conversion.dropped["loop back edges (NextIteration -> Merge)"] += len(back)
            for parent in parents - back:
                children[parent].append(node.name)
            waiting[node.name] = len(parents - back)
        position = {node.name: i for i, node in enumerate(self.graph.node)}
        unmeasured = float("inf")

        def key(name: str) -> tuple[float, int, str]:
            runs = self.runs.get(name)
            return (runs[0].start_ns if runs else unmeasured, position[name], name)

        ready = [key(name) for name, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            name = heapq.heappop(ready)[2]
            out.append(by_name[name])
            for child in children[name]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, key(child))
        if len(out) < len(self.graph.node):
            self.conversion.dropped["nodes on a dependency cycle"] += len(self.graph.node) - len(out)
        return out

    def emit(self) -> list[bytes]:
        stands_for: dict[str, frozenset[int]] = {}  # graph node -> the ET nodes it stands for
        inputs = self.context.inputs[self.device]
        for node in self.order():
            data: set[int] = set()
            ctrl: set[int] = set()
            for source, _, control in inputs[node.name]:
                (ctrl if control else data).update(stands_for.get(source, ()))
            if node.op in FOLDED_OPS:
                self.conversion.folded[node.op] += 1
                stands_for[node.name] = frozenset(data | ctrl)
                continue
            stands_for[node.name] = frozenset({self.add(node, sorted(data), sorted(ctrl - data))})
        rows = len(self.names)
        columns = [
            AttrColumn(_COLUMN_ATTR.get(column, column), [values.get(row) for row in range(rows)])
            for column, values in self.attrs.items()
        ]
        empty: list[None] = [None] * rows
        done = encode_columns(
            self.names, self.types, self.ctrl, self.data, self.starts, self.durations, empty, empty, columns
        )
        return done.payloads

    def add(self, graph_node: NodeDef, data: list[int], ctrl: list[int]) -> int:
        row = len(self.names)
        attrs = self.attrs
        self.names.append(graph_node.name)
        self.data.append(data)
        self.ctrl.append(ctrl)
        attrs["op_type"][row] = graph_node.op
        runs = self.runs.get(graph_node.name)
        start_us = dur_us = 0
        if runs:
            start_us = max(1, runs[0].start_ns // NS_PER_US)
            dur_ns = sum(r.dur_ns for r in runs)
            dur_us = dur_ns // NS_PER_US
            attrs["duration_ns"][row] = dur_ns
            if runs[0].thread is not None:  # an asynchronous kernel holds no thread: no resource
                attrs["tid"][row] = runs[0].thread
            if len(runs) > 1:
                self.conversion.repeated[graph_node.op] += 1
        elif self.conversion.profiled:
            self.conversion.untimed[graph_node.op] += 1
        self.starts.append(start_us)
        self.durations.append(dur_us)
        attrs["is_cpu_op"][row] = False
        self.types.append(self.kind(graph_node, row))
        self.conversion.converted[graph_node.op] += 1
        return row

    def kind(self, graph_node: NodeDef, row: int) -> NodeType:
        """The node's type, with the attributes of that type set in row ``row``."""
        op = graph_node.op
        if op in SEND_OPS or op in RECV_OPS:
            key = _rendezvous(graph_node)
            sending = op in SEND_OPS
            peer = self.context.rank_of.get(key[1] if sending else key[0])
            if peer is not None:
                size = self.context.sent_bytes(key)
                attrs = self.attrs
                attrs["send_peer" if sending else "comm_src"][row] = peer
                attrs["comm_src" if sending else "recv_self"][row] = self.rank
                attrs["comm_tag"][row] = self.context.tags[key]
                self.set_size(row, op, size)
                return COMM_SEND_NODE if sending else COMM_RECV_NODE
            self.conversion.dropped[f"{op} with a device not recorded: kept as compute"] += 1
        rule = COLLECTIVES.get(op)
        if rule is not None:
            self.attrs["comm_type"][row] = int(rule.comm_type)
            size = (self.context.output_bytes(self.device, graph_node, 0) if rule.data is None
                    else self.context.input_bytes(self.device, graph_node, rule.data))  # fmt: skip
            self.set_size(row, op, size)
            group_key = self.context.group_key_of.get((self.device, graph_node.name))
            if group_key is not None:
                self.attrs["pg_name"][row] = str(self.context.gid_of_key[group_key])
            else:
                self.conversion.dropped[f"{op} group (no group key in the graph or the profile)"] += 1
            return COMM_COLL_NODE
        by_name = self.context.by_name[self.device]
        inputs = []
        input_bytes = 0
        for source, port, control in self.context.inputs[self.device][graph_node.name]:
            producer = by_name.get(source)
            if control or producer is None:
                continue
            shapes = self.context.shapes(self.device, producer)
            inputs.append(shapes[port] if port < len(shapes) else None)
            input_bytes += self.context.output_bytes(self.device, producer, port) or 0
        outputs = self.context.shapes(self.device, graph_node)
        flags = {name: graph_node.attr[name].b for name in ("transpose_a", "adj_x") if name in graph_node.attr}
        flops = op_flops(op, inputs, outputs, flags)
        if flops is not None:
            self.attrs["num_ops"][row] = flops
        output_bytes = sum(self.context.output_bytes(self.device, graph_node, p) or 0 for p in range(len(outputs)))
        self.attrs["tensor_size"][row] = input_bytes + output_bytes
        return COMP_NODE

    def set_size(self, row: int, op: str, size: int | None) -> None:
        if size is None:
            self.conversion.unsized[op] += 1
        else:
            self.attrs["comm_size"][row] = size


def write_tf_workload(conversion: TfConversion, prefix: PathLike) -> WrittenWorkload:
    """Write ``PREFIX.{rank}.et`` for every device and ``PREFIX.comm_groups.json``."""
    with WorkloadWriter(prefix) as writer:
        for rank, payloads in conversion.payloads.items():
            metadata = GlobalMetadata(version=io.FORMAT_VERSION)
            metadata.attr.add(name="tf_device", string_val=conversion.devices[rank])
            writer.write_payloads(rank, metadata, payloads)
        if conversion.groups:
            writer.groups = conversion.groups
    assert writer.result is not None
    return writer.result
