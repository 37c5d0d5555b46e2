"""chakra.viz.timeline: Chrome/Perfetto traces of a run, measured (the ET's own start times) or simulated.

Both put one process per rank and one thread per track, with ``ts``/``dur`` in µs as Chrome reads them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers import make_node, run_cli, write_et

from chakra.errors import ChakraInputError
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE
from chakra.sim.collectives import p2p_time_ns
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload
from chakra.table import load_table
from chakra.viz.timeline import trace_events, write_simulation_timeline, write_trace_timeline
from chakra.workload import open_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, RING2 = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"
NS_PER_US = 1000
MESSAGE_BYTES = 1 << 20
#: The smallest recorded start of the hand-built workload (rank 1's first node), in µs since the epoch.
T0_US = 1_700_000_000_000_000


def _complete(events: list[dict], rank: int) -> dict[str, dict]:
    return {e["name"]: e for e in events if e["ph"] == "X" and e["pid"] == rank}


def _metadata(events: list[dict], kind: str, rank: int) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in events if e["name"] == kind and e["pid"] == rank}


# ---------------------------------------------------------------------------------------------
# Measured: the ET's own start times


def _recorded_workload(folder: Path) -> Path:
    """Rank 0: a host op on thread 1 (+5 µs, 3 µs), a kernel on stream 7 (+10 µs, 10 µs), an all-reduce of
    1 KiB on stream 8 (+20 µs, 2,500 ns) and a node that records no start. Rank 1: a kernel on stream 7 at
    T0 (12 µs) and a node without start. T0 is rank 1's first start, the earliest of both ranks."""
    write_et(
        folder / "job.0.et",
        [
            make_node(1, "kernel", COMP_NODE, start_time_micros=T0_US + 10, duration_micros=10, stream=7),
            make_node(
                2, "all_reduce", COMM_COLL_NODE, [1], start_time_micros=T0_US + 20, duration_ns=2500, stream=8,
                comm_type=ALL_REDUCE, comm_size=1024, is_cpu_op=False,
            ),
            make_node(3, "host_op", COMP_NODE, start_time_micros=T0_US + 5, duration_micros=3, is_cpu_op=True, tid=1),
            make_node(4, "never_ran", COMP_NODE, [2], duration_micros=4),
        ],
    )  # fmt: skip
    write_et(
        folder / "job.1.et",
        [
            make_node(1, "kernel", COMP_NODE, start_time_micros=T0_US, duration_micros=12, stream=7),
            make_node(2, "never_ran", COMP_NODE, [1]),
        ],
    )
    return folder / "job"


@pytest.fixture
def recorded(tmp_path: Path) -> list[dict]:
    return trace_events(open_workload(_recorded_workload(tmp_path)))


def test_times_are_microseconds_since_the_earliest_start_of_any_rank(recorded: list[dict]):
    # rank 1 starts at T0, so rank 0's kernel (T0 + 10 µs, 10 µs) is at ts 10, dur 10; 2,500 ns -> 2.5 µs
    rank0, rank1 = _complete(recorded, 0), _complete(recorded, 1)
    assert (rank1["kernel"]["ts"], rank1["kernel"]["dur"]) == (0, 12)
    assert (rank0["kernel"]["ts"], rank0["kernel"]["dur"]) == (10, 10)
    assert (rank0["host_op"]["ts"], rank0["host_op"]["dur"]) == (5, 3)
    assert (rank0["all_reduce"]["ts"], rank0["all_reduce"]["dur"]) == (20, 2.5)


def test_one_process_per_rank_and_one_thread_per_track(recorded: list[dict]):
    # tracks in order of first appearance in the file: stream 7, stream 8, thread 1
    assert _metadata(recorded, "process_name", 0) == {0: "rank 0"}
    assert _metadata(recorded, "process_name", 1) == {0: "rank 1"}
    assert _metadata(recorded, "thread_name", 0) == {0: "stream 7", 1: "stream 8", 2: "thread 1"}
    assert _metadata(recorded, "thread_name", 1) == {0: "stream 7"}
    rank0 = _complete(recorded, 0)
    assert {name: (e["pid"], e["tid"]) for name, e in rank0.items()} == {
        "kernel": (0, 0), "all_reduce": (0, 1), "host_op": (0, 2),
    }  # fmt: skip


def test_node_events_are_ordered_by_start_within_a_rank(recorded: list[dict]):
    names = [e["name"] for e in recorded if e["ph"] == "X" and e["pid"] == 0]
    assert names == ["host_op", "kernel", "all_reduce"]


def test_events_carry_the_node_id_category_and_collective(recorded: list[dict]):
    rank0 = _complete(recorded, 0)
    assert rank0["kernel"]["args"] == {"node_id": 1, "category": "compute"}
    assert rank0["all_reduce"]["args"] == {
        "node_id": 2, "category": "communication", "comm_type": "ALL_REDUCE", "comm_size": 1024,
    }  # fmt: skip


def test_nodes_without_a_start_are_counted_and_logged_not_drawn(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, logger="chakra.viz.timeline"):
        counts = write_trace_timeline(open_workload(_recorded_workload(tmp_path)), tmp_path / "t.json")
    assert (counts.timed, counts.untimed) == ({0: 3, 1: 1}, {0: 1, 1: 1})
    assert counts.to_dict()["untimed_total"] == 2
    assert "2 node(s) record no start time" in caplog.text
    document = json.loads((tmp_path / "t.json").read_text())
    assert "never_ran" not in {e["name"] for e in document["traceEvents"]}


def test_the_written_file_holds_the_same_events_for_an_independent_json_reader(tmp_path: Path):
    workload = open_workload(_recorded_workload(tmp_path))
    write_trace_timeline(workload, tmp_path / "t.json")
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["displayTimeUnit"] == "ns"
    assert document["traceEvents"] == trace_events(workload)


