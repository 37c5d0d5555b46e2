"""chakra.pytorch.groups: which process group a collective used when the trace does not say."""

from __future__ import annotations

from chakra.pytorch.comms import CommNode
from chakra.pytorch.groups import (
    ALIGNED,
    AMBIGUOUS,
    AMBIGUOUS_LARGEST,
    CLOCK_TOLERANCE_US,
    NO_RECORDS,
    ONLY_GROUP,
    RECORDED,
    astra_ids,
    comm_groups_json,
    completion_lag_us,
    group_table,
    node_attributes,
    resolve,
)
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_REDUCE,
    BARRIER,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
)

WORLD = 4
#: Tensor parallel pairs {0,1} {2,3} and data parallel pairs {0,2} {1,3}, as PyTorch records them.
RECORDS = [
    {"pg_name": "0", "ranks": [], "group_size": 4},
    {"pg_name": "1", "ranks": [0, 1]},
    {"pg_name": "2", "ranks": [2, 3]},
    {"pg_name": "3", "ranks": [0, 2]},
    {"pg_name": "4", "ranks": [1, 3]},
]


def coll(
    node_id: int,
    size: int,
    end_us: float | None = None,
    pg: str | None = None,
    *,
    start_us: float | None = None,
    kind: int = ALL_REDUCE,
    root: int | None = None,
) -> CommNode:
    """A collective node (issued in ``node_id`` order); ``root`` is a group rank."""
    return CommNode(node_id, COMM_COLL_NODE, kind, size, pg, start_us, end_us, issue_order=node_id, root=root)


def timed(node_id: int, start_us: float, end_us: float, kind: int = ALL_REDUCE, root: int | None = None) -> CommNode:
    """A 64-byte collective (0 bytes for a barrier) that ran from ``start_us`` to ``end_us``."""
    size = 0 if kind == BARRIER else 64
    return coll(node_id, size, end_us, start_us=start_us, kind=kind, root=root)


def groups_of(found: dict[int, dict], node_id: int) -> list[str]:
    """The group each rank's node ``node_id`` was given, in rank order."""
    return [found[rank][node_id].pg_name for rank in sorted(found)]


def methods_of(found: dict[int, dict], node_id: int) -> set[str]:
    return {found[rank][node_id].method for rank in found}


def test_group_records_merge_and_an_empty_rank_list_means_everyone():
    groups = group_table(RECORDS, [{"pg_name": "1", "ranks": [0, 1]}], world_size=WORLD)
    assert groups["0"].members(WORLD) == (0, 1, 2, 3)
    assert groups["3"].ranks == (0, 2)
    assert [name for name, g in groups.items() if g.contains(2)] == ["0", "2", "3"]


def test_recorded_groups_are_kept():
    groups = group_table(RECORDS, world_size=WORLD)
    found = resolve({0: [coll(1, 64, pg="3")]}, groups, WORLD)
    assert (found[0][1].pg_name, found[0][1].method) == ("3", RECORDED)


def test_a_rank_in_one_group_only_needs_no_alignment():
    groups = group_table([{"pg_name": "0", "ranks": []}], world_size=2)
    found = resolve({0: [coll(1, 64)], 1: [coll(1, 64)]}, groups, 2)
    assert {r: (f[1].pg_name, f[1].method) for r, f in found.items()} == {0: ("0", ONLY_GROUP), 1: ("0", ONLY_GROUP)}


#: (start, end) times (µs) of a TP all-reduce (pair {0,1} runs first, then pair {2,3}: ranks 2 and 3
#: arrive after 0 and 1 finished) and of a DP all-reduce (pair {0,2}, then pair {1,3}), as one
#: clock on one machine records them.
TP_US = {0: (90.0, 100.0), 1: (95.0, 101.0), 2: (290.0, 300.0), 3: (295.0, 302.0)}
DP_US = {0: (990.0, 1000.0), 2: (992.0, 1001.0), 1: (1990.0, 2000.0), 3: (1995.0, 2003.0)}


