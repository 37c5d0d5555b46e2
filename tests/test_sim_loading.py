"""chakra.sim.program and chakra.sim.run: rank programs built in bulk from the node table, their
compact columns (what worker processes hand back), and loading a workload's ranks in parallel."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from helpers import make_node, write_et

from chakra.errors import ChakraInputError
from chakra.generate.llm import generate_llm
from chakra.generate.specs import HARDWARE_PRESETS, ModelSpec, ParallelSpec, WorkloadSpec
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    METADATA_NODE,
)
from chakra.sim import run as sim_run
from chakra.sim.config import load_network, load_system
from chakra.sim.engine import simulate
from chakra.sim.program import (
    DO_COLLECTIVE,
    DO_COMPUTE,
    DO_INSTANT,
    DO_MEMORY,
    DO_RECV,
    DO_SEND,
    NO_SLOT,
    SLOT_COMM,
    SLOT_CPU,
    SLOT_GPU,
    CommSpec,
    RankProgram,
    program_of,
)
from chakra.sim.run import load_programs, load_workers, open_simulated, simulate_workload
from chakra.table import DEFAULT_GROUP_ID, load_table
from chakra.workload import open_workload

RANK = 3
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
#: A small GPT-like model: files of a few hundred nodes per rank.
TINY = ModelSpec("tiny", layers=4, hidden=256, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq_len=128)


def mixed_nodes() -> list:
    """One node of every kind, ids out of file order, a dependency listed in both fields, one twice."""
    return [
        make_node(20, "mm", COMP_NODE, duration_micros=4, is_cpu_op=False, num_ops=1000, tensor_size=64),
        make_node(5, "ar", COMM_COLL_NODE, [20], [20], is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=4096,
                  pg_name="2"),
        make_node(7, "host", COMP_NODE, [5, 5], duration_micros=2, is_cpu_op=True),
        make_node(30, "send", COMM_SEND_NODE, [7], is_cpu_op=False, comm_size=128, comm_dst=1, comm_tag=9),
        make_node(1, "recv", COMM_RECV_NODE, is_cpu_op=False, comm_size=128, comm_src=2),
        make_node(12, "load", MEM_LOAD_NODE, [1], duration_micros=3, tensor_size=256),
        make_node(8, "meta", METADATA_NODE, [12], duration_micros=6),
        make_node(9, "ag", COMM_COLL_NODE, [8, 30], is_cpu_op=False, comm_type=ALL_GATHER, comm_size=512),
    ]  # fmt: skip


@pytest.fixture
def mixed(tmp_path: Path) -> RankProgram:
    return program_of(load_table(write_et(tmp_path / f"m.{RANK}.et", mixed_nodes()), RANK), RANK)


def test_the_columns_hold_every_node_in_ascending_id_order(mixed: RankProgram):
    c = mixed.columns
    assert c.ids.tolist() == [1, 5, 7, 8, 9, 12, 20, 30]
    assert [mixed.name_list[i] for i in c.name_id.tolist()] == [
        "recv",
        "ar",
        "host",
        "meta",
        "ag",
        "load",
        "mm",
        "send",
    ]
    assert c.action.tolist() == [DO_RECV, DO_COLLECTIVE, DO_COMPUTE, DO_INSTANT, DO_COLLECTIVE, DO_MEMORY, DO_COMPUTE,
                                 DO_SEND]  # fmt: skip
    assert c.slot.tolist() == [NO_SLOT, SLOT_COMM, SLOT_CPU, SLOT_COMM, SLOT_COMM, SLOT_COMM, SLOT_GPU, SLOT_COMM]
    # durations in ns; memory and metadata nodes take no recorded time
    assert c.time_ns.tolist() == [0, 0, 2000, 0, 0, 0, 4000, 0]


def test_each_dependency_is_one_edge_and_children_ascend(mixed: RankProgram):
    c = mixed.columns
    # positions: 0 recv, 1 ar, 2 host, 3 meta, 4 ag, 5 load, 6 mm, 7 send
    children = [c.child_pos[c.child_ptr[p] : c.child_ptr[p + 1]].tolist() for p in range(len(mixed))]
    assert children == [[5], [2], [7], [4], [], [3], [1], [4]]
    assert c.dep_count.tolist() == [0, 1, 1, 1, 2, 1, 0, 1]  # "ar" lists mm twice, "host" lists ar twice
    assert mixed.children == children and mixed.dep_count == c.dep_count.tolist()


def test_communication_roofline_and_memory_columns(mixed: RankProgram):
    c = mixed.columns
    assert c.comm_pos.tolist() == [0, 1, 4, 7]
    # a collective's peers are the rank itself; a transfer's missing peer is the rank, a missing tag 0
    assert mixed.comm == {
        0: CommSpec(0, 128, DEFAULT_GROUP_ID, 2, RANK, 0),
        1: CommSpec(ALL_REDUCE, 4096, 2, RANK, RANK, 0),
        4: CommSpec(ALL_GATHER, 512, DEFAULT_GROUP_ID, RANK, RANK, 0),
        7: CommSpec(0, 128, DEFAULT_GROUP_ID, RANK, 1, 9),
    }
    assert mixed.roofline == {6: (1000, 64)}  # GPU compute recording both num_ops and tensor_size
    assert mixed.memory_bytes == {5: 256}


def test_views_match_the_columns(mixed: RankProgram):
    c = mixed.columns
    assert mixed.ids == c.ids.tolist()
    assert mixed.names == ["recv", "ar", "host", "meta", "ag", "load", "mm", "send"]
    assert (mixed.action, mixed.slot, mixed.time_ns) == (c.action.tolist(), c.slot.tolist(), c.time_ns.tolist())
    assert all(type(v) is int for v in [*mixed.ids, *mixed.action, *mixed.slot, *mixed.time_ns, *mixed.dep_count])


def test_a_pickled_program_carries_its_columns_not_its_views(mixed: RankProgram):
    blob = pickle.dumps(mixed)
    assert len(pickle.dumps(mixed.prepare())) == len(blob)  # built views do not travel
    back = pickle.loads(blob)
    assert not set(vars(back)) & {"children", "comm", "action"}
    for name in ("ids", "names", "action", "slot", "time_ns", "dep_count", "children", "comm", "roofline",
                 "memory_bytes", "slot_names", "cpu_slots", "missing_deps", "rank", "path"):  # fmt: skip
        assert getattr(back, name) == getattr(mixed, name), name


def test_own_slots_per_thread_and_stream(tmp_path: Path):
    nodes = [
        make_node(0, "a", COMP_NODE, duration_micros=1, is_cpu_op=True, tid=7),
        make_node(1, "b", COMP_NODE, duration_micros=1, is_cpu_op=True, tid=3),
        make_node(2, "k", COMP_NODE, duration_micros=1, is_cpu_op=False, stream=20),
        make_node(3, "c", COMP_NODE, duration_micros=1, is_cpu_op=True, tid=7),
    ]
    table = load_table(write_et(tmp_path / "t.0.et", nodes), 0)
    program = program_of(table, 0, cpu_per_thread=True, gpu_per_stream=True)
    assert program.slot_names[4:] == ["CPU thread 7", "CPU thread 3", "GPU stream 20"]
    assert program.columns.slot.tolist() == [4, 5, 6, 4]
    assert program.cpu_slots == {SLOT_CPU, 4, 5}


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (make_node(1, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE), "has no comm_size"),
        (make_node(1, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_size=8), "has no comm_type"),
        (make_node(1, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=0, comm_size=8, pg_name="x"), "names no"),
        (make_node(1, "ar", COMM_COLL_NODE, is_cpu_op=True, comm_type=0, comm_size=8), "marked is_cpu_op"),
    ],
)
def test_a_node_the_simulator_cannot_run_is_named(tmp_path: Path, node, message: str):
    nodes = [make_node(0, "ok", COMM_COLL_NODE, is_cpu_op=False, comm_type=0, comm_size=8), node]
    with pytest.raises(ChakraInputError, match=f"node 1 \\(ar\\).*{message}"):
        program_of(load_table(write_et(tmp_path / "bad.0.et", nodes), 0), 0)


# ---- a workload's ranks, in this process or in worker processes -------------------------------


@pytest.fixture(scope="module")
def llm_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small generated training step: 8 ranks with collectives in groups and pipeline sends/receives."""
    prefix = tmp_path_factory.mktemp("llm") / "w"
    generate_llm(WorkloadSpec(TINY, ParallelSpec(tp=2, pp=2, dp=2), HARDWARE_PRESETS["h100"], global_batch=8), prefix)
    return prefix


