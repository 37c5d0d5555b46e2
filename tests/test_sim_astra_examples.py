"""Every example configuration of ASTRA-sim's repository (``../shared/astra-sim/examples``: system,
network and remote-memory files), loaded unchanged, runs a micro workload to the binaries' cycles
(issue 32): ours runs every configuration ASTRA-sim runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import require_shared

from chakra.errors import ChakraError
from chakra.generate.micro import sweep_collectives
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
from chakra.sim.astra import run_astra_sim
from chakra.sim.choices import NetworkModel
from chakra.sim.config import load_network, load_remote_memory, load_system
from chakra.sim.run import simulate_workload
from chakra.trace import new_node
from chakra.workload_writer import write_workload

ROOT = Path(__file__).resolve().parents[2] / "shared" / "astra-sim"
EXAMPLES = ROOT / "examples"
BINARIES = {
    NetworkModel.CONGESTION_UNAWARE: "AstraSim_Analytical_Congestion_Unaware",
    NetworkModel.CONGESTION_AWARE: "AstraSim_Analytical_Congestion_Aware",
}
COLLECTIVES = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
#: The custom-collective example's algorithm is written for 8 ranks: it runs on the 8-NPU networks.
CUSTOM_RANKS = 8


def _cases() -> list[tuple[str, str]]:
    systems = sorted((EXAMPLES / "system").rglob("*.json")) if EXAMPLES.is_dir() else []
    networks = sorted((EXAMPLES / "network" / "analytical").glob("*.yml")) if EXAMPLES.is_dir() else []
    cases = []
    for system in systems:
        for network in networks:
            custom = "custom" in system.parent.name
            if custom and load_network(network).num_npus != CUSTOM_RANKS:
                continue
            cases.append((str(system.relative_to(EXAMPLES)), str(network.relative_to(EXAMPLES))))
    return cases


def _finish(outcome) -> dict[int, int] | str:
    return {rank: stats.finish_ns for rank, stats in outcome.ranks.items()}


@pytest.mark.parametrize("model", list(NetworkModel))
@pytest.mark.parametrize(("system", "network"), _cases() or [("missing", "missing")])
def test_an_example_configuration_gives_the_binarys_cycles_on_every_collective(
    system: str, network: str, model: NetworkModel, tmp_path: Path
):
    require_shared(Path("..") / "astra-sim" / "examples")
    binary = require_shared(Path("..") / "astra-sim" / "bin" / BINARIES[model])
    remote_memory = EXAMPLES / "remote_memory" / "analytical" / "no_memory_expansion.json"
    npus = load_network(EXAMPLES / network).num_npus
    for collective in COLLECTIVES:
        (workload,) = sweep_collectives(tmp_path / collective, [collective], [1 << 20], [npus])
        try:
            ours: dict[int, int] | str = _finish(simulate_workload(
                workload.prefix, load_system(EXAMPLES / system), load_network(EXAMPLES / network),
                remote_memory=load_remote_memory(remote_memory), network_model=model,
            ))  # fmt: skip
        except ChakraError as error:
            ours = str(error)
        theirs = run_astra_sim(
            binary, workload.prefix, EXAMPLES / system, EXAMPLES / network, remote_memory=remote_memory,
            timeout_s=120, cwd=ROOT,
        )  # fmt: skip
        if isinstance(ours, str):  # ours refuses: ASTRA-sim fails on it too (an implementation it lacks)
            assert theirs.returncode != 0 and not theirs.ranks, (collective, ours, theirs.output_tail)
        else:
            assert ours == {r: a.finish_ns for r, a in theirs.ranks.items()}, (collective, theirs.output_tail)


#: ASTRA-sim's example system with one key changed (None: removed), for every key its Sys.cc reads.
BASE_SYSTEM = {
    "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware", "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0,
    "peak-perf": 900,
}  # fmt: skip
KEY_VARIANTS = {
    "local-reduction-delay": {"local-reduction-delay": 50},
    "LogGP without the shared bus": {"L": 100.0, "o": 50.0, "g": 20.0, "G": 1.5},
    "endpoint-delay": {"endpoint-delay": 100},
    "no endpoint-delay": {"endpoint-delay": None},
    "no local-mem-bw": {"local-mem-bw": None},
    "trace-enabled": {"trace-enabled": 1},
    "replay-only": {"replay-only": 1},
    "roofline": {"roofline-enabled": 1},
    "roofline as true": {"roofline-enabled": True},
    "boost-mode": {"boost-mode": 1},
    "FIFO": {"scheduling-policy": "FIFO"},
    "splits as 4.0": {"preferred-dataset-splits": 4.0},
    "two active chunks": {"active-chunks-per-dimension": 2},
}


@pytest.mark.parametrize("variant", list(KEY_VARIANTS))
def test_every_system_key_astra_sim_reads_gives_its_cycles(variant: str, tmp_path: Path):
    """A compute node, a 1 MiB all-reduce and a 64 KiB all-gather on a Ring of 8, per rank."""
    binary = require_shared(Path("..") / "astra-sim" / "bin" / BINARIES[NetworkModel.CONGESTION_UNAWARE])
    system = {key: value for key, value in {**BASE_SYSTEM, **KEY_VARIANTS[variant]}.items() if value is not None}
    (tmp_path / "system.json").write_text(json.dumps(system))
    (tmp_path / "ring.yml").write_text("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    nodes = [
        new_node(1, "mm", COMP_NODE, duration_us=5, is_cpu_op=False, num_ops=10**9, tensor_size=10**6),
        new_node(2, "ar", COMM_COLL_NODE, data_deps=[1], duration_us=3, is_cpu_op=False, comm_type=ALL_REDUCE,
                 comm_size=1 << 20),
        new_node(3, "ag", COMM_COLL_NODE, data_deps=[2], is_cpu_op=False, comm_type=ALL_GATHER, comm_size=1 << 16),
    ]  # fmt: skip
    write_workload(tmp_path / "w", dict.fromkeys(range(8), nodes))

    ours = simulate_workload(tmp_path / "w", load_system(tmp_path / "system.json"), load_network(tmp_path / "ring.yml"))
    theirs = run_astra_sim(binary, tmp_path / "w", tmp_path / "system.json", tmp_path / "ring.yml", timeout_s=120)

    assert _finish(ours) == {rank: a.finish_ns for rank, a in theirs.ranks.items()}


def test_the_shared_memory_bus_model_is_refused_in_one_line(tmp_path: Path):
    path = tmp_path / "system.json"
    path.write_text(json.dumps({**BASE_SYSTEM, "model-shared-bus": 1}))

    with pytest.raises(ChakraError, match="model-shared-bus 1"):
        load_system(path)
