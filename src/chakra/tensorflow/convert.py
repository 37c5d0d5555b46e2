"""TensorFlow steps to Chakra ETs: one ``PREFIX.{rank}.et`` per device of a recorded step.

Input: what :mod:`chakra.tensorflow.collect` wrote for each worker, read by
:func:`chakra.tensorflow.recording.load_recorded_workers`. :func:`convert_workers` turns the step function's
partition graphs (:func:`chakra.tensorflow.graph_table.read_step_tables`) into nodes, one rank per device,
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

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from chakra import io
from chakra._fold_order import fold_in_order
from chakra._tf_graph import io_bytes
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
from chakra.schema.tensorflow.tf_subset_pb2 import NodeDef
from chakra.steps import StepRun, step_note
from chakra.tensorflow.costs import COUNTED_OPS, INPUT_SHAPED_OPS, op_flops
from chakra.tensorflow.graph import (
    FOLDED_OPS,
    const_int,
    rank_order,
)
from chakra.tensorflow.graph_table import GraphTable
from chakra.tensorflow.profile import OpExecution
from chakra.tensorflow.recording import Worker, step_times
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns
from chakra.workload_writer import WorkloadWriter, WrittenWorkload

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
#: The ops whose nodes may communicate: typed one by one (:meth:`_Device.comm_kind`).
TALKING_OPS = SEND_OPS | RECV_OPS | frozenset(COLLECTIVES)


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
    devices = rank_order([d for w in workers for d in w.tables])
    if len(set(devices)) != len(devices):
        repeated = sorted(d for d, n in Counter(devices).items() if n > 1)
        raise ChakraInputError(f"device {repeated[0]} is in two recordings", path=workers[0].path,
                               hint="pass each worker's folder once")  # fmt: skip
    conversion = TfConversion(devices, {}, CommGroups())
    conversion.profiled = all(w.profile is not None for w in workers)
    executions: dict[str, dict[str, list[OpExecution]]] = {}
    with gc_paused():  # a few objects per node, kept to the end: see chakra.collector
        if conversion.profiled:
            times = step_times(workers)
            executions, conversion.step_runs, conversion.step_run = times.executions, times.runs, times.chosen
            conversion.events.update(times.events)
        context = _Context(workers, devices, executions)
        conversion.groups = context.comm_groups(conversion)
        for worker in workers:  # the counts fill in the order of the recordings
            for device in worker.tables:
                rank = devices.index(device)
                conversion.payloads[rank] = _Device(context, conversion, rank).emit()
    conversion.payloads = dict(sorted(conversion.payloads.items()))
    return conversion


class _Context:
    """What every device's conversion shares: ranks, graphs as columns, transfer tags and sizes,
    collective groups."""

    def __init__(self, workers: list[Worker], devices: list[str], executions: dict[str, dict[str, list[OpExecution]]]):
        self.rank_of = {device: rank for rank, device in enumerate(devices)}
        self.executions = executions
        self.tables = {device: table for w in workers for device, table in w.tables.items()}
        self.sends: dict[tuple[str, str, str], tuple[GraphTable, int]] = {}  # rendezvous key -> its _Send
        keys: set[tuple[str, str, str]] = set()
        for table in self.tables.values():
            for row, op in enumerate(table.ops):
                if op in SEND_OPS or op in RECV_OPS:
                    key = _rendezvous(table.node(row))
                    keys.add(key)
                    if op in SEND_OPS:
                        self.sends[key] = (table, row)
        self.tags = {key: tag for tag, key in enumerate(sorted(keys))}
        self.group_key_of: dict[tuple[str, int], int | None] = {}  # (device, row) -> a collective's group key
        self._resolved: dict[tuple[int, int, int], int | None] = {}  # (table id, row, port) -> bytes

    def input_bytes(self, table: GraphTable, row: int, index: int) -> int | None:
        """Bytes of data input ``index`` of ``row``."""
        data = [(source, port) for source, port, control in table.inputs[row] if not control]
        if index >= len(data):
            return None
        source, port = data[index]
        return None if source < 0 else self.output_bytes(table, source, port)

    def sent_bytes(self, key: tuple[str, str, str]) -> int | None:
        """Bytes a transfer moves: what its ``_Send`` is given."""
        send = self.sends.get(key)
        return None if send is None or key[0] not in self.tables else self.input_bytes(*send, 0)

    def output_bytes(self, table: GraphTable, row: int, port: int) -> int | None:
        """Bytes of one output: from ``_output_shapes`` and the node's type; where TensorFlow could
        not infer it statically, a ``_Recv`` has what its ``_Send`` was given and an identity what
        it is given (shape inference stops at a partition's edge)."""
        sizes = table.output_bytes[row]
        if port < len(sizes) and (size := sizes[port]) is not None:
            return size
        op = table.ops[row]
        if op not in RECV_OPS and op not in PASS_THROUGH_OPS:
            return None
        memo = (id(table), row, port)
        if memo not in self._resolved:
            self._resolved[memo] = None  # a cycle reads as unknown
            if op in RECV_OPS:
                size = self.sent_bytes(_rendezvous(table.node(row)))
            else:
                size = self.input_bytes(table, row, port if op == "IdentityN" else 0)
            self._resolved[memo] = size
        return self._resolved[memo]

    def group_key(self, device: str, row: int) -> int | None:
        """A collective's group key: from its execution in the step, else its graph constant."""
        table = self.tables[device]
        runs = self.executions.get(device, {}).get(table.names[row])
        if runs and runs[0].group_key is not None:
            return runs[0].group_key
        rule = COLLECTIVES[table.ops[row]]
        if rule.group_key is None:
            node = table.node(row)
            return int(node.attr["group_key"].i) if "group_key" in node.attr else None
        return self._const_input(table, row, rule.group_key)

    def group_size(self, device: str, row: int) -> int | None:
        table = self.tables[device]
        rule = COLLECTIVES[table.ops[row]]
        if rule.group_size is None:
            node = table.node(row)
            return int(node.attr["group_size"].i) if "group_size" in node.attr else None
        return self._const_input(table, row, rule.group_size)

    def _const_input(self, table: GraphTable, row: int, index: int) -> int | None:
        data = [source for source, _, control in table.inputs[row] if not control]
        if index >= len(data):
            return None
        producer = data[index]
        while producer >= 0 and table.ops[producer] == "Identity" and (inputs := table.inputs[producer]):
            producer = inputs[0][0]
        return None if producer < 0 else const_int(table.node(producer))

    def comm_groups(self, conversion: TfConversion) -> CommGroups:
        """Group ids by member ranks: the devices running collectives of one group key."""
        members: dict[int, set[int]] = defaultdict(set)
        sizes: dict[int, set[int]] = defaultdict(set)
        for device, table in self.tables.items():
            for row, op in enumerate(table.ops):
                if op not in COLLECTIVES:
                    continue
                key = self.group_key(device, row)
                self.group_key_of[(device, row)] = key
                if key is not None:
                    members[key].add(self.rank_of[device])
                    if (size := self.group_size(device, row)) is not None:
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


#: The attribute columns of a device's nodes, in the order a node lists them; a send names its peer
#: as ``comm_dst`` before its own rank, a receive its peer as ``comm_src`` before its own.
_COLUMNS = (
    "op_type", "duration_ns", "tid", "is_cpu_op", "send_peer", "comm_src", "recv_self", "comm_tag", "comm_type",
    "comm_size", "pg_name", "num_ops", "tensor_size",
)  # fmt: skip
#: Columns named for their role, written as these attributes.
_COLUMN_ATTR = {"send_peer": "comm_dst", "recv_self": "comm_dst"}
#: The columns built whole, a value per row (None where the row has none); the others are kept as
#: row -> value for the few rows that set them.
_WHOLE = frozenset({"op_type", "is_cpu_op", "duration_ns", "tid", "num_ops", "tensor_size"})


class _Device:
    """One device's nodes, emitted in dependency order (ties: as measured, then as in the graph),
    built as columns and encoded at the end (:func:`chakra.wire.encode_columns`)."""

    def __init__(self, context: _Context, conversion: TfConversion, rank: int):
        self.context = context
        self.conversion = conversion
        self.rank = rank
        self.device = conversion.devices[rank]
        self.table = context.tables[self.device]
        self.runs = context.executions.get(self.device, {})
        #: the columns not built whole: column -> row -> value, for the rows that set it
        self.attrs: dict[str, dict[int, object]] = {column: {} for column in _COLUMNS if column not in _WHOLE}

    def emit(self) -> list[bytes]:
        """The device's nodes in Kahn's order over data and control edges (the loop back edges
        dropped; ready ties by measured start, then graph row), the folded ops replaced by what they
        depend on (:func:`chakra._fold_order.fold_in_order`), encoded."""
        table, conversion = self.table, self.conversion
        runs_of_row = list(map(self.runs.get, table.names))  # each graph row's executions in the step
        starts = [runs[0].start_ns if runs else None for runs in runs_of_row]
        folding = bytes(map(FOLDED_OPS.__contains__, table.ops))
        loop_back = bytes(map(LOOP_BACK_OP.__eq__, table.ops))
        try:
            rows, data, ctrl, folded, back_edges, on_cycle = fold_in_order(table.inputs, folding, loop_back, starts)
        except OverflowError:  # starts past 64 bits (a damaged profile's times): their order is what counts
            rank = {start: k for k, start in enumerate(sorted({s for s in starts if s is not None}))}
            ranks = [None if start is None else rank[start] for start in starts]
            rows, data, ctrl, folded, back_edges, on_cycle = fold_in_order(table.inputs, folding, loop_back, ranks)
        if back_edges:
            conversion.dropped["loop back edges (NextIteration -> Merge)"] += back_edges
        if on_cycle:
            conversion.dropped["nodes on a dependency cycle"] += on_cycle
        names = list(map(table.names.__getitem__, rows))
        ops = list(map(table.ops.__getitem__, rows))
        starts_us, durations_us, duration_ns, tids = self.times(list(map(runs_of_row.__getitem__, rows)), ops)
        whole: dict[str, Sequence[object]] = {
            "op_type": ops, "is_cpu_op": [False] * len(rows), "duration_ns": duration_ns, "tid": tids,
        }  # fmt: skip
        # compute nodes as columns, their sizes summed in C where every one is known; then the few
        # communicating nodes typed one by one, in order (the counts they add are reported in it)
        input_sums, output_sums = io_bytes(table.inputs, table.output_bytes)
        tensor_bytes, flops = self.tensor_bytes, self.flops
        tensor_size: list[int | None] = [
            i + o if (i := input_sums[g]) is not None and (o := output_sums[g]) is not None else tensor_bytes(g)
            for g in rows
        ]
        num_ops: list[int | None] = [flops(g, op) if op in COUNTED_OPS else 0 for g, op in zip(rows, ops, strict=True)]
        types: list[NodeType] = [COMP_NODE] * len(rows)
        for row in [row for row, op in enumerate(ops) if op in TALKING_OPS]:
            kind = self.comm_kind(rows[row], row, ops[row])
            if kind is not None:
                types[row] = kind
                tensor_size[row] = num_ops[row] = None
        whole["num_ops"], whole["tensor_size"] = num_ops, tensor_size
        conversion.folded.update(map(table.ops.__getitem__, folded))
        conversion.converted.update(ops)
        columns = [
            AttrColumn(
                _COLUMN_ATTR.get(column, column),
                whole[column] if column in _WHOLE else list(map(self.attrs[column].get, range(len(rows)))),
            )
            for column in _COLUMNS
        ]
        empty: list[None] = [None] * len(rows)
        return encode_columns(names, types, ctrl, data, starts_us, durations_us, empty, empty, columns).payloads

    def times(
        self, executions: list[list[OpExecution] | None], ops: list[str]
    ) -> tuple[list[int], list[int], list[int | None], list[int | None]]:
        """Each node's start and duration (µs) and its ``duration_ns`` and ``tid`` columns, from its
        ``executions`` in the step (a node that ran more than once: first start, summed duration); the
        nodes that ran more than once, or not at all, counted."""
        # columns at once: most nodes ran once; the few that ran more or not at all counted after
        duration_ns: list[int | None] = [
            None if not runs else runs[0].dur_ns if len(runs) == 1 else sum(r.dur_ns for r in runs)
            for runs in executions
        ]
        start_us = [max(1, runs[0].start_ns // NS_PER_US) if runs else 0 for runs in executions]
        dur_us = [0 if dur_ns is None else dur_ns // NS_PER_US for dur_ns in duration_ns]
        # an asynchronous kernel holds no thread (None): no resource
        tids: list[int | None] = [runs[0].thread if runs else None for runs in executions]
        repeated, untimed, profiled = self.conversion.repeated, self.conversion.untimed, self.conversion.profiled
        for row in [row for row, runs in enumerate(executions) if not runs or len(runs) > 1]:
            if executions[row]:
                repeated[ops[row]] += 1
            elif profiled:
                untimed[ops[row]] += 1
        return start_us, dur_us, duration_ns, tids

    def comm_kind(self, graph_row: int, row: int, op: str) -> NodeType | None:
        """The type of a communicating op's node (``TALKING_OPS``), with the attributes of that type
        set in row ``row``; ``None`` for a transfer with a device not recorded (kept as compute)."""
        table, context = self.table, self.context
        if op in SEND_OPS or op in RECV_OPS:
            key = _rendezvous(table.node(graph_row))
            sending = op in SEND_OPS
            peer = context.rank_of.get(key[1] if sending else key[0])
            if peer is not None:
                size = context.sent_bytes(key)
                attrs = self.attrs
                attrs["send_peer" if sending else "comm_src"][row] = peer
                attrs["comm_src" if sending else "recv_self"][row] = self.rank
                attrs["comm_tag"][row] = context.tags[key]
                self.set_size(row, op, size)
                return COMM_SEND_NODE if sending else COMM_RECV_NODE
            self.conversion.dropped[f"{op} with a device not recorded: kept as compute"] += 1
            return None
        rule = COLLECTIVES[op]
        self.attrs["comm_type"][row] = int(rule.comm_type)
        size = (context.output_bytes(table, graph_row, 0) if rule.data is None
                else context.input_bytes(table, graph_row, rule.data))  # fmt: skip
        self.set_size(row, op, size)
        group_key = context.group_key_of.get((self.device, graph_row))
        if group_key is not None:
            self.attrs["pg_name"][row] = str(context.gid_of_key[group_key])
        else:
            self.conversion.dropped[f"{op} group (no group key in the graph or the profile)"] += 1
        return COMM_COLL_NODE

    def flops(self, graph_row: int, op: str) -> int | None:
        """``num_ops`` of a compute node of an op :func:`~chakra.tensorflow.costs.op_flops` counts."""
        table = self.table
        shapes = table.shapes
        inputs = (
            [shapes[source][port] if port < len(shapes[source]) else None
             for source, port, control in table.inputs[graph_row] if not control and source >= 0]
            if op in INPUT_SHAPED_OPS
            else []
        )  # fmt: skip
        return op_flops(op, inputs, shapes[graph_row], table.flags[graph_row])

    def tensor_bytes(self, graph_row: int) -> int:
        """``tensor_size`` of a compute node some of whose sizes are known only through the graph (a
        ``_Recv`` kept as compute, what it feeds): its data inputs' and its outputs' bytes."""
        table, output_bytes = self.table, self.context.output_bytes
        inputs = sum(output_bytes(table, source, port) or 0 for source, port, control in table.inputs[graph_row]
                     if not control and source >= 0)  # fmt: skip
        return inputs + sum(output_bytes(table, graph_row, port) or 0 for port in range(len(table.shapes[graph_row])))

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
