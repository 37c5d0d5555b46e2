"""Find the communication calls of a PyTorch host trace and what each one moves.

A *call* is one ``torch.distributed`` operation as the host trace records it, a nest of up to three
host ops (``reference/pytorch-traces.md`` §1.7-1.8, §5):

* the dispatcher op ``c10d::allreduce_``, ``c10d::send``, ... (every backend, every version);
* ``record_param_comms`` below it (NCCL): typed attributes ``collective_name``, ``in_msg_nelems``,
  ``dtype``, ``pg_name``, ... from schema 1.1.0, positional arguments before;
* the backend's *work* op ``nccl:<name>`` or ``gloo:<name>``. Gloo runs it on a worker thread after
  the dispatcher op returns, and the host trace often hangs it under the enclosing step instead of
  the dispatcher op: such works are paired with their call in issue order (first in, first out).

:func:`find_calls` returns each call with its kind, bytes, process group (when recorded), root or
peer and tag, all in the terms consumers read (``reference/workload-generators.md`` §2.0 for what
``comm_size`` means per collective).

Example:
    calls = find_calls(load_host_trace("host.0.json").nodes)
    [(c.name, c.comm_type, c.size_bytes) for c in calls.values()][:3]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

from chakra._items import gather
from chakra.pytorch.host import HostNode
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    SCATTER,
)

#: What a communication name means, checked in this order against the name lower-cased without
#: ``_``/``-`` (so ``all_gather``, ``_allgather_base_``, ``AllGather`` and ``ncclDevKernel_AllGather_RING``
#: agree). Longer names come first: ``allreduce`` before ``reduce``, ``reducescatter`` before ``scatter``.
_KIND_PATTERNS: tuple[tuple[str, int, int | None], ...] = (
    ("allreduce", COMM_COLL_NODE, ALL_REDUCE),
    ("reducescatter", COMM_COLL_NODE, REDUCE_SCATTER),
    ("allgather", COMM_COLL_NODE, ALL_GATHER),
    ("alltoall", COMM_COLL_NODE, ALL_TO_ALL),
    ("broadcast", COMM_COLL_NODE, BROADCAST),
    ("barrier", COMM_COLL_NODE, BARRIER),
    ("gather", COMM_COLL_NODE, GATHER),
    ("scatter", COMM_COLL_NODE, SCATTER),
    ("reduce", COMM_COLL_NODE, REDUCE),
    ("send", COMM_SEND_NODE, None),
    ("recv", COMM_RECV_NODE, None),
)

#: Prefixes of backend work ops (record_function ranges around the transfer itself).
WORK_PREFIXES = ("gloo:", "nccl:")
DISPATCH_PREFIX = "c10d::"
RECORD_PARAM_COMMS = "record_param_comms"
#: What the name of an op that belongs to a communication call starts with (or is RECORD_PARAM_COMMS).
_CALL_PREFIXES = (DISPATCH_PREFIX, *WORK_PREFIXES)

#: ``c10d::`` ops that are not communication (bookkeeping around it).
_NOT_COMM = frozenset({"wait", "coalesced", "startcoalescing", "endcoalescing"})


def comm_kind(name: str) -> tuple[int, int | None] | None:
    """``(node type, collective type)`` of a communication op, work op or NCCL kernel name,
    ``None`` when the name is no communication (``wait``, ``nccl:coalesced``, compute ops).

    Example:
        >>> comm_kind("c10d::_reduce_scatter_base_") == (COMM_COLL_NODE, REDUCE_SCATTER)
        True
    """
    key = name.rsplit(":", 1)[-1].lower().replace("_", "").replace("-", "")
    if key in _NOT_COMM:
        return None
    for pattern, node_type, comm_type in _KIND_PATTERNS:
        if pattern in key:
            return node_type, comm_type
    return None


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclKernel", "ncclDevKernel"))


#: Bytes per element of the ``dtype`` names ``record_param_comms`` writes (c10d's ScalarType names).
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1,
    "Byte": 1, "Bool": 1, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "UInt16": 2,
    "UInt32": 4, "UInt64": 8, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
}  # fmt: skip

#: For each dispatcher op (name after ``c10d::``): the argument holding the tensors whose bytes are
#: the collective's ``comm_size`` (the per-rank input for gather-type collectives, the full buffer
#: otherwise), and the argument holding the root (rooted collectives) or the peer (p2p), all as
#: the op schemas of ``torch/csrc/distributed/c10d/Ops.cpp`` order them.
_SIZE_ARG = {
    "allreduce_": 0, "allreduce_coalesced_": 0, "allgather_": 1, "_allgather_base_": 1,
    "allgather_coalesced_": 1, "allgather_into_tensor_coalesced_": 1, "reduce_scatter_": 1,
    "_reduce_scatter_base_": 1, "reduce_scatter_tensor_coalesced_": 1, "broadcast_": 0, "reduce_": 0,
    "gather_": 1, "scatter_": 0, "alltoall_": 1, "alltoall_base_": 1, "send": 0, "recv_": 0,
    "recv_any_source_": 0,
}  # fmt: skip
_ROOT_ARG = {"broadcast_": 2, "reduce_": 3, "gather_": 3, "scatter_": 3}
_PEER_TAG_ARGS = {"send": (2, 3), "recv_": (2, 3), "recv_any_source_": (None, 2)}
#: The ``async_op`` flag, where the schema has one: the ``Bool`` argument (searched by type).
_BOOL_TYPE = "Bool"


#: Bytes per element of the type names operators' inputs are recorded with: the C++ names of the
#: profiler's ``Input type`` (``float``, ``c10::BFloat16``, ``long int``) and the host trace's
#: ``Tensor(<name>)``.
TYPE_NAME_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "unsigned short": 2,
    "unsigned int": 4, "unsigned long": 8, "c10::complex<c10::Half>": 4, "c10::complex<float>": 8,
    "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4,
}  # fmt: skip


def typed_shape_bytes(shape: Any, type_name: Any) -> int:
    """Bytes of one argument from its recorded shape and element type (0 when the type names no
    element type, such as ``TensorList`` or ``Scalar``).

    >>> typed_shape_bytes([8, 1024], "float"), typed_shape_bytes([16], "Tensor(c10::BFloat16)")
    (32768, 32)
    >>> typed_shape_bytes([], "Scalar")
    0
    """
    if not isinstance(type_name, str) or not isinstance(shape, list):
        return 0
    if type_name.startswith("Tensor(") and type_name.endswith(")"):
        type_name = type_name[len("Tensor(") : -1]
    itemsize = TYPE_NAME_BYTES.get(type_name)
    if itemsize is None or not all(isinstance(d, int) for d in shape):
        return 0
    numel = 1
    for d in shape:
        numel *= d
    return numel * itemsize


def _arg_bytes(node: HostNode, values: Sequence[Any], index: int | None) -> int:
    """Bytes of argument ``index`` (``None``: every argument): its tensors' where the trace records
    them (host traces), else its shape and element type (profiler traces)."""
    found = tensor_bytes(values if index is None else _arg(values, index))
    if found:
        return found
    shapes, types = node.inputs.shapes(), node.inputs.types()
    pairs = list(zip(shapes, types, strict=False))
    if index is not None:
        pairs = pairs[index : index + 1] if 0 <= index < len(pairs) else []
    return sum(typed_shape_bytes(shape, type_name) for shape, type_name in pairs)


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor in a host-trace value (a tensor is
    ``[tensor_id, storage_id, offset, numel, itemsize, device]``; lists are walked)."""
    if not isinstance(value, list):
        return 0
    if len(value) == 6 and isinstance(value[5], str) and isinstance(value[3], int) and isinstance(value[4], int):
        return value[3] * value[4]
    return sum(tensor_bytes(item) for item in value)


