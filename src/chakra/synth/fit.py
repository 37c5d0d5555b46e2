"""Learning a synthetic-workload model (:mod:`chakra.synth.model`) from real workloads.

:func:`fit_workload` reads every rank's node table (in worker processes, through
:meth:`chakra.workload.Workload.map`) and turns each node into a *symbol*: its class (node
type, coarse operator class, CPU or device, collective type, power of two of its size), its track
(threads and streams renumbered in order of appearance), its collective bytes, group slot and peer
offset, and how many positions back its parents are. Then:

* **motifs**: each rank's symbols as nested tandem repeats (:func:`chakra.synth.motifs.tandem_grammar`);
  a top-level repeat covering at least :data:`STEP_SHARE` of the rank is the *step*, the innermost
  repeats with at least :data:`MIN_LAYER_COMPUTE` compute nodes are *layers*;
* **alike ranks**: ranks with the same symbols (so the same structure up to which groups and peers
  they talk to) share one program; each rank keeps which groups its slots stand for;
* **distributions**: per class and phase of the step (:data:`PHASES`), the (duration, FLOPs,
  bytes) of its nodes, pooled over alike ranks and over every source given; the structure comes
  from the first source;
* **data-parallel axis**: the groups that partition the ranks into arithmetic progressions of alike
  ranks, the one of largest stride (data parallelism sits outside tensor parallelism); a workload
  whose collectives all run on the default group is data-parallel across all of its ranks.

Dependencies on ids not in the file are dropped (counted in the report). The model is checked for
the sources' strings by the leakage check before it is written.

Example:
    model, report = fit_workload(["runs/job"])
    save_model(model, "job.synth.json")
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from chakra.analyze.critical_path import critical_path
from chakra.chunks import COMPUTE, MISSING
from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE
from chakra.share.leakage import StringSet, strings_in
from chakra.share.opclass import CLASSES, op_class
from chakra.synth import model as model_types
from chakra.synth.model import (
    LAYER,
    MAX_ATOMS,
    MODEL_FORMAT,
    MODEL_VERSION,
    NONE,
    REPEAT,
    STEP,
    STREAM,
    THREAD,
    Atoms,
    DataParallel,
    Group,
    Key,
    Loop,
    Program,
    RankBinding,
    Run,
    Source,
    Symbol,
    SynthModel,
    synthetic_class,
)
from chakra.synth.motifs import Item, Literal, tandem_grammar
from chakra.table import DEFAULT_GROUP_ID, NodeTable

#: A top-level repeat covering at least this share of a rank's nodes is its step.
STEP_SHARE = 0.5
#: Durations are drawn per class and per this many equal parts of a rank's issue order: where in the
#: step work runs decides what waits at the next collective (a slow forward on one rank, a fast one on
#: another), so the model keeps how each class's times change over the step.
PHASES = 32
#: Node types packed beside a name id (the format's types are 0 to 7; more than enough room).
NODE_TYPES = 64
#: A repeat is a layer when its block holds at least this many compute nodes (a layer is several ops).
MIN_LAYER_COMPUTE = 3


@dataclass
class RankFit:
    """What one rank contributes (local class and symbol tables; picklable, made in a worker)."""

    rank: int
    nodes: int
    keys: list[Key]
    key_of: np.ndarray
    dur_ns: np.ndarray
    num_ops: np.ndarray
    tensor_size: np.ndarray
    symbols: list[Symbol]
    seq: np.ndarray
    tracks: list[int]
    groups: list[int]
    compute: np.ndarray  # per local symbol: whether it is a compute node
    dropped: Counter[str]
    strings: set[str]


@dataclass
class Motif:
    """A repeated block found: its role, how many nodes one copy has and how often it repeats."""

    program: int
    role: str
    nodes: int
    count: int
    depth: int


@dataclass
class FitReport:
    sources: list[str]
    ranks: int = 0
    nodes: int = 0
    programs: int = 0
    keys: int = 0
    symbols: int = 0
    motifs: list[Motif] = field(default_factory=list)
    data_parallel: DataParallel | None = None
    dropped: Counter[str] = field(default_factory=Counter)
    strings: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, object]:
        dp = self.data_parallel
        return {
            "sources": self.sources, "ranks": self.ranks, "nodes": self.nodes, "programs": self.programs,
            "keys": self.keys, "symbols": self.symbols,
            "motifs": [m.__dict__ for m in self.motifs],
            "data_parallel": None if dp is None else {"stride": dp.stride, "size": dp.size},
            "dropped": dict(self.dropped),
        }  # fmt: skip


def node_class(name: str, node_type: int) -> str:
    """A node's operator class: the class a synthetic name carries (``matmul.17``, so a sample fits
    and compares as its source did), else the rules' (:func:`chakra.share.opclass.op_class`)."""
    return synthetic_class(name) or op_class(name, node_type)


