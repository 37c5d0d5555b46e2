"""chakra.pytorch.collect on a real 2-rank gloo job: the traces exist, load and join by id."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chakra.pytorch.host import load_host_trace
from chakra.pytorch.kineto import classify, load_kineto_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "collect_gloo.py"
RANKS = 2
#: The job can take a while on a loaded 2-core machine; far more than it needs (about 5 s).
JOB_TIMEOUT_S = 300

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("traces")
    subprocess.run(
        [sys.executable, str(EXAMPLE), str(out), "--ranks", str(RANKS), "--steps", "3", "--port", str(_free_port())],
        check=True,
        capture_output=True,
        timeout=JOB_TIMEOUT_S,
    )
    return out


def test_every_rank_gets_a_host_and_a_device_trace(traces: Path):
    assert sorted(p.name for p in traces.iterdir()) == [
        f"{kind}.{rank}.json" for kind in ("device", "host") for rank in range(RANKS)
    ]


@pytest.mark.parametrize("rank", range(RANKS))
def test_host_trace_holds_every_collective_and_the_process_groups(traces: Path, rank: int):
    host = load_host_trace(traces / f"host.{rank}.json")
    names = {n.name for n in host.nodes}
    assert host.notes == [] and host.schema.startswith("1.1.1")
    assert names >= EXPECTED_COMM_OPS
    assert host.process_groups()[0]["group_size"] == RANKS


@pytest.mark.parametrize("rank", range(RANKS))
def test_device_trace_is_from_the_same_session_and_joins_by_record_function_id(traces: Path, rank: int):
    host = load_host_trace(traces / f"host.{rank}.json")
    device = load_kineto_trace(traces / f"device.{rank}.json")
    host_ids = {n.rf_id for n in host.nodes if n.rf_id}
    device_ids = {e.rf_id for e in classify(device).host_ops if e.rf_id}
    assert device.rank == rank
    assert len(host_ids & device_ids) >= 0.99 * len(host_ids)
