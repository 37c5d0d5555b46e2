"""The order ASTRA-sim's feeder hands out nodes freed together (:mod:`chakra.sim.feeder_order`):
orders measured on FeederV3's dependency resolver built with GCC 12, as in ASTRA-sim's binaries."""

from __future__ import annotations

from chakra.generate.collective import AlgorithmSpec, algorithm_ranks
from chakra.sim.feeder_order import FeederOrder, HashedSet


def _free_at_start(ids: list[int], parents: list[list[int]]) -> list[int]:
    return list(FeederOrder(ids, parents).free_at_start)


def test_two_independent_nodes_start_in_file_order():
    assert _free_at_start([5, 7], [[], []]) == [5, 7]
    assert _free_at_start([7, 5], [[], []]) == [7, 5]


def test_twenty_independent_nodes_start_in_the_measured_hash_order():
    measured = [12, 11, 10, 9, 8, 7, 6, 19, 18, 5, 17, 4, 16, 3, 15, 2, 14, 1, 13, 0]
    assert _free_at_start(list(range(20)), [[] for _ in range(20)]) == measured


def test_a_direct_all_reduces_first_sends_and_receives_start_in_the_measured_order():
    rank_0 = algorithm_ranks(AlgorithmSpec("direct", "all-reduce", ranks=4, size_bytes=1 << 20))[0]
    order = FeederOrder([node.id for node in rank_0], [list(node.data_deps) for node in rank_0])
    assert list(order.free_at_start) == [12, 7, 5, 3, 2, 0, 13, 1, 14]


def test_a_set_keeps_its_buckets_when_emptied_so_later_keys_follow_the_grown_table():
    # measured on std::unordered_set<uint64_t> (GCC 12): 14 keys grow it from 13 buckets to 29
    grown, fresh = HashedSet(), HashedSet()
    for key in range(14):
        grown.insert(key)
    for key in range(14):
        grown.erase(key)
    for key in (1, 14, 30):
        grown.insert(key)
        fresh.insert(key)
    assert list(grown) == [14, 30, 1] and list(fresh) == [30, 14, 1]
