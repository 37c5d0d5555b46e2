"""The trace model: :class:`Trace` (one rank's file) and :class:`TraceSet` (a multi-rank workload).

A workload on disk is ``PREFIX.{rank}.et`` (optionally ``.gz``/``.zst``) plus, where process groups
exist, ``PREFIX.comm_groups.json`` in ASTRA-sim's format (``{"1": [0, 1, 2, 3], ...}``).

Example:
    >>> trace = Trace.load("llama.0.et")                  # doctest: +SKIP
    >>> trace.node(42).name
    >>> workload = TraceSet.discover("runs/llama")       # llama.0.et, llama.1.et, ...
    >>> for rank, trace in workload: ...
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from chakra import io
from chakra.errors import ChakraInputError
from chakra.graph import TraceGraph, build_graph, topological_order
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

_RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz|\.zst|\.zstd)?$")
COMM_GROUPS_SUFFIX = ".comm_groups.json"


def rank_of(path: str | Path) -> int | None:
    """The rank encoded in a ``PREFIX.{rank}.et`` file name, or ``None``."""
    match = _RANK_FILE.match(Path(path).name)
    return int(match.group("rank")) if match else None


class Trace:
    """One rank: ``metadata`` (GlobalMetadata), ``nodes`` in file order, and an id index.

    The index, children map and graph are built on first use and cached; after changing
    ``nodes`` directly call :meth:`reindex` (or add nodes with :meth:`add`, which keeps them).
    """

    def __init__(
        self, metadata: GlobalMetadata | None = None, nodes: Iterable[Node] = (), path: str | Path | None = None
    ):
        self.metadata = metadata if metadata is not None else GlobalMetadata(version=io.FORMAT_VERSION)
        self.nodes: list[Node] = list(nodes)
        self.path = Path(path) if path is not None else None
        self._index: dict[int, int] | None = None
        self._graph: TraceGraph | None = None

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a whole ``.et`` file (plain, ``.gz`` or ``.zst``)."""
        metadata, nodes = io.read(path)
        return cls(metadata, nodes, path)

    def save(self, path: str | Path, *, compress: str | None = "auto") -> None:
        """Write atomically; compression by suffix unless ``compress`` says otherwise."""
        io.write(path, self.metadata, self.nodes, compress=compress)

    @property
    def rank(self) -> int | None:
        return rank_of(self.path) if self.path is not None else None

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __repr__(self) -> str:
        where = f" {self.path}" if self.path else ""
        return f"<Trace{where}: {len(self.nodes)} nodes>"

    # -- index and structure -------------------------------------------------------------
    def reindex(self) -> None:
        """Forget cached index and graph (after editing ``nodes`` in place)."""
        self._index = None
        self._graph = None

    @property
    def index(self) -> dict[int, int]:
        """Node id -> position in ``nodes``; for a duplicated id the last one wins (as in the C++ feeders)."""
        if self._index is None:
            self._index = {node.id: i for i, node in enumerate(self.nodes)}
        return self._index

    def node(self, node_id: int) -> Node:
        """The node with this id; ``KeyError`` if absent."""
        return self.nodes[self.index[node_id]]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.index

    def add(self, node: Node) -> Node:
        """Append ``node`` (copied into a fresh message) and return the stored message."""
        stored = Node()
        stored.CopyFrom(node)
        if self._index is not None:
            self._index[stored.id] = len(self.nodes)
        self.nodes.append(stored)
        self._graph = None
        return stored

    def children(self) -> dict[int, list[int]]:
        """Parent id -> ids of nodes that depend on it (data or ctrl), each child listed once."""
        result: dict[int, list[int]] = {}
        for node in self.nodes:
            for parent in dict.fromkeys([*node.data_deps, *node.ctrl_deps]):
                result.setdefault(parent, []).append(node.id)
        return result

    def graph(self) -> TraceGraph:
        """The compact array view (cached): ids, types, durations, CSR of deps."""
        if self._graph is None:
            self._graph = build_graph(self.nodes)
        return self._graph

    def topological_order(self) -> list[Node]:
        """Nodes with every node after its dependencies; raises if the graph has a cycle."""
        order = topological_order(self.graph())
        if len(order) != len(self.nodes):
            raise ChakraInputError(
                f"dependency graph has a cycle ({len(self.nodes) - len(order)} nodes cannot be ordered)",
                path=self.path,
                hint="run `chakra validate` to see the cycle",
            )
        return [self.nodes[i] for i in order.tolist()]

    def durations_us(self) -> np.ndarray:
        return self.graph().dur_us


