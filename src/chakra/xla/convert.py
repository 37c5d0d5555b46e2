"""One SPMD HLO module as one Chakra ET per device (partial front end, issue 16).

Every device runs the same program (XLA's SPMD partitioner wrote it for one of them); what differs
is which group each collective's device is in. Per device, the entry computation's instructions
become nodes in XLA's schedule order (node ids follow it, so a consumer issuing ready nodes by
ascending id follows the schedule):

* ``parameter``, ``constant``, ``tuple``, ``get-tuple-element``, ``bitcast`` and the like are
  *folded*: they compute nothing, and a node that uses one depends on what produced its operands;
  the report counts them by opcode;
* every node runs on stream 0 of its device, one after another, as XLA runs them;
* a ``fusion``, ``dot``, ``convolution`` or any other computing instruction is a COMP node with
  ``num_ops`` (FLOPs) and ``tensor_size`` (bytes at its boundary) from :mod:`chakra.xla.costs`;
* ``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all`` (and their async ``-start``;
  the ``-done`` is folded into it, and with a profile the node lasts from the start's beginning to
  the done's end) are COMM_COLL_NODEs of that type, ``comm_size`` by the format's
  convention (all-gather: the bytes each device puts in; the others: the whole buffer), ``pg_name``
  the id of the device's group; one communicator group per distinct group of devices;
* ``collective-permute`` is a SEND to each target the device sends to and a RECV from each source,
  tagged in the order the permutes are emitted (the same on every device);
* a ``while`` loop whose trip count XLA knows (``lax.scan`` over layers) is unrolled: its body once
  per iteration (nodes named ``NAME@ITERATION``), each iteration after the previous; a ``call`` is
  inlined; a loop of unknown count and a ``conditional`` are kept as one COMP node each, reported.

Times: with a JAX profile (:mod:`chakra.xla.profile`) every node gets its instruction's measured
start and duration on that device, from one profiled step (:meth:`Profile.step_run`: the complete
step of median span, the same step on every device; the report names it); without a profile the
nodes carry costs only (``chakra simulate`` times them).

Example:
    conversion = convert_module(load_module("step.hlo.pb"))
    write_xla_workload(conversion, "out/step")
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from chakra import io
from chakra.attrs import WELL_KNOWN, check_value
from chakra.collector import gc_paused
from chakra.errors import AttrKindError, ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.output_size import MAX_OUTPUT_BYTES, check_output_size
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
    GlobalMetadata,
    Node,
    NodeType,
)
from chakra.schema.xla.hlo_subset_pb2 import HloComputationProto, HloInstructionProto
from chakra.steps import StepRun, step_note
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns
from chakra.workload_writer import WorkloadWriter, WrittenWorkload
from chakra.xla.costs import instruction_bytes, instruction_flops
from chakra.xla.hlo import (
    HloModule,
    computation_order,
    module_device_count,
    replica_groups,
    shape_bytes,
    trip_count,
    while_body,
)
from chakra.xla.profile import Profile, Timing

#: Instructions that compute nothing on their own: folded into the dependencies.
FOLDED = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id", "replica-id",
     "add-dependency", "opt-barrier", "all-reduce-done", "all-gather-done", "collective-permute-done"}
)  # fmt: skip
#: Collectives by opcode (their async start the same), and which operand size is their comm_size.
COLLECTIVES = {
    "all-reduce": ALL_REDUCE,
    "all-gather": ALL_GATHER,
    "reduce-scatter": REDUCE_SCATTER,
    "all-to-all": ALL_TO_ALL,
}
ASYNC_START_SUFFIX, ASYNC_DONE_SUFFIX = "-start", "-done"
#: The stream every node of a device runs on: XLA runs a program's operations one after another on
#: its device (the profile shows one thread per device); async collectives would be a second stream.
DEVICE_STREAM = 0
PERMUTES = frozenset({"collective-permute", "collective-permute-start"})


@dataclass
class TupleOf:
    """What a tuple stands for: its parts' nodes, apart, so that a ``get-tuple-element`` depends on
    its part only (a loop's state passes weights through unchanged: joined, every iteration would
    depend on every earlier one)."""

    parts: list[Produced]


#: The nodes an instruction's users depend on: a list, or a tuple's parts.
Produced = list[int] | TupleOf


def flat(produced: Produced) -> list[int]:
    """Every node ``produced`` stands for."""
    if isinstance(produced, TupleOf):
        out: list[int] = []
        for part in produced.parts:
            out.extend(flat(part))
        return out
    return produced


#: The attribute columns of a device's nodes, in the order a node lists them.
_COLUMNS = (
    "duration_ns", "is_cpu_op", "stream", "num_ops", "tensor_size", "comm_type", "comm_dst", "comm_src", "comm_tag",
    "comm_size", "pg_name",
)  # fmt: skip
#: Trip counts from which a loop's later iterations are copied from its second, not emitted one by one
#: (:meth:`_Emitter.unrolled`; the same nodes, a few times faster).
COPY_ITERATIONS_FROM = 3
#: Control flow kept as one node for now (the report says so).
NOT_UNROLLED = frozenset({"while", "conditional"})


@dataclass
class XlaConversion:
    """The nodes of every device, the communicator groups and what was done with each instruction."""

    module: HloModule
    devices: int
    payloads: dict[int, list[bytes]]  # device -> its nodes, encoded
    groups: CommGroups
    converted: Counter[str] = field(default_factory=Counter)  # opcode -> instructions made into nodes
    folded: Counter[str] = field(default_factory=Counter)  # opcode -> instructions folded
    kept: Counter[str] = field(default_factory=Counter)  # opcode -> control flow kept as one node
    unrolled: Counter[str] = field(default_factory=Counter)  # opcode -> loops unrolled
    untimed: Counter[str] = field(default_factory=Counter)  # opcode -> nodes the profile has no event for
    profiled: bool = False
    step_runs: list[StepRun] = field(default_factory=list)  # every run of the module in the profile
    step_run: str | None = None  # the run whose times the nodes carry (Profile.step_run)
    costs: dict[int, dict[str, int]] = field(default_factory=dict)  # instruction id -> its costs
    done_of: dict[int, HloInstructionProto] = field(default_factory=dict)  # async start id -> its done

    @property
    def nodes(self) -> dict[int, list[Node]]:
        """Every device's nodes as messages (decoded from :attr:`payloads` at each call)."""
        return {device: [Node.FromString(p) for p in payloads] for device, payloads in self.payloads.items()}

    @property
    def notes(self) -> list[str]:
        out = [
            f"{count:,} {op} kept as one node each: its trip count is unknown (or it is a conditional)"
            for op, count in self.kept.items()
        ]
        if not self.profiled:
            out.append("no profile: nodes carry FLOPs and bytes but no durations (chakra simulate times them)")
        chosen = next((r for r in self.step_runs if r.run == self.step_run), None)
        said = step_note(self.step_runs, chosen) if chosen is not None else None
        if said is not None:
            out.append(said)
        for op, count in self.untimed.items():
            out.append(f"{count:,} {op} nodes of device 0 have no event in the profile: no duration")
        return out


