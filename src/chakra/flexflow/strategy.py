"""FlexFlow's parallelization strategy (``--export-strategy FILE``): where each operator runs.

Two encodings, told apart by their first bytes:

* **text** (FlexFlow 2021 on, ``strategy.cc``): whitespace-separated tokens: the number of
  operators, then per operator its name, device type (0 GPU, 1 CPU), the number of dimensions,
  the partition degree of each dimension (innermost first), the number of partitions and the
  device of each partition (the first dimension varying fastest);
* **protobuf** (2019-2021, ``FFProtoBuf.Strategy``, ``schema/flexflow/strategy.proto``).

:func:`read_strategy` returns each operator's :class:`Placement`; a malformed file is one
:class:`~chakra.errors.ChakraInputError` naming the file and the line and column of the token.

Example:
    >>> strategy = parse_strategy_text("1\\nDense_102\\n0\\n2\\n1 2\\n2\\n0 1\\n", "s.txt")
    >>> strategy["Dense_102"].device_ids, strategy["Dense_102"].parts
    ((0, 1), 2)
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from chakra.errors import ChakraInputError, PathLike
from chakra.flexflow.dot import position_error

#: FlexFlow's device types.
DEVICE_TYPES = {0: "GPU", 1: "CPU"}
STRATEGY_HINT = "give the file FlexFlow wrote with --export-strategy"
#: The highest device id a FlexFlow file may name (its machine models stop far below).
MAX_DEVICES = (1 << 16) - 1
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class Placement:
    """One operator's partitioning: degree per dimension (innermost first) and each partition's device."""

    name: str
    device_type: str
    dims: tuple[int, ...]
    device_ids: tuple[int, ...]

    @property
    def parts(self) -> int:
        return math.prod(self.dims) if self.dims else 1


def read_strategy(path: PathLike) -> dict[str, Placement]:
    """Read a strategy file of either encoding: operator name -> :class:`Placement`."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ChakraInputError(f"cannot read it: {error.strerror}", path=path) from None
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    first = text.split(maxsplit=1)[:1] if text is not None else []
    if text is not None and first and first[0].isdigit():
        placements = parse_strategy_text(text, str(path))
    else:
        placements = parse_strategy_protobuf(data, str(path))
    if not placements:
        raise ChakraInputError("the strategy places no operator", path=path, hint=STRATEGY_HINT)
    return placements


def parse_strategy_text(text: str, path: str) -> dict[str, Placement]:
    """The text encoding (see the module docstring)."""
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    at = 0

    def where(offset: int) -> tuple[int, int]:
        line = _line_of(line_starts, offset)
        return line + 1, offset - line_starts[line] + 1

    def take(what: str) -> str:
        nonlocal at
        if at >= len(tokens):
            line, column = where(len(text))
            raise position_error(path, line, column, f"the file ends where {what} was due", STRATEGY_HINT)
        token = tokens[at]
        at += 1
        return token[0]

    def integer(what: str, minimum: int = 0, maximum: int | None = None) -> int:
        token = take(what)
        offset = tokens[at - 1][1]
        if not re.fullmatch(r"[+-]?\d+", token) or int(token) < minimum:
            line, column = where(offset)
            raise position_error(path, line, column, f"{what} is {token!r}, not an integer >= {minimum}", STRATEGY_HINT)
        if maximum is not None and int(token) > maximum:
            line, column = where(offset)
            raise position_error(path, line, column, f"{what} is {token}, beyond {maximum:,}", STRATEGY_HINT)
        return int(token)

    def device(what: str) -> int:
        return integer(what, maximum=MAX_DEVICES)

    placements: dict[str, Placement] = {}
    for _ in range(integer("the number of operators")):
        name = take("an operator's name")
        device_type = integer(f"the device type of {name}")
        dims = tuple(integer(f"a partition degree of {name}", 1) for _ in range(integer(f"the dimensions of {name}")))
        count_offset = tokens[at][1] if at < len(tokens) else len(text)
        devices = tuple(
            device(f"a device of {name}") for _ in range(integer(f"the partitions of {name}", maximum=MAX_DEVICES + 1))
        )
        placement = Placement(name, DEVICE_TYPES.get(device_type, str(device_type)), dims, devices)
        if devices and len(devices) != placement.parts:
            line, column = where(count_offset)
            raise position_error(
                path, line, column, f"{name} has {len(devices)} devices for {placement.parts} partitions {list(dims)}",
                STRATEGY_HINT,
            )  # fmt: skip
        placements[name] = placement
    if at < len(tokens):
        line, column = where(tokens[at][1])
        raise position_error(path, line, column, f"{tokens[at][0]!r} after the last operator", STRATEGY_HINT)
    return placements


def parse_strategy_protobuf(data: bytes, path: str) -> dict[str, Placement]:
    """The protobuf encoding (``FFProtoBuf.Strategy``)."""
    from chakra.schema.flexflow.strategy_pb2 import Strategy

    try:
        strategy = Strategy.FromString(data)
    except DecodeError:
        raise ChakraInputError(
            "neither FlexFlow's text strategy nor its protobuf one", path=path, hint=STRATEGY_HINT
        ) from None
    placements: dict[str, Placement] = {}
    for number, op in enumerate(strategy.ops):
        if not op.name:
            raise ChakraInputError(f"operator #{number} of the strategy has no name", path=path, hint=STRATEGY_HINT)
        placement = Placement(op.name, DEVICE_TYPES.get(op.device_type, str(op.device_type)), tuple(op.dims),
                              tuple(op.device_ids))  # fmt: skip
        if any(not 0 <= d <= MAX_DEVICES for d in placement.device_ids):
            raise ChakraInputError(
                f"{op.name} names a device outside 0-{MAX_DEVICES:,}: {list(placement.device_ids)}",
                path=path,
                hint=STRATEGY_HINT,
            )
        if placement.device_ids and len(placement.device_ids) != placement.parts:
            raise ChakraInputError(
                f"{op.name} has {len(placement.device_ids)} devices for {placement.parts} partitions "
                f"{list(placement.dims)}",
                path=path,
                hint=STRATEGY_HINT,
            )
        placements[op.name] = placement
    return placements


def _line_of(line_starts: list[int], offset: int) -> int:
    return bisect.bisect_right(line_starts, offset) - 1
