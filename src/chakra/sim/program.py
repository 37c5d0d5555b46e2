"""One rank's workload as the simulator runs it, positions in ascending id order.

:func:`program_of` builds a :class:`RankProgram` from a rank's node table (as :func:`chakra.open`
loads it): what each node does when issued (``action``), the hardware slot it needs (``slot``,
``reference/astra-sim.md`` §2.3), its recorded time, its dependency count and children, and the
attributes the engine needs for communication, roofline compute and remote memory, in bulk (numpy,
no per-node Python). The replay reads the same table in issue order instead
(:mod:`chakra.replay.program`).

A program *is* its :class:`ProgramColumns`, compact arrays: that is what it pickles to, so worker
processes hand programs back cheaply (:func:`chakra.sim.run.load_programs` loads ranks in parallel).
The engine's per-node Python lists (``action``, ``children``, ``comm``, ...) are views built from
the columns on first use, in the process that runs the engine.

Example:
    program = program_of(chakra.open("out/job").table(0), rank=0)
    len(program), program.slot_names[:3]
    # (881, ['CPU', 'GPU compute', 'GPU comm'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple, NoReturn

import numpy as np

from chakra.collector import gc_paused
from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import NodeType
from chakra.table import (
    COMMUNICATION,
    DEFAULT_GROUP_ID,
    INVALID_GROUP_ID,
    MAX_DUR_NS,
    MISSING,
    NodeTable,
    Slot,
)
from chakra.units import NS_PER_US

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


class ProgramColumns(NamedTuple):
    """A rank's program as arrays, by position (ascending id order, file order among equal ids).

    The children of ``pos`` are ``child_pos[child_ptr[pos]:child_ptr[pos + 1]]``, ascending, each
    once (an id in both ``data_deps`` and ``ctrl_deps``, or twice in one, is one edge); ``dep_count``
    counts the same edges. The ``comm_*`` columns are aligned to ``comm_pos`` (the positions of the
    collectives, sends and receives, ascending) as :class:`CommSpec` has them; ``num_ops`` and
    ``tensor_size`` to ``roofline_pos`` (GPU compute nodes recording both); ``memory_size`` to
    ``memory_pos`` (memory loads and stores; 0 when the node records no ``tensor_size``).
    """

    ids: np.ndarray  # uint64
    name_id: np.ndarray  # int32, into RankProgram.name_list
    action: np.ndarray  # int8, DO_*
    slot: np.ndarray  # int32, into RankProgram.slot_names
    time_ns: np.ndarray  # int64: duration_micros in ns; 0 for memory and instant nodes
    dep_count: np.ndarray  # int32
    child_ptr: np.ndarray  # int64, one more than the nodes
    child_pos: np.ndarray  # int32 (int64 beyond 2**31 nodes)
    comm_pos: np.ndarray  # int64
    comm_type: np.ndarray  # int64
    comm_size: np.ndarray  # int64
    comm_group: np.ndarray  # int64
    comm_src: np.ndarray  # int64
    comm_dst: np.ndarray  # int64
    comm_tag: np.ndarray  # int64
    roofline_pos: np.ndarray  # int64
    num_ops: np.ndarray  # int64
    tensor_size: np.ndarray  # int64
    memory_pos: np.ndarray  # int64
    memory_size: np.ndarray  # int64


#: Views of a :class:`RankProgram` built on first use (left out when it is pickled); the engine reads
#: the first ones in every run, the others when a workload or a system needs them.
_ENGINE_VIEWS = ("action", "slot", "time_ns", "dep_count", "children", "comm")
_VIEWS = (*_ENGINE_VIEWS, "roofline", "memory_bytes", "ids", "names")


@dataclass(eq=False)
class RankProgram:
    """One rank's program: its :class:`ProgramColumns`, and the per-node lists the engine reads,
    built from them on first use (positions in ascending id order, file order among equal ids)."""

    rank: int
    path: Path
    columns: ProgramColumns
    name_list: list[str]  # distinct node names; columns.name_id indexes it
    slot_names: list[str] = field(default_factory=lambda: list(SLOT_NAMES))
    cpu_slots: frozenset[int] = frozenset({SLOT_CPU})
    missing_deps: int = 0

    def __len__(self) -> int:
        return len(self.columns.ids)

    def prepare(self) -> RankProgram:
        """Build now the views every simulation reads (else the engine builds them on first use); ``self``."""
        for view in _ENGINE_VIEWS:
            getattr(self, view)
        return self

    def __getstate__(self) -> dict[str, object]:
        # only the columns travel: the views are rebuilt where they are used
        return {key: value for key, value in self.__dict__.items() if key not in _VIEWS}

    @cached_property
    def ids(self) -> list[int]:
        return self.columns.ids.tolist()  # type: ignore[no-any-return]

    @cached_property
    def names(self) -> list[str]:
        names = self.name_list
        return [names[i] for i in self.columns.name_id.tolist()]

    @cached_property
    def action(self) -> list[int]:
        return self.columns.action.tolist()  # type: ignore[no-any-return]

    @cached_property
    def slot(self) -> list[int]:
        return self.columns.slot.tolist()  # type: ignore[no-any-return]

    @cached_property
    def time_ns(self) -> list[int]:
        """Recorded durations in ns: the time of compute nodes (of all nodes in replay-only mode)."""
        return self.columns.time_ns.tolist()  # type: ignore[no-any-return]

    @cached_property
    def dep_count(self) -> list[int]:
        return self.columns.dep_count.tolist()  # type: ignore[no-any-return]

    @cached_property
    def children(self) -> list[list[int]]:
        """Per node, its children's positions (ascending)."""
        flat = self.columns.child_pos.tolist()
        bounds = self.columns.child_ptr.tolist()
        with gc_paused():  # a list per node: no collector passes over them while they are made
            return [flat[a:b] for a, b in pairwise(bounds)]

    @cached_property
    def comm(self) -> dict[int, CommSpec]:
        """Position -> what a collective, send or receive moves."""
        c = self.columns
        with gc_paused():
            specs = map(
                CommSpec._make,
                zip(c.comm_type.tolist(), c.comm_size.tolist(), c.comm_group.tolist(), c.comm_src.tolist(),
                    c.comm_dst.tolist(), c.comm_tag.tolist(), strict=True),
            )  # fmt: skip
            return dict(zip(c.comm_pos.tolist(), specs, strict=True))

    @cached_property
    def roofline(self) -> dict[int, tuple[int, int]]:
        """Position -> ``(num_ops, tensor_size)`` of the GPU compute nodes that record both."""
        c = self.columns
        with gc_paused():
            pairs = zip(c.num_ops.tolist(), c.tensor_size.tolist(), strict=True)
            return dict(zip(c.roofline_pos.tolist(), pairs, strict=True))

    @cached_property
    def memory_bytes(self) -> dict[int, int]:
        """Position -> bytes of each memory load and store."""
        return dict(zip(self.columns.memory_pos.tolist(), self.columns.memory_size.tolist(), strict=True))


