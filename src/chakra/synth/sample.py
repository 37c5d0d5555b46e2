"""Sampling synthetic workloads from a model (:mod:`chakra.synth.model`).

:func:`sample_workload` writes ``OUT.{rank}.et`` and ``OUT.comm_groups.json`` through the core
workload writer. Each rank expands its program's blocks (the motifs), optionally rescaled:

* ``steps``: the step loop runs ``steps`` times; a program without one is taken as one step, and
  its copies are chained (each copy's first nodes wait for the previous copy's last ones);
* ``layers``: every layer loop runs ``LayerScale.count`` times, or its own count times
  ``LayerScale.factor`` (at least once);
* ``ranks``: the data-parallel axis is widened to ``ranks / (source ranks / data-parallel size)``
  replicas (:class:`World`): each new rank runs the program of the source rank at its place in
  the axis modulo the source's size, groups spanning the axis span the new one, the others are
  copied per replica, and peers keep their place.

Durations are drawn per class and phase of the step (:data:`chakra.synth.fit.PHASES`): a
node in the same fraction of its rank's issue order as source nodes draws from theirs.
Dependencies point as far back (in issue order) as in the source; one that would reach before the
first node (a rescaled block shorter than the source's) is dropped and counted. Node classes draw
their ``(duration, FLOPs, bytes)`` from the class's atoms by stratified sampling: the ``k`` nodes of
a class get the quantiles ``(i + U_i) / k`` in a random order, so each class's sample follows its
source distribution to within ``1/k`` (with as many nodes as the source, exactly its values, shuffled).
Names are the class and the template number (``matmul.17``); transfers are tagged per pair of ranks
in order; no string of the source is written. Nodes carry no start times (consumers schedule them).

Example:
    report = sample_workload(load_model("job.synth.json"), "synthetic/job", layers=LayerScale(factor=2), seed=1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.io import FORMAT_VERSION
from chakra.io.framing import frame
from chakra.output_size import MAX_OUTPUT_BYTES, check_output_size
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    GlobalMetadata,
)
from chakra.synth.fit import PHASES, phases
from chakra.synth.model import LAYER, NONE, STEP, STREAM, Loop, Program, Run, SynthModel, synthetic_name
from chakra.units import NS_PER_US
from chakra.wire import AttrColumn, encode_columns
from chakra.workload_writer import WorkloadWriter

#: The attribute columns of a sampled node, in the order a node lists them (a node has one of
#: ``comm_dst``/``comm_src`` and one of ``stream``/``tid``).
_COLUMNS = (
    "is_cpu_op", "num_ops", "tensor_size", "comm_type", "comm_size", "pg_name", "comm_dst", "comm_src", "comm_tag",
    "stream", "tid", "duration_ns",
)  # fmt: skip
#: Bytes a sampled node takes in its file at least, about: the --max-size estimate (a lower bound, so
#: only samples sure to be too large are refused).
NODE_BYTES_ESTIMATE = 32
#: The first tag of the transfers between a pair of ranks (then one more per transfer, in order).
FIRST_TAG = 1
_COMM_TYPES = frozenset({COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE})
_SIZED_TYPES = frozenset({COMP_NODE, MEM_LOAD_NODE, MEM_STORE_NODE})


@dataclass(frozen=True)
class LayerScale:
    """``count`` copies of every layer motif, or ``factor`` times its own count.

    >>> LayerScale.parse("2x"), LayerScale.parse("24")
    (LayerScale(count=None, factor=2.0), LayerScale(count=24, factor=None))
    """

    count: int | None = None
    factor: float | None = None

    @classmethod
    def parse(cls, text: str) -> LayerScale:
        try:
            if text.lower().endswith("x"):
                factor = float(text[:-1])
                if factor > 0:
                    return cls(factor=factor)
            elif int(text) >= 1:
                return cls(count=int(text))
        except ValueError:
            pass
        raise ChakraInputError(f"--layers {text!r} is neither a count nor a factor", hint="e.g. 24 or 2x")

    def apply(self, count: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, round(count * (self.factor or 1.0)))


@dataclass
class World:
    """The ranks of a sample: per new rank its source rank and replica index, the new groups, and per
    new rank the new id of each source group. Ranks are ``inner + stride * j + stride * replicas * outer``
    (``j`` the replica, as :class:`~chakra.synth.model.DataParallel` lays the source out)."""

    stride: int
    size: int
    replicas: int
    template: list[int]
    groups: dict[int, list[int]]
    group_of: list[dict[int, int]]

    @property
    def ranks(self) -> int:
        return len(self.template)

    def coords(self, rank: int, replicas: int) -> tuple[int, int, int]:
        return rank % self.stride, (rank // self.stride) % replicas, rank // (self.stride * replicas)

    def place(self, inner: int, j: int, outer: int) -> int:
        return inner + self.stride * j + self.stride * self.replicas * outer

    def peer(self, rank: int, source_peer: int) -> int:
        """The new rank a transfer of new rank ``rank`` goes to, given its source peer: the peer's
        place, in the replica as far from ``rank``'s as in the source."""
        inner, j, outer = self.coords(source_peer, self.size)
        own = self.coords(self.template[rank], self.size)[1]
        return self.place(inner, (self.coords(rank, self.replicas)[1] + j - own) % self.replicas, outer)