@dataclass
class CommCall:
    """One communication call of a rank.

    ``size_bytes`` follows the consumers' convention: all-gather and gather count the per-rank
    input, scatter the whole scattered buffer, everything else the full buffer; barrier 0.
    ``peer``/``root`` are ranks *within the call's process group* as PyTorch records them.
    ``pg_name`` is ``None`` when the trace does not say (gloo: the group is an opaque argument).
    """

    root_id: int  # the outermost host op of the call
    name: str
    node_type: int  # COMM_COLL_NODE, COMM_SEND_NODE or COMM_RECV_NODE
    comm_type: int | None  # CollectiveCommType for collectives
    size_bytes: int
    size_source: str  # "record_param_comms", "arguments" or "work op"
    thread: int  # host tid of the issuing op
    pg_name: str | None = None
    pg_size: int | None = None
    root: int | None = None
    peer: int | None = None
    tag: int | None = None
    async_op: bool | None = None
    member_ids: list[int] = field(default_factory=list)  # every host op of the nest
    work_id: int | None = None  # the gloo:/nccl: work op, when there is one


@dataclass
class CommNode:
    """A communication node of a converted rank, for cross-rank work (group inference, numbering)."""

    node_id: int
    node_type: int
    comm_type: int | None
    size_bytes: int
    pg_name: str | None  # None: the trace does not say
    start_us: float | None
    end_us: float | None
    issue_order: int = 0  # id of the call's outermost host op: program order on the rank
    root: int | None = None  # group rank
    peer: int | None = None  # group rank
    tag: int | None = None


