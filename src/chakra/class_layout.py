"""A workload written as one file per class of equivalent ranks: chakra-et's own layout.

A generated job of 32,768 ranks holds a few distinct programs (one per pipeline stage): every rank of
a class runs the same nodes, only its communicator groups (``pg_name``) and its peers
(``comm_src``/``comm_dst``) are its own. Written as classes, the workload is

* ``PREFIX.class{k}.et``: the nodes of class ``k``'s representative rank, an ordinary ET;
* ``PREFIX.classes.json``: every rank's class, and the group names and peer ranks that replace the
  representative's in its nodes (:class:`ClassLayout`);
* ``PREFIX.comm_groups.json``, as beside rank files.

The layout is ours: ASTRA-sim and other tools read one file per rank, which :func:`expand_classes`
writes (``chakra expand``), byte for byte what the generator writes per rank. chakra-et's own
readers take it through :func:`chakra.open`: a rank's node table is its class's table with the
rank's groups and peers (:meth:`RankRenaming.table`), so ``info``, ``validate``, ``analyze``,
``report`` and ``simulate`` read 16 class files instead of 32,768 rank files.

The mapping file (version 1)::

    {"format": "chakra-et rank classes", "version": 1,
     "classes": [{"file": "job.class0.et", "representative": 0,
                  "groups": ["1", "9"], "peers": [0, 8]}, ...],
     "ranks": [[0, ["1", "9"], [0, 8]], [0, ["2", "9"], [1, 9]], ...]}

``ranks[i]`` is rank ``i``: its class, then its group names and its peers, aligned to its class's
``groups`` and ``peers`` (the representative's own rank is always its class's first peer).

Example:
    >>> layout = ClassLayout(
    ...     (ClassFile("job.class0.et", 0, ("1",), (0, 2)),),
    ...     [RankEntry(0, ("1",), (0, 2)), RankEntry(0, ("2",), (1, 3))])
    >>> renaming = layout.renaming(1)
    >>> renaming.group_names, renaming.peers
    ({'1': '2'}, {0: 1, 2: 3})
    >>> ClassLayout.from_json(layout.to_json(), "job.classes.json") == layout
    True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from chakra import io
from chakra.attrs import get_attr, set_attr
from chakra.documents import parse_json, read_text
from chakra.errors import ChakraInputError, PathLike
from chakra.groups import GroupNameError, group_id
from chakra.schema.protobuf.et_def_pb2 import Node
from chakra.table import DEFAULT_GROUP_ID, INVALID_GROUP_ID, NodeTable

#: The ``format`` value of a mapping file, and the version this module reads and writes.
CLASSES_FORMAT = "chakra-et rank classes"
CLASSES_VERSION = 1
#: The node attributes that make one rank's nodes differ from its class's: group names and peers.
RENAMED_ATTRS = ("pg_name", "comm_src", "comm_dst")


class ClassFile(NamedTuple):
    """One class: its file (a name beside the mapping file), its representative rank, and the group
    names and peer ranks its file holds (the representative's)."""

    file: str
    representative: int
    groups: tuple[str, ...]
    peers: tuple[int, ...]


class RankEntry(NamedTuple):
    """One rank: its class, and its group names and peers aligned to its class's."""

    class_index: int
    groups: tuple[str, ...]
    peers: tuple[int, ...]


def remap_values(values: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``values`` with every value found in ``old`` replaced by ``new`` at the same place; the rest
    unchanged (a new int64 array).

    >>> remap_values(np.array([5, 7, -1, 5]), np.array([7, 5]), np.array([70, 50])).tolist()
    [50, 70, -1, 50]
    """
    values = np.asarray(values, dtype=np.int64)
    if not len(old) or not len(values):
        return values.copy()
    order = np.argsort(old, kind="stable")
    keys, replacements = np.asarray(old, dtype=np.int64)[order], np.asarray(new, dtype=np.int64)[order]
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return np.where(keys[at] == values, replacements[at], values)


def _group_number(pg_name: str) -> int:
    """The table's group id of ``pg_name`` (the default group and a name that is no group included)."""
    try:
        found = group_id(pg_name)
    except GroupNameError:
        return INVALID_GROUP_ID
    return DEFAULT_GROUP_ID if found is None else found


@dataclass(frozen=True)
class RankRenaming:
    """How one rank's nodes differ from its class file's: each of the class's group names replaced
    by the rank's (``group_names``), each of its peer ranks by the rank's (``peers``)."""

    group_names: dict[str, str]
    peers: dict[int, int]

    @cached_property
    def group_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The renaming of groups as the table's group ids: (the class's, the rank's)."""
        old = [_group_number(name) for name in self.group_names]
        new = [_group_number(name) for name in self.group_names.values()]
        return np.array(old, dtype=np.int64), np.array(new, dtype=np.int64)

    @cached_property
    def peer_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The renaming of peers as arrays: (the class's ranks, the rank's)."""
        return np.array(list(self.peers), dtype=np.int64), np.array(list(self.peers.values()), dtype=np.int64)

    def groups_of(self, groups: np.ndarray) -> np.ndarray:
        """A column of group ids renamed."""
        return remap_values(groups, *self.group_ids)

    def peers_of(self, ranks: np.ndarray) -> np.ndarray:
        """A column of ranks (sources, destinations) renamed; absent values stay absent."""
        return remap_values(ranks, *self.peer_arrays)

    def table(self, table: NodeTable, rank: int) -> NodeTable:
        """The node table of ``rank``: ``table`` (its class's) with the rank's groups and peers; every
        other column shared, nothing derived from ``table`` carried over."""
        comm = table.comm
        names = self.group_names
        renamed = replace(
            comm,
            pg_name=[names.get(name, name) for name in comm.pg_name],
            group=self.groups_of(comm.group),
            src=self.peers_of(comm.src),
            dst=self.peers_of(comm.dst),
        )
        return replace(table, rank=rank, comm=renamed, derived_results={})

    def value(self, name: str, value: Any) -> Any:
        """This rank's value of the renamed attribute ``name`` (one of :data:`RENAMED_ATTRS`) whose
        class file holds ``value``."""
        return self.group_names.get(value, value) if name == "pg_name" else self.peers.get(value, value)

    def node(self, node: Node) -> bool:
        """Rename ``node``'s groups and peers in place (each attribute where it stands); whether it had any."""
        found = False
        for attr in node.attr:
            if attr.name in RENAMED_ATTRS:
                found = True
                set_attr(node, attr.name, self.value(attr.name, get_attr(node, attr.name)))
        return found


@dataclass(frozen=True)
class ClassLayout:
    """The rank-to-class mapping of a workload written as classes (see the module doc): ``classes``
    by index, ``ranks`` by rank."""

    classes: tuple[ClassFile, ...]
    ranks: Sequence[RankEntry]

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def ranks_of(self, class_index: int) -> list[int]:
        """The ranks of class ``class_index``, ascending."""
        return [rank for rank, entry in enumerate(self.ranks) if entry.class_index == class_index]

    def renaming(self, rank: int) -> RankRenaming:
        """How ``rank``'s nodes differ from its class file's."""
        entry = self.ranks[rank]
        cls = self.classes[entry.class_index]
        return RankRenaming(dict(zip(cls.groups, entry.groups, strict=True)),
                            dict(zip(cls.peers, entry.peers, strict=True)))  # fmt: skip

    def to_json(self) -> str:
        """The mapping file's text."""
        classes = [{"file": c.file, "representative": c.representative, "groups": list(c.groups),
                    "peers": list(c.peers)} for c in self.classes]  # fmt: skip
        head = json.dumps({"format": CLASSES_FORMAT, "version": CLASSES_VERSION, "classes": classes})
        # one rank a line: a 32k-rank mapping stays readable and diffable
        lines = ",\n".join(json.dumps([e.class_index, list(e.groups), list(e.peers)]) for e in self.ranks)
        return head[:-1] + ',\n"ranks": [\n' + lines + "\n]}\n"

    def write(self, path: PathLike) -> None:
        """Write the mapping file atomically."""
        with io.AtomicFile(path) as out:
            out.write(self.to_json().encode())

    @classmethod
    def read(cls, path: PathLike) -> ClassLayout:
        """Read and check a mapping file; every mistake is a :class:`ChakraInputError` naming it."""
        return cls.from_json(read_text(path, "classes"), path)

    @classmethod
    def from_json(cls, text: str, path: PathLike) -> ClassLayout:
        """The mapping of ``text`` (the file ``path``), checked: every class's file, representative,
        groups and peers, every rank's class and as many groups and peers as its class."""
        document = parse_json(text, path, "classes file")
        problem = _Problems(path)
        if not isinstance(document, dict) or document.get("format") != CLASSES_FORMAT:
            raise problem(f'is not a {CLASSES_FORMAT!r} mapping (no matching "format")')
        if document.get("version") != CLASSES_VERSION:
            raise problem(f"has version {document.get('version')!r}; this chakra-et reads version {CLASSES_VERSION}",
                          hint="upgrade chakra-et, or write the workload again")  # fmt: skip
        raw_classes, raw_ranks = document.get("classes"), document.get("ranks")
        if not isinstance(raw_classes, list) or not raw_classes or not isinstance(raw_ranks, list):
            raise problem('needs a non-empty "classes" list and a "ranks" list')
        classes = tuple(_rank_class(item, k, problem) for k, item in enumerate(raw_classes))
        ranks = [_rank_entry(item, rank, classes, problem) for rank, item in enumerate(raw_ranks)]
        for k, c in enumerate(classes):
            if not 0 <= c.representative < len(ranks) or ranks[c.representative] != (k, c.groups, c.peers):
                raise problem(f"class {k}: its representative {c.representative} is not a rank of it as listed")
        return cls(classes, ranks)


class _Problems:
    """Makes the one-line errors of a mapping file."""

    def __init__(self, path: PathLike):
        self.path = path

    def __call__(self, message: str, hint: str | None = None) -> ChakraInputError:
        hint = hint or "write the workload again with `chakra generate llm --classes`"
        return ChakraInputError(message, path=self.path, hint=hint)


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return tuple(value)
    return None


def _rank_class(item: Any, index: int, problem: _Problems) -> ClassFile:
    if not isinstance(item, dict):
        raise problem(f"class {index} is not an object")
    file, representative = item.get("file"), item.get("representative")
    groups, peers = _strings(item.get("groups")), _ints(item.get("peers"))
    if not isinstance(file, str) or "/" in file or not file.endswith(".et"):
        raise problem(f'class {index}: "file" must name an .et file beside the mapping, not {file!r}')
    if not isinstance(representative, int) or groups is None or peers is None:
        raise problem(f'class {index}: needs "representative" (a rank), "groups" (names) and "peers" (ranks)')
    if len(set(groups)) != len(groups) or len(set(peers)) != len(peers):
        raise problem(f"class {index}: a group name or peer is listed twice")
    return ClassFile(file, representative, groups, peers)


def _rank_entry(item: Any, rank: int, classes: tuple[ClassFile, ...], problem: _Problems) -> RankEntry:
    if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], int) and 0 <= item[0] < len(classes)):
        raise problem(f"rank {rank}: expected [class, [groups], [peers]] with a class below {len(classes)}")
    groups, peers = _strings(item[1]), _ints(item[2])
    cls = classes[item[0]]
    if groups is None or peers is None or len(groups) != len(cls.groups) or len(peers) != len(cls.peers):
        raise problem(f"rank {rank}: class {item[0]} has {len(cls.groups)} groups and {len(cls.peers)} peers; "
                      "the rank must list as many")  # fmt: skip
    return RankEntry(item[0], groups, peers)


