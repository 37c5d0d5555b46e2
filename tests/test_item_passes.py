"""Passes over every item of a conversion, in C (:mod:`chakra._item_passes`): each does to every item
what its loop in Python did."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chakra._item_passes import chain_items, group_by_thread
from chakra.pytorch.items import Item
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
    items = [Item(k, "op", COMP_NODE, (0.0, 0.0, k), data=list(old)) for k in range(1, count + 1)]
    head = Item(50, "groups", METADATA_NODE, (0.0, 0.0, 50)) if with_head else None
    chain_items(items, head)
    for k, item in enumerate(items):
        before = [items[k - 1].node_id] if k else []
        assert item.data == old + before + ([50] if with_head and k == 0 else [])
