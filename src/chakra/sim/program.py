"""One rank's workload as the simulator runs it: flat per-node lists in ascending id order.

:func:`load_rank` reads a rank's ET into a :class:`RankProgram`: what each node does when issued
(``action``), the hardware slot it needs (``slot``, ``reference/astra-sim.md`` §2.3), its recorded
time, its dependency count and children, and the attributes the engine needs for communication,
roofline compute and remote memory.

Example:
    program = load_rank("out/job.0.et", rank=0)
    len(program), program.slot_names[:3]
    # (881, ['CPU', 'GPU compute', 'GPU comm'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import NodeType
from chakra.table import COMMUNICATION, DEFAULT_GROUP_ID, INVALID_GROUP_ID, MISSING, NodeTable, Slot, load_table

NS_PER_US = 1000

#: Hardware slots (§2.3). With ``cpu_per_thread``/``gpu_per_stream`` a rank gets more slots, one per
#: host thread (``tid``) or device stream (``stream``), numbered after these.
SLOT_CPU, SLOT_GPU, SLOT_COMM, NO_SLOT = (int(s) for s in (Slot.CPU, Slot.GPU_COMPUTE, Slot.GPU_COMM, Slot.NONE))
SLOT_NAMES = ("CPU", "GPU compute", "GPU comm", "none")

#: What a node does when issued.
DO_COMPUTE, DO_COLLECTIVE, DO_SEND, DO_RECV, DO_MEMORY, DO_INSTANT = range(6)
#: Actions that count as communication in the time breakdown (memory and instant nodes count as neither).
COMMUNICATING_ACTIONS = frozenset({DO_COLLECTIVE, DO_SEND, DO_RECV})


class CommSpec(NamedTuple):
    """What a communication node moves: a collective's type, size and group, or a message's peers and tag."""

    comm_type: int  # CollectiveCommType of a collective; 0 for sends and receives
    size_bytes: int
    group: int  # communicator group id (chakra.groups.group_id); DEFAULT_GROUP_ID: all ranks
    src: int  # sending rank (a collective: the rank itself)
    dst: int  # receiving rank (a collective: the rank itself)
    tag: int


@dataclass
class RankProgram:
    """One rank's nodes as flat lists; positions in ascending id order (file order among equal ids)."""

    rank: int
    path: Path
    ids: list[int]
    names: list[str]
    action: list[int]
    slot: list[int]
    time_ns: list[int]  # recorded duration; the time of compute nodes (all nodes in replay-only mode)
    dep_count: list[int]
    children: list[list[int]]
    comm: dict[int, CommSpec]  # pos -> what a collective, send or receive moves
    roofline: dict[int, tuple[int, int]]  # pos -> (num_ops, tensor_size) of GPU compute nodes
    memory_bytes: dict[int, int]  # pos -> tensor_size of memory loads and stores
    slot_names: list[str] = field(default_factory=lambda: list(SLOT_NAMES))
    cpu_slots: frozenset[int] = frozenset({SLOT_CPU})
    missing_deps: int = 0

    def __len__(self) -> int:
        return len(self.ids)


