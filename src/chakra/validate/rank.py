"""The checks of one rank, over its node table (:mod:`chakra.table`): structure, attribute kinds,
what each node type needs, and with ``target="astra-sim"`` what that simulator aborts or hangs on
(``reference/astra-sim.md`` §2, §7). Checks over every node are vectorized: a million-node file costs
a few array passes, and only the findings that are listed build a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from chakra import io
from chakra.attrs import READABLE, WELL_KNOWN, member_problem
from chakra.graph import TieBreak, cycle_text, find_cycle, roots, topological_order
from chakra.groups import GroupNameError, astra_group_id_note, group_id, parse_process_groups
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, NodeType
from chakra.table import DEFAULT_GROUP_ID, INVALID_GROUP_ID, MISSING, NodeTable
from chakra.validate.findings import ADAPT_FIX, ERROR, INFO, WARNING, Collector

INVALID, METADATA, COLL, SEND, RECV = (
    NodeType.INVALID_NODE,
    NodeType.METADATA_NODE,
    NodeType.COMM_COLL_NODE,
    NodeType.COMM_SEND_NODE,
    NodeType.COMM_RECV_NODE,
)
COMM_TYPES = (COLL, SEND, RECV)
MEM_TYPES = (NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE)
KNOWN_NODE_TYPES = tuple(NodeType.values())
KNOWN_COLLECTIVES = tuple(CollectiveCommType.values())

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
#: Label of the default communicator (all ranks) in cross-rank findings.
DEFAULT_GROUP = "all ranks"


@dataclass
class RankSummary:
    """What the cross-rank checks need from one rank, kept small so ranks can be checked one at a time:
    transfers as ``(src, dst, tag, size)`` counts, each group's collectives as ``(comm_type, size)`` in
    ASTRA-sim's issue order, and the groups METADATA nodes define."""

    sends: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    recvs: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    collectives: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: per default-group collective in issue order, how many collectives of other groups came before it
    #: (broadcasts, which ASTRA-sim replays, left out)
    world_after: tuple[int, ...] = ()
    #: --target custom-collective (chakra.validate.custom): the highest algorithm rank a message names,
    #: the bytes the rank receives, and the collective and size its metadata names
    highest_peer: int = -1
    received_bytes: int = 0
    collective: tuple[str, int] | None = None


def pg_label(group: int, pg_name: str) -> str:
    """How cross-rank checks key a collective's group: its ASTRA-sim id, the default, or the raw name."""
    if group == DEFAULT_GROUP_ID:
        return DEFAULT_GROUP
    return pg_name if group == INVALID_GROUP_ID else str(group)


def check_rank(
    table: NodeTable,
    out: Collector,
    *,
    astra: bool,
    rank: int | None,
    groups_defined: set[int],
    path: str | None = None,
) -> RankSummary:
    """Every per-rank check of ``table``, into ``out``; returns what the cross-rank checks need."""
    summary = RankSummary()
    _check_metadata(table, out)
    order = _check_structure(table, out, astra)
    _check_attributes(table, out)
    _check_communication(table, out, astra, rank)
    pg_used = _check_collectives(table, out, astra)
    summary.groups = _check_metadata_nodes(table, out, astra)
    groups_defined |= set(summary.groups)
    _check_memory_and_overlap(table, out, astra)
    if astra:
        if path is not None and io.compression_for(path) is not None:
            out.add(
                ERROR,
                "astra-compressed",
                "ASTRA-sim reads plain files only; this one is compressed",
                hint=f"decompress it (`gunzip`/`zstd -d`), or {ADAPT_FIX}, which writes plain files",
            )
        for pg in sorted(pg_used - groups_defined):
            out.add(
                ERROR,
                "astra-unknown-group",
                f"pg_name {pg} is used but no communicator group {pg} is defined",
                hint='write PREFIX.comm_groups.json ({"1": [ranks...]}) or a METADATA process-group node',
            )
    if rank is not None:
        _note_transfers(table, summary, rank)
    _note_collectives(table, summary, order)
    return summary


