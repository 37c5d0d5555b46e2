"""How a graph's rows are ordered and folded before they become nodes (:func:`chakra._fold_order.fold_in_order`,
the TensorFlow front end's order): Kahn's order with ready ties by measured start, loop back edges
counted but not ordering, folded rows replaced by what they depend on. Checked on small graphs and
against a plain Python statement of the same rules on generated ones."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._fold_order import fold_in_order

Inputs = list[tuple[tuple[int, int, bool], ...]]


def fold(inputs: Inputs, folding=(), loop_back=(), starts=None):
    """fold_in_order with rows given by index lists (folding, loop_back) and starts defaulting to None."""
    rows = len(inputs)
    return fold_in_order(
        inputs,
        bytes(row in folding for row in range(rows)),
        bytes(row in loop_back for row in range(rows)),
        list(starts) if starts is not None else [None] * rows,
    )


def reference(inputs: Inputs, folding: bytes, loop_back: bytes, starts: list[int | None]):
    """The rules of fold_in_order as sets and a heap in Python."""
    rows = len(inputs)
    children: list[list[int]] = [[] for _ in range(rows)]
    waiting = [0] * rows
    back_edges = 0
    for row, row_inputs in enumerate(inputs):
        parents = {source for source, _, _ in row_inputs if source >= 0}
        back = {p for p in parents if loop_back[p]}
        back_edges += len(back)
        for parent in parents - back:
            children[parent].append(row)
        waiting[row] = len(parents - back)

    def key(row: int) -> tuple[float, int]:
        return (starts[row] if starts[row] is not None else float("inf"), row)

    ready = [key(row) for row in range(rows) if waiting[row] == 0]
    heapq.heapify(ready)
    stands: list[frozenset[int]] = [frozenset()] * rows
    out_rows, out_data, out_ctrl, folded = [], [], [], []
    taken = 0
    while ready:
        row = heapq.heappop(ready)[1]
        taken += 1
        data: set[int] = set()
        ctrl: set[int] = set()
        for source, _, control in inputs[row]:
            if source >= 0:
                (ctrl if control else data).update(stands[source])
        if folding[row]:
            folded.append(row)
            stands[row] = frozenset(data | ctrl)
        else:
            stands[row] = frozenset({len(out_rows)})
            out_rows.append(row)
            out_data.append(sorted(data))
            out_ctrl.append(sorted(ctrl - data))
        for child in children[row]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, key(child))
    return out_rows, out_data, out_ctrl, folded, back_edges, rows - taken


def test_a_folded_row_passes_what_it_depends_on_to_what_depends_on_it():
    # 0 -> 1 (folded identity) -> 2
    rows, data, ctrl, folded, _, _ = fold([(), ((0, 0, False),), ((1, 0, False),)], folding={1})
    assert (rows, data, ctrl, folded) == ([0, 2], [[], [0]], [[], []], [1])


def test_a_control_edge_to_what_is_also_a_data_input_is_left_out():
    rows, data, ctrl, *_ = fold([(), ((0, 0, False), (0, 0, True))])
    assert (rows, data, ctrl) == ([0, 1], [[], [0]], [[], []])


def test_ready_rows_are_taken_by_measured_start_and_unmeasured_ones_last():
    rows, *_ = fold([(), (), ()], starts=[None, 30, 10])
    assert rows == [2, 1, 0]


def test_a_loop_back_edge_is_counted_and_does_not_order_its_target():
    # 0 Merge <- 1 NextIteration (back edge), 1 <- 0
    rows, data, _, _, back_edges, on_cycle = fold([((1, 0, False),), ((0, 0, False),)], loop_back={1})
    assert (rows, back_edges, on_cycle) == ([0, 1], 1, 0)
    assert data == [[], [0]]  # the back edge's source was not taken yet: the merge depends on nothing


def test_rows_on_a_cycle_are_counted_and_not_emitted():
    rows, _, _, _, _, on_cycle = fold([(), ((2, 0, False),), ((1, 0, False),)])
    assert (rows, on_cycle) == ([0], 2)


def test_an_input_from_outside_the_graph_orders_nothing():
    rows, data, *_ = fold([((-1, 0, False),), ((0, 1, False), (-1, 0, True))])
    assert (rows, data) == ([0, 1], [[], [0]])


@pytest.mark.parametrize(
    ("inputs", "masks", "starts"),
    [
        ([((5, 0, False),)], 1, [None]),  # a source past the last row
        ([((0, 0),)], 1, [None]),  # an input without its control flag
        ([()], 2, [None]),  # a mask of the wrong length
        ([[]], 1, [None]),  # a row's inputs in a list
    ],
)
def test_malformed_arguments_are_a_value_error(inputs, masks, starts):
    with pytest.raises(ValueError, match="fold_in_order"):
        fold_in_order(inputs, bytes(masks), bytes(masks), starts)


def test_a_start_past_64_bits_is_an_overflow_error():
    with pytest.raises(OverflowError, match="fold_in_order"):
        fold_in_order([()], b"\x00", b"\x00", [1 << 70])


@st.composite
def graphs(draw):
    rows = draw(st.integers(0, 24))
    source = st.integers(-1, rows - 1) if rows else st.just(-1)
    inputs = [
        tuple(draw(st.lists(st.tuples(source, st.integers(0, 2), st.booleans()), max_size=5))) for _ in range(rows)
    ]
    folding = bytes(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)))
    loop_back = bytes(draw(st.lists(st.sampled_from([False, False, False, True]), min_size=rows, max_size=rows)))
    starts = draw(st.lists(st.one_of(st.none(), st.integers(-(1 << 62), 1 << 62), st.integers(0, 3)),
                           min_size=rows, max_size=rows))  # fmt: skip
    return inputs, folding, loop_back, starts


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_the_order_and_folding_are_the_rules_stated_in_python(graph):
    assert list(fold_in_order(*graph)) == list(reference(*graph))