def load_rank(
    path: str | Path, rank: int, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> RankProgram:
    """Read one rank's ET into a :class:`RankProgram` through its node table (:mod:`chakra.table`: the
    kind, slot, group and attributes every consumer reads).

    ASTRA-sim gives a rank one CPU and one GPU-compute slot. ``cpu_per_thread`` gives every host
    thread (``tid``) its own CPU slot and ``gpu_per_stream`` every stream its own compute slot, as
    the recorded job had them (a PyTorch trace's autograd and gloo threads run side by side).
    """
    table = load_table(path, rank)
    return program_of(table, rank, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream)


def program_of(
    table: NodeTable, rank: int, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> RankProgram:
    """The :class:`RankProgram` of one rank's table (see :func:`load_rank`). Times are
    ``duration_micros`` in ns, as ASTRA-sim reads them (it ignores ``duration_ns``)."""
    path = Path(table.path) if table.path is not None else Path(f"rank {rank}")
    types = table.node_type
    n = len(table)
    action = np.full(n, DO_INSTANT, dtype=np.int64)  # METADATA_NODE, INVALID_NODE: finish at once (§2.4)
    for node_type, what in _ACTION_OF_TYPE.items():
        action[types == node_type] = what
    _refuse_comm_on_cpu(table, path)
    slot = table.slot.astype(np.int64)  # the table's Slot numbers are SLOT_CPU, SLOT_GPU, ...
    slot_names = list(SLOT_NAMES)
    compute = types == NodeType.COMP_NODE
    cpu_slots = {SLOT_CPU}
    if cpu_per_thread:
        cpu_slots |= _own_slots(slot, slot_names, compute & table.is_cpu, table.tid, "CPU thread")
    if gpu_per_stream:
        _own_slots(slot, slot_names, compute & ~table.is_cpu, table.stream, "GPU stream")
    dur_us = table.graph.dur_us
    if len(dur_us) and int(dur_us.max()) > MAX_DURATION_US:
        at = int(np.argmax(dur_us))
        raise ChakraInputError(
            f"node {int(table.ids[at])}: duration of {int(dur_us[at])} µs is not a plausible time",
            path=path,
            hint="check duration_micros of this node",
        )
    time_ns = np.where(np.isin(action, (DO_MEMORY, DO_INSTANT)), 0, dur_us.astype(np.int64) * NS_PER_US)
    comm = _comm_specs(table, rank, path)
    roofline_pos = np.flatnonzero(compute & ~table.is_cpu & (table.num_ops != MISSING) & (table.tensor_size != MISSING))
    roofline = dict(
        zip(
            roofline_pos.tolist(),
            zip(table.num_ops[roofline_pos].tolist(), table.tensor_size[roofline_pos].tolist(), strict=True),
            strict=True,
        )
    )
    memory_pos = np.flatnonzero(action == DO_MEMORY)
    sizes = table.tensor_size[memory_pos]
    memory_bytes = dict(zip(memory_pos.tolist(), np.where(sizes != MISSING, sizes, 0).tolist(), strict=True))
    graph = table.graph
    ids_np = graph.ids
    names = table.names
    # Positions are renumbered in ascending id order (file order among equal ids), so a ready heap
    # holds plain positions and pops the lowest id first, as ASTRA-sim issues (§2.2).
    order = np.argsort(ids_np, kind="stable")
    dep_pos_np = graph.dep_pos
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    if not bool(np.all(order == np.arange(n))):
        new_pos = np.empty(n, dtype=np.int64)
        new_pos[order] = np.arange(n, dtype=np.int64)
        dep_pos_np = new_pos[dep_pos_np]
        child_of = new_pos[child_of]
        names = [names[i] for i in order.tolist()]
        action, slot, time_ns = action[order], slot[order], time_ns[order]
        remap = new_pos.tolist()
        comm = {remap[k]: v for k, v in comm.items()}
        roofline = {remap[k]: v for k, v in roofline.items()}
        memory_bytes = {remap[k]: v for k, v in memory_bytes.items()}
        ids_np = ids_np[order]
    # an id in both data_deps and ctrl_deps (or twice in one) counts once
    edges = np.unique(np.stack([dep_pos_np, child_of]), axis=1) if len(dep_pos_np) else np.zeros((2, 0), np.int64)
    parent_np, child_np = edges
    dep_count = np.bincount(child_np, minlength=n).tolist()
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent_np, minlength=n), out=child_ptr[1:])
    # edges are sorted by parent, then child: each node's children in ascending position
    flat_children = child_np.tolist()
    bounds = child_ptr.tolist()
    children = [flat_children[bounds[i] : bounds[i + 1]] for i in range(n)]
    return RankProgram(
        rank=rank,
        path=path,
        ids=ids_np.tolist(),
        names=names,
        action=action.tolist(),
        slot=slot.tolist(),
        time_ns=time_ns.tolist(),
        dep_count=dep_count,
        children=children,
        comm=comm,
        roofline=roofline,
        memory_bytes=memory_bytes,
        slot_names=slot_names,
        cpu_slots=frozenset(cpu_slots),
        missing_deps=len(graph.missing_deps),
    )


