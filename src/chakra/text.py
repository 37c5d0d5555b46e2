"""ASTRA-sim text workloads (the ``.txt`` files of ASTRA-sim 1.0 and the SimAI/AICB flavour) -> Chakra ETs.

A text workload describes one training step as layers, each with a forward, an input-gradient (IG)
and a weight-gradient (WG) step: a compute time and a collective (type and size) per step. The
first line names the parallelism and may carry ``key: value`` options, the second the number of
layers; then one line per layer (``reference/upstream-behaviour.md`` §5.1)::

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 0 checkpoint_initiates: 1 2
    3
    embed -1 100 ALLREDUCE 4096 100 NONE 0 100 ALLREDUCE 8192 10
    ...

:func:`parse_text_workload` reads such a file into a :class:`TextWorkload` (every bad token is a
:class:`~chakra.errors.ChakraInputError` naming the line, the column and a fix);
:func:`convert_text` writes ``PREFIX.{npu}.et`` for every NPU plus ``PREFIX.comm_groups.json``
when some collective runs on a subgroup, and returns a :class:`TextConversion` with notes on
everything the ETs do not carry.

What each parallelism becomes follows ASTRA-sim's own workload loop (``Workload.cc``): the order
in which it computes, issues and waits for collectives becomes data dependencies, and the network
dimensions each phase's collective spans become communicator groups (``pg_name``):

* dimensions: DATA, MICRO and the DLRM kinds reduce weight gradients over all NPUs (the DLRM
  embedding, layer 0, uses all NPUs for every collective); MODEL and DISTRIBUTED_INFERENCE
  communicate forward and input gradients over all NPUs; HYBRID_DATA_MODEL and the transformer
  kinds run forward/IG collectives in the first network dimension (model parallel, blocks of
  ``M`` consecutive NPUs) and WG collectives across the others (data parallel: the NPUs with the
  same position in their block); HYBRID_MODEL_DATA the other way round. ``M`` is
  ``model_parallel_size`` or the header's ``model_parallel_NPU_group``. HYBRID_CUSTOMIZED takes
  the dimensions of each layer's own parallelism.
* order: see the ``_pass_*`` methods of :class:`_Builder`; passes follow each other, and a
  layer's forward step waits for its WG collective of the previous pass.

Differences from upstream's ``chakra_converter Text`` (Part B items 34-37): ``NONE`` and
zero-byte steps emit no collective (their dependents wait on the compute node), every kind of
ASTRA-sim is read, node ids start at 0 in every file, every node has ``is_cpu_op = false``,
collectives on a subgroup carry ``pg_name``, blank lines are ignored, and the header's layer
count must match. Compute times are written to ``duration_micros`` as µs, as upstream does
(ASTRA-sim 1.0 itself read them as cycles, SimAI as ns: ``time_unit="ns"`` converts those).

Speed: every NPU runs the same graph; only the ``pg_name`` of subgroup collectives differs. The
graph is built and serialized once; a rank's file is those bytes with the rank's ``pg_name``
attribute appended to the nodes that need one (``attr`` is the last field of ``Node``, so the
result is the canonical encoding), and ranks with the same groups share one byte string.

Example:
    >>> conversion = convert_text("resnet50.txt", "out/resnet", num_npus=8)  # doctest: +SKIP
    >>> conversion.paths[0], conversion.nodes_per_rank, conversion.notes
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra import io
from chakra.attrs import INT_MEMBER_RANGES, set_attr
from chakra.errors import ChakraInputError, PathLike
from chakra.generate.template import RankTemplate
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
    GlobalMetadata,
    Node,
)
from chakra.trace import WorkloadWriter, prepare_prefix

# Parallelism kinds, spelled as in the first line of a workload (ASTRA-sim's ``decode_parallelsim``).
MICRO = "MICRO"
DATA = "DATA"
MODEL = "MODEL"
HYBRID_DATA_MODEL = "HYBRID_DATA_MODEL"
HYBRID_MODEL_DATA = "HYBRID_MODEL_DATA"
HYBRID_DLRM = "HYBRID_DLRM"
HYBRID_DLRM_ENHANCED = "HYBRID_DLRM_ENHANCED"
HYBRID_TRANSFORMER = "HYBRID_TRANSFORMER"
HYBRID_TRANSFORMER_FWD_IN_BCKWD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
HYBRID_CUSTOMIZED = "HYBRID_CUSTOMIZED"
DISTRIBUTED_INFERENCE = "DISTRIBUTED_INFERENCE"

PARALLELISMS = (
    MICRO,
    DATA,
    MODEL,
    HYBRID_DATA_MODEL,
    HYBRID_MODEL_DATA,
    HYBRID_DLRM,
    HYBRID_DLRM_ENHANCED,
    HYBRID_TRANSFORMER,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    HYBRID_CUSTOMIZED,
    DISTRIBUTED_INFERENCE,
)
#: What a HYBRID_CUSTOMIZED layer may name as its own parallelism (everything but itself).
LAYER_PARALLELISMS = tuple(kind for kind in PARALLELISMS if kind != HYBRID_CUSTOMIZED)
_DLRM_KINDS = (HYBRID_DLRM, HYBRID_DLRM_ENHANCED)
_TRANSFORMER_KINDS = (HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD)

#: Comm-type column text -> ``CollectiveCommType`` (et_def.proto); ``NONE`` means no collective.
COMM_TYPES = {"ALLREDUCE": ALL_REDUCE, "ALLTOALL": ALL_TO_ALL, "ALLGATHER": ALL_GATHER, "REDUCESCATTER": REDUCE_SCATTER}
NO_COMM = "NONE"

#: The twelve columns of a layer line, in order (upstream-behaviour.md §5.1).
LAYER_COLUMNS = (
    "layer name",
    "reserved",
    "forward compute time",
    "forward comm type",
    "forward comm size",
    "input-gradient compute time",
    "input-gradient comm type",
    "input-gradient comm size",
    "weight-gradient compute time",
    "weight-gradient comm type",
    "weight-gradient comm size",
    "weight-update time",
)
_EXAMPLE_LAYER = "conv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5"

#: Header options that hold a count followed by that many layer indices.
_LAYER_LIST_OPTIONS = ("checkpoints", "checkpoint_initiates")
#: Header options with one integer value (lower-case names): ASTRA-sim 2.0 / SimAI transformer
#: headers (``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``pp_comm`` in bytes) and the SimAI DLRM form.
_MODEL_PARALLEL_KEY = "model_parallel_npu_group"
_DLRM_KEY = "dlrm_last_bottom_layer"
_INT_OPTIONS = (_MODEL_PARALLEL_KEY, _DLRM_KEY, "ep", "pp", "vpp", "ga", "all_gpus", "pp_comm")
#: What the compute-time columns may hold (``convert_text(time_unit=...)``).
TIME_UNIT_US, TIME_UNIT_NS = "us", "ns"
TIME_UNITS = (TIME_UNIT_US, TIME_UNIT_NS)
NS_PER_US = 1000
#: Other spellings of options, as older AICB versions write them.
_OPTION_ALIASES = {"expert_parallel_npu_group": "ep"}
#: Options SimAI parses with ``std::stoi``, which reads the leading integer: AICB writes ``pp_comm``
#: as a float (``8388608.0``) with sequence parallelism.
_STOI_OPTIONS = ("pp_comm",)
_STOI_PREFIX = re.compile(r"[+-]?[0-9]+(?=\.[0-9]*\Z)")
#: Options that say something this converter does not model, with what it means, noted when the value is not 1.
_UNMODELLED = {
    "ep": "expert parallelism",
    "pp": "pipeline parallelism: every NPU runs every layer",
    "vpp": "virtual pipeline stages",
    "ga": "gradient accumulation: one pass per --num-passes",
}

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
#: Largest value a column may hold: sizes are written as int64 (``chakra.attrs``), durations as uint64.
_INT64_MAX = INT_MEMBER_RANGES["int64_val"][1]

# The NPUs a phase's collective spans (ASTRA-sim's ``involved_dimensions``): all of them, no network
# dimension (ASTRA-sim finishes such a collective at once), the first dimension (blocks of M
# consecutive NPUs) or the other dimensions (NPUs with the same position in their block).
_ALL, _NOWHERE, _FIRST, _REST = "all", "nowhere", "first", "rest"
#: Per parallelism: the span of the (forward, input-gradient, weight-gradient) collectives
#: (``Workload::decode_involved_dimensions``).
_SPANS: dict[str, tuple[str, str, str]] = {
    MICRO: (_NOWHERE, _NOWHERE, _ALL),
    DATA: (_NOWHERE, _NOWHERE, _ALL),
    HYBRID_DLRM: (_NOWHERE, _NOWHERE, _ALL),
    HYBRID_DLRM_ENHANCED: (_NOWHERE, _NOWHERE, _ALL),
    MODEL: (_ALL, _ALL, _NOWHERE),
    DISTRIBUTED_INFERENCE: (_ALL, _ALL, _NOWHERE),
    HYBRID_DATA_MODEL: (_FIRST, _FIRST, _REST),
    HYBRID_MODEL_DATA: (_REST, _REST, _FIRST),
    HYBRID_TRANSFORMER: (_FIRST, _FIRST, _REST),
    HYBRID_TRANSFORMER_FWD_IN_BCKWD: (_FIRST, _FIRST, _REST),
}
#: The DLRM embedding (layer 0) communicates over all NPUs in every phase.
_DLRM_EMBEDDING_SPANS = (_ALL, _ALL, _ALL)

# Concrete placements of a collective once M and the NPU count are known.
_BLOCK, _STRIDE, _SINGLE = "block", "stride", "single"

FWD, IG, WG = "fwd", "ig", "wg"
_PHASE_LABEL = {FWD: "forward", IG: "input-gradient", WG: "weight-gradient"}
_COMPUTE_SUFFIX = {FWD: "FWD", IG: "BWD_IG", WG: "BWD_WG"}
_COMM_SUFFIX = {FWD: "FWD", IG: "IG", WG: "WG"}
_RECOMPUTE = "FWD_RECOMPUTE"
#: How many layer steps a note names before it says "...".
_NOTE_EXAMPLES = 3


@dataclass(frozen=True)
class Phase:
    """One step of a layer: compute time (µs, written to ``duration_micros``) and its collective.

    ``comm_type`` is the column text (``ALLREDUCE``, ..., ``NONE``), ``comm_size_bytes`` its size.
    """

    compute_us: int
    comm_type: str
    comm_size_bytes: int


@dataclass(frozen=True)
class Layer:
    """One layer line. ``line`` is its 1-based line number; ``parallelism`` is the layer's own
    parallelism (HYBRID_CUSTOMIZED only, else ``None``); ``update_us`` the weight-update time."""

    name: str
    line: int
    reserved: int
    fwd: Phase
    ig: Phase
    wg: Phase
    update_us: int
    parallelism: str | None = None

    def phase(self, which: str) -> Phase:
        return {FWD: self.fwd, IG: self.ig, WG: self.wg}[which]


@dataclass
class TextWorkload:
    """A parsed text workload.

    ``options`` holds the header's integer options by lower-case name (``model_parallel_npu_group``,
    ``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``pp_comm``, ``dlrm_last_bottom_layer``);
    ``unknown_options`` the others as written (name -> value text). ``checkpoints`` and
    ``checkpoint_initiates`` are layer indices (0-based, in file order).
    """

    path: Path
    text: str
    parallelism: str
    layers: list[Layer]
    header_line: int = 1
    options: dict[str, int] = field(default_factory=dict)
    unknown_options: dict[str, str] = field(default_factory=dict)
    checkpoints: tuple[int, ...] = ()
    checkpoint_initiates: tuple[int, ...] = ()

    @property
    def model_parallel_npu_group(self) -> int | None:
        return self.options.get(_MODEL_PARALLEL_KEY)

    @property
    def dlrm_last_bottom_layer(self) -> int | None:
        return self.options.get(_DLRM_KEY)


@dataclass
class TextConversion:
    """What :func:`convert_text` wrote.

    ``paths``: ``PREFIX.{npu}.et`` in NPU order; ``comm_groups_path``: the groups file, or ``None``
    when every collective spans all NPUs; ``groups``: group id -> sorted ranks; ``nodes_per_rank``
    and ``collectives_per_rank``: the same in every file; ``distinct_files``: how many different
    files there are (ranks with the same groups share one); ``notes``: what the ETs do not carry.
    """

    prefix: Path
    parallelism: str
    num_npus: int
    num_passes: int
    paths: list[Path]
    comm_groups_path: Path | None
    groups: dict[int, list[int]]
    nodes_per_rank: int
    collectives_per_rank: int
    distinct_files: int
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": str(self.prefix),
            "parallelism": self.parallelism,
            "num_npus": self.num_npus,
            "num_passes": self.num_passes,
            "paths": [str(p) for p in self.paths],
            "comm_groups_path": None if self.comm_groups_path is None else str(self.comm_groups_path),
            "groups": {str(k): v for k, v in self.groups.items()},
            "nodes_per_rank": self.nodes_per_rank,
            "collectives_per_rank": self.collectives_per_rank,
            "distinct_files": self.distinct_files,
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------
# Parsing


def _error(
    path: Path, line: int, message: str, hint: str, column: int | None = None, what: str = ""
) -> ChakraInputError:
    """``PATH: line L, column C (what): message (hint: ...)``; columns count tokens from 1."""
    where = f"line {line}" if column is None else f"line {line}, column {column}" + (f" ({what})" if what else "")
    return ChakraInputError(f"{where}: {message}", path=path, hint=hint)


def _integer(path: Path, line: int, tokens: Sequence[str], index: int, what: str, *, minimum: int | None = 0) -> int:
    """``tokens[index]`` as an integer (at least ``minimum`` unless it is ``None``)."""
    if index >= len(tokens):
        raise _error(path, line, f"the {what} is missing", f"write an integer after {tokens[-1]!r}", index + 1, what)
    token = tokens[index]
    if not _INTEGER.match(token):
        raise _error(path, line, f"{token!r} is not an integer", f"the {what} is a whole number", index + 1, what)
    value = int(token)
    if minimum is not None and value < minimum:
        raise _error(path, line, f"{value} is below {minimum}", f"the {what} is at least {minimum}", index + 1, what)
    if abs(value) > _INT64_MAX:
        raise _error(
            path, line, f"{value} does not fit 64 bits", f"the {what} is at most {_INT64_MAX}", index + 1, what
        )
    return value


def _kind_hint(token: str) -> str:
    if token.upper() in PARALLELISMS:
        return f"parallelism names are upper case: {token.upper()}"
    return "the first line names the parallelism: one of " + ", ".join(PARALLELISMS)


def parse_text_workload(path: PathLike) -> TextWorkload:
    """Read an ASTRA-sim text workload (format in the module docstring; blank lines are ignored)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ChakraInputError("no such file", path=path, hint="give the path of an ASTRA-sim text workload") from None
    except IsADirectoryError:
        raise ChakraInputError("is a directory", path=path, hint="give the workload file itself") from None
    except UnicodeDecodeError as exc:
        raise ChakraInputError(
            f"not a text file (byte {exc.start} is not UTF-8)",
            path=path,
            hint="text workloads are plain text; for an .et file use chakra info",
        ) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot read: {exc.strerror}", path=path) from None
    return parse_text(text, path)


