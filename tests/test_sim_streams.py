"""How chunk streams go through the dimension queues (chakra.sim.streams), and how one phase's
members end when they start apart (chakra.sim.dataflow)."""

from __future__ import annotations

import pytest
from test_sim_collectives import make_network, make_system

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from chakra.sim.algorithms import Algorithm, Span, phase_ns, tree_member_times_ns
from chakra.sim.collectives import collective_times
from chakra.sim.dataflow import member_ends_ns, ring_ends_ns, tree_ends_ns
from chakra.sim.streams import LinePhase, queue_schedule_ns, schedule_ns

RING = Algorithm("ring")
ENDPOINT_NS = 10
LINK_NS = 100


def no_reduction(size_bytes: int) -> int:
    return 0


def flat(n: int) -> Span:
    return Span(n, ENDPOINT_NS, lambda a, b, size: LINK_NS, symmetric=True)


def test_one_phase_runs_its_streams_in_waves_of_the_active_count():
    assert queue_schedule_ns([(0, 100)], streams=5, active=2) == 3 * 100


def test_phases_on_different_queues_pipeline():
    # chunk 1 crosses dim 0 while chunk 0 crosses dim 1
    assert queue_schedule_ns([(0, 100), (1, 100)], streams=2, active=1) == 300


def test_a_phase_that_comes_back_to_a_queue_waits_behind_the_streams_queued_there():
    # dim 0 runs RS 0, RS 1, RS 2, then the AGs, which joined behind them
    assert queue_schedule_ns([(0, 100), (1, 10), (0, 50)], streams=3, active=1) == 3 * 100 + 3 * 50


def test_a_line_starts_its_phase_only_when_every_member_has():
    # NPU 1 starts 40 ns late: both end 100 ns after it
    together = [LinePhase(0, [[0, 1]], [0, 0], [0, 1], lambda stream, inits: [max(inits) + 100] * 2)]
    assert schedule_ns([0, 40], together, streams=1, active=1) == [140, 140]


def test_queues_that_wait_for_each_other_are_refused_as_a_deadlock():
    # a localBWAware doubleBinaryTree all-reduce on 2x2x2 NPUs, one chunk at a time: the NPUs of a
    # dimension queue the shared reduce-scatter/all-gather phases in different orders, and each waits
    # for a stream the other has behind it (ASTRA-sim's binary ends with no rank finished)
    system = make_system(("doubleBinaryTree",) * 3, collective_optimization="localBWAware", preferred_dataset_splits=4)
    network = make_network(("Ring", "Switch", "Ring"), (2, 2, 2), (100.0,) * 3, (2.0,) * 3)
    with pytest.raises(ChakraInputError, match="deadlock"):
        collective_times(ALL_REDUCE, 64 * 1024, None, system, network)


def test_members_starting_together_take_the_phase_time():
    span = flat(4)
    ends = member_ends_ns(ALL_REDUCE, RING, span, 4000, no_reduction, [50] * 4)
    assert ends == [50 + phase_ns(ALL_REDUCE, RING, span, 4000, no_reduction)] * 4


def test_a_late_ring_member_delays_its_successor_first():
    ends = ring_ends_ns(ALL_GATHER, flat(4), 400, no_reduction, [0, 1000, 0, 0])
    assert ends[2] < ends[3] < ends[0] and ends[1] == min(ends)  # the late member's messages wait for it


def test_the_mirrored_ring_sends_the_other_way():
    inits = [0, 1000, 0, 0]
    forward = member_ends_ns(REDUCE_SCATTER, RING, flat(4), 400, no_reduction, inits)
    backward = member_ends_ns(REDUCE_SCATTER, RING, flat(4), 400, no_reduction, inits, reverse=True)
    # member 1's successor is 2 one way and 0 the other: the delay reaches the other side first
    assert forward[2] < forward[0] and backward[0] < backward[2]


def test_tree_members_starting_together_end_as_the_tree_replay_says():
    span = flat(8)
    assert tree_ends_ns(span, 1000, True, 30, [0] * 8) == tree_member_times_ns(span, 1000, 1, 1, 0, lambda m: 30)
    assert tree_ends_ns(span, 1000, False, 30, [0] * 8) == tree_member_times_ns(span, 1000, 1, 1, 1, lambda m: 30)


def test_a_late_tree_leaf_holds_up_everyone_but_starts_nothing_early():
    together = tree_ends_ns(flat(4), 1000, True, 30, [0] * 4)
    late = tree_ends_ns(flat(4), 1000, True, 30, [0, 0, 500, 0])
    assert all(b - a == 500 for a, b in zip(together, late, strict=True))  # every path runs through leaf 2