def read_comm_groups(path: str | Path) -> dict[int, list[int]]:
    """Read an ASTRA-sim communicator-group file: ``{"1": [0, 1], ...}`` -> ``{1: [0, 1]}``."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ChakraInputError("no such comm groups file", path=path) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot read comm groups file: {exc.strerror}", path=path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ChakraInputError(f"not valid JSON: {exc}", path=path) from None
    if not isinstance(raw, dict):
        raise ChakraInputError("comm groups must be a JSON object of group id -> rank list", path=path)
    groups: dict[int, list[int]] = {}
    for key, ranks in raw.items():
        if not (key.isascii() and key.isdigit()):  # "²".isdigit() is true, but int() refuses it
            raise ChakraInputError(
                f"group id {key!r} is not a decimal integer",
                path=path,
                hint="ASTRA-sim reads pg_name with stoi; use ids 1, 2, ...",
            )
        if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            raise ChakraInputError(f"group {key}: ranks must be a list of integers", path=path)
        groups[int(key)] = ranks
    return groups


def comm_groups_beside(path: str | Path) -> dict[int, list[int]] | None:
    """The groups of ``PREFIX.comm_groups.json`` next to a ``PREFIX.{rank}.et`` file, if there is one."""
    match = _RANK_FILE.match(Path(path).name)
    if match is None:
        return None
    groups_path = Path(path).with_name(match.group("prefix") + COMM_GROUPS_SUFFIX)
    return read_comm_groups(groups_path) if groups_path.is_file() else None


def write_comm_groups(path: str | Path, groups: dict[int, list[int]]) -> None:
    """Write groups in ASTRA-sim's format, atomically."""
    text = json.dumps({str(k): list(v) for k, v in sorted(groups.items())}, indent=2) + "\n"
    with io.AtomicFile(path) as f:
        f.write(text.encode())


class TraceSet:
    """One workload: ``ranks`` maps rank -> file of ``PREFIX.{rank}.et``; ``comm_groups`` if present.

    Traces are loaded on demand (``load(rank)`` or iteration), one at a time.
    """

    def __init__(self, prefix: str | Path, ranks: dict[int, Path], comm_groups: dict[int, list[int]] | None = None):
        self.prefix = Path(prefix)
        self.ranks = dict(sorted(ranks.items()))
        self.comm_groups = comm_groups

    @classmethod
    def discover(cls, where: str | Path) -> TraceSet:
        """Find a workload from its prefix (``dir/llama``), one of its files, or a directory holding one workload."""
        where = Path(where)
        if where.is_dir():
            prefixes = {m.group("prefix") for p in where.iterdir() if (m := _RANK_FILE.match(p.name))}
            if len(prefixes) != 1:
                found = ", ".join(sorted(prefixes)) or "none"
                raise ChakraInputError(
                    f"expected one workload PREFIX.{{rank}}.et in the directory, found: {found}",
                    path=where,
                    hint="pass the prefix, e.g. DIR/PREFIX",
                )
            prefix = where / prefixes.pop()
        elif (match := _RANK_FILE.match(where.name)) is not None:
            prefix = where.parent / match.group("prefix")
        else:
            prefix = where
        directory = prefix.parent if str(prefix.parent) else Path(".")
        ranks: dict[int, Path] = {}
        if directory.is_dir():
            for p in directory.iterdir():
                m = _RANK_FILE.match(p.name)
                if m and m.group("prefix") == prefix.name:
                    rank = int(m.group("rank"))
                    if rank in ranks:
                        raise ChakraInputError(
                            f"rank {rank} exists twice ({ranks[rank].name}, {p.name})", path=directory
                        )
                    ranks[rank] = p
        if not ranks:
            raise ChakraInputError(
                f"no files {prefix.name}.{{rank}}.et found",
                path=directory,
                hint="a workload is PREFIX.0.et, PREFIX.1.et, ...",
            )
        groups_path = prefix.with_name(prefix.name + COMM_GROUPS_SUFFIX)
        groups = read_comm_groups(groups_path) if groups_path.exists() else None
        return cls(prefix, ranks, groups)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks below the highest one that have no file (ASTRA-sim needs one file per NPU)."""
        if not self.ranks:
            return []
        return [r for r in range(max(self.ranks) + 1) if r not in self.ranks]

    def load(self, rank: int) -> Trace:
        return Trace.load(self.ranks[rank])

    def __iter__(self) -> Iterator[tuple[int, Trace]]:
        for rank in self.ranks:
            yield rank, self.load(rank)

    def __len__(self) -> int:
        return len(self.ranks)

    def __repr__(self) -> str:
        return f"<TraceSet {self.prefix}: {len(self.ranks)} ranks>"
