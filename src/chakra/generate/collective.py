"""Collective algorithms written as per-rank Chakra ETs, the form ASTRA-sim's custom collectives take.

:func:`algorithm_ranks` builds, for ``n`` ranks, each rank's SEND, RECV and COMP nodes of one
collective with one algorithm; :func:`write_algorithm` writes them as ``PREFIX.{rank}.et``, the files a
system file's ``all-reduce-implementation-custom: ["PREFIX"]`` (and the other three types') names.
Users edit them (another schedule, another tree) and simulate the result with ``chakra simulate``
or ASTRA-sim.

Ranks are algorithm ranks, positions in the collective's group. Sizes follow the collective node's
``comm_size``: the whole buffer of an all-reduce, reduce-scatter or all-to-all (a piece is
``size // n``), a rank's own contribution to an all-gather. A message's tag is the chain of
messages it belongs to (0 for one chain; the two directions of a bidirectional ring and the two
trees of a double binary tree 0 and 1; direct's reduce-scatter 0, its all-gather 1), as MSCCL's
channels are. Every receive that reduces is followed by a COMP node of the reduction's time,
``3 · bytes / local-mem-bw`` (read two operands, write one, as ASTRA-sim counts a local
reduction) truncated to whole µs, as ``duration_micros`` holds it.

* ``ring``: rank ``r`` sends to ``r + 1`` and receives from ``r − 1``; all-reduce is ``n − 1``
  reduce-scatter steps (send, receive, reduce) then ``n − 1`` all-gather steps; all-to-all passes
  ``n(n − 1)/2`` pieces round the ring, as ASTRA-sim's ring does. One chain of nodes, each step
  after the one before.
* ``bidirectional-ring``: two rings, each over half the data, one each way round.
* ``direct``: every rank sends its piece to every other at once and receives theirs; all-reduce
  reduces what it receives, then sends the reduced piece to every other (tag 1).
* ``halving-doubling``: ``log2 n`` steps with the partner at distance ``1, 2, 4, …`` (reduce-scatter:
  halving the message), all-gather from distance ``n/2`` down (doubling it), all-reduce both, as
  ASTRA-sim's ``halvingDoubling``; a power-of-two ``n``.
* ``double-binary-tree`` (all-reduce): half the data up and down each of two binary trees, rooted at
  the last rank and the first, reduced on the way up; a power-of-two ``n``.

Example:
    >>> ranks = algorithm_ranks(AlgorithmSpec("ring", "all-gather", ranks=4, size_bytes=1024))
    >>> [(node.name, node.type) for node in ranks[0][:2]]
    [('ring_ag_send_0', 5), ('ring_ag_recv_1', 6)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra import io, trace, workload_writer
from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
    GlobalMetadata,
    Node,
)
from chakra.units import NS_PER_US

#: Collective names on the command line -> their CollectiveCommType, and short tags in node names.
COLLECTIVES: dict[str, int] = {"all-reduce": ALL_REDUCE, "reduce-scatter": REDUCE_SCATTER, "all-gather": ALL_GATHER,
               "all-to-all": ALL_TO_ALL}  # fmt: skip
_SHORT: dict[int, str] = {ALL_REDUCE: "ar", REDUCE_SCATTER: "rs", ALL_GATHER: "ag", ALL_TO_ALL: "a2a"}
#: Algorithms this module writes, and the collectives each takes.
ALGORITHMS = {
    "ring": frozenset(COLLECTIVES.values()),
    "bidirectional-ring": frozenset({ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER}),
    "direct": frozenset(COLLECTIVES.values()),
    "halving-doubling": frozenset({ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER}),
    "double-binary-tree": frozenset({ALL_REDUCE}),
}
#: ASTRA-sim's name of the built-in algorithm each one writes, where it has one.
BUILT_IN_NAMES = {"ring": "ring", "direct": "direct", "halving-doubling": "halvingDoubling",
                  "double-binary-tree": "doubleBinaryTree"}  # fmt: skip
#: Memory passes per reduced byte: two operands read, the sum written.
REDUCTION_MEMORY_PASSES = 3
#: The reduction's memory bandwidth when none is given: ASTRA-sim's custom-collective example system's.
DEFAULT_LOCAL_MEM_BW_GBPS = 50.0


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm to write: its name, collective, rank count, the collective's ``comm_size`` and
    the local memory bandwidth (GB/s) its reductions take."""

    algorithm: str
    collective: str
    ranks: int
    size_bytes: int
    local_mem_bw_gbps: float = DEFAULT_LOCAL_MEM_BW_GBPS

    @property
    def comm_type(self) -> int:
        return COLLECTIVES[self.collective]