def _check_metadata(table: NodeTable, out: Collector) -> None:
    if table.metadata.ByteSize() == 0:
        out.add(
            WARNING,
            "empty-metadata",
            "GlobalMetadata is empty: it is a zero-length record, "
            "which the upstream Python reader takes for end of file (hiding every node)",
            hint="set GlobalMetadata.version (chakra-et's writer does this)",
        )
    if not len(table):
        out.add(WARNING, "no-nodes", "the file has no nodes")


def _check_structure(table: NodeTable, out: Collector, astra: bool) -> np.ndarray:
    """Duplicate ids, missing deps, cycles, unreachable nodes; returns the topological order
    (ASTRA-sim's: ties broken by id) of the nodes that can run."""
    graph = table.graph
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
            hint="drop the edge or re-point it to an existing node (ASTRA-sim refuses the file, the v2 feeder "
            f"hangs); {ADAPT_FIX} drops such edges",
        )
    if not graph.num_nodes:
        if astra:
            out.add(ERROR, "astra-no-root", "no nodes: ASTRA-sim aborts with 'No dependancy free nodes found'")
        return np.zeros(0, dtype=np.int64)
    order = topological_order(graph, tie_break=TieBreak.ID, strict=False)
    if len(order) < graph.num_nodes:
        placed = np.zeros(graph.num_nodes, dtype=bool)
        placed[order] = True
        left = np.flatnonzero(~placed)
        cycle = find_cycle(graph, left)
        cycle_ids = graph.ids[cycle].tolist()
        out.add(
            ERROR,
            "cycle",
            cycle_text(cycle_ids),
            cycle_ids[0] if cycle_ids else None,
            hint=f"break the cycle (feeders deadlock on it); {ADAPT_FIX} breaks every cycle at a named edge",
        )
        behind = np.setdiff1d(left, np.asarray(cycle, dtype=np.int64))
        out.add_each(
            ERROR,
            "unreachable",
            graph.ids[behind].tolist(),
            lambda k: "node can never run: it depends (directly or not) on a cycle",
            hint=f"break the cycle it depends on ({ADAPT_FIX} does)",
        )
    if len(roots(graph)) == 0 and astra:
        out.add(
            ERROR,
            "astra-no-root",
            "no node without dependencies: ASTRA-sim aborts with "
            "'No dependancy free nodes found, there might be deadlocks'",
            hint=f"every node waits on a cycle or a missing node; {ADAPT_FIX} breaks cycles and drops such edges",
        )
    return order


def _check_attributes(table: NodeTable, out: Collector) -> None:
    """Empty records, unknown node types, repeated names, attributes outside their canonical member."""
    ids = table.ids
    empty = table.empty_records
    out.add_each(
        WARNING,
        "empty-record",
        ids[empty].tolist(),
        lambda k: (
            "node is all defaults (id 0, no name, INVALID_NODE): a "
            "zero-length record, which the upstream Python reader takes for end of file"
        ),
        hint="give the node a name and type, or drop it",
    )
    unknown = np.flatnonzero(~np.isin(table.node_type, KNOWN_NODE_TYPES))
    types = table.node_type[unknown].tolist()
    out.add_each(
        ERROR,
        "unknown-node-type",
        ids[unknown].tolist(),
        lambda k: f"node type {types[k]} is not a NodeType",
        hint="ASTRA-sim exits with 'Unknown node type'",
    )
    problems = table.problems
    if problems is None:
        return
    for pos, name in zip(problems.repeated_pos.tolist(), problems.repeated_name, strict=True):
        out.add(
            WARNING,
            "duplicate-attr",
            f"attribute {name!r} appears more than once; FeederV3 reads the first, the v2 feeder the last",
            int(ids[pos]),
            hint="write each attribute once (chakra.attrs.set_attr)",
        )
    for pos, name, member in zip(problems.kind_pos.tolist(), problems.kind_name, problems.kind_member, strict=True):
        problem = member_problem(name, member)
        if problem is not None:
            severity, why = problem
            canonical = WELL_KNOWN[name].member
            fix = f"write {name} as {canonical}"
            if member in READABLE[WELL_KNOWN[name].kind]:
                fix += f" ({ADAPT_FIX} rewrites it)"
            out.add(severity, "attr-kind", f"attribute {name!r} {why}", int(ids[pos]), hint=fix)


