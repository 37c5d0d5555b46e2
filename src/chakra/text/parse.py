"""Reading ASTRA-sim text workloads: :func:`parse_text_workload` (a file) and :func:`parse_text` (its
contents) give a :class:`~chakra.text.workload.TextWorkload`; every bad token is a
:class:`~chakra.errors.ChakraInputError` naming the line, the column and a fix (:func:`line_error`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from chakra.attrs import INT_MEMBER_RANGES
from chakra.errors import ChakraInputError, PathLike
from chakra.text.workload import (
    COMM_TYPES,
    DLRM_KEY,
    DLRM_KINDS,
    HYBRID_CUSTOMIZED,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    LAYER_COLUMNS,
    LAYER_PARALLELISMS,
    MODEL_PARALLEL_KEY,
    NO_COMM,
    PARALLELISMS,
    Layer,
    LayerPhase,
    TextWorkload,
)

_EXAMPLE_LAYER = "conv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5"

#: Header options that hold a count followed by that many layer indices.
_LAYER_LIST_OPTIONS = ("checkpoints", "checkpoint_initiates")
#: Header options with one integer value (lower-case names): ASTRA-sim 2.0 / SimAI transformer
#: headers (``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``pp_comm`` in bytes) and the SimAI DLRM form.
_INT_OPTIONS = (MODEL_PARALLEL_KEY, DLRM_KEY, "ep", "pp", "vpp", "ga", "all_gpus", "pp_comm")
#: Other spellings of options, as older AICB versions write them.
_OPTION_ALIASES = {"expert_parallel_npu_group": "ep"}
#: Options SimAI parses with ``std::stoi``, which reads the leading integer: AICB writes ``pp_comm``
#: as a float (``8388608.0``) with sequence parallelism.
_STOI_OPTIONS = ("pp_comm",)
_STOI_PREFIX = re.compile(r"[+-]?[0-9]+(?=\.[0-9]*\Z)")

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
#: Largest value a column may hold: sizes are written as int64 (``chakra.attrs``), durations as uint64.
_INT64_MAX = INT_MEMBER_RANGES["int64_val"][1]


def line_error(
    path: Path, line: int, message: str, hint: str, column: int | None = None, what: str = ""
) -> ChakraInputError:
    """``PATH: line L, column C (what): message (hint: ...)``; columns count tokens from 1."""
    where = f"line {line}" if column is None else f"line {line}, column {column}" + (f" ({what})" if what else "")
    return ChakraInputError(f"{where}: {message}", path=path, hint=hint)


def _integer(path: Path, line: int, tokens: Sequence[str], index: int, what: str, *, minimum: int | None = 0) -> int:
    """``tokens[index]`` as an integer (at least ``minimum`` unless it is ``None``)."""
    if index >= len(tokens):
        hint = f"write an integer after {tokens[-1]!r}"
        raise line_error(path, line, f"the {what} is missing", hint, index + 1, what)
    token = tokens[index]
    if not _INTEGER.match(token):
        raise line_error(path, line, f"{token!r} is not an integer", f"the {what} is a whole number", index + 1, what)
    value = int(token)
    if minimum is not None and value < minimum:
        hint = f"the {what} is at least {minimum}"
        raise line_error(path, line, f"{value} is below {minimum}", hint, index + 1, what)
    if abs(value) > _INT64_MAX:
        raise line_error(
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
        raise line_error(path, header_line, f"unknown parallelism {kind!r}", _kind_hint(kind), 1, "parallelism")
    workload = TextWorkload(path=path, text=text, parallelism=kind, layers=[], header_line=header_line)
    _parse_header(workload, header)

    if len(lines) < 2:
        hint = "the second line is the number of layers, e.g. 3"
        raise line_error(path, header_line, "the layer count is missing", hint)
    count_line, count_tokens = lines[1]
    if len(count_tokens) != 1 or not _INTEGER.match(count_tokens[0]):
        raise line_error(
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
        raise line_error(
            path,
            count_line,
            f"the workload declares {declared} layers but {len(workload.layers)} layer lines follow",
            f"write {len(workload.layers)} on line {count_line}, or add or remove layer lines",
        )
    if not workload.layers:
        raise line_error(path, count_line, "the workload has no layers", f"add layer lines such as: {_EXAMPLE_LAYER}")
    _check_layer_indices(workload)
    return workload


def _parse_header(workload: TextWorkload, tokens: list[str]) -> None:
    """The options after the parallelism: ``key: value`` pairs in any order (the colon may be
    missing, as in SimAI's ``pp_comm 4096``); ``checkpoints:``/``checkpoint_initiates:`` take a
    count and that many layer indices; the DLRM kinds take the last bottom layer first."""
    path, line = workload.path, workload.header_line
    i = 1
    if workload.parallelism in DLRM_KINDS and len(tokens) > 1 and _INTEGER.match(tokens[1]):
        workload.options[DLRM_KEY] = _integer(path, line, tokens, 1, "last bottom layer")
        i = 2
    seen: set[str] = set(workload.options)
    while i < len(tokens):
        token = tokens[i]
        if _INTEGER.match(token):
            raise line_error(
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
            raise line_error(path, line, f"option {name!r} is given twice", "keep one", i + 1, "option")
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
            raise line_error(path, line, f"option {name!r} has no value", f"write '{name}: VALUE'", i + 1, "option")
        if key in _INT_OPTIONS:
            minimum = 0 if key in (DLRM_KEY, "pp_comm", "ga") else 1
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
    if workload.parallelism in DLRM_KINDS and DLRM_KEY not in workload.options:
        raise line_error(
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
        raise line_error(path, line, f"a layer line has {expected} columns, this one {len(tokens)}", hint)
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
            raise line_error(
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

    def phase(first: int) -> LayerPhase:
        comm_type = columns[first + 1]
        if comm_type not in COMM_TYPES and comm_type != NO_COMM:
            raise line_error(
                path, line, f"unknown comm type {comm_type!r}", _comm_type_hint(comm_type),
                where[first + 1], LAYER_COLUMNS[first + 1],
            )  # fmt: skip
        return LayerPhase(integer(first), comm_type, integer(first + 2))

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
                raise line_error(
                    path, line, f"{name} names layer {index}, but the layers are 0..{count - 1}",
                    "layer indices count the layer lines from 0",
                )  # fmt: skip
    if workload.parallelism == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        for index in workload.checkpoint_initiates:
            if not any(c <= index for c in workload.checkpoints):
                raise line_error(
                    path, line, f"checkpoint_initiates names layer {index} but no checkpoint is at or below it",
                    f"add a checkpoint at or below layer {index}, e.g. checkpoints: 1 0",
                )  # fmt: skip
    bottom = workload.dlrm_last_bottom_layer
    if workload.parallelism in DLRM_KINDS and bottom is not None and bottom >= count:
        raise line_error(
            path, line, f"the last bottom layer {bottom} is not a layer (they are 0..{count - 1})",
            "give the index of the last bottom-MLP layer, counted from 0",
        )  # fmt: skip
