"""Where each task of a task graph ran, and what each transfer carried.

The labelled form says it (``device_id``, ``src_device_id``, ``dst_device_id``, ``comm_size``).
FlexFlow's own task graph does not: :func:`place` infers it from the strategy (or the computation
graph's machine views) and from how FlexFlow builds the graph (``Simulator::simulate_runtime``):

* a **direct edge** joins two tasks on one device (FlexFlow adds communication tasks whenever two
  tasks' memories differ), so the tasks joined by direct edges form classes, one device each;
* classes are placed in the order they start; a class takes a device its named tasks' operators
  run on (any device for a class of unnamed Update and Barrier tasks), the first, in the
  operator's partition order, that no other class of the same operator and kind took, that no
  class it exchanges a transfer with took (a transfer joins two devices), and where its tasks do
  not overlap what the device already runs (FlexFlow runs one task at a time per device); the
  report counts the tasks placed by one device, by order among several, and without a name to go
  by. Partitions of one operator whose order the file cannot tell may trade devices: the
  fidelity replay (``--check``) shows what that costs;
* the **Comm** tasks of one segment of one transfer (one per hop: NVLink, or PCIe, NIC, PCIe)
  share a name and follow each other: they become one transfer from the device of the task before
  the first hop to the device of the task after the last, lasting from the first hop's start to
  the last hop's end;
* a transfer's **bytes**: from the computation graph when given (the producing operator's output
  bytes per partition, or the consuming operator's input bytes, the smaller; split over the
  segments of the message), else from its duration at ``bandwidth`` (``latency`` first), else
  unknown (0, counted).

Example:
    placed = place(read_task_graph("mlp.taskgraph.dot"), read_strategy("mlp.strategy"))
    placed.device[3], placed.transfers[0].src, placed.transfers[0].dst, placed.inferred
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

import msgspec

from chakra.errors import ChakraInputError
from chakra.flexflow.compgraph import CompOp
from chakra.flexflow.strategy import Placement
from chakra.flexflow.taskgraph import Form, TaskGraph, TaskKind

#: Relative precision of FlexFlow's printed times (6 significant digits): two tasks of one device may
#: seem to overlap by this much of the later time.
TIME_PRECISION = 1e-5

#: How a transfer's bytes were found (the report's counters).
SIZE_RECORDED, SIZE_COMPGRAPH = "bytes from the labels", "bytes from the computation graph"
SIZE_BANDWIDTH, SIZE_UNKNOWN = "bytes from the duration and --bandwidth", "bytes unknown (written as 0)"
#: How a compute task's device was found (the report's counters).
BY_LABEL, BY_ONE_DEVICE = "devices from the labels", "devices: their operator's one device"
BY_ORDER, BY_TIMELINE = "devices: in order among their operator's devices", "devices: no name, the first free device"
BY_BUSY = "devices: over a busy one (the strategy leaves no free one)"


class Transfer(msgspec.Struct, gc=False):
    """One transfer: the comm tasks it is made of, the tasks it connects, where, how much, when. (A
    msgspec struct: one is made per transfer, and a dataclass's ``__init__`` runs in Python.)"""

    tasks: list[int]
    src_task: int | None
    dst_task: int | None
    src: int
    dst: int
    size_bytes: int
    size_from: str
    dur_ns: int
    start_ns: int | None
    name: str


@dataclass
class Placed:
    """Per task its device (``None`` for comm tasks) and transfer (``None`` for compute tasks)."""

    num_devices: int
    device: list[int | None]
    transfer_of: list[int | None]
    transfers: list[Transfer]
    inferred: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class LinkModel:
    """What sizes a transfer from its duration: bytes per ns, and a latency (ns) taken first."""

    bytes_per_ns: float
    latency_ns: float = 0.0


def place(
    graph: TaskGraph,
    strategy: Mapping[str, Placement] | None = None,
    compgraph: Mapping[str, CompOp] | None = None,
    *,
    link: LinkModel | None = None,
    num_devices: int | None = None,
    sources: tuple[str, ...] = (),
) -> Placed:
    """The devices and transfers of ``graph`` (see the module docstring); ``sources`` names the files the
    strategy and computation graph came from, in errors."""
    if graph.form is Form.LABELLED:
        return _place_labelled(graph, num_devices)
    devices_of = _devices_of(strategy, compgraph)
    count = num_devices or (max((d for ds in devices_of.values() for d in ds), default=0) + 1)
    has_comm = any(graph.is_comm)
    if has_comm and not devices_of:
        raise ChakraInputError(
            "the task graph names no devices and no strategy says where its operators ran",
            path=graph.path,
            hint="give --strategy (FlexFlow's --export-strategy file) or --compgraph",
        )
    predecessors, successors = graph.predecessors(), graph.successors()
    chains = _chains(graph, predecessors, successors)
    try:
        device, inferred = _devices(graph, devices_of, count, _Edges(chains, predecessors, successors))
    except _Unplaced as unplaced:
        where = " or ".join(sources) if sources else "the strategy"
        raise _position(
            graph, unplaced.index, f"operator {graph.name[unplaced.index]!r} is not in {where}",
            "give the strategy FlexFlow used for this task graph (--strategy), or its --compgraph",
        ) from None  # fmt: skip
    computes = [not comm for comm in graph.is_comm]
    start_ns, dur_ns, name = graph.start_ns, graph.dur_ns, graph.name
    transfer_of: list[int | None] = [None] * len(graph)
    transfers: list[Transfer] = []
    for chain in chains:
        head, tail = chain[0], chain[-1]
        src_task = next(filter(computes.__getitem__, predecessors[head]), None)
        dst_task = next(filter(computes.__getitem__, successors[tail]), None)
        src = device[src_task] if src_task is not None else None
        dst = device[dst_task] if dst_task is not None else None
        if src is None or dst is None:
            raise ChakraInputError(
                f"{graph.node[head]} ({name[head] or 'Comm'}) has no compute task at its "
                f"{'start' if src is None else 'end'}: its devices are unknown",
                path=graph.path,
                hint="a FlexFlow transfer runs from one task to another; fix the graph's edges",
            )
        for hop in chain:
            transfer_of[hop] = len(transfers)
        start = start_ns[head] or 0
        end = (start_ns[tail] or 0) + dur_ns[tail]
        transfers.append(Transfer(chain, src_task, dst_task, src, dst, 0, SIZE_UNKNOWN, end - start, start, name[head]))
    _size(graph, transfers, compgraph or {}, link)
    inferred.update(t.size_from for t in transfers)
    return Placed(count, device, transfer_of, transfers, inferred)


def _place_labelled(graph: TaskGraph, num_devices: int | None) -> Placed:
    compute = [d for d, comm in zip(graph.device, graph.is_comm, strict=True) if not comm]
    count = num_devices or (max((d for d in compute if d is not None), default=0) + 1)
    transfers: list[Transfer] = []
    transfer_of: list[int | None] = [None] * len(graph)
    for index, comm in enumerate(graph.is_comm):
        device, src, dst = graph.device[index], graph.src[index], graph.dst[index]
        for what, value in (("device", device), ("source device", src), ("destination device", dst)):
            if value is not None and value >= count:
                raise _position(
                    graph, index,
                    f"the {what} of {graph.node[index]} is {value}, out of range: the graph computes on devices "
                    f"0-{count - 1}",
                    "give --num-npus when devices compute nothing, or fix the label",
                )  # fmt: skip
        if comm:
            if src == dst:
                raise _position(graph, index, f"{graph.node[index]} sends from device {src} to itself")
            transfer_of[index] = len(transfers)
            size = graph.size_bytes[index] or 0
            transfers.append(
                Transfer([index], None, None, src or 0, dst or 0, size, SIZE_RECORDED, graph.dur_ns[index], None,
                         graph.name[index])
            )  # fmt: skip
    device_of = [None if comm else d for d, comm in zip(graph.device, graph.is_comm, strict=True)]
    inferred = Counter({BY_LABEL: len(compute)})
    inferred.update(t.size_from for t in transfers)
    return Placed(count, device_of, transfer_of, transfers, inferred)


def _position(graph: TaskGraph, index: int, message: str, hint: str = "fix the label") -> ChakraInputError:
    """An error at task ``index``'s declaration."""
    line, column = graph.at[index].tolist()
    return ChakraInputError(f"line {line}, column {column}: {message}", path=graph.path, hint=hint)


def _devices_of(
    strategy: Mapping[str, Placement] | None, compgraph: Mapping[str, CompOp] | None
) -> dict[str, tuple[int, ...]]:
    devices = {name: op.device_ids for name, op in (compgraph or {}).items() if op.device_ids}
    devices.update({name: p.device_ids for name, p in (strategy or {}).items() if p.device_ids})
    return devices


def _chains(graph: TaskGraph, predecessors: list[list[int]], successors: list[list[int]]) -> list[list[int]]:
    """The hops of each transfer: comm tasks of one name following each other, in order."""
    comm_name = [n if comm else None for n, comm in zip(graph.name, graph.is_comm, strict=True)]  # None: compute
    chains = []
    for index, name in enumerate(comm_name):
        if name is None:
            continue
        if name in map(comm_name.__getitem__, predecessors[index]):
            continue  # a later hop
        chain = [index]
        while name in map(comm_name.__getitem__, successors[chain[-1]]):  # most transfers are one hop
            chain.append(next(s for s in successors[chain[-1]] if comm_name[s] == name))
        chains.append(chain)
    start_ns = graph.start_ns
    return sorted(chains, key=lambda c: (start_ns[c[0]] or 0, c[0]))


#: Intervals added to a timeline at once from this many on (a class's tasks), one at a time below
#: (a transfer's span): merging costs a pass over what the timeline holds.
_MERGE_AT = 16


class _Timeline:
    """The busy intervals of one device or link (ns): whether more fit, and taking them back."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def fits(self, intervals: list[tuple[int, int]]) -> bool:
        for start, end in intervals:
            slack = TIME_PRECISION * max(end, 1) + 1
            at = bisect.bisect_left(self.starts, start)
            for k in (at - 1, at):
                if 0 <= k < len(self.starts) and self.starts[k] < end - slack and start < self.ends[k] - slack:
                    return False
        return True

    def fits_one(self, start: int, end: int) -> bool:
        """:meth:`fits` of one interval (a transfer's span on a link: most checks are of one)."""
        starts = self.starts
        slack = TIME_PRECISION * max(end, 1) + 1
        at = bisect.bisect_left(starts, start)
        if at > 0 and starts[at - 1] < end - slack and start < self.ends[at - 1] - slack:
            return False
        return not (at < len(starts) and starts[at] < end - slack and start < self.ends[at] - slack)

    def add(self, intervals: Sequence[tuple[int, int]]) -> None:
        """Insert each interval before those of its start already here, one after the other."""
        if len(intervals) < _MERGE_AT:
            for start, end in intervals:
                at = bisect.bisect_left(self.starts, start)
                self.starts.insert(at, start)
                self.ends.insert(at, end)
            return
        # the same order at once: by start, and at one start the later inserted first
        merged = sorted(reversed(intervals), key=itemgetter(0))
        merged.extend(zip(self.starts, self.ends, strict=True))
        merged.sort(key=itemgetter(0))
        self.starts = [start for start, _ in merged]
        self.ends = [end for _, end in merged]

    def remove(self, intervals: list[tuple[int, int]]) -> None:
        for start, end in intervals:
            at = bisect.bisect_left(self.starts, start)
            while self.ends[at] != end:
                at += 1
            del self.starts[at], self.ends[at]


class _Unplaced(Exception):
    """A task (its index) whose operator no strategy places (``place`` names the files)."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


#: Choices the search for a consistent placement may undo before it settles for the first free devices.
MAX_BACKTRACKS = 20_000


@dataclass
class _Class:
    """Tasks joined by direct edges (one device), what may hold them, and the transfers they exchange."""

    members: list[int]
    candidates: tuple[int, ...]
    keys: set[tuple[str, TaskKind]]
    intervals: list[tuple[int, int]]
    named: bool
    # (peer class, interval, whether this class sends)
    transfers: list[tuple[int, tuple[int, int], bool]] = field(default_factory=list)
    #: the transfers by peer class, in order (what the search checks a device against)
    by_peer: dict[int, list[tuple[tuple[int, int], bool]]] = field(default_factory=dict)


class _Edges(NamedTuple):
    """A task graph's transfers (comm task chains) and each task's predecessors and successors."""

    chains: list[list[int]]
    predecessors: list[list[int]]
    successors: list[list[int]]


def _devices(
    graph: TaskGraph, devices_of: Mapping[str, tuple[int, ...]], count: int, edges: _Edges
) -> tuple[list[int | None], Counter[str]]:
    """A device per compute task (the module docstring's rules), by a depth-first search over the
    classes in time order that backs out of a choice that leaves a later class no device."""
    classes = _classes(graph, devices_of, count, edges)
    chosen = _search(classes, count)
    device: list[int | None] = [None] * len(graph)
    inferred: Counter[str] = Counter()
    for cls, (dev, fits) in zip(classes, chosen, strict=True):
        how = BY_BUSY
        if fits:
            how = BY_TIMELINE if not cls.named else BY_ONE_DEVICE if len(cls.candidates) == 1 else BY_ORDER
        inferred[how] += len(cls.members)
        for i in cls.members:
            device[i] = dev
    return device, inferred


def _classes(graph: TaskGraph, devices_of: Mapping[str, tuple[int, ...]], count: int, edges: _Edges) -> list[_Class]:
    """The classes of tasks joined by direct edges, in the order they start, with their candidate
    devices and the transfers between them."""
    chains, predecessors, successors = edges
    name, kind, dur_ns = graph.name, graph.kind, graph.dur_ns
    # union-find, the roots' search inline (halving the paths it walks): a call per find was most of it
    parent = list(range(len(graph)))
    computes = [not comm for comm in graph.is_comm]
    for a, b in zip(graph.sources, graph.targets, strict=True):
        if computes[a] and computes[b]:
            while parent[a] != a:
                parent[a] = a = parent[parent[a]]
            while parent[b] != b:
                parent[b] = b = parent[parent[b]]
            parent[a] = b
    groups: dict[int, list[int]] = {}
    for index, compute in enumerate(computes):
        if compute:
            i = index
            while parent[i] != i:
                parent[i] = i = parent[parent[i]]
            groups.setdefault(i, []).append(index)
    start = [s or 0 for s in graph.start_ns]
    ordered = sorted(groups.values(), key=lambda m: min(zip(map(start.__getitem__, m), m, strict=True)))
    class_of = [-1] * len(graph)
    classes = []
    every = tuple(range(count))
    candidates_of: dict[tuple[str, ...], tuple[int, ...]] = {}
    for number, members in enumerate(ordered):
        named = [i for i in members if name[i]]
        placed_names = sorted({name[i] for i in named if name[i] in devices_of})
        if named and not placed_names and count > 1:
            raise _Unplaced(named[0])
        candidates = candidates_of.get(tuple(placed_names))
        if candidates is None:  # classes of the same operators recur over the graph: found once each
            candidates = every
            for op in placed_names:  # the devices every operator of the class runs on, in the first's order
                allowed = set(devices_of[op])
                candidates = tuple(d for d in (devices_of[op] if candidates is every else candidates) if d in allowed)
            candidates_of[tuple(placed_names)] = candidates
        intervals = [(start[i], start[i] + dur_ns[i]) for i in members]
        keys = {(name[i], kind[i]) for i in named} or {("", kind[i]) for i in members}
        classes.append(_Class(members, candidates or every, keys, intervals, bool(named)))
        for i in members:
            class_of[i] = number
    for chain in chains:
        senders = {class_of[p] for p in predecessors[chain[0]] if computes[p]}
        receivers = {class_of[s] for s in successors[chain[-1]] if computes[s]}
        span = (start[chain[0]], start[chain[-1]] + dur_ns[chain[-1]])
        for a in senders:
            for b in receivers:
                if a != b:
                    classes[a].transfers.append((b, span, True))
                    classes[b].transfers.append((a, span, False))
                    classes[a].by_peer.setdefault(b, []).append((span, True))
                    classes[b].by_peer.setdefault(a, []).append((span, False))
    return classes


def _search(classes: list[_Class], count: int) -> list[tuple[int, bool]]:
    """Each class's device, and whether it fits every rule (``False``: placed over a conflict)."""
    devices = [_Timeline() for _ in range(count)]
    links: dict[tuple[int, int], _Timeline] = {}
    taken: dict[tuple[str, TaskKind], set[int]] = {}
    placed: list[int | None] = [None] * len(classes)
    tried = [0] * len(classes)

    def link_spans(k: int, dev: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        spans = []
        for peer, span, sends in classes[k].transfers:
            other = placed[peer]
            if other is not None:
                spans.append(((dev, other) if sends else (other, dev), span))
        return spans

    def fits(k: int, dev: int) -> bool:
        cls = classes[k]
        if any(dev in taken.get(key, ()) for key in cls.keys):
            return False
        if dev in map(placed.__getitem__, cls.by_peer):
            return False
        if not devices[dev].fits(cls.intervals):
            return False
        for peer, spans in cls.by_peer.items():  # a link no transfer uses yet holds every span
            other = placed[peer]
            if other is None:
                continue
            for (start, end), sends in spans:
                link = links.get((dev, other) if sends else (other, dev))
                if link is not None and not link.fits_one(start, end):
                    return False
        return True

    def assign(k: int, dev: int) -> None:
        cls = classes[k]
        devices[dev].add(cls.intervals)
        for pair, span in link_spans(k, dev):
            link = links.get(pair)
            if link is None:
                link = links[pair] = _Timeline()
            link.add((span,))
        for key in cls.keys:
            taken.setdefault(key, set()).add(dev)
        placed[k] = dev

    def unassign(k: int) -> None:
        dev = placed[k]
        assert dev is not None
        placed[k] = None
        cls = classes[k]
        devices[dev].remove(cls.intervals)
        for pair, span in link_spans(k, dev):
            links[pair].remove([span])
        for key in cls.keys:
            taken[key].discard(dev)

    k, backtracks = 0, 0
    while 0 <= k < len(classes) and backtracks <= MAX_BACKTRACKS:
        if placed[k] is not None:
            unassign(k)
        cands = classes[k].candidates
        while tried[k] < len(cands) and not fits(k, cands[tried[k]]):
            tried[k] += 1
        if tried[k] < len(cands):
            assign(k, cands[tried[k]])
            tried[k] += 1
            k += 1
        else:
            tried[k] = 0
            k -= 1
            backtracks += 1
    result: list[tuple[int, bool]] = []
    for number, cls in enumerate(classes):
        dev = placed[number]
        if dev is None:  # no consistent placement within the search's budget: the first free device
            free = [d for d in cls.candidates if fits(number, d)]
            dev = free[0] if free else cls.candidates[0]
            assign(number, dev)
            result.append((dev, bool(free)))
        else:
            result.append((dev, True))
    return result


def _size(graph: TaskGraph, transfers: list[Transfer], compgraph: Mapping[str, CompOp], link: LinkModel | None) -> None:
    kind, name = graph.kind, graph.name
    segments = Counter((t.src_task, t.dst_task) for t in transfers)
    least_of: dict[tuple[str, str], int | None] = {}  # (producer, consumer) -> the fewer bytes known
    for transfer in transfers:
        size = None
        if compgraph and transfer.src_task is not None and transfer.dst_task is not None:
            src, dst = transfer.src_task, transfer.dst_task
            producer, consumer = (src, dst) if kind[src] is not TaskKind.BACKWARD else (dst, src)
            pair = (name[producer], name[consumer])
            if pair not in least_of:  # the operators of a model's transfers recur over its graph
                known = [
                    b for b in (_bytes(compgraph, pair[0], "out"), _bytes(compgraph, pair[1], "in")) if b is not None
                ]
                least_of[pair] = min(known) if known else None
            least = least_of[pair]
            if least is not None:
                size = least // segments[(transfer.src_task, transfer.dst_task)]
                transfer.size_from = SIZE_COMPGRAPH
        if size is None and link is not None:
            size = round(max(0.0, transfer.dur_ns - link.latency_ns) * link.bytes_per_ns)
            transfer.size_from = SIZE_BANDWIDTH
        transfer.size_bytes = size or 0


def _bytes(compgraph: Mapping[str, CompOp], name: str, side: str) -> int | None:
    op = compgraph.get(name)
    if op is None:
        return None
    return op.out_bytes if side == "out" else op.in_bytes
