"""chakra.pytorch.waits: a thread's ops nested by their spans (depths, call-tree parents, segments of
exclusive time); the encoder's columns gathered along attribute paths (chakra._items.gather)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._items import by_end, gather, nest_thread, sort_by_field, timed_in_order, timed_items
from chakra.pytorch.items import Item, Segment, order_key, sort_by_attribute
from chakra.pytorch.waits import absorb_pickup, nest
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE


def _nested_by_stack(items: list[Item]) -> tuple[list[tuple], list[tuple]]:
    """The rule nest follows, written out: (depth, ctrl, excl_us) of each item, and the segments."""
    segments: list[Segment] = []
    stack: list[list] = []  # [item, cursor, start, end]
    top_cursor = -math.inf
    depth: dict[int, int] = {}
    ctrl: dict[int, list[int]] = {item.node_id: [] for item in items}

    def close() -> None:
        nonlocal top_cursor
        owner, cursor, start, end = stack.pop()
        if end > cursor:
            segments.append(Segment(cursor, end, owner, cursor == start))
        subtree_end = end if end > cursor else cursor
        if stack:
            stack[-1][1] = max(stack[-1][1], subtree_end)
        elif not top_cursor > subtree_end:
            top_cursor = subtree_end

    for item in items:
        ts = item.ts_us or 0.0
        while stack and ts >= stack[-1][3]:
            close()
        if stack:
            top = stack[-1]
            if ts > top[1]:
                segments.append(Segment(top[1], ts, top[0], top[1] == top[2]))
                top[1] = ts
            if item.host is not None and item.host.parent == top[0].node_id:
                ctrl[item.node_id].append(top[0].node_id)
        elif top_cursor != -math.inf and ts > top_cursor:
            segments.append(Segment(top_cursor, ts, None, False))
        depth[item.node_id] = len(stack)
        stack.append([item, ts, ts, ts + item.dur_us])
    while stack:
        close()
    segments.sort(key=lambda segment: segment.start_us)  # handed on in start order, stably
    excl = {item.node_id: 0.0 for item in items}
    for segment in segments:
        if segment.owner is not None:
            excl[segment.owner.node_id] += segment.end_us - segment.start_us
    ops = [(depth[i.node_id], tuple(ctrl[i.node_id]), excl[i.node_id]) for i in items]
    spans = [(s.start_us, s.end_us, s.owner.node_id if s.owner else None, s.first) for s in segments]
    return ops, spans


ops = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 15), st.integers(0, 8) | st.none()),  # start, length, parent
    max_size=25,
)


def _items(spec: list[tuple[int, int, int | None]]) -> list[Item]:
    items = [
        Item(k + 1, f"op{k}", COMP_NODE, (float(ts), -float(dur), k + 1), thread=1, ts_us=float(ts), dur_us=float(dur),
             host=None if parent is None else SimpleNamespace(parent=parent))
        for k, (ts, dur, parent) in enumerate(spec)
    ]  # fmt: skip
    return sorted(items, key=lambda item: item.key)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_a_threads_ops_nest_by_their_spans_with_each_childs_time_its_own(spec):
    expected = _nested_by_stack(_items(spec))
    items = _items(spec)
    segments = nest({1: items})[1]
    got = (
        [(i.depth, i.ctrl, i.excl_us) for i in items],
        [(s.start_us, s.end_us, s.owner.node_id if s.owner else None, s.first) for s in segments],
    )
    assert got == expected


def test_segments_come_in_start_order_even_when_made_out_of_it():
    # items out of time order (the third starts before the other two): the sweep makes the third's
    # segment after the first's, and hands them on sorted, as the later passes read them
    items = [
        Item(k + 1, f"op{k}", COMP_NODE, (ts, -dur, k + 1), thread=1, ts_us=ts, dur_us=dur)
        for k, (ts, dur) in enumerate([(10.0, 6.0), (12.0, 8.0), (5.0, 8.0)])
    ]
    expected = _nested_by_stack(items)[1]
    segments = nest_thread(items, Segment)
    assert [(s.start_us, s.end_us, s.owner.node_id if s.owner else None, s.first) for s in segments] == expected
    assert [s.start_us for s in segments] == sorted(s.start_us for s in segments)


def test_device_streams_are_not_nested():
    stream = Item(1, "kernel", COMP_NODE, (0.0, -1.0, 1), thread=("stream", 0, 7), ts_us=0.0, dur_us=1.0)
    assert nest({("stream", 0, 7): [stream]}) == {}


@settings(max_examples=100, deadline=None)
@given(ops)
def test_segments_share_the_items_times_and_add_at_most_one_end_per_op(spec):
    # a float per segment start and end was 6 MiB more at the peak of a 70k-op conversion
    items = _items(spec)
    segments = nest({1: items})[1]
    starts = {id(item.ts_us) for item in items}
    times = {id(t): t for s in segments for t in (s.start_us, s.end_us)}
    assert len(times.keys() - starts) <= len(items)
    assert all(s.start_us is s.owner.ts_us for s in segments if s.owner is not None and s.first)


class _ComputedTimes:
    """An item whose times are computed at each read (properties, not slots): each read is a new float."""

    def __init__(self, node_id: int, start_us: int, dur_us: int):
        self.node_id, self._start, self._dur = node_id, start_us, dur_us
        self.host, self.ctrl, self.depth, self.excl_us = None, (), 0, 0.0

    @property
    def ts_us(self) -> float:
        return float(self._start) + 0.5

    @property
    def dur_us(self) -> float:
        return float(self._dur)


def test_items_whose_times_are_computed_nest_with_their_own_times():
    # the nesting keeps the start it read: a time made anew at the read must outlive it
    parent, child = _ComputedTimes(1, 0, 10), _ComputedTimes(2, 4, 2)
    segments = nest_thread([parent, child], Segment)
    assert [(s.start_us, s.end_us) for s in segments] == [(0.5, 4.5), (4.5, 6.5), (6.5, 10.5)]
    assert (parent.excl_us, child.excl_us, child.depth) == (8.0, 2.0, 1)


class _Inner(msgspec.Struct):
    a: object = None
    b: object = None


class _Outer(msgspec.Struct):
    x: object = None
    inner: _Inner | None = None


class _Shifted(msgspec.Struct):
    """The attributes of :class:`_Outer` at other offsets: a column of objects of two types."""

    pad: object = None
    inner: _Inner | None = None
    x: object = None


_values = st.one_of(st.none(), st.integers(), st.text(max_size=2))
_inners = st.one_of(st.none(), st.builds(_Inner, _values, _values))
_outers = st.one_of(
    st.builds(_Outer, _values, _inners), st.builds(lambda x, inner: _Shifted(None, inner, x), _values, _inners)
)
_paths = st.lists(st.sampled_from([("x",), ("inner",), ("inner", "a"), ("inner", "b"), ("x", "real")]), max_size=6).map(
    tuple
)


def _follow(obj: object, path: tuple[str, ...]) -> object:
    for name in path:
        if obj is None:
            return None
        obj = getattr(obj, name)
    return obj


@settings(max_examples=300, deadline=None)
@given(objects=st.lists(_outers, max_size=5), paths=_paths)
def test_gathered_columns_follow_each_path_from_each_object_stopping_at_none(objects, paths):
    # paths sharing a first attribute read it once per object; an int's .real and a str's lack of one
    # are read through getattr like any attribute
    try:
        expected = tuple([_follow(obj, path) for obj in objects] for path in paths)
    except AttributeError:
        with pytest.raises(AttributeError):
            gather(objects, paths)
        return
    assert gather(objects, paths) == expected


class _Keyed(msgspec.Struct):
    key: object
    start_us: object = 0.0


_floats = st.sampled_from([0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, 3.0])
_item_keys = st.tuples(_floats, _floats, st.integers(-3, 3))
_odd_keys = st.one_of(  # left to Python's sort
    st.just(math.nan), st.integers(-2, 2), st.tuples(_floats, _floats), st.tuples(_floats, _floats, st.just(1 << 70))
)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.lists(_item_keys, max_size=80), st.lists(_floats, max_size=80), st.lists(st.one_of(_item_keys, _odd_keys))
    ),
    st.integers(0, 80),
)
def test_objects_sort_by_an_attribute_as_pythons_sort_orders_them(keys, in_order):
    # floats and items' keys are sorted in C, anything else by Python's sort; equal keys keep their
    # order, and a list may start with a run already in order (a thread's items, a few appended)
    keys = sorted(keys[:in_order], key=str) + keys[in_order:] if in_order % 2 else keys
    objects = [_Keyed(key) for key in keys]
    try:
        expected = sorted(objects, key=lambda o: o.key)
    except TypeError:  # values Python cannot compare
        with pytest.raises(TypeError):
            sort_by_attribute(objects, "key")
        return
    sort_by_attribute(objects, "key")
    assert [id(o) for o in objects] == [id(o) for o in expected]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(), _floats | st.just(math.nan) | st.just(1), _floats, st.integers(-3, 3) | st.just(1 << 70)
        ),
        max_size=40,
    )
)
def test_items_without_a_key_sort_by_their_times_as_order_key_gives_them(specs):
    """A timed item's key is its times: (ts_us, -dur_us, node_id), read in C where they are floats and an
    int of 64 bits, by Python's sort else; an item given a key sorts by that key among them."""
    items = [
        Item(node_id, "op", COMP_NODE, (start, -dur, node_id) if given else None, ts_us=start, dur_us=dur)
        for given, start, dur, node_id in specs
    ]
    expected = sorted(items, key=order_key)
    sort_by_attribute(items, "key")
    assert [id(i) for i in items] == [id(i) for i in expected]


