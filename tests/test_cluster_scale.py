"""Workload commands stay readable at any number of ranks (issue 15): past 16 ranks identical ranks
share a row, distinct ones are summarized as min / median / max with the ranks at the extremes,
``--per-rank`` lists every rank, and a named rank file is read on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli, write_allreduce_workload
from rich.console import Console
from rich.table import Table

from chakra.analyze.across import MAX_LISTED_RANKS
from chakra.workload import open_workload

#: More ranks than a table lists one by one.
MANY_RANKS = 40
#: What every workload command's default output must stay under (issue 15: a screen or two).
MAX_LINES = 60
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"


@pytest.fixture(scope="module")
def same_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 ranks whose figures are all the same."""
    return write_allreduce_workload(tmp_path_factory.mktemp("same"), "job", MANY_RANKS, skew_us=0)


@pytest.fixture(scope="module")
def distinct_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 ranks, each one's compute 1 µs longer than the previous rank's."""
    return write_allreduce_workload(tmp_path_factory.mktemp("distinct"), "job", MANY_RANKS)


def _rank_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip() and line.split()[0].isdigit()]


def test_info_on_a_workload_prints_its_totals_and_one_row_per_class_of_ranks(same_ranks: Path):
    done = run_cli("info", str(same_ranks))
    assert done.returncode == 0, done.stderr
    assert f"{3 * MANY_RANKS:,}" in done.stdout  # the workload's nodes, every rank added up
    assert "0-39" in done.stdout and "40 ranks in 1 class of identical rows" in done.stdout
    assert len(done.stdout.splitlines()) < MAX_LINES


def test_info_per_rank_adds_every_rank_summary(same_ranks: Path):
    done = run_cli("info", str(same_ranks), "--per-rank")
    assert done.returncode == 0, done.stderr
    assert all(f"job.{rank}.et" in done.stdout for rank in range(MANY_RANKS))


def test_breakdown_of_distinct_ranks_shows_the_spread_and_names_the_extreme_ranks(distinct_ranks: Path):
    done = run_cli("analyze", "breakdown", str(distinct_ranks), "--workers", "1")
    assert done.returncode == 0, done.stderr
    span = next(line for line in done.stdout.splitlines() if line.startswith(" span"))
    # compute 10 + rank µs, then 20 µs: rank 0 spans 0.030 ms, rank 39 0.069 ms
    assert span.split()[1:] == ["0.030", "0.050", "0.069", "rank", "0", "rank", "39"]
    assert "40 ranks in 40 distinct rows" in done.stdout
    assert len(done.stdout.splitlines()) < MAX_LINES


def test_breakdown_lists_the_slowest_ranks_operators_only(distinct_ranks: Path):
    done = run_cli("analyze", "breakdown", str(distinct_ranks), "--workers", "1")
    assert "rank 39 (the slowest): top operators" in done.stdout
    assert "rank 0:" not in done.stdout


def test_breakdown_per_rank_lists_every_rank(distinct_ranks: Path):
    done = run_cli("analyze", "breakdown", str(distinct_ranks), "--workers", "1", "--per-rank")
    assert done.returncode == 0, done.stderr
    first_table = done.stdout.split("top operators")[0]
    assert len(_rank_rows(first_table)) == MANY_RANKS


def test_a_few_ranks_are_listed_one_by_one(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "job", MAX_LISTED_RANKS)
    done = run_cli("analyze", "ranks", str(prefix), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert len(_rank_rows(done.stdout)) == MAX_LISTED_RANKS


def test_validate_counts_the_rank_files_without_findings_in_one_line(same_ranks: Path):
    done = run_cli("validate", str(same_ranks))
    assert done.returncode == 0, done.stderr
    assert "40 rank files  OK  40 without findings" in done.stdout
    assert len(done.stdout.splitlines()) < MAX_LINES


def test_simulate_groups_ranks_and_prints_astra_sims_lines_on_request(same_ranks: Path, tmp_path: Path):
    network = tmp_path / "switch40.yml"
    network.write_text(f"topology: [ Switch ]\nnpus_count: [ {MANY_RANKS} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    simulate = ["simulate", "--workload", str(same_ranks), "--system", str(EXAMPLES / "system.json")]
    done = run_cli(*simulate, "--network", str(network))
    assert done.returncode == 0, done.stderr
    assert "sys[" not in done.stdout and "0-39" in done.stdout
    assert len(done.stdout.splitlines()) < MAX_LINES
    every = run_cli(*simulate, "--network", str(network), "--per-rank")
    assert sum(line.startswith("sys[") for line in every.stdout.splitlines()) == MANY_RANKS


def test_a_named_rank_file_loads_that_file_alone(distinct_ranks: Path, tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "job", 4)
    Path(f"{prefix}.1.et").write_bytes(b"\xff not a trace")  # would fail if it were read
    workload = open_workload(f"{prefix}.3.et")
    assert workload.ranks == [3] and workload.missing == ()


def test_a_table_wider_than_the_terminal_keeps_every_digit(capsys: pytest.CaptureFixture[str]):
    from chakra.cli import console

    narrow = Console(width=40, force_terminal=False)
    table = Table()
    for name in "abcdef":
        table.add_column(name, justify="right", no_wrap=True)
    table.add_row(*["27,670,116,110,564,321"] * 6)
    saved = console.stdout
    console.stdout = narrow
    try:
        console.print_table(table)
    finally:
        console.stdout = saved
    assert capsys.readouterr().out.count("27,670,116,110,564,321") == 6


def test_the_report_of_many_ranks_merges_identical_ranks(same_ranks: Path, tmp_path: Path):
    done = run_cli("report", str(same_ranks), "-o", str(tmp_path / "r.html"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert "<td>0-39</td><td>40</td>" in page
    assert page.count("<tr>") < 60


def test_simulate_json_names_each_exposed_figure_once(same_ranks: Path, tmp_path: Path):
    network = tmp_path / "switch40.yml"
    network.write_text(f"topology: [ Switch ]\nnpus_count: [ {MANY_RANKS} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    done = run_cli(
        "simulate", "--workload", str(same_ranks), "--system", str(EXAMPLES / "system.json"),
        "--network", str(network), "--json",
    )  # fmt: skip
    rank = json.loads(done.stdout)["ranks"][0]
    assert "exposed_comm_ns" not in rank
    split = rank["compute_only_ns"] + rank["comm_exposed_ns"] + rank["overlap_ns"] + rank["idle_ns"]
    assert split == rank["finish_ns"]
    assert rank["astra_exposed_comm_ns"] == rank["finish_ns"] - rank["gpu_compute_ns"]


def test_simulates_table_shows_a_cpu_bound_ranks_time_as_compute_not_exposed_communication(tmp_path: Path):
    from helpers import make_node, write_et

    from chakra.schema.protobuf.et_def_pb2 import COMP_NODE

    for rank in (0, 1):  # CPU work only: ASTRA-sim's "exposed communication" is all of it
        write_et(tmp_path / f"cpu.{rank}.et", [make_node(1, "cpu_op", COMP_NODE, duration_micros=500, is_cpu_op=True)])
    done = run_cli(
        "simulate", "--workload", str(tmp_path / "cpu"), "--system", str(EXAMPLES / "system.json"),
        "--network", str(EXAMPLES / "ring2.yml"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sys[0] finished, 500000 cycles, exposed communication 500000 cycles." in done.stdout
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith(" 0 "))
    assert row == ["0", "0.500", "0.500", "0.000", "0.000", "0.000"]  # finish, compute only, exposed, overlap, idle
