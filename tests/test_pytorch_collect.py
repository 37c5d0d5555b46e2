"""chakra.pytorch.collect on a real 2-rank gloo job: the traces exist, load and join by id."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import GLOO_RANKS

from chakra.pytorch.host import load_host_trace
from chakra.pytorch.kineto import classify, load_kineto_trace

#: Host ops the example's collectives and p2p calls leave in every rank's trace.
EXPECTED_COMM_OPS = {
    "c10d::allreduce_",
    "c10d::allgather_",
    "c10d::_reduce_scatter_base_",
    "c10d::broadcast_",
    "c10d::alltoall_base_",
    "c10d::barrier",
    "c10d::send",
    "c10d::recv_",
}


def test_every_rank_gets_a_host_and_a_device_trace(gloo_traces: Path):
    assert sorted(p.name for p in gloo_traces.iterdir()) == [
        f"{kind}.{rank}.json" for kind in ("device", "host") for rank in range(GLOO_RANKS)
    ]


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_host_trace_holds_every_collective_and_the_process_groups(gloo_traces: Path, rank: int):
    host = load_host_trace(gloo_traces / f"host.{rank}.json")
    names = {n.name for n in host.nodes}
    assert host.notes == [] and host.schema.startswith("1.1.1")
    assert names >= EXPECTED_COMM_OPS
    assert host.process_groups()[0]["group_size"] == GLOO_RANKS


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_device_trace_is_from_the_same_session_and_joins_by_record_function_id(gloo_traces: Path, rank: int):
    host = load_host_trace(gloo_traces / f"host.{rank}.json")
    device = load_kineto_trace(gloo_traces / f"device.{rank}.json")
    host_ids = {n.rf_id for n in host.nodes if n.rf_id}
    device_ids = {e.rf_id for e in classify(device).host_ops if e.rf_id}
    assert device.rank == rank
    assert len(host_ids & device_ids) >= 0.99 * len(host_ids)
