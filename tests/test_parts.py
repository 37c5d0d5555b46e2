"""The parts of ops split at their children (:func:`chakra._parts.make_parts`, in C): made where
:func:`chakra.pytorch.waits.split_parts`' rule says, as that rule reads in Python, NaN times included."""

from __future__ import annotations

import bisect
import copy
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chakra._parts import make_parts
from chakra.pytorch.items import Item, Segment
from chakra.pytorch.waits import PART_MIN_US, TRANSFER_TYPES
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE

THREAD = 7
FIRST_PART_ID = 100


def _parts_by_the_rule(segments, candidates, launched, next_id, items, thread_items, wait_edges) -> int:
    """split_parts' rule, step by step in Python."""
    for segment in map(segments.__getitem__, candidates):
        owner = segment.owner
        after_wait = segment.waited
        if owner is None or (not after_wait and (segment.first or owner.node_type in TRANSFER_TYPES)):
            continue
        if after_wait:
            start_us = segment.wait_end_us
            length = segment.end_us - start_us
            if length <= 0:
                continue
        else:
            start_us, length = segment.start_us, segment.end_us - segment.start_us
        times, works = launched.get(owner.node_id, ([], []))
        in_segment = works[bisect.bisect_left(times, segment.start_us) : bisect.bisect_left(times, segment.end_us)]
        if not after_wait and length < PART_MIN_US and not in_segment:
            continue
        node_id = next_id
        next_id += 1
        part = Item(node_id, owner.name, COMP_NODE, None, THREAD, start_us, length, length,
                    True, None, None, (), (owner.node_id,), (), owner.depth + 1, owner)  # fmt: skip
        if after_wait:
            waited, _ = wait_edges[segment.edge]
            wait_edges[segment.edge] = (waited, part)
        owner.excl_us = max(0.0, owner.excl_us - length)
        items[node_id] = part
        thread_items.append(part)
        for work in in_segment:
            if not segment.first:
                work.data = tuple(node_id if d == owner.node_id else d for d in work.data)
    return next_id


# whole numbers in a small range: ties (a wait ending at the segment's end, a launch at its start) are common
_times = st.integers(0, 12).map(float) | st.just(math.nan)
_segments = st.lists(
    st.tuples(
        st.sampled_from([None, 1, 2, 3]),  # the owner (3: a transfer)
        st.booleans(),  # waited
        st.booleans(),  # first
        _times,  # start
        st.integers(0, 8).map(float),  # length
        _times,  # where a wait ended
    ),
    max_size=12,
)


def _state(specs, launch_times):
    def owner(node_id: int) -> Item:
        node_type = COMM_COLL_NODE if node_id == 3 else COMP_NODE
        return Item(node_id, f"op{node_id}", node_type, (0.0, 0.0, node_id), THREAD, excl_us=10.0, depth=node_id)

    owners = {node_id: owner(node_id) for node_id in (1, 2, 3)}
    waited = Item(50, "waited", COMP_NODE, (0.0, 0.0, 50))
    wait_edges = [(waited, waited) for _ in specs]
    segments = []
    for edge, (owner, is_waited, first, start, length, wait_end) in enumerate(specs):
        segment = Segment(start, start + length, owners.get(owner), first, waited=is_waited, wait_end_us=wait_end)
        segment.edge = edge
        segments.append(segment)
    launched = {}
    for owner, times in launch_times.items():
        works = [Item(60 + k, "kernel", COMP_NODE, (t, 0.0, 60 + k), data=(9, owner)) for k, t in enumerate(times)]
        launched[owner] = (sorted(times), works)
    return segments, launched, dict(owners), list(owners.values()), wait_edges


def _summary(items, thread_items, wait_edges, launched, next_id):
    def item(i):
        return (i.node_id, i.name, i.key, i.ts_us, i.dur_us, i.excl_us, i.ctrl, i.depth,
                i.part_of.node_id if i.part_of else None)  # fmt: skip

    return (
        next_id,
        sorted(items),
        [item(i) for i in thread_items],
        [(a.node_id, b.node_id) for a, b in wait_edges],
        {owner: [w.data for w in works] for owner, (_, works) in launched.items()},
    )


@settings(max_examples=300, deadline=None)
@given(
    specs=_segments,
    launch_times=st.dictionaries(
        st.sampled_from([1, 2, 3]), st.lists(st.integers(0, 20).map(float), max_size=4), max_size=3
    ),
    picked=st.lists(st.integers(0, 11), max_size=12),
)
@example(specs=[(1, True, False, 3.0, 2.0, 5.0)], launch_times={}, picked=[0])  # a wait ending with the segment
@example(specs=[(1, True, True, 3.0, 4.0, 5.0)], launch_times={1: [4.0]}, picked=[0])  # after a wait, the first
def test_parts_are_made_where_and_as_the_rule_makes_them(specs, launch_times, picked):
    state = _state(specs, launch_times)
    candidates = [k for k in picked if k < len(specs)]
    expected_state, found_state = copy.deepcopy(state), copy.deepcopy(state)
    segments, launched, items, thread_items, wait_edges = expected_state
    expected_next = _parts_by_the_rule(segments, candidates, launched, FIRST_PART_ID, items, thread_items, wait_edges)
    segments, launched, items, thread_items, wait_edges = found_state
    found_next = make_parts(segments, candidates, launched, THREAD, FIRST_PART_ID, Item, COMP_NODE, TRANSFER_TYPES,
                            PART_MIN_US, items, thread_items, wait_edges)  # fmt: skip
    # compared as text: a NaN time is then equal to itself
    assert repr(_summary(*found_state[2:], found_state[1], found_next)) == repr(
        _summary(*expected_state[2:], expected_state[1], expected_next)
    )


def test_a_candidate_that_is_no_segment_is_refused():
    with pytest.raises(IndexError, match="not one of the 0 segments"):
        make_parts([], [0], {}, THREAD, 1, Item, COMP_NODE, TRANSFER_TYPES, PART_MIN_US, {}, [], [])


def test_a_comparison_that_empties_the_launch_table_leaves_the_search_intact():
    segments, launched, items, thread_items, wait_edges = _state([(1, False, False, 1.0, 8.0, 0.0)], {})

    class Unsettling(float):
        """A launch time whose comparison empties the table being searched, as user code may."""

        def __lt__(self, other):
            launched.clear()
            return True  # every launch before the segment: none in it

    launched[1] = ([Unsettling(0.0)] * 8, [Item(60 + k, "kernel", COMP_NODE, (0.0, 0.0, 60 + k)) for k in range(8)])
    next_id = make_parts(segments, [0], launched, THREAD, FIRST_PART_ID, Item, COMP_NODE, TRANSFER_TYPES,
                         PART_MIN_US, items, thread_items, wait_edges)  # fmt: skip
    assert next_id == FIRST_PART_ID and not launched  # 8 µs is short of a part without launched work


def test_a_dependency_whose_comparison_grows_the_dependencies_is_replaced_in_a_copy():
    segments, launched, items, thread_items, wait_edges = _state([(1, False, False, 1.0, 8.0, 0.0)], {1: [2.0]})
    (work,) = launched[1][1]

    class Growing:
        def __eq__(self, other):
            work.data += tuple(range(1000))
            return False

    grower = Growing()
    work.data = (grower, 1, 1)
    make_parts(segments, [0], launched, THREAD, FIRST_PART_ID, Item, COMP_NODE, TRANSFER_TYPES, PART_MIN_US, items,
               thread_items, wait_edges)  # fmt: skip
    assert work.data == (grower, FIRST_PART_ID, FIRST_PART_ID)
