"""chakra.analyze.critical_path: the longest dependency chain weighted by durations, and slack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import chain, make_node, write_et

from chakra import io
from chakra.analyze.critical_path import critical_path
from chakra.errors import ChakraInputError
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE
from chakra.table import NodeTable, load_table, table_from_nodes
from chakra.workload import open_workload

#: The upstream trace's known ctrl/data cycle (reference/chakra-format.md, "cycles").
UPSTREAM_CYCLE_IDS = {3317, 3318}


@pytest.fixture
def diamond():
    """a (1 µs) feeds b (5 µs, data dep) and c (2 µs, ctrl dep); d (1 µs) needs both.

    Earliest finishes: a 1, b 6, c 3, d 7 µs, so the path is a, b, d (7 µs). Latest finish of c is
    d's latest start, 6 µs, against its earliest finish of 3 µs: 3 µs of slack.
    """
    return table_from_nodes(
        [
            make_node(10, "a", duration_micros=1),
            make_node(11, "b", data_deps=[10], duration_micros=5),
            make_node(12, "c", ctrl_deps=[10], duration_micros=2),
            make_node(13, "d", data_deps=[11, 12], duration_micros=1),
        ],
        rank=3,
    )


def test_the_critical_path_of_a_diamond_takes_the_longer_branch(diamond):
    cp = critical_path(diamond)
    assert cp.length_ns == 7_000
    assert cp.positions == [0, 1, 3]
    assert cp.node_ids == [10, 11, 13]
    assert cp.start_ns == [0, 1_000, 6_000]
    assert cp.rank == 3


def test_the_slack_of_a_node_off_the_path_is_how_long_it_could_slip(diamond):
    (entry,) = critical_path(diamond).slack
    assert (entry.node_id, entry.name, entry.dur_ns, entry.slack_ns) == (12, "c", 2_000, 3_000)


def test_time_on_the_path_is_split_by_operator_and_category():
    nodes = [
        make_node(1, "mm", duration_micros=4),
        make_node(2, "all_reduce", COMM_COLL_NODE, data_deps=[1], duration_micros=3, comm_type=ALL_REDUCE),
        make_node(3, "mm", data_deps=[2], duration_micros=2),
    ]
    cp = critical_path(table_from_nodes(nodes))
    assert cp.by_operator == {"mm": 6_000, "all_reduce": 3_000}
    assert cp.by_category == {"compute": 6_000, "communication": 3_000, "memory": 0, "other": 0}


def test_ctrl_deps_are_dependencies_too():
    # b waits for a only through ctrl_deps: 2 + 3 µs, not 3
    nodes = [make_node(1, "a", duration_micros=2), make_node(2, "b", ctrl_deps=[1], duration_micros=3)]
    assert critical_path(table_from_nodes(nodes)).length_ns == 5_000


def test_resources_do_not_constrain_the_path():
    # two independent ops on one thread could not overlap when run, but the path only follows dependencies
    nodes = [make_node(i, duration_micros=4, is_cpu_op=True, tid=1) for i in (1, 2)]
    assert critical_path(table_from_nodes(nodes)).length_ns == 4_000


def test_ties_go_to_the_lowest_file_position():
    # two equal branches x (position 1) and y (position 2) between a and d
    nodes = [
        make_node(1, "a", duration_micros=1),
        make_node(2, "x", data_deps=[1], duration_micros=3),
        make_node(3, "y", data_deps=[1], duration_micros=3),
        make_node(4, "d", data_deps=[3, 2], duration_micros=1),
        make_node(5, "e", data_deps=[3, 2], duration_micros=1),  # ends as late as d
    ]
    cp = critical_path(table_from_nodes(nodes))
    assert cp.node_ids == [1, 2, 4]
    assert [(s.node_id, s.slack_ns) for s in cp.slack] == [(3, 0), (5, 0)]  # as long, just not chosen


def test_nodes_need_not_come_after_their_dependencies_in_the_file():
    nodes = [make_node(3, "last", data_deps=[2], duration_micros=1), *chain(3, duration_micros=2)]
    cp = critical_path(table_from_nodes(nodes))
    assert cp.node_ids == [0, 1, 2, 3]
    assert cp.length_ns == 7_000


def test_dependencies_on_missing_ids_are_ignored():
    nodes = [make_node(1, duration_micros=2, ctrl_deps=[99]), make_node(2, data_deps=[1], duration_micros=1)]
    assert critical_path(table_from_nodes(nodes)).length_ns == 3_000


def test_slack_lists_the_longest_nodes_off_the_path_first():
    nodes = [make_node(1, "root", duration_micros=100)]
    nodes += [make_node(i, f"side{i}", duration_micros=i) for i in range(2, 8)]
    cp = critical_path(table_from_nodes(nodes), top=3)
    assert [s.node_id for s in cp.slack] == [7, 6, 5]
    assert [s.slack_ns for s in cp.slack] == [93_000, 94_000, 95_000]  # each could end as late as root


def test_a_long_chain_needs_no_recursion():
    cp = critical_path(table_from_nodes(chain(5_000)))
    assert len(cp.positions) == 5_000 and cp.length_ns == 5_000_000


def test_a_cycle_is_an_error_that_names_its_nodes(tmp_path: Path):
    nodes = [
        make_node(1, duration_micros=1),
        make_node(2, data_deps=[1, 4], duration_micros=1),
        make_node(3, data_deps=[2], duration_micros=1),
        make_node(4, ctrl_deps=[3], duration_micros=1),
    ]
    table = load_table(write_et(tmp_path / "loop.0.et", nodes))
    cycle = r"cycle of 3 nodes: (2|3|4) -> .* -> (2|3|4) .*no critical path"
    with pytest.raises(ChakraInputError, match=cycle) as error:
        critical_path(table)
    assert "loop.0.et" in str(error.value) and sorted(error.value.ids) == [2, 3, 4]


def test_an_empty_trace_is_an_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="the trace has no nodes"):
        critical_path(load_table(write_et(tmp_path / "empty.0.et", [])))


def test_a_trace_whose_durations_are_all_zero_is_an_error():
    with pytest.raises(ChakraInputError, match="every node has duration 0"):
        critical_path(table_from_nodes(chain(3, duration_micros=0)))


def test_the_path_is_json_ready_and_a_frame_of_one_row_per_path_node(diamond):
    cp = critical_path(diamond)
    assert json.loads(json.dumps(cp.to_dict()))["slack"][0]["slack_ns"] == 3_000
    frame = cp.to_pandas()
    assert frame["name"].tolist() == ["a", "b", "d"]
    assert frame["dur_ns"].sum() == cp.length_ns


# --- real traces -----------------------------------------------------------------------------


def assert_is_a_critical_path(table: NodeTable, top: int = 20) -> None:
    """The path is a chain of real dependencies whose durations sum to its length, at least as long
    as any single node, and the slack list holds nodes off it (as many as asked for, when there are
    that many), each with a non-negative slack."""
    cp = critical_path(table, top=top)
    graph = table.graph
    for parent, child in zip(cp.positions, cp.positions[1:], strict=False):
        assert parent in graph.parents(child).tolist()
    assert graph.parents(cp.positions[0]).size == 0
    assert sum(table.dur_ns[cp.positions].tolist()) == cp.length_ns
    assert cp.length_ns >= int(table.dur_ns.max())
    assert sum(cp.by_category.values()) == sum(cp.by_operator.values()) == cp.length_ns
    assert len(cp.slack) == min(top, len(table) - len(cp.positions))
    assert all(s.slack_ns >= 0 and s.position not in cp.positions for s in cp.slack)


def test_the_upstream_trace_reports_its_dependency_cycle(upstream_et_gz: Path):
    with pytest.raises(ChakraInputError, match="cycle") as error:
        critical_path(load_table(upstream_et_gz))
    assert all(str(node_id) in str(error.value) for node_id in UPSTREAM_CYCLE_IDS)


def test_the_upstream_trace_has_a_critical_path_through_its_data_deps(upstream_et_gz: Path):
    # its ctrl deps hold the converter's cycle; the data deps alone form a DAG
    nodes = list(io.stream(upstream_et_gz))
    for node in nodes:
        del node.ctrl_deps[:]
    assert_is_a_critical_path(table_from_nodes(nodes, path=upstream_et_gz))


@pytest.fixture(scope="module")
def gloo_rank0(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory):
    prefix = tmp_path_factory.mktemp("critical_path_gloo") / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    return open_workload(prefix).tables[0]


def test_a_converted_gloo_rank_has_a_critical_path(gloo_rank0):
    assert_is_a_critical_path(gloo_rank0)
