"""chakra.graph: the array view of one rank's dependency graph and the algorithms over it."""

from __future__ import annotations

import heapq
import sys

import numpy as np
import pytest
from helpers import UPSTREAM_NODE_COUNT, chain, make_node
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra import io
from chakra._kahn import kahn_order
from chakra.graph import CTRL_DEP, DATA_DEP, CycleError, build_graph, find_cycle, roots, topological_order
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, Node

# ---------------------------------------------------------------------------------------------
# build_graph


def small_graph_nodes() -> list[Node]:
    return [
        make_node(10, "root", COMP_NODE, duration_micros=5, start_time_micros=100),
        make_node(20, "coll", COMM_COLL_NODE, data_deps=[10], duration_micros=7),
        make_node(30, "both", COMP_NODE, data_deps=[20], ctrl_deps=[10]),
        make_node(40, "dangling", COMP_NODE, data_deps=[10, 99], ctrl_deps=[20]),
    ]


def test_build_graph_holds_ids_types_and_times_in_file_order():
    graph = build_graph(small_graph_nodes())

    assert graph.num_nodes == 4
    assert graph.ids.dtype == np.uint64 and graph.ids.tolist() == [10, 20, 30, 40]
    assert graph.node_type.tolist() == [COMP_NODE, COMM_COLL_NODE, COMP_NODE, COMP_NODE]
    assert graph.dur_us.tolist() == [5, 7, 0, 0]
    assert graph.start_us.tolist() == [100, 0, 0, 0]
    assert graph.position_of == {10: 0, 20: 1, 30: 2, 40: 3}


def test_build_graph_stores_dependencies_as_csr_of_positions_data_before_ctrl():
    graph = build_graph(small_graph_nodes())

    assert graph.dep_ptr.tolist() == [0, 0, 1, 3, 5]
    assert graph.dep_pos.tolist() == [0, 1, 0, 0, 1]
    assert graph.dep_kind.tolist() == [DATA_DEP, DATA_DEP, CTRL_DEP, DATA_DEP, CTRL_DEP]
    assert graph.num_edges == 5
    assert graph.parents(2).tolist() == [1, 0]


def test_dependencies_on_ids_absent_from_the_file_are_listed_not_put_in_the_csr():
    graph = build_graph(small_graph_nodes())

    assert graph.missing_deps == [(3, 99, DATA_DEP)]
    assert 99 not in graph.position_of
    assert graph.parents(3).tolist() == [0, 1]


def test_missing_ctrl_dependency_is_listed_with_its_kind():
    graph = build_graph([make_node(1, "thread root", ctrl_deps=[0])])  # the upstream converter's dangling root

    assert graph.missing_deps == [(0, 0, CTRL_DEP)]
    assert graph.num_edges == 0


def test_an_id_listed_in_both_dep_fields_gives_two_edges():
    graph = build_graph([make_node(1, "a"), make_node(2, "b", data_deps=[1], ctrl_deps=[1])])

    assert graph.parents(1).tolist() == [0, 0]
    assert graph.dep_kind.tolist() == [DATA_DEP, CTRL_DEP]


def test_duplicate_ids_are_reported_and_edges_go_to_the_last_occurrence():
    graph = build_graph([make_node(1, "first"), make_node(1, "second"), make_node(2, "child", data_deps=[1])])

    assert graph.duplicate_ids == [1]
    assert graph.position(1) == 1
    assert graph.parents(2).tolist() == [1]


def test_an_empty_node_list_gives_an_empty_graph():
    graph = build_graph([])

    assert (graph.num_nodes, graph.num_edges) == (0, 0)
    assert graph.dep_ptr.tolist() == [0]
    assert topological_order(graph).tolist() == []
    assert roots(graph).tolist() == []
    assert find_cycle(graph) == []


@pytest.mark.parametrize("node_type", [8, 300, -1, (1 << 31) - 1])
def test_node_types_outside_the_enum_are_kept_not_crashed_on(node_type):
    # proto3 enums are open: a corrupt or newer file can carry any int32 in Node.type
    node = Node(id=1, name="odd")
    node.type = node_type

    assert build_graph([node]).node_type.tolist() == [node_type]


def test_ids_and_times_keep_the_full_uint64_range():
    top = (1 << 64) - 1
    graph = build_graph([Node(id=top, name="big", duration_micros=top, start_time_micros=top)])

    assert int(graph.ids[0]) == int(graph.dur_us[0]) == int(graph.start_us[0]) == top


def test_children_csr_is_the_reverse_of_the_dependency_csr():
    graph = build_graph(small_graph_nodes())
    child_ptr, child_pos = graph.children_csr()

    children = {i: sorted(child_pos[child_ptr[i] : child_ptr[i + 1]].tolist()) for i in range(graph.num_nodes)}
    assert children == {0: [1, 2, 3], 1: [2, 3], 2: [], 3: []}


# ---------------------------------------------------------------------------------------------
# topological_order