def test_a_file_written_in_several_chunks_is_one_valid_json_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("chakra.viz.timeline.WRITE_CHUNK_EVENTS", 1)
    workload = open_workload(_recorded_workload(tmp_path))
    write_trace_timeline(workload, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"] == trace_events(workload)


def test_one_table_is_one_process_named_after_its_rank(tmp_path: Path):
    _recorded_workload(tmp_path)
    events = trace_events(load_table(tmp_path / "job.1.et"))
    assert _metadata(events, "process_name", 1) == {0: "rank 1"}
    assert _complete(events, 1)["kernel"]["ts"] == 0


def test_a_workload_without_start_times_is_refused_with_a_hint_to_simulate(tmp_path: Path):
    write_et(tmp_path / "job.0.et", [make_node(1, duration_micros=5)])
    with pytest.raises(ChakraInputError, match=r"no node .* records start_time_micros.*chakra simulate --timeline"):
        write_trace_timeline(open_workload(tmp_path / "job"), tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_the_upstream_trace_records_no_start_times_so_it_is_refused(upstream_et_gz: Path):
    with pytest.raises(ChakraInputError, match="chakra simulate --timeline"):
        trace_events(load_table(upstream_et_gz))


@pytest.fixture(scope="module")
def gloo_workload(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("viz_timeline") / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    return prefix


def test_a_live_gloo_recording_draws_every_timed_node(gloo_workload: Path, tmp_path: Path):
    workload = open_workload(gloo_workload)
    counts = write_trace_timeline(workload, tmp_path / "gloo.json")
    events = json.loads((tmp_path / "gloo.json").read_text())["traceEvents"]
    first_us = min(int(t.start_us[t.start_us > 0].min()) for t in workload.tables.values())
    for rank, table in workload.tables.items():
        timed = table.start_us > 0
        drawn = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        assert counts.timed[rank] == len(drawn) == int(timed.sum()) > 0
        assert sorted(e["args"]["node_id"] for e in drawn) == sorted(table.ids[timed].tolist())
        assert min(e["ts"] for e in drawn) == int(table.start_us[timed].min()) - first_us
        assert sum(e["dur"] for e in drawn) == pytest.approx(table.dur_ns[timed].sum() / NS_PER_US)
    assert any(e["args"].get("comm_type") == "ALL_REDUCE" for e in events if e["ph"] == "X")


# ---------------------------------------------------------------------------------------------
# Simulated: a SimResult with intervals


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
def simulated(tmp_path: Path) -> dict:
    """The written simulation timeline of :func:`_two_steps_and_a_message`, loaded back with json."""
    prefix = _two_steps_and_a_message(tmp_path)
    result = simulate_workload(prefix, load_system(SYSTEM), load_network(RING2), keep_intervals=True)
    write_simulation_timeline(result, tmp_path / "job.trace.json")
    return json.loads((tmp_path / "job.trace.json").read_text())


def test_simulated_times_are_microseconds_as_chrome_reads_them(simulated: dict):
    # a 10 µs node then a 5 µs one: ts 0 and 10, dur 10 and 5 (not ns, not ms)
    events = _complete(simulated["traceEvents"], rank=0)
    assert (events["fwd"]["ts"], events["fwd"]["dur"]) == (0, 10)
    assert (events["bwd"]["ts"], events["bwd"]["dur"]) == (10, 5)
    assert simulated["displayTimeUnit"] == "ns"


def test_simulation_has_one_process_per_rank_and_one_track_per_slot(simulated: dict):
    events = simulated["traceEvents"]
    assert _metadata(events, "process_name", 0) == {0: "rank 0"}
    assert _metadata(events, "thread_name", 0) == {0: "CPU", 1: "GPU compute", 2: "GPU comm"}
    assert _metadata(events, "thread_name", 1) == {0: "CPU", 1: "GPU compute", 3: "none"}  # receives: no slot
    rank0 = _complete(events, rank=0)
    assert {name: e["tid"] for name, e in rank0.items()} == {"fwd": 1, "bwd": 1, "host_op": 0, "send": 2}


def test_simulated_events_carry_the_node_name_and_id(simulated: dict):
    events = _complete(simulated["traceEvents"], rank=1)
    assert set(events) == {"fwd", "bwd", "host_op", "recv"}
    assert events["recv"]["args"] == {"node_id": 30}


def test_a_simulated_message_lasts_its_network_time_in_fractional_microseconds(simulated: dict):
    message_ns = p2p_time_ns(0, 1, MESSAGE_BYTES, load_network(RING2))
    send, recv = _complete(simulated["traceEvents"], 0)["send"], _complete(simulated["traceEvents"], 1)["recv"]
    assert send["ts"] == recv["ts"] == 15
    assert send["dur"] == recv["dur"] == pytest.approx(message_ns / NS_PER_US)
    assert message_ns % NS_PER_US != 0  # the fraction is kept, not rounded to whole µs


def test_a_simulation_without_intervals_is_refused_with_a_hint(tmp_path: Path):
    prefix = _two_steps_and_a_message(tmp_path)
    result = simulate_workload(prefix, load_system(SYSTEM), load_network(RING2))
    with pytest.raises(ChakraInputError, match="keep_intervals=True"):
        write_simulation_timeline(result, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_simulate_timeline_option_writes_the_trace(tmp_path: Path):
    prefix = _two_steps_and_a_message(tmp_path)
    out = tmp_path / "job.trace.json"
    result = run_cli(
        "simulate", "--workload", str(prefix), "--system", str(SYSTEM), "--network", str(RING2), "--timeline", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert _complete(json.loads(out.read_text())["traceEvents"], 0)["bwd"]["ts"] == 10
