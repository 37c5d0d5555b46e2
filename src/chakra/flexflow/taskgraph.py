"""FlexFlow task graphs: the simulator's own (``--taskgraph``) and upstream Chakra's labelled form.

**FlexFlow's task graph** (``Simulator::simulate_runtime`` with ``--taskgraph FILE``, FlexFlow
2021): one record node per simulated task, ``label="{ NAME | KIND | { START | END } }"`` (no NAME
for Update and Barrier tasks), and an edge per dependency. KIND is Forward, Backward, Comm, Update
or Barrier; START and END are the simulator's times in **milliseconds** (its cost model's unit).
A Comm task is one hop of one segment of a transfer, named ``seg J from SRC to DST`` after the
tasks it connects; no device and no byte count are written: :mod:`chakra.flexflow.placement`
infers them from the strategy.

**Upstream's labelled task graph** (what upstream Chakra's removed FlexFlow converter read):
``label="{device_id=0|Dense_100|Forward|COMP_NODE|simulated_run_time=0.0205}"`` for compute and
``{device_id=12|NAME|Comm|COMM_SEND_RECV_NODE|src_device_id=3|dst_device_id=0|comm_size=1605632|run_time=0.0015}``
for a transfer. Fields are read by key (``npu_id``/``device_id``, ``wall_clock_time``/
``simulated_run_time``, ``comm_src``/``src_device_id``, ``comm_dst``/``dst_device_id``,
``comm_size``, ``run_time``); the first other field is the name, a Forward/Backward/... field the
phase. Times are FlexFlow's milliseconds unless ``time_unit`` says otherwise (upstream read them
as seconds); the file holds no schedule, only durations.

:func:`read_task_graph` reads either (told apart by their labels) into a :class:`TaskGraph`; every
mistake (a label that does not parse, an unknown kind, a time that is not a number, an edge to a
node never declared, a dependency cycle) is one :class:`~chakra.errors.ChakraInputError` naming
the file, line and column.

Example:
    graph = read_task_graph("mlp.taskgraph.dot")
    graph.form, len(graph.tasks), graph.makespan_ns
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from enum import Enum

import msgspec
import numpy as np

from chakra.errors import PathLike
from chakra.flexflow.dot import DotGraph, DotNode, parse_record, position_error, read_dot
from chakra.flexflow.strategy import MAX_DEVICES
from chakra.graph import CycleError, graph_from_arrays, topological_order
from chakra.table import MAX_DUR_NS

#: The largest transfer a label may give (comm_size is an int64).
MAX_BYTES = (1 << 63) - 1

#: Nanoseconds in one unit of each time unit a task graph may use.
NS_PER = {"ms": 1_000_000, "s": 1_000_000_000, "us": 1_000}
NS_PER_MS = NS_PER["ms"]
#: FlexFlow's simulator's unit.
FLEXFLOW_TIME_UNIT = "ms"


class TaskKind(str, Enum):
    """FlexFlow's task kinds (``SimTask::get_type_str``)."""

    FORWARD = "Forward"
    BACKWARD = "Backward"
    COMM = "Comm"
    UPDATE = "Update"
    BARRIER = "Barrier"


#: Each kind by its text (a dict lookup: calling TaskKind(text) runs Enum's lookup in Python, per task).
KIND_OF_TEXT = {kind.value: kind for kind in TaskKind}


class Form(str, Enum):
    FLEXFLOW = "flexflow"  # the simulator's --taskgraph file
    LABELLED = "labelled"  # upstream Chakra's device-labelled file


#: Keys of the labelled form, by meaning (the names upstream's files and its documentation use).
DEVICE_KEYS = ("device_id", "npu_id")
TIME_KEYS = ("simulated_run_time", "wall_clock_time")
SRC_KEYS = ("src_device_id", "comm_src")
DST_KEYS = ("dst_device_id", "comm_dst")
SIZE_KEYS = ("comm_size",)
COMM_TIME_KEYS = ("run_time",)
KNOWN_KEYS = frozenset(DEVICE_KEYS + TIME_KEYS + SRC_KEYS + DST_KEYS + SIZE_KEYS + COMM_TIME_KEYS)
COMP_NODE, COMM_NODE = "COMP_NODE", "COMM_SEND_RECV_NODE"


