"""``make demo`` (issue 21): the real pipeline on a job it records itself, each step's output checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra.demo import run_demo
from chakra.kineto.workload import KINETO_FIDELITY_TOLERANCE
from chakra.pytorch.workload import PYTORCH_FIDELITY_TOLERANCE


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    lines: list[str] = []
    return run_demo(tmp_path_factory.mktemp("demo") / "out", say=lines.append), lines


def test_the_recorded_job_converts_within_the_fidelity_check_and_validates(demo):
    result, _ = demo
    assert sorted(result.fidelity) == [0, 1]
    assert all(error is not None and abs(error) <= PYTORCH_FIDELITY_TOLERANCE for error in result.fidelity.values())
    assert result.validate_errors == 0


def test_the_same_job_converts_from_its_profiler_traces_alone_within_their_check(demo):
    result, lines = demo
    assert sorted(result.kineto_fidelity) == [0, 1]
    assert all(e is not None and abs(e) <= KINETO_FIDELITY_TOLERANCE for e in result.kineto_fidelity.values())
    assert any("chakra convert kineto" in line for line in lines)


def test_the_reports_and_timelines_are_written(demo):
    result, _ = demo
    for name in ("report.html", "simulated-report.html", "job.timeline.json", "simulated.timeline.json"):
        assert (result.out / name).stat().st_size > 0, name


def test_the_simulated_run_has_communication_and_exposed_time(demo):
    result, _ = demo
    assert result.simulated_comm_ms > 0 and result.simulated_exposed_ms > 0
    assert "exposed" in Path(result.simulated_report).read_text().lower()


def test_the_what_if_with_twice_the_bandwidth_is_faster(demo):
    result, _ = demo
    assert 0 < result.what_if_ms < result.simulated_ms


def test_queueing_on_shared_links_is_never_faster(demo):
    result, lines = demo
    assert result.contended_ms >= result.simulated_ms > 0
    assert any("--network-model congestion-aware" in line for line in lines)


def test_the_replay_finished_every_rank(demo):
    result, _ = demo
    assert sorted(result.replayed_us) == [0, 1] and all(us > 0 for us in result.replayed_us.values())


def test_every_step_prints_its_block_and_the_other_front_ends_ran_or_said_why_not(demo):
    result, lines = demo
    assert [line.split(".")[0] for line in lines if line.startswith("\n")] == [f"\n{n}" for n in range(1, 8)]
    assert set(result.frameworks) == {"JAX", "TensorFlow"}
    assert result.llm_ms > 0