def module_devices(module: HloModule) -> int:
    """The devices the module was compiled for, else those its collectives name (1 for none)."""
    recorded = module_device_count(module)
    if recorded is not None:
        return recorded
    highest = 0
    for instruction in module.scheduled():
        if instruction.opcode.removesuffix(ASYNC_START_SUFFIX) in COLLECTIVES:
            highest = max(highest, *(max(g) for g in replica_groups(instruction, 1) if g))
        for pair in instruction.source_target_pairs:
            highest = max(highest, pair.source, pair.target)
    return highest + 1


def convert_module(
    module: HloModule,
    devices: int | None = None,
    profile: Profile | None = None,
    *,
    max_bytes: int | None = MAX_OUTPUT_BYTES,
) -> XlaConversion:
    """Every device's nodes for ``module`` (``devices``: default :func:`module_devices`), with the
    starts and durations ``profile`` measured on each device when one is given. Refused before any
    work when the files would take more than ``max_bytes`` (``None``: no limit; the estimate of
    :func:`estimated_nodes`)."""
    count = devices if devices is not None else module_devices(module)
    if count < 1:
        raise ChakraInputError(f"devices must be at least 1, got {count}", path=module.path)
    nodes = estimated_nodes(module)
    check_output_size(
        count * (nodes * NODE_BYTES_ESTIMATE + FILE_BYTES_ESTIMATE), max_bytes,
        f"{count:,} device{'s' if count != 1 else ''} of about {nodes:,} nodes each (loops unrolled)", path=module.path,
        check="--devices and the loops' known_trip_count",
    )  # fmt: skip
    group_ids: dict[tuple[int, ...], int] = {}
    conversion = XlaConversion(module, count, {}, CommGroups())
    for instruction in module.instructions.values():
        if instruction.opcode.endswith(ASYNC_DONE_SUFFIX) and instruction.operand_ids:
            conversion.done_of[instruction.operand_ids[0]] = instruction
    run = None
    if profile is not None:
        conversion.step_runs = profile.step_runs(module.proto.name)
        run = profile.step_run(module.proto.name)
    with gc_paused():  # a few objects per node, kept to the end: see chakra.collector
        for device in range(count):
            timings = profile.timings(module.proto.name, device, run) if profile is not None else None
            conversion.payloads[device] = _device_nodes(conversion, device, group_ids, device == 0, timings)
    conversion.profiled = profile is not None
    conversion.step_run = run
    conversion.groups = CommGroups({gid: members for members, gid in group_ids.items()})
    return conversion


