"""One SPMD HLO module as one Chakra ET per device (partial front end, issue 16).

Every device runs the same program (XLA's SPMD partitioner wrote it for one of them); what differs
is which group each collective's device is in. Per device, the entry computation's instructions
become nodes in XLA's schedule order (node ids follow it, so a consumer issuing ready nodes by
ascending id follows the schedule):

* ``parameter``, ``constant``, ``tuple``, ``get-tuple-element``, ``bitcast`` and the like are
  *folded*: they compute nothing, and a node that uses one depends on what produced its operands;
  the report counts them by opcode;
* a ``fusion``, ``dot``, ``convolution`` or any other computing instruction is a COMP node with
  ``num_ops`` (FLOPs) and ``tensor_size`` (bytes at its boundary) from :mod:`chakra.xla.costs`;
* ``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all`` (and their async ``-start``;
  the ``-done`` is folded into it) are COMM_COLL_NODEs of that type, ``comm_size`` by the format's
  convention (all-gather: the bytes each device puts in; the others: the whole buffer), ``pg_name``
  the id of the device's group; one communicator group per distinct group of devices;
* ``collective-permute`` is a SEND to each target the device sends to and a RECV from each source,
  tagged with the instruction's position in the schedule (the same on every device);
* ``while`` and ``conditional`` are kept as one COMP node each and reported: unrolling loops is not
  built yet.

No durations: without a profile the nodes carry costs only (``chakra simulate`` times them).

Example:
    conversion = convert_module(load_module("step.hlo.pb"))
    write_xla_workload(conversion, "out/step")
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from chakra import io
from chakra.attrs import set_attr
from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
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
from chakra.schema.xla.hlo_subset_pb2 import HloInstructionProto
from chakra.trace import WorkloadWriter, WrittenWorkload
from chakra.xla.costs import instruction_bytes, instruction_flops
from chakra.xla.hlo import HloModule, replica_groups, shape_bytes

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
ASYNC_START_SUFFIX = "-start"
PERMUTES = frozenset({"collective-permute", "collective-permute-start"})
#: Control flow kept as one node for now (the report says so).
NOT_UNROLLED = frozenset({"while", "conditional"})


@dataclass
class XlaConversion:
    """The nodes of every device, the communicator groups and what was done with each instruction."""

    module: HloModule
    devices: int
    nodes: dict[int, list[Node]]
    groups: CommGroups
    converted: Counter[str] = field(default_factory=Counter)  # opcode -> instructions made into nodes
    folded: Counter[str] = field(default_factory=Counter)  # opcode -> instructions folded
    kept: Counter[str] = field(default_factory=Counter)  # opcode -> control flow kept as one node

    @property
    def notes(self) -> list[str]:
        out = [f"{count:,} {op} kept as one node each: loops are not unrolled yet" for op, count in self.kept.items()]
        out.append("no profile: nodes carry FLOPs and bytes but no durations (chakra simulate times them)")
        return out


def module_devices(module: HloModule) -> int:
    """The devices the module's collectives name (1 for a module without any)."""
    highest = 0
    for instruction in module.scheduled():
        if instruction.opcode.removesuffix(ASYNC_START_SUFFIX) in COLLECTIVES:
            highest = max(highest, *(max(g) for g in replica_groups(instruction, 1) if g))
        for pair in instruction.source_target_pairs:
            highest = max(highest, pair.source, pair.target)
    return highest + 1


def convert_module(module: HloModule, devices: int | None = None) -> XlaConversion:
    """Every device's nodes for ``module`` (``devices``: default :func:`module_devices`)."""
    count = devices if devices is not None else module_devices(module)
    if count < 1:
        raise ChakraInputError(f"devices must be at least 1, got {count}", path=module.path)
    group_ids: dict[tuple[int, ...], int] = {}
    conversion = XlaConversion(module, count, {}, CommGroups())
    for device in range(count):
        conversion.nodes[device] = _device_nodes(conversion, device, group_ids, counting=device == 0)
    conversion.groups = CommGroups({gid: members for members, gid in group_ids.items()})
    return conversion


