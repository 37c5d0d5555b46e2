"""The anonymizer's rules, decided once per distinct name, text or kind of attribute: the Python half
of the C rewriter (``chakra.share._native.Rewriter``, which applies them to every node).

The rewriter asks :class:`Rules`:

* :meth:`~Rules.name`: the token of a node name (its class and token with ``keep_op_kinds``);
* :meth:`~Rules.shapes`: an IO shapes text as numbers (bucketed on request), or ``None`` when it is
  not a list of numbers;
* :meth:`~Rules.groups`: a METADATA node's process groups written again from their ids and ranks;
* :meth:`~Rules.rule`: what to do with every attribute of one name and member, as a rule tuple
  ``(kind, name id, member, transform, counter)``: DROP it (counted), rewrite an integer in C (INT:
  kept, a power of two, scaled by the node's noise factor, a flag), or ask :meth:`~Rules.attr` (once
  per distinct attribute: CACHE; every time: CALL);
* :meth:`~Rules.attr`: one attribute's anonymized bytes, by the rules of
  :mod:`chakra.share.anonymize`'s docstring.

Each answer is ``(bytes or None, counter ids)``: what to write, and what to count each time the
answer is used (counters are ``(report field, what)`` pairs, numbered by :meth:`~Rules.counter`).
Everything the rules write is added to :attr:`Rules.generated` (the leakage check explains hits
inside them); attribute names they drop go to the input strings.

Example:
    >>> from chakra.share.leakage import StringSet
    >>> rules = Rules(b"key", inputs=StringSet())
    >>> rules.rule(b"op_schema", 29)[0] == DROP, rules.rule(b"comm_size", 9)[0] == INT
    (True, True)
    >>> rules.shapes(b"[[1000, 3]]")
    (b'[[1000, 3]]', ())
"""

from __future__ import annotations

import ast
import hmac
import re
from collections import Counter
from hashlib import sha256
from typing import Protocol

from chakra import io
from chakra.attrs import (
    INT_MEMBERS,
    KIND_BOOL,
    KIND_INT,
    KIND_STR_LIST,
    MEMBER_CODE,
    MEMBER_OF_CODE,
    READABLE,
    WELL_KNOWN,
    member_value,
    read_value,
    set_attr,
)
from chakra.errors import AttrKindError
from chakra.groups import GroupNameError, group_id, parse_process_groups, process_groups_values
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, AttributeProto, GlobalMetadata, Node
from chakra.share.opclass import op_class

#: Characters of a token's hash part (base 32 of the HMAC: 60 bits, no collision among a run's names).
TOKEN_CHARS = 12
#: The alphabet of a token's hash part (RFC 4648 base32, lowercased).
BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
#: Attributes that name host threads, renumbered.
THREAD_ATTRS = frozenset({"tid", "fw_tid"})
#: Attributes whose value is a size or a count, coarsened by ``size_buckets``.
SIZE_ATTRS = frozenset({"comm_size", "tensor_size", "num_ops"})
#: Registry attributes that are free text, removed.
TEXT_ATTRS_REMOVED = frozenset({"op_schema"})
#: Attributes that carry a duration, noised with the node's duration.
DURATION_ATTRS = frozenset({"duration_ns"})

#: Rule kinds (chakra/share/_rewrite.c).
DROP, INT, CACHE, CALL = 0, 1, 2, 3
#: Transforms of an INT rule.
KEEP, POW2, SCALE, FLAG = 0, 1, 2, 3
#: The names CUPTI and roctracer give device copies and memsets (``Memcpy HtoD (Pageable -> Device)``,
#: ``Memset (Device)``): kept as they are, so that the node table still counts them as memory
#: (:data:`chakra.chunks.DEVICE_COPY_PREFIXES`).
PROFILER_COPY_NAME = re.compile(r"Memcpy [A-Za-z]{4} \([A-Za-z]+ -> [A-Za-z]+\)|Memset \([A-Za-z]+\)")
#: Members the C rewriter writes integers into.
C_INT_MEMBERS = frozenset({"int32_val", "int64_val", "uint32_val", "uint64_val", "bool_val"})
NO_COUNTER = -1