#: About what an emitted node takes in its file at most (its name, ids, dependencies, attributes),
#: and a file without nodes (its metadata): the --max-size estimate.
NODE_BYTES_ESTIMATE = 256
FILE_BYTES_ESTIMATE = 256


def estimated_nodes(module: HloModule) -> int:
    """The nodes one device's program emits at most: each instruction once, a called computation's
    once per call, a ``while`` loop of known trip count's body once per iteration (before anything
    is unrolled: a trip count of 10^12 counts, it does not run)."""
    counted: dict[int, int] = {}

    def count(computation: HloComputationProto) -> int:
        if computation.id in counted:
            return counted[computation.id]
        counted[computation.id] = 0  # a computation reached again through itself adds nothing
        total = 0
        for instruction in computation.instructions:
            trips = trip_count(instruction) if instruction.opcode == "while" else None
            if trips is not None:
                total += max(trips, 0) * count(while_body(module, instruction))
            elif instruction.opcode == "call" and instruction.called_computation_ids:
                total += count(module.computations[instruction.called_computation_ids[0]])
            else:
                total += 1
        counted[computation.id] = total
        return total

    return count(module.entry)


def _device_nodes(
    conversion: XlaConversion,
    device: int,
    group_ids: dict[tuple[int, ...], int],
    counting: bool,
    timings: dict[str, list[Timing]] | None,
) -> list[bytes]:
    emitter = _Emitter(conversion, device, group_ids, counting, timings)
    emitter.emit(conversion.module.entry, {})
    return emitter.encoded()