def _absent(table: NodeTable, positions: np.ndarray, values: np.ndarray, name: str) -> np.ndarray:
    """``positions`` whose ``values`` are :data:`MISSING` because the attribute is not there at all (an
    unreadable one is reported as ``attr-kind`` instead)."""
    missing = positions[values == MISSING]
    if not len(missing) or table.problems is None:
        return missing
    unreadable = {pos for pos, attr in table.problems.unreadable() if attr == name}
    return np.array([p for p in missing.tolist() if p not in unreadable], dtype=np.int64)


def _each(out: Collector, table: NodeTable, severity: str, code: str, positions: np.ndarray,
          message: Callable[[int], str], hint: str) -> None:  # fmt: skip
    out.add_each(severity, code, table.ids[positions].tolist(), message, hint=hint)


def _split_on_cpu(table: NodeTable, positions: np.ndarray, fix: str) -> list[tuple[np.ndarray, str]]:
    """``positions`` of communication nodes lacking an attribute, with their fix: those marked
    ``is_cpu_op`` are host ops typed as communication, which ``chakra adapt`` makes CPU compute."""
    on_cpu = table.is_cpu[positions]
    return [
        (positions[~on_cpu], fix),
        (positions[on_cpu], f"{fix}; or, a host op typed as communication, {ADAPT_FIX} makes it CPU compute"),
    ]


def _check_communication(table: NodeTable, out: Collector, astra: bool, rank: int | None) -> None:
    """What every communication node needs: no CPU flag, a size; peers and tags for transfers."""
    comm = table.comm
    types = table.node_type[comm.pos]
    names = {t: NodeType.Name(t) for t in COMM_TYPES}
    on_cpu = comm.pos[table.is_cpu[comm.pos]]
    cpu_types = table.node_type[on_cpu].tolist()
    _each(out, table, ERROR, "comm-on-cpu", on_cpu, lambda k: f"{names[cpu_types[k]]} is marked is_cpu_op=true",
          f"communication runs on the device: set is_cpu_op=false (ASTRA-sim aborts otherwise); {ADAPT_FIX} "
          "moves it, or makes a host op without communication attributes CPU compute")  # fmt: skip
    sizeless = _absent(table, comm.pos, comm.size, "comm_size")
    for lacking, fix in _split_on_cpu(table, sizeless, "set comm_size (bytes, int64_val)"):
        what = [f"{names[t]} has no comm_size" for t in table.node_type[lacking].tolist()]
        _each(out, table, ERROR, "comm-missing-attr", lacking, what.__getitem__, fix)
    for node_type in (SEND, RECV):
        at = np.flatnonzero(types == node_type)
        if len(at):
            _check_transfers(table, out, astra, rank, node_type, at)


def _check_transfers(
    table: NodeTable, out: Collector, astra: bool, rank: int | None, node_type: int, at: np.ndarray
) -> None:
    """Sends (or receives) ``at`` (indices into the communication columns): peer, tag, own rank."""
    comm = table.comm
    what = NodeType.Name(node_type)
    is_send = node_type == SEND
    peer, own = ("comm_dst", "comm_src") if is_send else ("comm_src", "comm_dst")
    pos = comm.pos[at]
    peers, owns = (comm.dst[at], comm.src[at]) if is_send else (comm.src[at], comm.dst[at])
    no_peer = _absent(table, pos, peers, peer)
    _each(out, table, ERROR, "p2p-missing-peer", no_peer, lambda k: f"{what} has no {peer}",
          f"set {peer} (peer rank, int32_val)")  # fmt: skip
    if not astra:
        return
    no_tag = _absent(table, pos, comm.tag[at], "comm_tag")
    _each(out, table, ERROR, "astra-missing-attr", no_tag, lambda k: f"{what} has no comm_tag",
          "set comm_tag (int32_val); FeederV3 throws 'Attribute comm_tag not found'")  # fmt: skip
    if rank is None:
        return
    foreign = np.flatnonzero((owns != MISSING) & (owns != rank))
    values = owns[foreign].tolist()
    role = "sender" if is_send else "receiver"
    _each(
        out, table, ERROR, "astra-p2p-own-rank", pos[foreign],
        lambda k: f"{own}={values[k]} but this file is rank {rank}; ASTRA-sim requires the {role}'s own rank there",
        f"set {own}={rank} or leave it out",
    )  # fmt: skip