def parse_text(text: str, path: PathLike = "<text>") -> TextWorkload:
    """Parse the contents of a text workload; ``path`` only names it in errors."""
    path = Path(path)
    lines = [(number, line.split()) for number, line in enumerate(text.splitlines(), 1) if line.split()]
    if not lines:
        raise ChakraInputError("empty workload file", path=path, hint="the first line names the parallelism, e.g. DATA")
    header_line, header = lines[0]
    kind = header[0]
    if kind not in PARALLELISMS:
        raise _error(path, header_line, f"unknown parallelism {kind!r}", _kind_hint(kind), 1, "parallelism")
    workload = TextWorkload(path=path, text=text, parallelism=kind, layers=[], header_line=header_line)
    _parse_header(workload, header)

    if len(lines) < 2:
        raise _error(path, header_line, "the layer count is missing", "the second line is the number of layers, e.g. 3")
    count_line, count_tokens = lines[1]
    if len(count_tokens) != 1 or not _INTEGER.match(count_tokens[0]):
        raise _error(
            path,
            count_line,
            f"expected the number of layers, found {' '.join(count_tokens[:3])!r}",
            "the line after the parallelism holds only the layer count, e.g. 3",
            1,
            "layer count",
        )
    declared = _integer(path, count_line, count_tokens, 0, "layer count")
    workload.layers = [_parse_layer(path, number, tokens, kind) for number, tokens in lines[2:]]
    if declared != len(workload.layers):
        raise _error(
            path,
            count_line,
            f"the workload declares {declared} layers but {len(workload.layers)} layer lines follow",
            f"write {len(workload.layers)} on line {count_line}, or add or remove layer lines",
        )
    if not workload.layers:
        raise _error(path, count_line, "the workload has no layers", f"add layer lines such as: {_EXAMPLE_LAYER}")
    _check_layer_indices(workload)
    return workload


