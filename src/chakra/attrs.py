"""Node attributes: the registry of well-known names, their value kinds, and the rules for reading them.

Chakra stores attributes as ``AttributeProto`` with a ``oneof value``; consumers read one member
(the v2 C++ feeder reads *only* the canonical member, anything else reads as 0). Writing the wrong
member is the "comm_size read as 0" class of bug, so producers in this package go through
:func:`set_attr`, which always writes the registered member.

**Reading rules** (one set, used by :func:`get_attr` on messages and by the node table's columns,
:mod:`chakra.table`, so every consumer sees the same value):

1. the first attribute of a name is the one read (FeederV3's linear scan);
2. integer attributes read any integer member and ``bool_val``; the value must fit an int64 (a size,
   rank or count beyond it is not a value any consumer can use);
3. flags (``is_cpu_op``) read ``bool_val`` and any integer member (non-zero is true), and also the
   texts ``"true"``/``"false"``/``"1"``/``"0"`` in ``string_val`` (any case, spaces around ignored),
   which some producers write;
4. text attributes (``pg_name``, ``op_schema``) read ``string_val``, and an integer member as its
   decimal text (a group id stored as ``int64_val`` 3 is group ``"3"``);
5. anything else is *unreadable*: :func:`get_attr` raises :class:`AttrKindError`, the node table
   treats the attribute as absent and ``chakra validate`` reports it (``attr-kind``).

Rules 3 and 4 are tolerance of this package: the C++ consumers cannot read those members, so
:func:`canonical_member_problem` still grades them as errors (``reference/chakra-format.md`` §6).

Example:
    >>> from chakra.schema.protobuf.et_def_pb2 import Node
    >>> node = Node(id=1, name="allreduce")
    >>> set_attr(node, "comm_size", 1 << 20)
    >>> node.attr[0].WhichOneof("value")
    'int64_val'
    >>> get_attr(node, "comm_size")
    1048576
    >>> read_flag_text(" False ")
    False
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chakra.errors import AttrKindError
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, Node

if TYPE_CHECKING:  # numpy loads where columns are read: a producer that only writes does not pay for it
    import numpy as np

#: The GlobalMetadata attribute saying where a workload's times come from, and its value (followed
#: by ``": NOTE"``) for the times of a simulated run (``chakra simulate --timed`` writes them; an
#: analysis then reports its timing as simulated).
TIMING_ATTR = "chakra_timing"
TIMING_SIMULATED = "simulated"
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

#: The largest integer a well-known integer attribute may hold (rule 2; the node table's int64 columns).
MAX_INT_VALUE = (1 << 63) - 1
MIN_INT_VALUE = -(1 << 63)

#: The families a well-known attribute can belong to.
KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_STR = "bool", "int", "float", "str"
KIND_BOOL_LIST, KIND_STR_LIST = "bool_list", "str_list"

#: Texts a flag reads from ``string_val`` (rule 3), compared after ``strip().lower()``.
FLAG_TRUE_TEXTS = frozenset({"true", "1"})
FLAG_FALSE_TEXTS = frozenset({"false", "0"})

#: Members FeederV3, the C++ reader ASTRA-sim links, converts into each family (it converts between
#: all integer-like members and bool; it throws for float -> integer and string -> number).
_FEEDER_READABLE: dict[str, frozenset[str]] = {
    KIND_BOOL: INT_MEMBERS | {"bool_val"},
    KIND_INT: INT_MEMBERS | {"bool_val"},
    KIND_FLOAT: INT_MEMBERS | FLOAT_MEMBERS,
    KIND_STR: frozenset({"string_val"}),
    KIND_BOOL_LIST: INT_LIST_MEMBERS | {"bool_list"},
    KIND_STR_LIST: frozenset({"string_list"}),
}
#: Members this package reads into each family: FeederV3's, plus rules 3 and 4.
READABLE: dict[str, frozenset[str]] = {
    **_FEEDER_READABLE,
    KIND_BOOL: _FEEDER_READABLE[KIND_BOOL] | {"string_val"},
    KIND_STR: _FEEDER_READABLE[KIND_STR] | INT_MEMBERS,
}

# -- oneof members by field number (what the node table's C decoder reports) ---------------------

#: Field number of each oneof member (``et_def.proto``) and back.
MEMBER_CODE: dict[str, int] = {f.name: f.number for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields}
MEMBER_OF_CODE: dict[int, str] = {code: name for name, code in MEMBER_CODE.items()}
#: Code of an attribute whose oneof holds no member.
NO_MEMBER = 0
#: Members whose value the decoder reports as a number (integers, bool) or a double (floats).
INT_CODES = frozenset(MEMBER_CODE[m] for m in INT_MEMBERS)
BOOL_CODE = MEMBER_CODE["bool_val"]
STRING_CODE = MEMBER_CODE["string_val"]
FLOAT_CODES = frozenset(MEMBER_CODE[m] for m in FLOAT_MEMBERS)
#: Unsigned 64-bit members: the decoder reports their bit pattern, negative when above int64.
_UNSIGNED64_CODES = frozenset({MEMBER_CODE["uint64_val"], MEMBER_CODE["fixed64_val"]})


_READS_AS_INT_CODES = INT_CODES | {BOOL_CODE}


@functools.cache
def _code_table(codes: frozenset[int]) -> np.ndarray:
    """A lookup by member code (a field number, small), whether it is one of ``codes``: faster than
    ``np.isin`` on the few attributes of one column, which this is asked for per column and file."""
    import numpy as np

    table = np.zeros(max(MEMBER_CODE.values()) + 1, dtype=bool)
    table[list(codes)] = True
    return table


def _is_code(member: np.ndarray, codes: frozenset[int]) -> np.ndarray:
    import numpy as np

    table = _code_table(codes)
    inside = (member >= 0) & (member < len(table))
    return inside & table[np.where(inside, member, 0)]


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
        _spec(
            "duration_ns",
            "int64_val",
            KIND_INT,
            "ns",
            "exact duration where a converter kept it (analyses prefer it to duration_micros; ASTRA-sim ignores it)",
        ),
        _spec(
            "recorded_comm_type",
            "int64_val",
            KIND_INT,
            "",
            "CollectiveCommType that ran, where chakra adapt wrote a stand-in its consumer simulates as comm_type",
        ),
        _spec(
            "recorded_node_type",
            "int64_val",
            KIND_INT,
            "",
            "NodeType the producer wrote, where chakra adapt changed the node's type for its consumer",
        ),
        _spec("inputs", "string_list", KIND_STR_LIST, "", "ASTRA-sim local-memory tracking: [name, size_bytes, ...]"),
        _spec("outputs", "string_list", KIND_STR_LIST, "", "ASTRA-sim local-memory tracking: [name, size_bytes, ...]"),
    )
}


# -- scalar reading (one attribute message) -------------------------------------------------------


def member_value(attr: AttributeProto) -> Any:
    """The Python value of whichever oneof member is set (lists as ``list``), or ``None``."""
    member = attr.WhichOneof("value")
    if member is None:
        return None
    value = getattr(attr, member)
    if member in LIST_MEMBERS:
        return list(value.values)
    return value


def read_flag_text(text: str) -> bool | None:
    """A flag written as text (rule 3): ``True``, ``False``, or ``None`` when the text says neither.

    >>> read_flag_text("TRUE"), read_flag_text("0"), read_flag_text("yes")
    (True, False, None)
    """
    word = text.strip().lower()
    if word in FLAG_TRUE_TEXTS:
        return True
    if word in FLAG_FALSE_TEXTS:
        return False
    return None


def read_value(kind: str, member: str, value: Any) -> Any:
    """``value`` stored in ``member`` as an attribute of ``kind`` reads it (rules 2-4), or ``None`` when
    it is unreadable (rule 5).

    >>> read_value(KIND_INT, "uint64_val", 4096), read_value(KIND_STR, "int64_val", 3)
    (4096, '3')
    >>> read_value(KIND_INT, "double_val", 1.0) is None
    True
    """
    if member not in READABLE[kind]:
        return None
    if kind == KIND_BOOL:
        return read_flag_text(value) if member == "string_val" else bool(value)
    if kind == KIND_INT:
        number = int(value)
        return number if MIN_INT_VALUE <= number <= MAX_INT_VALUE else None
    if kind == KIND_STR:
        return value if member == "string_val" else str(int(value))
    if kind == KIND_FLOAT:
        return float(value)
    if kind == KIND_BOOL_LIST:
        return [bool(v) for v in value]
    return value


def flag_value(attr: AttributeProto) -> bool:
    """A flag (``is_cpu_op``) by the reading rules; an unreadable one reads as false (absent)."""
    member = attr.WhichOneof("value")
    return member is not None and read_value(KIND_BOOL, member, member_value(attr)) is True


def int_value(attr: AttributeProto) -> int | None:
    """An integer attribute by the reading rules, ``None`` when absent or unreadable."""
    member = attr.WhichOneof("value")
    return None if member is None else read_value(KIND_INT, member, member_value(attr))


def find_attr(node: Node, name: str) -> AttributeProto | None:
    """The first attribute called ``name`` (the one FeederV3 reads), or ``None``."""
    for attr in node.attr:
        if attr.name == name:
            return attr
    return None


def get_attr(node: Node, name: str, default: Any = None) -> Any:
    """Value of attribute ``name`` of ``node``, or ``default`` when absent.

    Well-known attributes are read by the rules of the module docstring (``comm_size`` stored as
    ``uint64_val`` still reads as the int); an unreadable one (a float size, a string count) raises
    :class:`AttrKindError` instead of reading as 0. Other attributes are returned as stored.
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
    read = read_value(spec.kind, member, value)
    if read is None:
        raise AttrKindError(
            f"node {node.id}: attribute {name!r} is stored as {member} ({value!r}), which does not read as {spec.kind}",
            hint=f"write it as {spec.member}",
        )
    return read