class _Emitter:
    """One device's nodes, emitted computation by computation (loop bodies once per iteration)."""

    def __init__(
        self,
        conversion: XlaConversion,
        device: int,
        group_ids: dict[tuple[int, ...], int],
        counting: bool,
        timings: dict[str, list[Timing]] | None,
    ):
        self.conversion = conversion
        self.module = conversion.module
        self.device = device
        self.group_ids = group_ids
        self.counting = counting
        self.names: list[str] = []
        self.types: list[int] = []
        self.deps: list[list[int]] = []
        self.starts: list[int] = []
        self.durations: list[int] = []
        self.attrs: dict[str, dict[int, object]] = {name: {} for name in _COLUMNS}  # name -> row -> value
        self.permutes = 0  # collective-permutes emitted: their tags, the same order on every device
        self.timings = timings
        self.emitted: Counter[str] = Counter()  # instruction name -> emissions so far

    def timing_of(self, instruction: HloInstructionProto) -> Timing | None:
        """The measured execution of this emission of ``instruction`` (its k-th emission is its k-th
        execution in the profile's run: an unrolled loop's k-th iteration), or ``None``."""
        if self.timings is None:
            return None
        executions = self.timings.get(instruction.name, [])
        index = self.emitted[instruction.name]
        self.emitted[instruction.name] += 1
        if index >= len(executions):
            self.count(self.conversion.untimed, instruction.opcode)
            return None
        start_us, dur_us = executions[index]
        done = self.conversion.done_of.get(instruction.id)
        if done is not None:  # an async collective spans its start and its done
            finished = self.timings.get(done.name, [])
            if index < len(finished):
                done_start_us, done_dur_us = finished[index]
                dur_us = max(dur_us, done_start_us + done_dur_us - start_us)
        return start_us, dur_us

    def add(
        self, name: str, node_type: NodeType, deps: list[int], timing: Timing | None = None, **attrs: object
    ) -> int:
        row = len(self.names)
        self.names.append(name)
        self.types.append(node_type)
        self.deps.append(deps)
        columns = self.attrs
        if timing is not None:
            start_us, dur_us = timing
            self.starts.append(max(1, round(start_us)))  # 0 would read as "not recorded"
            self.durations.append(round(dur_us))
            columns["duration_ns"][row] = round(dur_us * NS_PER_US)
        else:
            self.starts.append(0)
            self.durations.append(0)
        columns["is_cpu_op"][row] = False
        columns["stream"][row] = DEVICE_STREAM
        for key, value in attrs.items():
            columns[key][row] = value
        return row

    def encoded(self) -> list[bytes]:
        """The nodes added, encoded (:func:`chakra.wire.encode_columns`)."""
        rows = len(self.names)
        columns = [AttrColumn(name, [values.get(row) for row in range(rows)]) for name, values in self.attrs.items()]
        empty: list[None] = [None] * rows
        try:
            return encode_columns(
                self.names, self.types, [[]] * rows, self.deps, self.starts, self.durations, empty, empty, columns
            ).payloads
        except AttrKindError as exc:  # a size past int64: a shape no device holds
            row = _first_refused(columns)
            raise ChakraInputError(
                f"{self.names[row]}: {exc}",
                path=self.module.path,
                hint="the module's shapes are damaged: dump it again",
            ) from None

    def costs(self, instruction: HloInstructionProto) -> dict[str, int]:
        """``num_ops`` and ``tensor_size`` of an instruction, computed once per module (every device
        and loop iteration runs the same instruction)."""
        cached = self.conversion.costs.get(instruction.id)
        if cached is None:
            cached = self.conversion.costs[instruction.id] = {
                "num_ops": instruction_flops(self.module, instruction),
                "tensor_size": instruction_bytes(self.module, instruction),
            }
        return cached

    def count(self, table: Counter[str], op: str) -> None:
        if self.counting:
            table[op] += 1

    def emit(self, computation: HloComputationProto, parameters: dict[int, Produced], suffix: str = "") -> Produced:
        """Emit ``computation``'s instructions (``parameters``: parameter number -> what it stands
        for) and return what its result stands for."""
        made: dict[int, Produced] = {}
        for instruction in computation_order(self.module, computation):
            op = instruction.opcode
            if op == "tuple":  # kept as its parts: a get-tuple-element picks one, not all
                self.count(self.conversion.folded, op)
                made[instruction.id] = TupleOf([made.get(o, []) for o in instruction.operand_ids])
                continue
            if op == "get-tuple-element":
                self.count(self.conversion.folded, op)
                source = made.get(instruction.operand_ids[0], [])
                if isinstance(source, TupleOf) and instruction.tuple_index < len(source.parts):
                    made[instruction.id] = source.parts[instruction.tuple_index]
                else:
                    made[instruction.id] = flat(source)
                continue
            if op == "while" and trip_count(instruction) is not None:
                made[instruction.id] = self.unrolled(instruction, made.get(instruction.operand_ids[0], []), suffix)
                continue
            if op == "call":
                self.count(self.conversion.converted, op)
                called = self.module.computations[instruction.called_computation_ids[0]]
                arguments = {i: made.get(o, []) for i, o in enumerate(instruction.operand_ids)}
                made[instruction.id] = self.emit(called, arguments, suffix)
                continue
            deps: list[int] = []
            seen: set[int] = set()
            for source_id in (*instruction.operand_ids, *instruction.control_predecessor_ids):
                for d in flat(made.get(source_id, [])):
                    if d not in seen:
                        seen.add(d)
                        deps.append(d)
            made[instruction.id] = self.instruction(instruction, deps, parameters, suffix)
        return made.get(computation.root_id, [])

    def instruction(
        self, instruction: HloInstructionProto, deps: list[int], parameters: dict[int, Produced], suffix: str
    ) -> Produced:
        op = instruction.opcode
        name = instruction.name + suffix
        if op == "parameter":
            self.count(self.conversion.folded, op)
            return parameters.get(instruction.parameter_number, [])
        if op in FOLDED:
            self.count(self.conversion.folded, op)
            return deps
        self.count(self.conversion.converted, op)
        timing = self.timing_of(instruction)
        base = op.removesuffix(ASYNC_START_SUFFIX)
        if base in COLLECTIVES:
            return [self.collective(instruction, base, name, deps, timing)]
        if op in PERMUTES:
            return self.permute(instruction, name, deps, timing)
        if op in NOT_UNROLLED:
            self.count(self.conversion.kept, op)
        return [
            self.add(
                name,
                COMP_NODE,
                deps,
                timing,
                **self.costs(instruction),
            )
        ]

    def unrolled(self, loop: HloInstructionProto, start: Produced, suffix: str) -> Produced:
        """A ``while`` loop of known trip count: its body once per iteration, each iteration's
        parameter standing for the previous one's result (the first's for the loop's operand).

        Iterations from the third on are copies of the second where that is what emitting them would
        give (:meth:`_copy_iterations`): each takes a few list operations a node, not the walk of the
        body's instructions."""
        body = while_body(self.module, loop)
        count = trip_count(loop) or 0
        self.count(self.conversion.unrolled, loop.opcode)
        if count < COPY_ITERATIONS_FROM or self.timings is not None:
            carried = start
            for iteration in range(count):
                carried = self.emit(body, {0: carried}, f"{suffix}@{iteration}")
            return carried
        first_row = len(self.names)
        first = self.emit(body, {0: start}, f"{suffix}@0")
        second_row, permutes, before = len(self.names), self.permutes, self._counts()
        placeholder = f"\x00{second_row}\x00"  # stands for the iteration in the second one's names
        second = self.emit(body, {0: first}, f"{suffix}@{placeholder}")
        length = len(self.names) - second_row
        copyable = (
            length == second_row - first_row
            and self.permutes == permutes  # a permute's tag counts emissions: copies would repeat it
            and _shifted(first, first_row, length) == second
        )
        names = self.names[second_row:]
        self.names[second_row:] = [name.replace(placeholder, "1") for name in names]
        if not copyable:
            carried = second
            for iteration in range(2, count):
                carried = self.emit(body, {0: carried}, f"{suffix}@{iteration}")
            return carried
        self._copy_iterations(second_row, names, placeholder, count, before)
        return _shifted(second, first_row, length * (count - 2))

    def _copy_iterations(
        self, second_row: int, names: list[str], placeholder: str, count: int, before: list[Counter[str]]
    ) -> None:
        """Iterations 2 to ``count - 1`` of a loop as copies of its second (the rows from
        ``second_row`` on, the first's a body's length before, named with ``placeholder`` for the
        iteration): every node a body's length further on, depending on what the second's depends on
        equally further on (or on the same node before the loop). Sound when the second iteration's
        result is the first's shifted by that length (checked by the caller): by induction every
        iteration is then the one before shifted. Without a profile only (a timed node reads its own
        execution's time)."""
        length = len(names)
        first_row = second_row - length
        rows = range(second_row, second_row + length)
        deps = self.deps[second_row:]
        types = self.types[second_row:]
        columns = [(values, [(row, values[row]) for row in rows if row in values]) for values in self.attrs.values()]
        # one int object per row, as emitting shares the one add() returns between its users
        row_ids = list(range(first_row, second_row + length * (count - 1)))
        for iteration in range(2, count):
            at = length * (iteration - 1) - first_row  # row d's copy is row_ids[d + at]
            text = str(iteration)
            self.names += [name.replace(placeholder, text) for name in names]
            self.types += types
            self.deps += [[row_ids[d + at] if d >= first_row else d for d in row_deps] for row_deps in deps]
            offset = length * (iteration - 1)
            for values, kept in columns:
                for row, value in kept:
                    values[row + offset] = value
        self.starts += [0] * (length * (count - 2))
        self.durations += [0] * (length * (count - 2))
        if self.counting:  # what the second iteration counted, for each copy
            for table, was in zip(self._tables(), before, strict=True):
                table.update({op: (n - was[op]) * (count - 2) for op, n in table.items() if n != was[op]})

    def _tables(self) -> list[Counter[str]]:
        c = self.conversion
        return [c.converted, c.folded, c.kept, c.unrolled, c.untimed]

    def _counts(self) -> list[Counter[str]]:
        return [Counter(table) for table in self._tables()]

    def collective(
        self, instruction: HloInstructionProto, base: str, name: str, deps: list[int], timing: Timing | None
    ) -> int:
        groups = replica_groups(instruction, self.conversion.devices)
        members = next((g for g in groups if self.device in g), None)
        if members is None:
            raise ChakraInputError(
                f"{instruction.name} runs on no group holding device {self.device}", path=self.module.path
            )
        gid = self.group_ids.setdefault(tuple(members), len(self.group_ids) + 1)
        return self.add(
            name,
            COMM_COLL_NODE,
            deps,
            timing,
            comm_type=COLLECTIVES[base],
            comm_size=_comm_size(self.module, instruction, base),
            pg_name=str(gid),
        )

    def permute(self, instruction: HloInstructionProto, name: str, deps: list[int], timing: Timing | None) -> list[int]:
        size = shape_bytes(instruction.shape)
        # tagged in emission order: the same on every device and unique (channel ids repeat, every
        # op of a shard_map has 1; instruction ids carry the computation in their high bits)
        tag = self.permutes
        self.permutes += 1
        device = self.device
        sends = [
            self.add(
                f"{name}.send.{p.target}", COMM_SEND_NODE, deps, timing, comm_dst=p.target, comm_tag=tag, comm_size=size
            )
            for p in instruction.source_target_pairs
            if p.source == device
        ]
        receives = [
            self.add(
                f"{name}.recv.{p.source}", COMM_RECV_NODE, deps, timing, comm_src=p.source, comm_tag=tag, comm_size=size
            )
            for p in instruction.source_target_pairs
            if p.target == device
        ]
        return receives or sends


