"""Communicator groups: which ranks a collective's ``pg_name`` names, as every tool here reads it.

A workload's groups live in ``PREFIX.comm_groups.json`` (ASTRA-sim's format, ``{"1": [0, 1], ...}``,
``reference/astra-sim.md`` §4.4) or in METADATA nodes whose ``inputs.values`` hold the process groups
in the PyTorch converter's ``['[{"pg_name": "1", "ranks": [0, 1]}]']`` form (§2.5). A collective names
its group by ``pg_name``; :func:`group_id` reads it with ASTRA-sim's rules, so that validation, the
simulator, the analyses and the pictures key groups the same way:

* ``""`` and ``"0"`` are the **default group**: every rank of the workload (:data:`DEFAULT_GROUP`);
* anything else is read as C++ ``std::stoi`` reads it: optional white space and sign, then decimal
  digits, the rest ignored (``" 1"`` and ``"1abc"`` are group 1, ``"00"`` is group 0, which no file
  should define); a name without leading digits, or outside int32, is not a group
  (:class:`GroupNameError`).

Example:
    >>> group_id(" 1"), group_id(""), group_id("0")
    (1, None, None)
    >>> groups = CommGroups({1: (0, 1), 2: (2, 3)})
    >>> groups.members(group_id("2"), world_size=4), groups.members(None, world_size=4)
    ((2, 3), (0, 1, 2, 3))
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chakra import io
from chakra.documents import parse_json, read_text
from chakra.errors import ChakraInputError, PathLike

#: ``pg_name`` values that mean every rank (astra-sim.md §2.5).
DEFAULT_PG_NAMES = frozenset({"", "0"})
#: What :func:`group_id` returns for the default group.
DEFAULT_GROUP = None
#: ASTRA-sim starts a group's collective tags at ``group id x 1,000,000`` in a 32-bit int
#: (astra-sim.md §2.5; workload-generators.md §4.3): ids above this overflow.
MAX_ASTRA_GROUP_ID = (2**31 - 1) // 1_000_000
#: ASTRA-sim strips this many characters from each end of a METADATA node's ``inputs.values`` (the
#: Python ``['`` ... ``']`` wrapper the PyTorch converter writes) before JSON-parsing the groups.
PG_WRAPPER_CHARS = 2

#: What ``std::stoi`` reads: optional white space and sign, then decimal digits (the rest is ignored).
_STOI_PREFIX = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class GroupNameError(ChakraInputError, ValueError):
    """A ``pg_name`` that names no group: ASTRA-sim's ``stoi`` throws on it."""


def group_id(pg_name: str) -> int | None:
    """The communicator group a collective's ``pg_name`` names: ``None`` (:data:`DEFAULT_GROUP`) for
    all ranks, else the integer ASTRA-sim's ``stoi`` reads (see the module docstring).

    >>> group_id("12"), group_id("+3 (tp)")
    (12, 3)
    """
    if pg_name in DEFAULT_PG_NAMES:
        return DEFAULT_GROUP
    match = _STOI_PREFIX.match(pg_name)
    if match is None:
        raise GroupNameError(
            f"pg_name {pg_name!r} does not start with an integer",
            hint="map process groups to ids 1, 2, ... and write a comm groups file",
        )
    value = int(match.group())
    if not INT32_MIN <= value <= INT32_MAX:
        raise GroupNameError(f"pg_name {pg_name!r} is out of int range", hint="use small positive group ids")
    return value


def group_label(group: int | None) -> str:
    """How messages and tables name a group: its id, or ``"default"``."""
    return "default" if group is DEFAULT_GROUP else str(group)


def astra_group_id_note(group: int) -> str | None:
    """Why ``group`` is too large for ASTRA-sim, or None when it fits."""
    if group <= MAX_ASTRA_GROUP_ID:
        return None
    return (
        f"communicator group {group} is above {MAX_ASTRA_GROUP_ID}: ASTRA-sim's collective tags "
        f"(group id x 1,000,000) overflow a 32-bit int there"
    )


#: The highest rank a groups file may name: ASTRA-sim reads ranks as C++ ``int``.
MAX_RANK = (1 << 31) - 1


