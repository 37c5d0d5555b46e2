"""Analyses of a simulated run (issue 15): ``chakra simulate --timed OUT`` writes the workload with
its simulated times, and ``analyze``, ``report`` and ``viz`` then show the simulated communication,
exposed time and critical path of a workload that records none (a generated one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from chakra.analyze.breakdown import breakdown
from chakra.analyze.critical_path import critical_path
from chakra.table import load_table

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
RANKS = 4
#: The simulator's split is in ns, the written starts in µs: each node may move by under 1 µs.
ROUNDING_NS_PER_NODE = 1000


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """A generated Llama step (TP 2, PP 2), simulated with --timed: (its prefix, the timed copy's,
    the simulation's JSON report)."""
    folder = tmp_path_factory.mktemp("timed")
    generated = run_cli("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--pp", "2", "-o", str(folder / "gen"))
    assert generated.returncode == 0, generated.stderr
    network = folder / "ring4.yml"
    network.write_text(f"topology: [ Ring ]\nnpus_count: [ {RANKS} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    done = run_cli(
        "simulate", "--workload", str(folder / "gen"), "--system", str(EXAMPLES / "system.json"),
        "--network", str(network), "--timed", str(folder / "sim"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "gen", folder / "sim", json.loads(done.stdout)


def test_a_generated_workload_has_no_communication_time_of_its_own(simulated):
    generated, _, _ = simulated
    assert breakdown(load_table(f"{generated}.0.et")).communication_ns == 0


def test_the_timed_copy_shows_the_simulated_exposed_communication(simulated):
    _, timed, report = simulated
    for row in report["ranks"]:
        table = load_table(f"{timed}.{row['rank']}.et")
        b = breakdown(table)
        assert b.timing == "simulated"
        assert b.comm_exposed_ns > 0
        assert abs(b.comm_exposed_ns - row["comm_exposed_ns"]) <= ROUNDING_NS_PER_NODE * len(table)
        assert abs(b.span_ns - row["finish_ns"]) <= ROUNDING_NS_PER_NODE * len(table)


def test_the_critical_path_of_the_simulated_run_goes_through_communication(simulated):
    _, timed, _ = simulated
    path = critical_path(load_table(f"{timed}.0.et"))
    assert path.by_category.get("communication", 0) > 0


def test_the_report_of_the_simulated_run_shows_its_communication(simulated, tmp_path: Path):
    _, timed, _ = simulated
    done = run_cli("report", str(timed), "-o", str(tmp_path / "r.html"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert "times from simulated timing" in page
    assert "count 0 here" not in page  # every collective has its simulated duration


def test_the_timed_copy_keeps_every_node_and_dependency(simulated):
    generated, timed, _ = simulated
    for rank in range(RANKS):
        before, after = load_table(f"{generated}.{rank}.et"), load_table(f"{timed}.{rank}.et")
        assert (before.graph.ids == after.graph.ids).all()
        assert (before.graph.node_type == after.graph.node_type).all()
        assert (before.graph.dep_pos == after.graph.dep_pos).all() and (
            before.graph.dep_ptr == after.graph.dep_ptr
        ).all()
