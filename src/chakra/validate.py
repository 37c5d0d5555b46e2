"""Structural and consumer-compatibility checks of Chakra traces. Returns findings, never prints.

:func:`validate_trace` checks one rank; :func:`validate_set` checks every rank of a workload plus
what only shows across ranks (missing rank files, unmatched send/recv pairs, collectives issued
in different orders). ``target="astra-sim"`` adds what that simulator aborts, hangs or silently
misbehaves on (``reference/astra-sim.md`` §2, §7).

Example:
    >>> findings = validate_trace(Trace.load("llama.0.et"), target="astra-sim")   # doctest: +SKIP
    >>> [f for f in findings if f.severity == ERROR]
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chakra import io
from chakra.attrs import WELL_KNOWN, canonical_member_problem, flag_value, int_value
from chakra.errors import ChakraFormatError
from chakra.graph import GraphBuilder, TraceGraph, find_cycle, roots, topological_order
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, CollectiveCommType, GlobalMetadata, Node, NodeType
from chakra.trace import Trace, TraceSet, comm_groups_beside, rank_of

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

TARGETS = ("astra-sim",)

#: Per code, how many findings are listed one by one before the rest are summed up in one line.
DEFAULT_LIMIT_PER_CODE = 20

#: Node ids of a cycle quoted in its message.
CYCLE_IDS_SHOWN = 12

# plain ints: the enum wrapper's attribute lookup is slow in per-node loops
INVALID, METADATA, COLL, SEND, RECV = (
    NodeType.INVALID_NODE,
    NodeType.METADATA_NODE,
    NodeType.COMM_COLL_NODE,
    NodeType.COMM_SEND_NODE,
    NodeType.COMM_RECV_NODE,
)
CANONICAL_MEMBER = {name: spec.member for name, spec in WELL_KNOWN.items()}
COMM_TYPES = frozenset({NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE})
MEM_TYPES = frozenset({NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE})
KNOWN_NODE_TYPES = frozenset(NodeType.values())
KNOWN_COLLECTIVES = frozenset(CollectiveCommType.values())

#: Collectives ASTRA-sim aborts on ("Unsupported collective comm type", astra-sim.md §2.4).
ASTRA_UNSUPPORTED_COLLECTIVES = frozenset(
    {
        CollectiveCommType.REDUCE,
        CollectiveCommType.GATHER,
        CollectiveCommType.SCATTER,
        CollectiveCommType.REDUCE_SCATTER_BLOCK,
        CollectiveCommType.BARRIER,
    }
)

#: ASTRA-sim starts a group's collective tags at ``group_id × 1,000,000`` in a 32-bit int
#: (astra-sim.md §2.5; workload-generators.md §4.3): ids above this overflow.
MAX_ASTRA_GROUP_ID = (2**31 - 1) // 1_000_000


def astra_group_id_note(group_id: int) -> str | None:
    """Why ``group_id`` is too large for ASTRA-sim, or None when it fits."""
    if group_id <= MAX_ASTRA_GROUP_ID:
        return None
    return (
        f"communicator group {group_id} is above {MAX_ASTRA_GROUP_ID}: ASTRA-sim's collective tags "
        f"(group id x 1,000,000) overflow a 32-bit int there"
    )


#: ASTRA-sim strips this many characters from each end of a METADATA node's ``inputs.values``
#: (the Python ``['`` ... ``']`` wrapper) before JSON-parsing the process groups.
PG_WRAPPER_CHARS = 2


@dataclass(frozen=True)
class Finding:
    """One problem: ``severity`` (error/warning/info), a stable ``code``, a message, the node it
    concerns (if any), how to fix it, and the ``rank`` (file) it was found in."""

    severity: str
    code: str
    message: str
    node_id: int | None = None
    hint: str | None = None
    rank: int | None = None
    count: int = 1  # > 1 for a summary line standing for several findings

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class _Collector:
    """Gathers findings, listing at most ``limit`` per code and summing up the rest."""

    rank: int | None
    limit: int | None
    findings: list[Finding] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    overflow: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def add(self, severity: str, code: str, message: str, node_id: int | None = None, hint: str | None = None) -> None:
        self.counts[code] += 1
        if self.limit is not None and self.counts[code] > self.limit:
            self.overflow[code] = (severity, hint)
            return
        self.findings.append(Finding(severity, code, message, node_id, hint, self.rank))

    def result(self) -> list[Finding]:
        out = list(self.findings)
        for code, (severity, hint) in self.overflow.items():
            extra = self.counts[code] - (self.limit or 0)
            out.append(Finding(severity, code, f"... and {extra} more like this", None, hint, self.rank, extra))
        out.sort(key=lambda f: SEVERITY_ORDER[f.severity])
        return out


#: What C++ ``std::stoi`` reads: optional white space and sign, then decimal digits (the rest is ignored).
_STOI_PREFIX = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def astra_group_id(pg_name: str) -> int | None:
    """The communicator group ASTRA-sim uses for a collective's ``pg_name`` (astra-sim.md §2.5).

    ``None`` for the default group (the strings ``""`` and ``"0"``: all ranks); otherwise the
    integer ``std::stoi`` reads (so ``"00"`` is group 0 and ``" 1"`` group 1). Raises
    ``ValueError`` where ``stoi`` throws (no leading digits, or out of int32 range).
    """
    if pg_name in ("", "0"):
        return None
    match = _STOI_PREFIX.match(pg_name)
    if match is None:
        raise ValueError(f"pg_name {pg_name!r} does not start with an integer")
    value = int(match.group())
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"pg_name {pg_name!r} is out of int range")
    return value


def parse_process_groups(values: str) -> dict[int, list[int]]:
    """Process groups of a METADATA node, read the way ASTRA-sim reads them (astra-sim.md §2.5):
    strip the 2+2 wrapper characters, JSON-parse a list of ``{"pg_name": "<int>", "ranks": [...]}``.

    Returns group id -> ranks (empty = all ranks). Raises ``ValueError`` where ASTRA-sim's parse
    fails (it then prints an error and drops the node's remaining groups).
    """
    inner = values[PG_WRAPPER_CHARS:-PG_WRAPPER_CHARS] if len(values) >= 2 * PG_WRAPPER_CHARS else ""
    entries = json.loads(inner)
    if not isinstance(entries, list):
        raise ValueError("expected a JSON list of process groups")
    groups: dict[int, list[int]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("pg_name"), str):
            raise ValueError("each group needs pg_name as a string")
        ranks = entry.get("ranks")
        if not isinstance(ranks, list) or not all(type(r) is int for r in ranks):
            raise ValueError(f"group {entry['pg_name']!r}: ranks must be a list of integers")
        match = _STOI_PREFIX.match(entry["pg_name"])
        if match is None:
            raise ValueError(f"pg_name {entry['pg_name']!r} is not an integer")
        groups[int(match.group())] = ranks
    return groups


def validate_trace(
    trace: Trace,
    *,
    target: str | None = None,
    rank: int | None = None,
    comm_groups: dict[int, list[int]] | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """Check one rank's trace; findings sorted by severity.

    ``rank`` defaults to the rank in the file name; ``comm_groups`` (group id -> ranks) lets the
    ASTRA-sim checks know which ``pg_name`` values are defined besides METADATA nodes.
    """
    return validate_nodes(
        trace.metadata,
        trace.nodes,
        path=trace.path,
        target=target,
        rank=rank,
        comm_groups=comm_groups,
        limit_per_code=limit_per_code,
    )


def validate_nodes(
    metadata: GlobalMetadata,
    nodes: Iterable[Node],
    *,
    path: str | Path | None = None,
    target: str | None = None,
    rank: int | None = None,
    comm_groups: dict[int, list[int]] | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """:func:`validate_trace` over any iterable of nodes, e.g. a streaming :class:`chakra.io.EtReader`:
    the nodes are checked as they come and not kept (memory: the graph arrays only)."""
    return _validate_rank(metadata, nodes, path, target, rank, comm_groups, limit_per_code)[0]


def _validate_rank(
    metadata: GlobalMetadata,
    nodes: Iterable[Node],
    path: str | Path | None,
    target: str | None,
    rank: int | None,
    comm_groups: dict[int, list[int]] | None,
    limit_per_code: int | None,
) -> tuple[list[Finding], _RankSummary]:
    """Findings of one rank and what the cross-rank checks need from it."""
    if target is not None and target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    if rank is None and path is not None:
        rank = rank_of(path)
    out = _Collector(rank, limit_per_code)
    astra = target == "astra-sim"
    builder = GraphBuilder()
    summary = _RankSummary()
    groups_defined = set(comm_groups or {})
    pg_used = _check_nodes(nodes, builder, out, astra, rank, groups_defined, summary)
    graph = builder.build()
    _check_metadata(metadata, graph.num_nodes, out)
    order = _check_structure(graph, out, astra)
    summary.order_collectives(order, graph.num_nodes)
    if astra:
        if path is not None and io.compression_for(path) is not None:
            out.add(
                ERROR,
                "astra-compressed",
                "ASTRA-sim reads plain files only; this one is compressed",
                hint="decompress it (chakra-et reads both; `gunzip`/`zstd -d` also work)",
            )
        for pg in sorted(pg_used - groups_defined):
            out.add(
                ERROR,
                "astra-unknown-group",
                f"pg_name {pg} is used but no communicator group {pg} is defined",
                hint='write PREFIX.comm_groups.json ({"1": [ranks...]}) or a METADATA process-group node',
            )
    return out.result(), summary


def _check_metadata(metadata: GlobalMetadata, num_nodes: int, out: _Collector) -> None:
    if metadata.ByteSize() == 0:
        out.add(
            WARNING,
            "empty-metadata",
            "GlobalMetadata is empty: it is a zero-length record, "
            "which the upstream Python reader takes for end of file (hiding every node)",
            hint="set GlobalMetadata.version (chakra-et's writer does this)",
        )
    if not num_nodes:
        out.add(WARNING, "no-nodes", "the file has no nodes")


def _check_structure(graph: TraceGraph, out: _Collector, astra: bool) -> np.ndarray:
    """Duplicate ids, missing deps, cycles, unreachable nodes; returns the topological order
    (ASTRA-sim's: ties broken by id) of the nodes that can run."""
    for node_id in graph.duplicate_ids:
        out.add(
            ERROR,
            "duplicate-id",
            f"node id {node_id} occurs more than once",
            node_id,
            hint="ids must be unique within a file; the C++ feeders keep only the last one",
        )
    for child_pos, dep_id, kind in graph.missing_deps:
        field_name = "data_deps" if kind == 0 else "ctrl_deps"
        out.add(
            ERROR,
            f"missing-{'data' if kind == 0 else 'ctrl'}-dep",
            f"{field_name} lists id {dep_id}, which is not in the file",
            int(graph.ids[child_pos]),
            hint="drop the edge or re-point it to an existing node; ASTRA-sim refuses the file, the v2 feeder hangs",
        )
    if not graph.num_nodes:
        if astra:
            out.add(ERROR, "astra-no-root", "no nodes: ASTRA-sim aborts with 'No dependancy free nodes found'")
        return np.zeros(0, dtype=np.int64)
    order = topological_order(graph, tie_break="id")
    if len(order) < graph.num_nodes:
        placed = np.zeros(graph.num_nodes, dtype=bool)
        placed[order] = True
        left = np.flatnonzero(~placed)
        cycle = find_cycle(graph, left)
        cycle_ids = [int(graph.ids[p]) for p in cycle]
        shown = " -> ".join(str(i) for i in cycle_ids[:CYCLE_IDS_SHOWN])
        more = " -> ..." if len(cycle_ids) > CYCLE_IDS_SHOWN else ""
        out.add(
            ERROR,
            "cycle",
            f"dependency cycle of {len(cycle_ids)} nodes: {shown}{more} "
            "(each depends on the next, data and ctrl deps together)",
            cycle_ids[0] if cycle_ids else None,
            hint="break the cycle; feeders deadlock on it",
        )
        in_cycle = set(cycle)
        for p in left.tolist():
            if p not in in_cycle:
                out.add(
                    ERROR,
                    "unreachable",
                    "node can never run: it depends (directly or not) on a cycle",
                    int(graph.ids[p]),
                    hint="break the cycle it depends on",
                )
    if len(roots(graph)) == 0 and astra:
        out.add(
            ERROR,
            "astra-no-root",
            "no node without dependencies: ASTRA-sim aborts with "
            "'No dependancy free nodes found, there might be deadlocks'",
        )
    return order


def _check_nodes(
    nodes: Iterable[Node],
    builder: GraphBuilder,
    out: _Collector,
    astra: bool,
    rank: int | None,
    groups_defined: set[int],
    summary: _RankSummary,
) -> set[int]:
    """Per-node checks in one streaming pass, which also feeds ``builder`` and the cross-rank
    ``summary``; returns the group ids that collectives use."""
    pg_used: set[int] = set()
    overlap_breakers = 0
    repeated_here: set[str] = set()
    add = builder.add
    for node in nodes:
        pos = add(node)
        node_id = node.id
        ntype = node.type
        if node_id == 0 and ntype == INVALID and not node.name and node.ByteSize() == 0:
            out.add(
                WARNING,
                "empty-record",
                "node is all defaults (id 0, no name, INVALID_NODE): a "
                "zero-length record, which the upstream Python reader takes for end of file",
                node_id,
                hint="give the node a name and type, or drop it",
            )
        if ntype not in KNOWN_NODE_TYPES:
            out.add(
                ERROR,
                "unknown-node-type",
                f"node type {ntype} is not a NodeType",
                node_id,
                hint="ASTRA-sim exits with 'Unknown node type'",
            )
        # one pass over the attributes: first of each name (what FeederV3 reads), repeats, kinds
        attrs: dict[str, AttributeProto] = {}
        for attr in node.attr:
            name = attr.name
            if name in attrs:
                if name not in repeated_here:
                    repeated_here.add(name)
                    out.add(
                        WARNING,
                        "duplicate-attr",
                        f"attribute {name!r} appears more than once; FeederV3 reads the first, the v2 feeder the last",
                        node_id,
                        hint="write each attribute once (chakra.attrs.set_attr)",
                    )
                continue
            attrs[name] = attr
            canonical = CANONICAL_MEMBER.get(name)
            if canonical is not None and attr.WhichOneof("value") not in (canonical, None):
                problem = canonical_member_problem(attr)
                if problem is not None:
                    severity, why = problem
                    out.add(
                        severity, "attr-kind", f"attribute {name!r} {why}", node_id, hint=f"write {name} as {canonical}"
                    )
        if repeated_here:
            repeated_here = set()
        is_cpu = attrs.get("is_cpu_op")
        cpu_flag = is_cpu is not None and flag_value(is_cpu)
        if ntype in COMM_TYPES:
            if cpu_flag:
                out.add(
                    ERROR,
                    "comm-on-cpu",
                    f"{NodeType.Name(ntype)} is marked is_cpu_op=true",
                    node_id,
                    hint="communication runs on the device: set is_cpu_op=false (ASTRA-sim aborts otherwise)",
                )
            if "comm_size" not in attrs:
                out.add(
                    ERROR,
                    "comm-missing-attr",
                    f"{NodeType.Name(ntype)} has no comm_size",
                    node_id,
                    hint="set comm_size (bytes, int64_val)",
                )
        if ntype == COLL:
            _check_collective(node, attrs, out, astra, pg_used)
            summary.note_collective(pos, attrs)
        elif ntype in (SEND, RECV):
            _check_p2p(node, attrs, out, astra, rank)
            if rank is not None:
                summary.note_p2p(ntype == SEND, rank, attrs)
        elif ntype == METADATA:
            summary.groups.update(_check_metadata_node(node, out, astra, groups_defined))
        elif ntype in MEM_TYPES and astra and "tensor_size" not in attrs:
            out.add(
                ERROR,
                "astra-missing-attr",
                f"{NodeType.Name(ntype)} has no tensor_size",
                node_id,
                hint="set tensor_size (bytes, uint64_val); FeederV3 throws 'Attribute tensor_size not found'",
            )
        if cpu_flag or ntype in MEM_TYPES or ntype == INVALID:
            overlap_breakers += 1
    if astra and overlap_breakers:
        out.add(
            INFO,
            "astra-overlap-stats",
            f"{overlap_breakers} CPU, memory or INVALID nodes: ASTRA-sim's "
            "overlap statistics throw after this rank finished",
            hint="harmless for the simulated times; expect the exception at the end of the run",
        )
    return pg_used


def _check_collective(
    node: Node, attrs: dict[str, AttributeProto], out: _Collector, astra: bool, pg_used: set[int]
) -> None:
    node_id = node.id
    if "comm_type" not in attrs:
        out.add(
            ERROR,
            "comm-missing-attr",
            "COMM_COLL_NODE has no comm_type",
            node_id,
            hint="set comm_type (CollectiveCommType value, int64_val)",
        )
        return
    comm_type = int_value(attrs["comm_type"])  # None for another family: reported as attr-kind
    if comm_type is None:
        return
    if comm_type not in KNOWN_COLLECTIVES:
        out.add(ERROR, "unknown-collective", f"comm_type {comm_type} is not a CollectiveCommType", node_id)
        return
    if not astra:
        return
    if comm_type in ASTRA_UNSUPPORTED_COLLECTIVES:
        out.add(
            ERROR,
            "astra-unsupported-collective",
            f"{CollectiveCommType.Name(comm_type)} is not simulated by ASTRA-sim ('Unsupported collective comm type')",
            node_id,
            hint="express it with supported collectives or send/recv",
        )
    if comm_type == CollectiveCommType.BROADCAST and node.duration_micros == 0:
        out.add(
            WARNING,
            "astra-broadcast-replay",
            "ASTRA-sim replays BROADCAST for duration_micros, which is 0 here (1 ns)",
            node_id,
            hint="set duration_micros to the measured time",
        )
    pg_attr = attrs.get("pg_name")
    if pg_attr is None or pg_attr.WhichOneof("value") != "string_val":
        return  # absent: default group; another member is reported as attr-kind
    try:
        group = astra_group_id(pg_attr.string_val)
    except ValueError as exc:
        out.add(
            ERROR,
            "astra-pg-name",
            f"{exc}; ASTRA-sim throws from stoi",
            node_id,
            hint="map process groups to ids 1, 2, ... and write a comm groups file",
        )
        return
    if group is not None:
        pg_used.add(group)
        too_large = astra_group_id_note(group)
        if too_large is not None:
            out.add(WARNING, "astra-group-id", too_large, node_id, hint="renumber the groups densely from 1")


def _check_p2p(node: Node, attrs: dict[str, AttributeProto], out: _Collector, astra: bool, rank: int | None) -> None:
    node_id = node.id
    is_send = node.type == NodeType.COMM_SEND_NODE
    peer = "comm_dst" if is_send else "comm_src"
    own = "comm_src" if is_send else "comm_dst"
    if peer not in attrs:
        out.add(
            ERROR,
            "p2p-missing-peer",
            f"{NodeType.Name(node.type)} has no {peer}",
            node_id,
            hint=f"set {peer} (peer rank, int32_val)",
        )
    if not astra:
        return
    if "comm_tag" not in attrs:
        out.add(
            ERROR,
            "astra-missing-attr",
            f"{NodeType.Name(node.type)} has no comm_tag",
            node_id,
            hint="set comm_tag (int32_val); FeederV3 throws 'Attribute comm_tag not found'",
        )
    own_value = int_value(attrs[own]) if own in attrs else None
    if rank is not None and own_value is not None and own_value != rank:
        role = "sender" if is_send else "receiver"
        out.add(
            ERROR,
            "astra-p2p-own-rank",
            f"{own}={own_value} but this file is rank {rank}; ASTRA-sim requires the {role}'s own rank there",
            node_id,
            hint=f"set {own}={rank} or leave it out",
        )


def _check_metadata_node(node: Node, out: _Collector, astra: bool, groups_defined: set[int]) -> dict[int, list[int]]:
    """Checks a METADATA node's process groups; returns them (group id -> ranks)."""
    values = node.inputs.values
    if not values:
        return {}
    try:
        groups = parse_process_groups(values)
    except (ValueError, json.JSONDecodeError) as exc:
        out.add(
            ERROR if astra else WARNING,
            "metadata-parse",
            f"METADATA inputs.values do not parse as process groups ({exc})",
            node.id,
            hint='keep the Python [\'...\'] wrapper around a JSON list of {"pg_name": "<int>", "ranks": [...]} '
            "byte-exact; ASTRA-sim drops the groups otherwise",
        )
        return {}
    groups_defined.update(groups)
    if astra:
        out.add(
            INFO,
            "astra-metadata-node",
            "METADATA nodes hit an assert(false) in ASTRA-sim builds with "
            "assertions (statistics have no class for them)",
            node.id,
            hint="use a release build, or move the groups to a comm groups file",
        )
    return groups


# --------------------------------------------------------------------------------------------
# Files and whole workloads


def validate_file(
    path: str | Path,
    *,
    target: str | None = None,
    comm_groups: dict[int, list[int]] | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """Check one file, streaming it; a file that does not parse is one ``format`` error finding.

    Without ``comm_groups``, the workload's ``PREFIX.comm_groups.json`` beside a ``PREFIX.{rank}.et``
    file is used when it exists.
    """
    if comm_groups is None:
        comm_groups = comm_groups_beside(path)
    findings, _ = _validate_file(path, target, rank_of(path), comm_groups, limit_per_code)
    return findings


def _validate_file(
    path: str | Path,
    target: str | None,
    rank: int | None,
    comm_groups: dict[int, list[int]] | None,
    limit_per_code: int | None,
) -> tuple[list[Finding], _RankSummary | None]:
    try:
        with io.EtReader(path) as reader:
            return _validate_rank(reader.metadata, reader, path, target, rank, comm_groups, limit_per_code)
    except ChakraFormatError as exc:
        where = ""
        if exc.offset is not None:
            record = f"node #{exc.node_index}" if exc.node_index is not None else "GlobalMetadata record"
            where = f" (byte {exc.offset}, {record})"
        return [Finding(ERROR, "format", exc.message + where, None, exc.hint, rank)], None


#: Label of the default communicator (all ranks) in cross-rank findings.
DEFAULT_GROUP = "all ranks"


def _group_label(pg_name: str) -> str:
    """How cross-rank checks key a collective's group: its ASTRA-sim group id, or the raw name."""
    try:
        group = astra_group_id(pg_name)
    except ValueError:
        return pg_name
    return DEFAULT_GROUP if group is None else str(group)


@dataclass
class _RankSummary:
    """What cross-rank checks need from one rank, kept small so ranks can be checked one at a time."""

    sends: Counter[tuple[int, int, int, int]] = field(default_factory=Counter)  # (src, dst, tag, size)
    recvs: Counter[tuple[int, int, int, int]] = field(default_factory=Counter)
    # group label -> (comm_type, comm_size) in issue order, filled by order_collectives()
    collectives: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    groups: dict[int, list[int]] = field(default_factory=dict)  # defined by METADATA nodes
    _seen: list[tuple[int, str, int, int]] = field(default_factory=list)  # (position, label, type, size)

    def note_collective(self, pos: int, attrs: dict[str, AttributeProto]) -> None:
        comm_type = int_value(attrs["comm_type"]) if "comm_type" in attrs else None
        size = int_value(attrs["comm_size"]) if "comm_size" in attrs else None
        if comm_type is None or size is None:
            return  # reported by the per-rank checks
        pg = attrs.get("pg_name")
        label = _group_label(pg.string_val if pg is not None and pg.WhichOneof("value") == "string_val" else "")
        self._seen.append((pos, label, comm_type, size))

    def note_p2p(self, is_send: bool, rank: int, attrs: dict[str, AttributeProto]) -> None:
        peer_attr = attrs.get("comm_dst" if is_send else "comm_src")
        size = int_value(attrs["comm_size"]) if "comm_size" in attrs else None
        peer = int_value(peer_attr) if peer_attr is not None else None
        tag = int_value(attrs["comm_tag"]) if "comm_tag" in attrs else 0
        if peer is None or size is None or tag is None:
            return
        if is_send:
            self.sends[(rank, peer, tag, size)] += 1
        else:
            self.recvs[(peer, rank, tag, size)] += 1

    def order_collectives(self, order: np.ndarray, num_nodes: int) -> None:
        """Sort the collectives seen into issue order (``order``: topological, ties by id);
        nodes that can never run (behind a cycle) go last."""
        issue_rank = np.full(num_nodes, num_nodes, dtype=np.int64)
        issue_rank[order] = np.arange(len(order))
        for _, label, comm_type, size in sorted(self._seen, key=lambda c: (issue_rank[c[0]], c[0])):
            self.collectives[label].append((comm_type, size))
        self._seen = []


def iter_validate_set(
    workload: TraceSet, *, target: str | None = None, limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE
) -> Iterator[tuple[int | None, list[Finding]]]:
    """Validate a workload rank by rank, yielding ``(rank, findings)``; the last item has rank ``None``
    and holds the cross-rank findings. Each rank is streamed: no trace is held in memory."""
    summaries: dict[int, _RankSummary] = {}
    for rank, path in workload.ranks.items():
        findings, summary = _validate_file(path, target, rank, workload.comm_groups, limit_per_code)
        if summary is not None:
            summaries[rank] = summary
        yield rank, findings
    yield None, _cross_rank_findings(workload, summaries, target, limit_per_code)


def validate_set(
    workload: TraceSet, *, target: str | None = None, limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE
) -> list[Finding]:
    """All findings of every rank of ``workload`` plus the cross-rank ones."""
    return [
        f for _, findings in iter_validate_set(workload, target=target, limit_per_code=limit_per_code) for f in findings
    ]


def _cross_rank_findings(
    workload: TraceSet, summaries: dict[int, _RankSummary], target: str | None, limit: int | None
) -> list[Finding]:
    out = _Collector(None, limit)
    missing = workload.missing_ranks
    if missing:
        severity = ERROR if target == "astra-sim" else WARNING
        out.add(
            severity,
            "missing-rank",
            f"no file for rank(s) {', '.join(map(str, missing))}",
            hint="ASTRA-sim opens PREFIX.{rank}.et for every NPU",
        )
    sends: Counter[tuple[int, int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int, int]] = Counter()
    for summary in summaries.values():
        sends.update(summary.sends)
        recvs.update(summary.recvs)
    for key in sorted(set(sends) | set(recvs)):
        diff = sends[key] - recvs[key]
        if diff:
            src, dst, tag, size = key
            what = "send(s) without a matching receive" if diff > 0 else "receive(s) without a matching send"
            out.add(
                ERROR,
                "unmatched-p2p",
                f"{abs(diff)} {what}: rank {src} -> rank {dst}, tag {tag}, {size} bytes",
                hint="send and receive must agree on peer, tag and size, or the run hangs",
            )
    by_group: dict[str, dict[int, list[tuple[int, int]]]] = defaultdict(dict)
    defined: dict[int, list[int]] = {}
    for rank, summary in summaries.items():
        defined.update(summary.groups)
        for label, seq in summary.collectives.items():
            by_group[label][rank] = seq
    defined.update(workload.comm_groups or {})  # the groups file wins, as in ASTRA-sim
    all_ranks = sorted(summaries)
    for label, per_rank in sorted(by_group.items()):
        members = defined.get(int(label)) if label.lstrip("-").isdigit() else None
        expected = all_ranks if not members else [r for r in sorted(members) if r in summaries]
        for r in sorted(set(per_rank) - set(expected)):
            out.add(
                ERROR,
                "collective-non-member",
                f"rank {r} issues collectives on group {label}, which does not include it",
                hint="a rank may only issue collectives of its own groups",
            )
        reference_rank = next((r for r in expected if r in per_rank), None)
        if reference_rank is None:
            continue
        reference = per_rank[reference_rank]
        for r in expected:
            seq = per_rank.get(r, [])
            if seq != reference:
                detail = "" if len(seq) != len(reference) else " (same count, different types, sizes or order)"
                out.add(
                    ERROR,
                    "collective-mismatch",
                    f"group {label}: rank {r} issues {len(seq)} collectives, rank {reference_rank} "
                    f"{len(reference)}{detail}",
                    hint="every member must issue a group's collectives in the same order (by dependencies, "
                    "then ascending node id) with matching sizes, or the simulation hangs",
                )
    return out.result()


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``, counting summary lines by what they stand for."""
    counts = {ERROR: 0, WARNING: 0, INFO: 0}
    for f in findings:
        counts[f.severity] += f.count
    return counts
