"""Node attributes: the registry of well-known names and the value kind each consumer reads.

Chakra stores attributes as ``AttributeProto`` with a ``oneof value``; consumers read one member
(the v2 C++ feeder reads *only* the canonical member, anything else reads as 0). Writing the wrong
member is the "comm_size read as 0" class of bug, so producers in this package go through
:func:`set_attr`, which always writes the registered member, and readers go through
:func:`get_attr`, which accepts any member of the right family (``reference/chakra-format.md`` §6).

Example:
    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> node = Node(id=1, name="allreduce")
    >>> set_attr(node, "comm_size", 1 << 20)
    >>> node.attr[0].WhichOneof("value")
    'int64_val'
    >>> get_attr(node, "comm_size")
    1048576
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chakra.errors import AttrKindError
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, Node

#: oneof members holding one integer, with the value range protobuf accepts for each.
INT_MEMBER_RANGES: dict[str, tuple[int, int]] = {
    "int32_val": (-(1 << 31), (1 << 31) - 1),
    "int64_val": (-(1 << 63), (1 << 63) - 1),
    "uint32_val": (0, (1 << 32) - 1),
    "uint64_val": (0, (1 << 64) - 1),
    "sint32_val": (-(1 << 31), (1 << 31) - 1),
    "sint64_val": (-(1 << 63), (1 << 63) - 1),
    "fixed32_val": (0, (1 << 32) - 1),
    "fixed64_val": (0, (1 << 64) - 1),
    "sfixed32_val": (-(1 << 31), (1 << 31) - 1),
    "sfixed64_val": (-(1 << 63), (1 << 63) - 1),
}
INT_MEMBERS = frozenset(INT_MEMBER_RANGES)
FLOAT_MEMBERS = frozenset({"double_val", "float_val"})
INT_LIST_MEMBERS = frozenset(m.replace("_val", "_list") for m in INT_MEMBERS)
FLOAT_LIST_MEMBERS = frozenset({"double_list", "float_list"})
LIST_MEMBERS = INT_LIST_MEMBERS | FLOAT_LIST_MEMBERS | {"bool_list", "string_list", "bytes_list"}

#: The families a well-known attribute can belong to; ``get_attr`` converts within a family.
KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_STR = "bool", "int", "float", "str"
KIND_BOOL_LIST, KIND_STR_LIST = "bool_list", "str_list"

#: Members each family accepts when reading (FeederV3 converts between all integer-like members
#: and bool; it throws for float -> integer and string -> number).
_READABLE: dict[str, frozenset[str]] = {
    KIND_BOOL: INT_MEMBERS | {"bool_val"},
    KIND_INT: INT_MEMBERS | {"bool_val"},
    KIND_FLOAT: INT_MEMBERS | FLOAT_MEMBERS,
    KIND_STR: frozenset({"string_val"}),
    KIND_BOOL_LIST: INT_LIST_MEMBERS | {"bool_list"},
    KIND_STR_LIST: frozenset({"string_list"}),
}


@dataclass(frozen=True)
class AttrSpec:
    """One well-known attribute: its canonical oneof ``member``, value ``kind``, unit and meaning.

    ``required_by`` lists the consumers that need it and for which node types.
    """

    name: str
    member: str
    kind: str
    unit: str
    doc: str
    required_by: str = ""


def _spec(name: str, member: str, kind: str, unit: str, doc: str, required_by: str = "") -> AttrSpec:
    return AttrSpec(name, member, kind, unit, doc, required_by)


#: Every attribute whose name and value kind consumers agree on (chakra-format.md §6.1).
WELL_KNOWN: dict[str, AttrSpec] = {
    s.name: s
    for s in (
        _spec(
            "is_cpu_op",
            "bool_val",
            KIND_BOOL,
            "",
            "true: host CPU op; false: device op (selects the hardware slot)",
            "all nodes (ASTRA-sim aborts for a comm node with true)",
        ),
        _spec(
            "num_ops",
            "int64_val",
            KIND_INT,
            "FLOPs",
            "operation count of a compute node",
            "GPU COMP_NODE in ASTRA-sim roofline mode",
        ),
        _spec(
            "tensor_size",
            "uint64_val",
            KIND_INT,
            "bytes",
            "bytes moved or touched",
            "roofline GPU COMP_NODE; MEM_LOAD_NODE/MEM_STORE_NODE",
        ),
        _spec("tensor_loc", "int64_val", KIND_INT, "", "memory location id (no consumer reads it)"),
        _spec("comm_type", "int64_val", KIND_INT, "", "CollectiveCommType value", "COMM_COLL_NODE"),
        _spec(
            "comm_size",
            "int64_val",
            KIND_INT,
            "bytes",
            "bytes of the collective or transfer",
            "COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE",
        ),
        _spec("comm_src", "int32_val", KIND_INT, "rank", "source rank of a point-to-point transfer", "COMM_RECV_NODE"),
        _spec(
            "comm_dst", "int32_val", KIND_INT, "rank", "destination rank of a point-to-point transfer", "COMM_SEND_NODE"
        ),
        _spec(
            "comm_tag", "int32_val", KIND_INT, "", "matching tag of a SEND/RECV pair", "COMM_SEND_NODE, COMM_RECV_NODE"
        ),
        _spec(
            "comm_priority",
            "int32_val",
            KIND_INT,
            "",
            "collective priority (higher first)",
            "COMM_COLL_NODE with scheduling-policy EXPLICIT",
        ),
        _spec("pg_name", "string_val", KIND_STR, "", "process group id as a decimal string; '' or '0' = all ranks"),
        _spec(
            "involved_dim", "bool_list", KIND_BOOL_LIST, "", "per network dimension, whether the collective spans it"
        ),
        _spec("rf_id", "int64_val", KIND_INT, "", "PyTorch RecordFunction id (join key to Kineto)"),
        _spec("fw_parent", "int64_val", KIND_INT, "", "forward op id of a backward op"),
        _spec("seq_id", "int64_val", KIND_INT, "", "autograd sequence number (-1 if none)"),
        _spec("scope", "int64_val", KIND_INT, "", "PyTorch RecordScope value"),
        _spec("tid", "int64_val", KIND_INT, "", "host thread id"),
        _spec("fw_tid", "int64_val", KIND_INT, "", "forward thread id of a backward op"),
        _spec("op_schema", "string_val", KIND_STR, "", "ATen operator schema"),
        _spec("stream", "int64_val", KIND_INT, "", "GPU stream of a kernel (0 for CPU nodes)"),
        _spec("inputs", "string_list", KIND_STR_LIST, "", "ASTRA-sim local-memory tracking: [name, size_bytes, ...]"),
        _spec("outputs", "string_list", KIND_STR_LIST, "", "ASTRA-sim local-memory tracking: [name, size_bytes, ...]"),
    )
}


def member_value(attr: AttributeProto) -> Any:
    """The Python value of whichever oneof member is set (lists as ``list``), or ``None``."""
    member = attr.WhichOneof("value")
    if member is None:
        return None
    value = getattr(attr, member)
    if member in LIST_MEMBERS:
        return list(value.values)
    return value


def flag_value(attr: AttributeProto) -> bool:
    """A bool-like attribute (``is_cpu_op``) as tolerant consumers read it: ``bool_val``, or any
    integer member's truthiness; members of another family (reported by validation) read false."""
    member = attr.WhichOneof("value")
    if member == "bool_val":
        return attr.bool_val
    return member in INT_MEMBERS and bool(getattr(attr, member))


