"""End to end with the real consumer: a recorded gloo job, converted as it ran, adapted for ASTRA-sim,
run by ASTRA-sim's own builds (``../shared/astra-sim``) and by our simulator."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from helpers import ASTRA_SIM, ASTRA_SIM_NDEBUG, ASTRA_SIM_STOCK, GLOO_GROUPS_RANKS, GLOO_RANKS, run_astra_sim

from chakra import io
from chakra.adapt import Change, Target, adapt_workload
from chakra.attrs import get_attr, set_attr
from chakra.groups import CommGroups
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, CollectiveCommType
from chakra.sim.astra import CRASHED_AT_EXIT
from chakra.sim.config import load_network, load_system
from chakra.sim.config.system import ASTRA_COMPAT_KEY
from chakra.sim.run import simulate_workload
from chakra.validate import ERROR, WARNING, validate_set
from chakra.workload import open_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, NETWORK = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"
#: How subprocess reports a program stopped by a failed assert (killed by SIGABRT).
ABORTED = -signal.SIGABRT
#: Runs of ASTRA-sim before giving up on one that printed every rank's line (see below).
ASTRA_ATTEMPTS = 3


def _faithful_and_adapted(traces: Path, folder: Path) -> tuple[Path, Path]:
    """The job of ``traces`` converted as it ran (``folder/job``) and adapted for ASTRA-sim (``folder/astra``)."""
    faithful = folder / "job"
    convert_workload(str(traces / "host.{rank}.json"), str(traces / "device.{rank}.json"), faithful)
    adapt_workload(faithful, folder / "astra", Target.ASTRA_SIM)
    return faithful, folder / "astra"


@pytest.fixture(scope="module")
def training(gloo_training_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The faithful conversion of a DDP job and its ASTRA-sim adaptation."""
    return _faithful_and_adapted(gloo_training_traces, tmp_path_factory.mktemp("adapt_training"))