def program_of(
    table: NodeTable, rank: int, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False
) -> RankProgram:
    """The :class:`RankProgram` of one rank's table, in bulk. Times are ``duration_micros`` in ns, as
    ASTRA-sim reads them (it ignores ``duration_ns``).

    ASTRA-sim gives a rank one CPU and one GPU-compute slot. ``cpu_per_thread`` gives every host
    thread (``tid``) its own CPU slot and ``gpu_per_stream`` every stream its own compute slot, as
    the recorded job had them (a PyTorch trace's autograd and gloo threads run side by side).
    """
    path = Path(table.path) if table.path is not None else Path(f"rank {rank}")
    types = table.node_type
    n = len(table)
    # METADATA_NODE, INVALID_NODE and unknown types finish at once (§2.4)
    known = (types >= 0) & (types < len(_ACTION_OF_TYPE))
    action = np.where(known, _ACTION_OF_TYPE[np.where(known, types, 0)], DO_INSTANT).astype(np.int8)
    _refuse_comm_on_cpu(table, path)
    slot = table.slot.astype(np.int32)  # the table's Slot numbers are SLOT_CPU, SLOT_GPU, ...
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
    timed = (action != DO_MEMORY) & (action != DO_INSTANT)
    time_ns = np.where(timed, dur_us.astype(np.int64) * NS_PER_US, 0)
    comm = _comm_columns(table, rank, path)
    roofline = compute & ~table.is_cpu & (table.num_ops != MISSING) & (table.tensor_size != MISSING)
    graph = table.graph
    ids, name_id, tensor_size, num_ops = graph.ids, table.name_id, table.tensor_size, table.num_ops
    parent = graph.dep_pos
    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    # Positions are renumbered in ascending id order (file order among equal ids), so a ready heap
    # holds plain positions and pops the lowest id first, as ASTRA-sim issues (§2.2).
    if n > 1 and not bool(np.all(ids[1:] >= ids[:-1])):
        order = np.argsort(ids, kind="stable")
        new_pos = np.empty(n, dtype=np.int64)
        new_pos[order] = np.arange(n, dtype=np.int64)
        parent, child = new_pos[parent], new_pos[child]
        ids, name_id, action, slot, time_ns = ids[order], name_id[order], action[order], slot[order], time_ns[order]
        roofline, tensor_size, num_ops = roofline[order], tensor_size[order], num_ops[order]
        by_new = np.argsort(new_pos[comm["comm_pos"]], kind="stable")
        comm = {key: column[by_new] for key, column in comm.items()}
        comm["comm_pos"] = new_pos[comm["comm_pos"]]
    roofline_pos = np.flatnonzero(roofline)
    memory_pos = np.flatnonzero(action == DO_MEMORY)
    memory_size = tensor_size[memory_pos]
    child_ptr, child_pos, dep_count = _children(parent, child, n)
    columns = ProgramColumns(
        ids=ids,
        name_id=np.ascontiguousarray(name_id, dtype=np.int32),
        action=action,
        slot=slot,
        time_ns=time_ns,
        dep_count=dep_count,
        child_ptr=child_ptr,
        child_pos=child_pos,
        **comm,
        roofline_pos=roofline_pos,
        num_ops=num_ops[roofline_pos],
        tensor_size=tensor_size[roofline_pos],
        memory_pos=memory_pos,
        memory_size=np.where(memory_size != MISSING, memory_size, 0),
    )
    return RankProgram(
        rank=rank,
        path=path,
        columns=columns,
        name_list=table.name_list,
        slot_names=slot_names,
        cpu_slots=frozenset(cpu_slots),
        missing_deps=len(graph.missing_deps),
    )


