"""The transfers of a task graph, as columns: the comm tasks each is made of, the tasks at its ends,
its devices and its bytes.

In FlexFlow's own task graph (:func:`find_chains`) the **Comm** tasks of one segment of one transfer
(one per hop: NVLink, or PCIe, NIC, PCIe) share a name and follow each other: they make one transfer
from the compute task before its first hop to the one after its last, lasting from the first hop's
start to the last hop's end. :mod:`chakra.flexflow.placement` gives them devices; :func:`size_transfers`
their bytes: from the computation graph when given (the producing operator's output bytes per
partition, or the consuming operator's input bytes, the smaller; split over the segments of the
message), else from the duration at a link's bandwidth (latency first), else unknown (0, counted).

A task graph holds tens of thousands of transfers: they are found with arrays over the edges, and
kept as one column per field rather than an object each.

Example:
    >>> from chakra.flexflow.dot import parse_dot
    >>> from chakra.flexflow.taskgraph import task_graph_of
    >>> graph = task_graph_of(parse_dot('''digraph g {
    ...     a [label="{ A | Forward | { 0 | 1 } }"]; h [label="{ seg 0 from A to B | Comm | { 1 | 2 } }"];
    ...     b [label="{ B | Forward | { 2 | 3 } }"]; a -> h; h -> b; }''', "g.dot"))
    >>> chains = find_chains(graph)
    >>> chains.hops, chains.before[1].tolist(), chains.after[1].tolist()
    ([[1]], [0], [2])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from chakra.errors import ChakraInputError
from chakra.flexflow.compgraph import CompOp
from chakra.flexflow.dot import position_error
from chakra.flexflow.taskgraph import MAX_BYTES, TaskGraph, TaskKind

#: How a transfer's bytes were found (the report's counters).
SIZE_RECORDED, SIZE_COMPGRAPH = "bytes from the labels", "bytes from the computation graph"
SIZE_BANDWIDTH, SIZE_UNKNOWN = "bytes from the duration and --bandwidth", "bytes unknown (written as 0)"


@dataclass(frozen=True)
class LinkModel:
    """What sizes a transfer from its duration: bytes per ns, and a latency (ns) taken first."""

    bytes_per_ns: float
    latency_ns: float = 0.0


@dataclass
class Transfers:
    """The transfers, one entry per transfer in each column: the comm tasks it is made of (``hops``,
    in order), the compute tasks before and after it (``src_task``, ``dst_task``; -1 in the labelled
    form), its source and destination devices, its bytes and how they were found, its duration and
    start (ns; a start of -1: not known, the labelled form) and its name."""

    hops: list[list[int]]
    src_task: np.ndarray
    dst_task: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size_bytes: list[int]
    size_from: list[str]
    dur_ns: np.ndarray
    start_ns: np.ndarray
    name: list[str]

    def __len__(self) -> int:
        return len(self.hops)


@dataclass
class Chains:
    """The transfers of FlexFlow's form as found in its graph: the hops of each, the transfers in the
    order their first hops start (then by task); each one's first and last hop (``heads``,
    ``tails``) and its span (``start_ns``: the first hop's start, ``end_ns``: the last's end); each
    task's transfer (``transfer_of``, -1 for a compute task); and the compute tasks
    joined to them: ``before`` rows (transfer, task) of the edges
    from a compute task to a first hop, ``after`` those from a last hop to a compute task, each sorted
    by transfer and in edge order within one."""

    hops: list[list[int]]
    heads: np.ndarray
    tails: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    transfer_of: np.ndarray
    before: tuple[np.ndarray, np.ndarray]
    after: tuple[np.ndarray, np.ndarray]

    def first(self, rows: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Per transfer, the task of its first row (-1: none)."""
        transfer, task = rows
        found = np.full(len(self.hops), -1, dtype=np.int64)
        at, first_row = np.unique(transfer, return_index=True)
        found[at] = task[first_row]
        return found


def find_chains(graph: TaskGraph) -> Chains:
    """The transfers of FlexFlow's own task graph (see the module docstring)."""
    comm = graph.comm
    a, b = graph.sources, graph.targets
    name = graph.name
    # hops of one transfer: an edge between two comm tasks of one name
    later: set[int] = set()
    next_hop: dict[int, int] = {}  # a hop -> the next (its first such successor, in edge order)
    between = comm[a] & comm[b]
    for x, y in zip(a[between].tolist(), b[between].tolist(), strict=True):
        if name[x] == name[y]:
            later.add(y)
            next_hop.setdefault(x, y)
    is_head = comm.copy()
    is_head[list(later)] = False
    heads = np.flatnonzero(is_head)
    start = graph.start_or_zero_ns
    heads = heads[np.lexsort((heads, start[heads]))]
    transfer_of = np.full(len(graph), -1, dtype=np.int64)
    if not next_hop:  # every transfer one hop
        hops = [[head] for head in heads.tolist()]
        transfer_of[heads] = np.arange(len(heads))
        tails = heads
    else:
        hops = []
        for number, head in enumerate(heads.tolist()):
            chain = [head]
            while chain[-1] in next_hop:
                chain.append(next_hop[chain[-1]])
            for hop in chain:  # a hop two chains share is the later one's
                transfer_of[hop] = number
            hops.append(chain)
        tails = np.array([chain[-1] for chain in hops], dtype=np.int64)
        stray = np.flatnonzero(comm & (transfer_of < 0))
        if stray.size:  # a later hop that no chain reaches: its hop before goes on to another
            task = int(stray[0])
            line, column = graph.at[task].tolist()
            raise position_error(
                graph.path, line, column,
                f"{graph.node[task]} ({name[task]}) follows a hop of its transfer that another hop follows too: "
                "a transfer's hops follow one another",
                "fix the graph's edges: each hop leads to at most one next hop of its name",
            )  # fmt: skip
    computes = ~comm
    dur = np.array(graph.dur_ns, dtype=np.int64)
    return Chains(
        hops, heads, tails, start[heads], start[tails] + dur[tails], transfer_of,
        _rows_by_chain(heads, b, a, computes[a]), _rows_by_chain(tails, a, b, computes[b]),
    )  # fmt: skip