def int_value(attr: AttributeProto) -> int | None:
    """An integer attribute from any integer-like member (bool included), else ``None``."""
    member = attr.WhichOneof("value")
    if member in INT_MEMBERS or member == "bool_val":
        return int(getattr(attr, member))
    return None


def find_attr(node: Node, name: str) -> AttributeProto | None:
    """The first attribute called ``name`` (the one FeederV3 reads), or ``None``."""
    for attr in node.attr:
        if attr.name == name:
            return attr
    return None


def get_attr(node: Node, name: str, default: Any = None) -> Any:
    """Value of attribute ``name`` of ``node``, or ``default`` when absent.

    Well-known attributes are converted to their registered kind from any member a tolerant
    consumer accepts (``comm_size`` stored as ``uint64_val`` still reads as the int); a member of
    the wrong family (a float size, a string count) raises :class:`AttrKindError` instead of
    reading as 0. Other attributes are returned as stored.
    """
    attr = find_attr(node, name)
    if attr is None:
        return default
    member = attr.WhichOneof("value")
    if member is None:
        return default
    value = member_value(attr)
    spec = WELL_KNOWN.get(name)
    if spec is None:
        return value
    if member not in _READABLE[spec.kind]:
        raise AttrKindError(
            f"node {node.id}: attribute {name!r} is stored as {member}, which consumers cannot read as {spec.kind}",
            hint=f"write it as {spec.member}",
        )
    if spec.kind == KIND_BOOL:
        return bool(value)
    if spec.kind == KIND_INT:
        return int(value)
    if spec.kind == KIND_FLOAT:
        return float(value)
    if spec.kind == KIND_BOOL_LIST:
        return [bool(v) for v in value]
    return value