def _check_collectives(table: NodeTable, out: Collector, astra: bool) -> set[int]:
    """Collective types and groups; returns the group ids the collectives use."""
    comm = table.comm
    at = np.flatnonzero(table.node_type[comm.pos] == COLL)
    pos, kinds = comm.pos[at], comm.kind[at]
    typeless = _absent(table, pos, kinds, "comm_type")
    for lacking, fix in _split_on_cpu(table, typeless, "set comm_type (CollectiveCommType value, int64_val)"):
        _each(out, table, ERROR, "comm-missing-attr", lacking, lambda k: "COMM_COLL_NODE has no comm_type", fix)
    typed = kinds != MISSING
    unknown = typed & ~np.isin(kinds, KNOWN_COLLECTIVES)
    unknown_kinds = kinds[unknown].tolist()
    _each(out, table, ERROR, "unknown-collective", pos[unknown],
          lambda k: f"comm_type {unknown_kinds[k]} is not a CollectiveCommType", "")  # fmt: skip
    if not astra:
        return set()
    known = typed & ~unknown
    unsupported = known & np.isin(kinds, list(ASTRA_UNSUPPORTED_COLLECTIVES))
    names = [CollectiveCommType.Name(int(k)) for k in kinds[unsupported].tolist()]
    _each(out, table, ERROR, "astra-unsupported-collective", pos[unsupported],
          lambda k: f"{names[k]} is not simulated by ASTRA-sim ('Unsupported collective comm type')",
          f"{ADAPT_FIX} writes it as the collective ASTRA-sim simulates with the same traffic")  # fmt: skip
    silent = known & (kinds == CollectiveCommType.BROADCAST) & (table.graph.dur_us[pos] == 0)
    _each(out, table, WARNING, "astra-broadcast-replay", pos[silent],
          lambda k: "ASTRA-sim replays BROADCAST for duration_micros, which is 0 here (1 ns)",
          "set duration_micros to the measured time")  # fmt: skip
    used: set[int] = set()
    for k in at[known].tolist():
        group = int(comm.group[k])
        node_id = int(table.ids[comm.pos[k]])
        if group == INVALID_GROUP_ID:
            try:
                group_id(comm.pg_name[k])
            except GroupNameError as error:
                out.add(ERROR, "astra-pg-name", f"{error.message}; ASTRA-sim throws from stoi", node_id, error.hint)
            continue
        if group == DEFAULT_GROUP_ID:
            continue
        used.add(group)
        too_large = astra_group_id_note(group)
        if too_large is not None:
            out.add(WARNING, "astra-group-id", too_large, node_id, hint="renumber the groups densely from 1")
    return used