def _arg(values: Sequence[Any], index: int | None) -> Any:
    return values[index] if index is not None and 0 <= index < len(values) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_dispatch(call: CommCall, node: HostNode) -> None:
    """Size, root, peer, tag and async flag from the dispatcher op's positional arguments."""
    op = node.name[len(DISPATCH_PREFIX) :]
    values = node.inputs.values()
    size_arg = _SIZE_ARG.get(op)
    if size_arg is not None and call.size_source != "record_param_comms":
        size = _arg_bytes(node, values, size_arg)
        # a profiler trace records a tensor list without its element type: the work op tells then
        if size or _has_tensor(_arg(values, size_arg)):
            call.size_bytes = size
            call.size_source = "arguments"
    call.root = _int_or_none(_arg(values, _ROOT_ARG.get(op)))
    if op in _PEER_TAG_ARGS:
        peer_arg, tag_arg = _PEER_TAG_ARGS[op]
        call.peer = _int_or_none(_arg(values, peer_arg))
        call.tag = _int_or_none(_arg(values, tag_arg))
    types = node.inputs.types()
    flags = [v for v, t in zip(values, types, strict=False) if t == _BOOL_TYPE and isinstance(v, bool)]
    if flags:
        call.async_op = flags[-1]


_TUPLE_PG = re.compile(r"Tuple\[String,\s*String\]")


def _from_record_param_comms(call: CommCall, node: HostNode, backend_ids: dict[int, str]) -> None:
    """Size and process group from ``record_param_comms``: typed attributes (schema >= 1.1.0) or,
    before that, positional arguments (the group as ``(pg_name, pg_desc)`` or as a backend id)."""
    attrs = node.attrs
    nelems_in, nelems_out = attrs.get("in_msg_nelems"), attrs.get("out_msg_nelems")
    itemsize = DTYPE_BYTES.get(str(attrs.get("dtype", "")))
    if isinstance(nelems_in, int) and isinstance(nelems_out, int) and itemsize:
        in_bytes, out_bytes = nelems_in * itemsize, nelems_out * itemsize
        pg_size = attrs.get("pg_size")
        if call.comm_type == SCATTER and isinstance(pg_size, int):
            call.size_bytes = out_bytes * pg_size
        elif call.node_type == COMM_RECV_NODE:
            call.size_bytes = max(in_bytes, out_bytes)
        else:
            call.size_bytes = in_bytes
        call.size_source = "record_param_comms"
    if isinstance(attrs.get("pg_name"), str) and attrs["pg_name"]:
        call.pg_name = attrs["pg_name"]
    if isinstance(attrs.get("pg_size"), int):
        call.pg_size = attrs["pg_size"]
    if call.pg_name is None:
        values, types = node.inputs.values(), node.inputs.types()
        for value, type_ in zip(values, types, strict=False):
            if _TUPLE_PG.fullmatch(type_) and isinstance(value, list) and value and value[0]:
                call.pg_name = str(value[0])
                break
        else:
            # schema 1.0.2: [tensors, seq, pg_id, rank, "<coll>", ...]; pg_id = backend_id of the group record
            pg_id = _int_or_none(_arg(values, 2))
            if pg_id is not None and pg_id in backend_ids:
                call.pg_name = backend_ids[pg_id]