def switch_network(tmp_path: Path, npus: int):
    path = tmp_path / f"switch{npus}.yml"
    path.write_text(f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return load_network(path)


def assert_same_programs(left: dict[int, RankProgram], right: dict[int, RankProgram]) -> None:
    assert sorted(left) == sorted(right)
    for rank, program in left.items():
        other = right[rank]
        assert (program.rank, program.path, program.name_list) == (other.rank, other.path, other.name_list)
        assert (program.slot_names, program.cpu_slots, program.missing_deps) == (
            other.slot_names, other.cpu_slots, other.missing_deps,
        )  # fmt: skip
        for name, column in program.columns._asdict().items():
            theirs = getattr(other.columns, name)
            assert column.dtype == theirs.dtype and np.array_equal(column, theirs), (rank, name)


def test_loading_in_worker_processes_gives_the_programs_of_one_process(llm_workload: Path):
    files = open_simulated(llm_workload)
    in_process = load_programs(files, workers=1)
    in_workers = load_programs(files, workers=2)
    assert sorted(in_process) == list(range(8))
    assert_same_programs(in_process, in_workers)
    kinds = np.concatenate([p.columns.action for p in in_process.values()])
    assert {DO_COMPUTE, DO_COLLECTIVE, DO_SEND, DO_RECV} <= set(kinds.tolist())


@pytest.mark.parametrize("workers", [1, 2])
def test_ranks_with_equal_programs_share_their_columns_and_keep_their_groups_and_peers(llm_workload: Path, workers):
    files = open_simulated(llm_workload)
    loaded = load_programs(files, workers=workers)
    alone = {rank: program_of(load_table(path, rank), rank) for rank, path in files.files.items()}
    assert_same_programs(loaded, alone)
    # tp 2 x pp 2 x dp 2: the four ranks of a stage run one program on their own groups and peers
    assert len({id(p.columns.ids) for p in loaded.values()}) == 2
    assert not loaded[0].columns.time_ns.flags.writeable


def test_a_parallel_load_simulates_as_an_in_process_one(llm_workload: Path, tmp_path: Path):
    system, network = load_system(EXAMPLES / "system.json"), switch_network(tmp_path, 8)
    runs = [simulate_workload(llm_workload, system, network, load_workers=w) for w in (1, 2)]
    assert runs[0].finish_ns > 0
    assert runs[0].ranks == runs[1].ranks and runs[0].collectives == runs[1].collectives


def test_programs_sent_back_simulate_as_loaded_ones(llm_workload: Path, tmp_path: Path):
    files = open_simulated(llm_workload)
    loaded = load_programs(files, workers=1)
    sent = {rank: pickle.loads(pickle.dumps(program)) for rank, program in loaded.items()}
    system, network = load_system(EXAMPLES / "system.json"), switch_network(tmp_path, 8)
    ours, theirs = (simulate(p, system, network, comm_groups=files.comm_groups) for p in (loaded, sent))
    assert ours.ranks == theirs.ranks


def test_a_bad_rank_fails_the_parallel_load_with_its_file(tmp_path: Path):
    good = [make_node(0, "ok", COMP_NODE, duration_micros=1, is_cpu_op=False)]
    bad = [make_node(0, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE)]
    for rank, nodes in enumerate((good, bad, good)):
        write_et(tmp_path / f"w.{rank}.et", nodes)
    with pytest.raises(ChakraInputError, match="has no comm_size") as raised:
        load_programs(open_simulated(tmp_path / "w"), workers=2)
    assert raised.value.path is not None and Path(raised.value.path).name == "w.1.et"


def test_small_workloads_load_in_process_large_ones_in_workers(llm_workload: Path, monkeypatch: pytest.MonkeyPatch):
    files = open_simulated(llm_workload)
    assert load_workers(files) == 1  # a few KiB: starting processes would cost more
    monkeypatch.setattr(sim_run, "WORKER_START_S", 0.0)  # workers that cost nothing to start
    monkeypatch.setattr(sim_run, "usable_cpus", lambda: 4)
    assert load_workers(files) == 4
    monkeypatch.setattr(sim_run, "usable_cpus", lambda: 64)
    assert load_workers(files) == 8  # at most one per rank
    single = open_workload(f"{llm_workload}.0.et")
    assert load_workers(single) == 1
