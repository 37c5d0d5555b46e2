"""ASTRA-sim's collective algorithms in chakra.sim.collectives: halvingDoubling, direct,
doubleBinaryTree, and the types ASTRA-sim does not simulate (``chakra-astra-compat``).

Two kinds of expectations:

* **hand-derived** on the small network of ``test_sim_collectives.py`` (link latency 100 ns,
  2 bytes/ns, so one hop of ``m`` bytes costs ``trunc(100·hops + m/2)``; endpoint ``d`` = 10 ns;
  ``t_red(m) = 3·trunc(m/10)``; one chunk), the arithmetic beside each;
* **measured** from ASTRA-sim's binary ``AstraSim_Analytical_Congestion_Unaware`` (the build of
  ``../shared/astra-sim/bin``, ASTRA-sim 518bd51), the literal cycles it printed
  (``sys[r] finished, T cycles, exposed communication E cycles``). Those runs used
  ``examples/astra/system.json`` (LIFO, localBWAware, endpoint-delay 10, local-mem-bw 1600) with
  every ``*-implementation`` set to the algorithm named, ``preferred-dataset-splits`` and
  ``active-chunks-per-dimension`` as given, a 1-D network ``[Topology] npus_count [n] bandwidth
  [50.0] latency [500.0]``, no remote memory, and the workload this file writes (what ``chakra
  generate micro COLLECTIVE --sizes S --rank-counts n`` writes: one collective per rank). No test
  runs the binary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_sim_collectives import make_system, one_dim

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    COMM_COLL_NODE,
    COMP_NODE,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    SCATTER,
)
from chakra.sim.collectives import astra_compat_refusal, collective_time_ns, collective_times, replays_duration
from chakra.sim.config import NetworkConfig, load_system
from chakra.sim.run import simulate_workload
from chakra.trace import new_node
from chakra.workload_writer import write_workload

EXAMPLE_SYSTEM = Path(__file__).resolve().parents[1] / "examples" / "astra" / "system.json"
IMPLEMENTATION_KEYS = (
    "all-reduce-implementation",
    "reduce-scatter-implementation",
    "all-gather-implementation",
    "all-to-all-implementation",
)
KIB, MIB = 1 << 10, 1 << 20


def measured_system(algorithm: str, splits: int = 4, active: int = 1, **keys: Any):
    """The system of the measured runs: the example file with ``algorithm`` for every type."""
    overrides: dict[str, Any] = {key: [algorithm] for key in IMPLEMENTATION_KEYS}
    overrides |= {"preferred-dataset-splits": splits, "active-chunks-per-dimension": active}
    return load_system(EXAMPLE_SYSTEM, overrides | {key.replace("_", "-"): value for key, value in keys.items()})


def measured_network(topology: str, npus: int) -> NetworkConfig:
    return NetworkConfig((topology,), (npus,), (50.0,), (500.0,))


def one_collective(tmp_path: Path, comm_type: int, size: int, npus: int) -> Path:
    """Every rank issues one collective and nothing else (``chakra generate micro``'s sweep workload)."""
    node = new_node(0, "collective", COMM_COLL_NODE, is_cpu_op=False, comm_type=comm_type, comm_size=size)
    return write_workload(tmp_path / "w", {rank: [node] for rank in range(npus)}).prefix


def finish_and_exposed(result) -> set[tuple[int, int]]:
    return {(stats.finish_ns, stats.astra_exposed_comm_ns) for stats in result.ranks.values()}


# --- halvingDoubling (HalvingDoubling.cc) -------------------------------------------------------
# 8-NPU Ring, S = 8000: step s sends m_s = 8000 / 2^(s+1) at distance 2^s (= 2^s hops):
# 4000 B (1 hop) 2100 ns, 2000 B (2 hops) 1200 ns, 1000 B (4 hops) 900 ns.
HD = make_system(implementation=("halvingDoubling",))


def test_halving_doubling_reduce_scatter_reduces_all_but_the_first_message():
    # HalvingDoubling::insert_packet: a received message is reduced at the size of the next one,
    # and the last receive is not reduced: t_red(2000) + t_red(1000), never t_red(4000)
    expected = 10 + (2100 + 10) + (1200 + 10 + 600) + (900 + 10 + 300)
    assert collective_time_ns(REDUCE_SCATTER, 8000, None, HD, one_dim("Ring", 8)) == expected == 5140


def test_halving_doubling_all_reduce_comes_back_from_the_halved_size_without_reductions():
    reduce_scatter = 10 + (2100 + 10) + (1200 + 10 + 600) + (900 + 10 + 300)
    # back from m_L = 8000 / 2^4 = 500 doubled: 1000 B at distance 4, 2000 B at 2, 4000 B at 1
    expected = reduce_scatter + (900 + 10) + (1200 + 10) + (2100 + 10)
    assert collective_time_ns(ALL_REDUCE, 8000, None, HD, one_dim("Ring", 8)) == expected == 9370


def test_halving_doubling_all_reduce_doubles_the_truncated_halves():
    # S = 1030 on 4 NPUs: sent 515 (distance 1), 257 (distance 2); back from 1030 / 8 = 128:
    # 256 B at distance 2 (200 + 128), 512 B at distance 1 (100 + 256), not 257 and 515
    expected = 10 + (357 + 10) + (328 + 10 + 3 * 25) + (328 + 10) + (356 + 10)
    assert collective_time_ns(ALL_REDUCE, 1030, None, HD, one_dim("Ring", 4)) == expected


def test_halving_doubling_on_two_npus_reduces_nothing():
    # n = 2: one step each way, the only receive of each half is never reduced
    assert collective_time_ns(REDUCE_SCATTER, 2000, None, HD, one_dim("Ring", 2)) == 10 + (600 + 10)
    assert collective_time_ns(ALL_REDUCE, 2000, None, HD, one_dim("Ring", 2)) == 10 + 2 * (600 + 10)


def test_halving_doubling_all_gather_starts_far_and_doubles_the_size():
    # 1000 B at distance 4 (400 + 500), 2000 B at distance 2 (200 + 1000), 4000 B at distance 1 (100 + 2000)
    expected = 10 + (900 + 10) + (1200 + 10) + (2100 + 10)
    assert collective_time_ns(ALL_GATHER, 1000, None, HD, one_dim("Ring", 8)) == expected


def test_halving_doubling_all_gather_on_six_npus_pairs_at_distances_three_and_one():
    # floor(log2 6) = 2 steps: 1000 B with p ± 3 (3 hops: 800 ns), 2000 B with p ± 1 (1100 ns)
    assert collective_time_ns(ALL_GATHER, 1000, None, HD, one_dim("Ring", 6)) == 10 + (800 + 10) + (1100 + 10)


def test_halving_doubling_all_to_all_is_refused_as_astra_sim_does():
    with pytest.raises(ChakraInputError, match="halvingDoubling cannot run ALL_TO_ALL") as caught:
        collective_time_ns(ALL_TO_ALL, 8000, None, HD, one_dim("Ring", 8))
    assert "unknown communication type for HalvingDoubling" in caught.value.message
    assert caught.value.hint is not None and "all-to-all-implementation" in caught.value.hint


@pytest.mark.parametrize("comm_type", [ALL_REDUCE, REDUCE_SCATTER])
def test_halving_doubling_needs_a_power_of_two_to_reduce(comm_type: int):
    # ASTRA-sim's run never finishes (AR: no rank; RS: only some) with 3, 6 or 12 NPUs
    with pytest.raises(ChakraInputError, match="power-of-two"):
        collective_time_ns(comm_type, 6000, None, HD, one_dim("Ring", 6))


def test_halving_doubling_all_gather_whose_pairs_do_not_match_is_refused():
    # 3 NPUs, distance 1: 0 and 1 pair, 2 sends to 0 (2 + 1 mod 3), which sends to 1: NPU 2 never finishes
    with pytest.raises(ChakraInputError, match="pairs do not match"):
        collective_time_ns(ALL_GATHER, 1000, None, HD, one_dim("Ring", 3))


@pytest.mark.parametrize(
    ("comm_type", "size", "topology", "npus", "active", "cycles"),
    [
        (ALL_REDUCE, 64 * MIB, "Ring", 4, 1, 1918652),
        (ALL_REDUCE, 64 * MIB, "Ring", 8, 1, 2262948),
        (ALL_REDUCE, 64 * MIB, "Ring", 16, 1, 2459136),
        (REDUCE_SCATTER, 64 * MIB, "Switch", 8, 1, 1153080),
        (ALL_REDUCE, 1 * MIB, "FullyConnected", 16, 2, 26904),
        (ALL_GATHER, 256 * KIB, "Ring", 8, 1, 48332),
    ],
)
def test_halving_doubling_matches_astra_sim(tmp_path, comm_type, size, topology, npus, active, cycles):
    # measured: halvingDoubling, preferred-dataset-splits 4
    prefix = one_collective(tmp_path, comm_type, size, npus)
    result = simulate_workload(
        prefix, measured_system("halvingDoubling", active=active), measured_network(topology, npus)
    )
    assert finish_and_exposed(result) == {(cycles, cycles)}


# --- direct (AllToAll.cc over Ring.cc) ----------------------------------------------------------
# 4-NPU Ring, S = 4000, m = 1000: offsets +1, +2, +3 are 1, 2, 1 hops (600, 700, 600 ns).
DIRECT = make_system(implementation=("direct",))


def test_direct_reduce_scatter_reduces_the_pieces_side_by_side():
    # all three pieces are sent at d and reduced as they arrive, in parallel: the slowest piece
    # (700) + d + one t_red(1000)
    assert collective_time_ns(REDUCE_SCATTER, 4000, None, DIRECT, one_dim("Ring", 4)) == 10 + 700 + 10 + 300


def test_direct_all_reduce_sends_the_second_sweep_as_reductions_free_packets():
    # first sweep: arrivals at 610, 710, 610; reductions done at 920, 920, 1020. The first reduction
    # done after the last arrival (920) frees two packets: +1 and +2 go at 920, +3 when the last
    # reduction is done (1020). Arrivals 1520, 1620, 1620, then d.
    assert collective_time_ns(ALL_REDUCE, 4000, None, DIRECT, one_dim("Ring", 4)) == 1620 + 10


def test_direct_all_reduce_holds_the_second_sweep_until_every_piece_arrived():
    # 8-NPU Ring, m = 1000: offsets +1 … +7 are 1, 2, 3, 4, 3, 2, 1 hops (600 … 900 … 600 ns).
    # Arrivals 610 … 910 (+4 last); reductions done at 920 (+1, +7), 1020, 1120, 1220 (+4). Nothing
    # is sent before the last arrival; from then on each finished reduction frees one packet, sent in
    # rotation order: +1, +2 at 920, +3, +4 at 1020, +5, +6 at 1120, +7 at 1220. Last arrivals:
    # +4 at 1020 + 900 and +5 at 1120 + 800 = 1920, then d.
    assert collective_time_ns(ALL_REDUCE, 8000, None, DIRECT, one_dim("Ring", 8)) == 1920 + 10


def test_direct_all_gather_and_all_to_all_send_everything_at_once():
    assert collective_time_ns(ALL_GATHER, 1000, None, DIRECT, one_dim("Ring", 4)) == 10 + 700 + 10
    assert collective_time_ns(ALL_TO_ALL, 4000, None, DIRECT, one_dim("Ring", 4)) == 10 + 700 + 10


def test_direct_with_a_window_reduces_only_the_non_zero_latency_batches():
    system = make_system(implementation=("direct2",))
    # +1, +2 sent at d (arrive 610, 710). 610: reduced (620 + 300) and +3 sent at 920 (arrives 1520);
    # 710: reduced, nothing left to send; 1520 starts a new batch of zero-latency packets, which are
    # not reduced: done at 1520 + d with two packets free
    assert collective_time_ns(REDUCE_SCATTER, 4000, None, system, one_dim("Ring", 4)) == 1530


@pytest.mark.parametrize(
    ("algorithm", "comm_type", "size", "topology", "npus", "splits", "active", "cycles"),
    [
        ("direct", ALL_REDUCE, 64 * MIB, "Ring", 16, 4, 1, 190228),
        ("direct", ALL_REDUCE, 64 * MIB, "Switch", 16, 4, 1, 172228),
        ("direct", ALL_REDUCE, 64 * MIB, "FullyConnected", 16, 4, 1, 168228),
        ("direct", REDUCE_SCATTER, 64 * MIB, "Ring", 8, 4, 1, 180048),
        ("direct", ALL_REDUCE, 256 * KIB, "Ring", 4, 4, 1, 10680),
        ("direct2", ALL_REDUCE, 1 * MIB, "Ring", 8, 1, 1, 28104),
        ("direct3", REDUCE_SCATTER, 64 * MIB, "Ring", 16, 8, 2, 251312),
        ("direct3", ALL_REDUCE, 64 * MIB, "Switch", 16, 1, 1, 814949),
    ],
)
def test_direct_matches_astra_sim(tmp_path, algorithm, comm_type, size, topology, npus, splits, active, cycles):
    prefix = one_collective(tmp_path, comm_type, size, npus)
    system = measured_system(algorithm, splits=splits, active=active)
    result = simulate_workload(prefix, system, measured_network(topology, npus))
    assert finish_and_exposed(result) == {(cycles, cycles)}


# --- doubleBinaryTree (DoubleBinaryTreeAllReduce.cc, BinaryTree.cc) -----------------------------
# 4-NPU Ring, every message the full 1000-byte chunk: 1 hop 600 ns, 2 hops 700 ns; t_red(1000) = 300.
DBT = make_system(implementation=("doubleBinaryTree",))


def test_double_binary_tree_members_finish_by_their_place_in_the_tree():
    # RootMax tree: root 3 over 1, whose children are the leaves 0 and 2. Leaves: d, up (600) at 610;
    # 1 reduces both (620 + 300) and sends up at 920 (2 hops: 700); 3 reduces (1630 + 300) and sends
    # back: done at 1930; 1 reduces at 2630 + 10 + 300 and sends down: done at 2940; leaves get it at
    # 3540, then d
    times = collective_times(ALL_REDUCE, 1000, None, DBT, one_dim("Ring", 4))
    assert times.by_rank_ns == (3550, 2940, 3550, 1930)
    assert times.longest_ns == collective_time_ns(ALL_REDUCE, 1000, None, DBT, one_dim("Ring", 4)) == 3550
    assert times.trees == 1


def test_double_binary_tree_chunks_alternate_trees_and_start_as_each_member_is_free():
    # chunk 1 uses the RootMin tree (root 0 over 2, leaves 1 and 3), each member starting it when its
    # chunk 0 ended (3550, 2940, 3550, 1930): leaf 3's data waits at 2 from 2540, leaf 1's arrives at
    # 3550; 2 starts at 3550, reduces both (3860), up to 0 (4560); 0 reduces and sends back: 4870;
    # 2 reduces (5880) and sends down: 5880; leaves: 6480 + d
    system = make_system(implementation=("doubleBinaryTree",), preferred_dataset_splits=2)
    times = collective_times(ALL_REDUCE, 2000, None, system, one_dim("Ring", 4))
    assert times.by_rank_ns == (4870, 6490, 5880, 6490) and times.trees == 2


def test_double_binary_tree_alternation_continues_from_the_previous_collective():
    # after an odd number of trees the next collective starts on RootMin: the RootMax times rotated
    times = collective_times(ALL_REDUCE, 1000, None, DBT, one_dim("Ring", 4), first_tree=1)
    assert times.by_rank_ns == (1930, 3550, 2940, 3550)


def test_double_binary_tree_runs_an_all_reduce_for_every_type():
    network = one_dim("Ring", 4)
    expected = collective_times(ALL_REDUCE, 1000, None, DBT, network).by_rank_ns
    for comm_type in (REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL):
        assert collective_times(comm_type, 1000, None, DBT, network).by_rank_ns == expected


def test_double_binary_tree_needs_a_power_of_two():
    # ASTRA-sim's tree holds 2^floor(log2 n) NPUs and segfaults on the others
    with pytest.raises(ChakraInputError, match="power-of-two"):
        collective_time_ns(ALL_REDUCE, 6000, None, DBT, one_dim("Ring", 6))


def test_double_binary_tree_members_leave_the_collective_apart(tmp_path):
    # the engine ends each member's collective at its own time; the next collective of the type
    # continues the trees' alternation (1 tree taken: RootMin next) and each member starts it when it
    # issues it: the same as one collective of two chunks (ASTRA-sim's binary agrees)
    node = new_node(0, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1000)
    again = new_node(1, "ar2", COMM_COLL_NODE, data_deps=[0], is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=1000)
    prefix = write_workload(tmp_path / "once", {rank: [node] for rank in range(4)}).prefix
    result = simulate_workload(prefix, DBT, one_dim("Ring", 4))
    assert [result.ranks[rank].finish_ns for rank in range(4)] == [3550, 2940, 3550, 1930]
    prefix = write_workload(tmp_path / "twice", {rank: [node, again] for rank in range(4)}).prefix
    result = simulate_workload(prefix, DBT, one_dim("Ring", 4))
    assert [result.ranks[rank].finish_ns for rank in range(4)] == [4870, 6490, 5880, 6490]


@pytest.mark.parametrize(
    ("comm_type", "size", "topology", "npus", "splits", "active", "cycles"),
    [
        # the case: 4 ranks, 16 KiB
        (ALL_REDUCE, 16 * KIB, "Ring", 4, 4, 1, (10052, 11730, 11144, 11730)),
        (REDUCE_SCATTER, 1 * MIB, "Switch", 8, 4, 2, (69722, 75614) * 4),
        (ALL_TO_ALL, 256 * KIB, "Ring", 2, 1, 1, (11283, 5891)),
        (ALL_REDUCE, 64 * MIB, "Ring", 8, 3, 2, (5016386, 5433562) * 4),
        (
            ALL_GATHER, 64 * MIB, "FullyConnected", 16, 3, 1,
            (11478015, 13272548, 12855372, 13272548, 12396253, 13272548, 12855372, 13272548,
             11937134, 13272548, 12855372, 13272548, 12396253, 13272548, 12855372, 13272548),
        ),
    ],
)  # fmt: skip
def test_double_binary_tree_matches_astra_sim(tmp_path, comm_type, size, topology, npus, splits, active, cycles):
    # measured: doubleBinaryTree; every rank's own finish (= its exposed communication)
    prefix = one_collective(tmp_path, comm_type, size, npus)
    system = measured_system("doubleBinaryTree", splits=splits, active=active)
    result = simulate_workload(prefix, system, measured_network(topology, npus))
    assert tuple((result.ranks[r].finish_ns, result.ranks[r].astra_exposed_comm_ns) for r in range(npus)) == tuple(
        (c, c) for c in cycles
    )


# --- types ASTRA-sim does not simulate: chakra-astra-compat -------------------------------------


def test_the_compat_switch_is_a_system_key_off_by_default():
    assert not measured_system("ring").astra_compat
    system = measured_system("ring", chakra_astra_compat=1)
    assert system.astra_compat and "chakra-astra-compat" not in system.unknown_keys


@pytest.mark.parametrize("comm_type", [REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK, BARRIER])
def test_compat_refuses_what_astra_sim_refuses(tmp_path, comm_type):
    # ASTRA-sim: Workload::issue_coll_comm throws "Unsupported collective comm type"
    prefix = one_collective(tmp_path, comm_type, 1 * MIB, 4)
    with pytest.raises(ChakraInputError, match="Unsupported collective comm type") as caught:
        simulate_workload(prefix, measured_system("ring", chakra_astra_compat=1), measured_network("Ring", 4))
    assert "rank 0 node 0" in caught.value.message
    assert astra_compat_refusal(comm_type, measured_system("ring")) is None  # modelled with the switch off
    # without the switch the type is modelled
    result = simulate_workload(prefix, measured_system("ring"), measured_network("Ring", 4))
    assert all(stats.finish_ns > 0 for stats in result.ranks.values())


def test_compat_broadcast_replays_its_duration_like_astra_sim(tmp_path):
    # measured: ring, splits 4, active 1, Ring of 4 and chakra-astra-compat 1 (ASTRA-sim ignores the key):
    # BROADCAST 64 MiB with duration_micros 5 -> every rank 5000 cycles, all exposed
    node = broadcast(0, 5, 64 * MIB)
    prefix = write_workload(tmp_path / "w", {rank: [node] for rank in range(4)}).prefix
    system = measured_system("ring", chakra_astra_compat=1)
    result = simulate_workload(prefix, system, measured_network("Ring", 4))
    assert finish_and_exposed(result) == {(5000, 5000)}
    assert replays_duration(BROADCAST, system) and not replays_duration(BROADCAST, measured_system("ring"))
    modelled = simulate_workload(prefix, measured_system("ring"), measured_network("Ring", 4))
    assert finish_and_exposed(modelled) != {(5000, 5000)}  # the binomial tree of 64 MiB


def broadcast(node_id: int, duration_us: int, size: int, *deps: int):
    return new_node(
        node_id, f"broadcast{node_id}", COMM_COLL_NODE, data_deps=deps, duration_us=duration_us, is_cpu_op=False,
        comm_type=BROADCAST, comm_size=size,
    )  # fmt: skip


def broadcast_rank(rank: int) -> list:
    """compute 2 µs -> all-reduce 64 KiB -> a broadcast of ``3·rank`` µs (0 on rank 0) beside 4 µs of
    compute -> 1 µs of compute after both -> a 7 µs broadcast of 0 bytes."""
    return [
        new_node(0, "c0", COMP_NODE, duration_us=2, is_cpu_op=False),
        new_node(1, "ar", COMM_COLL_NODE, data_deps=[0], is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=64 * KIB),
        broadcast(2, 3 * rank, MIB, 1),
        new_node(3, "c1", COMP_NODE, data_deps=[1], duration_us=4, is_cpu_op=False),
        new_node(4, "c2", COMP_NODE, data_deps=[2, 3], duration_us=1, is_cpu_op=False),
        broadcast(5, 7, 0, 4),
    ]


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        # measured: ring, splits 4, active 1, chakra-astra-compat 1: each rank's broadcast runs alone
        # (rank 0's 0 µs takes 1 cycle), overlapped by c1 where it is shorter than 4 µs
        ("Ring", {0: (28176, 21176), 1: (28176, 21176), 2: (30176, 23176), 3: (33176, 26176)}),
        ("Switch", {0: (40176, 33176), 1: (40176, 33176), 2: (42176, 35176), 3: (45176, 38176)}),
    ],
)
def test_compat_broadcasts_are_not_matched_across_ranks(tmp_path, topology, expected):
    prefix = write_workload(tmp_path / "w", {rank: broadcast_rank(rank) for rank in range(4)}).prefix
    result = simulate_workload(prefix, measured_system("ring", chakra_astra_compat=1), measured_network(topology, 4))
    assert {rank: (s.finish_ns, s.astra_exposed_comm_ns) for rank, s in result.ranks.items()} == expected


def test_compat_broadcast_has_no_collective_time():
    system = measured_system("ring", chakra_astra_compat=1)
    with pytest.raises(ChakraInputError, match="duration_micros"):
        collective_time_ns(BROADCAST, MIB, None, system, measured_network("Ring", 4))


def test_compat_is_settable_from_the_command_line_spelling():
    # --set chakra-astra-compat=1 reaches load_system as an override; a typo is refused
    assert measured_system("ring", chakra_astra_compat=1).astra_compat
    with pytest.raises(ChakraInputError, match="chakra-astra-compat"):
        load_system(EXAMPLE_SYSTEM, {"chakra-astra-compatt": 1})


def test_compat_does_not_change_the_native_collectives(tmp_path):
    prefix = one_collective(tmp_path, ALL_REDUCE, MIB, 4)
    network = measured_network("Ring", 4)
    on = simulate_workload(prefix, measured_system("direct", chakra_astra_compat=1), network)
    off = simulate_workload(prefix, measured_system("direct"), network)
    assert finish_and_exposed(on) == finish_and_exposed(off)