def node_classes(table: NodeTable) -> tuple[list[str], np.ndarray]:
    """The classes of a table's nodes: ``(classes, index of each node's class)``; the rules run once
    per distinct (name, node type)."""
    pair = table.name_id.astype(np.int64) * NODE_TYPES + table.graph.node_type.astype(np.int64) % NODE_TYPES
    pairs, pair_of = np.unique(pair, return_inverse=True)
    names = [node_class(table.name_list[int(p) // NODE_TYPES], int(p) % NODE_TYPES) for p in pairs]
    classes = sorted(set(names))
    index = {name: i for i, name in enumerate(classes)}
    of_pair = np.array([index[name] for name in names], dtype=np.int64)
    return classes, of_pair[np.asarray(pair_of, dtype=np.int64).reshape(-1)] if len(table) else of_pair


def _size_log2(table: NodeTable) -> np.ndarray:
    size = np.where(table.num_ops > 0, table.num_ops, np.where(table.tensor_size > 0, table.tensor_size, 0))
    size = np.where(size > 0, size, table.comm_size)
    _, exponent = np.frexp(size.astype(np.float64))
    return np.where(size > 0, exponent.astype(np.int64) - 1, NONE)


def fit_rank(table: NodeTable) -> RankFit:
    """One rank's classes, symbols and values (see the module's docstring)."""
    n = len(table)
    rank = table.rank or 0
    graph = table.graph
    node_type = graph.node_type.astype(np.int64)
    names_of_class, cls = node_classes(table)
    is_cpu, comm_type = table.is_cpu.astype(np.int64), table.comm_type.astype(np.int64)
    track, tracks = _tracks(table)
    on_path = np.zeros(n, dtype=np.int64)
    if n and table.has_durations:
        on_path[critical_path(table, top=0).positions] = 1
    rows = np.stack([node_type, cls, is_cpu, comm_type, _size_log2(table), track, on_path])
    unique_rows, key_of = np.unique(rows.T, axis=0, return_inverse=True) if n else (np.zeros((0, 7)), np.zeros(0))
    keys = [
        Key(int(r[0]), names_of_class[int(r[1])], bool(r[2]), int(r[3]), int(r[4]), int(r[5]), bool(r[6]))
        for r in unique_rows
    ]
    key_of = np.asarray(key_of, dtype=np.int64).reshape(-1)

    comm_size = np.where(table.comm_size > 0, table.comm_size, 0)
    group_slot = np.full(n, NONE, dtype=np.int64)
    peer = np.zeros(n, dtype=np.int64)
    groups: list[int] = []
    slot_of: dict[int, int] = {}
    dropped: Counter[str] = Counter()
    comm = table.comm
    for k in range(len(comm)):
        pos = int(comm.pos[k])
        gid = int(comm.group[k])
        if gid >= 0:
            if gid not in slot_of:
                slot_of[gid] = len(groups)
                groups.append(gid)
            group_slot[pos] = slot_of[gid]
        elif gid != DEFAULT_GROUP_ID:
            dropped["group names that name no group (run on all ranks)"] += 1
        other = int(comm.dst[k]) if node_type[pos] == COMM_SEND_NODE else int(comm.src[k])
        if node_type[pos] in (COMM_SEND_NODE, COMM_RECV_NODE):
            if other == MISSING or other < 0:
                dropped["transfers without a peer (peer taken as the rank itself)"] += 1
            else:
                peer[pos] = other - rank

    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    back = (child - graph.dep_pos).tolist()
    kinds = graph.dep_kind.tolist()
    ptr = graph.dep_ptr.tolist()
    if graph.missing_deps:
        dropped["dependencies on ids not in the file"] += len(graph.missing_deps)
    interned: dict[Symbol, int] = {}
    seq = np.empty(n, dtype=np.int64)
    rows_list = np.stack([key_of, track, comm_size, group_slot, peer]).T.tolist() if n else []
    for i, (key, trk, size, slot, delta) in enumerate(rows_list):
        data: list[int] = []
        ctrl: list[int] = []
        for j in range(ptr[i], ptr[i + 1]):
            if back[j] != 0:
                (ctrl if kinds[j] else data).append(back[j])
        symbol = Symbol(key, trk, size, slot, delta, tuple(data), tuple(ctrl))
        found = interned.get(symbol)
        if found is None:
            found = interned[symbol] = len(interned)
        seq[i] = found
    symbols = list(interned)
    is_compute = np.zeros(len(symbols), dtype=bool)
    is_compute[seq[table.category == COMPUTE]] = True
    strings = set(table.name_list) | set(comm.pg_name)
    return RankFit(
        rank, n, keys, key_of, table.dur_ns.copy(), table.num_ops.copy(), table.tensor_size.copy(),
        symbols, seq, tracks, groups, is_compute, dropped, strings,
    )  # fmt: skip


def _tracks(table: NodeTable) -> tuple[np.ndarray, list[int]]:
    """Per node its local track (threads and streams in order of appearance, NONE for neither)."""
    kind = np.where(table.stream != MISSING, STREAM, np.where(table.tid != MISSING, THREAD, NONE))
    value = np.where(kind == STREAM, table.stream, np.where(kind == THREAD, table.tid, 0))
    track = np.full(len(table), NONE, dtype=np.int64)
    has = np.flatnonzero(kind != NONE)
    if len(has) == 0:
        return track, []
    codes = np.stack([kind[has], value[has]]).T
    unique, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    local = np.empty(len(order), dtype=np.int64)
    local[order] = np.arange(len(order))
    track[has] = local[np.asarray(inverse).reshape(-1)]
    return track, [int(unique[i][0]) for i in order]


def fit_workload(prefixes: Sequence[PathLike], *, workers: int | None = None) -> tuple[SynthModel, FitReport]:
    """Fit a model on one or more workloads: structure from the first, distributions from all."""
    from chakra.workload import open_workload

    if not prefixes:
        raise ChakraInputError("no workload to fit", hint="give at least one PREFIX")
    report = FitReport([str(p) for p in prefixes])
    sources: list[Source] = []
    keys: dict[Key, int] = {}
    # per structure rank, cell -> triples; a later source's rank r pools with the first's rank r mod its size
    values: list[dict[int, list[np.ndarray]]] = []
    structure: list[RankFit] = []
    comm_groups: CommGroups | None = None
    for index, prefix in enumerate(prefixes):
        found = open_workload(prefix).map(fit_rank, workers=workers)
        fits = [found.results[r] for r in sorted(found.results)]
        if found.missing:
            raise ChakraInputError(
                f"ranks {list(found.missing)} have no file", path=str(prefix), hint="fit a complete workload"
            )
        if index == 0:
            structure, comm_groups = fits, found.comm_groups
            values = [{} for _ in fits]
        sources.append(Source(len(fits), sum(f.nodes for f in fits)))
        for position, fit in enumerate(fits):
            remap = np.array([keys.setdefault(k, len(keys)) for k in fit.keys], dtype=np.int64)
            global_key = remap[fit.key_of] if fit.nodes else fit.key_of
            triples = np.stack([fit.dur_ns, fit.num_ops, fit.tensor_size]).T
            cells = global_key * PHASES + phases(fit.nodes)
            order = np.argsort(cells, kind="stable")
            found_cells, starts = np.unique(cells[order], return_index=True)
            ends = np.append(starts[1:], len(order))
            home = position % len(structure)
            for cell, lo, hi in zip(found_cells.tolist(), starts.tolist(), ends.tolist(), strict=True):
                values[home].setdefault(cell, []).append(triples[order[lo:hi]])
            fit.symbols = [
                Symbol(int(remap[s.key]), s.track, s.comm_size, s.group, s.peer, s.data, s.ctrl) for s in fit.symbols
            ]
            report.dropped.update(fit.dropped)
            report.strings |= fit.strings
    model = _assemble(structure, comm_groups, keys, values, sources, report)
    report.ranks, report.nodes = sources[0].ranks, sources[0].nodes
    report.keys, report.symbols, report.programs = len(model.keys), len(model.symbols), len(model.programs)
    report.data_parallel = model.data_parallel
    return model, report


def _assemble(
    fits: list[RankFit],
    comm_groups: CommGroups | None,
    keys: dict[Key, int],
    values: list[dict[int, list[np.ndarray]]],
    sources: list[Source],
    report: FitReport,
) -> SynthModel:
    symbols: dict[Symbol, int] = {}
    compute: list[bool] = []
    programs: list[Program] = []
    program_of: dict[bytes, int] = {}
    bindings: list[RankBinding] = []
    pooled: list[dict[int, list[np.ndarray]]] = []
    for position, fit in enumerate(fits):
        remap = np.empty(len(fit.symbols), dtype=np.int64)
        for i, symbol in enumerate(fit.symbols):
            if symbol not in symbols:
                symbols[symbol] = len(symbols)
                compute.append(bool(fit.compute[i]))
            remap[i] = symbols[symbol]
        seq = remap[fit.seq] if fit.nodes else fit.seq
        signature = seq.tobytes() + bytes(fit.tracks) + len(fit.groups).to_bytes(4, "little")
        program = program_of.get(signature)
        if program is None:
            program = program_of[signature] = len(programs)
            body = _blocks(tandem_grammar(seq), seq, np.array(compute, dtype=bool), len(seq))
            programs.append(Program(body, list(fit.tracks), len(fit.groups), [], []))
            pooled.append({})
            report.motifs.extend(_motifs(program, body, compute))
        bindings.append(RankBinding(program, list(fit.groups)))
        for cell, parts in values[position].items():
            pooled[program].setdefault(cell, []).extend(parts)
    for made, by_cell in zip(programs, pooled, strict=True):
        made.atom_cells = sorted(by_cell)
        made.atoms = [_atoms(np.concatenate(by_cell[c])) for c in made.atom_cells]
    groups = [Group(gid, list(members)) for gid, members in sorted((comm_groups or {}).items())]
    return SynthModel(
        MODEL_FORMAT, MODEL_VERSION, sources, list(keys), list(symbols), programs, bindings, groups,
        data_parallel_axis(groups, [b.program for b in bindings]),
    )  # fmt: skip


def phases(nodes: int) -> np.ndarray:
    """The phase (0 to :data:`PHASES` - 1) of each of ``nodes`` positions in issue order.

    >>> phases(4).tolist()
    [0, 8, 16, 24]
    """
    return (np.arange(nodes, dtype=np.int64) * PHASES) // max(nodes, 1)


def _atoms(triples: np.ndarray) -> Atoms:
    """A class's triples sorted by duration, all of them or :data:`MAX_ATOMS` at quantile midpoints."""
    ordered = triples[np.argsort(triples[:, 0], kind="stable")]
    count = len(ordered)
    if count > MAX_ATOMS:
        ordered = ordered[((np.arange(MAX_ATOMS) + 0.5) * count / MAX_ATOMS).astype(np.int64)]
    ordered = np.where(ordered == MISSING, NONE, ordered)
    return Atoms(count, ordered[:, 0].tolist(), ordered[:, 1].tolist(), ordered[:, 2].tolist())


def _blocks(items: list[Item], seq: np.ndarray, compute: np.ndarray, total: int) -> list[Run | Loop]:
    """The grammar over positions as blocks over symbols, with roles (see the module's docstring)."""

    def convert(item: Item, top: bool) -> tuple[Run | Loop, bool]:
        if isinstance(item, Literal):
            return Run(seq[item.start : item.stop].tolist()), False
        body, has_layer = [], False
        for child in item.body:
            block, child_layer = convert(child, False)
            body.append(block)
            has_layer |= child_layer
        period = _nodes(item)
        if top and period * item.count >= STEP_SHARE * total:
            return Loop(item.count, STEP, body), has_layer
        if not has_layer and _compute_nodes(body, compute) >= MIN_LAYER_COMPUTE:
            return Loop(item.count, LAYER, body), True
        return Loop(item.count, REPEAT, body), has_layer

    return [convert(item, True)[0] for item in items]


def _nodes(item: Item) -> int:
    if isinstance(item, Literal):
        return item.stop - item.start
    return sum(_nodes(child) for child in item.body)


def _compute_nodes(blocks: list[Run | Loop], compute: np.ndarray) -> int:
    total = 0
    for block in blocks:
        if isinstance(block, Run):
            total += int(compute[block.symbols].sum()) if block.symbols else 0
        else:
            total += block.count * _compute_nodes(block.body, compute)
    return total


def block_nodes(blocks: list[Run | Loop]) -> int:
    """Nodes the blocks expand to (each loop at its own count)."""
    return sum(len(b.symbols) if isinstance(b, Run) else b.count * block_nodes(b.body) for b in blocks)


def _motifs(program: int, blocks: list[Run | Loop], compute: list[bool], depth: int = 0) -> list[Motif]:
    found = []
    for block in blocks:
        if isinstance(block, Loop):
            found.append(Motif(program, block.role, block_nodes(block.body), block.count, depth))
            found.extend(_motifs(program, block.body, compute, depth + 1))
    return found


def data_parallel_axis(groups: list[Group], program_of_rank: list[int]) -> DataParallel | None:
    """The data-parallel axis of a workload (see the module's docstring), or ``None``.

    >>> data_parallel_axis([], [0, 0, 0, 0])
    DataParallel(stride=1, size=4)
    >>> tp_dp = [Group(1, [0, 1]), Group(2, [2, 3]), Group(3, [0, 2]), Group(4, [1, 3])]
    >>> data_parallel_axis(tp_dp, [0, 0, 0, 0])
    DataParallel(stride=2, size=2)
    """
    world = len(program_of_rank)
    if world == 0:
        return None
    axes: dict[tuple[int, int], set[int]] = {}
    for group in groups:
        members = sorted(group.members) or list(range(world))
        if len(members) < 2:
            continue
        stride = members[1] - members[0]
        if any(b - a != stride for a, b in itertools.pairwise(members)):
            continue
        if len({program_of_rank[m] for m in members if m < world}) != 1:
            continue  # members of one data-parallel group run the same program
        covered = axes.setdefault((stride, len(members)), set())
        if covered.isdisjoint(members):
            covered.update(members)
    full = [axis for axis, covered in axes.items() if len(covered) == world and world % (axis[0] * axis[1]) == 0]
    if full:
        stride, size = max(full, key=lambda axis: (axis[0], axis[1]))
        return DataParallel(stride, size)
    if not groups:
        # every collective on the default group: the ranks are replicas (a recording's ranks differ
        # in detail, thread interleavings, so alikeness is not asked of them)
        return DataParallel(1, world)
    return None


def model_leaks(data: bytes, strings: set[str]) -> list[str]:
    """The sources' strings found in an encoded model (``[]``: the model carries none of them); the
    model's own vocabulary (field names, classes, roles) does not count.

    >>> model_leaks(b'{"op_class": "matmul", "role": "layer"}', {"aten::mm", "matmul"})
    []
    """
    vocabulary = {MODEL_FORMAT, STEP, LAYER, REPEAT, "run", "loop", *CLASSES}
    for struct in vars(model_types).values():
        if isinstance(struct, type) and issubclass(struct, msgspec.Struct):
            vocabulary.update(f.encode_name for f in msgspec.structs.fields(struct))
    searched = StringSet()
    for text in strings:
        searched.add(text)
    return strings_in(searched, data, vocabulary)