def _children(parent: np.ndarray, child: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(child_ptr, child_pos, dep_count)`` of the edges ``parent -> child``, each distinct edge once,
    every node's children ascending."""
    key = np.sort(parent.astype(np.int64) * max(n, 1) + child)  # by parent, then child
    if len(key) > 1:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    parent_of, child_of = np.divmod(key, max(n, 1))
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent_of, minlength=n), out=child_ptr[1:])
    pos_type = np.int32 if n < (1 << 31) else np.int64
    return child_ptr, child_of.astype(pos_type), np.bincount(child_of, minlength=n).astype(np.int32)


#: What a node of each type does when issued, by type number (§2.4); other types finish at once.
_ACTION_OF_TYPE = np.full(max(NodeType.values()) + 1, DO_INSTANT, dtype=np.int8)
for _node_type, _what in (
    (NodeType.COMP_NODE, DO_COMPUTE),
    (NodeType.COMM_COLL_NODE, DO_COLLECTIVE),
    (NodeType.COMM_SEND_NODE, DO_SEND),
    (NodeType.COMM_RECV_NODE, DO_RECV),
    (NodeType.MEM_LOAD_NODE, DO_MEMORY),
    (NodeType.MEM_STORE_NODE, DO_MEMORY),
):
    _ACTION_OF_TYPE[_node_type] = _what
#: Longest ``duration_micros`` simulated: the node table's bound (its ns fit the event queue's int64 times).
MAX_DURATION_US = MAX_DUR_NS // NS_PER_US


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


def _comm_columns(table: NodeTable, rank: int, path: Path) -> dict[str, np.ndarray]:
    """The ``comm_*`` columns of :class:`ProgramColumns` in file order (a collective's peers are the rank
    itself; a missing peer of a transfer is the rank, a missing tag 0, as FeederV3 defaults them)."""
    comm = table.comm
    collective = table.node_type[comm.pos] == NodeType.COMM_COLL_NODE
    no_size, no_type = comm.size == MISSING, collective & (comm.kind == MISSING)
    no_group = collective & (comm.group == INVALID_GROUP_ID)
    bad = no_size | no_type | no_group
    if bad.any():  # the first such node in the file, its first problem
        at = int(np.argmax(bad))
        pos = int(comm.pos[at])
        if no_size[at] or no_type[at]:
            _missing(table, pos, "comm_size" if no_size[at] else "comm_type", path)
        raise ChakraInputError(
            f"node {int(table.ids[pos])} ({table.names[pos]}) uses pg_name {comm.pg_name[at]!r}, which names no "
            "communicator group (ASTRA-sim's stoi refuses it)",
            path=path,
            hint="map process groups to ids 1, 2, ... and write a comm groups file",
        )
    as_int = np.int64
    return {
        "comm_pos": comm.pos.astype(as_int),
        "comm_type": np.where(collective, comm.kind, 0).astype(as_int),
        "comm_size": comm.size.astype(as_int),
        "comm_group": np.where(collective, comm.group, DEFAULT_GROUP_ID).astype(as_int),
        "comm_src": np.where(collective | (comm.src == MISSING), rank, comm.src).astype(as_int),
        "comm_dst": np.where(collective | (comm.dst == MISSING), rank, comm.dst).astype(as_int),
        "comm_tag": np.where(collective | (comm.tag == MISSING), 0, comm.tag).astype(as_int),
    }


def _missing(table: NodeTable, pos: int, name: str, path: Path) -> NoReturn:
    raise ChakraInputError(
        f"node {int(table.ids[pos])} ({table.names[pos]}) has no {name}",
        path=path,
        hint="run chakra validate --target astra-sim on the workload",
    )