def member_for_python_value(value: Any) -> str:
    """The member an unregistered attribute gets from its Python type."""
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "int64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, str):
        return "string_val"
    if isinstance(value, bytes):
        return "bytes_val"
    if isinstance(value, (list, tuple)):
        if not value:
            raise AttrKindError("cannot infer the kind of an empty list; register the attribute or pass member=")
        return member_for_python_value(value[0]).replace("_val", "_list")
    raise AttrKindError(f"no attribute kind for Python type {type(value).__name__}")


def check_value(name: str, member: str, value: Any) -> None:
    """Refuse values the member cannot hold exactly (a float in an int, a rank beyond int32)."""
    scalar = member.replace("_list", "_val")
    values: Iterable[Any] = value if member in LIST_MEMBERS else (value,)
    for v in values:
        if scalar in INT_MEMBER_RANGES:
            if isinstance(v, bool) or not isinstance(v, int):
                raise AttrKindError(f"attribute {name!r} needs an integer ({member}), got {v!r}")
            low, high = INT_MEMBER_RANGES[scalar]
            if not low <= v <= high:
                raise AttrKindError(f"attribute {name!r}: {v} does not fit {member} [{low}, {high}]")
        elif scalar == "bool_val" and not (isinstance(v, bool) or v in (0, 1)):
            raise AttrKindError(f"attribute {name!r} needs a bool, got {v!r}")
        elif scalar == "string_val" and not isinstance(v, str):
            raise AttrKindError(f"attribute {name!r} needs a string, got {v!r}")


def set_attr(node: Node, name: str, value: Any, *, member: str | None = None) -> None:
    """Set attribute ``name`` on ``node`` to ``value`` in the registered value kind.

    Well-known attributes always use their canonical member; others use ``member`` if given, else
    one inferred from the Python type (bool, int -> int64, float -> double, str, bytes, lists).
    An existing attribute of that name is overwritten in place and duplicates are removed, so a
    name never appears twice (consumers disagree on which duplicate wins).
    """
    spec = WELL_KNOWN.get(name)
    if spec is not None:
        if member is not None and member != spec.member:
            raise AttrKindError(f"attribute {name!r} must be written as {spec.member}, not {member}")
        member = spec.member
    elif member is None:
        member = member_for_python_value(value)
    check_value(name, member, value)

    attr = None
    duplicates = []
    for i, existing in enumerate(node.attr):
        if existing.name == name:
            if attr is None:
                attr = existing
            else:
                duplicates.append(i)
    for i in reversed(duplicates):
        del node.attr[i]
    if attr is None:
        attr = node.attr.add(name=name)
    if member in LIST_MEMBERS:
        target = getattr(attr, member)
        del target.values[:]
        target.values.extend(bool(v) if member == "bool_list" else v for v in value)
    else:
        setattr(attr, member, bool(value) if member == "bool_val" else value)


def canonical_member_problem(attr: AttributeProto) -> tuple[str, str] | None:
    """For a well-known attribute stored in another member: ``(severity, explanation)``.

    ``"error"`` when some consumer cannot read it at all (wrong family, or ``involved_dim`` in
    anything but ``bool_list``, which aborts ASTRA-sim); ``"warning"`` when tolerant readers
    convert it but the v2 C++ feeder reads the canonical member only and sees 0.
    """
    spec = WELL_KNOWN.get(attr.name)
    member = attr.WhichOneof("value")
    if spec is None or member is None or member == spec.member:
        return None
    if member not in _READABLE[spec.kind] or spec.name == "involved_dim":
        return "error", f"stored as {member}; consumers need {spec.member} ({spec.kind})"
    return "warning", f"stored as {member}; the v2 C++ feeder reads only {spec.member} and sees 0/false"