#: What a node of each type does when issued (§2.4); other types finish at once.
_ACTION_OF_TYPE = {
    NodeType.COMP_NODE: DO_COMPUTE,
    NodeType.COMM_COLL_NODE: DO_COLLECTIVE,
    NodeType.COMM_SEND_NODE: DO_SEND,
    NodeType.COMM_RECV_NODE: DO_RECV,
    NodeType.MEM_LOAD_NODE: DO_MEMORY,
    NodeType.MEM_STORE_NODE: DO_MEMORY,
}
#: Longest ``duration_micros`` simulated: its ns must fit the event queue's int64 times.
MAX_DURATION_US = ((1 << 62) - 1) // NS_PER_US


def _own_slots(slot: np.ndarray, names: list[str], mask: np.ndarray, keys: np.ndarray, kind: str) -> set[int]:
    """Give each distinct ``keys`` value of the nodes of ``mask`` that record one its own slot, named
    ``f"{kind} {key}"``, in order of first appearance (in place); returns the new slots."""
    where = np.flatnonzero(mask & (keys != MISSING))
    distinct, first, back = np.unique(keys[where], return_index=True, return_inverse=True)
    appearance = np.argsort(first, kind="stable")
    number = np.empty(len(distinct), dtype=np.int64)
    number[appearance] = np.arange(len(names), len(names) + len(distinct))
    names.extend(f"{kind} {key}" for key in distinct[appearance].tolist())
    slot[where] = number[back]
    return set(number.tolist())


def _refuse_comm_on_cpu(table: NodeTable, path: Path) -> None:
    bad = np.flatnonzero((table.category == COMMUNICATION) & table.is_cpu)
    if len(bad):
        pos = int(bad[0])
        raise ChakraInputError(
            f"node {int(table.ids[pos])} ({table.names[pos]}) is a communication node marked is_cpu_op",
            path=path,
            hint="communication runs on the device: set is_cpu_op false (ASTRA-sim aborts too)",
        )


def _comm_specs(table: NodeTable, rank: int, path: Path) -> dict[int, CommSpec]:
    """Position -> :class:`CommSpec` of every communication node (a collective's peers are the rank
    itself; a missing peer of a transfer is the rank, a missing tag 0, as FeederV3 defaults them)."""
    comm = table.comm
    specs: dict[int, CommSpec] = {}
    types = table.node_type[comm.pos].tolist()
    columns = zip(
        comm.pos.tolist(), types, comm.kind.tolist(), comm.size.tolist(), comm.group.tolist(), comm.src.tolist(),
        comm.dst.tolist(), comm.tag.tolist(), comm.pg_name, strict=True,
    )  # fmt: skip
    for pos, node_type, kind, size, group, src, dst, tag, pg_name in columns:
        if size == MISSING:
            _missing(table, pos, "comm_size", path)
        if node_type == NodeType.COMM_COLL_NODE:
            if kind == MISSING:
                _missing(table, pos, "comm_type", path)
            if group == INVALID_GROUP_ID:
                raise ChakraInputError(
                    f"node {int(table.ids[pos])} ({table.names[pos]}) uses pg_name {pg_name!r}, which names no "
                    "communicator group (ASTRA-sim's stoi refuses it)",
                    path=path,
                    hint="map process groups to ids 1, 2, ... and write a comm groups file",
                )
            specs[pos] = CommSpec(kind, size, group, rank, rank, 0)
        else:
            specs[pos] = CommSpec(
                0, size, DEFAULT_GROUP_ID, rank if src == MISSING else src, rank if dst == MISSING else dst,
                0 if tag == MISSING else tag,
            )  # fmt: skip
    return specs


def _missing(table: NodeTable, pos: int, name: str, path: Path) -> None:
    raise ChakraInputError(
        f"node {int(table.ids[pos])} ({table.names[pos]}) has no {name}",
        path=path,
        hint="run chakra validate --target astra-sim on the workload",
    )
