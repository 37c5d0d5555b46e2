"""One rank's workload as the simulator runs it: flat per-node lists in ascending id order.

:func:`load_rank` reads a rank's ET into a :class:`RankProgram`: what each node does when issued
(``action``), the hardware slot it needs (``slot``, ``reference/astra-sim.md`` §2.3), its recorded
time, its dependency count and children, and the attributes the engine needs for communication,
roofline compute and remote memory.

Example:
    >>> program = load_rank("out/job.0.et", rank=0)  # doctest: +SKIP
    >>> len(program), program.slot_names[:3]  # doctest: +SKIP
    (881, ['CPU', 'GPU compute', 'GPU comm'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from chakra import io
from chakra.attrs import int_value, member_value
from chakra.errors import ChakraInputError
from chakra.graph import GraphBuilder
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    AttributeProto,
    Node,
)

NS_PER_US = 1000

#: Hardware slots (§2.3). With ``cpu_per_thread``/``gpu_per_stream`` a rank gets more slots, one per
#: host thread (``tid``) or device stream (``stream``), numbered after these.
SLOT_CPU, SLOT_GPU, SLOT_COMM, NO_SLOT = 0, 1, 2, 3
SLOT_NAMES = ("CPU", "GPU compute", "GPU comm", "none")

#: What a node does when issued.
DO_COMPUTE, DO_COLLECTIVE, DO_SEND, DO_RECV, DO_MEMORY, DO_INSTANT = range(6)
#: Actions that count as communication in the time breakdown (memory and instant nodes count as neither).
COMMUNICATING_ACTIONS = frozenset({DO_COLLECTIVE, DO_SEND, DO_RECV})


class CommSpec(NamedTuple):
    """What a communication node moves: a collective's type, size and group, or a message's peers and tag."""

    comm_type: int  # CollectiveCommType of a collective; 0 for sends and receives
    size_bytes: int
    pg_name: str  # communicator group ("" or "0": all ranks)
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


def _attrs(node: Node) -> dict[str, AttributeProto]:
    """The first attribute of each name (the one consumers read)."""
    out: dict[str, AttributeProto] = {}
    for attr in node.attr:
        if attr.name not in out:
            out[attr.name] = attr
    return out


def load_rank(
    path: str | Path, rank: int, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> RankProgram:
    """Read one rank's ET into a :class:`RankProgram` (streamed; the messages are not kept).

    ASTRA-sim gives a rank one CPU and one GPU-compute slot. ``cpu_per_thread`` gives every host
    thread (``tid``) its own CPU slot and ``gpu_per_stream`` every stream its own compute slot, as
    the recorded job had them (a PyTorch trace's autograd and gloo threads run side by side).
    """
    path = Path(path)
    slot_names = list(SLOT_NAMES)
    extra_slots: dict[tuple[str, int], int] = {}

    def extra_slot(kind: str, key: int) -> int:
        index = extra_slots.get((kind, key))
        if index is None:
            index = extra_slots[(kind, key)] = len(slot_names)
            slot_names.append(f"{kind} {key}")
        return index

    builder = GraphBuilder()
    names: list[str] = []
    action: list[int] = []
    slot: list[int] = []
    time_ns: list[int] = []
    comm: dict[int, CommSpec] = {}
    roofline: dict[int, tuple[int, int]] = {}
    memory_bytes: dict[int, int] = {}
    for node in io.stream(path):
        pos = builder.add(node)
        names.append(node.name)
        attrs = _attrs(node)
        cpu_attr = attrs.get("is_cpu_op")
        is_cpu = bool(member_value(cpu_attr)) if cpu_attr is not None else False
        node_type = node.type
        duration = node.duration_micros * NS_PER_US
        if node_type == COMP_NODE:
            action.append(DO_COMPUTE)
            if is_cpu:
                tid = attrs.get("tid")
                slot.append(extra_slot("CPU thread", int_value(tid) or 0) if cpu_per_thread and tid else SLOT_CPU)
            else:
                stream = attrs.get("stream")
                if gpu_per_stream and stream is not None:
                    slot.append(extra_slot("GPU stream", int_value(stream) or 0))
                else:
                    slot.append(SLOT_GPU)
            time_ns.append(duration)
            if not is_cpu and "num_ops" in attrs and "tensor_size" in attrs:
                roofline[pos] = (int_value(attrs["num_ops"]) or 0, int_value(attrs["tensor_size"]) or 0)
        elif node_type in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE):
            if is_cpu:
                raise ChakraInputError(
                    f"node {node.id} ({node.name}) is a communication node marked is_cpu_op",
                    path=path,
                    hint="communication runs on the device: set is_cpu_op false (ASTRA-sim aborts too)",
                )
            action.append({COMM_COLL_NODE: DO_COLLECTIVE, COMM_SEND_NODE: DO_SEND}.get(node_type, DO_RECV))
            slot.append(NO_SLOT if node_type == COMM_RECV_NODE else SLOT_COMM)
            time_ns.append(duration)
            comm[pos] = _comm_spec(node, attrs, rank, path)
        elif node_type in (MEM_LOAD_NODE, MEM_STORE_NODE):
            action.append(DO_MEMORY)
            slot.append(SLOT_COMM)
            size = attrs.get("tensor_size")
            memory_bytes[pos] = (int_value(size) or 0) if size is not None else 0
            time_ns.append(0)
        else:  # METADATA_NODE, INVALID_NODE: finish at once (§2.4)
            action.append(DO_INSTANT)
            slot.append(SLOT_COMM)
            time_ns.append(0)
    graph = builder.build()
    n = graph.num_nodes
    ids_np = graph.ids
    # Positions are renumbered in ascending id order (file order among equal ids), so a ready heap
    # holds plain positions and pops the lowest id first, as ASTRA-sim issues (§2.2).
    order = np.argsort(ids_np, kind="stable")
    in_id_order = bool(np.all(order == np.arange(n)))
    dep_pos_np = graph.dep_pos
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    if not in_id_order:
        new_pos = np.empty(n, dtype=np.int64)
        new_pos[order] = np.arange(n, dtype=np.int64)
        dep_pos_np = new_pos[dep_pos_np]
        child_of = new_pos[child_of]
        positions = order.tolist()
        names = [names[i] for i in positions]
        action = [action[i] for i in positions]
        slot = [slot[i] for i in positions]
        time_ns = [time_ns[i] for i in positions]
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
        action=action,
        slot=slot,
        time_ns=time_ns,
        dep_count=dep_count,
        children=children,
        comm=comm,
        roofline=roofline,
        memory_bytes=memory_bytes,
        slot_names=slot_names,
        cpu_slots=frozenset({SLOT_CPU} | {i for (kind, _), i in extra_slots.items() if kind == "CPU thread"}),
        missing_deps=len(graph.missing_deps),
    )


def _comm_spec(node: Node, attrs: dict[str, AttributeProto], rank: int, path: Path) -> CommSpec:
    def number(name: str, default: int | None = None) -> int:
        attr = attrs.get(name)
        value = int_value(attr) if attr is not None else None
        if value is None:
            if default is None:
                raise ChakraInputError(
                    f"node {node.id} ({node.name}) has no {name}",
                    path=path,
                    hint="run chakra validate --target astra-sim on the workload",
                )
            return default
        return value

    pg = attrs.get("pg_name")
    pg_name = str(member_value(pg)) if pg is not None else ""
    if node.type == COMM_COLL_NODE:
        return CommSpec(number("comm_type"), number("comm_size"), pg_name, rank, rank, 0)
    src = number("comm_src", rank)
    dst = number("comm_dst", rank)
    return CommSpec(0, number("comm_size"), pg_name, src, dst, number("comm_tag", 0))
