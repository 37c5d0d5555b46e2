"""chakra.pytorch.comms: what each communication name means and how many bytes a call moves."""

from __future__ import annotations

import pytest

from chakra.pytorch.comms import comm_kind, find_calls, tensor_bytes
from chakra.pytorch.host import HostNode, IOLists
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


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("c10d::allreduce_", (COMM_COLL_NODE, ALL_REDUCE)),
        ("c10d::_reduce_scatter_base_", (COMM_COLL_NODE, REDUCE_SCATTER)),
        ("c10d::_allgather_base_", (COMM_COLL_NODE, ALL_GATHER)),
        ("c10d::alltoall_base_", (COMM_COLL_NODE, ALL_TO_ALL)),
        ("c10d::broadcast_", (COMM_COLL_NODE, BROADCAST)),
        ("c10d::reduce_", (COMM_COLL_NODE, REDUCE)),
        ("c10d::gather_", (COMM_COLL_NODE, GATHER)),
        ("c10d::scatter_", (COMM_COLL_NODE, SCATTER)),
        ("c10d::barrier", (COMM_COLL_NODE, BARRIER)),
        ("c10d::send", (COMM_SEND_NODE, None)),
        ("c10d::recv_", (COMM_RECV_NODE, None)),
        ("gloo:all_reduce", (COMM_COLL_NODE, ALL_REDUCE)),
        ("ncclDevKernel_AllGather_RING_LL", (COMM_COLL_NODE, ALL_GATHER)),
        ("ncclKernel_Reduce_RING_LL_Sum_float", (COMM_COLL_NODE, REDUCE)),
        ("all_to_allv", (COMM_COLL_NODE, ALL_TO_ALL)),
    ],
)
def test_communication_names_map_to_node_and_collective_types(name, kind):
    assert comm_kind(name) == kind


@pytest.mark.parametrize("name", ["c10d::wait", "nccl:coalesced", "aten::mm", "record_param_comms"])
def test_bookkeeping_and_compute_names_are_no_communication(name):
    assert comm_kind(name) is None


def test_tensor_bytes_walk_nested_lists():
    assert tensor_bytes([[[1, 2, 0, 4, 4, "cpu"], [3, 4, 0, 2, 8, "cuda:0"]], "<Object>", 3]) == 32


def _node(node_id: int, name: str, parent: int, values: str = "[]", types: str = "[]", tid: int = 1) -> HostNode:
    raw = IOLists(raw_values=values.encode(), raw_types=types.encode())  # type: ignore[arg-type]
    return HostNode(node_id, name, parent, node_id, tid, 0, -1, 0, 0, "", raw, IOLists(), {})


def test_gloo_works_hung_outside_their_call_pair_with_calls_in_issue_order():
    nodes = [
        _node(
            10,
            "c10d::allreduce_",
            2,
            '[[[1,2,0,8,4,"cpu"]],"<Object>","<Object>","<None>",true,-1]',
            '["GenericList[Tensor(float)]","Object","Object","None","Bool","Int"]',
        ),
        _node(12, "c10d::_reduce_scatter_base_", 2, '[[3,4,0,2,4,"cpu"],[5,6,0,8,4,"cpu"],"<Object>"]'),
        _node(14, "gloo:all_reduce", 2),  # the all-reduce's work, under the step
        _node(15, "gloo:all_reduce", 2),  # the reduce-scatter's (gloo has none of its own)
    ]
    calls = find_calls(nodes)
    assert [(c.name, c.work_id, c.size_bytes, c.async_op) for c in calls.values()] == [
        ("c10d::allreduce_", 14, 32, True),
        ("c10d::_reduce_scatter_base_", 15, 32, None),
    ]


def test_send_and_recv_take_peer_and_tag_from_their_arguments():
    nodes = [
        _node(10, "c10d::send", 2, '[[[1,2,0,8,4,"cpu"]],"<Object>",1,3]'),
        _node(11, "gloo:send", 10),
        _node(12, "c10d::recv_", 2, '[[[3,4,0,8,4,"cpu"]],"<Object>",0,5]'),
    ]
    calls = find_calls(nodes)
    assert [(c.node_type, c.peer, c.tag, c.size_bytes, c.work_id) for c in calls.values()] == [
        (COMM_SEND_NODE, 1, 3, 32, 11),
        (COMM_RECV_NODE, 0, 5, 32, None),
    ]
