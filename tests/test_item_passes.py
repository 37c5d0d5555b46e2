"""Passes over every item of a conversion, in C (:mod:`chakra._item_passes`): each does to every item
what its loop in Python did."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chakra._item_passes import chain_items, device_items, group_by_thread, no_host_rows
from chakra.pytorch.host import HostNode, IOLists
from chakra.pytorch.items import Item
from chakra.pytorch.kineto import ActivityArgs, KinetoArgs
from chakra.pytorch.link import DeviceActivity
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, METADATA_NODE

_specs = st.lists(
    st.tuples(st.sampled_from([1, 2, ("stream", 0, 7), ("stream", 0, 8)]), st.sampled_from([COMP_NODE, METADATA_NODE])),
    max_size=20,
)


def _items(specs) -> list[Item]:
    return [
        Item(node_id, "op", node_type, (0.0, 0.0, node_id), thread=thread)
        for node_id, (thread, node_type) in enumerate(specs, 1)
    ]


@given(specs=_specs)
def test_items_are_grouped_by_thread_in_order_leaving_out_the_metadata_node(specs):
    items = _items(specs)
    expected: dict = {}
    for item in items:
        if item.node_type != METADATA_NODE:
            expected.setdefault(item.thread, []).append(item)
    found = group_by_thread(items, METADATA_NODE)
    assert list(found) == list(expected)
    assert {thread: [i.node_id for i in group] for thread, group in found.items()} == {
        thread: [i.node_id for i in group] for thread, group in expected.items()
    }


@given(count=st.integers(0, 6), with_head=st.booleans(), old=st.lists(st.integers(100, 200), max_size=2))
def test_each_item_depends_on_the_one_before_and_the_first_on_the_head(count, with_head, old):
    items = [Item(k, "op", COMP_NODE, (0.0, 0.0, k), data=tuple(old)) for k in range(1, count + 1)]
    head = Item(50, "groups", METADATA_NODE, (0.0, 0.0, 50)) if with_head else None
    chain_items(items, head)
    for k, item in enumerate(items):
        before = (items[k - 1].node_id,) if k else ()
        assert item.data == (*old, *before, *((50,) if with_head and k == 0 else ()))


def test_an_item_whose_dependencies_are_not_a_tuple_is_refused():
    items = [Item(1, "op", COMP_NODE), Item(2, "op", COMP_NODE, data=[7])]  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be a tuple"):
        chain_items(items, None)


@given(
    specs=st.lists(
        st.tuples(st.sampled_from(["kernel", "gpu_memcpy", "cuda_sync"]), st.sampled_from([None, 1, 2, 9])),
        max_size=12,
    )
)
def test_device_work_becomes_items_on_their_streams_after_the_op_that_launched_them(specs):
    """An activity's launcher is a dependency only where it is an item; sync events are left out, listed."""
    activities = [
        DeviceActivity(f"work{k}", cat, 0, 7 + k % 2, float(k), 2.0, k, host_id, "cudaLaunchKernel", None)
        for k, (cat, host_id) in enumerate(specs)
    ]
    items = {1: Item(1, "op", COMP_NODE, (0.0, 0.0, 1)), 2: Item(2, "op", COMP_NODE, (0.0, 0.0, 2))}
    next_id, made, skipped = device_items(activities, items, Item, COMP_NODE, 10, "cuda_sync", "stream")
    kept = [a for a in activities if a.cat != "cuda_sync"]
    assert skipped == [a for a in activities if a.cat == "cuda_sync"]
    assert next_id == 10 + len(kept)
    assert [items[i.node_id] for i in made] == made
    assert [
        (i.node_id, i.name, i.key, i.thread, i.ts_us, i.dur_us, i.excl_us, i.is_cpu, i.activity, i.data, i.ctrl)
        for i in made
    ] == [
        (10 + k, a.name, None, ("stream", 0, a.stream), a.ts_us, a.dur_us, a.dur_us, False, a,
         (a.host_id,) * (a.host_id in (1, 2)), (a.host_id,) * (a.host_id in (1, 2)))
        for k, a in enumerate(kept)
    ]  # fmt: skip