def _rows_by_chain(
    ends: np.ndarray, edge_end: np.ndarray, other: np.ndarray, kept: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(chain, task) rows: for each kept edge whose ``edge_end`` is a chain's end (``ends[chain]``; a
    task may end several chains), the edge's ``other`` task; by chain, in edge order within one."""
    by_end = np.argsort(ends, kind="stable")
    sorted_ends = ends[by_end]
    edge_end, other = edge_end[kept], other[kept]
    low = np.searchsorted(sorted_ends, edge_end, side="left")
    count = np.searchsorted(sorted_ends, edge_end, side="right") - low
    edge = np.repeat(np.arange(len(edge_end)), count)
    # the k-th chain of an edge's end: low + k, k counted within the edge's repeats
    offset = np.arange(len(edge)) - np.repeat(np.cumsum(count) - count, count)
    chain = by_end[np.repeat(low, count) + offset]
    order = np.lexsort((edge, chain))
    return chain[order], other[edge[order]]


def transfers_of(graph: TaskGraph, chains: Chains, device: np.ndarray) -> Transfers:
    """The transfers of FlexFlow's form once its compute tasks have devices (``device``: per task, -1
    for comm tasks), their bytes unknown."""
    src_task, dst_task = chains.first(chains.before), chains.first(chains.after)
    missing = np.flatnonzero((src_task < 0) | (dst_task < 0))
    if missing.size:
        head = int(chains.heads[missing[0]])
        where = "start" if src_task[missing[0]] < 0 else "end"
        raise ChakraInputError(
            f"{graph.node[head]} ({graph.name[head] or 'Comm'}) has no compute task at its {where}: its devices "
            "are unknown",
            path=graph.path,
            hint="a FlexFlow transfer runs from one task to another; fix the graph's edges",
        )
    name = graph.name
    count = len(chains.hops)
    return Transfers(
        chains.hops, src_task, dst_task, device[src_task], device[dst_task], [0] * count, [SIZE_UNKNOWN] * count,
        chains.end_ns - chains.start_ns, chains.start_ns, [name[h] for h in chains.heads.tolist()],
    )  # fmt: skip


def size_transfers(
    graph: TaskGraph, transfers: Transfers, compgraph: Mapping[str, CompOp], link: LinkModel | None
) -> None:
    """Each transfer's bytes and how they were found (see the module docstring), in place."""
    kind, name = graph.kind, graph.name
    src_tasks, dst_tasks = transfers.src_task.tolist(), transfers.dst_task.tolist()
    segments = Counter(zip(src_tasks, dst_tasks, strict=True))
    least_of: dict[tuple[str, str], int | None] = {}  # (producer, consumer) -> the fewer bytes known
    size_bytes, size_from = transfers.size_bytes, transfers.size_from
    backward = TaskKind.BACKWARD
    for k, (src, dst, dur_ns) in enumerate(zip(src_tasks, dst_tasks, transfers.dur_ns.tolist(), strict=True)):
        size = None
        if compgraph and src >= 0 and dst >= 0:
            producer, consumer = (src, dst) if kind[src] is not backward else (dst, src)
            pair = (name[producer], name[consumer])
            if pair not in least_of:  # the operators of a model's transfers recur over its graph
                sides = (_bytes(compgraph, pair[0], "out"), _bytes(compgraph, pair[1], "in"))
                known = [b for b in sides if b is not None]
                least_of[pair] = min(known) if known else None
            least = least_of[pair]
            if least is not None:
                size = least // segments[(src, dst)]
                size_from[k] = SIZE_COMPGRAPH
        if size is None and link is not None:
            size = round(max(0.0, dur_ns - link.latency_ns) * link.bytes_per_ns)
            size_from[k] = SIZE_BANDWIDTH
            if size > MAX_BYTES:
                raise ChakraInputError(
                    f"{graph.node[transfers.hops[k][0]]} lasts {dur_ns:,} ns: {size:,} bytes at the link's bandwidth, "
                    f"past what a transfer holds ({MAX_BYTES:,})",
                    path=graph.path,
                    hint="give a --bandwidth that fits the task graph's times",
                )
        size_bytes[k] = size or 0


def _bytes(compgraph: Mapping[str, CompOp], name: str, side: str) -> int | None:
    op = compgraph.get(name)
    if op is None:
        return None
    return op.out_bytes if side == "out" else op.in_bytes