#: What the rewriter counts itself, in the order of its counter ids.
FIXED_COUNTERS = (
    ("removed", "io values"),
    ("removed", "io types"),
    ("coarsened", "duration"),
    ("removed", "repeated attributes (the first of a name is read)"),
    ("removed", "attribute doc strings"),
)

#: An answer: what to write (or nothing) and the counters to count each time it is used.
Entry = tuple[bytes | None, tuple[int, ...]]


class InputStrings(Protocol):
    """Where the input's strings go (:class:`chakra.share.leakage.StringSet`)."""

    def add(self, text: str) -> None: ...

    def add_bytes(self, data: bytes) -> None: ...


class Tokenizer:
    """Stable opaque tokens for names: ``t`` + base32 of HMAC-SHA256(key, name); remembers
    token -> name for the owner's mapping file.

    >>> tokens = Tokenizer(b"k")
    >>> same_key, other_key = tokens.token("aten::mm"), Tokenizer(b"j").token("aten::mm")
    >>> tokens.token("aten::mm") == same_key, same_key == other_key, len(same_key)
    (True, False, 13)
    """

    def __init__(self, key: bytes):
        self.key = key
        self.mapping: dict[str, str] = {}
        self._tokens: dict[str, str] = {}

    def token(self, name: str) -> str:
        found = self._tokens.get(name)
        if found is None:
            digest = int.from_bytes(hmac.new(self.key, name.encode(), sha256).digest()[:8], "big")
            found = "t" + "".join(BASE32[(digest >> (5 * i)) & 31] for i in range(TOKEN_CHARS))
            self._tokens[name] = found
            self.mapping[found] = name
        return found


def pow2_bucket(value: int) -> int:
    """``value`` rounded up to a power of two (0 and negatives as they are).

    >>> pow2_bucket(1000), pow2_bucket(1024), pow2_bucket(0)
    (1024, 1024, 0)
    """
    return 1 << (value - 1).bit_length() if value > 0 else value


