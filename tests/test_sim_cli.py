"""``chakra simulate``: ASTRA-sim's flags and output lines, clear errors, exit 1 when the workload hangs."""

from __future__ import annotations

from pathlib import Path

from conftest import make_node, write_et
from test_cli import assert_one_line_error, run

from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, RING2 = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"


def _workload(folder: Path, *, second_rank_reaches_the_collective: bool = True) -> Path:
    coll = make_node(2, type=COMM_COLL_NODE, data_deps=[1], is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1 << 20)
    compute = make_node(1, type=COMP_NODE, duration_micros=10, is_cpu_op=False)
    write_et(folder / "job.0.et", [compute, coll])
    write_et(folder / "job.1.et", [compute, coll] if second_rank_reaches_the_collective else [compute])
    return folder / "job"


def test_astra_sim_spellings_and_lines(tmp_path: Path):
    prefix = _workload(tmp_path)
    result = run(
        "simulate",
        f"--workload-configuration={prefix}",
        f"--system-configuration={SYSTEM}",
        f"--network-configuration={RING2}",
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("sys[")]
    assert len(lines) == 2 and all("cycles, exposed communication" in line for line in lines)


def test_twice_the_bandwidth_shortens_a_communication_bound_run(tmp_path: Path):
    prefix = _workload(tmp_path)
    base = run("simulate", "--workload", str(prefix), "--system", str(SYSTEM), "--network", str(RING2), "--json")
    fast = run(
        "simulate", "--workload", str(prefix), "--system", str(SYSTEM), "--network", str(RING2),
        "--bandwidth-scale", "2", "--json",
    )  # fmt: skip
    import json

    assert json.loads(fast.stdout)["finish_ns"] < json.loads(base.stdout)["finish_ns"]


def test_a_missing_system_key_names_the_file_and_key(tmp_path: Path):
    prefix = _workload(tmp_path)
    system = tmp_path / "sys.json"
    system.write_text('{"scheduling-policy": "LIFO", "collective-optimization": "baseline"}')
    result = run("simulate", "--workload", str(prefix), "--system", str(system), "--network", str(RING2))
    assert_one_line_error(result, "sys.json", "preferred-dataset-splits")


def test_a_hanging_workload_exits_1_naming_who_waits(tmp_path: Path):
    prefix = _workload(tmp_path, second_rank_reaches_the_collective=False)
    result = run("simulate", "--workload", str(prefix), "--system", str(SYSTEM), "--network", str(RING2))
    assert result.returncode == 1
    assert "rank 0 node 2" in result.stderr and "ranks [1] never issue it" in result.stderr


def test_a_workload_written_with_upstream_scripts_simulates(tmp_path: Path):
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "upstream_style_allreduce.py"
    subprocess.run([sys.executable, str(example), str(tmp_path), "--npus", "8"], check=True, capture_output=True)
    network = tmp_path / "switch8.yml"
    network.write_text("topology: [ Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 400.0 ]\nlatency: [ 936.25 ]\n")
    result = run(
        "simulate", "--workload", str(tmp_path / "all_reduce"), "--system", str(SYSTEM), "--network", str(network)
    )
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("sys[") for line in result.stdout.splitlines()) == 8