@dataclass
class _Rank:
    """One rank's nodes as they are built: each new node after the ones its chain last added."""

    rank: int
    short: str
    nodes: list[Node] = field(default_factory=list)

    def send(self, to: int, size: int, tag: int, after: list[int], label: str) -> int:
        return self._add(label, "send", COMM_SEND_NODE, after, comm_src=self.rank, comm_dst=to, comm_size=size,
                         comm_tag=tag)  # fmt: skip

    def recv(self, source: int, size: int, tag: int, after: list[int], label: str) -> int:
        return self._add(label, "recv", COMM_RECV_NODE, after, comm_src=source, comm_dst=self.rank,
                         comm_size=size, comm_tag=tag)  # fmt: skip

    def reduce(self, duration_us: int, after: list[int], label: str) -> int:
        return self._add(label, "reduce", COMP_NODE, after, duration_us=duration_us)

    def _add(self, label: str, what: str, node_type: int, after: list[int], duration_us: int = 0, **attrs: Any) -> int:
        node_id = len(self.nodes)
        name = f"{label}_{self.short}_{what}_{node_id}"
        self.nodes.append(trace.new_node(node_id, name, node_type, data_deps=after, duration_us=duration_us,
                                         is_cpu_op=False, **attrs))  # fmt: skip
        return node_id


def reduction_us(size_bytes: int, local_mem_bw_gbps: float) -> int:
    """The COMP node's whole µs for reducing ``size_bytes``: ``3 · trunc(m / bw)`` ns, truncated to µs
    (the rule ASTRA-sim's MSCCL converter writes at 50 GB/s; GB/s are bytes per ns).

    >>> reduction_us(131072, 50.0)  # 3 · 2621 ns
    7
    """
    return int(REDUCTION_MEMORY_PASSES * int(size_bytes / local_mem_bw_gbps) / NS_PER_US)


