"""The scans in C that tell a pass over a conversion's items which items or segments to look at
(:mod:`chakra._item_scans`): each finds what its Python rule would act on, and leaves values of
other types to the rule."""

from __future__ import annotations

import bisect
import math
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chakra._item_scans import gap_starts, idle_starts, late_starts, part_candidates, untimed_or_named, wait_candidates
from chakra.pytorch import dependencies
from chakra.pytorch.items import Item, Segment
from chakra.pytorch.waits import INTER_THREAD_IDLE_US, PART_MIN_US
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE


@given(
    specs=st.lists(
        st.tuples(
            st.sampled_from([None, 1, 2]),  # the owner's node id (None: between top-level ops)
            st.booleans(),  # waited
            st.booleans(),  # first
            st.floats(0, 100),
            st.floats(0, 100, allow_nan=False) | st.just(math.nan),  # the length
        ),
        max_size=30,
    ),
    launched=st.sets(st.sampled_from([1, 2])),
)
def test_part_candidates_are_the_segments_whose_rules_may_make_a_part(specs, launched):
    owners = {node_id: Item(node_id, "op", COMP_NODE, (0.0, 0.0, node_id)) for node_id in (1, 2)}
    segments = [
        Segment(start, start + length, owners.get(owner), first, waited=waited)
        for owner, waited, first, start, length in specs
    ]
    expected = [
        k
        for k, s in enumerate(segments)
        if s.owner is not None
        and (s.waited or (not s.first and (not s.end_us - s.start_us < PART_MIN_US or s.owner.node_id in launched)))
    ]
    assert part_candidates(segments, launched, PART_MIN_US) == expected


@given(
    specs=st.lists(
        st.tuples(st.booleans(), st.booleans(), st.floats(0, 50), st.floats(0, 50)), max_size=25
    ),  # (has an owner, waited, start, length)
    inside=st.lists(st.floats(0, 100) | st.just(math.nan), max_size=8),
    between=st.lists(st.floats(0, 100), max_size=8),
)
def test_wait_candidates_are_the_segments_in_which_an_end_falls_as_bisect_finds_it(specs, inside, between):
    owner = Item(1, "op", COMP_NODE, (0.0, 0.0, 1))
    segments = [Segment(s, s + n, owner if has else None, False, waited=w) for has, w, s, n in specs]
    inside_ends, between_ends = sorted(inside), sorted(between)
    expected = []
    for k, segment in enumerate(segments):
        ends = inside_ends if segment.owner is not None else between_ends
        last = bisect.bisect_right(ends, segment.end_us) - 1
        if not segment.waited and last >= 0 and not ends[last] <= segment.start_us:
            expected.append(k)
    assert wait_candidates(segments, inside_ends, between_ends) == expected


def test_wait_candidates_leave_times_that_are_not_floats_to_python():
    owner = Item(1, "op", COMP_NODE, (0.0, 0.0, 1))
    assert wait_candidates([Segment(1, 2, owner, False)], [1.5], []) is None
    assert wait_candidates([Segment(1.0, 2.0, owner, False)], [1], []) is None


def _late_starts_in_python(items, first_us, idle_us):
    late, prev_end = [], first_us
    for k, item in enumerate(items):
        launch_us = item.activity.launch_ts_us if item.activity is not None else None
        ready_us = max(prev_end, launch_us if launch_us is not None else float("-inf"))
        prev_end = max(prev_end, item.end_us)
        if not (item.ts_us or 0.0) - ready_us <= idle_us:
            late.append((k, ready_us))
    return late


@given(
    specs=st.lists(
        st.tuples(
            st.floats(0, 100) | st.none(),  # start
            st.floats(0, 30),  # duration
            st.none() | st.floats(0, 100),  # the launch (None: no activity or no launch time)
            st.booleans(),  # has an activity
        ),
        max_size=20,
    ),
    first_us=st.floats(0, 50),
)
def test_late_starts_are_the_items_that_began_long_after_their_launch_and_the_work_before(specs, first_us):
    items = [
        Item(k, "kernel", COMP_NODE, (0.0, 0.0, k), ts_us=start, dur_us=dur,
             activity=SimpleNamespace(launch_ts_us=launch) if active else None)
        for k, (start, dur, launch, active) in enumerate(specs)
    ]  # fmt: skip
    indices, ready = late_starts(items, first_us, 20.0)
    assert list(zip(indices, ready, strict=True)) == _late_starts_in_python(items, first_us, 20.0)


