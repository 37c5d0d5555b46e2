"""chakra.analyze.diff: two traces compared, the span change explained, operators added/removed/faster/slower."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_node, require_shared, write_et

from chakra.analyze.diff import (
    EXPLAINED_KEYS,
    FASTER,
    SLOWER,
    UNCHANGED,
    diff_tables,
    diff_workloads,
)
from chakra.errors import ChakraInputError
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE, MEM_LOAD_NODE
from chakra.table import load_table
from chakra.workload import open_workload

T0_US = 1_000_000


def cpu_op(node_id: int, name: str, start_us: int, dur_us: int) -> object:
    return make_node(
        node_id, name, COMP_NODE, start_time_micros=T0_US + start_us, duration_micros=dur_us, is_cpu_op=True, tid=1
    )


def step(path: Path, all_reduce_start_us: int, last_op: str, last_op_start_us: int) -> Path:
    """mm [0, 10) and relu [10, 14) on thread 1, a 10 µs all-reduce on thread 2, a 2 µs copy after
    it, then a 1 µs op ``last_op`` (times in µs)."""
    ar_end = all_reduce_start_us + 10
    nodes = [
        cpu_op(1, "mm", 0, 10),
        cpu_op(2, "relu", 10, 4),
        make_node(3, "all_reduce", COMM_COLL_NODE, start_time_micros=T0_US + all_reduce_start_us, duration_micros=10,
                  is_cpu_op=False, tid=2, comm_type=ALL_REDUCE, comm_size=1024),
        make_node(4, "copy", MEM_LOAD_NODE, start_time_micros=T0_US + ar_end, duration_micros=2),
        cpu_op(5, last_op, last_op_start_us, 1),
    ]  # fmt: skip
    return write_et(path, nodes)


@pytest.fixture
def before_after(tmp_path):
    """a: all-reduce [10, 20) under relu for [10, 14), copy [20, 22), idle [22, 24), old_op [24, 25)
         span 25 = compute 15 (mm, relu, old_op) + exposed comm 6 [14, 20) + memory only 2 + idle 2
    b: all-reduce [14, 24) after relu, copy [24, 26), new_op [26, 27), no gap
         span 27 = compute 15 + exposed comm 10 + memory only 2 + idle 0"""
    a = load_table(step(tmp_path / "a.0.et", 10, "old_op", 24))
    b = load_table(step(tmp_path / "b.0.et", 14, "new_op", 26))
    return a, b


def test_the_span_change_is_split_into_disjoint_causes_that_sum_to_it(before_after):
    d = diff_tables(*before_after)
    assert (d.span_a_ns, d.span_b_ns, d.delta_span_ns) == (25_000, 27_000, 2_000)
    # the all-reduce no longer hides behind relu (+4 µs exposed) and the gap closed (-2 µs idle)
    assert d.explained == {"compute": 0, "comm_exposed": 4_000, "memory_exposed": 0, "idle": -2_000}
    assert sum(d.explained.values()) == d.delta_span_ns


def test_exposed_communication_changes_while_communication_itself_does_not(before_after):
    d = diff_tables(*before_after)
    assert d.by_category["communication"] == (10_000, 10_000, 0)
    assert d.by_category["comm_exposed"] == (6_000, 10_000, 4_000)
    assert d.by_category["idle"] == (2_000, 0, -2_000)


def test_operators_only_in_one_trace_are_added_or_removed(before_after):
    d = diff_tables(*before_after)
    assert [op.name for op in d.added()] == ["new_op"] and [op.name for op in d.removed()] == ["old_op"]
    assert {op.name for op in d.ops if op.status == UNCHANGED} == {"mm", "relu", "all_reduce", "copy"}


def chain_trace(path: Path, durations_ns: dict[str, list[int]]) -> Path:
    """One compute op per duration, each after the previous one (no start times: the replay places them)."""
    nodes = []
    for name, durations in durations_ns.items():
        for dur_ns in durations:
            deps = [len(nodes)] if nodes else []
            nodes.append(make_node(len(nodes) + 1, name, COMP_NODE, deps, is_cpu_op=True, duration_ns=dur_ns))
    return write_et(path, nodes)


def test_faster_and_slower_need_both_five_per_cent_and_one_microsecond(tmp_path):
    before = {"grow": [10_000], "shrink": [20_000], "jitter": [100_000], "tick": [10_000], "twice": [10_000]}
    after = {"grow": [20_000], "shrink": [15_000], "jitter": [104_000], "tick": [10_500], "twice": [10_000, 10_000]}
    a, b = chain_trace(tmp_path / "a.0.et", before), chain_trace(tmp_path / "b.0.et", after)
    d = diff_tables(load_table(a), load_table(b))
    assert [(op.name, op.delta_ns, op.status) for op in d.ops] == [
        ("grow", 10_000, SLOWER),  # +100 %
        ("twice", 10_000, SLOWER),  # called twice as often: its total doubled
        ("shrink", -5_000, FASTER),  # -25 %
        ("jitter", 4_000, UNCHANGED),  # 4 µs but only 4 %
        ("tick", 500, UNCHANGED),  # 5 % but under 1 µs
    ]
    twice = d.ops[1]
    assert (twice.count_a, twice.count_b, twice.total_ns_a, twice.total_ns_b) == (1, 2, 10_000, 20_000)


def test_a_diff_is_json_ready_and_a_frame_of_operators(before_after):
    d = diff_tables(*before_after)
    record = json.loads(json.dumps(d.to_dict()))
    assert record["by_category"]["comm_exposed"] == [6_000, 10_000, 4_000]
    frame = d.to_pandas()
    assert len(frame) == len(d.ops) and {"name", "delta_ns", "status"} <= set(frame.columns)


def write_ranks(folder: Path, prefix: str, spans_us: dict[int, int]) -> Path:
    for rank, span_us in spans_us.items():
        write_et(folder / f"{prefix}.{rank}.et", [cpu_op(1, "x", 0, span_us)])
    return folder / prefix


def test_a_workload_step_compares_the_slowest_ranks_and_sums_operators_over_ranks(tmp_path):
    # a: rank 1 is slowest (30 µs); b: rank 0 is (40 µs) -> the step grew by 10 µs;
    # op x: 10 + 30 = 40 µs in a, 40 + 20 = 60 µs in b
    a = open_workload(write_ranks(tmp_path, "a", {0: 10, 1: 30}))
    b = open_workload(write_ranks(tmp_path, "b", {0: 40, 1: 20}))
    d = diff_workloads(a, b)
    assert (d.rank_a, d.rank_b, d.delta_span_ns) == (1, 0, 10_000)
    (op,) = d.ops
    assert (op.total_ns_a, op.total_ns_b, op.count_b, op.status) == (40_000, 60_000, 2, SLOWER)


def test_a_workload_rank_compares_that_rank_of_each(tmp_path):
    a = open_workload(write_ranks(tmp_path, "a", {0: 10, 1: 30}))
    b = open_workload(write_ranks(tmp_path, "b", {0: 40, 1: 20}))
    d = diff_workloads(a, b, rank=1)
    assert (d.rank_a, d.rank_b, d.delta_span_ns) == (1, 1, -10_000)
    assert [op.status for op in d.faster()] == [FASTER]


def test_a_rank_missing_from_a_workload_is_an_input_error(tmp_path):
    a = open_workload(write_ranks(tmp_path, "a", {0: 10, 1: 30}))
    b = open_workload(write_ranks(tmp_path, "b", {0: 40}))
    with pytest.raises(ChakraInputError, match="no rank 1"):
        diff_workloads(a, b, rank=1)


def assert_identical(d) -> None:
    assert d.delta_span_ns == 0 and set(d.explained) == set(EXPLAINED_KEYS)
    assert all(delta == 0 for delta in d.explained.values())
    assert all(delta == 0 for _, _, delta in d.by_category.values())
    assert d.ops and all(op.status == UNCHANGED and op.delta_ns == 0 for op in d.ops)
    assert not (d.added() or d.removed() or d.faster() or d.slower())


def test_a_real_gpu_trace_diffed_with_itself_is_all_unchanged(tmp_path):
    result = convert_workload(
        str(require_shared("hta/benchmark_simple_add_et.json.gz")),
        str(require_shared("hta/benchmark_simple_add_trace.json.gz")),
        tmp_path / "add",
    )
    table = load_table(result.written.paths[0])
    assert_identical(diff_tables(table, table))


def test_a_real_gloo_job_diffed_with_itself_is_all_unchanged(gloo_traces: Path, tmp_path: Path):
    prefix = tmp_path / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    workload = open_workload(prefix)
    d = diff_workloads(workload, workload)
    assert_identical(d)
    assert d.span_a_ns > 0 and d.rank_a == d.rank_b
