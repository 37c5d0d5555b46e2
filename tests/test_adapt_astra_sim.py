"""End to end with the real consumer: a recorded gloo job, converted as it ran, adapted for ASTRA-sim,
run by ASTRA-sim's own builds (``../shared/astra-sim``) and by our simulator."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import ASTRA_SIM_NDEBUG, ASTRA_SIM_STOCK, GLOO_RANKS, run_astra_sim

from chakra.adapt import Change, Target, adapt_workload
from chakra.pytorch.workload import convert_workload
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, NETWORK = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"
#: How subprocess reports a program stopped by a failed assert (killed by SIGABRT).
ABORTED = -signal.SIGABRT


def _convert(traces: Path, prefix: Path) -> Path:
    convert_workload(str(traces / "host.{rank}.json"), str(traces / "device.{rank}.json"), prefix)
    return prefix


@pytest.fixture(scope="module")
def training(gloo_training_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The faithful conversion of a DDP job and its ASTRA-sim adaptation."""
    folder = tmp_path_factory.mktemp("adapt_training")
    faithful = _convert(gloo_training_traces, folder / "job")
    adapt_workload(faithful, folder / "astra", Target.ASTRA_SIM)
    return faithful, folder / "astra"


@pytest.fixture(scope="module")
def every_kind(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A job with every collective gloo has and a send/recv ring, faithful and adapted."""
    folder = tmp_path_factory.mktemp("adapt_every_kind")
    faithful = _convert(gloo_traces, folder / "job")
    adapt_workload(faithful, folder / "astra", Target.ASTRA_SIM)
    return faithful, folder / "astra"


@pytest.mark.parametrize("build", [ASTRA_SIM_STOCK, ASTRA_SIM_NDEBUG])
def test_astra_sim_runs_every_rank_of_an_adapted_training_job(training, build: str):
    _, adapted = training
    code, finished = run_astra_sim(adapted, NETWORK, SYSTEM, build)
    assert code == 0 and sorted(finished) == list(range(GLOO_RANKS))
    assert all(cycles > 0 for cycles in finished.values())


def test_the_faithful_conversion_aborts_astra_sims_stock_build_on_its_metadata_node(training):
    faithful, _ = training
    code, finished = run_astra_sim(faithful, NETWORK, SYSTEM, ASTRA_SIM_STOCK)
    assert code == ABORTED and finished == {}


def test_the_faithful_conversion_runs_no_rank_in_astra_sims_release_build(training):
    faithful, _ = training
    assert run_astra_sim(faithful, NETWORK, SYSTEM, ASTRA_SIM_NDEBUG)[1] == {}


def test_our_simulator_gives_the_same_cycles_before_and_after_adapting(training):
    faithful, adapted = training
    system, network = load_system(SYSTEM), load_network(NETWORK)
    before, after = simulate_workload(faithful, system, network), simulate_workload(adapted, system, network)
    assert {r: s.finish_ns for r, s in before.ranks.items()} == {r: s.finish_ns for r, s in after.ranks.items()}


def test_astra_sim_runs_every_rank_of_a_job_with_every_kind_of_communication(every_kind):
    _, adapted = every_kind
    code, finished = run_astra_sim(adapted, NETWORK, SYSTEM, ASTRA_SIM_NDEBUG)
    assert code == 0 and sorted(finished) == list(range(GLOO_RANKS))


def test_adapting_the_job_with_every_kind_reports_the_barrier_stand_in_and_the_metadata_nodes(every_kind, tmp_path):
    faithful, _ = every_kind
    result = adapt_workload(faithful, tmp_path / "again", Target.ASTRA_SIM)
    assert result.changes.counts[Change.METADATA_NODE_REMOVED] == GLOO_RANKS
    assert set(result.changes.details[Change.STAND_IN]) == {"BARRIER as ALL_REDUCE"}