def _parse_header(workload: TextWorkload, tokens: list[str]) -> None:
    """The options after the parallelism: ``key: value`` pairs in any order (the colon may be
    missing, as in SimAI's ``pp_comm 4096``); ``checkpoints:``/``checkpoint_initiates:`` take a
    count and that many layer indices; the DLRM kinds take the last bottom layer first."""
    path, line = workload.path, workload.header_line
    i = 1
    if workload.parallelism in _DLRM_KINDS and len(tokens) > 1 and _INTEGER.match(tokens[1]):
        workload.options[_DLRM_KEY] = _integer(path, line, tokens, 1, "last bottom layer")
        i = 2
    seen: set[str] = set(workload.options)
    while i < len(tokens):
        token = tokens[i]
        if _INTEGER.match(token):
            raise _error(
                path,
                line,
                f"expected an option name, found the number {token}",
                "options are written 'name: value', e.g. model_parallel_NPU_group: 8",
                i + 1,
                "option",
            )
        name = token[:-1] if token.endswith(":") else token
        key = _OPTION_ALIASES.get(name.lower(), name.lower())
        if key in seen:
            raise _error(path, line, f"option {name!r} is given twice", "keep one", i + 1, "option")
        seen.add(key)
        if key in _LAYER_LIST_OPTIONS:
            count = _integer(path, line, tokens, i + 1, f"number of {name}")
            indices = tuple(_integer(path, line, tokens, i + 2 + j, f"{name} layer index") for j in range(count))
            if key == "checkpoints":
                workload.checkpoints = indices
            else:
                workload.checkpoint_initiates = indices
            i += 2 + count
            continue
        if i + 1 >= len(tokens):
            raise _error(path, line, f"option {name!r} has no value", f"write '{name}: VALUE'", i + 1, "option")
        if key in _INT_OPTIONS:
            minimum = 0 if key in (_DLRM_KEY, "pp_comm", "ga") else 1
            value = tokens[i + 1]
            leading = _STOI_PREFIX.match(value)
            if key in _STOI_OPTIONS and leading:  # SimAI reads these with std::stoi
                value = leading.group(0)
            workload.options[key] = _integer(
                path, line, [*tokens[: i + 1], value], i + 1, f"value of {name}", minimum=minimum
            )
        else:
            workload.unknown_options[name] = tokens[i + 1]
        i += 2
    if workload.parallelism in _DLRM_KINDS and _DLRM_KEY not in workload.options:
        raise _error(
            path,
            line,
            f"{workload.parallelism} needs the index of its last bottom-MLP layer",
            f"write e.g. '{workload.parallelism} 4' on the first line",
        )


