"""chakra.sim.engine: issue order, hardware slots, matching across ranks, and workloads that hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SIM_SYSTEM_JSON, make_node, write_et

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    METADATA_NODE,
)
from chakra.sim.collectives import collective_time_ns, collective_times, p2p_time_ns
from chakra.sim.config import load_network, load_system, scale_network
from chakra.sim.engine import simulate
from chakra.sim.program import program_of
from chakra.sim.results import SimulationStuck
from chakra.sim.run import simulate_workload
from chakra.table import load_table

NS_PER_US = 1000
SYSTEM_JSON = SIM_SYSTEM_JSON


def network_yaml(npus: int) -> str:
    return f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


@pytest.fixture
def configs(tmp_path: Path):
    """(system, network for 2 NPUs, network for 4 NPUs)."""
    (tmp_path / "sys.json").write_text(SYSTEM_JSON)
    (tmp_path / "net2.yml").write_text(network_yaml(2))
    (tmp_path / "net4.yml").write_text(network_yaml(4))
    return load_system(tmp_path / "sys.json"), load_network(tmp_path / "net2.yml"), load_network(tmp_path / "net4.yml")


def comp(node_id: int, dur_us: int, *deps: int, cpu: bool = False):
    return make_node(node_id, type=COMP_NODE, duration_micros=dur_us, data_deps=list(deps), is_cpu_op=cpu)


def allreduce(node_id: int, size: int, *deps: int):
    return make_node(
        node_id, type=COMM_COLL_NODE, data_deps=list(deps), is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=size
    )


def run(tmp_path: Path, per_rank: dict[int, list], system, network, **kwargs):
    for rank, nodes in per_rank.items():
        write_et(tmp_path / f"w.{rank}.et", nodes)
    return simulate_workload(tmp_path / "w", system, network, **kwargs)


def test_a_compute_chain_takes_the_sum_of_its_durations(tmp_path, configs):
    system, net2, _ = configs
    nodes = [comp(1, 5), comp(2, 7, 1), comp(3, 11, 2)]
    result = run(tmp_path, {0: nodes, 1: nodes}, system, net2)
    assert result.ranks[0].finish_ns == (5 + 7 + 11) * NS_PER_US
    assert result.astra_lines()[0] == f"sys[0] finished, {23 * NS_PER_US} cycles, exposed communication 0 cycles."


def test_independent_gpu_nodes_share_one_compute_slot(tmp_path, configs):
    system, net2, _ = configs
    nodes = [comp(1, 5), comp(2, 7)]
    assert run(tmp_path, {0: nodes, 1: nodes}, system, net2).ranks[0].finish_ns == 12 * NS_PER_US


def test_ready_nodes_issue_in_ascending_id_order_whatever_the_file_order(tmp_path, configs):
    system, net2, _ = configs
    # file order 7, 3, 5 (all ready at once, one GPU slot): ASTRA-sim issues 3, 5, 7; node 9 waits for 7
    nodes = [comp(7, 2), comp(3, 5), comp(5, 11), comp(9, 1, 7)]
    result = run(tmp_path, {0: nodes, 1: nodes}, system, net2, keep_intervals=True)
    starts = {node_id: start for node_id, start, _, _ in result.intervals[0]}
    assert starts == {3: 0, 5: 5 * NS_PER_US, 7: 16 * NS_PER_US, 9: 18 * NS_PER_US}


def test_cpu_and_gpu_work_overlap_on_their_own_slots(tmp_path, configs):
    system, net2, _ = configs
    nodes = [comp(1, 5, cpu=True), comp(2, 7)]
    assert run(tmp_path, {0: nodes, 1: nodes}, system, net2).ranks[0].finish_ns == 7 * NS_PER_US


def test_a_zero_duration_node_takes_one_cycle(tmp_path, configs):
    system, net2, _ = configs
    assert run(tmp_path, {0: [comp(1, 0)], 1: [comp(1, 0)]}, system, net2).ranks[0].finish_ns == 1


def test_each_member_starts_its_part_of_a_collective_when_it_issues_it(tmp_path, configs):
    system, net2, _ = configs
    size = 1 << 20
    late = 30  # µs of compute before rank 1 reaches the all-reduce
    result = run(tmp_path, {0: [allreduce(1, size)], 1: [comp(1, late), allreduce(2, size, 1)]}, system, net2)
    times = collective_times(ALL_REDUCE, size, None, system, net2, offsets_ns=(0, late * NS_PER_US))
    assert (result.ranks[0].finish_ns, result.ranks[1].finish_ns) == (times.of(0), times.of(1))
    assert result.collectives["ALL_REDUCE"]["count"] == 1


def test_a_late_member_holds_the_collective_up_and_ends_last(tmp_path, configs):
    system, net2, _ = configs
    size = 1 << 20
    late_ns = 30 * NS_PER_US
    result = run(tmp_path, {0: [allreduce(1, size)], 1: [comp(1, 30), allreduce(2, size, 1)]}, system, net2)
    alone_ns = collective_time_ns(ALL_REDUCE, size, None, system, net2)
    assert alone_ns < result.ranks[0].finish_ns < result.ranks[1].finish_ns <= late_ns + alone_ns


def test_a_collective_left_apart_by_a_short_algorithm_list_ends_each_slice_on_its_own(tmp_path, configs):
    # one algorithm for a 2-D network: the all-reduce runs in each dimension-0 pair alone, so ranks 0
    # and 1 end without waiting for rank 3, who is late in the other pair (ASTRA-sim does the same)
    system, _, _ = configs
    (tmp_path / "net2x2.yml").write_text(
        "topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"
    )
    network = load_network(tmp_path / "net2x2.yml")
    size = 1 << 20
    on_time = [allreduce(1, size), comp(2, 1, 1)]
    late = [comp(1, 40), allreduce(2, size, 1)]
    result = run(tmp_path, {0: on_time, 1: on_time, 2: on_time, 3: late}, system, network)
    alone_ns = collective_time_ns(ALL_REDUCE, size, None, system, network)
    assert result.ranks[0].finish_ns == result.ranks[1].finish_ns == alone_ns + NS_PER_US
    assert result.ranks[3].finish_ns > 40 * NS_PER_US + alone_ns // 2
    assert result.collectives["ALL_REDUCE"]["count"] == 1


def test_compute_overlaps_a_collective_it_does_not_depend_on(tmp_path, configs):
    system, net2, _ = configs
    size = 1 << 20
    coll_ns = collective_time_ns(ALL_REDUCE, size, None, system, net2)
    long_us = coll_ns // NS_PER_US * 2
    nodes = [allreduce(1, size), comp(2, long_us)]
    result = run(tmp_path, {0: nodes, 1: nodes}, system, net2)
    assert result.ranks[0].finish_ns == long_us * NS_PER_US
    assert result.ranks[0].astra_exposed_comm_ns == 0


def test_sends_and_receives_match_by_peer_tag_and_size(tmp_path, configs):
    system, net2, _ = configs
    size = 4096
    send = make_node(1, type=COMM_SEND_NODE, is_cpu_op=False, comm_src=0, comm_dst=1, comm_tag=7, comm_size=size)
    recv = make_node(1, type=COMM_RECV_NODE, is_cpu_op=False, comm_src=0, comm_dst=1, comm_tag=7, comm_size=size)
    after = comp(2, 3, 1)
    result = run(tmp_path, {0: [send], 1: [recv, after]}, system, net2)
    arrival = p2p_time_ns(0, 1, size, net2)
    assert result.ranks[0].finish_ns == arrival
    assert result.ranks[1].finish_ns == arrival + 3 * NS_PER_US


def test_metadata_nodes_finish_at_once(tmp_path, configs):
    system, net2, _ = configs
    nodes = [make_node(0, type=METADATA_NODE), comp(1, 4, 0)]
    assert run(tmp_path, {0: nodes, 1: nodes}, system, net2).ranks[0].finish_ns == 4 * NS_PER_US


def test_subgroup_collectives_match_only_their_members(tmp_path, configs):
    system, _, net4 = configs
    size = 1 << 16
    pair = [make_node(1, type=COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=size, pg_name="1")]
    other = [make_node(1, type=COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=size, pg_name="2")]
    (tmp_path / "groups.json").write_text('{"1": [0, 1], "2": [2, 3]}')
    groups = tmp_path / "groups.json"
    result = run(tmp_path, {0: pair, 1: pair, 2: other, 3: other}, system, net4, comm_groups_path=groups)
    assert result.ranks[0].finish_ns == collective_time_ns(ALL_REDUCE, size, [0, 1], system, net4)
    assert result.collectives["ALL_REDUCE"]["count"] == 2


def test_a_collective_one_rank_never_reaches_is_diagnosed(tmp_path, configs):
    system, net2, _ = configs
    with pytest.raises(SimulationStuck, match=r"rank 0 node 1 .* ranks \[1\] never issue it"):
        run(tmp_path, {0: [allreduce(1, 1024)], 1: [comp(1, 1)]}, system, net2)


def test_a_receive_without_its_send_is_diagnosed(tmp_path, configs):
    system, net2, _ = configs
    recv = make_node(1, type=COMM_RECV_NODE, is_cpu_op=False, comm_src=0, comm_dst=1, comm_tag=1, comm_size=8)
    with pytest.raises(SimulationStuck, match="receive of 8 bytes from rank 0"):
        run(tmp_path, {0: [comp(1, 1)], 1: [recv]}, system, net2)


def test_a_dependency_cycle_is_diagnosed(tmp_path, configs):
    system, net2, _ = configs
    cycle = [comp(1, 1, 2), comp(2, 1, 1)]
    with pytest.raises(SimulationStuck, match="never finish"):
        run(tmp_path, {0: cycle, 1: [comp(1, 1)]}, system, net2)


def test_a_rank_without_its_file_is_an_error(tmp_path, configs):
    system, _, net4 = configs
    with pytest.raises(ChakraInputError, match=r"4 NPUs but ranks 2, 3 have no ET file"):
        run(tmp_path, {0: [comp(1, 1)], 1: [comp(1, 1)]}, system, net4)


def test_compute_scale_shrinks_compute_only(tmp_path, configs):
    system, net2, _ = configs
    nodes = [comp(1, 10)]
    for rank in (0, 1):
        write_et(tmp_path / f"w.{rank}.et", nodes)
    programs = {rank: program_of(load_table(tmp_path / f"w.{rank}.et", rank), rank) for rank in (0, 1)}
    assert simulate(programs, system, net2, compute_scale=0.5).ranks[0].finish_ns == 5 * NS_PER_US


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -1.0])
def test_a_compute_scale_that_is_not_a_finite_number_at_least_0_is_refused(tmp_path, configs, scale):
    system, net2, _ = configs
    with pytest.raises(ChakraInputError, match="compute scale"):
        simulate({}, system, net2, compute_scale=scale)


def test_cpu_ops_of_different_threads_overlap_with_a_slot_per_thread(tmp_path, configs):
    system, net2, _ = configs
    nodes = [
        make_node(1, type=COMP_NODE, duration_micros=5, is_cpu_op=True, tid=1),
        make_node(2, type=COMP_NODE, duration_micros=7, is_cpu_op=True, tid=2),
    ]
    assert run(tmp_path, {0: nodes, 1: nodes}, system, net2).ranks[0].finish_ns == 12 * NS_PER_US  # ASTRA-sim
    per_thread = run(tmp_path, {0: nodes, 1: nodes}, system, net2, cpu_per_thread=True)
    assert per_thread.ranks[0].finish_ns == 7 * NS_PER_US


def test_replay_only_replays_communication_with_its_recorded_duration(tmp_path, configs):
    import dataclasses

    system, net2, _ = configs
    replaying = dataclasses.replace(system, replay_only=True)
    coll = make_node(
        1, type=COMM_COLL_NODE, duration_micros=40, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1 << 20
    )
    result = run(tmp_path, {0: [coll], 1: [comp(1, 3)]}, replaying, net2)
    assert (result.ranks[0].finish_ns, result.ranks[1].finish_ns) == (40 * NS_PER_US, 3 * NS_PER_US)


def test_time_splits_into_compute_exposed_communication_overlap_and_idle(tmp_path, configs):
    system, net2, _ = configs
    size = 1 << 20
    compute_us = 10
    # rank 0: the all-reduce alongside 10 µs of compute; rank 1 reaches it only after 10 µs of compute
    rank0 = [allreduce(1, size), comp(2, compute_us)]
    rank1 = [comp(1, compute_us), allreduce(2, size, 1)]
    stats = run(tmp_path, {0: rank0, 1: rank1}, system, net2).ranks
    # rank 0's all-reduce runs from 0, alongside its compute for 10 µs; rank 1 starts its part at 10 µs
    ends = collective_times(ALL_REDUCE, size, None, system, net2, offsets_ns=(0, compute_us * NS_PER_US))
    assert (stats[0].overlap_ns, stats[0].comm_exposed_ns) == (
        compute_us * NS_PER_US,
        ends.of(0) - compute_us * NS_PER_US,
    )
    assert (stats[1].compute_only_ns, stats[1].comm_exposed_ns, stats[1].idle_ns) == (
        compute_us * NS_PER_US,
        ends.of(1) - compute_us * NS_PER_US,
        0,
    )
    for s in stats.values():
        assert s.compute_only_ns + s.comm_exposed_ns + s.overlap_ns + s.idle_ns == s.finish_ns


def _remote_memory(memory_type: str, **extra):
    from chakra.sim.config import RemoteMemoryConfig

    return RemoteMemoryConfig(memory_type, latency_ns=100.0, bandwidth_bytes_per_ns=1.0, **extra)


def test_remote_memory_accesses_take_latency_plus_bytes_over_bandwidth(tmp_path, configs):
    from chakra.schema.protobuf.et_def_pb2 import MEM_LOAD_NODE

    system, net2, _ = configs
    loads = [make_node(i, type=MEM_LOAD_NODE, is_cpu_op=False, tensor_size=1000) for i in (1, 2)]
    result = run(tmp_path, {0: loads, 1: loads}, system, net2, remote_memory=_remote_memory("PER_NPU_MEMORY_EXPANSION"))
    assert result.ranks[0].finish_ns == 2 * (100 + 1000)  # one at a time per NPU
    pooled = run(tmp_path, {0: loads, 1: loads}, system, net2, remote_memory=_remote_memory("MEMORY_POOL"))
    assert pooled.finish_ns == 4 * (100 + 1000)  # one queue for everyone


def test_memory_nodes_without_memory_expansion_are_refused(tmp_path, configs):
    from chakra.schema.protobuf.et_def_pb2 import MEM_LOAD_NODE

    system, net2, _ = configs
    loads = [make_node(1, type=MEM_LOAD_NODE, is_cpu_op=False, tensor_size=1000)]
    with pytest.raises(ChakraInputError, match="no memory expansion"):
        run(tmp_path, {0: loads, 1: loads}, system, net2, remote_memory=_remote_memory("NO_MEMORY_EXPANSION"))


def test_a_group_with_ranks_outside_the_network_is_refused(tmp_path, configs):
    system, net2, _ = configs
    (tmp_path / "groups.json").write_text('{"1": [0, 5]}')
    with pytest.raises(ChakraInputError, match=r"group 1 lists ranks \[5\]"):
        run(tmp_path, {0: [comp(1, 1)], 1: [comp(1, 1)]}, system, net2, comm_groups_path=tmp_path / "groups.json")


def grouped_allreduce(node_id: int, size: int, pg_name: str):
    return make_node(
        node_id, type=COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=size, pg_name=pg_name
    )


def test_a_collective_from_a_rank_outside_its_group_is_refused(tmp_path, configs):
    system, _, net4 = configs
    (tmp_path / "groups.json").write_text('{"1": [0, 1], "2": [2, 3]}')
    per_rank = {0: [grouped_allreduce(1, 1024, "1")], 1: [grouped_allreduce(1, 1024, "1")]}
    per_rank |= {2: [grouped_allreduce(1, 1024, "1")], 3: [comp(1, 1)]}  # rank 2 uses group 1 by mistake
    with pytest.raises(
        ChakraInputError, match=r"rank 2 node 1 .* group 1, whose members in .*groups.json are \[0, 1\]"
    ):
        run(tmp_path, per_rank, system, net4, comm_groups_path=tmp_path / "groups.json")


def test_a_group_listing_a_rank_twice_is_refused(tmp_path, configs):
    system, net2, _ = configs
    (tmp_path / "groups.json").write_text('{"1": [0, 1, 1]}')
    with pytest.raises(ChakraInputError, match="group 1 lists a rank more than once"):
        run(tmp_path, {0: [comp(1, 1)], 1: [comp(1, 1)]}, system, net2, comm_groups_path=tmp_path / "groups.json")


# -- what-if magnitudes, on generated workloads (deterministic: no recording, no machine load) ------


@pytest.fixture(scope="module")
def generated_step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated Llama 3 8B training step (2 layers) on 2 tensor-parallel ranks, whose all-reduces
    sit between the compute they separate, with roofline durations: the same every run."""
    from chakra.generate.llm import generate_llm
    from chakra.generate.spec_input import resolve_spec

    prefix = tmp_path_factory.mktemp("generated") / "llama"
    spec = resolve_spec("llama3-8b", overrides={"parallel.tp": 2, "global_batch": 2, "model.layers": 2})
    generate_llm(spec, prefix)
    return prefix


