"""An XLA HLO module as the XLA front end reads it: the optimized, scheduled program of one JAX (or
TensorFlow ``jit_compile``) step, from its serialized ``HloModuleProto``.

:func:`load_module` reads ``compiled.runtime_executable().hlo_modules()[0]
.as_serialized_hlo_module_proto()`` bytes, an ``*.after_optimizations.hlo.pb`` dump, or an
``HloProto`` around the module (what a profile's metadata plane embeds), plain or compressed, with
the messages of ``chakra/schema/xla/hlo_subset.proto`` (XLA's field numbers, only the fields read).
:func:`replica_groups` decodes the three ways XLA writes which devices take part in a collective,
:func:`shape_bytes` the bytes a shape holds.

Example:
    module = load_module("step.pb")
    [(i.name, i.opcode) for i in module.scheduled()][:3]
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from chakra import io
from chakra.errors import ChakraFormatError, PathLike
from chakra.schema.xla.hlo_subset_pb2 import (
    HloComputationProto,
    HloInstructionProto,
    HloModuleProto,
    HloProto,
    IotaReplicaGroupListProto,
    MeshAxesDeviceList,
    ShapeProto,
)

#: Bytes per element of XLA's PrimitiveType values (xla/xla_data.proto); sub-byte integer and float
#: types are stored a byte each by the CPU and GPU backends' buffers, and counted so here.
ELEMENT_BYTES = {
    1: 1,  # PRED
    2: 1, 3: 2, 4: 4, 5: 8,  # S8, S16, S32, S64
    6: 1, 7: 2, 8: 4, 9: 8,  # U8, U16, U32, U64
    10: 2, 11: 4, 12: 8, 16: 2,  # F16, F32, F64, BF16
    15: 8, 18: 16,  # C64, C128
    19: 1, 20: 1, 23: 1, 24: 1, 25: 1, 28: 1, 29: 1, 33: 1,  # the 8-bit floats
    21: 1, 22: 1, 26: 1, 27: 1, 30: 1, 31: 1, 32: 1,  # S4, U4, S2, U2, S1, U1, F4E2M1FN
}  # fmt: skip
#: Element types that hold no array data: TUPLE (its parts do), OPAQUE_TYPE, TOKEN.
TUPLE, OPAQUE, TOKEN = 13, 14, 17
#: The element type of a loop condition's result.
PRED = 1


@dataclass
class HloModule:
    """A module: its computations by id, the entry computation, every instruction by id, and the
    entry computation's schedule (instruction ids in execution order)."""

    path: str | None
    proto: HloModuleProto
    computations: dict[int, HloComputationProto]
    entry: HloComputationProto
    instructions: dict[int, HloInstructionProto] = field(default_factory=dict)
    schedule: list[int] = field(default_factory=list)

    def scheduled(self) -> list[HloInstructionProto]:
        """The entry computation's instructions in XLA's schedule (their listed order when the
        module carries no schedule)."""
        return [self.instructions[i] for i in self.schedule]

    @property
    def is_scheduled(self) -> bool:
        return self.entry.id in self.proto.schedule.sequences


def load_module(path: PathLike) -> HloModule:
    """Read a serialized ``HloModuleProto`` (or an ``HloProto`` holding one) from ``path``.

    Raises :class:`ChakraFormatError` naming the file for bytes that are not one (truncated, another
    kind of protobuf, text).
    """
    return module_from_bytes(io.read_decompressed(path, what="an HLO module"), path=path)


