"""The synthetic-workload model: what :func:`~chakra.synth.fit.fit_workload` learns and
:func:`~chakra.synth.sample.sample_workload` draws from, and its file.

The file is JSON (``chakra-synth-model``, :data:`MODEL_VERSION`), small (the structure is stored
once per repeated block, the distributions as at most :data:`MAX_ATOMS` values per node class) and
holds numbers and the fixed vocabulary of this module only: no name, path or other string of the
sources, so a synthetic ET carries nothing of them (``chakra synth fit`` checks the file with the
leakage check of :mod:`chakra.share.leakage`). What it holds:

* ``keys``: the node classes: node type, coarse operator class (:data:`chakra.share.opclass.CLASSES`),
  CPU or device, collective type, the power of two of its size (FLOPs, else bytes; -1: none), and
  its track (a rank's threads and streams numbered in order of appearance; work on the main thread
  and on the autograd thread are timed apart), and whether it lies on the rank's critical path (the
  longest nodes of a class are not moved off the path or onto it).
* ``atoms`` (per program): per class and phase of the step (a 32nd of its nodes in issue order), up
  to :data:`MAX_ATOMS` ``(duration ns, FLOPs, bytes)`` triples: every node
  of the class when it had at most that many, else the nodes at evenly spaced quantiles of duration
  (``-1``: not recorded). Sampling draws triples, so durations and sizes keep their joint law.
* ``symbols``: the node templates: class, track, collective bytes, group slot, peer offset, and how
  far back (in issue order) its data and control dependencies reach.
* ``programs``: per class of alike ranks, its nodes as nested :class:`Run` and :class:`Loop` blocks
  (the repeated motifs; a loop's ``role`` is ``step``, ``layer`` or ``repeat``), and its tracks.
* ``ranks``: per rank, its program and the groups its group slots stand for; ``groups``: the
  communicator groups (ids and members); ``data_parallel``: the stride and size of the
  data-parallel axis ``--ranks`` widens, when one was found.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from chakra.errors import ChakraInputError, PathLike
from chakra.groups import MAX_RANK
from chakra.io.writer import AtomicFile
from chakra.share.opclass import CLASSES

MODEL_FORMAT = "chakra-synth-model"
MODEL_VERSION = 1
#: Most (duration, FLOPs, bytes) triples kept per node class: 256 quantiles put the model's CDF within
#: 1/256 of the source's (a KS distance of 0.004), far below what a sample of a few thousand resolves.
MAX_ATOMS = 256
#: ``Loop.role`` values.
STEP, LAYER, REPEAT = "step", "layer", "repeat"
#: ``Program.tracks`` values: a host thread (written as ``tid``) or a device stream (``stream``).
THREAD, STREAM = 0, 1
#: Track, group slot and size power of a node that has none.
NONE = -1


#: The class part of synthetic names (``memory_copy``) -> the class (``memory copy``).
_NAME_CLASS = {name.replace(" ", "_"): name for name in CLASSES}


def synthetic_name(op_class: str, template: int) -> str:
    """The name a sampled node gets: its class and template number, nothing of the sources.

    >>> synthetic_name("memory copy", 17), synthetic_class("memory_copy.17"), synthetic_class("aten::mm")
    ('memory_copy.17', 'memory copy', None)
    """
    return f"{op_class.replace(' ', '_')}.{template}"


def synthetic_class(name: str) -> str | None:
    """The class a synthetic name carries, or ``None`` for any other name."""
    head, dot, tail = name.rpartition(".")
    return _NAME_CLASS.get(head) if dot and tail.isdigit() else None


class Key(msgspec.Struct, array_like=True, frozen=True):
    node_type: int
    op_class: str
    is_cpu: bool
    comm_type: int
    size_log2: int
    track: int
    on_path: bool


class Atoms(msgspec.Struct, array_like=True):
    """A node class's distribution: triples sorted by duration; ``count`` nodes had the class."""

    count: int
    dur_ns: list[int]
    num_ops: list[int]
    tensor_size: list[int]


class Symbol(msgspec.Struct, array_like=True, frozen=True):
    """A node template; ``data``/``ctrl``: positions back (issue order) of its parents."""

    key: int
    track: int
    comm_size: int
    group: int
    peer: int
    data: tuple[int, ...]
    ctrl: tuple[int, ...]


class Run(msgspec.Struct, tag="run", array_like=True):
    symbols: list[int]


class Loop(msgspec.Struct, tag="loop", array_like=True):
    count: int
    role: str
    body: list[Run | Loop]


class Program(msgspec.Struct):
    """The nodes of a class of alike ranks; ``atoms[i]`` is the distribution on these ranks (ranks that
    behave alike share it: a straggler keeps its own) of cell ``atom_cells[i]``: class
    ``cell // PHASES`` in phase ``cell % PHASES`` of the step (:data:`chakra.synth.fit.PHASES`)."""

    body: list[Run | Loop]
    tracks: list[int]
    group_slots: int
    atom_cells: list[int]
    atoms: list[Atoms]


class RankBinding(msgspec.Struct, array_like=True):
    program: int
    groups: list[int]  # group id per slot; NONE: the default group (all ranks)


class Group(msgspec.Struct, array_like=True):
    id: int
    members: list[int]


class DataParallel(msgspec.Struct):
    """Ranks ``inner + stride * j + stride * size * outer``, ``j < size``, are one data-parallel group."""

    stride: int
    size: int


class Source(msgspec.Struct):
    ranks: int
    nodes: int