def test_topological_order_puts_parents_before_children():
    nodes = [make_node(3, "c", data_deps=[2]), make_node(2, "b", ctrl_deps=[1]), make_node(1, "a")]

    order = topological_order(build_graph(nodes))

    assert order.tolist() == [2, 1, 0]


def test_topological_order_breaks_ties_by_file_position_not_by_id():
    nodes = [make_node(5, "first root"), make_node(1, "second root"), make_node(3, "child", data_deps=[5])]

    assert topological_order(build_graph(nodes)).tolist() == [0, 1, 2]


def test_topological_order_can_break_ties_by_id_like_astra_sim():
    g = build_graph([make_node(5), make_node(3), make_node(9, data_deps=[3]), make_node(4, data_deps=[3])])
    assert g.ids[topological_order(g, tie_break="id")].tolist() == [3, 4, 5, 9]


def test_topological_order_refuses_an_unknown_tie_break():
    with pytest.raises(ValueError, match="tie_break"):
        topological_order(build_graph([]), tie_break="name")


def test_topological_order_issues_the_smallest_ready_position_first():
    # position 0 becomes ready only after position 2, so it comes last
    nodes = [make_node(2, "waits", data_deps=[1]), make_node(3, "root a"), make_node(1, "root b")]

    assert topological_order(build_graph(nodes)).tolist() == [1, 2, 0]


def test_topological_order_leaves_out_nodes_on_or_behind_a_cycle():
    nodes = [
        make_node(1, "root"),
        make_node(2, "in cycle", data_deps=[1, 3]),
        make_node(3, "in cycle", ctrl_deps=[2]),
        make_node(4, "behind the cycle", data_deps=[3]),
        make_node(5, "independent", data_deps=[1]),
    ]

    assert topological_order(build_graph(nodes), strict=False).tolist() == [0, 4]


def test_topological_order_raises_one_cycle_error_naming_the_cycle_and_what_it_blocks():
    nodes = [
        make_node(1, "root"),
        make_node(2, "in cycle", data_deps=[1, 3]),
        make_node(3, "in cycle", ctrl_deps=[2]),
        make_node(4, "behind the cycle", data_deps=[3]),
    ]

    with pytest.raises(CycleError) as info:
        topological_order(build_graph(nodes), path="t.0.et")

    assert sorted(info.value.ids) == [2, 3] and info.value.blocked == 3
    assert str(info.value).startswith("t.0.et: dependency cycle of 2 nodes: ")


def test_the_fast_path_and_the_heap_agree_on_a_file_sorted_by_dependency():
    nodes = [make_node(i, data_deps=[i - 1] if i else []) for i in range(10)]
    graph = build_graph(nodes)

    assert topological_order(graph).tolist() == list(range(10))
    assert topological_order(graph, tie_break="id").tolist() == list(range(10))


@st.composite
def shuffled_dags(draw):
    """Nodes of a random DAG (edges from lower to higher rank of a hidden order), in shuffled file order."""
    n = draw(st.integers(min_value=1, max_value=40))
    edges = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120))
    order = draw(st.permutations(range(n)))  # order[k] = id of the k-th node of the hidden order
    rank = {node_id: k for k, node_id in enumerate(order)}
    nodes = {i: make_node(i, f"n{i}") for i in range(n)}
    for a, b in edges:
        if rank[a] < rank[b]:
            (nodes[b].ctrl_deps if (a + b) % 3 == 0 else nodes[b].data_deps).append(a)
    file_order = draw(st.permutations(range(n)))
    return [nodes[i] for i in file_order]


@settings(max_examples=150, deadline=None)
@given(nodes=shuffled_dags())
def test_topological_order_of_any_dag_places_every_node_after_all_its_dependencies(nodes):
    graph = build_graph(nodes)
    order = topological_order(graph).tolist()

    assert sorted(order) == list(range(len(nodes)))
    placed_at = {pos: k for k, pos in enumerate(order)}
    for pos, node in enumerate(nodes):
        for dep in [*node.data_deps, *node.ctrl_deps]:
            assert placed_at[graph.position(dep)] < placed_at[pos]
    assert find_cycle(graph) == []


def _ready_least_key_first(graph, key: list[int]) -> list[int]:
    """Kahn's order written out with Python's heap: the ready position of least ``key`` first."""
    parents = [graph.dep_pos[graph.dep_ptr[i] : graph.dep_ptr[i + 1]].tolist() for i in range(graph.num_nodes)]
    children: list[list[int]] = [[] for _ in parents]
    for child, of in enumerate(parents):
        for parent in of:
            children[parent].append(child)
    waiting = [len(of) for of in parents]
    ready = [(key[i], i) for i in range(graph.num_nodes) if waiting[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for child in children[i]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (key[child], child))
    return order


@settings(max_examples=150, deadline=None)
@given(nodes=shuffled_dags(), loops=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=3))
def test_topological_order_is_kahns_with_the_least_position_or_id_ready_first(nodes, loops):
    for a, b in loops:  # a few edges against the hidden order: cycles, left out of a non-strict order
        if a < len(nodes) and b < len(nodes):
            nodes[b].data_deps.append(nodes[a].id)
    graph = build_graph(nodes)
    by_id = sorted(range(len(nodes)), key=lambda pos: nodes[pos].id)
    id_rank = [0] * len(nodes)
    for rank, pos in enumerate(by_id):
        id_rank[pos] = rank
    assert topological_order(graph, strict=False).tolist() == _ready_least_key_first(graph, list(range(len(nodes))))
    assert topological_order(graph, tie_break="id", strict=False).tolist() == _ready_least_key_first(graph, id_rank)


