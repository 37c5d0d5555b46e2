"""Custom collectives (:mod:`chakra.sim.custom`): algorithms written as per-rank Chakra ETs, simulated
as ASTRA-sim's ``CustomAlgorithm`` runs them, against its binaries (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import require_shared, run_cli

from chakra.generate.collective import AlgorithmSpec, write_algorithm
from chakra.generate.micro import sweep_collectives
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
from chakra.sim.astra import run_astra_sim
from chakra.sim.choices import NetworkModel
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload
from chakra.trace import new_node
from chakra.workload_writer import write_workload

BINARIES = {
    NetworkModel.CONGESTION_UNAWARE: "AstraSim_Analytical_Congestion_Unaware",
    NetworkModel.CONGESTION_AWARE: "AstraSim_Analytical_Congestion_Aware",
}
WORKLOAD_NAMES = {"all-reduce": "ALL_REDUCE", "all-gather": "ALL_GATHER", "reduce-scatter": "REDUCE_SCATTER",
                  "all-to-all": "ALL_TO_ALL"}  # fmt: skip
MIB = 1 << 20
#: The example's cycles on a Ring of 8 at 50 GB/s and 500 ns: 14 hops of 128 KiB (2,941 ns each)
#: and 7 reductions of 7 µs.
EXAMPLE_CYCLES = 14 * 2941 + 7 * 7000


def _one_collective(folder: Path, collective: str, size_bytes: int, ranks: int) -> Path:
    """A workload of one collective per rank (the prefix)."""
    (written,) = sweep_collectives(folder, [WORKLOAD_NAMES[collective]], [size_bytes], [ranks])
    return written.prefix


def _network(folder: Path, topology: str, npus: int) -> Path:
    path = folder / f"{topology}{npus}.yml"
    path.write_text(f"topology: [ {topology} ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return path


def _custom_system(folder: Path, collective: str, prefix: Path, **extra: object) -> Path:
    path = folder / "system.json"
    system = {"scheduling-policy": "FIFO", "preferred-dataset-splits": 1, "local-mem-bw": 50,
              f"{collective}-implementation-custom": [str(prefix)], **extra}  # fmt: skip
    path.write_text(json.dumps(system))
    return path


def _both(
    workload: Path, system: Path, network: Path, model: NetworkModel, cwd: Path | None = None
) -> tuple[dict[int, int], dict[int, int]]:
    """Every rank's finish (ns) in ours and in ASTRA-sim's binary of ``model``."""
    binary = require_shared(Path("..") / "astra-sim" / "bin" / BINARIES[model])
    ours = simulate_workload(workload, load_system(system), load_network(network), network_model=model)
    theirs = run_astra_sim(binary, workload, system, network, timeout_s=120, cwd=cwd)
    assert theirs.returncode == 0, theirs.output_tail
    return {r: s.finish_ns for r, s in ours.ranks.items()}, {r: a.finish_ns for r, a in theirs.ranks.items()}


@pytest.mark.parametrize("model", list(NetworkModel))
def test_astra_sims_own_example_runs_unchanged_and_gives_its_cycles(model: NetworkModel, tmp_path: Path):
    """The example's system file names its prefix from ASTRA-sim's root: ours finds it from the file."""
    root = require_shared(Path("..") / "astra-sim")
    system = root / "examples" / "system" / "custom_collectives" / "custom_collective.json"
    network = root / "examples" / "network" / "analytical" / "Ring_8npus.yml"
    workload = _one_collective(tmp_path, "all-reduce", MIB, 8)

    ours, theirs = _both(workload, system, network, model, cwd=root)

    assert ours == theirs == dict.fromkeys(range(8), EXAMPLE_CYCLES)


@pytest.mark.parametrize(
    ("algorithm", "collective", "topology", "npus"),
    [
        ("ring", "all-reduce", "Ring", 8),
        ("ring", "all-to-all", "Switch", 4),
        ("bidirectional-ring", "reduce-scatter", "Ring", 16),
        ("bidirectional-ring", "all-gather", "Switch", 8),
        ("direct", "all-reduce", "Switch", 8),
        ("direct", "all-to-all", "Ring", 4),
        ("halving-doubling", "all-reduce", "Ring", 16),
        ("halving-doubling", "all-gather", "Switch", 4),
        ("double-binary-tree", "all-reduce", "Ring", 8),
        ("double-binary-tree", "all-reduce", "Switch", 16),
    ],
)
@pytest.mark.parametrize("model", list(NetworkModel))
def test_a_generated_algorithm_gives_the_binarys_cycles(
    algorithm: str, collective: str, topology: str, npus: int, model: NetworkModel, tmp_path: Path
):
    write_algorithm(tmp_path / "algo" / "a", AlgorithmSpec(algorithm, collective, npus, MIB))
    system = _custom_system(tmp_path, collective, tmp_path / "algo" / "a")
    workload = _one_collective(tmp_path / "w", collective, MIB, npus)

    ours, theirs = _both(workload, system, _network(tmp_path, topology, npus), model)

    assert ours == theirs and len(ours) == npus


def _on_group(folder: Path, members: tuple[int, ...], world: int) -> Path:
    """A 1 MiB all-reduce on communicator group 1 (``members``); the other ranks have nothing to do."""
    ranks = {
        rank: [new_node(0, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=MIB, pg_name="1")]
        if rank in members
        else [new_node(0, "idle", COMP_NODE, is_cpu_op=False, duration_us=1)]
        for rank in range(world)
    }
    write_workload(folder / "w", ranks, CommGroups({1: members}))
    return folder / "w"


def test_an_algorithm_on_a_subgroup_runs_by_its_members_positions(tmp_path: Path):
    # the group's members 1, 3, 5, 7 are algorithm ranks 0-3: their ring crosses two hops a step
    write_algorithm(tmp_path / "algo" / "ring4", AlgorithmSpec("ring", "all-reduce", 4, MIB))
    system = _custom_system(tmp_path, "all-reduce", tmp_path / "algo" / "ring4")
    workload = _on_group(tmp_path, (1, 3, 5, 7), 8)

    ours, theirs = _both(workload, system, _network(tmp_path, "Ring", 8), NetworkModel.CONGESTION_UNAWARE)

    assert ours == theirs
    assert ours[1] > ours[0]  # the members' collective outlasts the idle ranks' microsecond


def _simulate_cli(workload: Path, system: Path, network: Path):
    return run_cli("simulate", "--workload", str(workload), "--system", str(system), "--network", str(network))


def test_a_missing_rank_file_of_the_algorithm_is_named_in_one_line(tmp_path: Path):
    write_algorithm(tmp_path / "algo" / "ring", AlgorithmSpec("ring", "all-reduce", 8, MIB))
    (tmp_path / "algo" / "ring.5.et").unlink()
    system = _custom_system(tmp_path, "all-reduce", tmp_path / "algo" / "ring")

    done = _simulate_cli(_one_collective(tmp_path / "w", "all-reduce", MIB, 8), system, _network(tmp_path, "Ring", 8))

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "ring.5.et" in done.stderr and "no file for position 5" in done.stderr


def test_an_algorithm_for_eight_ranks_on_a_group_of_four_is_refused_in_one_line(tmp_path: Path):
    write_algorithm(tmp_path / "algo" / "ring8", AlgorithmSpec("ring", "all-reduce", 8, MIB))
    system = _custom_system(tmp_path, "all-reduce", tmp_path / "algo" / "ring8")

    done = _simulate_cli(_on_group(tmp_path, (0, 1, 2, 3), 8), system, _network(tmp_path, "Ring", 8))

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "ring8.0.et" in done.stderr and "outside the collective's 4 members" in done.stderr


def test_a_custom_algorithm_with_several_chunks_is_refused_as_astra_sim_never_finishes_it(tmp_path: Path):
    write_algorithm(tmp_path / "algo" / "ring", AlgorithmSpec("ring", "all-reduce", 4, MIB))
    system = _custom_system(tmp_path, "all-reduce", tmp_path / "algo" / "ring", **{"preferred-dataset-splits": 4})

    done = _simulate_cli(_one_collective(tmp_path / "w", "all-reduce", MIB, 4), system, _network(tmp_path, "Ring", 4))

    assert done.returncode == 2 and "never finishes" in done.stderr and str(system) in done.stderr


def test_a_custom_algorithm_listing_two_prefixes_is_refused_as_astra_sim_refuses_it(tmp_path: Path):
    path = tmp_path / "system.json"
    path.write_text(json.dumps({"scheduling-policy": "FIFO", "preferred-dataset-splits": 1,
                                "all-reduce-implementation-custom": ["a", "b"]}))  # fmt: skip

    done = _simulate_cli(_one_collective(tmp_path / "w", "all-reduce", MIB, 4), path, _network(tmp_path, "Ring", 4))

    assert done.returncode == 2 and "There should be 1 Chakra ET only" in done.stderr


def test_a_generated_ring_all_gather_equals_the_built_in_ring_without_endpoint_delay(tmp_path: Path):
    """No reduction and no endpoint delay: the two run the same messages at the same times."""
    write_algorithm(tmp_path / "algo" / "ring", AlgorithmSpec("ring", "all-gather", 8, MIB))
    custom = load_system(_custom_system(tmp_path, "all-gather", tmp_path / "algo" / "ring"))
    built_in = tmp_path / "built_in.json"
    built_in.write_text(json.dumps({"scheduling-policy": "FIFO", "preferred-dataset-splits": 1,
                                    "endpoint-delay": 0, "all-gather-implementation": ["ring"]}))  # fmt: skip
    workload, network = (
        _one_collective(tmp_path / "w", "all-gather", MIB, 8),
        load_network(_network(tmp_path, "Ring", 8)),
    )

    times = [simulate_workload(workload, system, network).finish_ns for system in (custom, load_system(built_in))]

    assert times[0] == times[1]


def test_a_per_node_algorithm_runs_that_node_alone_and_the_others_natively(tmp_path: Path):
    write_algorithm(tmp_path / "algo" / "direct", AlgorithmSpec("direct", "all-reduce", 8, MIB))
    (tmp_path / "per_node.yml").write_text(f"1: {tmp_path / 'algo' / 'direct'}\n")
    system = tmp_path / "system.json"
    system.write_text(json.dumps({"scheduling-policy": "FIFO", "preferred-dataset-splits": 1, "local-mem-bw": 50,
                                  "endpoint-delay": 10, "all-reduce-implementation": ["ring"],
                                  "per-node-custom-implementation": str(tmp_path / "per_node.yml")}))  # fmt: skip
    two = {rank: [new_node(node, f"ar{node}", COMM_COLL_NODE, data_deps=[node - 1] if node else [], is_cpu_op=False,
                           comm_type=ALL_REDUCE, comm_size=MIB) for node in (0, 1)] for rank in range(8)}  # fmt: skip
    write_workload(tmp_path / "w", two)
    (tmp_path / "alone").mkdir()
    custom_alone = _custom_system(tmp_path / "alone", "all-reduce", tmp_path / "algo" / "direct")

    ours, theirs = _both(tmp_path / "w", system, _network(tmp_path, "Ring", 8), NetworkModel.CONGESTION_UNAWARE)

    assert ours == theirs
    native = simulate_workload(_one_collective(tmp_path / "one", "all-reduce", MIB, 8), load_system(system),
                               load_network(_network(tmp_path, "Ring", 8))).finish_ns  # fmt: skip
    direct = simulate_workload(_one_collective(tmp_path / "one", "all-reduce", MIB, 8), load_system(custom_alone),
                               load_network(_network(tmp_path, "Ring", 8))).finish_ns  # fmt: skip
    assert set(ours.values()) == {native + direct}