def _comm_type_hint(token: str) -> str:
    base = token.upper()
    for suffix in ("_DP_EP", "_EP", "_DP", "_TP"):
        if base.endswith(suffix) and base[: -len(suffix)] in COMM_TYPES:
            plain = base[: -len(suffix)]
            return (
                f"SimAI's group suffix {suffix} (its {suffix[1:]} communicator) is not supported yet; "
                f"{plain} alone would run in another group, so convert this workload with SimAI's own tools"
            )
    if base in COMM_TYPES or base == NO_COMM:
        return f"comm types are upper case: {base}"
    if base == "ALLREDUCEALLTOALL":
        return "ASTRA-sim 1.0's combined all-reduce/all-to-all has no Chakra collective; write ALLREDUCE or ALLTOALL"
    return "use one of " + ", ".join((*COMM_TYPES, NO_COMM))


def _parse_layer(path: Path, line: int, tokens: list[str], kind: str) -> Layer:
    """One layer line: 12 columns, 13 for HYBRID_CUSTOMIZED (the layer's own parallelism after the
    name, or last as ASTRA-sim reads it)."""
    expected = len(LAYER_COLUMNS) + (kind == HYBRID_CUSTOMIZED)
    if len(tokens) != expected:
        hint = f"a layer line reads: {_EXAMPLE_LAYER}"
        if kind == HYBRID_CUSTOMIZED:
            hint = "HYBRID_CUSTOMIZED layers name their own parallelism as a 13th column, e.g. conv1 DATA -1 5 ..."
        elif len(tokens) == len(LAYER_COLUMNS) + 1 and (
            tokens[1] in LAYER_PARALLELISMS or tokens[-1] in LAYER_PARALLELISMS
        ):
            hint = "a per-layer parallelism is read only for HYBRID_CUSTOMIZED workloads"
        raise _error(path, line, f"a layer line has {expected} columns, this one {len(tokens)}", hint)
    parallelism = None
    columns = list(tokens)
    after_name = False  # the customized token right after the name shifts the other columns by one
    if kind == HYBRID_CUSTOMIZED:
        if tokens[1] in LAYER_PARALLELISMS:
            parallelism = columns.pop(1)
            after_name = True
        elif tokens[-1] in LAYER_PARALLELISMS:
            parallelism = columns.pop()
        else:
            position = expected if _INTEGER.match(tokens[1]) else 2
            raise _error(
                path,
                line,
                f"{tokens[position - 1]!r} is not a layer parallelism",
                "one of " + ", ".join(LAYER_PARALLELISMS),
                position,
                "layer parallelism",
            )
    where = [c + 1 + (after_name and c >= 1) for c in range(len(LAYER_COLUMNS))]  # 1-based column on the line

    def integer(column: int, minimum: int | None = 0) -> int:
        return _integer(path, line, tokens, where[column] - 1, LAYER_COLUMNS[column], minimum=minimum)

    def phase(first: int) -> Phase:
        comm_type = columns[first + 1]
        if comm_type not in COMM_TYPES and comm_type != NO_COMM:
            raise _error(
                path, line, f"unknown comm type {comm_type!r}", _comm_type_hint(comm_type),
                where[first + 1], LAYER_COLUMNS[first + 1],
            )  # fmt: skip
        return Phase(integer(first), comm_type, integer(first + 2))

    return Layer(
        name=columns[0],
        line=line,
        reserved=integer(1, minimum=None),
        fwd=phase(2),
        ig=phase(5),
        wg=phase(8),
        update_us=integer(11),
        parallelism=parallelism,
    )


