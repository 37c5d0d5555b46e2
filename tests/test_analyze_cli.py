"""``chakra analyze``, ``chakra viz`` and ``chakra report`` from the command line: output, files, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from handmade import build_workload
from helpers import assert_one_line_error, assert_usage_error, make_node, write_et
from helpers import run_cli as run

from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The 4-rank demo workload: generated, so no recorded start times."""
    return build_workload(tmp_path / "demo")


def timed_rank(rank: int, late_us: int) -> list:
    """Compute for 10 µs (+ ``late_us``), then an all-reduce, with recorded start times."""
    return [
        make_node(1, type=COMP_NODE, duration_micros=10 + late_us, start_time_micros=1000, is_cpu_op=False, stream=7),
        make_node(
            2, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=4096, duration_micros=5, data_deps=[1],
            start_time_micros=1010 + late_us, is_cpu_op=False, stream=8,
        ),
    ]  # fmt: skip


@pytest.fixture
def timed(tmp_path: Path) -> Path:
    """Two ranks with start times; rank 1 reaches the all-reduce 6 µs after rank 0."""
    (tmp_path / "timed").mkdir()
    for rank, late_us in ((0, 0), (1, 6)):
        write_et(tmp_path / "timed" / f"job.{rank}.et", timed_rank(rank, late_us))
    return tmp_path / "timed" / "job"


def test_breakdown_json_has_every_rank_replayed_when_there_are_no_start_times(demo: Path):
    result = run("analyze", "breakdown", str(demo), "--json", "--workers", "1")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert sorted(data) == ["0", "1", "2", "3"]
    assert all(entry["timing"] == "replay" and entry["span_ns"] > 0 for entry in data.values())
    assert all(entry["top_operators"] for entry in data.values())


def test_breakdown_says_untimed_communication_is_left_to_the_simulator(demo: Path):
    result = run("analyze", "breakdown", str(demo), "--rank", "0", "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert "no recorded duration" in " ".join(result.stderr.split())


def test_breakdown_ranks_operators_by_exclusive_time_when_asked(timed: Path):
    result = run("analyze", "breakdown", str(timed), "--rank", "0", "--by", "exclusive", "--json")
    assert result.returncode == 0, result.stderr
    tops = json.loads(result.stdout)["0"]["top_operators"]
    assert [t["exclusive_ns"] for t in tops] == sorted((t["exclusive_ns"] for t in tops), reverse=True)


def test_summary_prints_busy_time_per_track_and_collectives(demo: Path):
    result = run("analyze", "summary", str(demo), "--rank", "0", "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert "busy time per track" in result.stdout
    assert "ALL_REDUCE" in result.stdout or "ALL_GATHER" in result.stdout


def test_critical_path_of_one_file(demo: Path):
    result = run("analyze", "critical-path", f"{demo}.0.et", "--json")
    assert result.returncode == 0, result.stderr
    path = json.loads(result.stdout)
    assert path["length_ns"] > 0 and path["node_ids"]


def test_ranks_names_the_rank_that_reaches_collectives_late(timed: Path):
    result = run("analyze", "ranks", str(timed), "--json", "--workers", "1")
    assert result.returncode == 0, result.stderr
    comparison = json.loads(result.stdout)
    assert [s["rank"] for s in comparison["stragglers"]] == [1]
    assert comparison["stragglers"][0]["late_ns_total"] == 6000


def test_diff_explains_the_slower_step(tmp_path: Path, timed: Path):
    (tmp_path / "faster").mkdir()
    write_et(tmp_path / "faster" / "job.0.et", timed_rank(0, 0))
    write_et(tmp_path / "faster" / "job.1.et", timed_rank(1, 0))
    result = run("analyze", "diff", str(tmp_path / "faster" / "job"), str(timed), "--json")
    assert result.returncode == 0, result.stderr
    diff = json.loads(result.stdout)
    assert diff["delta_span_ns"] == 6000
    assert sum(diff["explained"].values()) == diff["delta_span_ns"]


def test_graph_export_writes_graphml_and_dot(demo: Path, tmp_path: Path):
    for suffix in ("graphml", "dot"):
        out = tmp_path / f"g.{suffix}"
        result = run("viz", "graph", f"{demo}.0.et", "-o", str(out))
        assert result.returncode == 0, result.stderr
        assert out.stat().st_size > 0


def test_graph_around_an_unknown_id_is_one_clear_error(demo: Path, tmp_path: Path):
    result = run("viz", "graph", f"{demo}.0.et", "-o", str(tmp_path / "g.dot"), "--around", "987654")
    assert_one_line_error(result, "987654")


def test_timeline_of_a_trace_without_start_times_says_to_simulate(demo: Path, tmp_path: Path):
    result = run("viz", "timeline", str(demo), "-o", str(tmp_path / "t.json"), "--workers", "1")
    assert_one_line_error(result, "start_time_micros")


def test_timeline_of_a_timed_workload_is_chrome_trace_json(timed: Path, tmp_path: Path):
    out = tmp_path / "t.json"
    result = run("viz", "timeline", str(timed), "-o", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X") == 4


@pytest.mark.parametrize("kind", ["breakdown", "ranks", "critical-path"])
def test_plot_writes_a_png(timed: Path, tmp_path: Path, kind: str):
    out = tmp_path / f"{kind}.png"
    result = run("viz", "plot", str(timed), "--kind", kind, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(PNG_SIGNATURE)


def test_report_writes_one_html_page(demo: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    result = run("report", str(demo), "-o", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_an_empty_trace_is_one_clear_error(tmp_path: Path):
    write_et(tmp_path / "empty.et", [])
    assert_one_line_error(run("analyze", "critical-path", str(tmp_path / "empty.et")), "no nodes")


def test_an_unknown_timing_is_a_usage_error_naming_the_choices(demo: Path):
    assert_usage_error(run("analyze", "breakdown", str(demo), "--timing", "soon"), "--timing", "soon", "replay")


@pytest.mark.parametrize("command", [["analyze", "--help"], ["viz", "--help"], ["report", "--help"]])
def test_every_command_has_help_with_an_example(command: list[str]):
    result = run(*command)
    assert result.returncode == 0 and "Example" in result.stdout


@pytest.mark.parametrize("command", [["summary", "--workers", "1"], ["ranks", "--workers", "1"], ["critical-path"]])
def test_every_analysis_says_when_communication_has_no_duration(demo: Path, command: list[str]):
    result = run("analyze", command[0], str(demo), *command[1:])
    assert result.returncode == 0, result.stderr
    assert "no recorded duration" in " ".join(result.stderr.split())


def test_a_workload_missing_a_rank_says_which_ranks_are_analysed(timed: Path):
    (timed.parent / "job.2.et").write_bytes((timed.parent / "job.1.et").read_bytes())
    (timed.parent / "job.1.et").unlink()
    result = run("analyze", "summary", str(timed), "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert "ranks 1 have no file: only ranks 0, 2 are analysed" in " ".join(result.stderr.split())


def test_diff_of_runs_with_different_ranks_or_timing_says_so(timed: Path, demo: Path):
    result = run("analyze", "diff", str(timed), str(demo), "--json")
    assert result.returncode == 0, result.stderr
    notes = " ".join(json.loads(result.stdout)["notes"])
    assert "different ranks" in notes and "recorded timing" in notes


def test_a_top_below_1_is_refused(demo: Path):
    result = run("analyze", "breakdown", str(demo), "--top", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