class Task(msgspec.Struct, gc=False):
    """One task: where it was declared, what it is, its time (ns), and what the labelled form says of
    its device (compute) or its transfer (comm). (A msgspec struct: one is made per task, and a
    dataclass's ``__init__`` runs in Python.)"""

    index: int
    node: str
    name: str
    kind: TaskKind
    dur_ns: int
    line: int
    column: int
    start_ns: int | None = None  # FlexFlow's form only
    device: int | None = None  # labelled form: compute tasks
    src: int | None = None  # labelled form: transfers
    dst: int | None = None
    size_bytes: int | None = None
    #: read for every task by every pass (a property was a tenth of a conversion): set from ``kind``
    is_comm: bool = False

    def __post_init__(self) -> None:
        self.is_comm = self.kind is TaskKind.COMM


@dataclass
class TaskGraph:
    """The tasks in declaration order and the dependencies between them (``edges``: index pairs,
    predecessor first)."""

    path: str
    form: Form
    tasks: list[Task]
    edges: list[tuple[int, int]]
    _order: list[int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def makespan_ns(self) -> int | None:
        """The simulated makespan (last end − first start), ``None`` for the labelled form (no schedule)."""
        starts = [t.start_ns for t in self.tasks if t.start_ns is not None]
        if not starts:
            return None
        return max([t.start_ns + t.dur_ns for t in self.tasks if t.start_ns is not None]) - min(starts)

    def predecessors(self) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in self.tasks]
        for a, b in self.edges:
            found[b].append(a)
        return found

    def successors(self) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in self.tasks]
        for a, b in self.edges:
            found[a].append(b)
        return found

    def order(self) -> list[int]:
        """The tasks in dependency order (declaration order among ready ones), found once: a graph
        is not changed once read."""
        if self._order is None:
            self._order = _topological(self)
        return self._order


def read_task_graph(path: PathLike, *, time_unit: str | None = None) -> TaskGraph:
    """Read a task graph of either form. ``time_unit`` (``ms``, ``s``, ``us``) is the unit of the
    labelled form's times (default FlexFlow's ms); FlexFlow's own form is always in ms."""
    return task_graph_of(read_dot(path), time_unit=time_unit)


def task_graph_of(dot: DotGraph, *, time_unit: str | None = None) -> TaskGraph:
    if time_unit is not None and time_unit not in NS_PER:
        raise position_error(dot.path, 1, 1, f"unknown time unit {time_unit!r}", f"one of {', '.join(NS_PER)}")
    declared = [node for node in dot.nodes if "label" in node.attrs]
    undeclared = [node for node in dot.nodes if "label" not in node.attrs]
    if undeclared:
        node = undeclared[0]
        raise position_error(
            dot.path, node.line, node.column, f"{node.name} has no label: it is named but never declared as a task",
            "every task is a node statement with a record label",
        )  # fmt: skip
    if not declared:
        raise position_error(dot.path, 1, 1, "the graph holds no task", "give a task graph FlexFlow wrote")
    labelled = any(COMP_NODE in node.attrs["label"] or COMM_NODE in node.attrs["label"] for node in declared)
    unit = NS_PER[time_unit or FLEXFLOW_TIME_UNIT]
    tasks = (
        [_labelled_task(i, node, dot.path, unit) for i, node in enumerate(declared)]
        if labelled
        else _flexflow_tasks(declared, dot.path)
    )
    index = {node.name: i for i, node in enumerate(declared)}
    edges = [(index[e.source], index[e.target]) for e in dot.edges]
    for edge, (a, b) in zip(dot.edges, edges, strict=True):
        if a == b:
            raise position_error(dot.path, edge.line, edge.column, f"{edge.source} depends on itself (a cycle)")
    graph = TaskGraph(dot.path, Form.LABELLED if labelled else Form.FLEXFLOW, tasks, edges)
    graph.order()  # refuse a cycle now, naming its tasks
    return graph


def _fields(node: DotNode, path: str) -> list:  # type: ignore[type-arg]
    try:
        return parse_record(node.attrs["label"])
    except ValueError:
        raise position_error(
            path, node.line, node.column, f"the label of {node.name} has unbalanced braces: {node.attrs['label']!r}"
        ) from None


