"""chakra.attrs: well-known attributes are written in their canonical member and read from any compatible one."""

from __future__ import annotations

import pytest
from helpers import make_node

from chakra.attrs import (
    INT_MEMBER_RANGES,
    WELL_KNOWN,
    canonical_member_problem,
    find_attr,
    get_attr,
    member_value,
    set_attr,
)
from chakra.errors import AttrKindError, ChakraError
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, Node


def stored(node: Node, name: str, member: str, value) -> Node:
    """Append attribute ``name`` in an arbitrary ``member``, bypassing set_attr (as foreign producers do)."""
    attr = node.attr.add(name=name)
    if member.endswith("_list"):
        getattr(attr, member).values.extend(value)
    else:
        setattr(attr, member, value)
    return node


def members(node: Node) -> list[tuple[str, str | None]]:
    return [(a.name, a.WhichOneof("value")) for a in node.attr]


# ---------------------------------------------------------------------------------------------
# The registry


def test_every_well_known_attribute_names_a_real_oneof_member():
    oneof_members = {f.name for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields}

    assert {spec.member for spec in WELL_KNOWN.values()} <= oneof_members
    assert all(name == spec.name for name, spec in WELL_KNOWN.items())


# ---------------------------------------------------------------------------------------------
# set_attr


@pytest.mark.parametrize(
    ("name", "value", "member"),
    [
        ("comm_size", 1 << 20, "int64_val"),
        ("comm_type", 0, "int64_val"),
        ("num_ops", 10**12, "int64_val"),
        ("tensor_size", (1 << 64) - 1, "uint64_val"),
        ("comm_src", 3, "int32_val"),
        ("comm_dst", 0, "int32_val"),
        ("comm_tag", 7, "int32_val"),
        ("comm_priority", -1, "int32_val"),
        ("is_cpu_op", False, "bool_val"),
        ("pg_name", "1", "string_val"),
        ("involved_dim", [True, False, True], "bool_list"),
        ("inputs", ["t0", "4096"], "string_list"),
    ],
)
def test_set_attr_writes_the_canonical_member(name, value, member):
    node = Node(id=1, name="n")
    set_attr(node, name, value)

    assert members(node) == [(name, member)]
    assert member_value(node.attr[0]) == value


def test_set_attr_writes_false_and_zero_explicitly():
    # a oneof member is on the wire even at its default: consumers see is_cpu_op=false, comm_type=0
    node = Node(id=1, name="n")
    set_attr(node, "is_cpu_op", False)
    set_attr(node, "comm_type", 0)

    assert b"\xd8\x01\x00" in node.SerializeToString()
    assert b"\x48\x00" in node.SerializeToString()


def test_set_attr_accepts_0_and_1_for_a_bool():
    node = Node(id=1, name="n")
    set_attr(node, "is_cpu_op", 1)

    assert members(node) == [("is_cpu_op", "bool_val")]
    assert node.attr[0].bool_val is True


def test_set_attr_overwrites_in_place_switching_to_the_canonical_member():
    node = stored(make_node(1, "n", rf_id=5), "comm_size", "uint64_val", 10)
    set_attr(node, "tid", 2)

    set_attr(node, "comm_size", 20)

    assert members(node) == [("rf_id", "int64_val"), ("comm_size", "int64_val"), ("tid", "int64_val")]
    assert get_attr(node, "comm_size") == 20


def test_set_attr_removes_duplicates_keeping_the_first_position():
    node = Node(id=1, name="n")
    stored(node, "comm_size", "int64_val", 1)
    stored(node, "pg_name", "string_val", "0")
    stored(node, "comm_size", "uint64_val", 2)
    stored(node, "comm_size", "double_val", 3.0)

    set_attr(node, "comm_size", 4)

    assert members(node) == [("comm_size", "int64_val"), ("pg_name", "string_val")]
    assert get_attr(node, "comm_size") == 4


def test_set_attr_replaces_a_list_instead_of_appending():
    node = make_node(1, "n", involved_dim=[True, True, True, True])
    set_attr(node, "involved_dim", [False])

    assert get_attr(node, "involved_dim") == [False]


