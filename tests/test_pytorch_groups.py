"""chakra.pytorch.groups: which process group a collective used when the trace does not say."""

from __future__ import annotations

from chakra.pytorch.comms import CommNode
from chakra.pytorch.groups import (
    ALIGNED,
    AMBIGUOUS,
    NO_RECORDS,
    ONLY_GROUP,
    RECORDED,
    astra_ids,
    comm_groups_json,
    group_table,
    node_attributes,
    resolve,
)
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE

WORLD = 4
#: Tensor parallel pairs {0,1} {2,3} and data parallel pairs {0,2} {1,3}, as PyTorch records them.
RECORDS = [
    {"pg_name": "0", "ranks": [], "group_size": 4},
    {"pg_name": "1", "ranks": [0, 1]},
    {"pg_name": "2", "ranks": [2, 3]},
    {"pg_name": "3", "ranks": [0, 2]},
    {"pg_name": "4", "ranks": [1, 3]},
]


def coll(node_id: int, size: int, end_us: float | None = None, pg: str | None = None) -> CommNode:
    return CommNode(node_id, COMM_COLL_NODE, ALL_REDUCE, size, pg, None, end_us, issue_order=node_id)


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


#: End times (µs) of a TP all-reduce (pairs {0,1}, {2,3} finish together) and of a DP all-reduce
#: (pairs {0,2}, {1,3} finish together), as one clock on one machine records them.
TP_END_US = {0: 100.0, 1: 101.0, 2: 300.0, 3: 302.0}
DP_END_US = {0: 1000.0, 2: 1001.0, 1: 2000.0, 3: 2003.0}


def test_tensor_and_data_parallel_collectives_are_told_apart_by_aligning_the_ranks():
    per_rank = {r: [coll(10, 64, TP_END_US[r]), coll(20, 4096, DP_END_US[r])] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert [found[r][10].pg_name for r in range(WORLD)] == ["1", "1", "2", "2"]
    assert [found[r][20].pg_name for r in range(WORLD)] == ["3", "4", "3", "4"]
    assert all(f.method == ALIGNED for ranks in found.values() for f in ranks.values())


def test_without_timing_equal_collectives_on_every_rank_are_marked_ambiguous():
    per_rank = {r: [coll(10, 64), coll(20, 4096)] for r in range(WORLD)}
    found = resolve(per_rank, group_table(RECORDS, world_size=WORLD), WORLD)
    assert {(f.pg_name, f.method) for ranks in found.values() for f in ranks.values()} == {("0", AMBIGUOUS)}


def test_finishing_together_decides_between_groups_that_both_fit():
    # the same 64-byte all-reduce everywhere: the whole world, or two pairs? The end times say pairs.
    per_rank = {0: [coll(1, 64, 100.0)], 1: [coll(1, 64, 101.0)], 2: [coll(1, 64, 500.0)], 3: [coll(1, 64, 502.0)]}
    groups = group_table(RECORDS, world_size=WORLD)
    found = resolve(per_rank, groups, WORLD)
    assert [found[rank][1].pg_name for rank in range(WORLD)] == ["1", "1", "2", "2"]


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
