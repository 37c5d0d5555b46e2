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
* the **Comm** tasks of one segment of one transfer (:mod:`chakra.flexflow.transfers`) become one
  transfer from the device of the task before the first hop to the device of the task after the
  last; its bytes are found there too.

The tasks' classes are found with arrays over the edges (a task graph holds hundreds of thousands);
the search then works class by class.

Example:
    placed = place(read_task_graph("mlp.taskgraph.dot"), read_strategy("mlp.strategy"))
    placed.device[3], placed.transfers.src[0], placed.transfers.dst[0], placed.inferred
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from chakra.collector import gc_paused
from chakra.errors import ChakraInputError
from chakra.flexflow.compgraph import CompOp
from chakra.flexflow.strategy import Placement
from chakra.flexflow.taskgraph import Form, TaskGraph, TaskKind
from chakra.flexflow.transfers import (
    SIZE_RECORDED,
    Chains,
    LinkModel,
    Transfers,
    find_chains,
    size_transfers,
    transfers_of,
)

#: Relative precision of FlexFlow's printed times (6 significant digits): two tasks of one device may
#: seem to overlap by this much of the later time.
TIME_PRECISION = 1e-5

#: How a compute task's device was found (the report's counters).
BY_LABEL, BY_ONE_DEVICE = "devices from the labels", "devices: their operator's one device"
BY_ORDER, BY_TIMELINE = "devices: in order among their operator's devices", "devices: no name, the first free device"
BY_BUSY = "devices: over a busy one (the strategy leaves no free one)"


@dataclass
class Placed:
    """How many devices the ETs are for; per task its device (-1 for comm tasks) and transfer (-1 for
    compute tasks); the transfers; and how many tasks and transfers each rule placed or sized
    (``inferred``, the report's counters)."""

    num_devices: int
    device: np.ndarray
    transfer_of: np.ndarray
    transfers: Transfers
    inferred: Counter[str] = field(default_factory=Counter)


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
    # tuples per task and transfer for the search: the collector's passes over them took as long as the search
    with gc_paused():
        return _place(graph, strategy, compgraph, link, num_devices, sources)


def _place(
    graph: TaskGraph,
    strategy: Mapping[str, Placement] | None,
    compgraph: Mapping[str, CompOp] | None,
    link: LinkModel | None,
    num_devices: int | None,
    sources: tuple[str, ...],
) -> Placed:
    if graph.form is Form.LABELLED:
        return _place_labelled(graph, num_devices)
    devices_of = _devices_of(strategy, compgraph)
    count = num_devices or (max((d for ds in devices_of.values() for d in ds), default=0) + 1)
    beyond = next(((op, d) for op, ds in devices_of.items() for d in ds if d >= count), None)
    if beyond is not None:
        raise ChakraInputError(
            f"operator {beyond[0]!r} runs on device {beyond[1]}, past the {count} device{'s' * (count != 1)} asked for",
            path=" or ".join(sources) if sources else graph.path,
            hint="give --num-npus above every device the strategy names, or leave it out",
        )
    has_comm = any(graph.is_comm)
    if has_comm and not devices_of:
        raise ChakraInputError(
            "the task graph names no devices and no strategy says where its operators ran",
            path=graph.path,
            hint="give --strategy (FlexFlow's --export-strategy file) or --compgraph",
        )
    chains = find_chains(graph)
    try:
        device, inferred = _devices(graph, devices_of, count, chains)
    except _Unplaced as unplaced:
        where = " or ".join(sources) if sources else "the strategy"
        raise _position(
            graph, unplaced.index, f"operator {graph.name[unplaced.index]!r} is not in {where}",
            "give the strategy FlexFlow used for this task graph (--strategy), or its --compgraph",
        ) from None  # fmt: skip
    transfers = transfers_of(graph, chains, device)
    size_transfers(graph, transfers, compgraph or {}, link)
    inferred.update(transfers.size_from)
    return Placed(count, device, chains.transfer_of, transfers, inferred)


