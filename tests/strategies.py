"""Hypothesis strategies for Chakra messages: every AttributeProto oneof member, edge values included.

Shared by the property tests (I/O round trips, JSON mapping).
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from chakra.schema.protobuf.et_def_pb2 import AttributeProto, GlobalMetadata, IOInfo, Node, NodeType

uint64s = st.integers(0, (1 << 64) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
uint32s = st.integers(0, (1 << 32) - 1)
int32s = st.integers(-(1 << 31), (1 << 31) - 1)
doubles = st.floats(allow_nan=False) | st.just(math.nan)  # one NaN bit pattern: JSON keeps no payload
float32s = st.floats(width=32, allow_nan=False) | st.just(math.nan)
texts = st.text(max_size=12)

MEMBER_VALUES = {
    "double": doubles,
    "float": float32s,
    "int32": int32s,
    "sint32": int32s,
    "sfixed32": int32s,
    "uint32": uint32s,
    "fixed32": uint32s,
    "int64": int64s,
    "sint64": int64s,
    "sfixed64": int64s,
    "uint64": uint64s,
    "fixed64": uint64s,
    "bool": st.booleans(),
    "string": texts,
    "bytes": st.binary(max_size=12),
}
ONEOF_MEMBERS = [f.name for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields]


def member_values(member: str) -> st.SearchStrategy:
    kind = member.rsplit("_", 1)[0]
    if member.endswith("_list"):
        return st.lists(MEMBER_VALUES[kind], max_size=4)
    return MEMBER_VALUES[kind]


@st.composite
def attributes(draw: st.DrawFn) -> AttributeProto:
    attr = AttributeProto(name=draw(texts), doc_string=draw(st.sampled_from(["", "doc"]) | texts))
    member = draw(st.sampled_from([*ONEOF_MEMBERS, None]))
    if member is not None:
        value = draw(member_values(member))
        if member.endswith("_list"):
            getattr(attr, member).SetInParent()  # set even when empty
            getattr(attr, member).values.extend(value)
        else:
            setattr(attr, member, value)
    return attr


@st.composite
def io_infos(draw: st.DrawFn) -> IOInfo | None:
    if draw(st.booleans()):
        return None
    return IOInfo(values=draw(texts), shapes=draw(texts), types=draw(texts))


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    node = Node(
        id=draw(uint64s),
        name=draw(texts),
        type=draw(st.sampled_from(list(NodeType.values())) | st.integers(-3, 20)),  # open enum: unknown numbers too
        ctrl_deps=draw(st.lists(uint64s, max_size=4)),
        data_deps=draw(st.lists(uint64s, max_size=4)),
        start_time_micros=draw(uint64s | st.just(0)),
        duration_micros=draw(uint64s | st.just(0)),
        attr=draw(st.lists(attributes(), max_size=4)),
    )
    for field in ("inputs", "outputs"):
        info = draw(io_infos())
        if info is not None:
            getattr(node, field).CopyFrom(info)
            getattr(node, field).SetInParent()
    return node


@st.composite
def metadatas(draw: st.DrawFn) -> GlobalMetadata:
    return GlobalMetadata(version=draw(texts), attr=draw(st.lists(attributes(), max_size=4)))
