"""``chakra simulate``: ASTRA-sim's flags and output lines, clear errors, exit 1 when the workload hangs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_one_line_error, make_node, write_et
from helpers import run_cli as run

from chakra.cli.main import EXIT_BAD_INPUT, main
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, BROADCAST, COMM_COLL_NODE, COMP_NODE
from chakra.trace import new_node
from chakra.workload_writer import write_workload

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


# --- a wrong configuration file: one line naming the file, the key and the value; exit 2 ---------
# (a missing system key: test_a_missing_system_key_names_the_file_and_key above)

RING2_TEXT = RING2.read_text()
#: The example system file's keys and values.
SYSTEM_KEYS = json.loads(SYSTEM.read_text())


def _simulate_error(
    capsys: pytest.CaptureFixture[str], workload: Path, *extra: str, system: Path = SYSTEM, network: Path = RING2
) -> str:
    """Run ``chakra simulate`` in this process; the one line it prints on stderr, having exited 2."""
    args = ["--workload", str(workload), "--system", str(system), "--network", str(network), *extra]
    with pytest.raises(SystemExit) as exited:  # any other exception (a traceback) fails the test
        main(["simulate", *args])
    assert exited.value.code == EXIT_BAD_INPUT
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"local-mem-bw": "fast"}, "local-mem-bw = 'fast' is not a finite number"),
        ({"scheduling-policy": "RANDOM"}, "scheduling-policy = 'RANDOM' is not one of LIFO"),
        ({"preferred-dataset-splits": 0}, "preferred-dataset-splits = 0 must be > 0"),
        ({"replay-only": 2}, "replay-only = 2 is not 0 or 1"),
    ],
    ids=["wrong-type", "unknown-value", "out-of-range", "flag-out-of-range"],
)
def test_a_wrong_system_value_is_one_line_naming_file_key_and_value(tmp_path, capsys, change, fragment):
    system = tmp_path / "sys.json"
    system.write_text(json.dumps({**SYSTEM_KEYS, **change}))

    line = _simulate_error(capsys, _workload(tmp_path), system=system)

    assert str(system) in line and fragment in line, line


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (RING2_TEXT.replace("50.0", "fast"), "bandwidth[0] (dimension 0) = 'fast' is not a finite number"),
        (RING2_TEXT.replace("[ Ring ]", "[ Torus ]"), "topology[0] (dimension 0) = 'Torus' is not one of Ring"),
        (RING2_TEXT.replace("latency:", "latencies:"), "network configuration has no 'latency'"),
        (RING2_TEXT.replace("500.0", "-1"), "latency[0] (dimension 0) = -1 must be >= 0"),
    ],
    ids=["wrong-type", "unknown-value", "missing-key", "out-of-range"],
)
def test_a_wrong_network_value_is_one_line_naming_file_key_and_value(tmp_path, capsys, text, fragment):
    network = tmp_path / "net.yml"
    network.write_text(text)

    line = _simulate_error(capsys, _workload(tmp_path), network=network)

    assert str(network) in line and fragment in line, line


@pytest.mark.parametrize(
    ("memory", "fragment"),
    [
        ({"memory-type": "MEMORY_POOL", "remote-mem-bw": "x"}, "remote-mem-bw = 'x' is not a finite number"),
        ({"memory-type": "CXL"}, "memory-type = 'CXL' is not one of NO_MEMORY_EXPANSION"),
        ({"remote-mem-bw": 50}, "remote memory configuration has no 'memory-type'"),
        ({"memory-type": "MEMORY_POOL", "remote-mem-latency": -5}, "remote-mem-latency = -5 must be >= 0"),
    ],
    ids=["wrong-type", "unknown-value", "missing-key", "out-of-range"],
)
def test_a_wrong_remote_memory_value_is_one_line_naming_file_key_and_value(tmp_path, capsys, memory, fragment):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(memory))

    line = _simulate_error(capsys, _workload(tmp_path), "--remote-memory", str(path))

    assert str(path) in line and fragment in line, line


@pytest.mark.parametrize(
    ("groups", "fragment"),
    [
        ({"1": "0,1"}, "group 1: ranks = '0,1' must be a list of integers"),
        ({"one": [0, 1]}, "group id 'one' is not a decimal integer"),
        ({"1": [0, 5]}, "communicator group 1 lists ranks [5], outside the network's 2 NPUs"),
    ],
    ids=["wrong-type", "unknown-value", "out-of-range"],
)
def test_a_wrong_comm_groups_file_is_one_line_naming_the_file_and_group(tmp_path, capsys, groups, fragment):
    path = tmp_path / "groups.json"
    path.write_text(json.dumps(groups))

    line = _simulate_error(capsys, _workload(tmp_path), "--comm-groups", str(path))

    assert str(path) in line and fragment in line, line


def test_a_group_the_comm_groups_file_lacks_is_one_line_naming_the_node_the_group_and_the_file(tmp_path, capsys):
    grouped = make_node(1, type=COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1024, pg_name="1")
    for rank in (0, 1):
        write_et(tmp_path / f"job.{rank}.et", [grouped])
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"2": [0, 1]}))

    line = _simulate_error(capsys, tmp_path / "job", "--comm-groups", str(groups))

    assert "rank 0 node 1" in line and f"communicator group 1, which {groups} does not define" in line, line


def test_astra_compat_replays_a_broadcast_for_its_duration(tmp_path: Path):
    nodes = {r: [new_node(1, "bc", COMM_COLL_NODE, duration_us=7, is_cpu_op=False, comm_type=BROADCAST,
                          comm_size=1 << 20)] for r in range(2)}  # fmt: skip
    write_workload(tmp_path / "w", nodes)
    result = run(
        "simulate", "--workload", str(tmp_path / "w"), "--system", str(EXAMPLES / "system.json"),
        "--network", str(EXAMPLES / "ring2.yml"), "--astra-compat",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sys[0] finished, 7000 cycles" in result.stdout