def plan_world(model: SynthModel, ranks: int | None) -> World:
    """The sample's ranks and groups (see the module's docstring)."""
    world = model.world_size
    dp = model.data_parallel
    if ranks is not None and ranks != world and dp is None:
        raise ChakraInputError(
            "cannot widen this model: no data-parallel axis was found in its source",
            hint="sample it at its own size (leave out --ranks)",
        )
    stride, size = (dp.stride, dp.size) if dp is not None else (world, 1)
    unit = world // size
    new_size = ranks if ranks is not None else world
    if new_size < 1 or new_size % unit:
        raise ChakraInputError(
            f"--ranks {new_size} is not a multiple of {unit} (the source's ranks per data-parallel replica)",
            hint=f"give a multiple of {unit}",
        )
    replicas = new_size // unit
    made = World(stride, size, replicas, [place_source(r, stride, size, replicas) for r in range(new_size)], {}, [])
    keyed: dict[tuple[int, int], list[int]] = {}  # (source group, replica or -1 when widened) -> members
    members_of = {g.id: (g.members or list(range(world))) for g in model.groups}
    for gid, members in members_of.items():
        points = [made.coords(m, size) for m in members]
        spanned = {j for _, j, _ in points}
        if len(spanned) == size and size > 1:
            keyed[(gid, -1)] = sorted({made.place(i, j, o) for i, _, o in points for j in range(replicas)})
        elif len(spanned) == 1:
            (first,) = spanned
            for j in range(first, replicas, size):
                keyed[(gid, j)] = sorted(made.place(i, j, o) for i, _, o in points)
        else:
            raise ChakraInputError(
                f"cannot widen group {gid}: it spans some of the data-parallel ranks, not all",
                hint="sample at the source's size",
            )
    ordered = sorted(keyed, key=lambda k: (keyed[k][0], len(keyed[k]), k))
    new_id = {k: i + 1 for i, k in enumerate(ordered)}
    made.groups = {new_id[k]: keyed[k] for k in ordered}
    for r in range(new_size):
        j = made.coords(r, replicas)[1]
        made.group_of.append({gid: new_id.get((gid, -1), new_id.get((gid, j), 0)) for gid in members_of})
    return made


def place_source(rank: int, stride: int, size: int, replicas: int) -> int:
    """The source rank whose program new rank ``rank`` runs: same place, replica modulo ``size``.

    >>> [place_source(r, 2, 2, 4) for r in range(8)]
    [0, 1, 2, 3, 0, 1, 2, 3]
    """
    inner, j, outer = rank % stride, (rank // stride) % replicas, rank // (stride * replicas)
    return inner + stride * (j % size) + stride * size * outer


@dataclass
class SampleReport:
    """What :func:`sample_workload` wrote: ranks, nodes, each program's step and layer counts, and the
    dependencies dropped because a rescaled block left them nothing to point at."""

    prefix: str
    ranks: int = 0
    nodes: int = 0
    steps: dict[int, int] = field(default_factory=dict)  # program -> step motif copies
    layers: dict[int, list[int]] = field(default_factory=dict)  # program -> count of each layer loop
    dropped: Counter[str] = field(default_factory=Counter)
    groups: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.prefix, "ranks": self.ranks, "nodes": self.nodes,
            "steps": {str(k): v for k, v in self.steps.items()},
            "layers": {str(k): v for k, v in self.layers.items()},
            "dropped": dict(self.dropped), "groups": self.groups,
        }  # fmt: skip