def _no_host_rows_in_python(items, rows, node_types, thread_ids, launcher_rf_ids, columns, comp_node):
    """The loop no_host_rows replaced (chakra/pytorch/encode.py), column by column."""
    tids, rf_ids, streams, devices, correlations, launcher_ids, nbytes_column = columns
    for row, item in zip(rows, items, strict=True):
        owner = item.part_of.host if item.part_of is not None else None
        tids[row] = None
        if owner is not None:
            rf_ids[row] = owner.rf_id
            tids[row] = thread_ids.get(item.thread, owner.tid)
        elif item.activity is None and item.thread in thread_ids:
            tids[row] = thread_ids[item.thread]
        elif item.activity is not None:
            activity = item.activity
            streams[row] = activity.stream if isinstance(activity.stream, int) else 0
            if isinstance(activity.device, int):
                devices[row] = activity.device
            if activity.correlation is not None:
                correlations[row] = int(activity.correlation)
            launcher_ids[row] = launcher_rf_ids.get(activity.host_id) if activity.host_id is not None else None
            args = activity.args
            nbytes = args.bytes if isinstance(args, ActivityArgs) else args.get("bytes")
            if isinstance(nbytes, int) and node_types[row] == comp_node:
                nbytes_column[row] = nbytes


def _host(node_id: int, tid: int) -> HostNode:
    empty = IOLists(b"[]", b"[]", b"[]")
    return HostNode(node_id, "op", 0, 100 + node_id, tid, 0, 0, 0, 0, "", empty, empty, {})


_activity_specs = st.tuples(
    st.sampled_from([7, True, None, "s"]),  # stream
    st.sampled_from([0, None]),  # device
    st.sampled_from([5, None, True]),  # correlation
    st.sampled_from([1, 2, None]),  # launcher's host id (2 has no rf_id recorded)
    st.sampled_from([ActivityArgs(bytes=64), ActivityArgs(), {"bytes": 8}, KinetoArgs()]),
)
_row_specs = st.lists(
    st.one_of(
        st.tuples(st.just("part"), st.sampled_from([1, 9]), st.booleans()),  # thread; its op has a host node
        st.tuples(st.just("activity"), _activity_specs, st.sampled_from([COMP_NODE, METADATA_NODE])),
        st.tuples(st.just("gap"), st.sampled_from([1, 9])),  # time outside operators on a thread
    ),
    max_size=12,
)


@given(specs=_row_specs)
def test_the_rows_of_no_host_op_are_written_as_the_loop_in_python_wrote_them(specs):
    items, node_types = [], []
    for k, spec in enumerate(specs):
        if spec[0] == "part":
            owner = Item(1000 + k, "op", COMP_NODE, host=_host(k, 40 + k) if spec[2] else None)
            items.append(Item(k, "op", COMP_NODE, thread=spec[1], part_of=owner))
        elif spec[0] == "activity":
            stream, device, correlation, host_id, args = spec[1]
            activity = DeviceActivity("k", "kernel", device, stream, 0.0, 1.0, correlation, host_id, "launch", args)
            items.append(Item(k, "k", spec[2], thread=("stream", 0, 7), activity=activity))
        else:
            items.append(Item(k, "gap", COMP_NODE, thread=spec[1]))
        node_types.append(spec[2] if spec[0] == "activity" else COMP_NODE)
    rows = list(range(len(items)))
    thread_ids, launcher_rf_ids = {1: 11}, {1: 101, 2: None}
    expected = tuple(["unset"] * len(items) for _ in range(7))
    found = tuple(["unset"] * len(items) for _ in range(7))
    _no_host_rows_in_python(items, rows, node_types, thread_ids, launcher_rf_ids, expected, COMP_NODE)
    no_host_rows(items, rows, node_types, thread_ids, launcher_rf_ids, found, (ActivityArgs,), COMP_NODE)
    assert found == expected
    assert [type(v) for column in found for v in column] == [type(v) for column in expected for v in column]


def test_a_column_value_whose_freeing_empties_the_thread_map_leaves_the_thread_written_whole():
    """Writing a column frees its old value, which may run code: what is written next is held first."""
    owner = Item(1000, "op", COMP_NODE, host=_host(0, 40))
    part = Item(0, "op", COMP_NODE, thread=1, part_of=owner)

    class Tid(int):
        pass

    thread_ids = {1: Tid(11)}

    class EmptiesTheMap:
        def __del__(self):
            thread_ids.clear()

    columns = tuple([None] for _ in range(7))
    columns[1][0] = EmptiesTheMap()  # the rf_id column's old value at the row
    no_host_rows([part], [0], [COMP_NODE], thread_ids, {}, columns, (ActivityArgs,), COMP_NODE)
    assert (columns[0][0], columns[1][0], type(columns[0][0])) == (11, 100, Tid)
