"""chakra.wire: the hand-written encoder writes exactly what protobuf writes."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chakra.attrs import WELL_KNOWN, set_attr
from chakra.errors import AttrKindError
from chakra.schema.protobuf.et_def_pb2 import IOInfo, Node
from chakra.wire import AttrEncoder, encode_node, python_repr_of_json, varint

#: A value of each well-known attribute's kind, defaults included (oneof members have presence).
SAMPLE_VALUES = {"bool": [True, False], "int": [0, 1, 300, -1, 1 << 40], "str": ["", "aten::mm(Tensor self)"]}


def _value_samples():
    for name, spec in WELL_KNOWN.items():
        for value in SAMPLE_VALUES.get(spec.kind, []):
            if spec.member.startswith("uint") and isinstance(value, int) and value < 0:
                continue
            if spec.member == "int32_val" and isinstance(value, int) and abs(value) >= 1 << 31:
                continue
            yield name, value


@pytest.mark.parametrize(("name", "value"), list(_value_samples()))
def test_well_known_attributes_encode_like_protobuf(name, value):
    expected = Node()
    set_attr(expected, name, value)
    assert AttrEncoder()(name, value) == expected.SerializeToString()


@pytest.mark.parametrize("value", [7, "text", 2.5, True, [1, 2], ["a", "b"]])
def test_other_attributes_take_the_member_their_python_type_asks_for(value):
    expected = Node()
    set_attr(expected, "custom", value)
    assert AttrEncoder()("custom", value) == expected.SerializeToString()


def test_values_the_member_cannot_hold_are_refused():
    with pytest.raises(AttrKindError):
        AttrEncoder()("comm_src", 1 << 40)  # int32


@given(
    node_id=st.integers(0, 1 << 40),
    name=st.text(max_size=20),
    node_type=st.integers(0, 7),
    ctrl=st.lists(st.integers(0, 1 << 50), max_size=4),
    data=st.lists(st.integers(0, 1 << 50), max_size=4),
    start=st.integers(0, 1 << 60),
    dur=st.integers(0, 1 << 30),
    io=st.one_of(st.none(), st.tuples(st.text(max_size=10), st.text(max_size=10), st.text(max_size=10))),
)
def test_nodes_encode_like_protobuf(node_id, name, node_type, ctrl, data, start, dur, io):
    expected = Node(
        id=node_id, name=name, type=node_type, ctrl_deps=ctrl, data_deps=data,
        start_time_micros=start, duration_micros=dur,
    )  # fmt: skip
    if io is not None:
        expected.inputs.CopyFrom(IOInfo(values=io[0], shapes=io[1], types=io[2]))
    set_attr(expected, "is_cpu_op", True)
    attrs = [AttrEncoder()("is_cpu_op", True)]
    payload = encode_node(node_id, name, node_type, ctrl, data, start, dur, io, None, attrs)
    assert payload == expected.SerializeToString()


@given(
    node_id=st.integers(0, (1 << 64) - 1),
    deps=st.lists(st.integers(0, (1 << 64) - 1), max_size=6),
    io=st.tuples(st.text(max_size=300), st.text(max_size=10), st.text(max_size=10)),
)
def test_full_range_ids_and_both_io_lists_encode_like_protobuf(node_id, deps, io):
    expected = Node(id=node_id, data_deps=deps)
    expected.inputs.CopyFrom(IOInfo(values=io[0], shapes=io[1], types=io[2]))
    expected.outputs.CopyFrom(IOInfo(values=io[2], shapes=io[0], types=io[1]))
    payload = encode_node(node_id, "", 0, [], deps, 0, 0, io, (io[2], io[0], io[1]), [])
    assert payload == expected.SerializeToString()


def test_io_text_given_as_utf8_bytes_encodes_as_the_same_text():
    as_text = encode_node(1, "n", 4, [], [], 0, 0, ("[1, 'é']", "[[]]", "['Int']"), None, [])
    as_bytes = encode_node(1, "n", 4, [], [], 0, 0, ("[1, 'é']".encode(), b"[[]]", b"['Int']"), None, [])
    assert as_text == as_bytes


@pytest.mark.parametrize(
    "arguments",
    [
        (1.5, "n", 4, [], [], 0, 0, None, None, []),  # a float id
        (1, "n", 4, ["2"], [], 0, 0, None, None, []),  # a dependency that is text
        (1, "n", 4, [], [], 0, 0, ("values", "shapes"), None, []),  # an IOInfo of two lists
        (1, "n", 4, [], [], 0, 0, None, None, ["is_cpu_op"]),  # an attr that is not encoded
        (1, 2, 4, [], [], 0, 0, None, None, []),  # a name that is not text
    ],
)
def test_wrong_argument_types_are_refused_with_a_type_error(arguments):
    with pytest.raises(TypeError):
        encode_node(*arguments)


def test_negative_numbers_are_64_bit_twos_complement_varints():
    assert varint(-1) == b"\xff" * 9 + b"\x01"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@given(value=JSON_VALUES, spaced=st.booleans())
def test_json_as_python_text_is_strs_text_or_left_to_python(value, spaced):
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":")).encode()
    written = python_repr_of_json(text)
    assert written is None or written == str(msgspec.json.decode(text)).encode()


@given(
    value=st.lists(
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(10**17), 10**17)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(
                alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="\\'\""), max_size=8
            ),
            lambda inner: st.lists(inner, max_size=4),
            max_leaves=12,
        )
    )
)
def test_io_lists_of_numbers_flags_and_plain_names_are_written_without_python(value):
    text = json.dumps(value).encode()
    assert python_repr_of_json(text) == str(msgspec.json.decode(text)).encode()


def test_forms_whose_python_text_has_rules_of_its_own_are_left_to_python():
    for text in (
        b'"bare"',
        b'["it\'s"]',
        b'["caf\\u00e9"]',
        '["café"]'.encode(),
        b'[{"a": 1, "a": 2}]',
        b"[123456789012345678901]",
        b"[1,",
    ):
        assert python_repr_of_json(text) is None, text