def test_set_attr_with_an_empty_list_still_sets_the_member():
    node = Node(id=1, name="n")
    set_attr(node, "inputs", [])

    assert members(node) == [("inputs", "string_list")]
    assert get_attr(node, "inputs") == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("comm_src", 1 << 31),
        ("comm_src", -(1 << 31) - 1),
        ("tensor_size", -1),
        ("tensor_size", 1 << 64),
        ("comm_size", 1 << 63),
        ("comm_size", 1.0),
        ("comm_size", "1024"),
        ("comm_size", True),
        ("is_cpu_op", 2),
        ("is_cpu_op", "yes"),
        ("pg_name", 0),
        ("involved_dim", [True, 2]),
    ],
)
def test_set_attr_refuses_values_the_canonical_member_cannot_hold(name, value):
    node = Node(id=1, name="n")

    with pytest.raises(AttrKindError):
        set_attr(node, name, value)
    assert len(node.attr) == 0


def test_set_attr_refuses_another_member_for_a_well_known_attribute():
    with pytest.raises(AttrKindError, match="must be written as int64_val"):
        set_attr(Node(id=1, name="n"), "comm_size", 5, member="uint64_val")


def test_set_attr_accepts_the_canonical_member_named_explicitly():
    node = Node(id=1, name="n")
    set_attr(node, "comm_size", 5, member="int64_val")

    assert members(node) == [("comm_size", "int64_val")]


@pytest.mark.parametrize(
    ("value", "member"),
    [
        (True, "bool_val"),
        (3, "int64_val"),
        (-3, "int64_val"),
        (2.5, "double_val"),
        ("text", "string_val"),
        (b"\x00\x01", "bytes_val"),
        ([1, 2], "int64_list"),
        ((1.5,), "double_list"),
        ([True, False], "bool_list"),
        (["a", "b"], "string_list"),
        ([b"a"], "bytes_list"),
    ],
)
def test_unknown_attributes_get_a_member_inferred_from_the_python_type(value, member):
    node = Node(id=1, name="n")
    set_attr(node, "my_attr", value)

    assert members(node) == [("my_attr", member)]
    expected = list(value) if isinstance(value, (list, tuple)) else value
    assert get_attr(node, "my_attr") == expected


def test_unknown_attribute_can_name_its_member():
    node = Node(id=1, name="n")
    set_attr(node, "elapsed", 7, member="uint32_val")

    assert members(node) == [("elapsed", "uint32_val")]


@pytest.mark.parametrize("value", [[], {"a": 1}, None, object()])
def test_unknown_attribute_of_an_uninferable_type_is_refused(value):
    with pytest.raises(AttrKindError):
        set_attr(Node(id=1, name="n"), "my_attr", value)


def test_unknown_integer_beyond_int64_is_refused():
    with pytest.raises(AttrKindError, match="does not fit int64_val"):
        set_attr(Node(id=1, name="n"), "my_attr", 1 << 63)


def test_attr_kind_error_is_both_a_chakra_error_and_a_type_error():
    assert issubclass(AttrKindError, ChakraError)
    assert issubclass(AttrKindError, TypeError)


# ---------------------------------------------------------------------------------------------
# get_attr


@pytest.mark.parametrize("member", sorted(m for m, (low, high) in INT_MEMBER_RANGES.items() if high >= 1 << 20))
def test_get_attr_reads_an_integer_attribute_from_any_integer_member(member):
    node = stored(Node(id=1, name="n"), "comm_size", member, 1 << 20)

    assert get_attr(node, "comm_size") == 1 << 20


def test_get_attr_reads_comm_size_written_as_uint64_by_a_foreign_producer():
    # the v2 C++ feeder would read this as 0; the tolerant reader gets the value
    node = stored(Node(id=1, name="n"), "comm_size", "uint64_val", 4096)

    assert get_attr(node, "comm_size") == 4096


def test_get_attr_reads_a_bool_attribute_from_an_integer_member():
    node = stored(Node(id=1, name="n"), "is_cpu_op", "int64_val", 1)

    assert get_attr(node, "is_cpu_op") is True


def test_get_attr_reads_an_integer_attribute_from_a_bool_member():
    node = stored(Node(id=1, name="n"), "num_ops", "bool_val", True)

    assert get_attr(node, "num_ops") == 1


def test_get_attr_reads_involved_dim_from_an_integer_list_as_bools():
    node = stored(Node(id=1, name="n"), "involved_dim", "int64_list", [1, 0])

    assert get_attr(node, "involved_dim") == [True, False]