class SynthModel(msgspec.Struct):
    format: str
    version: int
    sources: list[Source]
    keys: list[Key]
    symbols: list[Symbol]
    programs: list[Program]
    ranks: list[RankBinding]
    groups: list[Group]
    data_parallel: DataParallel | None = None

    @property
    def world_size(self) -> int:
        return len(self.ranks)


def save_model(model: SynthModel, path: PathLike) -> int:
    """Write ``model`` to ``path`` atomically; returns its size in bytes."""
    data = msgspec.json.encode(model)
    with AtomicFile(path) as file:
        file.write(data)
    return len(data)


def load_model(path: PathLike) -> SynthModel:
    """Read a model file, checking its format and version."""
    where = Path(path)
    try:
        data = where.read_bytes()
    except OSError as error:
        raise ChakraInputError(f"cannot read the model: {error.strerror}", path=where) from None
    try:
        head = msgspec.json.decode(data, type=dict[str, object])
    except msgspec.DecodeError as error:
        raise ChakraInputError(
            f"not a synthetic-workload model ({error})", path=where, hint="write one with `chakra synth fit`"
        ) from None
    if head.get("format") != MODEL_FORMAT:
        raise ChakraInputError(
            f"not a synthetic-workload model (format {head.get('format')!r})",
            path=where, hint="write one with `chakra synth fit`",
        )  # fmt: skip
    if head.get("version") != MODEL_VERSION:
        raise ChakraInputError(
            f"model version {head.get('version')!r}; this chakra reads version {MODEL_VERSION}",
            path=where, hint="fit the model again with this chakra",
        )  # fmt: skip
    try:
        model = msgspec.json.decode(data, type=SynthModel)
    except msgspec.ValidationError as error:
        raise ChakraInputError(str(error), path=where, hint="fit the model again") from None
    for source in model.sources:
        if not 1 <= source.ranks <= MAX_RANK + 1 or source.nodes < 0:
            raise ChakraInputError(
                f"the model says it was fitted to {source.ranks:,} ranks of {source.nodes:,} nodes, which no "
                f"workload has (ranks 1 to {MAX_RANK + 1:,})",
                path=where,
                hint="the file is damaged: fit the model again",
            )
    problem = model_problem(model)
    if problem is not None:
        raise ChakraInputError(f"the model is inconsistent: {problem}", path=where, hint="fit the model again")
    return model


#: The largest value a model's count, size or time may hold: the node table's int64 sums stay whole.
MAX_VALUE = 1 << 62
#: The most copies a loop of the model may make of its body.
MAX_LOOP_COUNT = 1 << 31


def model_problem(model: SynthModel) -> str | None:
    """What makes ``model`` impossible to sample (an index past its list, a value past any workload's),
    or ``None``: a damaged file is refused before sampling reads it."""
    world, symbols = model.world_size, model.symbols
    if not world:
        return "it binds no ranks"
    for i, symbol in enumerate(symbols):
        if not 0 <= symbol.key < len(model.keys):
            return f"symbol {i} names key {symbol.key} of {len(model.keys)}"
        if not 0 <= symbol.comm_size <= MAX_VALUE or abs(symbol.peer) >= world:
            return f"symbol {i} has comm_size {symbol.comm_size} and peer {symbol.peer}"
        if any(not 0 <= back <= MAX_VALUE for back in (*symbol.data, *symbol.ctrl)):
            return f"symbol {i} has a dependency offset past any workload"
    for p, program in enumerate(model.programs):
        problem = _program_problem(program, symbols)
        if problem is not None:
            return f"program {p}: {problem}"
    for rank, binding in enumerate(model.ranks):
        if not 0 <= binding.program < len(model.programs):
            return f"rank {rank} runs program {binding.program} of {len(model.programs)}"
        slots = model.programs[binding.program].group_slots
        if len(binding.groups) != slots:
            return f"rank {rank} binds {len(binding.groups)} groups to its program's {slots} slots"
    for group in model.groups:
        if any(not 0 <= member < world for member in group.members):
            return f"group {group.id} names ranks outside the model's {world}"
    dp = model.data_parallel
    if dp is not None and not (dp.stride >= 1 and dp.size >= 1 and dp.stride * dp.size <= world):
        return f"its data-parallel axis (stride {dp.stride}, size {dp.size}) does not fit its {world} ranks"
    return None


def _program_problem(program: Program, symbols: list[Symbol]) -> str | None:
    if len(program.atoms) != len(program.atom_cells) or program.atom_cells != sorted(program.atom_cells):
        return "its atoms and their cells do not match"
    for atoms in program.atoms:
        triples = (atoms.dur_ns, atoms.num_ops, atoms.tensor_size)
        if not atoms.dur_ns or len({len(values) for values in triples}) != 1:
            return "a class has no atoms, or lists of different lengths"
        if any(abs(value) > MAX_VALUE for values in triples for value in values):
            return "an atom holds a value past any workload"
    stack: list[Run | Loop] = list(program.body)
    while stack:
        block = stack.pop()
        if isinstance(block, Loop):
            if not 0 <= block.count <= MAX_LOOP_COUNT or block.role not in (STEP, LAYER, REPEAT):
                return f"a {block.role!r} loop of {block.count} copies"
            stack.extend(block.body)
            continue
        for index in block.symbols:
            if not 0 <= index < len(symbols):
                return f"it names symbol {index} of {len(symbols)}"
            symbol = symbols[index]
            if symbol.track != NONE and not 0 <= symbol.track < len(program.tracks):
                return f"symbol {index} runs on track {symbol.track} of {len(program.tracks)}"
            if symbol.group != NONE and not 0 <= symbol.group < program.group_slots:
                return f"symbol {index} uses group slot {symbol.group} of {program.group_slots}"
    return None