def test_a_list_of_nan_or_mixed_keys_is_left_to_python():
    objects = [_Keyed((1.0, 0.0, 1)), _Keyed(2.0)]
    assert sort_by_field(objects, "key") is False
    assert sort_by_field([_Keyed(math.nan)], "key") is False
    assert sort_by_field([_Keyed(1.0), _Keyed(0.5)], "key") is True


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _floats, st.sampled_from([0.0, 1.0, 2.5])), max_size=40))
def test_timed_host_ops_are_listed_in_their_items_order(specs):
    # their items are made in this order (time order), so that walking a thread's items walks memory in order
    nodes = [SimpleNamespace(id=node_id) for node_id in range(len(specs))]
    timing = {node_id: SimpleNamespace(ts_us=ts, dur_us=dur) for node_id, (timed, ts, dur) in enumerate(specs) if timed}
    expected = sorted(
        (n for n in nodes if n.id in timing), key=lambda n: (timing[n.id].ts_us, -timing[n.id].dur_us, n.id)
    )
    assert timed_in_order(nodes, timing) == expected


class _Meddling:
    """An object whose attribute, when read, empties the list it is in (and, given one, a dict)."""

    def __init__(self, value: object, home: list, also: dict | None = None):
        self.value, self.home, self.also = value, home, also

    @property
    def key(self) -> object:
        self.home.clear()
        if self.also is not None:
            self.also.clear()
        return self.value

    id = key  # timed_in_order reads the node's id