# ---------------------------------------------------------------------------------------------
# find_cycle and roots


def assert_is_cycle(graph, cycle: list[int]) -> None:
    """Each position of ``cycle`` depends on the next one, and the last on the first."""
    assert cycle
    assert len(set(cycle)) == len(cycle)
    for pos, next_pos in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
        assert next_pos in graph.parents(pos).tolist()


def test_find_cycle_returns_positions_each_depending_on_the_next():
    nodes = [
        make_node(1, "root"),
        make_node(2, "a", data_deps=[1, 4]),
        make_node(3, "b", data_deps=[2]),
        make_node(4, "c", ctrl_deps=[3]),
    ]
    graph = build_graph(nodes)

    cycle = find_cycle(graph)

    assert sorted(cycle) == [1, 2, 3]
    assert_is_cycle(graph, cycle)


def test_find_cycle_finds_a_node_depending_on_itself():
    graph = build_graph([make_node(1, "root"), make_node(2, "self", data_deps=[2])])

    assert find_cycle(graph) == [1]


def test_find_cycle_returns_empty_for_a_dag():
    assert find_cycle(build_graph(chain(50))) == []


def test_find_cycle_searches_only_the_candidates_given():
    nodes = [make_node(1, "x", data_deps=[2]), make_node(2, "y", data_deps=[1]), make_node(3, "z")]
    graph = build_graph(nodes)

    assert find_cycle(graph, np.array([2])) == []
    assert sorted(find_cycle(graph, np.array([0, 1]))) == [0, 1]


def test_find_cycle_handles_a_100k_node_cycle_without_recursion():
    n = 100_000
    assert n > sys.getrecursionlimit()
    nodes = [make_node(i, "n", data_deps=[(i + 1) % n]) for i in range(n)]
    graph = build_graph(nodes)

    assert len(topological_order(graph, strict=False)) == 0
    cycle = find_cycle(graph)

    assert len(cycle) == n
    assert_is_cycle(graph, cycle)


def test_topological_order_handles_a_100k_node_chain():
    graph = build_graph(chain(100_000))

    assert topological_order(graph).tolist() == list(range(100_000))
    assert find_cycle(graph) == []


def test_roots_are_the_nodes_without_dependencies():
    nodes = [
        make_node(1, "root"),
        make_node(2, "child", data_deps=[1]),
        make_node(3, "other root"),
        make_node(4, "only a missing dep", ctrl_deps=[77]),
    ]

    assert roots(build_graph(nodes)).tolist() == [0, 2, 3]


# ---------------------------------------------------------------------------------------------
# A real trace


def test_upstream_trace_has_dangling_ctrl_deps_and_ctrl_cycles_but_its_data_graph_is_a_dag(upstream_et):
    # chakra-format.md §10: the converter leaves ctrl_deps on a deleted root, and ctrl edges may
    # contradict data edges; the v2 feeder ignores ctrl_deps, FeederV3 would deadlock on them
    _, nodes = io.read(upstream_et)
    graph = build_graph(nodes)

    assert graph.num_nodes == UPSTREAM_NODE_COUNT
    assert graph.missing_deps and all(kind == CTRL_DEP for _, _, kind in graph.missing_deps)
    order = topological_order(graph, strict=False)
    assert len(order) < graph.num_nodes
    left_out = np.setdiff1d(np.arange(graph.num_nodes), order)
    assert_is_cycle(graph, find_cycle(graph, left_out))

    for node in nodes:
        del node.ctrl_deps[:]
    data_only = build_graph(nodes)
    assert data_only.missing_deps == []
    assert len(topological_order(data_only)) == UPSTREAM_NODE_COUNT


def test_kahns_order_in_c_refuses_arrays_that_are_not_a_graph():
    def int64s(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    with pytest.raises(ValueError, match="negative"):
        kahn_order(int64s([0, 1, 1]), int64s([1]), int64s([0, -1]), int64s([0, 1]))
    with pytest.raises(ValueError, match="out of range"):
        kahn_order(int64s([0, 1, 1]), int64s([5]), int64s([0, 1]), int64s([0, 1]))
    with pytest.raises(ValueError, match="child_ptr must be 3"):
        kahn_order(int64s([0, 1]), int64s([1]), int64s([0, 1]), int64s([0, 1]))
    with pytest.raises(ValueError, match="key must be int64"):
        kahn_order(int64s([0, 1, 1]), int64s([1]), int64s([0, 1]), np.array([0.0, 1.0]))