def _time_ns(text: object, unit_ns: int, node: DotNode, path: str, what: str) -> float:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise position_error(path, node.line, node.column, f"{what} of {node.name} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0 or value * unit_ns > MAX_DUR_NS:
        raise position_error(
            path, node.line, node.column, f"{what} of {node.name} is {text!r}: not a time (at most 2^62 ns)"
        )
    return value * unit_ns


#: FlexFlow's label as it writes it, ``{ NAME | KIND | { START | END } }`` (NAME optional), read at once;
#: anything else goes through the record parser (escapes, other spacing) and its errors.
_FLEXFLOW_LABEL = re.compile(r"\{ (?:([^|{}\\<>]*?) \| )?(\w+) \| \{ ([^|{}]*) \| ([^|{}]*) \} \}")


def _flexflow_task(index: int, node: DotNode, path: str) -> Task:
    """The task of one node of FlexFlow's own form (:func:`_flexflow_tasks`)."""
    return _flexflow_tasks([node], path, first=index)[0]


def _flexflow_tasks(nodes: list[DotNode], path: str, first: int = 0) -> list[Task]:
    """The tasks of the nodes of FlexFlow's own form, numbered from ``first``: each label as FlexFlow
    writes it read here at once, anything else (and every fault) by :func:`_checked_flexflow_task`.
    A time's text recurs over a graph (FlexFlow prints 6 digits): each is read once."""
    fullmatch, kind_of = _FLEXFLOW_LABEL.fullmatch, KIND_OF_TEXT.get
    times: dict[str, tuple[float, int]] = {}  # a time's text -> its ns, as a float and rounded
    tasks = []
    for index, node in enumerate(nodes, start=first):
        match = fullmatch(node.attrs["label"])
        if match is not None:
            name, kind_text, start_text, end_text = match.groups()
            kind = kind_of(kind_text)
            try:
                start, start_ns = times.get(start_text) or times.setdefault(start_text, _ns(start_text))
                end, end_ns = times.get(end_text) or times.setdefault(end_text, _ns(end_text))
            except (ValueError, OverflowError):  # not a number, or not finite: the checked reader says so
                kind = None
            if kind is not None and 0 <= start <= end <= MAX_DUR_NS:
                name = name.strip() if name is not None else ""
                tasks.append(Task(index, node.name, name, kind, end_ns - start_ns, node.line, node.column, start_ns))
                continue
        tasks.append(_checked_flexflow_task(index, node, path))
    return tasks


def _ns(text: str) -> tuple[float, int]:
    """A time of FlexFlow's (ms) in ns: as a float, and rounded; ValueError when not a number,
    OverflowError when not finite."""
    ns = float(text) * NS_PER_MS
    return ns, round(ns)


def _checked_flexflow_task(index: int, node: DotNode, path: str) -> Task:
    match = _FLEXFLOW_LABEL.fullmatch(node.attrs["label"])
    fields = (
        [*([match[1].strip()] if match[1] is not None else []), match[2], [match[3], match[4]]]
        if match
        else _fields(node, path)
    )
    if len(fields) not in (2, 3) or not isinstance(fields[-1], list) or len(fields[-1]) != 2:
        raise position_error(
            path, node.line, node.column,
            f"the label of {node.name} is not FlexFlow's {{ NAME | KIND | {{ START | END }} }}: "
            f"{node.attrs['label']!r}",
        )  # fmt: skip
    name = fields[0] if len(fields) == 3 else ""
    kind_text = fields[-2]
    if not isinstance(name, str) or not isinstance(kind_text, str) or kind_text not in KIND_OF_TEXT:
        kinds = ", ".join(k.value for k in TaskKind)
        raise position_error(
            path, node.line, node.column, f"unknown task kind {kind_text!r} of {node.name}", f"FlexFlow writes {kinds}"
        )
    start = _time_ns(fields[-1][0], NS_PER_MS, node, path, "START")
    end = _time_ns(fields[-1][1], NS_PER_MS, node, path, "END")
    if end < start:
        raise position_error(path, node.line, node.column, f"{node.name} ends ({fields[-1][1]}) before it starts")
    start_ns, end_ns = round(start), round(end)
    return Task(
        index, node.name, name, KIND_OF_TEXT[kind_text], end_ns - start_ns, node.line, node.column, start_ns=start_ns
    )


def _labelled_task(index: int, node: DotNode, path: str, unit_ns: int) -> Task:
    fields = _fields(node, path)
    if any(isinstance(f, list) for f in fields):
        raise position_error(path, node.line, node.column, f"the label of {node.name} nests records: {fields!r}")
    values: dict[str, str] = {}
    words: list[str] = []
    for text in fields:
        key, eq, value = text.partition("=")
        if eq and key.strip() in KNOWN_KEYS:
            values[key.strip()] = value.strip()
        else:
            words.append(text)
    node_types = [w for w in words if w.endswith("_NODE")]
    if len(node_types) != 1 or node_types[0] not in (COMP_NODE, COMM_NODE):
        found = node_types[0] if node_types else "none"
        raise position_error(
            path, node.line, node.column, f"unknown node type {found!r} of {node.name}",
            f"the labelled form's tasks are {COMP_NODE} or {COMM_NODE}",
        )  # fmt: skip
    others = [w for w in words if w != node_types[0]]
    name = others[0] if others else ""
    phase = next((w for w in others[1:] if w in TaskKind._value2member_map_), None)

    def number(keys: tuple[str, ...], what: str, maximum: int = MAX_DEVICES) -> int:
        text = next((values[k] for k in keys if k in values), None)
        if text is None:
            raise position_error(path, node.line, node.column, f"{node.name} has no {what} ({' or '.join(keys)}=)")
        try:
            value = int(text)
        except ValueError:
            raise position_error(
                path, node.line, node.column, f"{what} of {node.name} is not an integer: {text!r}"
            ) from None
        if value < 0:
            raise position_error(path, node.line, node.column, f"{what} of {node.name} is negative: {value}")
        if value > maximum:
            raise position_error(path, node.line, node.column, f"{what} of {node.name} is {value}, beyond {maximum:,}")
        return value

    if node_types[0] == COMM_NODE:
        seconds = next((values[k] for k in COMM_TIME_KEYS if k in values), "0")
        return Task(
            index, node.name, name, TaskKind.COMM, round(_time_ns(seconds, unit_ns, node, path, "run_time")), node.line,
            node.column, src=number(SRC_KEYS, "source device"), dst=number(DST_KEYS, "destination device"),
            size_bytes=number(SIZE_KEYS, "byte count", MAX_BYTES),
        )  # fmt: skip
    time_text = next((values[k] for k in TIME_KEYS if k in values), None)
    if time_text is None:
        raise position_error(path, node.line, node.column, f"{node.name} has no time ({' or '.join(TIME_KEYS)}=)")
    kind = TaskKind(phase) if phase is not None and phase != TaskKind.COMM.value else TaskKind.FORWARD
    return Task(
        index, node.name, name, kind, round(_time_ns(time_text, unit_ns, node, path, "the time")), node.line,
        node.column, device=number(DEVICE_KEYS, "device"),
    )  # fmt: skip


def _topological(graph: TaskGraph) -> list[int]:
    n = len(graph.tasks)
    flat = itertools.chain.from_iterable(graph.edges)  # (predecessor, successor) rows below
    pairs = np.fromiter(flat, dtype=np.int64, count=2 * len(graph.edges)).reshape(-1, 2)
    by_successor = np.argsort(pairs[:, 1], kind="stable")
    counts = np.bincount(pairs[:, 1], minlength=n)
    parents = pairs[by_successor, 0].astype(np.uint64)
    ids = np.arange(n, dtype=np.uint64)
    zeros = np.zeros(n, dtype=np.uint64)
    dag = graph_from_arrays(ids, np.zeros(n, np.int32), zeros, zeros, counts, parents, np.zeros(n, np.int64),
                            np.zeros(0, np.uint64))  # fmt: skip
    try:
        return topological_order(dag).tolist()
    except CycleError as cycle:
        # each id of the cycle depends on the next: shown as edges, predecessor first, back to the start
        names = [graph.tasks[int(i)].node for i in reversed(cycle.ids)]
        names.append(names[0])
        first = graph.tasks[int(cycle.ids[-1])]
        raise position_error(
            graph.path,
            first.line,
            first.column,
            f"the dependencies form a cycle: {' -> '.join(names)}",
            "a task graph is acyclic: remove the edge that closes the cycle",
        ) from None