def test_halving_compute_halves_a_compute_bound_generated_step(generated_step, configs):
    system, net2, _ = configs
    fast = scale_network(net2, bandwidth_scale=1e4, latency_scale=1e-3)  # the network next to free
    base = simulate_workload(generated_step, system, fast).finish_ns
    # what stays when compute is free: the all-reduces (their reductions cost local memory bandwidth)
    rest = simulate_workload(generated_step, system, fast, compute_scale=0.0).finish_ns

    halved = simulate_workload(generated_step, system, fast, compute_scale=0.5).finish_ns

    assert (halved - rest) / (base - rest) == pytest.approx(0.5, abs=0.01)


def test_twice_the_bandwidth_halves_the_time_a_slow_network_adds_to_a_generated_step(generated_step, configs):
    system, net2, _ = configs
    fast = scale_network(net2, bandwidth_scale=1e4, latency_scale=1e-3)
    slow = scale_network(net2, bandwidth_scale=1e-3, latency_scale=1e-3)  # bandwidth-bound all-reduces
    base = simulate_workload(generated_step, system, fast).finish_ns
    added = simulate_workload(generated_step, system, slow).finish_ns - base
    added_at_twice = simulate_workload(generated_step, system, scale_network(slow, bandwidth_scale=2)).finish_ns - base

    assert added > 0
    assert added_at_twice / added == pytest.approx(0.5, abs=0.005)