@pytest.mark.parametrize(
    ("name", "member", "value"),
    [
        ("comm_size", "double_val", 1024.0),
        ("comm_size", "float_val", 1024.0),
        ("comm_size", "string_val", "1024"),
        ("comm_size", "int64_list", [1024]),
        ("is_cpu_op", "string_val", "maybe"),
        ("pg_name", "double_val", 1.0),
        ("comm_size", "uint64_val", 1 << 63),
        ("involved_dim", "bool_val", True),
    ],
)
def test_get_attr_refuses_a_member_of_the_wrong_family_instead_of_reading_zero(name, member, value):
    node = stored(Node(id=9, name="n"), name, member, value)

    with pytest.raises(AttrKindError, match=f"{name}.*{member}") as info:
        get_attr(node, name)
    assert "node 9" in str(info.value)


@pytest.mark.parametrize(("text", "flag"), [("true", True), ("False", False), (" 1 ", True), ("0", False)])
def test_get_attr_reads_a_flag_written_as_text(text, flag):
    node = stored(Node(id=1, name="n"), "is_cpu_op", "string_val", text)

    assert get_attr(node, "is_cpu_op") is flag


def test_get_attr_reads_a_group_id_stored_as_an_integer_as_its_decimal_text():
    node = stored(Node(id=1, name="n"), "pg_name", "int64_val", 3)

    assert get_attr(node, "pg_name") == "3"


def test_a_flag_written_as_text_is_still_an_error_for_the_cpp_consumers():
    severity, _ = canonical_member_problem(attribute("is_cpu_op", "string_val", "false"))

    assert severity == "error"


def test_get_attr_returns_the_default_when_the_attribute_is_absent():
    node = make_node(1, "n", comm_size=5)

    assert get_attr(node, "comm_type") is None
    assert get_attr(node, "comm_type", -1) == -1


def test_get_attr_returns_the_default_when_the_attribute_has_no_value():
    node = Node(id=1, name="n")
    node.attr.add(name="comm_size")

    assert get_attr(node, "comm_size", 0) == 0


def test_get_attr_reads_the_first_of_duplicates_as_feederv3_does():
    node = Node(id=1, name="n")
    stored(node, "comm_size", "int64_val", 1)
    stored(node, "comm_size", "int64_val", 2)

    assert get_attr(node, "comm_size") == 1
    assert find_attr(node, "comm_size") is node.attr[0]


def test_get_attr_returns_unknown_attributes_as_stored():
    node = stored(Node(id=1, name="n"), "custom", "uint32_list", [1, 2])
    stored(node, "ratio", "float_val", 0.5)

    assert get_attr(node, "custom") == [1, 2]
    assert get_attr(node, "ratio") == 0.5


def test_member_value_is_none_for_an_attribute_without_value():
    assert member_value(AttributeProto(name="x")) is None


# ---------------------------------------------------------------------------------------------
# canonical_member_problem


def attribute(name: str, member: str | None, value=None) -> AttributeProto:
    attr = AttributeProto(name=name)
    if member is not None:
        if member.endswith("_list"):
            getattr(attr, member).values.extend(value)
        else:
            setattr(attr, member, value)
    return attr


@pytest.mark.parametrize(
    ("attr", "severity"),
    [
        (attribute("comm_size", "int64_val", 1), None),
        (attribute("comm_size", "uint64_val", 1), "warning"),
        (attribute("comm_src", "int64_val", 1), "warning"),
        (attribute("is_cpu_op", "int32_val", 0), "warning"),
        (attribute("comm_size", "double_val", 1.0), "error"),
        (attribute("tensor_size", "string_val", "8"), "error"),
        (attribute("pg_name", "int64_val", 0), "error"),
        (attribute("involved_dim", "bool_list", [True]), None),
        (attribute("involved_dim", "int64_list", [1]), "error"),
        (attribute("custom", "double_val", 1.0), None),
        (attribute("comm_size", None), None),
    ],
    ids=lambda v: v if isinstance(v, str) or v is None else f"{v.name}-{v.WhichOneof('value')}",
)
def test_canonical_member_problem_grades_non_canonical_members(attr, severity):
    problem = canonical_member_problem(attr)

    assert (problem[0] if problem else None) == severity
    if problem:
        assert attr.WhichOneof("value") in problem[1]


def test_a_convertible_member_is_a_warning_because_the_v2_feeder_reads_zero():
    severity, explanation = canonical_member_problem(attribute("comm_size", "uint64_val", 1))

    assert severity == "warning"
    assert "v2" in explanation and "int64_val" in explanation