@pytest.fixture(scope="module")
def every_kind(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A job with every collective gloo has and a send/recv ring, faithful and adapted."""
    return _faithful_and_adapted(gloo_traces, tmp_path_factory.mktemp("adapt_every_kind"))


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


# -- a job of nested process groups ----------------------------------------------------------------

#: ASTRA-sim's example network of four NPUs on a ring (``../shared/astra-sim``).
RING_4 = ASTRA_SIM / "examples" / "network" / "analytical" / "Ring_4npus.yml"
#: What each call of ``examples/collect_gloo.py --groups`` ran, as the type the ET must record.
RECORDED_TYPE = {
    "all_reduce": "ALL_REDUCE", "broadcast": "BROADCAST", "all_gather": "ALL_GATHER",
    "reduce_scatter": "REDUCE_SCATTER", "reduce": "REDUCE", "gather": "GATHER", "scatter": "SCATTER",
    "all_to_all": "ALL_TO_ALL", "barrier": "BARRIER",
}  # fmt: skip


@pytest.fixture(scope="module")
def nested(gloo_groups_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The world, DP and TP pairs and a trio, every collective on each: faithful and adapted."""
    return _faithful_and_adapted(gloo_groups_traces, tmp_path_factory.mktemp("adapt_nested"))


@pytest.mark.parametrize("rank", range(GLOO_GROUPS_RANKS))
def test_every_collective_of_the_nested_job_is_written_as_the_type_that_ran(nested, gloo_groups_traces, rank):
    program = json.loads((gloo_groups_traces / f"program.{rank}.json").read_text())
    _, nodes = io.read(f"{nested[0]}.{rank}.et")
    collectives = sorted((n for n in nodes if n.type == COMM_COLL_NODE), key=lambda n: (n.start_time_micros, n.id))
    written = [CollectiveCommType.Name(get_attr(n, "comm_type")) for n in collectives]
    assert written == [RECORDED_TYPE[p["call"]] for p in program]
    assert all(get_attr(n, "recorded_comm_type") is None for n in collectives)


def test_the_adapted_nested_job_validates_clean_for_astra_sim(nested):
    findings = validate_set(open_workload(nested[1], whole=True), target="astra-sim")
    assert [f.code for f in findings if f.severity in (ERROR, WARNING)] == []


def _printed_by_every_rank(
    prefix: Path, network: Path, system: Path, ranks: int, build: str = ASTRA_SIM_STOCK
) -> tuple[int, dict[int, int]]:
    """ASTRA-sim's exit code and finished lines, run again (up to ASTRA_ATTEMPTS runs) while some rank's
    line is missing: where ranks are in several groups it may crash at exit (:data:`CRASHED_AT_EXIT`)
    after printing its results, and its logger may lose lines then."""
    for _ in range(ASTRA_ATTEMPTS):
        code, finished = run_astra_sim(prefix, network, system, build)
        if len(finished) == ranks:
            break
    return code, finished


def test_astra_sim_runs_every_rank_of_the_adapted_nested_job(nested):
    code, finished = _printed_by_every_rank(nested[1], RING_4, SYSTEM, GLOO_GROUPS_RANKS, ASTRA_SIM_NDEBUG)
    assert code in (0, *CRASHED_AT_EXIT) and sorted(finished) == list(range(GLOO_GROUPS_RANKS))


def test_the_nested_job_without_its_explicit_world_group_hangs_astra_sim(nested, tmp_path: Path):
    """What the explicit group is for: the same adapted job with the world collectives back in the
    default group runs no rank to its end (ASTRA-sim's default-group tags count each rank's
    collectives, and the trio's rank 3 issues fewer)."""
    world_id = max(CommGroups.read(Path(f"{nested[1]}.comm_groups.json")))
    for rank in range(GLOO_GROUPS_RANKS):
        metadata, nodes = io.read(f"{nested[1]}.{rank}.et")
        for node in nodes:
            if get_attr(node, "pg_name") == str(world_id):
                set_attr(node, "pg_name", "0")
        io.write(tmp_path / f"job.{rank}.et", metadata, nodes)
    shutil.copy(f"{nested[1]}.comm_groups.json", tmp_path / "job.comm_groups.json")
    assert run_astra_sim(tmp_path / "job", RING_4, SYSTEM, ASTRA_SIM_NDEBUG)[1] == {}


def test_astra_sim_runs_upstreams_sample_trace_once_adapted(upstream_et: Path, tmp_path: Path):
    adapt_workload(upstream_et, tmp_path / "one", Target.ASTRA_SIM)
    for rank in range(GLOO_RANKS):  # the sample is one rank: the same on both NPUs of the ring
        shutil.copy(tmp_path / "one.0.et", tmp_path / f"up.{rank}.et")
    code, finished = run_astra_sim(tmp_path / "up", NETWORK, SYSTEM, ASTRA_SIM_NDEBUG)
    assert code == 0 and sorted(finished) == list(range(GLOO_RANKS))


def _compat_system(folder: Path) -> Path:
    """The example system with ``chakra-astra-compat`` on (broadcasts replay their duration, as
    ASTRA-sim runs them; ASTRA-sim ignores the key)."""
    system = {**json.loads(SYSTEM.read_text()), ASTRA_COMPAT_KEY: 1}
    path = folder / "system.compat.json"
    path.write_text(json.dumps(system))
    return path


@pytest.mark.parametrize("job", ["training", "every_kind", "nested"])
def test_our_simulator_gives_astra_sims_cycles_on_the_adapted_live_job(job: str, request, tmp_path: Path):
    _, adapted = request.getfixturevalue(job)
    system = _compat_system(tmp_path)
    network = NETWORK
    if job == "nested":
        network = tmp_path / "ring2x2.yml"
        network.write_text(
            "topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"
        )
    ours = simulate_workload(adapted, load_system(system), load_network(network))
    code, theirs = _printed_by_every_rank(adapted, network, system, len(ours.ranks))
    assert code in (0, *CRASHED_AT_EXIT) and {r: s.finish_ns for r, s in ours.ranks.items()} == theirs