def test_late_starts_leave_times_that_are_not_floats_to_python():
    assert late_starts([Item(1, "kernel", COMP_NODE, (0.0, 0.0, 1), ts_us=5, dur_us=1.0)], 0.0, 20.0) is None


def test_a_stream_with_times_that_are_not_floats_finds_the_same_late_starts_in_python():
    from chakra.pytorch.syncs import _late_starts

    def stream(number):
        return [
            Item(1, "k", COMP_NODE, (0.0, 0.0, 1), ts_us=number(0), dur_us=number(10)),
            Item(2, "k", COMP_NODE, (0.0, 0.0, 2), ts_us=number(50), dur_us=number(5)),
        ]

    as_ints, as_floats = _late_starts(stream(int), 0), _late_starts(stream(float), 0.0)
    assert [(item.node_id, ready) for item, ready in as_ints] == [(2, 10)]
    assert [(item.node_id, ready) for item, ready in as_floats] == [(2, 10.0)]


#: A thread's items: (start or None, duration, depth).
_THREAD_ITEMS = st.lists(
    st.tuples(st.floats(0, 200) | st.none(), st.floats(0, 40) | st.just(math.nan), st.sampled_from([0, 0, 1])),
    max_size=25,
)


def _thread(specs):
    return [
        Item(k, "op", COMP_NODE, (0.0, 0.0, k), ts_us=start, dur_us=dur, depth=depth)
        for k, (start, dur, depth) in enumerate(specs)
    ]


def _in_c_and_in_python(scan: str, items):
    """What ``dependencies._<scan>`` finds in C, and what it finds with the C scan refused."""
    rule = getattr(dependencies, f"_{scan}")
    in_c = rule(items)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(dependencies, scan, lambda items, idle_us: None)
        return in_c, rule(items)


@given(specs=_THREAD_ITEMS)
def test_idle_starts_are_the_top_level_items_after_an_idle_spell_as_the_python_rule_finds_them(specs):
    in_c, in_python = _in_c_and_in_python("idle_starts", _thread(specs))
    assert in_c == in_python


@given(specs=_THREAD_ITEMS)
def test_gap_starts_are_the_top_level_items_after_a_gap_with_the_op_before_as_the_python_rule_finds_them(specs):
    in_c, in_python = _in_c_and_in_python("gap_starts", _thread(specs))
    assert in_c == in_python


def test_idle_and_gap_scans_leave_times_that_are_not_floats_to_python():
    items = [Item(1, "op", COMP_NODE, (0.0, 0.0, 1), ts_us=5, dur_us=1.0)]
    assert idle_starts(items, INTER_THREAD_IDLE_US) is None
    assert gap_starts(items, INTER_THREAD_IDLE_US) is None


def test_part_candidates_keep_a_segment_whose_times_are_not_floats_for_the_rule():
    owner = Item(1, "op", COMP_NODE, (0.0, 0.0, 1))
    assert part_candidates([Segment(1, 2, owner, False)], set(), PART_MIN_US) == [0]


def test_untimed_or_named_are_the_host_ops_without_timing_and_the_named_record_in_file_order():
    nodes = [
        SimpleNamespace(id=1, name="aten::mm"),
        SimpleNamespace(id=2, name="## process_group:init ##"),
        SimpleNamespace(id=3, name="aten::add"),
        SimpleNamespace(id=4, name="## process_group:init ##"),
    ]
    timing = {1: object(), 2: object()}  # 3 and 4 have none
    assert untimed_or_named(nodes, timing, "## process_group:init ##") == nodes[1:]
    assert untimed_or_named(nodes, {1: 0, 2: 0, 3: 0, 4: 0}, "other") == []
