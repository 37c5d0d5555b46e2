"""chakra.sim.network and chakra.sim.collectives: message delays and collective times in ns.

Every expectation is derived by hand from ``reference/astra-sim.md`` §5 (the arithmetic is written
next to it). Unless a test says otherwise the networks are built so the numbers stay readable:

* link latency ``L`` = 100 ns and bandwidth ``B`` = 2 bytes/ns, so one hop of ``m`` bytes costs
  ``trunc(100·hops + m/2)``: 1000 bytes over one hop = 600 ns, over two hops = 700 ns;
* endpoint delay ``d`` = 10 ns, local-mem-bw 10 GB/s, so ``t_red(m) = 3·trunc(m/10)``:
  ``t_red(1000) = 300``;
* preferred-dataset-splits 1, active-chunks-per-dimension 1 (one stream, K = 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    SCATTER,
)
from chakra.sim.algorithms import parse_algorithm
from chakra.sim.collectives import chunk_plan, collective_time_ns, p2p_time_ns
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.network import hop_delay_ns, message_delay_ns, message_delays_ns

#: GB/s -> bytes/ns as ASTRA-sim converts (``NetworkConfig.bandwidth_bytes_per_ns``): GiB-based.
BYTES_PER_GIB, NS_PER_S = 2**30, 1e9


def make_network(
    topology: tuple[str, ...],
    npus_count: tuple[int, ...],
    latency_ns: tuple[float, ...],
    bytes_per_ns: tuple[float, ...],
) -> NetworkConfig:
    """A network whose links carry ``bytes_per_ns`` (the GB/s that convert to exactly that)."""
    bandwidth_gbps = tuple(b * NS_PER_S / BYTES_PER_GIB for b in bytes_per_ns)
    network = NetworkConfig(topology, npus_count, bandwidth_gbps, latency_ns)
    assert tuple(network.bandwidth_bytes_per_ns(d) for d in range(network.dims)) == bytes_per_ns
    return network


def make_system(implementation: tuple[str, ...] = ("ring",), **values: Any) -> SystemConfig:
    """A system with one algorithm list for every collective type; ``values`` as SystemConfig fields."""
    defaults: dict[str, Any] = {
        "scheduling_policy": "LIFO",
        "collective_optimization": "baseline",
        "preferred_dataset_splits": 1,
        "active_chunks_per_dimension": 1,
        "endpoint_delay_ns": 10.0,
        "local_mem_bw_gbps": 10.0,
    }
    implementations = dict.fromkeys(("ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER", "ALL_TO_ALL"), implementation)
    return SystemConfig(implementations=implementations, **{**defaults, **values})


def one_dim(topology: str, npus: int) -> NetworkConfig:
    return make_network((topology,), (npus,), (100.0,), (2.0,))


#: 2-D network: dim 0 a 4-NPU Ring (L 100, B 2), dim 1 a 2-NPU Switch (L 500, B 1); id = a0 + 4·a1.
TWO_DIM = make_network(("Ring", "Switch"), (4, 2), (100.0, 500.0), (2.0, 1.0))
SYSTEM = make_system()


# --- network.py: one message --------------------------------------------------------------------


def test_hop_delay_is_hops_times_latency_plus_size_over_bandwidth():
    assert hop_delay_ns(one_dim("Ring", 8), dim=0, hops=3, size_bytes=1000) == 3 * 100 + 1000 // 2


def test_ring_message_takes_the_shorter_way_round():
    ring = one_dim("Ring", 8)
    assert message_delay_ns(ring, 0, 3, 1000) == 3 * 100 + 500  # clockwise, 3 hops
    assert message_delay_ns(ring, 0, 5, 1000) == 3 * 100 + 500  # counter-clockwise, 3 hops (not 5)
    assert message_delay_ns(ring, 3, 0, 1000) == 3 * 100 + 500  # same distance in the other direction


def test_ring_message_wraps_around_from_last_to_first():
    assert message_delay_ns(one_dim("Ring", 8), 7, 0, 1000) == 1 * 100 + 500


def test_fully_connected_message_is_one_hop_to_anyone():
    assert message_delay_ns(one_dim("FullyConnected", 8), 0, 5, 1000) == 1 * 100 + 500


def test_switch_message_is_two_hops_to_anyone():
    assert message_delay_ns(one_dim("Switch", 8), 0, 1, 1000) == 2 * 100 + 500


def test_message_to_self_is_free():
    assert message_delay_ns(one_dim("Ring", 8), 4, 4, 1000) == 0


def test_two_dim_message_uses_the_lowest_differing_dimension_only():
    assert message_delay_ns(TWO_DIM, 0, 4, 1000) == 2 * 500 + 1000 // 1  # (0,0)->(0,1): Switch dim 1
    assert message_delay_ns(TWO_DIM, 1, 6, 1000) == 1 * 100 + 1000 // 2  # (1,0)->(2,1): dim 0 only, 1 hop
    assert message_delay_ns(TWO_DIM, 4, 7, 1000) == 1 * 100 + 1000 // 2  # (0,1)->(3,1): dim 0 wraps


def test_message_delay_is_truncated_to_whole_ns():
    network = make_network(("Ring",), (4,), (0.5,), (3.0,))
    assert message_delay_ns(network, 0, 1, 10) == 3  # trunc(0.5 + 10/3 = 3.83)


def test_point_to_point_time_is_the_bare_message_delay():
    assert p2p_time_ns(0, 2, 1000, one_dim("Ring", 4)) == 2 * 100 + 500  # no endpoint or chunking costs


# --- one dimension, ring algorithm, every collective type ---------------------------------------
# n = 4, S = 4000 (m = 1000) for AR/RS/A2A/REDUCE/SCATTER, S = 1000 per rank for AG/GATHER/BROADCAST.
# Neighbour message t_net(1000): Ring and FullyConnected 600 ns (1 hop), Switch 700 ns (2 hops).


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 7 * 10 + 6 * 600 + 3 * 300),  # (2n−1)d + 2(n−1)·t_net(m) + (n−1)·t_red(m) = 4570
        ("FullyConnected", 7 * 10 + 6 * 600 + 3 * 300),
        ("Switch", 7 * 10 + 6 * 700 + 3 * 300),  # 5170
    ],
)
def test_ring_all_reduce_follows_the_closed_form(topology: str, expected_ns: int):
    assert collective_time_ns(ALL_REDUCE, 4000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 4 * 10 + 3 * (600 + 300)),  # n·d + (n−1)(t_net(m) + t_red(m)) = 2740
        ("FullyConnected", 4 * 10 + 3 * (600 + 300)),
        ("Switch", 4 * 10 + 3 * (700 + 300)),  # 3040
    ],
)
def test_ring_reduce_scatter_follows_the_closed_form(topology: str, expected_ns: int):
    assert collective_time_ns(REDUCE_SCATTER, 4000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


def test_reduce_scatter_block_is_timed_as_reduce_scatter():
    assert collective_time_ns(REDUCE_SCATTER_BLOCK, 4000, None, SYSTEM, one_dim("Ring", 4)) == 4 * 10 + 3 * 900


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 4 * 10 + 3 * 600),  # n·d + (n−1)·t_net(C), C = 1000 per rank = 1840
        ("FullyConnected", 4 * 10 + 3 * 600),
        ("Switch", 4 * 10 + 3 * 700),  # 2140
    ],
)
def test_ring_all_gather_sends_the_whole_per_rank_input_each_step(topology: str, expected_ns: int):
    assert collective_time_ns(ALL_GATHER, 1000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 7 * 10 + 6 * 600),  # s = n(n−1)/2 = 6: (s+1)·d + s·t_net(m) = 3670
        ("FullyConnected", 7 * 10 + 6 * 600),
        ("Switch", 7 * 10 + 6 * 700),  # 4270
    ],
)
def test_ring_all_to_all_sends_n_n_minus_1_over_2_neighbour_messages(topology: str, expected_ns: int):
    assert collective_time_ns(ALL_TO_ALL, 4000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        # ring RS (2740) + gather of the 1000-byte pieces to NPU 0: d + slowest (NPU 2, 2 hops: 700) + d
        ("Ring", 2740 + (10 + 700 + 10)),
        ("FullyConnected", 2740 + (10 + 600 + 10)),  # every peer 1 hop away
        ("Switch", 3040 + (10 + 700 + 10)),  # Switch RS is 3040; every peer 2 hops away
    ],
)
def test_reduce_is_reduce_scatter_then_gather_to_the_root(topology: str, expected_ns: int):
    assert collective_time_ns(REDUCE, 4000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [("Ring", 10 + 700 + 10), ("FullyConnected", 10 + 600 + 10), ("Switch", 10 + 700 + 10)],
)
def test_gather_sends_every_per_rank_input_to_the_root_at_once(topology: str, expected_ns: int):
    # d + the slowest 1000-byte message to NPU 0 + d
    assert collective_time_ns(GATHER, 1000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [("Ring", 10 + 700 + 10), ("FullyConnected", 10 + 600 + 10), ("Switch", 10 + 700 + 10)],
)
def test_scatter_sends_one_nth_of_the_root_buffer_to_everyone_at_once(topology: str, expected_ns: int):
    # 4000 bytes at the root, 4000/4 = 1000 to each peer: d + slowest message + d
    assert collective_time_ns(SCATTER, 4000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 10 + (600 + 10) + (700 + 10)),  # round 0: 0→1 (1 hop); round 1: 0→2, 1→3 (2 hops)
        ("FullyConnected", 10 + (600 + 10) + (600 + 10)),
        ("Switch", 10 + (700 + 10) + (700 + 10)),
    ],
)
def test_broadcast_is_a_binomial_tree_of_full_messages(topology: str, expected_ns: int):
    assert collective_time_ns(BROADCAST, 1000, None, SYSTEM, one_dim(topology, 4)) == expected_ns


@pytest.mark.parametrize(
    ("topology", "expected_ns"),
    [
        ("Ring", 10 + (100 + 10) + (200 + 10)),  # round 0: i→i+1 (1 hop, 0 bytes); round 1: i→i+2 (2 hops)
        ("FullyConnected", 10 + (100 + 10) + (100 + 10)),
        ("Switch", 10 + (200 + 10) + (200 + 10)),
    ],
)
def test_barrier_is_a_latency_only_dissemination_barrier(topology: str, expected_ns: int):
    assert collective_time_ns(BARRIER, 0, None, SYSTEM, one_dim(topology, 4)) == expected_ns


# --- other algorithms ---------------------------------------------------------------------------
# direct, halvingDoubling and doubleBinaryTree: tests/test_sim_algorithms.py (hand-derived and
# measured from ASTRA-sim).


def test_flat_one_ring_prices_each_message_in_the_lowest_differing_dimension():
    system = make_system(implementation=("oneRing", "oneRing"))
    # 8 NPUs in id order: every neighbour pair (including 3→4 and 7→0) differs in dim 0 by one hop,
    # so each 1000-byte message costs 600 ns: (2·8−1)·d + 2·7·600 + 7·t_red(1000)
    assert collective_time_ns(ALL_REDUCE, 8000, None, system, TWO_DIM) == 15 * 10 + 14 * 600 + 7 * 300


def test_algorithm_names_parse_flat_variants_and_direct_windows():
    assert parse_algorithm("oneRing") == parse_algorithm("ring").__class__("ring", flat=True)
    assert parse_algorithm("direct8").window == 8
    assert parse_algorithm("oneDirect4").flat and parse_algorithm("oneDirect4").window == 4
    with pytest.raises(ChakraInputError, match="unknown collective algorithm"):
        parse_algorithm("tree")


# --- two dimensions: Ring 4 (L 100, B 2) × Switch 2 (L 500, B 1) --------------------------------


def test_baseline_all_reduce_runs_a_full_all_reduce_on_each_dimension():
    system = make_system(implementation=("ring", "ring"))
    dim0 = 7 * 10 + 6 * (100 + 2000 // 2) + 3 * 600  # n = 4, D = 8000, m = 2000: 8470
    dim1 = 3 * 10 + 2 * (2 * 500 + 4000) + 1 * 1200  # n = 2, D = 8000, m = 4000 over the switch: 11230
    assert collective_time_ns(ALL_REDUCE, 8000, None, system, TWO_DIM) == dim0 + dim1


def test_local_bw_aware_all_reduce_is_reduce_scatter_all_reduce_all_gather():
    system = make_system(implementation=("ring", "ring"), collective_optimization="localBWAware")
    rs_dim0 = 4 * 10 + 3 * ((100 + 1000) + 600)  # D = 8000 → m = 2000; leaves 2000 B: 5140
    ar_dim1 = 3 * 10 + 2 * (1000 + 1000) + 300  # D = 2000 → m = 1000 over the switch: 4330
    ag_dim0 = 4 * 10 + 3 * (100 + 1000)  # D = 2000 per rank: 3340
    assert collective_time_ns(ALL_REDUCE, 8000, None, system, TWO_DIM) == rs_dim0 + ar_dim1 + ag_dim0


def test_baseline_reduce_scatter_shrinks_the_data_dimension_by_dimension():
    system = make_system(implementation=("ring", "ring"))
    dim0 = 4 * 10 + 3 * (1100 + 600)  # D = 8000, m = 2000: 5140, leaves 2000
    dim1 = 2 * 10 + 1 * ((1000 + 1000) + 300)  # D = 2000, m = 1000: 2320
    assert collective_time_ns(REDUCE_SCATTER, 8000, None, system, TWO_DIM) == dim0 + dim1


def test_all_gather_runs_the_dimensions_in_descending_order():
    system = make_system(implementation=("ring", "ring"))
    dim1 = 2 * 10 + 1 * (1000 + 1000)  # first: D = 1000 over the switch: 2020, grows to 2000
    dim0 = 4 * 10 + 3 * (100 + 1000)  # then D = 2000 on the ring: 3340 (ascending would give 6860)
    assert collective_time_ns(ALL_GATHER, 1000, None, system, TWO_DIM) == dim1 + dim0


# --- chunking and stream pipelining (§5.4) ------------------------------------------------------


def test_chunk_plan_splits_into_preferred_dataset_splits_streams():
    assert chunk_plan(ALL_REDUCE, 16000, splits=4, total_npus=4) == (4000, 4)


def test_chunk_plan_adds_a_stream_for_the_remainder():
    assert chunk_plan(ALL_GATHER, 10, splits=4, total_npus=2) == (2, 5)  # C = 10 // 4 = 2, K = ceil(10/2)


def test_tiny_collectives_are_padded_to_splits_times_total_npus():
    assert chunk_plan(ALL_REDUCE, 10, splits=4, total_npus=8) == (8, 4)  # C = 2 < 8 NPUs → C = 8, S = 32
    assert chunk_plan(ALL_REDUCE, 0, splits=4, total_npus=8) == (8, 4)


def test_all_gather_is_never_padded_and_a_zero_chunk_is_refused():
    assert chunk_plan(ALL_GATHER, 4, splits=4, total_npus=8) == (1, 4)
    with pytest.raises(ChakraInputError, match="zero chunk size"):
        collective_time_ns(ALL_GATHER, 3, None, make_system(preferred_dataset_splits=4), one_dim("Ring", 4))


def test_streams_run_one_after_another_with_one_active_chunk():
    system = make_system(preferred_dataset_splits=4, active_chunks_per_dimension=1)
    chunk = 7 * 10 + 6 * 600 + 3 * 300  # C = 16000/4 = 4000, m = 1000: 4570
    assert collective_time_ns(ALL_REDUCE, 16000, None, system, one_dim("Ring", 4)) == 4 * chunk


def test_two_active_chunks_halve_the_waves():
    system = make_system(preferred_dataset_splits=4, active_chunks_per_dimension=2)
    chunk = 7 * 10 + 6 * 600 + 3 * 300
    assert collective_time_ns(ALL_REDUCE, 16000, None, system, one_dim("Ring", 4)) == 2 * chunk  # ceil(4/2)


def test_reduce_scatter_and_all_gather_of_a_dimension_share_its_queue():
    # C = 32000/4 = 8000: RS on dim 0 5140 ns, AR on dim 1 4330, AG on dim 0 3340. Dimension 0's one
    # queue runs a chunk at a time, every RS before the first AG (which joins behind them): 4 x (5140 + 3340)
    system = make_system(
        implementation=("ring", "ring"), collective_optimization="localBWAware", preferred_dataset_splits=4
    )
    assert collective_time_ns(ALL_REDUCE, 32000, None, system, TWO_DIM) == 4 * (5140 + 3340)


def test_two_active_chunks_share_a_dimension_queue_two_at_a_time():
    # dim 0: RS of chunks 0, 1 (to 5140), RS of 2, 3 (to 10280), AG of 0, 1 (to 13620); chunks 2, 3
    # cross dim 1 (to 14610) and end their AG at 14610 + 3340
    system = make_system(
        implementation=("ring", "ring"),
        collective_optimization="localBWAware",
        preferred_dataset_splits=4,
        active_chunks_per_dimension=2,
    )
    assert collective_time_ns(ALL_REDUCE, 32000, None, system, TWO_DIM) == 14610 + 3340


def test_zero_byte_all_reduce_costs_the_padded_collective():
    system = make_system(preferred_dataset_splits=4)
    # C = 4 (NPUs), K = 4, m = 1: t_net = trunc(100 + 0.5) = 100, t_red(1) = 3·trunc(0.1) = 0
    chunk = 7 * 10 + 6 * 100 + 3 * 0
    assert collective_time_ns(ALL_REDUCE, 0, None, system, one_dim("Ring", 4)) == 4 * chunk


# --- communicator subgroups (§2.5) --------------------------------------------------------------


def test_subgroup_of_two_rings_between_the_real_npus_with_a_10_ns_endpoint():
    system = make_system(endpoint_delay_ns=50.0)  # ignored: the subgroup ring's endpoint is fixed at 10 ns
    # NPUs 2 and 5 of an 8-NPU Ring are 3 hops apart; m = 8000/2 = 4000: t_net = 300 + 2000 = 2300
    expected = 3 * 10 + 2 * 2300 + 1 * 1200  # (2n−1)·10 + 2(n−1)·t_net + (n−1)·t_red(4000)
    assert collective_time_ns(ALL_REDUCE, 8000, [2, 5], system, one_dim("Ring", 8)) == expected


def test_subgroup_ignores_the_configured_algorithm_and_uses_ring():
    system = make_system(implementation=("direct",))
    assert collective_time_ns(ALL_REDUCE, 8000, [2, 5], system, one_dim("Ring", 8)) == 3 * 10 + 2 * 2300 + 1200


def test_subgroup_padding_uses_the_total_npu_count():
    # 0 bytes, splits 1: C = 8 (NPUs in the network, not 2 members), m = 4: t_net = trunc(300 + 2) = 302
    assert collective_time_ns(ALL_REDUCE, 0, [2, 5], SYSTEM, one_dim("Ring", 8)) == 3 * 10 + 2 * 302 + 0


def test_subgroup_ring_is_paced_by_the_slowest_chain_of_links():
    # members 0, 1, 4 of an 8-NPU Ring; 1000-byte messages: 0→1 1 hop 600, 1→4 3 hops 800, 4→0 4 hops 900.
    # RS has 2 steps; the NPU fed by 1→4 then 4→0 waits longest: 800 + 900 = 1700
    expected = 10 + 2 * (10 + 300) + 1700
    assert collective_time_ns(REDUCE_SCATTER, 3000, [4, 0, 1], SYSTEM, one_dim("Ring", 8)) == expected


def test_subgroup_barrier_uses_the_members_and_the_10_ns_endpoint():
    system = make_system(endpoint_delay_ns=50.0)
    assert collective_time_ns(BARRIER, 0, [2, 5], system, one_dim("Ring", 8)) == 10 + (300 + 10)  # 1 round


def test_group_of_every_npu_uses_the_full_plan():
    system = make_system(implementation=("direct",))
    network = one_dim("Ring", 4)
    assert collective_time_ns(ALL_REDUCE, 4000, [3, 2, 1, 0], system, network) == collective_time_ns(
        ALL_REDUCE, 4000, None, system, network
    )


def test_group_of_one_takes_no_time():
    assert collective_time_ns(ALL_REDUCE, 4000, [3], SYSTEM, one_dim("Ring", 8)) == 0


# --- truncation, errors, caching ----------------------------------------------------------------


def test_every_message_and_reduction_is_truncated_where_it_is_computed():
    network = make_network(("Ring",), (4,), (0.5,), (3.0,))
    system = make_system(local_mem_bw_gbps=3.0)
    # m = 10: t_net = trunc(0.5 + 3.33) = 3; t_red = 3·trunc(10/3e9·1e9 = 3.33) = 9
    # n·d + (n−1)(t_net + t_red) = 40 + 3·12 = 76 (truncating only the total would give 81)
    assert collective_time_ns(REDUCE_SCATTER, 40, None, system, network) == 76


@pytest.mark.parametrize("comm_type", [ALL_REDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, REDUCE])
def test_zero_local_memory_bandwidth_makes_reductions_free_as_in_astra_sims_binaries(comm_type: int):
    free = collective_time_ns(comm_type, 4000, None, make_system(local_mem_bw_gbps=0.0), one_dim("Ring", 4))
    timed = collective_time_ns(comm_type, 4000, None, make_system(local_mem_bw_gbps=1.0), one_dim("Ring", 4))
    assert 0 < free < timed


def test_zero_local_memory_bandwidth_is_fine_without_reductions():
    system = make_system(local_mem_bw_gbps=0.0)
    assert collective_time_ns(ALL_GATHER, 1000, None, system, one_dim("Ring", 4)) == 4 * 10 + 3 * 600


def test_unknown_collective_type_is_refused():
    with pytest.raises(ChakraInputError, match="unknown collective type 42"):
        collective_time_ns(42, 4000, None, SYSTEM, one_dim("Ring", 4))


def test_results_are_memoised_by_the_system_configurations_identity():
    from chakra.sim.collectives import _cached_collective_time_ns  # the cache behind collective_times

    system, network = make_system(), one_dim("Ring", 4)  # SystemConfig holds a dict: not hashable by value
    collective_time_ns(ALL_REDUCE, 4000, None, system, network)
    hits = _cached_collective_time_ns.cache_info().hits
    collective_time_ns(ALL_REDUCE, 4000, None, system, network)
    assert _cached_collective_time_ns.cache_info().hits == hits + 1


@pytest.mark.parametrize("topology", ["Ring", "Switch", "FullyConnected"])
def test_many_message_delays_at_once_equal_each_one_alone(topology: str):
    network = NetworkConfig((topology, "Ring", topology), (4, 3, 5), (50.0, 25.0, 12.5), (500.0, 700.0, 900.0))
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 60, 500), rng.integers(0, 60, 500)
    size = rng.choice([0, 8, 1 << 20], 500)
    alone = [
        message_delay_ns(network, s, d, n) for s, d, n in zip(src.tolist(), dst.tolist(), size.tolist(), strict=True)
    ]
    assert message_delays_ns(network, src, dst, size).tolist() == alone
    assert message_delays_ns(network, src[:0], dst[:0], size[:0]).tolist() == []
