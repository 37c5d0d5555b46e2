"""A hand-made 4-rank training step (the tests' small workload with every kind of node).

Two tensor-parallel groups and data parallelism across them. Per rank and layer: a CPU launch op,
a GPU forward kernel, a tensor-parallel all-gather; backward kernels in reverse order, each
followed by a data-parallel all-reduce of the layer's gradients; finally the activations of the
last layer go to the next pipeline neighbour as a send/recv pair. Every node carries the
attributes simulators read, in the value kinds they read; no start times (generated, not recorded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chakra.groups import CommGroups
from chakra.io import FORMAT_VERSION
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, GlobalMetadata, NodeType
from chakra.trace import Trace, new_node

NUM_RANKS = 4
NUM_LAYERS = 4
TP_GROUPS = {1: [0, 1], 2: [2, 3]}  # ASTRA-sim group ids start at 1
DP_GROUPS = {3: [0, 2], 4: [1, 3]}
HIDDEN = 4096
BYTES_PER_ELEMENT = 2  # bf16
TOKENS = 2048
FWD_KERNEL_US = 850
BWD_KERNEL_US = 1700
LAUNCH_US = 12
ACTIVATION_TAG = 7  # any tag works as long as sender and receiver agree


def _group_of(rank: int, groups: dict[int, list[int]]) -> int:
    return next(g for g, members in groups.items() if rank in members)


def build_rank(rank: int) -> Trace:
    """One rank of the demo workload, ids increasing along dependencies."""
    metadata = GlobalMetadata(version=FORMAT_VERSION)
    metadata.attr.add(name="generator", string_val="chakra-et demo")
    trace = Trace(metadata)
    next_id = 0

    def add(name: str, node_type: int, deps: list[int], dur_us: int = 0, **attrs: Any) -> int:
        nonlocal next_id
        node = new_node(next_id, name, node_type, data_deps=deps, duration_us=dur_us, **attrs)
        trace.nodes.append(node)
        next_id += 1
        return node.id

    weight_bytes = HIDDEN * HIDDEN * BYTES_PER_ELEMENT // 2  # split over the 2-way tensor parallel group
    activation_bytes = TOKENS * HIDDEN * BYTES_PER_ELEMENT // 2
    flops = 2 * TOKENS * HIDDEN * HIDDEN // 2
    tp = str(_group_of(rank, TP_GROUPS))
    dp = str(_group_of(rank, DP_GROUPS))
    last = add("ProfilerStep#0", NodeType.COMP_NODE, [], 5, is_cpu_op=True)
    for layer in range(NUM_LAYERS):
        launch = add(f"layer{layer}.fwd.launch", NodeType.COMP_NODE, [last], LAUNCH_US, is_cpu_op=True)
        kernel = add(
            f"layer{layer}.fwd.gemm",
            NodeType.COMP_NODE,
            [launch],
            FWD_KERNEL_US,
            is_cpu_op=False,
            num_ops=flops,
            tensor_size=weight_bytes + 2 * activation_bytes,
        )
        last = add(
            f"layer{layer}.fwd.all_gather",
            NodeType.COMM_COLL_NODE,
            [kernel],
            is_cpu_op=False,
            comm_type=CollectiveCommType.ALL_GATHER,
            comm_size=activation_bytes,
            pg_name=tp,
        )
    peer_next, peer_prev = (rank + 1) % NUM_RANKS, (rank - 1) % NUM_RANKS
    send, recv = (
        add(name, node_type, [last], is_cpu_op=False, comm_src=src, comm_dst=dst, comm_tag=ACTIVATION_TAG,
            comm_size=activation_bytes)
        for name, node_type, src, dst in (
            ("activations.send", NodeType.COMM_SEND_NODE, rank, peer_next),
            ("activations.recv", NodeType.COMM_RECV_NODE, peer_prev, rank),
        )
    )  # fmt: skip
    last = add(
        "loss",
        NodeType.COMP_NODE,
        [send, recv],
        40,
        is_cpu_op=False,
        num_ops=TOKENS * HIDDEN,
        tensor_size=activation_bytes,
    )
    for layer in reversed(range(NUM_LAYERS)):
        launch = add(f"layer{layer}.bwd.launch", NodeType.COMP_NODE, [last], LAUNCH_US, is_cpu_op=True)
        last = add(
            f"layer{layer}.bwd.gemm",
            NodeType.COMP_NODE,
            [launch],
            BWD_KERNEL_US,
            is_cpu_op=False,
            num_ops=2 * flops,
            tensor_size=2 * (weight_bytes + activation_bytes),
        )
        add(
            f"layer{layer}.grad.all_reduce",
            NodeType.COMM_COLL_NODE,
            [last],
            is_cpu_op=False,
            comm_type=CollectiveCommType.ALL_REDUCE,
            comm_size=weight_bytes,
            pg_name=dp,
        )
    return trace


def build_workload(out_dir: Path, prefix: str = "demo") -> Path:
    """Write ``out_dir/prefix.{rank}.et`` for every rank plus the comm groups file; returns the prefix path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for rank in range(NUM_RANKS):
        build_rank(rank).save(out_dir / f"{prefix}.{rank}.et")
    CommGroups({**TP_GROUPS, **DP_GROUPS}).write(out_dir / f"{prefix}.comm_groups.json")
    return out_dir / prefix
