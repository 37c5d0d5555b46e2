"""Anonymizing a workload: structure, kinds, dependencies, collectives, groups, sizes and times kept;
every name and free text replaced or removed.

:func:`anonymize_workload` reads ``PREFIX.{rank}.et`` rank by rank, node by node, and writes an
anonymized copy through the core writer (all ranks or none), then runs the leakage check
(:mod:`chakra.share.leakage`). Per node:

* **kept**: id, type, data and ctrl deps, duration (``duration_micros``, ``duration_ns``), and every
  numeric attribute of the registry (:data:`chakra.attrs.WELL_KNOWN`): ``comm_type``, ``comm_size``,
  peers, tags, ``is_cpu_op``, ``num_ops``, ``tensor_size``, ``stream``...; ``pg_name`` as its
  group id (``"3"``; ``""`` for the whole job); tensor shapes (``inputs.shapes``, ``outputs.shapes``)
  as numbers.
* **tokenized**: the name, as a keyed hash (HMAC-SHA256 with ``key``: the same name gets the same
  token in every rank and file anonymized with one key), ``class:token`` with ``keep_op_kinds``
  (:func:`chakra.share.opclass.op_class`); the buffer names of ``inputs``/``outputs`` string lists;
  string values of attributes kept by ``keep_attrs``.
* **renumbered**: host thread ids (``tid``, ``fw_tid``: 1, 2, ... in order of appearance, the same
  across ranks), which name OS threads; start times shifted so that the workload's first start is
  at 1 µs (0 means "not recorded"), which drops the wall-clock date and keeps ranks aligned.
* **removed** (counted): ``op_schema``, IO values and types, attribute doc strings, attributes not
  in the registry (unless in ``keep_attrs``), the file metadata's attributes (pid, host, times,
  schema strings), process-group descriptions (a METADATA node's groups are written again from
  their ids and ranks alone).

On request, numbers that can identify a model are coarsened: ``size_buckets`` ``pow2`` rounds
sizes (``comm_size``, ``tensor_size``, ``num_ops``, shape dimensions) up to a power of two;
``time_noise`` multiplies each duration by a factor drawn uniformly from [1 - b, 1 + b]
(``seed``); ``shuffle`` writes each rank's nodes in a random dependency-respecting order (ids,
and so every consumer's issue order, unchanged).

Example:
    report = anonymize_workload("runs/job", "share/job", AnonymizeOptions(key=b"owner secret"))
    report.leaks    # [] (else the command fails naming the field)
"""

from __future__ import annotations

import ast
import hmac
import random
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from hashlib import sha256
from pathlib import Path

from chakra import io
from chakra.attrs import INT_MEMBERS, KIND_STR_LIST, WELL_KNOWN, member_value, read_value, set_attr
from chakra.errors import AttrKindError, ChakraInputError, PathLike
from chakra.groups import CommGroups, GroupNameError, group_id, parse_process_groups, process_groups_values
from chakra.schema.protobuf.et_def_pb2 import METADATA_NODE, AttributeProto, GlobalMetadata, IOInfo, Node
from chakra.share.leakage import Leak, StringSet, find_leaks
from chakra.share.opclass import op_class
from chakra.trace import TraceSet, WorkloadWriter

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
#: The first start of an anonymized workload (µs; 0 means "not recorded").
FIRST_START_US = 1
#: Attribute members of one value, whose anonymized form is cached by value.
SCALAR_MEMBERS = frozenset({*INT_MEMBERS, "bool_val", "string_val", "bytes_val", "double_val", "float_val"})
#: Distinct attribute values (and shape texts) remembered; beyond, they are worked out each time (bounds memory).
ATTR_CACHE_ENTRIES = 1 << 16


class SizeBuckets(str, Enum):
    NONE = "none"
    POW2 = "pow2"


