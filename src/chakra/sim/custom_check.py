"""A custom collective algorithm against ASTRA-sim's built-in algorithm of the same name: one
collective of a size on a network, timed by each (``chakra generate collective --compare``).

The two differ where the custom form cannot say what the built-in one does: the built-in algorithm
crosses the memory bus (``endpoint-delay``) after every receive and reduces in ns at
``local-mem-bw``, where a custom algorithm pays no bus and reduces in COMP nodes of whole µs (1 ns
when under 1 µs); ASTRA-sim's doubleBinaryTree sends each chunk whole over one of its two trees,
where a double binary tree written as ETs splits the data over both.

Example:
    compared = compare_with_built_in("algo/ring", ALL_REDUCE, 1 << 20, "ring", network, 10, 50.0)
    compared.custom_ns - compared.built_in_ns, compared.reasons
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, REDUCE_SCATTER, CollectiveCommType
from chakra.sim.algorithms import DOUBLE_BINARY_TREE
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.run import simulate_workload
from chakra.trace import new_node
from chakra.workload_writer import write_workload


@dataclass(frozen=True)
class BuiltInComparison:
    """One collective's time (ns) by the custom algorithm and by the built-in one, and why they
    differ (empty when they do not)."""

    custom_ns: int
    built_in_ns: int
    reasons: list[str]


def compare_with_built_in(
    prefix: str | Path,
    comm_type: int,
    size_bytes: int,
    built_in: str,
    network: NetworkConfig,
    endpoint_delay_ns: float,
    local_mem_bw_gbps: float,
) -> BuiltInComparison:
    """One collective of ``comm_type`` and ``size_bytes`` on every NPU of ``network``, run by the
    custom algorithm ``prefix`` and by the built-in ``built_in`` (ASTRA-sim's name), in one chunk,
    the built-in one with ``endpoint_delay_ns``, both reducing at ``local_mem_bw_gbps``."""
    name = CollectiveCommType.Name(comm_type)

    def system(implementations: dict[str, tuple[str, ...]], custom: dict[str, Path]) -> SystemConfig:
        return SystemConfig(
            scheduling_policy="FIFO",
            collective_optimization="baseline",
            implementations=implementations,
            preferred_dataset_splits=1,
            endpoint_delay_ns=endpoint_delay_ns,
            local_mem_bw_gbps=local_mem_bw_gbps,
            custom_implementations=custom,
        )

    node = new_node(0, name.lower(), COMM_COLL_NODE, is_cpu_op=False, comm_type=comm_type, comm_size=size_bytes)
    with tempfile.TemporaryDirectory(prefix="chakra-compare-") as folder:
        write_workload(Path(folder) / "one", {npu: [node] for npu in range(network.num_npus)})
        custom_ns, built_in_ns = (
            simulate_workload(Path(folder) / "one", each, network).finish_ns
            for each in (system({}, {name: Path(prefix)}), system({name: (built_in,)}, {}))
        )
    reasons = []
    if custom_ns != built_in_ns:
        if endpoint_delay_ns:
            reasons.append(
                f"the built-in algorithm crosses the memory bus ({endpoint_delay_ns:g} ns) after every receive, "
                "a custom one never"
            )
        if comm_type in (ALL_REDUCE, REDUCE_SCATTER):
            reasons.append("a custom algorithm reduces in COMP nodes of whole µs (1 ns under 1 µs), the built-in in ns")
        if built_in == DOUBLE_BINARY_TREE:
            reasons.append(
                "ASTRA-sim's tree sends each chunk whole over one of its two trees; this one splits the data over both"
            )
    return BuiltInComparison(custom_ns, built_in_ns, reasons)