class ClassLayoutBuilder:
    """Collects a layout as a producer writes it: :meth:`add_class` per class file, then
    :meth:`add_rank` per rank with its renaming of the class's groups and peers (checked to be one
    name per name: two of the class's groups may not become one group of a rank, nor the reverse)."""

    def __init__(self) -> None:
        self._classes: list[ClassFile] = []
        self._ranks: dict[int, RankEntry] = {}

    def add_class(self, file: str, representative: int, groups: Sequence[str], peers: Sequence[int]) -> int:
        """A class (its representative's group names and peers, the representative first); its index."""
        peers = [representative, *(p for p in dict.fromkeys(peers) if p != representative)]
        self._classes.append(ClassFile(file, representative, tuple(dict.fromkeys(groups)), tuple(peers)))
        self.add_rank(representative, len(self._classes) - 1, lambda name: name, lambda peer: peer)
        return len(self._classes) - 1

    def add_rank(self, rank: int, class_index: int, group_name: Callable[[str], str],
                 peer: Callable[[int], int]) -> None:  # fmt: skip
        """Rank ``rank`` of class ``class_index``: ``group_name`` and ``peer`` rename the class's."""
        cls = self._classes[class_index]
        groups = tuple(group_name(name) for name in cls.groups)
        peers = tuple(peer(p) for p in cls.peers)
        if len(set(groups)) != len(groups) or len(set(peers)) != len(peers):
            raise ChakraInputError(f"rank {rank} cannot be written as class {class_index}: two of the class's "
                                   "groups or peers are one of the rank's", hint="write one file per rank")  # fmt: skip
        self._ranks[rank] = RankEntry(class_index, groups, peers)

    def build(self) -> ClassLayout:
        missing = sorted(set(range(len(self._ranks))) - set(self._ranks))
        if missing or max(self._ranks, default=-1) != len(self._ranks) - 1:
            raise ChakraInputError(f"the classes leave ranks without a class (first: {missing[:1]})")
        return ClassLayout(tuple(self._classes), [self._ranks[r] for r in range(len(self._ranks))])


def class_file_of(layout_path: Path, cls: ClassFile) -> Path:
    """The path of ``cls``'s file, beside the mapping file ``layout_path``."""
    return layout_path.with_name(cls.file)