@dataclass(frozen=True)
class AnonymizeOptions:
    """What :func:`anonymize_workload` keeps and coarsens (see the module's docstring)."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    keep_op_kinds: bool = False
    keep_attrs: frozenset[str] = frozenset()
    size_buckets: SizeBuckets = SizeBuckets.NONE
    time_noise: float = 0.0
    shuffle: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.time_noise < 1:
            raise ChakraInputError(
                f"time noise {self.time_noise:g} is not a fraction below 1", hint="e.g. 0.02 for 2 %"
            )


@dataclass
class AnonymizeReport:
    """What was written and what was taken out: nodes, distinct names tokenized, removed fields and
    attributes by name (counts), coarsened values, and the leakage check's findings."""

    prefix: str
    ranks: int = 0
    nodes: int = 0
    tokens: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    dropped_attrs: Counter[str] = field(default_factory=Counter)
    coarsened: Counter[str] = field(default_factory=Counter)
    strings_checked: int = 0
    leaks: list[Leak] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.prefix, "ranks": self.ranks, "nodes": self.nodes, "tokens": self.tokens,
            "removed": dict(self.removed), "dropped_attrs": dict(self.dropped_attrs),
            "coarsened": dict(self.coarsened), "strings_checked": self.strings_checked,
            "leaks": [leak.to_dict() for leak in self.leaks],
        }  # fmt: skip


