"""chakra.pytorch.jsonfile.ArrayPieces: one big array of a JSON file read a piece at a time."""

from __future__ import annotations

import io
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra.pytorch.jsonfile import ArrayPieces, NotStreamable


def read(text: bytes, key: bytes = b"items", block_bytes: int = 7) -> tuple[list[object], object]:
    """The array's items as the pieces decode them, and the rest of the object."""
    reader = ArrayPieces(io.BytesIO(text), key, msgspec.json.decode, block_bytes)
    items = [item for piece in reader.items() for item in piece]
    return items, msgspec.json.decode(reader.rest)


def pieces(text: bytes, block_bytes: int) -> list[list[object]]:
    return list(ArrayPieces(io.BytesIO(text), b"items", msgspec.json.decode, block_bytes).items())


#: JSON values with the strings that trip a scanner: brackets, braces, commas, quotes and backslashes
#: (a string holding "}, {" looks like the boundary of two objects).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{},"\\ ab\n') | st.just("}, {"),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='"\\]}x', max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(json_values, max_size=12),
    before=st.dictionaries(st.sampled_from(["a", "b]", 'c"']), json_values, max_size=2),
    after=st.dictionaries(st.sampled_from(["y", "z}"]), json_values, max_size=2),
    block_bytes=st.integers(1, 64),
    indent=st.sampled_from([None, 1]),
)
def test_the_pieces_hold_every_item_in_order_and_the_rest_the_other_keys(items, before, after, block_bytes, indent):
    document = {**before, "items": items, **after}
    text = json.dumps(document, indent=indent).encode()
    got, rest = read(text, block_bytes=block_bytes)
    assert got == items
    assert rest == {**before, "items": [], **after}


def test_an_empty_array_gives_no_piece():
    reader = ArrayPieces(io.BytesIO(b'{"items": [ ], "n": 1}'), b"items", msgspec.json.decode)
    assert list(reader.items()) == []
    assert reader.rest == b'{"items":[], "n": 1}'


def test_a_piece_is_about_the_block_size():
    text = json.dumps({"items": [{"k": "v" * 20}] * 1000}).encode()
    sizes = [len(piece) for piece in pieces(text, 1024)]
    assert sum(sizes) == 1000
    assert 20 < len(sizes) < 40


def test_objects_that_hold_what_looks_like_a_boundary_are_read_whole():
    items = [{"name": "a}, {b", "args": [{"x": 1}, {"y": "}, {"}]}] * 50
    assert [item for piece in pieces(json.dumps({"items": items}).encode(), 100) for item in piece] == items


@pytest.mark.parametrize(
    "text",
    [
        b'{"other": [1]}',  # no such key
        b'{"it\\u0065ms": [1]}',  # the key written with an escape
        b'{"items": {"a": 1}}',  # not an array
        b'[{"items": [1]}]',  # not an object
        b'{"items": [1, 2',  # cut inside the array
        b'{"items": [1, , 2]}',  # an item missing
        b'{"items": [1, 2,]}',  # a trailing comma
        b'{"items": [1, 2}',  # closed by a brace
    ],
)
@pytest.mark.parametrize("block_bytes", [1, 3, 64])
def test_text_that_is_not_such_an_object_is_refused(text: bytes, block_bytes: int):
    """By the reader, or by the decoder of the piece that holds the fault (the caller reads the whole
    file then, and its decoder names the fault)."""
    with pytest.raises((NotStreamable, msgspec.DecodeError)):
        read(text, block_bytes=block_bytes)
