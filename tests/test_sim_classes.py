"""Simulating by classes of equivalent ranks (chakra.sim.classes): every rank's result equals the
rank-by-rank simulation, cycle for cycle, on generated workloads of every parallelism, on converted
jobs, and where the symmetry breaks (a slower rank, a group that differs, copies of a group that sit
differently in the network), where the classes split or the simulation runs rank by rank and says why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SIM_SYSTEM_JSON, allreduce_rank_nodes, run_cli, write_et

from chakra.generate.llm import generate_llm
from chakra.generate.micro import MicroParams, generate
from chakra.generate.specs import HARDWARE_PRESETS, ModelSpec, ParallelSpec, WorkloadSpec
from chakra.groups import CommGroups
from chakra.sim.choices import NetworkModel
from chakra.sim.classes import RANK_BY_RANK_REASONS, rank_classes
from chakra.sim.config import NetworkConfig, SystemConfig, load_system
from chakra.sim.engine import simulate
from chakra.sim.program import DO_COMPUTE, RankProgram
from chakra.sim.results import SimResult, SimulationStuck
from chakra.sim.run import load_programs, open_simulated
from chakra.text import convert_text
from chakra.xla.pipeline import convert_xla_files

TINY = ModelSpec("tiny", layers=4, hidden=256, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq_len=128)
TINY_MOE = ModelSpec("tiny-moe", layers=2, hidden=256, heads=8, kv_heads=8, ffn=512, vocab=1000, seq_len=128,
                     experts=8, top_k=2)  # fmt: skip
DATA = Path(__file__).parent / "data"


def network(topology: str, *npus: int) -> NetworkConfig:
    """A network of ``topology`` in every dimension, ``npus`` per dimension, 50 GB/s and 500 ns each."""
    dims = len(npus)
    return NetworkConfig((topology,) * dims, tuple(npus), (50.0,) * dims, (500.0,) * dims)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> SystemConfig:
    """Ring collectives on two dimensions (every network here has two), one active chunk."""
    config = json.loads(SIM_SYSTEM_JSON)
    for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        config[f"{key}-implementation"] = ["ring", "ring"]
    path = tmp_path_factory.mktemp("system") / "system.json"
    path.write_text(json.dumps(config))
    return load_system(path)


def programs_of(prefix: Path) -> tuple[dict[int, RankProgram], dict[int, tuple[int, ...]] | None]:
    workload = open_simulated(prefix)
    groups = {int(g): tuple(m) for g, m in workload.comm_groups.items()} if workload.comm_groups else None
    return load_programs(workload, workers=1), groups


def both_ways(programs, groups, system, net, **options) -> tuple[SimResult, SimResult]:
    by_classes = simulate(programs, system, net, comm_groups=groups, by_classes=True, **options)
    rank_by_rank = simulate(programs, system, net, comm_groups=groups, by_classes=False, **options)
    return by_classes, rank_by_rank


def assert_same(by_classes: SimResult, rank_by_rank: SimResult) -> None:
    assert by_classes.ranks == rank_by_rank.ranks
    assert by_classes.collectives == rank_by_rank.collectives
    assert by_classes.warnings == rank_by_rank.warnings
    assert by_classes.intervals == rank_by_rank.intervals


PARALLELISMS = {
    "tp-pp-dp": (TINY, ParallelSpec(tp=2, pp=2, dp=4), 16, ("Switch", 2, 8)),
    "sp": (TINY, ParallelSpec(tp=4, pp=2, dp=2, sp=True), 16, ("Ring", 4, 4)),
    "zero-3": (TINY, ParallelSpec(tp=2, pp=2, dp=8, zero=3), 32, ("Switch", 8, 4)),
    "zero-1": (TINY, ParallelSpec(tp=2, dp=16, zero=1), 32, ("FullyConnected", 2, 16)),
    "context parallel": (TINY, ParallelSpec(tp=2, cp=2, dp=2, pp=2), 16, ("Switch", 4, 4)),
    "expert parallel": (TINY_MOE, ParallelSpec(tp=2, dp=4, ep=4), 16, ("Switch", 2, 4)),
    "gpipe": (TINY, ParallelSpec(tp=2, pp=4, dp=2, schedule="gpipe"), 32, ("Switch", 2, 8)),
    "interleaved": (TINY, ParallelSpec(pp=2, dp=4, schedule="interleaved", virtual_stages=2), 16, ("Ring", 2, 4)),
    "512 ranks": (TINY, ParallelSpec(tp=8, pp=4, dp=16), 64, ("Switch", 8, 64)),
}


@pytest.mark.parametrize("case", PARALLELISMS)
def test_a_generated_workload_simulated_by_classes_equals_it_rank_by_rank(case: str, system, tmp_path: Path):
    model, parallel, batch, (topology, *npus) = PARALLELISMS[case]
    generate_llm(WorkloadSpec(model, parallel, HARDWARE_PRESETS["h100"], global_batch=batch), tmp_path / "w")
    programs, groups = programs_of(tmp_path / "w")
    by_classes, rank_by_rank = both_ways(programs, groups, system, network(topology, *npus))
    assert by_classes.classes is not None and by_classes.classes < len(programs), by_classes.rank_by_rank
    assert_same(by_classes, rank_by_rank)


def test_every_nodes_interval_is_kept_by_classes_too(system, tmp_path: Path):
    generate_llm(WorkloadSpec(TINY, ParallelSpec(tp=2, pp=2, dp=2), HARDWARE_PRESETS["h100"], global_batch=8),
                 tmp_path / "w")  # fmt: skip
    programs, groups = programs_of(tmp_path / "w")
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Switch", 2, 4), keep_intervals=True)
    assert by_classes.classes == 2
    assert_same(by_classes, rank_by_rank)
    assert by_classes.names == rank_by_rank.names


@pytest.mark.parametrize("family", ["ALL_REDUCE", "ALL_TO_ALL", "BARRIER"])
def test_micro_workloads_of_identical_ranks_run_as_one_class(family: str, system, tmp_path: Path):
    (written,) = generate(tmp_path, [family], MicroParams(num_npus=8))
    programs, groups = programs_of(written.prefix)
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Ring", 2, 4))
    assert by_classes.classes == 1
    assert_same(by_classes, rank_by_rank)


def test_ranks_whose_messages_carry_their_own_tags_run_rank_by_rank(system, tmp_path: Path):
    # the ring's tags are the senders' ranks: no two programs are equal
    (written,) = generate(tmp_path, ["send_recv_ring"], MicroParams(num_npus=8))
    programs, groups = programs_of(written.prefix)
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Ring", 2, 4))
    assert by_classes.classes is None and by_classes.rank_by_rank == "no two ranks alike"
    assert_same(by_classes, rank_by_rank)


def test_a_converted_text_workload_equals_it_rank_by_rank(system, tmp_path: Path):
    convert_text(DATA / "text" / "transformer_fwd_in_bckwd.txt", tmp_path / "t", num_npus=16, model_parallel_size=4)
    programs, groups = programs_of(tmp_path / "t")
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Switch", 4, 4))
    assert by_classes.classes is not None and by_classes.classes < 16
    assert_same(by_classes, rank_by_rank)


def test_a_converted_xla_module_equals_it_rank_by_rank(system, tmp_path: Path):
    convert_xla_files(DATA / "xla" / "tf_dense_relu.after_optimizations.hlo.pb", tmp_path / "x", devices=8)
    programs, groups = programs_of(tmp_path / "x")
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Switch", 2, 4))
    assert_same(by_classes, rank_by_rank)


def test_a_slower_rank_splits_its_class_and_its_partners_and_the_result_is_the_same(system, tmp_path: Path):
    generate_llm(WorkloadSpec(TINY, ParallelSpec(tp=2, pp=2, dp=4), HARDWARE_PRESETS["h100"], global_batch=16),
                 tmp_path / "w")  # fmt: skip
    programs, groups = programs_of(tmp_path / "w")
    even = simulate(programs, system, network("Switch", 4, 4), comm_groups=groups)
    columns = programs[5].columns
    time_ns = columns.time_ns.copy()  # the loaded columns are shared by equal ranks, read-only
    time_ns[np.flatnonzero(columns.action == DO_COMPUTE)[0]] *= 3
    programs[5] = RankProgram(5, programs[5].path, columns._replace(time_ns=time_ns), programs[5].name_list)
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Switch", 4, 4))
    assert by_classes.classes is not None and even.classes is not None and by_classes.classes > even.classes
    assert_same(by_classes, rank_by_rank)


def test_copies_of_a_group_that_sit_differently_in_the_network_run_rank_by_rank_and_say_why(system, tmp_path):
    # six ranks in rows of 3, each all-reducing with its pair: {0,1} and {3,4} within a row, {2,5}
    # across the rows' slower links; the ranks' programs are the same, their pairs' times are not
    pairs = {1: (0, 1), 2: (3, 4), 3: (2, 5)}
    for group, members in pairs.items():
        for rank in members:
            write_et(tmp_path / f"w.{rank}.et", allreduce_rank_nodes(rank, pg_name=str(group), skew_us=0))
    CommGroups(pairs).write(tmp_path / "w.comm_groups.json")
    programs, groups = programs_of(tmp_path / "w")
    rows = NetworkConfig(("Switch", "Switch"), (3, 2), (400.0, 50.0), (500.0, 500.0))
    by_classes, rank_by_rank = both_ways(programs, groups, system, rows)
    assert by_classes.classes is None
    assert "ns on rank" in (by_classes.rank_by_rank or "")
    assert_same(by_classes, rank_by_rank)
    assert rank_by_rank.ranks[2].finish_ns > rank_by_rank.ranks[0].finish_ns


def test_the_congestion_aware_model_runs_rank_by_rank_and_says_why(system, tmp_path: Path):
    (written,) = generate(tmp_path, ["ALL_REDUCE"], MicroParams(num_npus=4))
    programs, groups = programs_of(written.prefix)
    result = simulate(programs, system, network("Ring", 2, 2), comm_groups=groups,
                      network_model=NetworkModel.CONGESTION_AWARE)  # fmt: skip
    assert result.classes is None and result.rank_by_rank == RANK_BY_RANK_REASONS["aware"]


def test_ranks_whose_programs_differ_are_never_one_class(tmp_path: Path):
    generate_llm(WorkloadSpec(TINY, ParallelSpec(pp=4), HARDWARE_PRESETS["h100"], global_batch=4), tmp_path / "w")
    programs, groups = programs_of(tmp_path / "w")
    found = rank_classes(programs, groups or {}, network("Switch", 2, 2))
    assert not isinstance(found, str) and found.ranks == [[0], [1], [2], [3]]


def test_a_group_whose_members_disagree_on_a_collective_runs_rank_by_rank(system, tmp_path: Path):
    for rank in range(4):
        size = 1 << 21 if rank == 3 else 1 << 20
        write_et(tmp_path / f"w.{rank}.et", allreduce_rank_nodes(rank, comm_size=size, skew_us=0))
    programs, groups = programs_of(tmp_path / "w")
    by_classes, rank_by_rank = both_ways(programs, groups, system, network("Switch", 2, 2))
    assert by_classes.classes is None and "disagree" in (by_classes.rank_by_rank or "")
    assert_same(by_classes, rank_by_rank)
    assert any("disagree" in warning for warning in rank_by_rank.warnings)


def test_a_workload_that_cannot_finish_is_reported_as_rank_by_rank_reports_it(system, tmp_path: Path):
    for rank in range(3):  # rank 3 never issues the all-reduce of the world
        write_et(tmp_path / f"w.{rank}.et", allreduce_rank_nodes(rank, skew_us=0))
    write_et(tmp_path / "w.3.et", allreduce_rank_nodes(3, skew_us=0)[:1])
    programs, groups = programs_of(tmp_path / "w")
    with pytest.raises(SimulationStuck, match="ranks \\[3\\] never issue it"):
        simulate(programs, system, network("Switch", 2, 2), comm_groups=groups)


def test_the_command_says_how_many_classes_ran_and_runs_every_rank_when_asked(system, tmp_path: Path):
    generate_llm(WorkloadSpec(TINY, ParallelSpec(tp=2, pp=2, dp=2), HARDWARE_PRESETS["h100"], global_batch=8),
                 tmp_path / "w")  # fmt: skip
    (tmp_path / "net.yml").write_text("topology: [ Switch, Switch ]\nnpus_count: [ 2, 4 ]\n"
                                      "bandwidth: [ 50.0, 50.0 ]\nlatency: [ 500.0, 500.0 ]\n")  # fmt: skip
    argv = ["simulate", "--workload", str(tmp_path / "w"), "--system", str(system.path),
            "--network", str(tmp_path / "net.yml")]  # fmt: skip
    by_classes, every_rank = run_cli(*argv), run_cli(*argv, "--rank-by-rank")
    assert by_classes.returncode == 0 and every_rank.returncode == 0, by_classes.stderr + every_rank.stderr
    assert "simulated as 2 classes of equivalent ranks" in by_classes.stdout
    assert "simulated rank by rank: asked for" in every_rank.stdout
    finish = [line for line in by_classes.stdout.splitlines() if line.startswith("sys[")]
    assert finish and finish == [line for line in every_rank.stdout.splitlines() if line.startswith("sys[")]