def _check_layer_indices(workload: TextWorkload) -> None:
    """Checkpoint and DLRM layer indices name existing layers; every recompute has a checkpoint under it."""
    path, line, count = workload.path, workload.header_line, len(workload.layers)
    for name, indices in (
        ("checkpoints", workload.checkpoints),
        ("checkpoint_initiates", workload.checkpoint_initiates),
    ):
        for index in indices:
            if index >= count:
                raise _error(
                    path, line, f"{name} names layer {index}, but the layers are 0..{count - 1}",
                    "layer indices count the layer lines from 0",
                )  # fmt: skip
    if workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        for index in workload.checkpoint_initiates:
            if not any(c <= index for c in workload.checkpoints):
                raise _error(
                    path, line, f"checkpoint_initiates names layer {index} but no checkpoint is at or below it",
                    f"add a checkpoint at or below layer {index}, e.g. checkpoints: 1 0",
                )  # fmt: skip
    bottom = workload.dlrm_last_bottom_layer
    if workload.parallelism in _DLRM_KINDS and bottom is not None and bottom >= count:
        raise _error(
            path, line, f"the last bottom layer {bottom} is not a layer (they are 0..{count - 1})",
            "give the index of the last bottom-MLP layer, counted from 0",
        )  # fmt: skip


# --------------------------------------------------------------------------------------------
# The graph


@dataclass(frozen=True)
class _Placement:
    """The model-parallel size ``M`` (NPUs in the first dimension) and the NPU count, and how
    each span maps to NPUs: all of them, blocks of ``M``, strides of ``M`` or a single NPU."""

    num_npus: int
    first_dim: int | None

    def of(self, span: str) -> str:
        """``_ALL``, ``_BLOCK``, ``_STRIDE`` or ``_SINGLE`` for a span other than ``_NOWHERE``."""
        if self.num_npus == 1:
            return _SINGLE
        if span == _ALL or self.first_dim is None:
            return _ALL
        size = self.first_dim if span == _FIRST else self.num_npus // self.first_dim
        if size == 1:
            return _SINGLE
        if size == self.num_npus:
            return _ALL
        return _BLOCK if span == _FIRST else _STRIDE