class Rules:
    """The answers the rewriter asks for (see the module's docstring), and the state behind them:
    tokens, thread numbers, counters, the strings written."""

    def __init__(
        self,
        key: bytes,
        *,
        inputs: InputStrings,
        keep_op_kinds: bool = False,
        keep_attrs: frozenset[str] = frozenset(),
        pow2: bool = False,
        noise: bool = False,
    ):
        self.tokens = Tokenizer(key)
        self.inputs = inputs
        self.keep_op_kinds = keep_op_kinds
        self.keep_attrs = keep_attrs
        self.pow2 = pow2
        self.noise = noise
        self.generated: set[str] = set()  # every string written
        self.threads: dict[int, int] = {}
        self._counters: dict[tuple[str, str], int] = {}
        self._name_ids: dict[str, int] = {}
        self.fixed_counters = tuple(self.counter(field, what) for field, what in FIXED_COUNTERS)

    def counter(self, field: str, what: str) -> int:
        """The id of counter ``what`` of the report's ``field`` (``removed``, ``dropped_attrs``, ``coarsened``)."""
        return self._counters.setdefault((field, what), len(self._counters))

    def totals(self, counts: list[int]) -> dict[str, Counter[str]]:
        """The rewriter's ``counts`` (by counter id) as the report's counters, by field."""
        fields: dict[str, Counter[str]] = {"removed": Counter(), "dropped_attrs": Counter(), "coarsened": Counter()}
        for (field, what), index in self._counters.items():
            if index < len(counts) and counts[index]:
                fields[field][what] += counts[index]
        return fields

    # -- names and texts ---------------------------------------------------------------------------
    def name(self, raw: bytes, node_type: int) -> bytes:
        text = raw.decode()
        if node_type == COMP_NODE and PROFILER_COPY_NAME.fullmatch(text):
            # the profiler's name for a kind of device copy: no secret, and what makes it memory
            self.generated.add(text)
            return raw
        token = self.tokens.token(text)
        out = f"{op_class(text, node_type)}:{token}" if self.keep_op_kinds else token
        self.generated.add(out)
        return out.encode()

    def shapes(self, raw: bytes) -> Entry:
        tally: list[int] = []
        shapes = self._shapes(raw.decode(), tally)
        if shapes is None:
            return None, (self.counter("removed", "io shapes (unreadable)"),)
        self.generated.add(shapes)
        return shapes.encode(), tuple(tally)

    def _shapes(self, text: str, tally: list[int]) -> str | None:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None

        def numbers(value: object) -> object:
            if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
                raise ValueError
            if isinstance(value, int):
                return self._size(value, "shape dimension", tally)
            return [numbers(v) for v in value]

        try:
            return str(numbers(parsed))
        except (ValueError, RecursionError):
            return None

    def groups(self, raw: bytes) -> Entry:
        try:
            groups = parse_process_groups(raw.decode())
        except ValueError:
            return None, (self.counter("removed", "metadata node values (not process groups)"),)
        values = process_groups_values(groups)
        self.generated.add(values)
        return values.encode(), ()

    def _size(self, value: int, what: str, tally: list[int]) -> int:
        """``value`` bucketed as asked; a changed value is counted."""
        if self.pow2:
            bucketed = pow2_bucket(value)
            if bucketed != value:
                tally.append(self.counter("coarsened", what))
            return bucketed
        return value

    # -- attributes --------------------------------------------------------------------------------
    def rule(self, raw_name: bytes, member_code: int) -> tuple[int, int, int, int, int]:
        """The rule of every attribute named ``raw_name`` holding member ``member_code`` (0: none)."""
        name = raw_name.decode()
        name_id = self._name_ids.setdefault(name, len(self._name_ids))
        member = MEMBER_OF_CODE.get(member_code)
        spec = WELL_KNOWN.get(name)
        if spec is None:
            if name not in self.keep_attrs:
                self.inputs.add(name)
                return DROP, name_id, 0, KEEP, self.counter("dropped_attrs", name)
            self.generated.add(name)
            return CACHE, name_id, 0, KEEP, NO_COUNTER
        if name in TEXT_ATTRS_REMOVED:
            return DROP, name_id, 0, KEEP, self.counter("removed", name)
        if member is None or member not in READABLE[spec.kind]:
            return DROP, name_id, 0, KEEP, self.counter("removed", f"{name} (unreadable)")
        self.generated.add(name)
        integer = spec.kind in (KIND_INT, KIND_BOOL) and member in INT_MEMBERS | {"bool_val"}
        if integer and name not in THREAD_ATTRS and spec.member in C_INT_MEMBERS:
            transform, counter = KEEP, NO_COUNTER
            if spec.kind == KIND_BOOL:
                transform = FLAG
            elif name in SIZE_ATTRS and self.pow2:
                transform, counter = POW2, self.counter("coarsened", name)
            elif name in DURATION_ATTRS and self.noise:
                transform = SCALE
            return INT, name_id, MEMBER_CODE[spec.member], transform, counter
        if name in DURATION_ATTRS and self.noise:
            return CALL, name_id, 0, KEEP, NO_COUNTER
        return CACHE, name_id, 0, KEEP, NO_COUNTER

    def attr(self, raw: bytes, factor: float) -> Entry:
        """One attribute (its serialized bytes) anonymized, durations times ``factor``."""
        attr = AttributeProto.FromString(raw)
        member = attr.WhichOneof("value")
        tally: list[int] = []
        scratch = Node()
        if not self._attr_rules(attr, member, scratch, factor, tally):
            return None, tuple(tally)
        return scratch.attr[0].SerializeToString(), tuple(tally)

    def _attr_rules(self, attr: AttributeProto, member: str | None, out: Node, factor: float, tally: list[int]) -> bool:
        """The rules of :mod:`chakra.share.anonymize` for one attribute :meth:`rule` sends here (an attribute
        kept by ``keep_attrs``, or a registry one whose value decides); returns whether it wrote it."""
        name = attr.name
        spec = WELL_KNOWN.get(name)
        if spec is None:  # rule() drops the others
            self._kept(attr, member, out)
            return True
        value = read_value(spec.kind, member, member_value(attr)) if member is not None else None
        if value is None:
            tally.append(self.counter("removed", f"{name} (unreadable)"))
            return False
        if name == "pg_name":
            value = self._group_text(value, tally)
        elif name in THREAD_ATTRS:
            value = self.threads.setdefault(value, len(self.threads) + 1)
        elif name in SIZE_ATTRS:
            value = self._size(value, name, tally)
        elif name in DURATION_ATTRS and factor != 1.0:
            value = round(value * factor)
        elif spec.kind == KIND_STR_LIST:
            value = [self._list_entry(str(v), tally) for v in value]
            self.generated.update(value)
        try:
            set_attr(out, name, value)
        except AttrKindError:  # a value the canonical member cannot hold (a peer rank past int32)
            tally.append(self.counter("removed", f"{name} (out of its kind's range)"))
            return False
        if isinstance(value, str):
            self.generated.add(value)
        return True

    def _kept(self, attr: AttributeProto, member: str | None, out: Node) -> None:
        """An attribute outside the registry that ``keep_attrs`` allows: numbers as they are, text
        and bytes as tokens."""
        copy = out.attr.add(name=attr.name)
        if member in ("string_val", "bytes_val"):
            text = attr.string_val if member == "string_val" else attr.bytes_val.hex()
            copy.string_val = self.tokens.token(text)
            self.generated.add(copy.string_val)
        elif member in ("string_list", "bytes_list"):
            values = [v if isinstance(v, str) else v.hex() for v in getattr(attr, member).values]
            tokens = [self.tokens.token(v) for v in values]
            copy.string_list.values.extend(tokens)
            self.generated.update(tokens)
        elif member is not None:
            copy.CopyFrom(attr)
            copy.ClearField("doc_string")

    def _list_entry(self, value: str, tally: list[int]) -> str:
        """An entry of ``inputs``/``outputs`` (ASTRA-sim's local-memory tracking, [name, size, ...]):
        a size as a number, a buffer name as a token."""
        if value.isdigit():
            return str(self._size(int(value), "tensor_size", tally))
        return self.tokens.token(value)

    def _group_text(self, text: str, tally: list[int]) -> str:
        try:
            gid = group_id(text)
        except GroupNameError:
            tally.append(self.counter("removed", "pg_name (no group id)"))
            return ""
        return "" if gid is None else str(gid)

    # -- the file ----------------------------------------------------------------------------------
    def metadata(self, given: GlobalMetadata) -> tuple[GlobalMetadata, int]:
        """The anonymized file metadata (the format's version alone) and how many attributes it lost;
        the given version and attribute texts go to the input strings."""
        self.inputs.add(given.version)
        for attr in given.attr:
            self.inputs.add(attr.name)
            member = attr.WhichOneof("value")
            if member == "string_val":
                self.inputs.add(attr.string_val)
            elif member == "string_list":
                for value in attr.string_list.values:
                    self.inputs.add(value)
            elif member in ("bytes_val", "bytes_list"):
                for data in [attr.bytes_val] if member == "bytes_val" else attr.bytes_list.values:
                    self.inputs.add_bytes(data)
        self.generated.add(io.FORMAT_VERSION)
        return GlobalMetadata(version=io.FORMAT_VERSION), len(given.attr)
