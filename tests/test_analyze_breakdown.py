"""chakra.analyze.breakdown: compute / communication / memory / idle time, overlap, and time per operator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_node, write_et

from chakra.analyze.breakdown import (
    TIMING_RECORDED,
    TIMING_REPLAY,
    breakdown,
    node_starts,
    operator_stats,
    top_operators,
)
from chakra.errors import ChakraInputError
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMM_SEND_NODE,
    MEM_LOAD_NODE,
    METADATA_NODE,
)
from chakra.table import COMMUNICATION, load_table, table_from_nodes
from chakra.workload import open_workload

T0 = 1_000  # µs: the first recorded start of the hand-built traces; times below are relative to it


def cpu(node_id, start_us, dur_us, tid=1, name=None, **kw):
    """A host op on thread ``tid`` starting ``start_us`` after T0 (``start_us=None``: not recorded)."""
    start = 0 if start_us is None else T0 + start_us
    return make_node(node_id, name, start_time_micros=start, duration_micros=dur_us, is_cpu_op=True, tid=tid, **kw)


def kernel(node_id, start_us, dur_us, stream=7, name=None, type=None, **kw):
    """A device node on ``stream`` (a compute kernel unless ``type`` says otherwise)."""
    extra = {"type": type} if type is not None else {}
    return make_node(
        node_id, name, start_time_micros=T0 + start_us, duration_micros=dur_us, is_cpu_op=False, stream=stream,
        **extra, **kw,
    )  # fmt: skip


@pytest.fixture
def overlapping():
    """Compute and communication overlapping, a gap, an unplaced op and a metadata node (µs from T0):

    thread 1:  n1 compute [0, 10)             n4 compute [25, 30)      n7 compute, no start (100 µs)
    stream 7:     n2 compute [5, 15)
    stream 20:          n3 all-reduce [12, 20)       n5 send [28, 34)
    n6 metadata [40, 90), on no track
    """
    return table_from_nodes(
        [
            cpu(1, 0, 10),
            kernel(2, 5, 10),
            kernel(3, 12, 8, stream=20, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=1000),
            cpu(4, 25, 5),
            kernel(5, 28, 6, stream=20, type=COMM_SEND_NODE, comm_size=64, comm_dst=1),
            make_node(6, type=METADATA_NODE, start_time_micros=T0 + 40, duration_micros=50),
            cpu(7, None, 100),
        ],
        rank=0,
    )


def test_breakdown_splits_recorded_time_into_compute_communication_overlap_and_idle(overlapping):
    b = breakdown(overlapping)
    assert b.timing == TIMING_RECORDED
    # compute [0, 15) + [25, 30) = 20 µs; communication [12, 20) + [28, 34) = 14 µs
    assert (b.compute_ns, b.communication_ns, b.memory_ns) == (20_000, 14_000, 0)
    # both at once: [12, 15) + [28, 30) = 5 µs, so 14 - 5 = 9 µs of communication is exposed
    assert (b.comm_overlapped_ns, b.comm_exposed_ns) == (5_000, 9_000)
    # span [0, 34) (metadata left out); busy [0, 20) + [25, 34) = 29 µs, so 5 µs idle
    assert (b.span_ns, b.idle_ns) == (34_000, 5_000)


def test_busy_time_per_track_is_the_union_of_its_nodes(overlapping):
    # thread 1: [0, 10) + [25, 30); stream 7: [5, 15); stream 20: [12, 20) + [28, 34)
    assert breakdown(overlapping).busy_by_track == {"thread 1": 15_000, "stream 7": 10_000, "stream 20": 14_000}


def test_metadata_nodes_take_no_time_even_on_a_thread():
    metadata = make_node(2, type=METADATA_NODE, start_time_micros=T0, duration_micros=50, tid=1)
    b = breakdown(table_from_nodes([cpu(1, 0, 10), metadata]))
    # the metadata node's [0, 50) on thread 1 is left out: span and busy time are the op's 10 µs
    assert (b.span_ns, b.idle_ns, b.busy_by_track["thread 1"]) == (10_000, 0, 10_000)


def test_nodes_without_a_recorded_start_count_but_take_no_time(overlapping):
    b = breakdown(overlapping)
    assert b.nodes_by_category == {"compute": 4, "communication": 2, "memory": 0, "other": 1}
    assert b.compute_ns == 20_000  # n7's 100 µs has no place on the timeline


def test_communication_volume_per_collective_type_and_point_to_point(overlapping):
    b = breakdown(overlapping)
    assert b.bytes_by_collective == {"ALL_REDUCE": 1000, "SEND": 64}
    assert b.count_by_collective == {"ALL_REDUCE": 1, "SEND": 1}


def test_communication_nodes_without_a_duration_are_counted_as_untimed():
    nodes = [
        make_node(1, "gemm", duration_micros=10, stream=7),
        make_node(2, "ar", COMM_COLL_NODE, data_deps=[1], stream=20, comm_type=ALL_REDUCE, comm_size=8),
        make_node(3, "ag", COMM_COLL_NODE, data_deps=[1], duration_micros=3, stream=20, comm_type=ALL_REDUCE),
    ]
    b = breakdown(table_from_nodes(nodes))
    assert b.untimed_comm_nodes == 1
    assert b.communication_ns == 3_000


def test_memory_nodes_are_their_own_category():
    table = table_from_nodes([cpu(1, 0, 10), kernel(2, 4, 10, stream=9, type=MEM_LOAD_NODE)])
    b = breakdown(table)
    # compute [0, 10), memory [4, 14): union [0, 14), nothing idle
    assert (b.compute_ns, b.memory_ns, b.span_ns, b.idle_ns) == (10_000, 10_000, 14_000, 0)


def test_replay_timing_is_used_when_the_trace_has_no_start_times():
    # the replay: a on thread 1 [0, 10); d also on thread 1, after a: [10, 15);
    # b (stream 7) and c (communication, stream 20) wait for a: [10, 14) and [10, 16)
    nodes = [
        make_node(1, "a", duration_micros=10, is_cpu_op=True, tid=1),
        make_node(2, "b", data_deps=[1], duration_micros=4, stream=7),
        make_node(3, "c", COMM_COLL_NODE, data_deps=[1], duration_micros=6, stream=20, comm_type=ALL_REDUCE),
        make_node(4, "d", duration_micros=5, is_cpu_op=True, tid=1),
    ]
    b = breakdown(table_from_nodes(nodes))
    assert b.timing == TIMING_REPLAY
    # compute [0, 15), communication [10, 16): 5 µs together, 1 µs exposed, span 16 µs, never idle
    assert (b.compute_ns, b.communication_ns, b.comm_overlapped_ns, b.comm_exposed_ns) == (15_000, 6_000, 5_000, 1_000)
    assert (b.span_ns, b.idle_ns) == (16_000, 0)


def test_replay_timing_can_be_asked_for_on_a_recorded_trace(overlapping):
    used, _, placed = node_starts(overlapping, TIMING_REPLAY)
    assert used == TIMING_REPLAY and placed.all()  # the replay places n7 too
    assert breakdown(overlapping, timing=TIMING_REPLAY).timing == TIMING_REPLAY


def test_recorded_timing_on_a_trace_without_start_times_is_an_error(tmp_path: Path):
    table = load_table(write_et(tmp_path / "gen.0.et", [make_node(1, duration_micros=3)]))
    with pytest.raises(ChakraInputError, match="no node records start_time_micros") as error:
        breakdown(table, timing=TIMING_RECORDED)
    assert "gen.0.et" in str(error.value)


def test_an_unknown_timing_is_an_error(overlapping):
    with pytest.raises(ChakraInputError, match="timing must be one of auto, recorded, replay"):
        breakdown(overlapping, timing="measured")


def test_an_empty_trace_is_an_error(tmp_path: Path):
    table = load_table(write_et(tmp_path / "empty.0.et", []))
    with pytest.raises(ChakraInputError, match="the trace has no nodes"):
        breakdown(table)


def test_a_trace_whose_durations_are_all_zero_is_an_error():
    with pytest.raises(ChakraInputError, match="every node has duration 0"):
        breakdown(table_from_nodes([make_node(1), make_node(2, data_deps=[1])]))


def test_the_breakdown_is_json_ready_and_a_frame_of_one_row_per_quantity(overlapping):
    b = breakdown(overlapping)
    assert json.loads(json.dumps(b.to_dict()))["busy_by_track"]["stream 7"] == 10_000
    frame = b.to_pandas()
    rows = {(q, k): v for q, k, v in zip(frame["quantity"], frame["key"], frame["value"], strict=True)}
    assert rows[("idle_ns", "")] == 5_000
    assert rows[("busy_by_track", "stream 20")] == 14_000
    assert rows[("nodes_by_category", "other")] == 1
    assert set(frame["rank"]) == {0}


# --- operators: total and exclusive time -------------------------------------------------------


def stats_by_name(table, **kw):
    return {s.name: s for s in operator_stats(table, **kw)}


def test_exclusive_time_subtracts_the_ops_nested_inside_on_the_same_thread():
    """thread 1: outer [0, 10) holds a [1, 4) and b [5, 9); b holds g [6, 8). Elsewhere, during
    outer: an op on thread 2 [2, 7) and a kernel [2, 3), which are not nested in it."""
    table = table_from_nodes(
        [
            cpu(1, 0, 10, name="outer"),
            cpu(2, 1, 3, name="a"),
            cpu(3, 5, 4, name="b"),
            cpu(4, 6, 2, name="g"),
            cpu(5, 2, 5, tid=2, name="other thread"),
            kernel(6, 2, 1, name="kernel"),
        ]
    )
    stats = stats_by_name(table)
    # outer: 10 - (3 + 4) = 3 (g lies inside b, so it is not subtracted twice); b: 4 - 2 = 2
    assert {name: s.exclusive_ns for name, s in stats.items()} == {
        "outer": 3_000, "a": 3_000, "b": 2_000, "g": 2_000, "other thread": 5_000, "kernel": 1_000,
    }  # fmt: skip
    assert stats["outer"].total_ns == 10_000


def test_exclusive_time_counts_overlapping_children_once():
    # parent [0, 10) holds x [2, 5) and y [4, 8), which overlap: together they cover [2, 8), 6 µs
    table = table_from_nodes([cpu(1, 0, 10, name="p"), cpu(2, 2, 3, name="x"), cpu(3, 4, 4, name="y")])
    assert stats_by_name(table)["p"].exclusive_ns == 4_000


def test_of_two_identical_intervals_the_later_one_is_nested_in_the_earlier():
    table = table_from_nodes([cpu(1, 0, 5, name="first"), cpu(2, 0, 5, name="second")])
    stats = stats_by_name(table)
    assert (stats["first"].exclusive_ns, stats["second"].exclusive_ns) == (0, 5_000)


def test_ops_partly_overlapping_their_neighbour_are_not_nested():
    # [0, 6) and [4, 10) on one thread (rounded timestamps): neither holds the other
    table = table_from_nodes([cpu(1, 0, 6, name="u"), cpu(2, 4, 6, name="v")])
    assert {s.name: s.exclusive_ns for s in operator_stats(table)} == {"u": 6_000, "v": 6_000}


def test_operator_stats_add_up_every_node_of_a_name_most_time_first():
    table = table_from_nodes(
        [cpu(1, 0, 4, name="mm"), cpu(2, 5, 4, name="mm"), cpu(3, 10, 7, name="add"), cpu(4, 20, 1, name="view")]
    )
    stats = operator_stats(table)
    assert [(s.name, s.category, s.count, s.total_ns) for s in stats] == [
        ("mm", "compute", 2, 8_000), ("add", "compute", 1, 7_000), ("view", "compute", 1, 1_000),
    ]  # fmt: skip


def test_top_operators_by_exclusive_time_ranks_what_is_left_after_nesting():
    # outer [0, 10) holds inner [0, 8): outer has more total time, inner more exclusive time
    table = table_from_nodes([cpu(1, 0, 10, name="outer"), cpu(2, 0, 8, name="inner")])
    assert [s.name for s in top_operators(table, 1)] == ["outer"]
    assert [s.name for s in top_operators(table, 1, by="exclusive")] == ["inner"]


def test_top_operators_rejects_an_unknown_ranking(overlapping):
    with pytest.raises(ChakraInputError, match="by must be 'total' or 'exclusive'"):
        top_operators(overlapping, by="count")


# --- a real trace: a live 2-rank gloo job, converted -------------------------------------------


@pytest.fixture(scope="module")
def gloo_rank0(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory):
    prefix = tmp_path_factory.mktemp("breakdown_gloo") / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    return open_workload(prefix).tables[0]


def test_a_converted_gloo_rank_breaks_down_consistently(gloo_rank0):
    b = breakdown(gloo_rank0)
    assert b.timing == TIMING_RECORDED
    assert b.compute_ns > 0 and b.communication_ns > 0 and b.memory_ns == 0  # gloo: no memory nodes
    # with no memory time, the busy time is the union of compute and communication:
    # |K ∪ C| = |K| + |C| - |K ∩ C|, and the span is that plus the idle time
    assert b.span_ns - b.idle_ns == b.compute_ns + b.communication_ns - b.comm_overlapped_ns
    assert b.comm_overlapped_ns + b.comm_exposed_ns == b.communication_ns
    assert 0 <= b.comm_overlapped_ns <= min(b.compute_ns, b.communication_ns)
    assert b.idle_ns >= 0
    # the union over all tracks is at most the sum of the tracks' unions, and holds each of them
    assert sum(b.busy_by_track.values()) >= b.span_ns - b.idle_ns >= max(b.busy_by_track.values())
    assert sum(b.nodes_by_category.values()) == len(gloo_rank0)
    assert sum(b.count_by_collective.values()) == int((gloo_rank0.category == COMMUNICATION).sum())
    assert {"ALL_REDUCE", "SEND", "RECV"} <= set(b.bytes_by_collective)


def test_operator_times_of_a_converted_gloo_rank_add_up(gloo_rank0):
    stats = operator_stats(gloo_rank0)
    assert sum(s.count for s in stats) == len(gloo_rank0)
    assert sum(s.total_ns for s in stats) == int(gloo_rank0.dur_ns.sum())
    assert all(0 <= s.exclusive_ns <= s.total_ns for s in stats)
    assert [s.total_ns for s in stats] == sorted((s.total_ns for s in stats), reverse=True)