def _from_work(call: CommCall, node: HostNode) -> None:
    if call.size_source == "work op" or (call.size_bytes == 0 and call.size_source == ""):
        call.size_bytes = _arg_bytes(node, node.inputs.values(), None)
        call.size_source = "work op"


def _has_tensor(value: Any) -> bool:
    """Whether a host-trace value holds a tensor (``[tensor_id, storage_id, offset, numel, itemsize, device]``)."""
    if not isinstance(value, list):
        return False
    if len(value) == 6 and isinstance(value[5], str) and isinstance(value[3], int):
        return True
    return any(_has_tensor(item) for item in value)


def _compatible(call: CommCall, work_kind: tuple[int, int | None]) -> bool:
    """Whether a work op can carry out ``call``: the same kind, or gloo's all-reduce standing in
    for a reduce-scatter (gloo has no native one)."""
    if (call.node_type, call.comm_type) == work_kind:
        return True
    return call.comm_type == REDUCE_SCATTER and work_kind == (COMM_COLL_NODE, ALL_REDUCE)


def find_calls(
    nodes: Iterable[HostNode],
    process_groups: Sequence[dict[str, Any]] = (),
    by_id: Mapping[int, HostNode] | None = None,
) -> dict[int, CommCall]:
    """Every communication call among ``nodes`` (one rank's host ops), by the id of its outermost op.

    ``process_groups`` (the group record's entries) resolve the backend ids older traces use for
    groups. Works hung outside their call are paired with the oldest open call of the same thread
    and a compatible kind issued before them (else of any thread: a profiler trace records the
    worker's thread). ``by_id``: the nodes by id (the last of an id), where the caller has made
    that map already.
    """
    if by_id is None:
        by_id = {node.id: node for node in nodes}
    backend_ids = {
        g["backend_id"]: str(g.get("pg_name", ""))
        for g in process_groups
        if isinstance(g, dict) and isinstance(g.get("backend_id"), int)
    }

    def comm_ancestor(node: HostNode) -> HostNode | None:
        """The outermost ancestor that is itself part of a call (nests are at most three deep)."""
        found = None
        parent = by_id.get(node.parent)
        while parent is not None and parent.id != node.id and _is_call_op(parent):
            found = parent
            if parent.parent == parent.id:
                break
            parent = by_id.get(parent.parent)
        return found

    calls: dict[int, CommCall] = {}
    works: list[HostNode] = []
    call: CommCall | None
    # a few op names recur over the whole trace: each is judged once
    every = list(by_id.values())
    (names,) = gather(every, (("name",),))
    call_names = {name for name in set(names) if _is_call_name(name)}
    in_calls = list(compress(every, map(call_names.__contains__, names)))
    for node in sorted(in_calls, key=attrgetter("id")):  # ids follow op entry: issue order
        if node.name.startswith(WORK_PREFIXES):
            works.append(node)
            continue
        kind = comm_kind(node.name) if node.name != RECORD_PARAM_COMMS else _rpc_kind(node)
        if kind is None:
            continue
        top = comm_ancestor(node)
        if top is not None and top.id in calls:
            call = calls[top.id]
        else:
            call = CommCall(node.id, node.name, kind[0], kind[1], 0, "", node.tid)
            calls[node.id] = call
        call.member_ids.append(node.id)
        if node.name == RECORD_PARAM_COMMS:
            _from_record_param_comms(call, node, backend_ids)
        elif node.name.startswith(DISPATCH_PREFIX):
            _from_dispatch(call, node)

    open_calls: dict[int, list[CommCall]] = {}  # thread -> calls without a work yet, in issue order
    for call in calls.values():
        open_calls.setdefault(call.thread, []).append(call)
    for work in works:
        kind = comm_kind(work.name)
        if kind is None:
            continue
        top = comm_ancestor(work)
        call = calls.get(top.id) if top is not None else None
        if call is None:
            pending = open_calls.get(work.tid, [])
            call = next((c for c in pending if c.root_id < work.id and _compatible(c, kind)), None)
        if call is None:
            # a profiler trace names the worker thread a work ran on, not the thread that issued it
            anywhere = (c for calls_of in open_calls.values() for c in calls_of)
            call = min(
                (c for c in anywhere if c.root_id < work.id and _compatible(c, kind)),
                key=lambda c: c.root_id,
                default=None,
            )
        if call is None or call.work_id is not None:
            call = CommCall(work.id, work.name, kind[0], kind[1], 0, "", work.tid)
            calls[work.id] = call
        else:
            pending = open_calls.get(call.thread, [])
            if call in pending:
                pending.remove(call)
        call.work_id = work.id
        call.member_ids.append(work.id)
        _from_work(call, work)
    for call in calls.values():
        if call.comm_type == BARRIER:
            call.size_bytes = 0
    return dict(sorted(calls.items()))


