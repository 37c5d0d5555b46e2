"""The node table's C record decoder reads exactly what protobuf reads, and refuses what it refuses.

Every consumer's values come from ``chakra._columns`` (through ``chakra.table``), while ``Trace.load``
and ``jsonize`` parse messages with protobuf: the two must agree on every file, valid or not.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from helpers import make_node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import nodes

from chakra import _columns, io
from chakra.attrs import MEMBER_CODE, MEMBER_OF_CODE
from chakra.chunks import ATTR_ROW, NODE_ROW
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, Node


def decode(*payloads: bytes) -> tuple:
    """Decode framed ``payloads``; returns (count, error, node rows, ctrl, data, attr rows, names, attr names)."""
    buf = b"".join(io.frame(p) for p in payloads)
    names: dict[bytes, int] = {}
    attr_names: dict[bytes, int] = {}
    _stop, count, error, rows, ctrl, data, attrs = _columns.decode(buf, 0, len(buf), names, attr_names)
    return (
        count,
        error,
        np.frombuffer(rows, NODE_ROW),
        np.frombuffer(ctrl, np.uint64),
        np.frombuffer(data, np.uint64),
        np.frombuffer(attrs, ATTR_ROW),
        list(names),
        list(attr_names),
        buf,
    )


def protobuf_accepts(payload: bytes) -> bool:
    try:
        Node.FromString(payload)
    except Exception:
        return False
    return True


def expected_int(attr: AttributeProto) -> int:
    """The number the decoder reports for a scalar member: int64 (uint64 as its bit pattern), double bits."""
    member = attr.WhichOneof("value")
    value = getattr(attr, member)
    if member in ("double_val", "float_val"):
        return struct.unpack("<q", struct.pack("<d", float(value)))[0]
    value = int(value)
    return value - (1 << 64) if value >= 1 << 63 else value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=nodes())
def test_every_field_of_any_node_decodes_as_protobuf_reads_it(node):
    count, error, rows, ctrl, data, attrs, names, attr_names, buf = decode(node.SerializeToString())

    assert (count, error) == (1, None)
    row = rows[0]
    assert int(row["id"]) == node.id and int(row["type"]) == node.type
    assert int(row["start_us"]) == node.start_time_micros and int(row["dur_us"]) == node.duration_micros
    assert names[row["name_id"]].decode() == node.name
    assert ctrl.tolist() == list(node.ctrl_deps) and data.tolist() == list(node.data_deps)
    assert len(attrs) == len(node.attr)
    for decoded, attr in zip(attrs, node.attr, strict=True):
        assert attr_names[decoded["name_id"]].decode() == attr.name
        member = attr.WhichOneof("value")
        assert MEMBER_OF_CODE.get(int(decoded["member"])) == member
        if member is None:
            continue
        if member.endswith("_list") or member in ("string_val", "bytes_val"):
            start = int(decoded["value"])
            assert AttributeProto.FromString(buf[start : start + int(decoded["len"])]) == attr
        else:
            assert int(decoded["value"]) == expected_int(attr)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=nodes(), data=st.data())
def test_a_damaged_record_is_refused_exactly_when_protobuf_refuses_it(node, data):
    payload = bytearray(node.SerializeToString())
    if payload:
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(0, len(payload) - 1))
            payload[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()) and payload:
        payload = payload[: data.draw(st.integers(0, len(payload) - 1))]

    count, error, *_ = decode(bytes(payload))

    assert (count == 1 and error is None) == protobuf_accepts(bytes(payload))


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x12\x02\xff\xfe", "invalid UTF-8 in the name"),
        (b"\x42\x03\x0a\x01\xff", "invalid UTF-8 in an IOInfo string"),
        (b"\x52\x07\x0a\x01a\xea\x01\x01\xff", "invalid UTF-8 in a string value"),
        (b"\x08" + b"\xff" * 10 + b"\x01", "a varint of 11 bytes"),
        (b"\x5c", "an end-group tag outside a group"),
        (b"\x00", "field number 0"),
        (b"\x0e", "wire type 6"),
        (b"\x5b\x64\x08\x05", "a group closed by another field's end tag"),
        (b"\x22\x02\x01\x80", "a packed list ending inside a varint"),
        (b"\x52\x05\x22\x03\x0a\x01\x00", "a packed double list whose length is not a multiple of 8"),
        (b"\x12\x05ab", "a length past the end of the record"),
        (b"\xf8\xff\xff\xff\x1f\x00", "a tag beyond 32 bits"),
    ],
)
def test_what_protobuf_refuses_the_decoder_refuses(payload, why):
    assert not protobuf_accepts(payload), why
    count, error, *_ = decode(payload)

    assert count == 0 and error is not None


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x0a\x01x", "id with the wrong wire type is an unknown field"),
        (b"\x5b\x63\x64\x5c\x08\x05", "nested groups are skipped"),
        (b"\x62\x01\xff", "bytes of an unknown field are not UTF-8 checked"),
        (b"\x08\x80\x00", "a varint with a redundant continuation byte"),
        (b"\x18\x80\x80\x80\x80\x10", "a type beyond 32 bits keeps its low 32 bits"),
    ],
)
def test_what_protobuf_accepts_the_decoder_accepts(payload, why):
    assert protobuf_accepts(payload), why
    count, error, rows, *_ = decode(payload)

    assert (count, error) == (1, None)
    node = Node.FromString(payload)
    assert int(rows[0]["id"]) == node.id and int(rows[0]["type"]) == node.type


def test_a_scalar_given_twice_keeps_the_last_value_and_a_oneof_the_last_member():
    payload = b"\x08\x01\x08\x07" + b"\x52\x07\x0a\x01a\x48\x05\x38\x07"  # id 1 then 7; int64 5 then int32 7
    _count, _, rows, _, _, attrs, *_ = decode(payload)

    assert int(rows[0]["id"]) == 7
    assert (int(attrs[0]["member"]), int(attrs[0]["value"])) == (MEMBER_CODE["int32_val"], 7)


def test_dependencies_packed_and_unpacked_are_read_alike():
    packed = make_node(3, data_deps=[1, 2]).SerializeToString()  # protobuf packs repeated uint64
    unpacked = b"\x08\x03" + b"\x28\x01\x28\x02"

    assert decode(packed)[4].tolist() == decode(unpacked)[4].tolist() == [1, 2]


def test_repeated_attribute_names_are_marked_after_the_first():
    node = Node(id=1)
    for name in ("comm_size", "tid", "comm_size"):
        node.attr.add(name=name, int64_val=1)

    attrs = decode(node.SerializeToString())[5]

    assert attrs["repeat"].tolist() == [0, 0, 1]


def test_a_record_that_does_not_parse_stops_the_batch_after_the_good_ones():
    good = make_node(1, "a").SerializeToString()
    count, error, _rows, *_ = decode(good, good, b"\x00", good)

    assert count == 2
    assert error[0] == 2 and "field number 0" in error[2]
