"""The transfer of each communication call: which item carries it (the NCCL kernel, else the
``gloo:``/``nccl:`` work op, else the call's innermost op), what it becomes (a collective, send or
recv node with its attributes) and the :class:`~chakra.pytorch.comms.CommNode` the group resolution
reads. Collectives are written as the type that ran (a barrier is a BARRIER); adapting them for a
consumer that refuses some is ``chakra adapt``'s job (:mod:`chakra.adapt`).
"""

from __future__ import annotations

from collections import defaultdict

from chakra.pytorch.comms import CommCall, CommNode, comm_kind, is_nccl_kernel
from chakra.pytorch.items import Builder, Item, order_key
from chakra.pytorch.report import COMM_KIND_LABEL
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, CollectiveCommType


def attach_comm(builder: Builder) -> list[CommNode]:
    """Turn each call's transfer into a communication node with its attributes."""
    kernels_of: dict[int, list[Item]] = defaultdict(list)
    for item in builder.activity_items:
        assert item.activity is not None
        if item.activity.host_id is not None and is_nccl_kernel(item.name):
            kernels_of[item.activity.host_id].append(item)
    comm_nodes: list[CommNode] = []
    claimed: set[int] = set()
    for call in builder.calls.values():
        members = [m for m in call.member_ids if m in builder.items]
        if not members:
            builder.report.comm_notes["call outside the converted window"] += 1
            continue
        kernels = sorted((k for m in members for k in kernels_of.get(m, [])), key=order_key)
        if kernels:
            transfer = kernels[0]
            for extra in kernels[1:]:
                builder.report.comm_notes["extra kernel of one call kept as device compute"] += 1
                claimed.add(extra.node_id)
        elif call.work_id is not None and call.work_id in builder.items:
            transfer = builder.items[call.work_id]
        else:
            transfer = builder.items[max(members)]  # innermost op of the nest (ids grow inwards)
        claimed.add(transfer.node_id)
        issuer = builder.items.get(call.root_id)
        if (
            issuer is not None
            and issuer is not transfer
            and issuer.thread != transfer.thread
            and issuer.node_id not in transfer.data
        ):
            transfer.data += (issuer.node_id,)
        comm_nodes.append(_make_comm(builder, call, transfer))
    for item in builder.activity_items:
        if is_nccl_kernel(item.name) and item.node_id not in claimed:
            kind = comm_kind(item.name)
            if kind is None or "sendrecv" in item.name.lower():
                builder.report.comm_notes["NCCL kernel without its call kept as device compute"] += 1
                continue
            call = CommCall(item.node_id, item.name, kind[0], kind[1], 0, "kernel name only", 0)
            builder.report.comm_notes["NCCL kernel without its call: size unknown (0)"] += 1
            comm_nodes.append(_make_comm(builder, call, item))
    return comm_nodes


def _make_comm(builder: Builder, call: CommCall, transfer: Item) -> CommNode:
    """Make ``transfer`` the node of ``call`` (its type and attributes, counted in the report)."""
    transfer.node_type = call.node_type
    transfer.is_cpu = False
    builder.report.comm[_comm_label(call)] += 1
    builder.report.comm_notes[f"size from {call.size_source or 'nothing'}"] += 1
    kind = (("comm_type", call.comm_type),) if call.node_type == COMM_COLL_NODE else ()
    # comm_root, pg_name, peers: apply_groups
    transfer.attrs = (*transfer.attrs, *kind, ("comm_size", call.size_bytes), ("comm_call", call.name))
    return CommNode(
        node_id=transfer.node_id,
        node_type=call.node_type,
        comm_type=call.comm_type,
        size_bytes=call.size_bytes,
        pg_name=call.pg_name,
        start_us=transfer.ts_us,
        end_us=transfer.end_us if transfer.ts_us is not None else None,
        issue_order=call.root_id,
        root=call.root,
        peer=call.peer,
        tag=call.tag,
    )


def _comm_label(call: CommCall) -> str:
    if call.node_type == COMM_COLL_NODE and call.comm_type is not None:
        return CollectiveCommType.Name(call.comm_type)
    return COMM_KIND_LABEL[call.node_type]