def _shifted(produced: Produced, first_row: int, offset: int) -> Produced:
    """``produced`` with every node from ``first_row`` on ``offset`` further on.

    Example:
        >>> _shifted(TupleOf([[1, 5], [6]]), 5, 10)
        TupleOf(parts=[[1, 15], [16]])
    """
    if isinstance(produced, TupleOf):
        return TupleOf([_shifted(part, first_row, offset) for part in produced.parts])
    return [d + offset if d >= first_row else d for d in produced]


def _comm_size(module: HloModule, instruction: HloInstructionProto, base: str) -> int:
    """The format's ``comm_size``: an all-gather's bytes put in by each device, else the buffer's."""
    operands = sum(shape_bytes(module.instructions[o].shape) for o in instruction.operand_ids)
    if base == "all-reduce":
        return shape_bytes(instruction.shape) if instruction.opcode == base else operands
    return operands


def _first_refused(columns: list[AttrColumn]) -> int:
    """The first row holding a value its attribute cannot (what the batch encoder refused)."""
    for column in columns:
        for row, value in enumerate(column.values):
            if value is not None:
                try:
                    check_value(column.name, WELL_KNOWN[column.name].member, value)
                except AttrKindError:
                    return row
    return 0


def write_xla_workload(conversion: XlaConversion, prefix: PathLike) -> WrittenWorkload:
    """Write ``PREFIX.{device}.et`` for every device and ``PREFIX.comm_groups.json``."""
    metadata = GlobalMetadata(version=io.FORMAT_VERSION)
    metadata.attr.add(name="xla_module", string_val=conversion.module.proto.name)
    with WorkloadWriter(prefix) as writer:
        for device, payloads in conversion.payloads.items():
            writer.write_payloads(device, metadata, payloads)
        if conversion.groups:
            writer.groups = conversion.groups
    assert writer.result is not None
    return writer.result