def _check_metadata_nodes(table: NodeTable, out: Collector, astra: bool) -> dict[int, tuple[int, ...]]:
    """The process groups of the METADATA nodes (ASTRA-sim's parse); returns group id -> ranks. For
    ASTRA-sim, METADATA and INVALID nodes are errors: each finishes without an event, so what it
    releases is never issued when nothing else of the rank is pending, and a METADATA node aborts
    builds with assertions (reference/astra-sim.md §2.2, §7; seen in its analytical builds)."""
    groups: dict[int, tuple[int, ...]] = {}
    for node in table.metadata_nodes.values():
        values = node.inputs.values
        if astra:
            out.add(
                ERROR,
                "astra-metadata-node",
                "METADATA node: ASTRA-sim builds with assertions abort on it (statistics have no class for it), "
                "release builds stop issuing the nodes after it",
                node.id,
                hint=f"{ADAPT_FIX}: removes it and moves its process groups to the comm groups file",
            )
        if not values:
            continue
        try:
            found = parse_process_groups(values)
        except (ValueError, json.JSONDecodeError) as exc:
            out.add(
                ERROR if astra else WARNING,
                "metadata-parse",
                f"METADATA inputs.values do not parse as process groups ({exc})",
                node.id,
                hint='keep the Python [\'...\'] wrapper around a JSON list of {"pg_name": "<int>", "ranks": [...]} '
                "byte-exact; ASTRA-sim drops the groups otherwise",
            )
            continue
        groups.update(found)
    if astra:
        invalid = np.flatnonzero(table.node_type == INVALID)
        _each(out, table, ERROR, "astra-invalid-node", invalid,
              lambda k: "INVALID node: ASTRA-sim finishes it without an event and may never issue what it releases",
              f"{ADAPT_FIX}: removes it (its dependents wait for its dependencies)")  # fmt: skip
    return groups


def _check_memory_and_overlap(table: NodeTable, out: Collector, astra: bool) -> None:
    if not astra:
        return
    memory = np.flatnonzero(np.isin(table.node_type, MEM_TYPES))
    sizeless = _absent(table, memory, table.tensor_size[memory], "tensor_size")
    names = [NodeType.Name(int(t)) for t in table.node_type[sizeless].tolist()]
    _each(out, table, ERROR, "astra-missing-attr", sizeless, lambda k: f"{names[k]} has no tensor_size",
          "set tensor_size (bytes, uint64_val); FeederV3 throws 'Attribute tensor_size not found'")  # fmt: skip
    breakers = int(np.count_nonzero(table.is_cpu | np.isin(table.node_type, (*MEM_TYPES, INVALID))))
    if breakers:
        out.add(
            INFO,
            "astra-overlap-stats",
            f"{breakers} CPU, memory or INVALID nodes: ASTRA-sim's overlap statistics throw after this rank finished",
            hint="harmless for the simulated times; expect the exception at the end of the run",
        )


def _note_transfers(table: NodeTable, summary: RankSummary, rank: int) -> None:
    """Each send and receive as ``(src, dst, tag, size)``, a missing tag reading 0 (as the simulator)."""
    comm = table.comm
    types = table.node_type[comm.pos]
    for node_type, counts in ((SEND, summary.sends), (RECV, summary.recvs)):
        at = np.flatnonzero(types == node_type)
        peers = comm.dst[at] if node_type == SEND else comm.src[at]
        sizes, tags = comm.size[at], np.where(comm.tag[at] == MISSING, 0, comm.tag[at])
        usable = (peers != MISSING) & (sizes != MISSING)
        for peer, tag, size in zip(peers[usable].tolist(), tags[usable].tolist(), sizes[usable].tolist(), strict=True):
            key = (rank, peer, tag, size) if node_type == SEND else (peer, rank, tag, size)
            counts[key] = counts.get(key, 0) + 1


def _note_collectives(table: NodeTable, summary: RankSummary, order: np.ndarray) -> None:
    """Each group's collectives in issue order (``order``: topological, ties by id); nodes that can
    never run (behind a cycle) go last."""
    comm = table.comm
    n = len(table)
    at = np.flatnonzero((table.node_type[comm.pos] == COLL) & (comm.kind != MISSING) & (comm.size != MISSING))
    issue_rank = np.full(n, n, dtype=np.int64)
    issue_rank[order] = np.arange(len(order))
    pos = comm.pos[at]
    at = at[np.lexsort((pos, issue_rank[pos]))]
    others, world_after = 0, []
    for k in at.tolist():
        label = pg_label(int(comm.group[k]), comm.pg_name[k])
        kind = int(comm.kind[k])
        summary.collectives.setdefault(label, []).append((kind, int(comm.size[k])))
        if kind == CollectiveCommType.BROADCAST:
            continue  # replayed: ASTRA-sim sends no message and counts no tag for it
        if label == DEFAULT_GROUP:
            world_after.append(others)
        else:
            others += 1
    summary.world_after = tuple(world_after)