def module_from_bytes(data: bytes, *, path: PathLike | None = None) -> HloModule:
    """:func:`load_module` of bytes in memory."""
    proto = _parse(data, path)
    computations = {c.id: c for c in proto.computations}
    entry = computations.get(proto.entry_computation_id)
    if entry is None:
        raise ChakraFormatError(
            f"the module names entry computation {proto.entry_computation_id}, which it does not hold",
            path=path,
            hint="the file is damaged: dump the module again",
        )
    instructions = {i.id: i for c in proto.computations for i in c.instructions}
    sequence = proto.schedule.sequences.get(entry.id)
    order = list(sequence.instruction_ids) if sequence is not None else [i.id for i in entry.instructions]
    unknown = [i for i in order if i not in instructions]
    if unknown:
        raise ChakraFormatError(
            f"the schedule of {entry.name} lists instruction {unknown[0]}, which the module does not hold",
            path=path,
            hint="the file is damaged: dump the module again",
        )
    for instruction in instructions.values():
        dangling = [o for o in instruction.operand_ids if o not in instructions]
        dangling += [c for c in instruction.called_computation_ids if c not in computations]
        if dangling:
            raise ChakraFormatError(
                f"instruction {instruction.name} (id {instruction.id}) refers to id {dangling[0]}, which the module "
                "does not hold",
                path=path,
                hint="the file is damaged: dump the module again",
            )
    for computation in proto.computations:
        _refuse_cycles(computation, path)
    return HloModule(str(path) if path is not None else None, proto, computations, entry, instructions, order)


def _refuse_cycles(computation: HloComputationProto, path: PathLike | None) -> None:
    """A computation's instructions must not wait for each other in a circle (through operands and
    control predecessors): a damaged module, which nothing could run."""
    members = {instruction.id: instruction for instruction in computation.instructions}
    waits = {i.id: [o for o in (*i.operand_ids, *i.control_predecessor_ids) if o in members] for i in members.values()}
    users: dict[int, list[int]] = {node: [] for node in members}
    for node, sources in waits.items():
        for source in sources:
            users[source].append(node)
    left = {node: len(sources) for node, sources in waits.items()}
    ready = [node for node, count in left.items() if count == 0]
    while ready:
        node = ready.pop()
        for user in users[node]:
            left[user] -= 1
            if left[user] == 0:
                ready.append(user)
    circle = [members[node].name for node, count in left.items() if count > 0]
    if circle:
        raise ChakraFormatError(
            f"instructions of {computation.name} wait for each other in a circle ({', '.join(circle[:4])}"
            f"{', ...' if len(circle) > 4 else ''})",
            path=path,
            hint="the file is damaged: dump the module again",
        )


def _parse(data: bytes, path: PathLike | None) -> HloModuleProto:
    if data.lstrip()[:9] in (b"HloModule", b"hlo_modul"):
        raise ChakraFormatError(
            "this is HLO text, not a serialized module",
            path=path,
            hint="save compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()",
        )
    for message in (HloModuleProto, HloProto):
        try:
            parsed = message.FromString(data)
        except DecodeError:
            continue
        module = parsed if isinstance(parsed, HloModuleProto) else parsed.hlo_module
        if module.computations and module.entry_computation_id:
            return module
    raise ChakraFormatError(
        "not a serialized XLA HloModuleProto (no computations with an entry computation)",
        path=path,
        hint="save compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto(), "
        "or dump with --xla_dump_to=DIR --xla_dump_hlo_as_proto",
    )


def shape_bytes(shape: ShapeProto) -> int:
    """The bytes an array shape holds, summed over a tuple's parts (0 for tokens and opaque values).

    >>> shape_bytes(ShapeProto(element_type=11, dimensions=[8, 16]))
    512
    """
    if shape.element_type == TUPLE:
        return sum(shape_bytes(part) for part in shape.tuple_shapes)
    if shape.element_type in (OPAQUE, TOKEN):
        return 0
    return math.prod(shape.dimensions) * ELEMENT_BYTES.get(shape.element_type, 0)


def replica_groups(instruction: HloInstructionProto, num_devices: int) -> list[tuple[int, ...]]:
    """The groups of device ids a collective runs in: its explicit ``replica_groups``, its
    ``collective_device_list`` (explicit or the iota form), or one group of every device when it
    names none (XLA's "all replicas")."""
    if instruction.replica_groups:
        return [tuple(g.replica_ids) for g in instruction.replica_groups]
    devices = instruction.collective_device_list
    if devices.replica_groups:
        return [tuple(g.replica_ids) for g in devices.replica_groups]
    if devices.HasField("iota_replica_group_list"):
        return iota_groups(devices.iota_replica_group_list)
    if instruction.HasField("mesh_device_list"):
        return mesh_groups(instruction.mesh_device_list)
    return [tuple(range(num_devices))]


