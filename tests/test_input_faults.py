"""Broken inputs a user hands the commands: exit code 2, one line naming the file (and where in it),
never a traceback. Each case here once escaped as a Python exception or ran without end."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import make_node, require_shared, run_cli, write_et

from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE

REPO = Path(__file__).resolve().parents[1]
SYSTEM, NETWORK = REPO / "examples" / "astra" / "system.json", REPO / "examples" / "astra" / "ring2.yml"
HOST_TRACE = "param/resnet_1gpu_et.json.gz"
KINETO_TRACE = "hta/benchmark_simple_add_trace.json.gz"
HOST_OF_KINETO = "hta/benchmark_simple_add_et.json.gz"
#: Host nodes kept in the broken copies (the first few are enough to reach the broken one).
KEPT_NODES = 50


def _shared_json(relpath: str) -> dict:
    return json.loads(gzip.decompress(require_shared(relpath).read_bytes()))


def _refused(done, path: Path, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr
    for word in words:
        assert word in done.stderr


def test_a_host_node_whose_attrs_are_a_string_is_refused_naming_the_node(tmp_path: Path):
    trace = _shared_json(HOST_TRACE)
    trace["nodes"] = [dict(trace["nodes"][1], attrs="oops"), *trace["nodes"][2:KEPT_NODES]]
    host = tmp_path / "host.json"
    host.write_text(json.dumps(trace))
    _refused(run_cli("convert", "pytorch", "--host", str(host), "-o", str(tmp_path / "out" / "job")), host, "node #0")
    assert not (tmp_path / "out").exists()


def test_a_host_trace_without_nodes_is_refused(tmp_path: Path):
    trace = _shared_json(HOST_TRACE)
    trace["nodes"] = []
    host = tmp_path / "host.json"
    host.write_text(json.dumps(trace))
    _refused(run_cli("convert", "pytorch", "--host", str(host), "-o", str(tmp_path / "job")), host, "no nodes")


def test_a_kineto_event_whose_tid_is_an_object_is_refused_naming_the_event(tmp_path: Path):
    trace = _shared_json(KINETO_TRACE)
    first = next(i for i, event in enumerate(trace["traceEvents"]) if "tid" in event)
    trace["traceEvents"][first]["tid"] = {"x": 1}
    device = tmp_path / "device.json"
    device.write_text(json.dumps(trace))
    host = require_shared(HOST_OF_KINETO)
    done = run_cli("convert", "pytorch", "--host", str(host), "--device", str(device), "-o", str(tmp_path / "job"))
    _refused(done, device, f"traceEvents[{first}].tid")


def test_a_gzip_of_zeros_is_refused_at_once(tmp_path: Path):
    zeros = tmp_path / "zeros.et.gz"
    zeros.write_bytes(gzip.compress(bytes(16 << 20)))
    _refused(run_cli("info", str(zeros)), zeros, "zero-length")


def test_validate_reports_a_gzip_of_zeros_as_an_error_finding(tmp_path: Path):
    zeros = tmp_path / "zeros.et.gz"
    zeros.write_bytes(gzip.compress(bytes(16 << 20)))
    done = run_cli("validate", str(zeros))
    assert done.returncode == 1 and "Traceback" not in done.stderr  # exit 1: the file has errors
    assert "zero-length" in done.stdout


@pytest.mark.parametrize("content", ["{}", '{"traceEvents": []}'], ids=["empty object", "no events"])
def test_a_kineto_trace_without_events_is_refused(content: str, tmp_path: Path):
    device = tmp_path / "device.json"
    device.write_text(content)
    host = require_shared(HOST_OF_KINETO)
    done = run_cli("convert", "pytorch", "--host", str(host), "--device", str(device), "-o", str(tmp_path / "job"))
    _refused(done, device, "no events")


def test_a_simulation_report_of_an_unknown_format_is_refused_before_the_run(tmp_path: Path):
    assert run_cli("generate", "micro", "ALL_REDUCE", "-o", str(tmp_path), "--ranks", "2").returncode == 0
    report = tmp_path / "report.xml"
    done = run_cli(
        "simulate", "--workload", str(tmp_path / "ALL_REDUCE"), "--system", str(SYSTEM), "--network", str(NETWORK),
        "--report", str(report),
    )  # fmt: skip
    _refused(done, report, ".json", ".csv")
    assert not report.exists() and "finished" not in done.stdout


def test_a_collective_the_model_refuses_names_the_rank_file_and_node(tmp_path: Path):
    for rank in range(2):
        node = make_node(5, "odd", COMM_COLL_NODE, is_cpu_op=False, comm_type=12345, comm_size=100)
        write_et(tmp_path / f"w.{rank}.et", [node])
    done = run_cli("simulate", "--workload", str(tmp_path / "w"), "--system", str(SYSTEM), "--network", str(NETWORK))
    _refused(done, tmp_path / "w.1.et", "node 5 (odd)", "unknown collective type 12345")


def test_a_missing_local_memory_bandwidth_runs_with_free_reductions_and_says_so(tmp_path: Path):
    # as ASTRA-sim's binaries run it (their size / 0 overflows to no time: tests/test_sim_astra_examples.py)
    system = tmp_path / "system.json"
    system.write_text(json.dumps({k: v for k, v in json.loads(SYSTEM.read_text()).items() if k != "local-mem-bw"}))
    for rank in range(2):
        node = make_node(5, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1 << 20)
        write_et(tmp_path / f"w.{rank}.et", [node])
    done = run_cli("simulate", "--workload", str(tmp_path / "w"), "--system", str(system), "--network", str(NETWORK))
    assert done.returncode == 0 and "reductions take no time" in " ".join((done.stdout + done.stderr).split())


TEXT_WORKLOAD = REPO / "tests" / "data" / "text" / "resnet50_data_excerpt.txt"


def test_a_mistyped_npu_count_is_refused_with_the_size_it_would_write(tmp_path: Path):
    done = run_cli(
        "convert", "text", str(TEXT_WORKLOAD), "-o", str(tmp_path / "out" / "job"), "--num-npus", "100000000"
    )
    _refused(done, TEXT_WORKLOAD, "100,000,000 files", "GiB", "--max-size")
    assert not (tmp_path / "out").exists()


def test_max_size_sets_how_much_a_text_conversion_may_write(tmp_path: Path):
    small = ("convert", "text", str(TEXT_WORKLOAD), "-o", str(tmp_path / "job"), "--num-npus", "1000")
    _refused(run_cli(*small, "--max-size", "50KB"), TEXT_WORKLOAD, "1,000 files")
    assert run_cli(*small, "--max-size", "2MiB").returncode == 0
    assert (tmp_path / "job.999.et").exists()


def test_a_spec_whose_global_batch_would_fill_the_disk_is_refused_before_writing(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {preset: llama3-8b, layers: 2}\nparallel: {tp: 2}\nglobal_batch: 99999999999999999999\n")
    done = run_cli("generate", "llm", "--spec", str(spec), "-o", str(tmp_path / "out" / "w"))
    _refused(done, spec, "micro-batches would write about", "--max-size")
    assert not (tmp_path / "out").exists()


def test_max_size_sets_how_much_an_llm_workload_may_write(tmp_path: Path):
    small = ("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "-o", str(tmp_path / "w"))
    done = run_cli(*small, "--max-size", "10KB")
    assert done.returncode == 2 and "allow it with --max-size" in done.stderr, done.stderr
    assert run_cli(*small).returncode == 0


def test_a_system_file_splitting_collectives_into_absurdly_many_chunks_is_refused(tmp_path: Path):
    system = tmp_path / "system.json"
    system.write_text(json.dumps({**json.loads(SYSTEM.read_text()), "preferred-dataset-splits": 2**64}))
    prefix = tmp_path / "w"
    for rank in (0, 1):
        write_et(tmp_path / f"w.{rank}.et", [make_node(1, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=64)])
    done = run_cli("simulate", "--workload", str(prefix), "--system", str(system), "--network", str(NETWORK))
    _refused(done, system, "preferred-dataset-splits", "<= 65536")


def test_a_config_text_with_a_lone_surrogate_escape_is_refused_naming_the_file(tmp_path: Path):
    system = tmp_path / "system.json"
    system.write_text(json.dumps({**json.loads(SYSTEM.read_text()), "peak-perf": "\udcff"}))
    for rank in (0, 1):
        write_et(tmp_path / f"w.{rank}.et", [make_node(1, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=64)])
    done = run_cli("simulate", "--workload", str(tmp_path / "w"), "--system", str(system), "--network", str(NETWORK))
    _refused(done, system, "not Unicode")


@pytest.mark.parametrize(("change", "words"), [({"ts": -1e13}, "has ts -1"), ({"ts": None}, "has no ts")])
def test_a_kineto_event_with_an_impossible_or_missing_start_is_refused(change: dict, words: str, tmp_path: Path):
    from helpers import host_node, kineto_op, write_trace_pair

    root = {"id": 1, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 0, "attrs": []}
    op = {**kineto_op("aten::mm", 10, 100.0, 20.0), **change}
    if op["ts"] is None:
        del op["ts"]
    host, device = write_trace_pair(tmp_path, [root, host_node(2, "aten::mm", 10, tid=1)], [op])
    done = run_cli(
        "convert", "pytorch", "--host", str(host), "--device", str(device), "-o", str(tmp_path / "out" / "j")
    )
    _refused(done, device, "trace event 0 ('aten::mm')", words)


def test_a_host_node_without_a_name_is_refused_naming_the_node(tmp_path: Path):
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1, "ctrl_deps": 0, "attrs": []}]}))
    done = run_cli("convert", "pytorch", "--host", str(host), "-o", str(tmp_path / "out" / "j"))
    _refused(done, host, "missing required field `name`", "nodes[0]")


def test_a_compression_bomb_is_refused_before_it_fills_the_memory(tmp_path: Path):
    from chakra.io.framing import BOMB_CHECK_BYTES, MAX_COMPRESSION_RATIO

    bomb = tmp_path / "host.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (2 * BOMB_CHECK_BYTES) + b"]", 9))
    assert bomb.stat().st_size * MAX_COMPRESSION_RATIO < 2 * BOMB_CHECK_BYTES  # it is one
    done = run_cli("convert", "pytorch", "--host", str(bomb), "-o", str(tmp_path / "out" / "j"))
    _refused(done, bomb, "a compression bomb", "decompress it first")


def test_the_bomb_guard_lets_real_compressed_traces_through(monkeypatch: pytest.MonkeyPatch):
    from chakra.io import framing

    monkeypatch.setattr(framing, "BOMB_CHECK_BYTES", 1 << 20)  # checked from the first MiB on
    assert run_cli("info", str(require_shared("upstream-chakra/chakra.0.et.gz"))).returncode == 0
    for relpath in ("param/resnet_2gpu_et.json.gz", "param/linear_kineto.json.gz"):
        stream, _ = framing.open_decompressed(require_shared(relpath))
        try:
            assert len(stream.read()) > 1 << 20
        finally:
            stream.close()


def _absurd_size_workload(tmp_path: Path) -> Path:
    from chakra.table import MAX_COMM_BYTES

    for rank in (0, 1):
        node = make_node(2, "c", COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=4 * MAX_COMM_BYTES, is_cpu_op=False)
        write_et(tmp_path / f"w.{rank}.et", [node])
    return tmp_path / "w"


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--workload", "{prefix}", "--system", str(SYSTEM), "--network", str(NETWORK)],
        ["analyze", "breakdown", "{prefix}", "--workers", "1"],
        ["report", "{prefix}", "-o", "{prefix}.html", "--workers", "1"],
    ],
)
def test_an_absurd_comm_size_is_refused_by_every_consumer(command: list[str], tmp_path: Path):
    prefix = _absurd_size_workload(tmp_path)
    done = run_cli(*(part.format(prefix=prefix) for part in command))
    _refused(done, tmp_path / "w.0.et", "node 2: comm_size of 4,503,599,627,370,496 bytes is not a plausible size")


def test_validate_lists_an_absurd_comm_size_as_an_error(tmp_path: Path):
    done = run_cli("validate", str(_absurd_size_workload(tmp_path)))
    assert done.returncode == 1 and "not a plausible size" in done.stdout