def algorithm_ranks(spec: AlgorithmSpec) -> list[list[Node]]:
    """Each rank's nodes of ``spec`` (module docstring), node ids from 0 in every rank."""
    _check(spec)
    n, kind = spec.ranks, spec.comm_type
    ranks = [_Rank(r, _SHORT[kind]) for r in range(n)]
    red = reduction_us(spec.size_bytes // n if kind != ALL_GATHER else spec.size_bytes, spec.local_mem_bw_gbps)
    name = spec.algorithm
    for rank in ranks:
        if name == "ring":
            _ring(rank, n, kind, spec.size_bytes, red, step=1, tag=0, label="ring")
        elif name == "bidirectional-ring":
            half = spec.size_bytes // 2
            half_red = reduction_us(half // n if kind != ALL_GATHER else half, spec.local_mem_bw_gbps)
            _ring(rank, n, kind, half, half_red, step=1, tag=0, label="cw")
            _ring(rank, n, kind, spec.size_bytes - half, half_red, step=-1, tag=1, label="ccw")
        elif name == "direct":
            _direct(rank, n, kind, spec.size_bytes, red)
        elif name == "halving-doubling":
            _halving_doubling(rank, n, kind, spec.size_bytes, spec.local_mem_bw_gbps)
        else:
            half = spec.size_bytes // 2
            red_half = reduction_us(half, spec.local_mem_bw_gbps)
            _tree(rank, n, half, red_half, root_max=True, tag=0)
            _tree(rank, n, spec.size_bytes - half, red_half, root_max=False, tag=1)
    return [rank.nodes for rank in ranks]


def write_algorithm(
    prefix: str | Path, spec: AlgorithmSpec, ranks: list[list[Node]] | None = None
) -> workload_writer.WrittenWorkload:
    """Write ``spec``'s ranks (``ranks`` when already built) as ``PREFIX.{rank}.et``, atomically,
    through the core writer, the algorithm, collective and size in the files' metadata (what
    ``chakra validate --target custom-collective`` checks the messages against)."""
    ranks = ranks if ranks is not None else algorithm_ranks(spec)
    metadata = GlobalMetadata(version=io.FORMAT_VERSION)
    for key, value in (("algorithm", spec.algorithm), ("collective", spec.collective)):
        attr = metadata.attr.add()
        attr.name, attr.string_val = key, value
    size = metadata.attr.add()
    size.name, size.int64_val = "size_bytes", spec.size_bytes
    return workload_writer.write_workload(prefix, dict(enumerate(ranks)), metadata=metadata)


def _check(spec: AlgorithmSpec) -> None:
    if spec.algorithm not in ALGORITHMS:
        raise ChakraInputError(f"unknown algorithm {spec.algorithm!r}", hint=f"use one of {', '.join(ALGORITHMS)}")
    if spec.collective not in COLLECTIVES:
        raise ChakraInputError(f"unknown collective {spec.collective!r}", hint=f"use one of {', '.join(COLLECTIVES)}")
    if spec.comm_type not in ALGORITHMS[spec.algorithm]:
        takes = ", ".join(name for name, kind in COLLECTIVES.items() if kind in ALGORITHMS[spec.algorithm])
        raise ChakraInputError(
            f"{spec.algorithm} does not write {spec.collective}", hint=f"{spec.algorithm} writes {takes}"
        )
    if spec.ranks < 2:
        raise ChakraInputError(f"a collective algorithm over {spec.ranks} ranks", hint="give --ranks 2 or more")
    power_of_two = spec.ranks & (spec.ranks - 1) == 0
    if spec.algorithm in ("halving-doubling", "double-binary-tree") and not power_of_two:
        raise ChakraInputError(
            f"{spec.algorithm} over {spec.ranks} ranks: it pairs ranks at distances 1, 2, 4, ... and needs a "
            "power-of-two count",
            hint="give --ranks a power of two, or use ring or direct",
        )
    if spec.size_bytes < spec.ranks or spec.local_mem_bw_gbps <= 0:
        raise ChakraInputError(
            f"size {spec.size_bytes} bytes over {spec.ranks} ranks, local-mem-bw {spec.local_mem_bw_gbps} GB/s",
            hint="give --size at least one byte per rank and a positive --local-mem-bw",
        )


def _ring(rank: _Rank, n: int, kind: int, size: int, red: int, *, step: int, tag: int, label: str) -> None:
    """One ring, ``step`` +1 (to ``r + 1``) or -1, its steps one after another on one chain."""
    to, source = (rank.rank + step) % n, (rank.rank - step) % n
    piece = size // n
    if kind == ALL_GATHER:
        steps = [(size, False)] * (n - 1)
    elif kind == ALL_TO_ALL:
        steps = [(piece, False)] * (n * (n - 1) // 2)
    else:
        steps = [(piece, True)] * (n - 1) + ([(piece, False)] * (n - 1) if kind == ALL_REDUCE else [])
    last: list[int] = []
    for message, reduces in steps:
        sent = rank.send(to, message, tag, last, label)
        last = [rank.recv(source, message, tag, [sent], label)]
        if reduces:
            last = [rank.reduce(red, last, label)]


def _direct(rank: _Rank, n: int, kind: int, size: int, red: int) -> None:
    """Every peer at once: sends and receives of the first exchange start together."""
    message = size if kind == ALL_GATHER else size // n
    peers = [p for p in range(n) if p != rank.rank]
    for peer in peers:
        rank.send(peer, message, 0, [], "direct")
    reduced = []
    for peer in peers:
        received = rank.recv(peer, message, 0, [], "direct")
        if kind in (ALL_REDUCE, REDUCE_SCATTER):
            reduced.append(rank.reduce(red, [received], "direct"))
    if kind == ALL_REDUCE:
        for peer in peers:
            rank.send(peer, message, 1, reduced, "direct")
        for peer in peers:
            rank.recv(peer, message, 1, [], "direct")


def _halving_doubling(rank: _Rank, n: int, kind: int, size: int, bw: float) -> None:
    """Partners ``r ± d`` (``r / d`` even: ahead), one step after another."""
    levels = n.bit_length() - 1
    plan: list[tuple[int, int, bool]] = []  # (distance, message bytes, reduces)
    if kind in (ALL_REDUCE, REDUCE_SCATTER):
        plan += [(1 << s, size >> (s + 1), True) for s in range(levels)]
    if kind == ALL_REDUCE:
        plan += [(n >> k, (size >> (levels + 1)) << k, False) for k in range(1, levels + 1)]
    if kind == ALL_GATHER:
        plan += [(n >> (s + 1), size << s, False) for s in range(levels)]
    last: list[int] = []
    for distance, message, reduces in plan:
        partner = rank.rank + distance if (rank.rank // distance) % 2 == 0 else rank.rank - distance
        sent = rank.send(partner, message, 0, last, "hd")
        last = [rank.recv(partner, message, 0, [sent], "hd")]
        if reduces:
            last = [rank.reduce(reduction_us(message, bw), last, "hd")]


def _tree(rank: _Rank, n: int, size: int, red: int, *, root_max: bool, tag: int) -> None:
    """One binary tree: receive and reduce from the children, send up, receive the result, send down."""
    parent, children = _tree_links(n, root_max)[rank.rank]
    label = f"tree{tag}"
    got = [rank.reduce(red, [rank.recv(child, size, tag, [], label)], label) for child in children]
    if parent >= 0:
        up = rank.send(parent, size, tag, got, label)
        got = [rank.recv(parent, size, tag, [up], label)]
    for child in children:
        rank.send(child, size, tag, got, label)


def _tree_links(n: int, root_max: bool) -> list[tuple[int, list[int]]]:
    """Each rank's parent (-1 at the top) and children in a binary tree over ``n`` (a power of two):
    a top rank over a perfect in-order-numbered tree of the other ``n − 1``, as ASTRA-sim's
    ``BinaryTree`` builds it (top: the last rank for ``root_max``, else the first)."""
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]

    def hang(first: int, count: int, above: int) -> None:
        if count == 0:
            return
        middle = first + count // 2
        parent[middle] = above
        children[above].append(middle)
        hang(first, count // 2, middle)
        hang(middle + 1, count // 2, middle)

    if root_max:
        hang(0, n - 1, n - 1)
    else:
        hang(1, n - 1, 0)
    return [(parent[r], children[r]) for r in range(n)]