class _Builder:
    """Builds one rank's graph (every rank's is the same but for ``pg_name``).

    ``cursor`` holds what the workload loop waits for before its next step; ``wg_comm`` the WG
    collective of each layer in the pass just built (the next pass's forward waits for it).
    Steps that emit no collective are recorded in ``skipped`` (reason -> layer steps) for the notes.
    """

    def __init__(self, workload: TextWorkload, placement: _Placement, units_per_us: int = 1):
        self.workload = workload
        self.placement = placement
        self.units_per_us = units_per_us  # compute-time units per µs: 1 (µs) or 1,000 (ns)
        self.rounded_up = 0  # nonzero compute times that would round to 0 µs
        self.nodes: list[Node] = []
        self.placements: list[str | None] = []  # per node: _BLOCK/_STRIDE when it needs a pg_name
        self.cursor: list[int] = []
        self.wg_comm: dict[int, int] = {}
        self.skipped: dict[str, dict[tuple[int, str], None]] = {}
        self.fallback_spans: set[str] = set()  # layer parallelisms whose groups fell back to all NPUs
        self.splits_npus = False  # whether some collective spans one part of the dimensions

    # -- nodes

    def _add(self, node: Node, placement: str | None = None) -> int:
        node.id = len(self.nodes)
        set_attr(node, "is_cpu_op", False)
        self.nodes.append(node)
        self.placements.append(placement)
        return node.id

    def compute(self, layer: Layer, which: str, deps: Sequence[int], *, recompute: bool = False) -> int:
        suffix = _RECOMPUTE if recompute else _COMPUTE_SUFFIX[which]
        node = Node(
            name=f"COMP_NODE_{layer.name}_{suffix}",
            type=COMP_NODE,
            data_deps=sorted(set(deps)),
            duration_micros=self._duration_us(layer.phase(which).compute_us),
        )
        return self._add(node)

    def _duration_us(self, value: int) -> int:
        if self.units_per_us == 1:
            return value
        duration_us = round(value / self.units_per_us)
        if value and not duration_us:
            self.rounded_up += 1
            return 1  # a real step never takes no time; 0 would read as "no duration recorded"
        return duration_us

    def skip(self, index: int, which: str, reason: str) -> None:
        """Record that layer ``index``'s ``which`` collective is not emitted, unless it is NONE anyway."""
        if self.workload.layers[index].phase(which).comm_type != NO_COMM:
            self.skipped.setdefault(reason, {})[(index, which)] = None

    def collective(self, index: int, which: str, deps: Sequence[int], *, recompute: bool = False) -> int | None:
        """Layer ``index``'s collective of step ``which``, or ``None`` where nothing is emitted."""
        layer = self.workload.layers[index]
        phase = layer.phase(which)
        if phase.comm_type == NO_COMM:
            self.skipped.setdefault("comm type NONE (dependents wait on the compute node)", {})[(index, which)] = None
            return None
        if phase.comm_size_bytes == 0:
            self.skip(index, which, "comm size 0")
            return None
        kind = layer.parallelism or self.workload.parallelism
        # ASTRA-sim gives layer 0 every dimension only when the workload itself is DLRM
        embedding = self.workload.parallelism in _DLRM_KINDS and index == 0
        spans = _DLRM_EMBEDDING_SPANS if embedding else _SPANS[kind]
        span = spans[(FWD, IG, WG).index(which)]
        if span == _NOWHERE:
            label = _PHASE_LABEL[which]
            reason = f"{kind} runs {label} collectives over no network dimension (ASTRA-sim finishes them at once)"
            self.skip(index, which, reason)
            return None
        if span != _ALL:
            self.splits_npus = True
            if self.placement.first_dim is None:
                self.fallback_spans.add(kind)
        placement = self.placement.of(span)
        if placement == _SINGLE:
            self.skip(index, which, "its group has a single NPU")
            return None
        suffix = _RECOMPUTE if recompute else _COMM_SUFFIX[which]
        node = Node(
            name=f"COMM_COLL_NODE_{layer.name}_{suffix}_{phase.comm_type}",
            type=COMM_COLL_NODE,
            data_deps=sorted(set(deps)),
        )
        set_attr(node, "comm_type", COMM_TYPES[phase.comm_type])
        set_attr(node, "comm_size", phase.comm_size_bytes)
        return self._add(node, None if placement == _ALL else placement)

    # -- one pass per parallelism (the order of ASTRA-sim's ``Workload::iterate_*``)

    def build(self, num_passes: int) -> None:
        kind = self.workload.parallelism
        step = {
            MICRO: self._pass_micro,
            DATA: self._pass_data,
            MODEL: self._pass_model,
            DISTRIBUTED_INFERENCE: self._pass_inference,
            HYBRID_DLRM: self._pass_dlrm,
            HYBRID_DLRM_ENHANCED: self._pass_dlrm,
            HYBRID_TRANSFORMER: self._pass_transformer,
            HYBRID_TRANSFORMER_FWD_IN_BCKWD: self._pass_transformer,
        }.get(kind, self._pass_hybrid)  # HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED
        for _ in range(num_passes):
            step()

    def _forward(self, index: int) -> None:
        """Layer ``index``'s forward compute after the cursor and its previous WG collective, then
        its forward collective, which the next step waits for."""
        prev = self.wg_comm.get(index)
        fwd = self.compute(self.workload.layers[index], FWD, self.cursor + ([prev] if prev is not None else []))
        comm = self.collective(index, FWD, [fwd])
        self.cursor = [fwd if comm is None else comm]

    def _pass_micro(self) -> None:
        # ASTRA-sim's micro benchmark issues layer 0's WG collective alone, once per pass
        # (Workload::iterate_micro_benchmark); the other lines of the file are never read
        for index in range(len(self.workload.layers)):
            self.skip(index, FWD, "MICRO issues weight-gradient collectives only")
            self.skip(index, IG, "MICRO issues weight-gradient collectives only")
            if index:
                self.skip(index, WG, "MICRO issues layer 0's collective only, as ASTRA-sim")
        self.collective(0, WG, [])

    def _pass_data(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            prev = self.wg_comm.get(index)
            self.cursor = [self.compute(layers[index], FWD, self.cursor + ([prev] if prev is not None else []))]
            self.skip(index, FWD, "DATA issues no forward collectives")
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            wg = self.compute(layers[index], WG, self.cursor)
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
            self.skip(index, IG, "DATA issues no input-gradient collectives")
            if index > 0:
                self.cursor = [self.compute(layers[index], IG, self.cursor)]
        self.wg_comm = wg_comm

    def _pass_model(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            self._forward(index)
        for index in reversed(range(len(layers))):
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self._input_gradient_comm(index, ig)
            wg = self.compute(layers[index], WG, [ig])
            self.skip(index, WG, "MODEL issues no weight-gradient collectives")
            self.cursor = [wg] + ([ig_comm] if ig_comm is not None else [])

    def _pass_inference(self) -> None:
        for index in range(len(self.workload.layers)):
            self._forward(index)
            self.skip(index, IG, "DISTRIBUTED_INFERENCE has no backward pass")
            self.skip(index, WG, "DISTRIBUTED_INFERENCE has no backward pass")

    def _input_gradient_comm(self, index: int, ig: int) -> int | None:
        """The IG collective, issued without waiting; layer 0 has none (nothing below needs it)."""
        if index == 0:
            self.skip(index, IG, "layer 0's input gradient is not communicated (nothing below needs it)")
            return None
        return self.collective(index, IG, [ig])

    def _pass_hybrid(self) -> None:
        layers = self.workload.layers
        for index in range(len(layers)):
            self._forward(index)
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self._input_gradient_comm(index, ig)
            wg = self.compute(layers[index], WG, [ig])
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg] + ([ig_comm] if ig_comm is not None else [])
        self.wg_comm = wg_comm

    def _pass_transformer(self) -> None:
        """Like the hybrids, but the IG collective (every layer's) blocks the WG compute; with
        FWD_IN_BCKWD a layer in ``checkpoint_initiates`` first recomputes the forward of the
        layers from the nearest checkpoint at or below it up to the layer before it."""
        workload = self.workload
        layers = workload.layers
        recompute = workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD
        for index in range(len(layers)):
            self._forward(index)
        wg_comm: dict[int, int] = {}
        for index in reversed(range(len(layers))):
            if recompute and index in workload.checkpoint_initiates:
                start = max(c for c in workload.checkpoints if c <= index)
                for again in range(start, index):
                    fwd = self.compute(layers[again], FWD, self.cursor, recompute=True)
                    comm = self.collective(again, FWD, [fwd], recompute=True)
                    self.cursor = [fwd if comm is None else comm]
            ig = self.compute(layers[index], IG, self.cursor)
            ig_comm = self.collective(index, IG, [ig])
            wg = self.compute(layers[index], WG, [ig if ig_comm is None else ig_comm])
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
        self.wg_comm = wg_comm

    def _pass_dlrm(self) -> None:
        """Forward: only all-to-all collectives are issued, without waiting; the layer after the
        last bottom layer waits for the embedding's (unless that layer issued one itself).
        Backward: WG then IG per layer; the embedding's IG collective is issued after the IG
        compute of the first top layer; HYBRID_DLRM (not _ENHANCED) waits for it at the end."""
        layers = self.workload.layers
        bottom = self.workload.dlrm_last_bottom_layer
        enhanced = self.workload.parallelism == HYBRID_DLRM_ENHANCED
        embedding_fwd: int | None = None
        for index in range(len(layers)):
            prev = self.wg_comm.get(index)
            fwd = self.compute(layers[index], FWD, self.cursor + ([prev] if prev is not None else []))
            self.cursor = [fwd]
            if layers[index].fwd.comm_type == "ALLTOALL":
                comm = self.collective(index, FWD, [fwd])
                if index == 0:
                    embedding_fwd = comm
            else:
                self.skip(index, FWD, "DLRM issues only all-to-all forward collectives")
            if index == bottom and layers[index].fwd.comm_type != "ALLTOALL" and embedding_fwd is not None:
                self.cursor.append(embedding_fwd)
        wg_comm: dict[int, int] = {}
        embedding_ig: int | None = None
        if bottom is not None and bottom + 1 >= len(layers):
            reason = (
                "DLRM issues the embedding's input-gradient collective after the first top layer, and there is none"
            )
            self.skip(0, IG, reason)
        for index in reversed(range(len(layers))):
            wg = self.compute(layers[index], WG, self.cursor)
            if (comm := self.collective(index, WG, [wg])) is not None:
                wg_comm[index] = comm
            self.cursor = [wg]
            if index == 0 and not enhanced and embedding_ig is not None:
                self.cursor.append(embedding_ig)
            if index > 0:
                ig = self.compute(layers[index], IG, self.cursor)
                self.skip(index, IG, "DLRM communicates only the embedding's input gradient")
                if bottom is not None and index == bottom + 1:
                    embedding_ig = self.collective(0, IG, [ig])
                self.cursor = [ig]
        self.wg_comm = wg_comm


# --------------------------------------------------------------------------------------------
# Conversion


def _first_dimension(
    workload: TextWorkload, num_npus: int, model_parallel_size: int | None, notes: list[str]
) -> int | None:
    """``M``: NPUs in the first network dimension, from the argument or the header; checked."""
    header = workload.model_parallel_npu_group
    size = model_parallel_size if model_parallel_size is not None else header
    if model_parallel_size is not None and header is not None and header != model_parallel_size:
        notes.append(
            f"--model-parallel-size {model_parallel_size} replaces the header's model_parallel_NPU_group: {header}"
        )
    if size is None:
        if workload.parallelism in _TRANSFORMER_KINDS:
            raise _error(
                workload.path, workload.header_line,
                f"{workload.parallelism} needs the model-parallel group size",
                f"write '{workload.parallelism} model_parallel_NPU_group: N' or give --model-parallel-size N",
            )  # fmt: skip
        return None
    if size < 1 or num_npus % size:
        where = "--model-parallel-size" if model_parallel_size is not None else "model_parallel_NPU_group"
        raise ChakraInputError(
            f"the model-parallel size {size} ({where}) does not divide the {num_npus} NPUs",
            path=workload.path,
            hint="give a number of NPUs that is a multiple of it, or another --model-parallel-size",
        )
    return size


def _count(number: int, noun: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _workload_notes(workload: TextWorkload, num_npus: int) -> list[str]:
    """Notes on header options and compute times the ETs do not carry."""
    notes = []
    for key, meaning in _UNMODELLED.items():
        value = workload.options.get(key)
        if value is not None and value != 1 and not (key == "vpp" and workload.options.get("pp", 1) == 1):
            notes.append(f"header {key}: {value} ({meaning}) is not modelled")
    all_gpus = workload.options.get("all_gpus")
    if all_gpus is not None and all_gpus != num_npus:
        notes.append(f"header all_gpus: {all_gpus} differs from --num-npus {num_npus}; the ETs are for {num_npus}")
    if workload.options.get("pp_comm"):
        notes.append(f"header pp_comm: {workload.options['pp_comm']} (pipeline transfers) is not modelled")
    for name, text in workload.unknown_options.items():
        notes.append(f"header option {name!r} (value {text!r}) is unknown and ignored")
    if workload.parallelism != HYBRID_TRANSFORMER_FWD_IN_BCKWD and (
        workload.checkpoints or workload.checkpoint_initiates
    ):
        notes.append(
            f"checkpoints are used by HYBRID_TRANSFORMER_FWD_IN_BCKWD only; ignored for {workload.parallelism}"
        )
    if workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        own = [i for i in workload.checkpoint_initiates if i in workload.checkpoints]
        if own:
            notes.append(
                f"checkpoint_initiates layers {own} are checkpoints themselves: nothing to recompute there "
                "(ASTRA-sim would run the forward on past them)"
            )
    updates = sum(1 for layer in workload.layers if layer.update_us)
    if updates:
        notes.append(f"weight-update times (last column, {_count(updates, 'layer')}) are not modelled, as upstream")
    kind = workload.parallelism
    unused = {MICRO: (FWD, IG, WG), DISTRIBUTED_INFERENCE: (IG, WG)}.get(kind, ())
    timed = sum(1 for layer in workload.layers if any(layer.phase(w).compute_us for w in unused))
    if timed:
        what = "collectives only" if kind == MICRO else "the forward pass only"
        notes.append(f"{kind} runs {what}: the compute times of {_count(timed, 'layer')} are not used")
    first_ig_us = workload.layers[0].ig.compute_us
    if kind in (DATA, *_DLRM_KINDS) and first_ig_us:
        notes.append(f"layer 0's input-gradient compute ({first_ig_us} µs) is not run: {kind} skips it, as ASTRA-sim")
    return notes


def _skipped_notes(builder: _Builder) -> list[str]:
    notes = []
    layers = builder.workload.layers
    for reason, steps in builder.skipped.items():
        shown = ", ".join(f"{layers[i].name} {_PHASE_LABEL[w]}" for i, w in list(steps)[:_NOTE_EXAMPLES])
        more = ", ..." if len(steps) > _NOTE_EXAMPLES else ""
        notes.append(f"no collective for {_count(len(steps), 'layer step')} ({shown}{more}): {reason}")
    for kind in sorted(builder.fallback_spans):
        notes.append(
            f"{kind} without a model-parallel size: its collectives run over all NPUs, as upstream; "
            "give --model-parallel-size N (the NPUs of the first network dimension) for ASTRA-sim's groups"
        )
    return notes


def _groups(placement: _Placement, used: set[str]) -> tuple[dict[int, list[int]], dict[str, int]]:
    """The groups of the used placements (blocks first, then strides), ids from 1, and the id of
    each placement's first group (a rank's group id is that plus its block or position)."""
    groups: dict[int, list[int]] = {}
    first_id: dict[str, int] = {}
    size, npus = placement.first_dim or 1, placement.num_npus
    for kind in (_BLOCK, _STRIDE):
        if kind not in used:
            continue
        first_id[kind] = len(groups) + 1
        if kind == _BLOCK:
            members = [list(range(block * size, (block + 1) * size)) for block in range(npus // size)]
        else:
            members = [list(range(position, npus, size)) for position in range(size)]
        for ranks in members:
            groups[len(groups) + 1] = ranks
    return groups, first_id


def _metadata(workload: TextWorkload, num_npus: int, num_passes: int) -> GlobalMetadata:
    metadata = GlobalMetadata(version=io.FORMAT_VERSION)
    metadata.attr.add(name="input_file", string_val=workload.text)
    metadata.attr.add(name="parallelism", string_val=workload.parallelism)
    metadata.attr.add(name="num_npus", int64_val=num_npus)
    metadata.attr.add(name="num_passes", int64_val=num_passes)
    return metadata


def convert_text(
    input_path: PathLike,
    output_prefix: PathLike,
    *,
    num_npus: int,
    num_passes: int = 1,
    model_parallel_size: int | None = None,
    time_unit: str = TIME_UNIT_US,
) -> TextConversion:
    """Convert an ASTRA-sim text workload to ``OUTPUT_PREFIX.{npu}.et`` for ``npu`` in ``0..num_npus-1``.

    ``num_passes``: training steps one after the other; ``model_parallel_size``: NPUs in the first
    network dimension (the model-parallel group of the hybrid and transformer kinds), which
    overrides the header's ``model_parallel_NPU_group``; ``time_unit``: what the compute-time
    columns hold, ``"us"`` (upstream converter's reading, written to ``duration_micros`` as they
    are) or ``"ns"`` (ASTRA-sim 1.0's cycles at 1 GHz and SimAI's ns: divided by 1,000, rounded,
    at least 1 µs where not 0). Writes ``OUTPUT_PREFIX.comm_groups.json`` when a collective runs
    on a subgroup. Every file is written atomically.
    """
    if time_unit not in TIME_UNITS:
        raise ChakraInputError(f"time unit {time_unit!r} is not one of {', '.join(TIME_UNITS)}", hint="use us or ns")
    for name, value in (("--num-npus", num_npus), ("--num-passes", num_passes)):
        if value < 1:
            raise ChakraInputError(f"{name} is {value}", hint=f"{name} is at least 1")
    if model_parallel_size is not None and model_parallel_size < 1:
        raise ChakraInputError(f"--model-parallel-size is {model_parallel_size}", hint="it is at least 1")
    workload = parse_text_workload(input_path)
    prefix = prepare_prefix(output_prefix)
    notes: list[str] = []
    first_dim = _first_dimension(workload, num_npus, model_parallel_size, notes)
    builder = _Builder(workload, _Placement(num_npus, first_dim), NS_PER_US if time_unit == TIME_UNIT_NS else 1)
    builder.build(num_passes)
    notes += _workload_notes(workload, num_npus) + _skipped_notes(builder)
    if time_unit == TIME_UNIT_US:
        notes.append(
            "compute times are written as µs, as upstream's converter reads them; ASTRA-sim 1.0 and SimAI "
            "read the same columns as ns (cycles): --time-unit ns converts them"
        )
    elif builder.rounded_up:
        notes.append(
            f"{builder.rounded_up} compute times under 0.5 µs are written as 1 µs (duration_micros is whole µs)"
        )
    if model_parallel_size is not None and not builder.splits_npus:
        notes.append(f"--model-parallel-size {model_parallel_size} is not used: every collective spans all NPUs")
    if not builder.nodes:
        raise ChakraInputError(
            "nothing to simulate: the workload emits no node (" + "; ".join(notes) + ")",
            path=workload.path,
            hint="give the layers a collective other than NONE, or compute times",
        )
    used = {p for p in builder.placements if p is not None}
    groups, first_id = _groups(builder.placement, used)
    return _write(workload, builder, prefix, num_passes, groups, first_id, notes)


def _write(
    workload: TextWorkload,
    builder: _Builder,
    prefix: Path,
    num_passes: int,
    groups: dict[int, list[int]],
    first_id: dict[str, int],
    notes: list[str],
) -> TextConversion:
    """Serialize the graph once, then write each rank's file with its communicators filled in
    (:mod:`chakra.generate.template`); ranks with the same groups share one rendering."""
    placement = builder.placement
    num_npus, size = placement.num_npus, placement.first_dim or 1
    open_kinds = {node.id: (where, 0) for node, where in zip(builder.nodes, builder.placements, strict=True) if where}
    frozen = RankTemplate(builder.nodes, open_kinds).freeze(_metadata(workload, num_npus, num_passes))

    def group_of(where: str, rank: int) -> int:
        return first_id[where] + (rank // size if where == _BLOCK else rank % size)

    placements = sorted(first_id)
    ranks_of: dict[tuple[int, ...], list[int]] = {}
    for rank in range(num_npus):
        ranks_of.setdefault(tuple(group_of(where, rank) for where in placements), []).append(rank)
    with WorkloadWriter(prefix) as writer:
        for ranks in ranks_of.values():
            data = frozen.render(ranks[0], group_of)  # ranks of one key have the same groups, the same bytes
            for rank in ranks:
                writer.write_bytes(rank, data)
        if groups:
            writer.groups = CommGroups({k: tuple(v) for k, v in groups.items()})
    written = writer.result
    assert written is not None
    paths = [written.paths[rank] for rank in range(num_npus)]
    groups_path = written.groups_path
    removed = written.removed_note()
    if removed:
        notes.append(removed)
    return TextConversion(
        prefix=prefix,
        parallelism=workload.parallelism,
        num_npus=num_npus,
        num_passes=num_passes,
        paths=paths,
        comm_groups_path=groups_path,
        groups=groups,
        nodes_per_rank=len(builder.nodes),
        collectives_per_rank=sum(1 for node in builder.nodes if node.type == COMM_COLL_NODE),
        distinct_files=len(ranks_of),
        notes=notes,
    )