# -- column reading (many attributes at once: chakra.table) ---------------------------------------


def int_column(member: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rule 2 over decoded attributes: ``(values, readable)`` from their member codes and the numbers
    the decoder reported (int64; unsigned 64-bit members as their bit pattern).

    >>> import numpy as np
    >>> values, ok = int_column(np.array([9, 13, 3]), np.array([5, -1, 0]))
    >>> values.tolist(), ok.tolist()
    ([5, 0, 0], [True, False, False])
    """
    import numpy as np

    member = np.asarray(member)
    ok = _is_code(member, _READS_AS_INT_CODES)
    ok &= ~(_is_code(member, _UNSIGNED64_CODES) & (value < 0))
    return np.where(ok, value, 0).astype(np.int64), ok


def flag_column(member: np.ndarray, value: np.ndarray, texts: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3 over decoded attributes: ``(flags, readable)``; ``texts`` holds the ``string_val`` of the
    rows stored as strings (row index -> text).

    >>> import numpy as np
    >>> flags, ok = flag_column(np.array([27, 9, 29, 29]), np.array([1, 0, 0, 0]), {2: "false", 3: "no"})
    >>> flags.tolist(), ok.tolist()
    ([True, False, False, False], [True, True, True, False])
    """
    import numpy as np

    member = np.asarray(member)
    ok = _is_code(member, _READS_AS_INT_CODES)
    flags = ok & (value != 0)
    for row, text in texts.items():
        read = read_flag_text(text)
        if read is not None:
            ok[row] = True
            flags[row] = read
    return flags, ok


def text_column(member: np.ndarray, value: np.ndarray, texts: dict[int, str]) -> tuple[list[str], np.ndarray]:
    """Rule 4 over decoded attributes: ``(texts, readable)``, integers as their decimal text."""
    ints, ok = int_column(member, value)
    out = [str(v) if readable else "" for v, readable in zip(ints.tolist(), ok.tolist(), strict=True)]
    for row, text in texts.items():
        out[row] = text
        ok[row] = True
    return out, ok


# -- writing ---------------------------------------------------------------------------------------


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


def canonicalize(attr: AttributeProto) -> str | None:
    """Rewrite a well-known attribute stored outside its canonical member into that member, in place
    (its position among the node's attributes kept), when the reading rules read it and the canonical
    member holds the value exactly. Returns the member it was stored in, or ``None`` when nothing
    changed (already canonical, not well-known, unreadable, or out of range).

    >>> attr = AttributeProto(name="comm_size", uint64_val=4096)
    >>> canonicalize(attr), attr.WhichOneof("value"), attr.int64_val
    ('uint64_val', 'int64_val', 4096)
    >>> canonicalize(AttributeProto(name="comm_size", double_val=1.5)) is None
    True
    """
    spec = WELL_KNOWN.get(attr.name)
    member = attr.WhichOneof("value")
    if spec is None or member is None or member == spec.member:
        return None
    value = read_value(spec.kind, member, member_value(attr))
    if value is None:
        return None
    try:
        check_value(attr.name, spec.member, value)
    except AttrKindError:
        return None
    if spec.member in LIST_MEMBERS:
        target = getattr(attr, spec.member)
        del target.values[:]
        target.values.extend(value)
    else:
        setattr(attr, spec.member, value)
    return member


# -- grading (chakra validate) ---------------------------------------------------------------------


def member_problem(name: str, member: str) -> tuple[str, str] | None:
    """For well-known attribute ``name`` stored in ``member``: ``(severity, explanation)``, or None.

    ``"error"`` when a C++ consumer cannot read it at all (wrong family, rules 3-4 included, or
    ``involved_dim`` in anything but ``bool_list``, which aborts ASTRA-sim); ``"warning"`` when
    FeederV3 converts it but the v2 C++ feeder reads the canonical member only and sees 0.
    """
    spec = WELL_KNOWN.get(name)
    if spec is None or member == spec.member:
        return None
    if member not in _FEEDER_READABLE[spec.kind] or spec.name == "involved_dim":
        return "error", f"stored as {member}; consumers need {spec.member} ({spec.kind})"
    return "warning", f"stored as {member}; the v2 C++ feeder reads only {spec.member} and sees 0/false"


def canonical_member_problem(attr: AttributeProto) -> tuple[str, str] | None:
    """:func:`member_problem` of one attribute message (None for an attribute without value)."""
    member = attr.WhichOneof("value")
    return None if member is None else member_problem(attr.name, member)
