"""Every consumer reads a node the same way, and every producer writes a workload the same way.

Issue 12 found the copies disagreeing on odd but legal input: a flag stored as text, a ``pg_name``
with a leading space, a shrinking rank count leaving stale files. Each test here puts one such
input through one consumer (or producer) and checks the answer the node table gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GLOO_RANKS, make_node, run_cli, write_et

from chakra import io
from chakra.analyze.breakdown import breakdown
from chakra.analyze.ranks import compare_ranks
from chakra.analyze.summary import summarize_file
from chakra.schedule.rank import schedule_file
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE, Node
from chakra.table import COMPUTE, Slot, load_table
from chakra.validate import validate_file, validate_set
from chakra.viz import graph, timeline
from chakra.workload import open_workload

# -- a flag written as text: is_cpu_op = string_val "false" on a node of thread 3 -------------------


def text_flag_node(node_id: int, text: str, *, tid: int = 3, duration_micros: int = 7) -> Node:
    node = make_node(node_id, f"op{node_id}", COMP_NODE, duration_micros=duration_micros, start_time_micros=100)
    node.attr.add(name="is_cpu_op", string_val=text)
    node.attr.add(name="tid", int64_val=tid)
    return node


@pytest.fixture
def text_flag_trace(tmp_path: Path) -> Path:
    """Rank 0 of a workload: a device op whose is_cpu_op is the text "false", on thread 3."""
    return write_et(tmp_path / "w.0.et", [text_flag_node(1, "false")])


def test_the_table_reads_a_text_false_flag_as_a_device_node_on_its_thread(text_flag_trace):
    table = load_table(text_flag_trace)

    assert not table.is_cpu[0] and table.category[0] == COMPUTE
    assert table.track_names[table.track[0]] == "thread 3"
    assert table.slot[0] == Slot.GPU_COMPUTE


def test_info_counts_a_text_false_flag_as_device_time(text_flag_trace):
    summary = summarize_file(text_flag_trace)

    assert (summary.cpu_dur_us, summary.device_dur_us) == (0, 7)


def test_validate_reads_a_text_false_flag_as_false_and_says_cpp_consumers_cannot(text_flag_trace):
    findings = validate_file(text_flag_trace, target="astra-sim")

    codes = {f.code for f in findings}
    assert "attr-kind" in codes  # the C++ feeders cannot read a string flag
    assert "astra-overlap-stats" not in codes  # no CPU node: the flag reads false here too


def test_analyses_put_a_text_false_flag_on_its_thread_as_device_work(text_flag_trace):
    result = breakdown(load_table(text_flag_trace))

    assert result.busy_by_track == {"thread 3": 7000}
    assert result.compute_ns == 7000


def test_the_fidelity_replay_runs_a_text_false_flag_on_its_thread(text_flag_trace):
    assert schedule_file(text_flag_trace).resources == 1


def test_pictures_keep_a_text_false_flag_when_cpu_ops_are_collapsed(text_flag_trace):
    view = graph.select(load_table(text_flag_trace), collapse_cpu=True)

    assert view.positions.tolist() == [0]


def test_timelines_draw_a_text_false_flag_on_its_thread(text_flag_trace):
    events = timeline.trace_events(open_workload(text_flag_trace.parent / "w"))

    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert threads == {"thread 3"}


@pytest.mark.parametrize(("text", "cpu"), [("true", True), ("TRUE", True), ("1", True), ("0", False)])
def test_every_spelling_of_a_text_flag_reads_alike(tmp_path, text, cpu):
    table = load_table(write_et(tmp_path / "t.et", [text_flag_node(1, text)]))

    assert bool(table.is_cpu[0]) is cpu


# -- pg_name " 1": ASTRA-sim's stoi reads group 1 ---------------------------------------------------


def spaced_group_workload(directory: Path) -> Path:
    """Two ranks all-reducing on pg_name " 1" (rank 0) and "1" (rank 1), groups {1: [0, 1]}."""
    for rank, pg_name in enumerate((" 1", "1")):
        nodes = [
            make_node(1, "ar", COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=1 << 20, pg_name=pg_name,
                      is_cpu_op=False, duration_micros=5, start_time_micros=100 + rank),
        ]  # fmt: skip
        write_et(directory / f"w.{rank}.et", nodes)
    (directory / "w.comm_groups.json").write_text(json.dumps({"1": [0, 1]}))
    return directory / "w"


def test_the_table_reads_a_spaced_pg_name_as_its_group(tmp_path):
    prefix = spaced_group_workload(tmp_path)

    assert [int(load_table(f"{prefix}.{rank}.et").comm.group[0]) for rank in range(2)] == [1, 1]


def test_validate_accepts_a_spaced_pg_name_of_a_defined_group(tmp_path):
    prefix = spaced_group_workload(tmp_path)

    assert validate_set(open_workload(prefix, whole=True), target="astra-sim") == []


def test_rank_comparison_matches_a_spaced_pg_name_with_the_plain_one(tmp_path):
    prefix = spaced_group_workload(tmp_path)

    comparison = compare_ranks(open_workload(prefix))

    assert comparison.unmatched == 0 and [c.group for c in comparison.collectives] == ["1"]


# -- a single rank is read alone; derived schedules are computed once ------------------------------


def test_critical_path_of_one_rank_reads_only_that_rank(tmp_path):
    prefix = tmp_path / "w"
    for rank in range(4):
        write_et(f"{prefix}.{rank}.et", [make_node(1, duration_micros=rank + 1)])
    Path(f"{prefix}.0.et").write_bytes(b"\x05broken")  # a rank the command must not open

    result = run_cli("analyze", "critical-path", str(prefix), "--rank", "3", "--json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["length_ns"] == 4000


def test_a_report_replays_each_rank_once(tmp_path, monkeypatch):
    from chakra.schedule import rank as schedule_rank
    from chakra.viz.report import report_data

    prefix = tmp_path / "w"
    for rank in range(4):
        write_et(
            f"{prefix}.{rank}.et", [make_node(1, duration_micros=2), make_node(2, data_deps=[1], duration_micros=3)]
        )
    calls = []
    schedule = schedule_rank.schedule_starts
    monkeypatch.setattr(schedule_rank, "schedule_starts", lambda *args: calls.append(1) or schedule(*args))

    report_data(open_workload(prefix))

    assert len(calls) == 4


# -- every producer writes through the one writer: a shrinking workload leaves nothing behind ------


def plant_stale_workload(prefix: Path, ranks: int) -> None:
    """What a larger earlier workload of ``prefix`` left: rank files, a compressed copy, groups."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        write_et(f"{prefix}.{rank}.et", [make_node(99, "stale")])
    write_et(f"{prefix}.0.et.gz", [make_node(99, "stale")])
    Path(f"{prefix}.comm_groups.json").write_text(json.dumps({"7": list(range(ranks))}))