@dataclass(frozen=True)
class CommGroups(Mapping[int, tuple[int, ...]]):
    """Group id -> member ranks (global, sorted as given). An empty member list means every rank, as
    in METADATA nodes. Read-only; :meth:`merged` makes a new one."""

    groups: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", {int(k): tuple(v) for k, v in sorted(self.groups.items())})

    def __getitem__(self, group: int) -> tuple[int, ...]:
        return tuple(self.groups[group])

    def __iter__(self) -> Iterator[int]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def members(self, group: int | None, world_size: int) -> tuple[int, ...] | None:
        """The ranks of ``group`` in a workload of ``world_size`` ranks (the default group and an empty
        list: all of them), or ``None`` when the group is not defined."""
        if group is DEFAULT_GROUP:
            return tuple(range(world_size))
        members = self.groups.get(group)
        if members is None:
            return None
        return tuple(members) if members else tuple(range(world_size))

    def merged(self, other: Mapping[int, tuple[int, ...] | list[int]]) -> CommGroups:
        """These groups with ``other``'s added (``other`` wins where both define a group, as a METADATA
        node overwrites an earlier definition in ASTRA-sim)."""
        return CommGroups({**self.groups, **{int(k): tuple(v) for k, v in other.items()}})

    def to_json(self) -> dict[str, list[int]]:
        """ASTRA-sim's file format: string keys, rank lists."""
        return {str(k): list(v) for k, v in self.groups.items()}

    @classmethod
    def read(cls, path: PathLike) -> CommGroups:
        """Read an ASTRA-sim communicator-group file (``{"1": [0, 1], ...}``)."""
        path = Path(path)
        raw = parse_json(read_text(path, "comm groups"), path, "comm groups file", hint='write {"1": [0, 1], ...}')
        if not isinstance(raw, dict):
            raise ChakraInputError("comm groups must be a JSON object of group id -> rank list", path=path)
        groups: dict[int, tuple[int, ...]] = {}
        for key, ranks in raw.items():
            if not (key.isascii() and key.isdigit()):  # "²".isdigit() is true, but int() refuses it
                raise ChakraInputError(
                    f"group id {key!r} is not a decimal integer",
                    path=path,
                    hint="ASTRA-sim reads pg_name with stoi; use ids 1, 2, ...",
                )
            if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
                raise ChakraInputError(f"group {key}: ranks = {ranks!r} must be a list of integers", path=path)
            outside = next((r for r in ranks if not 0 <= r <= MAX_RANK), None)
            if outside is not None:
                raise ChakraInputError(
                    f"group {key} names rank {outside:,}, which no workload has (ranks are 0 to {MAX_RANK:,})",
                    path=path,
                    hint="list the ranks of the workload's files (PREFIX.{rank}.et)",
                )
            groups[int(key)] = tuple(ranks)
        return cls(groups)

    def write(self, path: PathLike) -> None:
        """Write ASTRA-sim's format, atomically."""
        text = json.dumps(self.to_json(), indent=2) + "\n"
        with io.AtomicFile(path) as f:
            f.write(text.encode())


def parse_process_groups(values: str) -> dict[int, tuple[int, ...]]:
    """Process groups of a METADATA node, read the way ASTRA-sim reads them (astra-sim.md §2.5):
    strip the 2+2 wrapper characters, JSON-parse a list of ``{"pg_name": "<int>", "ranks": [...]}``.

    Returns group id -> ranks (empty = all ranks). Raises ``ValueError`` where ASTRA-sim's parse
    fails (it then prints an error and drops the node's remaining groups).

    >>> parse_process_groups('[\\'[{"pg_name": "1", "ranks": [0, 2]}]\\']')
    {1: (0, 2)}
    """
    inner = values[PG_WRAPPER_CHARS:-PG_WRAPPER_CHARS] if len(values) >= 2 * PG_WRAPPER_CHARS else ""
    entries = json.loads(inner)
    if not isinstance(entries, list):
        raise ValueError("expected a JSON list of process groups")
    groups: dict[int, tuple[int, ...]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("pg_name"), str):
            raise ValueError("each group needs pg_name as a string")
        ranks = entry.get("ranks")
        if not isinstance(ranks, list) or not all(type(r) is int for r in ranks):
            raise ValueError(f"group {entry['pg_name']!r}: ranks must be a list of integers")
        match = _STOI_PREFIX.match(entry["pg_name"])
        if match is None:
            raise ValueError(f"pg_name {entry['pg_name']!r} is not an integer")
        groups[int(match.group())] = tuple(ranks)
    return groups


def process_groups_values(groups: Mapping[int, tuple[int, ...] | list[int]]) -> str:
    """The METADATA ``inputs.values`` text of ``groups``, in the form :func:`parse_process_groups` reads.

    >>> process_groups_values({1: (0, 2)})
    '[\\'[{"pg_name": "1", "ranks": [0, 2]}]\\']'
    """
    entries = [{"pg_name": str(k), "ranks": list(v)} for k, v in sorted(groups.items())]
    return "['" + json.dumps(entries) + "']"