def mesh_groups(listed: MeshAxesDeviceList) -> list[tuple[int, ...]]:
    """The groups of a mesh-axes device list: the mesh's devices (``device_ids``, else in order)
    laid out on its axes, one group per combination of the axes the list does not name.

    >>> from chakra.schema.xla.hlo_subset_pb2 import AxisRefProto, MeshAxis, MeshProto
    >>> mesh = MeshProto(axes=[MeshAxis(name="data", size=2), MeshAxis(name="model", size=2)])
    >>> mesh_groups(MeshAxesDeviceList(mesh=mesh, axes=[AxisRefProto(mesh_axis_index=0)]))
    [(0, 2), (1, 3)]
    """
    import numpy as np  # only where a module lists its groups this way: not at start-up

    sizes = [axis.size for axis in listed.mesh.axes] or [1]
    spanned = [ref.mesh_axis_index for ref in listed.axes]
    if any(ref.HasField("sub_axis_info") for ref in listed.axes):
        raise ChakraFormatError("a collective over a split mesh axis (a sub-axis) is not read yet")
    devices = np.array(listed.mesh.device_ids or range(int(np.prod(sizes))), dtype=np.int64).reshape(sizes)
    others = [axis for axis in range(len(sizes)) if axis not in spanned]
    members = int(np.prod([sizes[axis] for axis in spanned], dtype=np.int64))
    return [tuple(row) for row in devices.transpose(others + spanned).reshape(-1, members).tolist()]


def module_device_count(module: HloModule) -> int | None:
    """The devices the module was compiled for (replicas x partitions), when it records them."""
    assignment = module.proto.device_assignment
    count = max(1, assignment.replica_count) * max(1, assignment.computation_count)
    return count if module.proto.HasField("device_assignment") else None


def iota_groups(iota: IotaReplicaGroupListProto) -> list[tuple[int, ...]]:
    """The groups of XLA's iota form ``[G,S]<=[dims]T(perm)``: ``iota(prod(dims))`` reshaped to
    ``dims``, transposed by ``perm``, read as ``G`` groups of ``S``.

    >>> iota_groups(IotaReplicaGroupListProto(num_replica_groups=2, num_devices_per_group=4,
    ...                                       iota_reshape_dims=[4, 2], iota_transpose_perm=[1, 0]))
    [(0, 2, 4, 6), (1, 3, 5, 7)]
    """
    import numpy as np  # only where a module lists its groups this way: not at start-up

    count, size = iota.num_replica_groups, iota.num_devices_per_group
    dims: Sequence[int] = list(iota.iota_reshape_dims) or [count * size]
    devices = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    if iota.iota_transpose_perm:
        devices = devices.transpose(list(iota.iota_transpose_perm))
    return [tuple(row) for row in devices.reshape(count, size).tolist()]


def trip_count(instruction: HloInstructionProto) -> int | None:
    """A ``while`` loop's trip count when XLA knows it (``backend_config`` ``known_trip_count``),
    else ``None``.

    >>> trip_count(HloInstructionProto(opcode="while", backend_config=b'{"known_trip_count":{"n":"4"}}'))
    4
    """
    try:
        config = json.loads(instruction.backend_config or b"{}")
    except ValueError:
        return None
    count = config.get("known_trip_count", {}).get("n") if isinstance(config, dict) else None
    try:
        return int(count) if count is not None else None
    except (TypeError, ValueError):
        return None


def while_body(module: HloModule, instruction: HloInstructionProto) -> HloComputationProto:
    """The body of a ``while`` loop: of its two computations, the one whose result is not the loop
    condition's scalar predicate."""
    called = [module.computations[c] for c in instruction.called_computation_ids]
    for computation in called:
        root = module.instructions.get(computation.root_id)
        if root is None or root.shape.element_type != PRED or list(root.shape.dimensions):
            return computation
    raise ChakraFormatError(f"while loop {instruction.name} has no body computation", path=module.path)


def computation_order(module: HloModule, computation: HloComputationProto) -> list[HloInstructionProto]:
    """A computation's instructions in XLA's schedule (listed order, which is a dependency order,
    for one the schedule leaves out)."""
    sequence = module.proto.schedule.sequences.get(computation.id)
    if sequence is None:
        return list(computation.instructions)
    return [module.instructions[i] for i in sequence.instruction_ids]
