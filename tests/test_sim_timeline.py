"""chakra.sim.timeline: a simulated run as a Chrome/Perfetto trace (rank = process, slot = track, µs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_node, write_et
from test_cli import run as run_cli

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE
from chakra.sim.collectives import p2p_time_ns
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload
from chakra.sim.timeline import write_timeline

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, RING2 = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"
NS_PER_US = 1000
MESSAGE_BYTES = 1 << 20


def _gpu(node_id: int, name: str, dur_us: int, *deps: int):
    return make_node(node_id, name, COMP_NODE, data_deps=list(deps), duration_micros=dur_us, is_cpu_op=False)


def _two_steps_and_a_message(folder: Path) -> Path:
    """Rank 0: fwd (10 µs) -> bwd (5 µs) on the GPU, a host op (3 µs) on the CPU, then sends to rank 1.
    Rank 1: the same compute, and a receive of the message (which takes no slot)."""
    p2p = {"is_cpu_op": False, "comm_src": 0, "comm_dst": 1, "comm_tag": 1, "comm_size": MESSAGE_BYTES}
    compute = [_gpu(10, "fwd", 10), _gpu(20, "bwd", 5, 10), make_node(5, "host_op", duration_micros=3, is_cpu_op=True)]
    write_et(folder / "job.0.et", [*compute, make_node(30, "send", COMM_SEND_NODE, [20], **p2p)])
    write_et(folder / "job.1.et", [*compute, make_node(30, "recv", COMM_RECV_NODE, [20], **p2p)])
    return folder / "job"


@pytest.fixture
def timeline(tmp_path: Path) -> dict:
    """The written timeline of :func:`_two_steps_and_a_message`, loaded back with json."""
    prefix = _two_steps_and_a_message(tmp_path)
    result = simulate_workload(prefix, load_system(SYSTEM), load_network(RING2), keep_intervals=True)
    write_timeline(result, tmp_path / "job.trace.json")
    return json.loads((tmp_path / "job.trace.json").read_text())


def _complete(document: dict, rank: int) -> dict[str, dict]:
    return {e["name"]: e for e in document["traceEvents"] if e["ph"] == "X" and e["pid"] == rank}


def _metadata(document: dict, kind: str, rank: int) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in document["traceEvents"] if e["name"] == kind and e["pid"] == rank}


def test_times_are_microseconds_as_chrome_reads_them(timeline: dict):
    # a 10 µs node then a 5 µs one: ts 0 and 10, dur 10 and 5 (not ns, not ms)
    events = _complete(timeline, rank=0)
    assert (events["fwd"]["ts"], events["fwd"]["dur"]) == (0, 10)
    assert (events["bwd"]["ts"], events["bwd"]["dur"]) == (10, 5)
    assert timeline["displayTimeUnit"] == "ns"


def test_one_process_per_rank_and_one_track_per_slot(timeline: dict):
    assert _metadata(timeline, "process_name", 0) == {0: "rank 0"}
    assert _metadata(timeline, "thread_name", 0) == {0: "CPU", 1: "GPU compute", 2: "GPU comm"}
    assert _metadata(timeline, "thread_name", 1) == {0: "CPU", 1: "GPU compute", 3: "none"}  # receives: no slot
    events = _complete(timeline, rank=0)
    assert {name: e["tid"] for name, e in events.items()} == {"fwd": 1, "bwd": 1, "host_op": 0, "send": 2}


def test_events_carry_the_node_name_and_id(timeline: dict):
    events = _complete(timeline, rank=1)
    assert set(events) == {"fwd", "bwd", "host_op", "recv"}
    assert events["recv"]["args"] == {"node_id": 30}


def test_a_message_lasts_its_network_time_in_fractional_microseconds(timeline: dict):
    message_ns = p2p_time_ns(0, 1, MESSAGE_BYTES, load_network(RING2))
    send, recv = _complete(timeline, 0)["send"], _complete(timeline, 1)["recv"]
    assert send["ts"] == recv["ts"] == 15
    assert send["dur"] == recv["dur"] == pytest.approx(message_ns / NS_PER_US)
    assert message_ns % NS_PER_US != 0  # the fraction is kept, not rounded to whole µs


def test_a_result_without_intervals_is_refused_with_a_hint(tmp_path: Path):
    prefix = _two_steps_and_a_message(tmp_path)
    result = simulate_workload(prefix, load_system(SYSTEM), load_network(RING2))
    with pytest.raises(ChakraInputError, match="keep_intervals=True"):
        write_timeline(result, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_simulate_timeline_option_writes_the_trace(tmp_path: Path):
    prefix = _two_steps_and_a_message(tmp_path)
    out = tmp_path / "job.trace.json"
    result = run_cli(
        "simulate", "--workload", str(prefix), "--system", str(SYSTEM), "--network", str(RING2), "--timeline", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert _complete(json.loads(out.read_text()), 0)["bwd"]["ts"] == 10