class Tokenizer:
    """Stable opaque tokens for names: ``t`` + base32 of HMAC-SHA256(key, name), optionally after
    the name's coarse class; remembers token -> name for the owner's mapping file.

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


class _Anonymizer:
    """The per-node rules of the module's docstring, with the state shared by every rank."""

    def __init__(self, options: AnonymizeOptions, report: AnonymizeReport, shift_us: int):
        self.options = options
        self.report = report
        self.tokens = Tokenizer(options.key)
        self.inputs = StringSet()  # every string of the input, for the leakage check
        self.generated: set[str] = set()  # every string this writes
        self.threads: dict[int, int] = {}
        self.shift_us = shift_us
        self.random = random.Random(options.seed)
        self._attr_cache: dict[tuple[str, str, object], tuple[AttributeProto | None, tuple[tuple[str, str], ...]]] = {}
        self._shapes_cache: dict[str, str | None] = {}

    # -- names -------------------------------------------------------------------------------------
    def name(self, name: str, node_type: int) -> str:
        token = self.tokens.token(name)
        out = f"{op_class(name, node_type)}:{token}" if self.options.keep_op_kinds else token
        self.generated.add(out)
        return out

    def size(self, value: int, what: str, tally: list[tuple[str, str]] | None = None) -> int:
        """``value`` bucketed as asked; a changed value is counted (in ``tally`` when given)."""
        if self.options.size_buckets is SizeBuckets.POW2:
            bucketed = pow2_bucket(value)
            if bucketed != value:
                if tally is None:
                    self.report.coarsened[what] += 1
                else:
                    tally.append(("coarsened", what))
            return bucketed
        return value

    # -- one node ----------------------------------------------------------------------------------
    def node(self, node: Node) -> Node:
        self.inputs.add(node.name)
        out = Node(id=node.id, name=self.name(node.name, node.type), type=node.type)
        out.ctrl_deps.extend(node.ctrl_deps)
        out.data_deps.extend(node.data_deps)
        factor = 1.0
        if self.options.time_noise:
            factor = 1 + self.random.uniform(-self.options.time_noise, self.options.time_noise)
            if node.duration_micros:
                self.report.coarsened["duration"] += 1
        out.duration_micros = round(node.duration_micros * factor)
        if node.start_time_micros:
            out.start_time_micros = node.start_time_micros - self.shift_us
        self._io(node.inputs, out.inputs, node.type == METADATA_NODE)
        self._io(node.outputs, out.outputs, False)
        written: set[str] = set()
        for attr in node.attr:
            self._attr(attr, out, factor, written)
        return out

    def _io(self, given: IOInfo, out: IOInfo, metadata: bool) -> None:
        for text in (given.values, given.shapes, given.types):
            self.inputs.add(text)
        if metadata and given.values:
            try:
                groups = parse_process_groups(given.values)
            except ValueError:
                self.report.removed["metadata node values (not process groups)"] += 1
            else:
                out.values = process_groups_values(groups)
                self.generated.add(out.values)
        elif given.values:
            self.report.removed["io values"] += 1
        if given.types:
            self.report.removed["io types"] += 1
        if given.shapes:
            # bucketed shapes are worked out each time: each changed dimension is counted
            cached = self.options.size_buckets is SizeBuckets.NONE
            shapes = self._shapes_cache.get(given.shapes, "") if cached else ""
            if shapes == "":
                shapes = self._shapes(given.shapes)
                if len(self._shapes_cache) < ATTR_CACHE_ENTRIES:
                    self._shapes_cache[given.shapes] = shapes
            if shapes is None:
                self.report.removed["io shapes (unreadable)"] += 1
            else:
                out.shapes = shapes
                self.generated.add(shapes)

    def _shapes(self, text: str) -> str | None:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None

        def numbers(value: object) -> object:
            if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
                raise ValueError
            if isinstance(value, int):
                return self.size(value, "shape dimension")
            return [numbers(v) for v in value]

        try:
            return str(numbers(parsed))
        except (ValueError, RecursionError):
            return None

    def _attr(self, attr: AttributeProto, out: Node, factor: float, written: set[str]) -> None:
        """Anonymize one attribute onto ``out``. A one-value attribute comes out the same every time
        it comes in (name, member and value; no doc string; no noised duration), so its result and
        what it counted are cached: converted traces repeat most of their attribute values."""
        name = attr.name
        if name in written:
            self._collect(attr, attr.WhichOneof("value"))
            self.report.removed["repeated attributes (the first of a name is read)"] += 1
            return
        member = attr.WhichOneof("value")
        cacheable = member in SCALAR_MEMBERS and not attr.doc_string and (factor == 1.0 or name not in DURATION_ATTRS)
        if not cacheable:
            tally: list[tuple[str, str]] = []
            if self._attr_rules(attr, member, out, factor, tally):
                written.add(name)
            self._apply(tally)
            return
        key = (name, member, getattr(attr, member))
        entry = self._attr_cache.get(key)
        if entry is None:
            scratch = Node()
            tally = []
            self._attr_rules(attr, member, scratch, factor, tally)
            entry = (scratch.attr[0] if len(scratch.attr) else None, tuple(tally))
            if len(self._attr_cache) < ATTR_CACHE_ENTRIES:
                self._attr_cache[key] = entry
        template, counted = entry
        self._apply(counted)
        if template is not None:
            out.attr.append(template)
            written.add(name)

    def _apply(self, tally: Iterable[tuple[str, str]]) -> None:
        for counter, what in tally:
            getattr(self.report, counter)[what] += 1

    def _attr_rules(
        self, attr: AttributeProto, member: str | None, out: Node, factor: float, tally: list[tuple[str, str]]
    ) -> bool:
        """The rules of the module's docstring for one attribute; what they count goes to ``tally``.
        Returns whether it wrote the attribute to ``out``."""
        name = attr.name
        self._collect(attr, member)
        if attr.doc_string:
            self.inputs.add(attr.doc_string)
            tally.append(("removed", "attribute doc strings"))
        spec = WELL_KNOWN.get(name)
        if spec is None:
            if name not in self.options.keep_attrs:
                self.inputs.add(name)
                tally.append(("dropped_attrs", name))
                return False
            self.generated.add(name)
            self._kept(attr, member, out)
            return True
        if name in TEXT_ATTRS_REMOVED:
            tally.append(("removed", name))
            return False
        value = read_value(spec.kind, member, member_value(attr)) if member is not None else None
        if value is None:
            tally.append(("removed", f"{name} (unreadable)"))
            return False
        if name == "pg_name":
            value = self._group_text(value, tally)
        elif name in THREAD_ATTRS:
            value = self.threads.setdefault(value, len(self.threads) + 1)
        elif name in SIZE_ATTRS:
            value = self.size(value, name, tally)
        elif name in DURATION_ATTRS:
            value = round(value * factor)
        elif spec.kind == KIND_STR_LIST:
            value = [self._list_entry(str(v), tally) for v in value]
            self.generated.update(value)
        try:
            set_attr(out, name, value)
        except AttrKindError:  # a value the canonical member cannot hold (a peer rank past int32)
            tally.append(("removed", f"{name} (out of its kind's range)"))
            return False
        self.generated.add(name)
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

    def _list_entry(self, value: str, tally: list[tuple[str, str]]) -> str:
        """An entry of ``inputs``/``outputs`` (ASTRA-sim's local-memory tracking, [name, size, ...]):
        a size as a number, a buffer name as a token."""
        if value.isdigit():
            return str(self.size(int(value), "tensor_size", tally))
        return self.tokens.token(value)

    def _group_text(self, text: str, tally: list[tuple[str, str]]) -> str:
        try:
            gid = group_id(text)
        except GroupNameError:
            tally.append(("removed", "pg_name (no group id)"))
            return ""
        return "" if gid is None else str(gid)

    def _collect(self, attr: AttributeProto, member: str | None) -> None:
        if member == "string_val":
            self.inputs.add(attr.string_val)
        elif member == "bytes_val":
            self.inputs.add_bytes(attr.bytes_val)
        elif member == "string_list":
            for value in attr.string_list.values:
                self.inputs.add(value)
        elif member == "bytes_list":
            for data in attr.bytes_list.values:
                self.inputs.add_bytes(data)

    def metadata(self, given: GlobalMetadata) -> GlobalMetadata:
        self.inputs.add(given.version)
        for attr in given.attr:
            self.inputs.add(attr.name)
            self._collect(attr, attr.WhichOneof("value"))
            self.report.removed["file metadata attributes"] += 1
        self.generated.add(io.FORMAT_VERSION)
        return GlobalMetadata(version=io.FORMAT_VERSION)


