"""chakra.analyze.ranks: ranks side by side, collectives matched across ranks, stragglers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_node, require_shared, write_et

from chakra.analyze.ranks import (
    DEFAULT_GROUP,
    Straggler,
    collective_arrivals,
    compare_ranks,
    stragglers,
)
from chakra.errors import ChakraInputError
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
)
from chakra.workload import open_workload

T0_US = 1_000_000  # an absolute clock, as in a recording; arrivals are relative to the earliest start


def collective(node_id: int, start_us: int, comm_type: int = ALL_REDUCE, pg_name: str = "0", **attrs) -> object:
    return make_node(
        node_id,
        f"coll{node_id}",
        COMM_COLL_NODE,
        start_time_micros=T0_US + start_us,
        duration_micros=1,
        is_cpu_op=False,
        comm_type=comm_type,
        comm_size=attrs.pop("comm_size", 1024),
        pg_name=pg_name,
        **attrs,
    )


def compute(node_id: int, start_us: int, dur_us: int) -> object:
    return make_node(
        node_id, f"op{node_id}", COMP_NODE, start_time_micros=T0_US + start_us, duration_micros=dur_us, is_cpu_op=True
    )


def write_workload(folder: Path, ranks: dict[int, list], comm_groups: dict[str, list[int]] | None = None) -> Path:
    for rank, nodes in ranks.items():
        write_et(folder / f"job.{rank}.et", nodes)
    if comm_groups is not None:
        (folder / "job.comm_groups.json").write_text(json.dumps(comm_groups))
    return folder / "job"


def late_rank_workload(folder: Path) -> Path:
    """Three ranks, four collectives on the group of every rank.

    arrivals (µs after T0):   rank 0   rank 1   rank 2   last   late = last - second-to-last
      all-reduce #0             10       12       20      2       20 - 12 = 8 µs
      all-reduce #1             30       31       40      2       40 - 31 = 9 µs
      all-gather #2             50       55       50      1       55 - 50 = 5 µs
      broadcast  #3             60       60       58      -       tie for last: 0
    A send/recv pair (rank 0 -> 1) is point-to-point and takes no part.
    """
    arrivals = {0: (10, 30, 50, 60), 1: (12, 31, 55, 60), 2: (20, 40, 50, 58)}
    kinds = (ALL_REDUCE, ALL_REDUCE, ALL_GATHER, BROADCAST)
    ranks = {}
    for rank, starts in arrivals.items():
        nodes = [compute(1, 0, starts[0])]
        nodes += [collective(10 + k, start, kind) for k, (start, kind) in enumerate(zip(starts, kinds, strict=True))]
        ranks[rank] = nodes
    ranks[0].append(make_node(20, "send", COMM_SEND_NODE, start_time_micros=T0_US + 70, comm_src=0, comm_dst=1))
    ranks[1].append(make_node(20, "recv", COMM_RECV_NODE, start_time_micros=T0_US + 90, comm_src=0, comm_dst=1))
    return write_workload(folder, ranks)


def test_the_last_rank_at_each_collective_is_late_by_the_gap_to_the_second_to_last(tmp_path):
    arrivals = collective_arrivals(open_workload(late_rank_workload(tmp_path)))
    assert [(a.seq, a.comm_type, a.last_rank, a.late_ns) for a in arrivals[:3]] == [
        (0, "ALL_REDUCE", 2, 8_000),
        (1, "ALL_REDUCE", 2, 9_000),
        (2, "ALL_GATHER", 1, 5_000),
    ]
    assert (arrivals[3].comm_type, arrivals[3].late_ns) == ("BROADCAST", 0)  # ranks 0 and 1 tie for last
    assert arrivals[0].arrivals_ns == {0: 10_000, 1: 12_000, 2: 20_000}
    assert {a.group for a in arrivals} == {DEFAULT_GROUP}


def test_stragglers_sum_their_lateness_and_leave_out_ties(tmp_path):
    # rank 2: 8 + 9 µs over two collectives; rank 1: 5 µs once; the broadcast's tie counts for nobody
    found = stragglers(collective_arrivals(open_workload(late_rank_workload(tmp_path))))
    assert found == [Straggler(2, 2, 17_000, 9_000), Straggler(1, 1, 5_000, 5_000)]


def test_compare_ranks_reports_the_stragglers_and_every_collective_matched(tmp_path):
    comparison = compare_ranks(open_workload(late_rank_workload(tmp_path)))
    assert [s.rank for s in comparison.stragglers] == [2, 1]
    assert len(comparison.collectives) == 4 and comparison.unmatched == 0
    assert comparison.note is None


def test_imbalance_is_the_largest_rank_over_the_mean_minus_one(tmp_path):
    # one compute op of 10, 20, 30 µs per rank: spans and compute 10/20/30 µs, mean 20 -> 30/20 - 1 = 0.5;
    # one node each and no communication -> 0
    ranks = {rank: [compute(1, 0, dur)] for rank, dur in enumerate((10, 20, 30))}
    comparison = compare_ranks(open_workload(write_workload(tmp_path, ranks)))
    assert [row.span_ns for row in comparison.rows] == [10_000, 20_000, 30_000]
    assert comparison.imbalance["span"] == pytest.approx(0.5)
    assert comparison.imbalance["compute"] == pytest.approx(0.5)
    assert comparison.imbalance["communication"] == 0.0 and comparison.imbalance["nodes"] == 0.0
    assert comparison.slowest_rank == 2


def test_groups_of_a_comm_groups_file_match_only_their_members(tmp_path):
    # group 1 = ranks 0, 1 (rank 1 last by 3 µs); group 2 = ranks 1, 2 (rank 1 last by 4 µs)
    ranks = {
        0: [collective(1, 10, pg_name="1")],
        1: [collective(1, 13, pg_name="1"), collective(2, 30, pg_name="2")],
        2: [collective(2, 26, pg_name="2")],
    }
    arrivals = collective_arrivals(open_workload(write_workload(tmp_path, ranks, {"1": [0, 1], "2": [1, 2]})))
    assert [(a.group, sorted(a.arrivals_ns), a.last_rank, a.late_ns) for a in arrivals] == [
        ("1", [0, 1], 1, 3_000),
        ("2", [1, 2], 1, 4_000),
    ]


def test_a_group_member_that_never_issues_the_collective_leaves_it_unmatched(tmp_path):
    # the file says group 1 is ranks 0, 1, 2; rank 2 issues nothing on it, so the two nodes of ranks 0, 1
    # cannot be matched (without the file the group would be inferred as ranks 0, 1)
    ranks = {0: [collective(1, 10, pg_name="1")], 1: [collective(1, 12, pg_name="1")], 2: [compute(1, 0, 5)]}
    comparison = compare_ranks(open_workload(write_workload(tmp_path, ranks, {"1": [0, 1, 2]})))
    assert comparison.collectives == [] and comparison.unmatched == 2


def test_without_a_comm_groups_file_the_issuing_ranks_form_the_group(tmp_path):
    ranks = {0: [collective(1, 10, pg_name="7")], 1: [collective(1, 12, pg_name="7")], 2: [compute(1, 0, 5)]}
    (arrival,) = collective_arrivals(open_workload(write_workload(tmp_path, ranks)))
    assert arrival.arrivals_ns == {0: 10_000, 1: 12_000}  # from rank 2's op at 0, the earliest start


def test_a_rank_with_an_extra_collective_leaves_one_unmatched(tmp_path):
    ranks = {0: [collective(1, 10), collective(2, 20)], 1: [collective(1, 11)]}
    comparison = compare_ranks(open_workload(write_workload(tmp_path, ranks)))
    assert len(comparison.collectives) == 1 and comparison.unmatched == 1


def test_collectives_whose_types_disagree_are_unmatched_and_later_ones_still_match(tmp_path):
    # seq 0: all-reduce on rank 0, all-gather on rank 1 -> 2 unmatched nodes; seq 1 agrees
    ranks = {
        0: [collective(1, 10, ALL_REDUCE), collective(2, 20, BROADCAST)],
        1: [collective(1, 10, ALL_GATHER), collective(2, 21, BROADCAST)],
    }
    comparison = compare_ranks(open_workload(write_workload(tmp_path, ranks)))
    assert [(c.seq, c.comm_type, c.late_ns) for c in comparison.collectives] == [(1, "BROADCAST", 1_000)]
    assert comparison.unmatched == 2


def test_each_rank_orders_its_collectives_by_start_time_not_by_file_order(tmp_path):
    # rank 1 writes its second all-reduce first in the file; by start time it is still the second
    ranks = {
        0: [collective(1, 10, comm_size=1), collective(2, 20, comm_size=2)],
        1: [collective(2, 25, comm_size=2), collective(1, 11, comm_size=1)],
    }
    arrivals = collective_arrivals(open_workload(write_workload(tmp_path, ranks)))
    assert [(a.size_bytes, a.late_ns) for a in arrivals] == [(1, 1_000), (2, 5_000)]


def untimed_workload(folder: Path) -> Path:
    nodes = [
        make_node(1, "op", COMP_NODE, duration_micros=5, is_cpu_op=True),
        make_node(2, "ar", COMM_COLL_NODE, [1], duration_micros=2, comm_type=ALL_REDUCE, comm_size=8),
    ]
    return write_workload(folder, {0: nodes, 1: nodes})


def test_without_start_times_compare_ranks_still_compares_and_says_why_there_are_no_stragglers(tmp_path):
    comparison = compare_ranks(open_workload(untimed_workload(tmp_path)))
    assert [row.span_ns for row in comparison.rows] == [7_000, 7_000]  # replayed: 5 µs then 2 µs
    assert comparison.stragglers == [] and comparison.collectives == [] and comparison.unmatched == 0
    assert "no start times" in comparison.note


def test_asking_for_arrivals_without_start_times_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="start_time_micros"):
        collective_arrivals(open_workload(untimed_workload(tmp_path)))


def test_a_comparison_is_json_ready_and_a_frame_of_ranks(tmp_path):
    comparison = compare_ranks(open_workload(late_rank_workload(tmp_path)))
    record = json.loads(json.dumps(comparison.to_dict()))
    assert record["collectives"][0]["arrivals_ns"] == {"0": 10_000, "1": 12_000, "2": 20_000}
    frame = comparison.to_pandas()
    assert frame["rank"].tolist() == [0, 1, 2] and "comm_exposed_ns" in frame.columns


def test_a_real_trace_whose_replay_is_stuck_on_a_cycle_is_an_input_error(upstream_et_gz):
    # the upstream converter's trace records no start times and its graph has a dependency cycle
    with pytest.raises(ChakraInputError, match="dependency cycle"):
        compare_ranks(open_workload(upstream_et_gz))


def test_a_single_real_gpu_rank_is_compared_with_itself(tmp_path):
    result = convert_workload(
        str(require_shared("hta/benchmark_simple_add_et.json.gz")),
        str(require_shared("hta/benchmark_simple_add_trace.json.gz")),
        tmp_path / "add",
    )
    comparison = compare_ranks(open_workload(result.written.paths[0]))
    (row,) = comparison.rows
    assert row.span_ns > 0 and row.compute_ns > 0 and comparison.slowest_rank == 0
    assert all(value == 0.0 for value in comparison.imbalance.values())  # one rank is its own mean
    assert comparison.collectives == [] and comparison.note is None


@pytest.fixture(scope="module")
def gloo_workload(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory):
    prefix = tmp_path_factory.mktemp("ranks_gloo") / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    return open_workload(prefix)


def test_every_collective_of_a_real_gloo_job_is_matched_across_its_two_ranks(gloo_workload):
    comparison = compare_ranks(gloo_workload)
    per_rank = {rank: int((t.graph.node_type == COMM_COLL_NODE).sum()) for rank, t in gloo_workload.tables.items()}
    assert per_rank[0] == per_rank[1] > 0
    assert comparison.unmatched == 0 and len(comparison.collectives) == per_rank[0]
    assert all(sorted(c.arrivals_ns) == [0, 1] for c in comparison.collectives)
    assert [row.rank for row in comparison.rows] == [0, 1] and comparison.note is None