def test_tensor_and_data_parallel_collectives_are_told_apart_by_aligning_the_ranks():
    per_rank = {r: [timed(10, *TP_US[r]), timed(20, *DP_US[r])] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 10) == ["1", "1", "2", "2"]
    assert groups_of(found, 20) == ["3", "4", "3", "4"]
    assert all(f.method == ALIGNED for ranks in found.values() for f in ranks.values())


def test_without_timing_equal_collectives_on_every_rank_are_marked_ambiguous():
    per_rank = {r: [coll(10, 64), coll(20, 4096)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert {(f.pg_name, f.method) for ranks in found.values() for f in ranks.values()} == {("0", AMBIGUOUS_LARGEST)}


def test_pairs_that_ran_one_after_the_other_are_pairs_not_the_world():
    # the same 64-byte all-reduce everywhere: the world, or two pairs? Ranks 2 and 3 arrived after
    # 0 and 1 had finished, so no collective of all four can have run it.
    per_rank = {0: [timed(1, 90, 100)], 1: [timed(1, 95, 101)], 2: [timed(1, 490, 500)], 3: [timed(1, 495, 502)]}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["1", "1", "2", "2"]


#: The groups of :data:`RECORDS` plus a trio {0,1,2} (group "5"): subgroups of different sizes.
TRIO_RECORDS = [*RECORDS, {"pg_name": "5", "ranks": [0, 1, 2]}]
#: How long (µs) a rank sleeps before arriving "late" in the tests below: long against the
#: collectives themselves (100 µs).
LATE_US = 21_000.0


#: Only the data parallel pairs {0,2} {1,3} beside the world (no TP pairs that could pair a late
#: rank with an early one).
DP_RECORDS = [RECORDS[0], RECORDS[3], RECORDS[4]]


def test_a_world_barrier_goes_to_the_world_when_ranks_waited_for_ranks_outside_their_subgroup():
    # ranks 1 and 3 wait 21 ms for ranks 0 and 2: within DP pair {1,3} that wait is unexplained
    times = {
        0: (LATE_US, LATE_US + 100),
        1: (0, LATE_US + 120),
        2: (LATE_US + 10, LATE_US + 110),
        3: (5, LATE_US + 130),
    }
    per_rank = {r: [timed(1, *times[r], kind=BARRIER)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(DP_RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["0"] * WORLD
    assert methods_of(found, 1) == {ALIGNED}


def test_a_subgroup_barrier_stays_with_the_subgroup_when_the_outsiders_arrived_after_it_finished():
    # DP pair {0,2} finished at 110 µs; 1 and 3 only arrived 21 ms later: no world barrier can have run
    times = {0: (0, 100), 2: (10, 110), 1: (LATE_US, LATE_US + 100), 3: (LATE_US + 5, LATE_US + 105)}
    per_rank = {r: [timed(1, *times[r], kind=BARRIER)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["3", "4", "3", "4"]
    assert methods_of(found, 1) == {ALIGNED}


def test_overlapping_tensor_and_data_parallel_barriers_each_find_their_pairs():
    # TP pair {0,1}, then {2,3} 21 ms later; then DP pair {0,2} (0 waits for 2), then {1,3} after a
    # second sleep of ranks 1 and 3: the same 4 ranks, grouped two ways, one barrier after the other
    late, later = LATE_US, 2 * LATE_US
    tp = {0: (0, 100), 1: (10, 110), 2: (late, late + 100), 3: (late + 10, late + 110)}
    dp = {0: (200, late + 300), 2: (late + 200, late + 300), 1: (later, later + 100), 3: (later + 10, later + 110)}
    per_rank = {r: [timed(1, *tp[r], kind=BARRIER), timed(2, *dp[r], kind=BARRIER)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["1", "1", "2", "2"]
    assert groups_of(found, 2) == ["3", "4", "3", "4"]


def test_a_trio_collective_is_not_taken_by_the_world_when_the_fourth_rank_waits_at_the_next_one():
    # rank 3 is not in the trio: it runs ahead to the next all-reduce of the same size (a world
    # one) and waits there while 0, 1, 2 run theirs; its node finished with the world collective
    trio = {0: (0, 100), 1: (10, 102), 2: (20, 101)}
    world = {0: (110, 300), 1: (112, 301), 2: (111, 302), 3: (50, 300)}
    per_rank = {r: [timed(1, *trio[r]), timed(2, *world[r])] for r in range(3)}
    per_rank[3] = [timed(2, *world[3])]
    found = resolve(per_rank, group_table(TRIO_RECORDS, world_size=WORLD), WORLD)
    assert [found[r][1].pg_name for r in range(3)] == ["5", "5", "5"]
    assert groups_of(found, 2) == ["0"] * WORLD


def test_a_trio_collective_is_aligned_when_the_rank_outside_each_pair_of_it_waited():
    # ranks 0 and 1 wait for rank 2: pair {0,1} leaves their wait unexplained, pair {0,2} rank 1's
    trio = {0: (0, 1100), 1: (10, 1102), 2: (1000, 1101)}
    per_rank = {r: [timed(1, *trio[r])] for r in range(3)}
    per_rank[3] = [timed(2, 2000, 2100)]  # rank 3 alone in a later world collective
    found = resolve(per_rank, group_table(TRIO_RECORDS, world_size=WORLD), WORLD)
    assert [(found[r][1].pg_name, found[r][1].method) for r in range(3)] == [("5", ALIGNED)] * 3


def test_ranks_arriving_far_apart_keep_each_collective_with_its_group():
    # rank 3 sleeps 50 ms before a world all-reduce while 0, 1, 2 run a trio, a TP {0,1} and a DP
    # {0,2} all-reduce of the same size in between (rank 2 waits for rank 0 in DP)
    far = 50_000.0
    nodes = {
        0: [timed(1, 0, 100), timed(2, 200, 300), timed(3, 350, 450), timed(4, 460, far + 100)],
        1: [timed(1, 10, 101), timed(2, 210, 301), timed(4, 310, far + 101)],
        2: [timed(1, 20, 102), timed(3, 205, 451), timed(4, 455, far + 102)],
        3: [timed(4, far, far + 103)],
    }
    found = resolve(nodes, group_table(TRIO_RECORDS, world_size=WORLD), WORLD)
    assert [found[r][1].pg_name for r in range(3)] == ["5", "5", "5"]
    assert [found[r][2].pg_name for r in (0, 1)] == ["1", "1"]
    assert [found[r][3].pg_name for r in (0, 2)] == ["3", "3"]
    assert groups_of(found, 4) == ["0"] * WORLD


def test_roots_are_translated_to_global_ranks_through_the_chosen_group():
    # a world broadcast from group rank 1 (rank 1 arrives last: everyone waited for it), then DP
    # broadcasts from group rank 1 (ranks 2 and 3), pair {1,3} after pair {0,2} finished
    late = LATE_US
    world = {0: (0, late + 100), 1: (late, late + 110), 2: (5, late + 105), 3: (10, late + 120)}
    dp = {0: (late + 200, late + 400), 2: (late + 300, late + 410), 1: (2 * late, 2 * late + 100)}
    dp[3] = (2 * late + 50, 2 * late + 120)
    per_rank = {r: [timed(1, *world[r], BROADCAST, root=1), timed(2, *dp[r], BROADCAST, root=1)] for r in range(WORLD)}
    groups = group_table(RECORDS, world_size=WORLD)
    found = resolve(per_rank, groups, WORLD)
    assert groups_of(found, 1) == ["0"] * WORLD and groups_of(found, 2) == ["3", "4", "3", "4"]
    roots = {
        r: {n: dict(a)["comm_root"] for n, a in node_attributes(per_rank[r], found[r], groups, r).items()}
        for r in found
    }
    assert roots == {0: {1: 1, 2: 2}, 1: {1: 1, 2: 3}, 2: {1: 1, 2: 2}, 3: {1: 1, 2: 3}}


def test_broadcast_receivers_wait_for_the_root_only_so_a_late_receiver_keeps_the_world():
    # ranks 1 and 2 got the root's data before rank 3 even arrived: fine for a broadcast
    times = {0: (100, 200), 1: (0, 150), 2: (5, 160), 3: (LATE_US, LATE_US + 50)}
    per_rank = {r: [timed(1, *times[r], BROADCAST, root=0)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["0"] * WORLD


def test_a_receiver_slow_to_finish_does_not_hand_a_world_broadcast_to_pairs_of_other_roots():
    # timings (us) of a recorded gloo job on a busy machine: rank 0 waited for the root (rank 1)
    # and was descheduled, finishing 2.3 ms after the root arrived; as DP pairs from group rank 1
    # (roots 2 and 3) the same nodes wait less, but those lags are other ranks' waits
    times = {0: (0, 2749), 1: (424, 1086), 2: (1003, 1138), 3: (907, 987)}
    per_rank = {r: [timed(1, *times[r], BROADCAST, root=1)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["0"] * WORLD


def test_groups_that_explain_a_collective_equally_give_the_larger_one_marked_ambiguous():
    # all four arrive together and finish together: the world, or two pairs side by side?
    per_rank = {r: [timed(1, 10.0 * r, 200.0 + r)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert groups_of(found, 1) == ["0"] * WORLD
    assert methods_of(found, 1) == {AMBIGUOUS_LARGEST}


def test_a_member_finishing_before_the_last_arrival_it_waited_for_rules_a_group_out():
    early = {0: timed(1, 0, 100), 1: timed(1, 10, 110)}
    late = {**early, 2: timed(1, 100 + 2 * CLOCK_TOLERANCE_US, 300)}
    jitter = {**early, 2: timed(1, 100 + CLOCK_TOLERANCE_US / 2, 300)}
    assert completion_lag_us(list(late.items()), ALL_REDUCE, None) == float("inf")
    assert completion_lag_us(list(jitter.items()), ALL_REDUCE, None) == -CLOCK_TOLERANCE_US / 2
    assert completion_lag_us(list(early.items()), ALL_REDUCE, None) == 90


def test_collectives_nobody_matches_fall_back_to_the_default_group():
    groups = group_table(RECORDS, world_size=WORLD)
    found = resolve({0: [coll(1, 64)], 1: [coll(1, 128)]}, groups, WORLD, align=False)
    assert (found[0][1].pg_name, found[0][1].method) == ("0", AMBIGUOUS)


def test_without_any_group_record_the_default_group_is_assumed():
    found = resolve({0: [coll(1, 64)]}, group_table(world_size=1), 1, have_records=False)
    assert (found[0][1].pg_name, found[0][1].method) == ("0", NO_RECORDS)


def test_sends_find_their_global_peer_through_the_group_both_sides_agree_on():
    groups = group_table(RECORDS, world_size=WORLD)
    send = CommNode(5, COMM_SEND_NODE, None, 32, None, None, None, issue_order=5, peer=1, tag=7)
    recv = CommNode(6, COMM_RECV_NODE, None, 32, None, None, None, issue_order=6, peer=0, tag=7)
    # rank 2 sends to group rank 1: in group "2" that is rank 3, in group "3" rank 2 itself
    found = resolve({2: [send], 3: [recv]}, groups, WORLD)
    assert (found[2][5].pg_name, found[2][5].peer_rank) == ("2", 3)
    attrs = dict(node_attributes([send], found[2], groups, 2)[5])
    assert (attrs["comm_src"], attrs["comm_dst"], attrs["comm_tag"]) == (2, 3, 7)


def test_collectives_are_numbered_per_group_in_issue_order():
    groups = group_table(RECORDS, world_size=WORLD)
    nodes = [coll(3, 8, pg="1"), coll(1, 8, pg="1"), coll(2, 8, pg="3")]
    found = resolve({0: nodes}, groups, WORLD)
    attrs = node_attributes(nodes, found[0], groups, 0)
    assert {nid: dict(a)["comm_seq"] for nid, a in attrs.items()} == {1: 0, 3: 1, 2: 0}


def test_group_names_become_the_decimal_ids_astra_sim_reads():
    assert astra_ids(["0", "7", "tp_group", "dp"]) == {"0": "0", "7": "7", "dp": "8", "tp_group": "9"}


def test_the_groups_file_lists_the_non_default_groups_used():
    groups = group_table(RECORDS, world_size=WORLD)
    assert comm_groups_json(groups, {"0", "1", "3"}, WORLD) == {1: [0, 1], 3: [0, 2]}