@dataclass(frozen=True)
class _Expanded:
    """One program expanded: its symbols in issue order and the extra (child, parent) control edges
    that chain copies of an implicit step."""

    seq: np.ndarray
    chain_child: np.ndarray
    chain_parent: np.ndarray


def _copies(loop: Loop, steps: int | None, layers: LayerScale | None) -> int:
    """How many times a sample runs ``loop``'s body: ``steps`` for the step loop, the scaled count
    for a layer loop, else its own count."""
    if loop.role == STEP and steps is not None:
        return steps
    if loop.role == LAYER and layers is not None:
        return layers.apply(loop.count)
    return loop.count


def _expand(blocks: list[Run | Loop], steps: int | None, layers: LayerScale | None, counts: list[int]) -> np.ndarray:
    parts = []
    for block in blocks:
        if isinstance(block, Run):
            parts.append(np.asarray(block.symbols, dtype=np.int64))
            continue
        count = _copies(block, steps, layers)
        if block.role == LAYER:
            counts.append(count)
        parts.append(np.tile(_expand(block.body, steps, layers, counts), count))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def expanded_nodes(blocks: list[Run | Loop], steps: int | None, layers: LayerScale | None) -> int:
    """How many nodes :func:`_expand` makes of ``blocks``, counted without making them."""
    return sum(
        len(block.symbols)
        if isinstance(block, Run)
        else _copies(block, steps, layers) * expanded_nodes(block.body, steps, layers)
        for block in blocks
    )


def _has_step(blocks: list[Run | Loop]) -> bool:
    return any(isinstance(b, Loop) and b.role == STEP for b in blocks)