def test_a_list_changed_while_its_keys_are_read_is_refused_as_list_sort_refuses_it():
    objects: list = []
    objects += [_Meddling(2.0, objects), _Meddling(1.0, objects)]
    with pytest.raises(ValueError, match="list modified during sort"):
        sort_by_attribute(objects, "key")


def test_timed_host_ops_are_listed_from_the_list_as_given_when_reading_empties_it():
    nodes: list = []
    timing = {1: SimpleNamespace(ts_us=5.0, dur_us=1.0), 2: SimpleNamespace(ts_us=3.0, dur_us=1.0)}
    first, second = _Meddling(1, nodes), _Meddling(2, nodes)
    nodes += [first, second]
    assert timed_in_order(nodes, timing) == [second, first]


@given(
    st.lists(
        st.tuples(st.none() | st.sampled_from([0.0, -0.0, 1.5]) | st.floats(-10, 10), st.floats(0, 5)), max_size=30
    )
)
def test_items_by_end_come_in_the_order_pythons_stable_sort_gives_with_those_ends(specs):
    items = [Item(k, "op", COMP_NODE, (0.0, 0.0, k), ts_us=start, dur_us=dur) for k, (start, dur) in enumerate(specs)]
    ends = [(item.ts_us or 0.0) + item.dur_us for item in items]
    order = sorted(range(len(items)), key=ends.__getitem__)
    found = by_end(items)
    assert found is not None
    assert [math.copysign(1, end) for end in found[0]] == [math.copysign(1, ends[k]) for k in order]
    assert found == ([ends[k] for k in order], [items[k] for k in order])


def test_items_by_end_leave_a_nan_end_or_an_int_time_to_python():
    assert by_end([Item(1, "op", COMP_NODE, (0.0, 0.0, 1), ts_us=math.nan, dur_us=1.0)]) is None
    assert by_end([Item(1, "op", COMP_NODE, (0.0, 0.0, 1), ts_us=1, dur_us=1.0)]) is None


def test_timed_items_are_the_items_python_would_make_for_each_timed_host_op():
    nodes = [SimpleNamespace(id=3, name="aten::mm"), SimpleNamespace(id=1, name="aten::add")]
    timing = {
        3: SimpleNamespace(ts_us=1.0, dur_us=2.0, exclusive_us=1.5, thread=7),
        1: SimpleNamespace(ts_us=4.0, dur_us=1, exclusive_us=1, thread=8),
    }
    made = timed_items(nodes, timing, Item, COMP_NODE)
    assert list(made) == [3, 1]
    assert made[3] == Item(3, "aten::mm", COMP_NODE, thread=7, ts_us=1.0, dur_us=2.0, excl_us=1.5, host=nodes[0])
    assert order_key(made[1]) == (4.0, -1, 1) and made[1].host is nodes[1]
    with pytest.raises(KeyError):
        timed_items([SimpleNamespace(id=9, name="x")], timing, Item, COMP_NODE)


def test_a_transfer_started_at_its_hand_over_keeps_its_place_in_time_order():
    """absorb_pickup moves a gloo work's start back to when its issuer handed it over; the node stays
    where it was measured to start among the others."""
    issuer = Item(1, "allreduce", COMP_NODE, thread=1, ts_us=0.0, dur_us=2.0)
    transfer = Item(2, "gloo:all_reduce", COMM_COLL_NODE, thread=2, ts_us=10.0, dur_us=5.0, data=(1,))
    absorb_pickup(SimpleNamespace(items={1: issuer, 2: transfer}), {1: [issuer], 2: [transfer]})
    assert (transfer.ts_us, transfer.dur_us) == (2.0, 13.0)
    assert order_key(transfer) == (10.0, -5.0, 2)