def _is_call_op(node: HostNode) -> bool:
    return _is_call_name(node.name)


def _is_call_name(name: str) -> bool:
    return name.startswith(_CALL_PREFIXES) or name == RECORD_PARAM_COMMS


def _rpc_kind(node: HostNode) -> tuple[int, int | None] | None:
    """Kind of a ``record_param_comms`` op: its ``collective_name`` attribute or, in schemas before
    1.1.0, the collective name among its positional arguments."""
    name = node.attrs.get("collective_name")
    if not isinstance(name, str):
        name = next((v for v in node.inputs.values() if isinstance(v, str) and comm_kind(v) is not None), "wait")
    return comm_kind(name)


#: Collectives whose ``record_param_comms`` names the issuing rank in its ``rank`` argument (c10d's
#: ``RECORD_PARAM_COMMS(seq, pg, rank, name, ...)``); rooted ones pass their root there instead.
_RANK_NAMING = frozenset({ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BARRIER})
#: Where that argument is among the op's inputs: ``[tensors, seq, pg, rank, name, ...]``.
_RPC_RANK_ARG = 3
#: The default group's names (``pg_name``): its group ranks are the global ranks.
_DEFAULT_PG_NAMES = ("0", "")


def recorded_rank(nodes: Iterable[HostNode]) -> int | None:
    """The global rank a host trace was recorded on, from its ``record_param_comms`` ops on the
    default group that name the issuing rank; ``None`` when none does or they disagree.

    Example:
        recorded_rank(load_host_trace("host.json").nodes)   # 1 for PARAM's resnet_2gpu_et.json.gz
    """
    found: set[int] = set()
    for node in nodes:
        if node.name != RECORD_PARAM_COMMS:
            continue
        kind = _rpc_kind(node)
        if kind is None or kind[1] not in _RANK_NAMING:
            continue
        values = node.inputs.values()
        pg_name = node.attrs.get("pg_name")
        if pg_name is None:
            pg = _arg(values, 2)
            pg_name = str(pg[0]) if isinstance(pg, list) and pg else None
        rank = _int_or_none(_arg(values, _RPC_RANK_ARG))
        if rank is not None and pg_name in _DEFAULT_PG_NAMES:
            found.add(rank)
    return found.pop() if len(found) == 1 else None