def _place_labelled(graph: TaskGraph, num_devices: int | None) -> Placed:
    compute = [d for d, comm in zip(graph.device, graph.is_comm, strict=True) if not comm]
    count = num_devices or (max((d for d in compute if d is not None), default=0) + 1)
    comms: list[int] = []  # each comm task is a transfer of its own
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
            comms.append(index)

    def column(values: Sequence[int | None]) -> np.ndarray:
        return np.array([values[t] or 0 for t in comms], dtype=np.int64)

    def unknown() -> np.ndarray:  # the labelled form names no tasks at a transfer's ends and no start
        return np.full(len(comms), -1, dtype=np.int64)

    transfers = Transfers(
        [[t] for t in comms], unknown(), unknown(), column(graph.src), column(graph.dst),
        [graph.size_bytes[t] or 0 for t in comms], [SIZE_RECORDED] * len(comms), column(graph.dur_ns),
        unknown(), [graph.name[t] for t in comms],
    )  # fmt: skip
    transfer_of = np.full(len(graph), -1, dtype=np.int64)
    transfer_of[comms] = np.arange(len(comms))
    device_of = [-1 if comm or d is None else d for d, comm in zip(graph.device, graph.is_comm, strict=True)]
    inferred = Counter({BY_LABEL: len(compute)})
    inferred.update(transfers.size_from)
    return Placed(count, np.array(device_of, dtype=np.int64), transfer_of, transfers, inferred)


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


def _devices(
    graph: TaskGraph, devices_of: Mapping[str, tuple[int, ...]], count: int, chains: Chains
) -> tuple[np.ndarray, Counter[str]]:
    """A device per compute task, -1 for a comm task (the module docstring's rules), by a depth-first
    search over the classes in time order that backs out of a choice that leaves a later class no device."""
    classes = _classes(graph, devices_of, count, chains)
    chosen = _search(classes, count)
    device = np.full(len(graph), -1, dtype=np.int64)
    inferred: Counter[str] = Counter()
    for cls, (dev, fits) in zip(classes, chosen, strict=True):
        how = BY_BUSY
        if fits:
            how = BY_TIMELINE if not cls.named else BY_ONE_DEVICE if len(cls.candidates) == 1 else BY_ORDER
        inferred[how] += len(cls.members)
        device[cls.members] = dev
    return device, inferred


def _classes(graph: TaskGraph, devices_of: Mapping[str, tuple[int, ...]], count: int, chains: Chains) -> list[_Class]:
    """The classes of tasks joined by direct edges, in the order they start, with their candidate
    devices and the transfers between them."""
    name, kind, dur_ns = graph.name, graph.kind, graph.dur_ns
    computes = np.flatnonzero(~graph.comm)
    label = _components(len(graph), graph.sources, graph.targets, computes)
    start_of = graph.start_or_zero_ns
    # a class's place: its first task in time (then by index)
    in_time = computes[np.lexsort((computes, start_of[computes]))]
    _, first_seen = np.unique(label[in_time], return_index=True)
    number_of = np.empty(len(graph), dtype=np.int64)
    number_of[label[in_time][np.sort(first_seen)]] = np.arange(len(first_seen))
    class_of = np.full(len(graph), -1, dtype=np.int64)
    class_of[computes] = number_of[label[computes]]
    by_class = computes[np.argsort(class_of[computes], kind="stable")]  # each class's tasks in index order
    bounds = np.searchsorted(class_of[by_class], np.arange(len(first_seen) + 1)).tolist()
    tasks, start = by_class.tolist(), start_of.tolist()
    classes = []
    every = tuple(range(count))
    candidates_of: dict[tuple[str, ...], tuple[int, ...]] = {}
    for number in range(len(first_seen)):
        members = tasks[bounds[number] : bounds[number + 1]]
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
    _exchanges(classes, class_of, chains)
    return classes