class _Sampler:
    """Expands programs and writes ranks (one per call to :meth:`rank_bytes`)."""

    def __init__(self, model: SynthModel, world: World, steps: int | None, layers: LayerScale | None, seed: int):
        self.model, self.world, self.seed = model, world, seed
        self.steps, self.layers = steps, layers
        symbols = model.symbols
        self.sym_key = np.array([s.key for s in symbols], dtype=np.int64)
        self.sym_track = np.array([s.track for s in symbols], dtype=np.int64)
        self.sym_size = np.array([s.comm_size for s in symbols], dtype=np.int64)
        self.sym_group = np.array([s.group for s in symbols], dtype=np.int64)
        self.sym_peer = np.array([s.peer for s in symbols], dtype=np.int64)
        offsets = [(*s.data, *s.ctrl) for s in symbols]
        self.dep_ptr = np.concatenate(([0], np.cumsum([len(o) for o in offsets]))).astype(np.int64)
        self.dep_back = np.array([b for o in offsets for b in o], dtype=np.int64)
        ctrl_flags = [k >= len(s.data) for s in symbols for k in range(len(s.data) + len(s.ctrl))]
        self.dep_ctrl = np.array(ctrl_flags, dtype=bool)
        self.names = [synthetic_name(model.keys[s.key].op_class, i) for i, s in enumerate(symbols)]
        self.expanded: dict[int, _Expanded] = {}
        self.report = SampleReport("")

    def program(self, index: int) -> _Expanded:
        found = self.expanded.get(index)
        if found is not None:
            return found
        program: Program = self.model.programs[index]
        counts: list[int] = []
        seq = _expand(program.body, self.steps, self.layers, counts)
        chain_child = chain_parent = np.zeros(0, dtype=np.int64)
        step_copies = next((b.count for b in program.body if isinstance(b, Loop) and b.role == STEP), 1)
        if self.steps is not None and self.steps > 1 and not _has_step(program.body):
            chain_child, chain_parent = self._chain(seq, self.steps)
            seq = np.tile(seq, self.steps)
        if self.steps is not None:
            step_copies = self.steps
        self.report.steps[index] = step_copies
        self.report.layers[index] = counts
        found = self.expanded[index] = _Expanded(seq, chain_child, chain_parent)
        return found

    def _chain(self, step: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray]:
        """Control edges making each copy's roots wait for the previous copy's sinks."""
        child, parent, _ = self._edges(step, count=False)
        n = len(step)
        roots = np.setdiff1d(np.arange(n), child)
        sinks = np.setdiff1d(np.arange(n), parent)
        c = (roots[None, :, None] + n * np.arange(1, copies)[:, None, None]).repeat(len(sinks), axis=2)
        p = (sinks[None, None, :] + n * np.arange(0, copies - 1)[:, None, None]).repeat(len(roots), axis=1)
        return c.reshape(-1), p.reshape(-1)

    def _edges(self, seq: np.ndarray, *, count: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(child, parent, is_ctrl) of every dependency of ``seq`` that lands on a node of it."""
        n = len(seq)
        starts, degree = self.dep_ptr[seq], self.dep_ptr[seq + 1] - self.dep_ptr[seq]
        child = np.repeat(np.arange(n, dtype=np.int64), degree)
        ramp = np.arange(len(child), dtype=np.int64) - np.repeat(np.cumsum(degree) - degree, degree)
        index = np.repeat(starts, degree) + ramp
        parent = child - self.dep_back[index]
        keep = (parent >= 0) & (parent < n)
        if count:
            self.report.dropped["dependencies reaching before the first node"] += int((~keep).sum())
        return child[keep], parent[keep], self.dep_ctrl[index][keep]

    @staticmethod
    def _draws(keys: np.ndarray, program: Program, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Per node, its cell (class and phase; the nearest phase of its class the model has) and the
        index of its atom there (stratified, see the module's docstring)."""
        cells = keys * PHASES + phases(len(keys))
        known = np.asarray(program.atom_cells, dtype=np.int64)
        at = np.searchsorted(known, cells)
        exact = (at < len(known)) & (known[np.minimum(at, len(known) - 1)] == cells)
        missing, inverse = np.unique(cells[~exact], return_inverse=True)
        nearest = np.empty(len(missing), dtype=np.int64)
        for m, cell in enumerate(missing.tolist()):
            lo, hi = np.searchsorted(known, [cell // PHASES * PHASES, (cell // PHASES + 1) * PHASES])
            nearest[m] = known[lo + int(np.argmin(np.abs(known[lo:hi] - cell)))]
        cells[~exact] = nearest[np.asarray(inverse).reshape(-1)]
        pick = np.zeros(len(keys), dtype=np.int64)
        order = np.argsort(cells, kind="stable")
        found, starts = np.unique(cells[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        index = np.searchsorted(known, found)
        for slot, lo, hi in zip(index.tolist(), starts.tolist(), ends.tolist(), strict=True):
            k, size = hi - lo, len(program.atoms[slot].dur_ns)
            u = (np.arange(k) + rng.random(k)) / k
            rng.shuffle(u)
            pick[order[lo:hi]] = np.minimum((u * size).astype(np.int64), size - 1)
        return np.searchsorted(known, cells), pick

    def rank_bytes(self, rank: int) -> bytes:
        """The framed file of new rank ``rank``."""
        world, model = self.world, self.model
        source = world.template[rank]
        binding = model.ranks[source]
        expanded = self.program(binding.program)
        seq = expanded.seq
        n = len(seq)
        child, parent, is_ctrl = self._edges(seq)
        child = np.concatenate((child, expanded.chain_child))
        parent = np.concatenate((parent, expanded.chain_parent))
        is_ctrl = np.concatenate((is_ctrl, np.ones(len(expanded.chain_child), dtype=bool)))
        order = np.lexsort((parent, child))
        child, parent, is_ctrl = child[order], parent[order], is_ctrl[order]
        ptr = np.searchsorted(child, np.arange(n + 1)).tolist()
        parents, ctrl = parent.tolist(), is_ctrl.tolist()

        rng = np.random.default_rng([self.seed, rank])
        keys = self.sym_key[seq]
        program = model.programs[binding.program]
        slots, picks = self._draws(keys, program, rng)
        pick, slot_of = picks.tolist(), slots.tolist()
        group_ids = [world.group_of[rank].get(g, 0) if g != NONE else 0 for g in binding.groups]
        tracks = program.tracks
        tags: Counter[tuple[int, int]] = Counter()
        key_list = model.keys
        names: list[str] = []
        types: list[int] = []
        durations_us: list[int] = []
        data_deps: list[list[int]] = []
        ctrl_deps: list[list[int]] = []
        columns: dict[str, list[Any]] = {name: [None] * n for name in _COLUMNS}
        for i, (symbol, key, track, size, slot, delta) in enumerate(
            zip(seq.tolist(), keys.tolist(), self.sym_track[seq].tolist(), self.sym_size[seq].tolist(),
                self.sym_group[seq].tolist(), self.sym_peer[seq].tolist(), strict=True)
        ):  # fmt: skip
            spec, atom = key_list[key], program.atoms[slot_of[i]]
            dur_ns = max(0, atom.dur_ns[pick[i]])
            columns["is_cpu_op"][i] = spec.is_cpu
            if spec.node_type in _SIZED_TYPES:
                if atom.num_ops[pick[i]] >= 0:
                    columns["num_ops"][i] = atom.num_ops[pick[i]]
                if atom.tensor_size[pick[i]] >= 0:
                    columns["tensor_size"][i] = atom.tensor_size[pick[i]]
            if spec.node_type in _COMM_TYPES:
                if spec.node_type == COMM_COLL_NODE and spec.comm_type >= 0:
                    columns["comm_type"][i] = spec.comm_type
                columns["comm_size"][i] = size
                if slot != NONE and group_ids[slot]:
                    columns["pg_name"][i] = str(group_ids[slot])
                if spec.node_type != COMM_COLL_NODE:
                    peer = world.peer(rank, source + delta)
                    pair = (rank, peer) if spec.node_type == COMM_SEND_NODE else (peer, rank)
                    columns["comm_dst" if spec.node_type == COMM_SEND_NODE else "comm_src"][i] = peer
                    columns["comm_tag"][i] = FIRST_TAG + tags[pair]
                    tags[pair] += 1
            if track != NONE:
                columns["stream" if tracks[track] == STREAM else "tid"][i] = track + 1
            if dur_ns % NS_PER_US:
                columns["duration_ns"][i] = dur_ns
            lo, hi = ptr[i], ptr[i + 1]
            data_deps.append([parents[j] for j in range(lo, hi) if not ctrl[j]])
            ctrl_deps.append([parents[j] for j in range(lo, hi) if ctrl[j]])
            names.append(self.names[symbol])
            types.append(spec.node_type)
            durations_us.append(round(dur_ns / NS_PER_US))
        empty: list[None] = [None] * n
        done = encode_columns(
            names, types, ctrl_deps, data_deps, [0] * n, durations_us, empty, empty,
            [AttrColumn(name, values) for name, values in columns.items()],
        )  # fmt: skip
        self.report.nodes += n
        return frame(GlobalMetadata(version=FORMAT_VERSION).SerializeToString()) + b"".join(map(frame, done.payloads))


def sample_workload(
    model: SynthModel,
    out: PathLike,
    *,
    steps: int | None = None,
    layers: LayerScale | None = None,
    ranks: int | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    max_bytes: int | None = MAX_OUTPUT_BYTES,
) -> SampleReport:
    """Write a workload sampled from ``model`` at ``out`` (see the module's docstring); refused before
    any work when the ranks alone would take more than ``max_bytes`` (``None``: no limit)."""
    if steps is not None and steps < 1:
        raise ChakraInputError(f"--steps {steps} is not a positive count", hint="e.g. --steps 4")
    new_ranks = ranks if ranks is not None else model.world_size
    per_rank = max(
        (
            expanded_nodes(program.body, steps, layers) * (steps if steps and not _has_step(program.body) else 1)
            for program in model.programs
        ),
        default=0,
    )
    check_output_size(
        new_ranks * max(per_rank, 1) * NODE_BYTES_ESTIMATE, max_bytes,
        f"{new_ranks:,} ranks of up to {per_rank:,} nodes", check="--ranks, --steps and --layers",
    )  # fmt: skip
    world = plan_world(model, ranks)
    sampler = _Sampler(model, world, steps, layers, seed)
    with WorkloadWriter(out, progress=progress) as writer:
        writer.groups = CommGroups({gid: tuple(members) for gid, members in world.groups.items()})
        for rank in range(world.ranks):
            writer.write_bytes(rank, sampler.rank_bytes(rank))
    report = sampler.report
    report.prefix, report.ranks, report.groups = str(writer.prefix), world.ranks, len(world.groups)
    return report