def assert_only_ranks(prefix: Path, ranks: int) -> None:
    workload = open_workload(prefix, whole=True)
    assert sorted(workload.ranks) == list(range(ranks))
    for rank in range(ranks):
        assert all(node.name != "stale" for node in io.read(workload.files[rank])[1])
    assert not list(prefix.parent.glob("*.staged")) and not list(prefix.parent.glob("*.tmp"))


def test_convert_pytorch_to_the_prefix_of_a_larger_job_leaves_only_its_ranks(tmp_path, gloo_traces):
    prefix = tmp_path / "out" / "job"
    plant_stale_workload(prefix, 8)

    result = run_cli(
        "convert", "pytorch", "--host", str(gloo_traces / "host.{rank}.json"),
        "--device", str(gloo_traces / "device.{rank}.json"), "-o", str(prefix), "--workers", "1",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert_only_ranks(prefix, GLOO_RANKS)


def test_convert_text_to_the_prefix_of_a_larger_workload_leaves_only_its_ranks(tmp_path):
    prefix = tmp_path / "out" / "dp"
    plant_stale_workload(prefix, 8)
    workload = tmp_path / "dp.txt"
    workload.write_text("DATA\n1\nfc -1 10 NONE 0 10 NONE 0 10 ALLREDUCE 4096 10\n")

    result = run_cli("convert", "text", str(workload), "-o", str(prefix), "--num-npus", "2")

    assert result.returncode == 0, result.stderr
    assert_only_ranks(prefix, 2)
    assert not Path(f"{prefix}.comm_groups.json").exists()


def test_generate_llm_to_the_prefix_of_a_larger_workload_leaves_only_its_ranks(tmp_path):
    prefix = tmp_path / "out" / "llama"
    plant_stale_workload(prefix, 8)

    result = run_cli("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--global-batch", "1", "-o", str(prefix))

    assert result.returncode == 0, result.stderr
    assert_only_ranks(prefix, 2)


def test_generate_micro_to_the_folder_of_a_larger_workload_leaves_only_its_ranks(tmp_path):
    plant_stale_workload(tmp_path / "out" / "ALL_REDUCE", 8)

    result = run_cli("generate", "micro", "ALL_REDUCE", "-o", str(tmp_path / "out"), "--ranks", "4")

    assert result.returncode == 0, result.stderr
    assert_only_ranks(tmp_path / "out" / "ALL_REDUCE", 4)


def test_a_workload_whose_writing_fails_leaves_the_earlier_one_as_it_was(tmp_path):
    from chakra.workload_writer import WorkloadWriter

    prefix = tmp_path / "w"
    plant_stale_workload(prefix, 3)
    before = sorted(p.name for p in tmp_path.iterdir())

    with pytest.raises(RuntimeError), WorkloadWriter(prefix) as writer:
        writer.write_nodes(0, [make_node(1, "new")])
        raise RuntimeError("a producer fails half way")

    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert io.read(f"{prefix}.0.et")[1][0].name == "stale"


# -- the simulator reads the same table -------------------------------------------------------------


def simulate(prefix: Path, num_npus: int):
    from chakra.sim.config import load_network, load_system
    from chakra.sim.run import simulate_workload

    examples = Path(__file__).resolve().parents[1] / "examples" / "astra"
    network = load_network(examples / "ring2.yml", {"npus_count": [num_npus]})
    return simulate_workload(prefix, load_system(examples / "system.json"), network)


def test_the_simulator_runs_a_text_false_flag_on_the_gpu_not_the_cpu(tmp_path):
    for rank in range(2):
        write_et(tmp_path / f"w.{rank}.et", [text_flag_node(1, "false")])

    stats = simulate(tmp_path / "w", 2).ranks[0]

    assert (stats.cpu_ns, stats.gpu_compute_ns) == (0, 7000)


def test_the_simulator_runs_a_spaced_pg_name_on_its_group(tmp_path):
    prefix = spaced_group_workload(tmp_path)

    result = simulate(prefix, 2)

    assert result.collectives["ALL_REDUCE"]["count"] == 1 and result.finish_ns > 0


def test_pictures_label_a_spaced_pg_name_with_its_group(tmp_path):
    prefix = spaced_group_workload(tmp_path)
    out = tmp_path / "g.dot"

    graph.export_graph(load_table(f"{prefix}.0.et"), out)

    assert "pg 1" in out.read_text() and "pg ' 1'" not in out.read_text()