def _device_nodes(
    conversion: XlaConversion, device: int, group_ids: dict[tuple[int, ...], int], counting: bool
) -> list[Node]:
    module = conversion.module
    nodes: list[Node] = []
    made: dict[int, list[int]] = {}  # instruction id -> the node ids its users depend on

    def deps_of(instruction: HloInstructionProto) -> list[int]:
        found: list[int] = []
        for source in (*instruction.operand_ids, *instruction.control_predecessor_ids):
            found.extend(d for d in made.get(source, ()) if d not in found)
        return found

    def add(name: str, node_type: NodeType, deps: list[int], **attrs: object) -> int:
        node = Node(id=len(nodes), name=name, type=node_type, data_deps=deps)
        set_attr(node, "is_cpu_op", False)
        for key, value in attrs.items():
            set_attr(node, key, value)
        nodes.append(node)
        return node.id

    for position, instruction in enumerate(module.scheduled()):
        op = instruction.opcode
        deps = deps_of(instruction)
        if op in FOLDED:
            made[instruction.id] = deps
            if counting:
                conversion.folded[op] += 1
            continue
        base = op.removesuffix(ASYNC_START_SUFFIX)
        if base in COLLECTIVES:
            members = next((g for g in replica_groups(instruction, conversion.devices) if device in g), None)
            if members is None:
                raise ChakraInputError(f"{instruction.name} runs on no group holding device {device}", path=module.path)
            gid = group_ids.setdefault(tuple(members), len(group_ids) + 1)
            made[instruction.id] = [
                add(
                    instruction.name,
                    COMM_COLL_NODE,
                    deps,
                    comm_type=COLLECTIVES[base],
                    comm_size=_comm_size(module, instruction, base),
                    pg_name=str(gid),
                )
            ]
        elif op in PERMUTES:
            size = shape_bytes(instruction.shape)
            # the position in the schedule: the same on every device and unique (channel ids repeat,
            # every op of a shard_map has 1; instruction ids carry the computation in their high bits)
            tag = position
            ids = [
                add(f"{instruction.name}.send.{p.target}", COMM_SEND_NODE, deps, comm_dst=p.target, comm_tag=tag,
                    comm_size=size)
                for p in instruction.source_target_pairs if p.source == device
            ]  # fmt: skip
            received = [
                add(f"{instruction.name}.recv.{p.source}", COMM_RECV_NODE, deps, comm_src=p.source, comm_tag=tag,
                    comm_size=size)
                for p in instruction.source_target_pairs if p.target == device
            ]  # fmt: skip
            made[instruction.id] = received or ids
        else:
            if op in NOT_UNROLLED and counting:
                conversion.kept[op] += 1
            made[instruction.id] = [
                add(
                    instruction.name,
                    COMP_NODE,
                    deps,
                    num_ops=instruction_flops(module, instruction),
                    tensor_size=instruction_bytes(module, instruction),
                )
            ]
        if counting:
            conversion.converted[op] += 1
    return nodes


def _comm_size(module: HloModule, instruction: HloInstructionProto, base: str) -> int:
    """The format's ``comm_size``: an all-gather's bytes put in by each device, else the buffer's."""
    operands = sum(shape_bytes(module.instructions[o].shape) for o in instruction.operand_ids)
    if base == "all-reduce":
        return shape_bytes(instruction.shape) if instruction.opcode == base else operands
    return operands


def write_xla_workload(conversion: XlaConversion, prefix: PathLike) -> WrittenWorkload:
    """Write ``PREFIX.{device}.et`` for every device and ``PREFIX.comm_groups.json``."""
    metadata = GlobalMetadata(version=io.FORMAT_VERSION)
    metadata.attr.add(name="xla_module", string_val=conversion.module.proto.name)
    with WorkloadWriter(prefix) as writer:
        for device, nodes in conversion.nodes.items():
            writer.write_nodes(device, nodes, metadata)
        if conversion.groups:
            writer.groups = conversion.groups
    assert writer.result is not None
    return writer.result