def _components(n: int, sources: np.ndarray, targets: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """A label per task, shared by the ``kept`` tasks joined by edges between kept tasks (its smallest
    index): the roots hooked to the smaller, then every task taken to its root, until no edge joins two.

    >>> _components(5, np.array([0, 3, 2]), np.array([1, 4, 4]), np.array([0, 1, 2, 4])).tolist()
    [0, 0, 2, 3, 2]
    """
    keep = np.zeros(n, dtype=bool)
    keep[kept] = True
    joined = keep[sources] & keep[targets]
    a, b = sources[joined], targets[joined]
    label = np.arange(n, dtype=np.int64)
    while True:
        la, lb = label[a], label[b]
        apart = la != lb
        if not apart.any():
            return label
        np.minimum.at(label, np.maximum(la[apart], lb[apart]), np.minimum(la[apart], lb[apart]))
        while True:  # every label a root: each points at a smaller one, so this ends
            root = label[label]
            if np.array_equal(root, label):
                break
            label = root


def _exchanges(classes: list[_Class], class_of: np.ndarray, chains: Chains) -> None:
    """Each class's transfers (peer class, span, whether it sends), in transfer order: every class
    sending to a transfer's first hop with every class receiving from its last, but a class and itself."""
    spans = np.stack([chains.start_ns, chains.end_ns], axis=1)
    count = len(chains.hops)
    (before, sender_task), (after, receiver_task) = chains.before, chains.after
    senders, receivers = class_of[sender_task], class_of[receiver_task]
    one = (np.bincount(before, minlength=count) == 1) & (np.bincount(after, minlength=count) == 1)
    sender, receiver = np.full(count, -1, dtype=np.int64), np.full(count, -1, dtype=np.int64)
    sender[before[one[before]]], receiver[after[one[after]]] = senders[one[before]], receivers[one[after]]
    pairs = np.flatnonzero(one & (sender != receiver))
    # rows (transfer, class, peer, sends): one per end of a pair; a transfer of several ends in Python,
    # as sets, in the order its ends are found
    rows = [
        np.repeat(pairs, 2),
        np.stack([sender[pairs], receiver[pairs]], axis=1).ravel(),
        np.stack([receiver[pairs], sender[pairs]], axis=1).ravel(),
        np.tile([1, 0], len(pairs)),
    ]
    several: list[tuple[int, int, int, int]] = []
    senders_of, receivers_of = senders.tolist(), receivers.tolist()
    before_at = np.searchsorted(before, np.arange(count + 1)).tolist()
    after_at = np.searchsorted(after, np.arange(count + 1)).tolist()
    for number in np.flatnonzero(~one).tolist():
        sending = set(senders_of[before_at[number] : before_at[number + 1]])
        receiving = set(receivers_of[after_at[number] : after_at[number + 1]])
        for a in sending:
            for b in receiving:
                if a != b:
                    several += ((number, a, b, 1), (number, b, a, 0))
    if several:
        extra = np.array(several, dtype=np.int64).reshape(-1, 4).T
        rows = [np.concatenate([r, e]) for r, e in zip(rows, extra, strict=True)]
        by_transfer = np.argsort(rows[0], kind="stable")
        rows = [r[by_transfer] for r in rows]
    transfer, cls, peer, sends = rows
    by_class = np.argsort(cls, kind="stable")
    bounds = np.searchsorted(cls[by_class], np.arange(len(classes) + 1)).tolist()
    peers, sends_of = peer[by_class].tolist(), sends[by_class].astype(bool).tolist()
    span_of = list(map(tuple, spans[transfer[by_class]].tolist()))
    for number, exchanging in enumerate(classes):
        at, end = bounds[number], bounds[number + 1]
        exchanging.transfers = list(zip(peers[at:end], span_of[at:end], sends_of[at:end], strict=True))
        for peer_class, span, send in exchanging.transfers:
            exchanging.by_peer.setdefault(peer_class, []).append((span, send))


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
        by_link: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for pair, span in link_spans(k, dev):
            by_link.setdefault(pair, []).append(span)
        for pair, spans in by_link.items():  # at once per link: the order of adding them one at a time
            link = links.get(pair)
            if link is None:
                link = links[pair] = _Timeline()
            link.add(spans)
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