def anonymize_workload(
    workload: PathLike,
    out: PathLike,
    options: AnonymizeOptions,
    *,
    mapping: PathLike | None = None,
    progress: Callable[[int], None] | None = None,
) -> AnonymizeReport:
    """Write the anonymized copy of ``workload`` to ``out`` (``OUT.{rank}.et``, and the groups
    file), then check it for leaks (:attr:`AnonymizeReport.leaks`); with ``mapping`` write the
    tokens' names there (JSON, for the owner). ``progress`` is told each rank written."""
    traces = TraceSet.discover(Path(workload))
    if mapping is not None and not Path(mapping).resolve().parent.is_dir():  # refused before any work
        raise ChakraInputError("the mapping's folder does not exist", path=mapping, hint="create it first")
    report = AnonymizeReport(str(out), ranks=len(traces.ranks))
    anonymizer = _Anonymizer(options, report, _shift_us(traces))
    with WorkloadWriter(out) as writer:
        if traces.comm_groups is not None:
            writer.groups = CommGroups(traces.comm_groups)
        for done, (rank, path) in enumerate(traces.ranks.items(), start=1):
            with io.EtReader(path) as reader:
                metadata = anonymizer.metadata(reader.metadata)
                nodes: Iterable[Node] = (anonymizer.node(node) for node in reader)
                if options.shuffle:
                    nodes = shuffled(list(nodes), anonymizer.random)
                writer.write_nodes(rank, _counted(nodes, report), metadata)
            if progress is not None:
                progress(done)
    report.tokens = len(anonymizer.tokens.mapping)
    if mapping is not None:
        import orjson

        with io.AtomicFile(mapping) as file:
            file.write(orjson.dumps(anonymizer.tokens.mapping, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    written = writer.result.paths if writer.result is not None else {}
    report.strings_checked = len(anonymizer.inputs)
    report.leaks = find_leaks(anonymizer.inputs, list(written.values()), anonymizer.generated)
    return report


def _counted(nodes: Iterable[Node], report: AnonymizeReport) -> Iterator[Node]:
    for node in nodes:
        report.nodes += 1
        yield node


def _shift_us(traces: TraceSet) -> int:
    """What every start is moved back by: the workload's first recorded start, less :data:`FIRST_START_US`."""
    from chakra.chunks import iter_chunks

    firsts = []
    for path in traces.ranks.values():
        _, chunks, _ = iter_chunks(path)  # a buffer at a time: only the starts are wanted
        for chunk in chunks:
            starts = chunk.rows["start_us"]
            timed = starts[starts > 0]
            if len(timed):
                firsts.append(int(timed.min()))
    return min(firsts) - FIRST_START_US if firsts else 0


def shuffled(nodes: list[Node], rng: random.Random) -> list[Node]:
    """``nodes`` in a random order in which every node comes after the nodes it depends on that are
    in the list: the core's topological order of a random permutation (smallest position first);
    nodes on a cycle keep their order, after the rest."""
    from chakra.graph import build_graph, topological_order

    permuted = rng.sample(nodes, len(nodes))
    order = topological_order(build_graph(permuted), strict=False).tolist()
    if len(order) < len(permuted):
        placed = set(order)
        order.extend(i for i in range(len(permuted)) if i not in placed)
    return [permuted[i] for i in order]
