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
    graph.form, len(graph), graph.makespan_ns
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import msgspec
import numpy as np

from chakra.collector import gc_paused
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
    its device (compute) or its transfer (comm): what the labelled form's reader and the checked
    reader of FlexFlow's form make of one node, before it joins :class:`TaskGraph`'s columns."""

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


@dataclass
class TaskGraph:
    """The tasks in declaration order, as columns of one entry per task (a graph holds hundreds of
    thousands, and an object per task was most of reading one), and the dependencies between them:
    ``sources[k]`` before ``targets[k]``, as arrays of task indices.

    Per task: its DOT node's name (``node``) and where it was declared (``at``: line, column rows);
    its ``name``, ``kind``, duration (``dur_ns``) and start (``start_ns``: FlexFlow's form, ``None``
    in the labelled form); what the labelled form says of its device (``device``: compute tasks) or its
    transfer (``src``, ``dst``, ``size_bytes``), ``None`` elsewhere. The columns are read, never
    changed: some are the DOT graph's own."""

    path: str
    form: Form
    node: list[str]
    at: np.ndarray  # (tasks, 2) int64: line, column
    name: list[str]
    kind: list[TaskKind]
    dur_ns: list[int]
    start_ns: list[int | None]
    sources: np.ndarray  # int64
    targets: np.ndarray
    device: list[int | None]
    src: list[int | None]
    dst: list[int | None]
    size_bytes: list[int | None]
    is_comm: list[bool] = field(init=False, repr=False)
    _order: list[int] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        comm = TaskKind.COMM
        self.is_comm = [kind is comm for kind in self.kind]

    @classmethod
    def of_tasks(cls, path: str, form: Form, tasks: list[Task], sources: np.ndarray, targets: np.ndarray) -> TaskGraph:
        """The graph of task objects (declared in this order: ``tasks[i].index == i``)."""
        at = np.array([(t.line, t.column) for t in tasks], dtype=np.int64).reshape(-1, 2)
        return cls(
            path, form, [t.node for t in tasks], at, [t.name for t in tasks], [t.kind for t in tasks],
            [t.dur_ns for t in tasks], [t.start_ns for t in tasks], sources, targets, [t.device for t in tasks],
            [t.src for t in tasks], [t.dst for t in tasks], [t.size_bytes for t in tasks],
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.node)

    @cached_property
    def comm(self) -> np.ndarray:
        """``is_comm`` as a bool array."""
        return np.array(self.is_comm, dtype=bool)

    @cached_property
    def start_or_zero_ns(self) -> np.ndarray:
        """Each task's start as an int64 array, 0 where there is none (the labelled form)."""
        return np.array([start or 0 for start in self.start_ns], dtype=np.int64)

    @property
    def makespan_ns(self) -> int | None:
        """The simulated makespan (last end − first start), ``None`` for the labelled form (no schedule)."""
        spans = [(s, s + d) for s, d in zip(self.start_ns, self.dur_ns, strict=True) if s is not None]
        if not spans:
            return None
        return max(end for _, end in spans) - min(start for start, _ in spans)

    def order(self) -> list[int]:
        """The tasks in dependency order (declaration order among ready ones), found once: a graph
        is not changed once read."""
        if self._order is None:
            self._order = _topological(self)
        return self._order


def read_task_graph(path: PathLike, *, time_unit: str | None = None) -> TaskGraph:
    """Read a task graph of either form. ``time_unit`` (``ms``, ``s``, ``us``) is the unit of the
    labelled form's times (default FlexFlow's ms); FlexFlow's own form is always in ms."""
    # a dict and a few strs per task, all kept: the collector's passes over them would cost half the reading
    with gc_paused():
        return task_graph_of(read_dot(path), time_unit=time_unit)


def task_graph_of(dot: DotGraph, *, time_unit: str | None = None) -> TaskGraph:
    """The task graph of a DOT graph of either form (told apart by their labels); ``time_unit`` as
    :func:`read_task_graph` takes it."""
    if time_unit is not None and time_unit not in NS_PER:
        raise position_error(dot.path, 1, 1, f"unknown time unit {time_unit!r}", f"one of {', '.join(NS_PER)}")
    labels = [attrs.get("label") for attrs in dot.attrs]
    if None in labels:
        first = labels.index(None)
        line, column = dot.node_at[first].tolist()
        raise position_error(
            dot.path, line, column, f"{dot.names[first]} has no label: it is named but never declared as a task",
            "every task is a node statement with a record label",
        )  # fmt: skip
    if not labels:
        raise position_error(dot.path, 1, 1, "the graph holds no task", "give a task graph FlexFlow wrote")
    distinct: set[str] = set(labels)  # type: ignore[arg-type]  # no None, checked above
    labelled = any(COMP_NODE in label or COMM_NODE in label for label in distinct)
    if labelled:
        unit = NS_PER[time_unit or FLEXFLOW_TIME_UNIT]
        tasks = [_labelled_task(i, node, dot.path, unit) for i, node in enumerate(dot.nodes)]
    else:
        columns = _flexflow_columns(dot)
    rows = dot.edge_rows
    loops = np.flatnonzero(rows[:, 0] == rows[:, 1])
    if loops.size:
        source, _, line, column = rows[loops[0]].tolist()
        raise position_error(dot.path, line, column, f"{dot.names[source]} depends on itself (a cycle)")
    sources, targets = rows[:, 0].copy(), rows[:, 1].copy()
    if labelled:
        graph = TaskGraph.of_tasks(dot.path, Form.LABELLED, tasks, sources, targets)
    else:
        name, kind, start_ns, dur_ns = columns
        unknown: list[list[int | None]] = [[None] * len(name) for _ in range(4)]  # the labelled form's fields
        graph = TaskGraph(
            dot.path, Form.FLEXFLOW, dot.names, dot.node_at, name, kind, dur_ns, start_ns,  # type: ignore[arg-type]
            sources, targets, *unknown,
        )  # fmt: skip
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


#: A task of a label: its name, kind, start and duration (ns).
_Row = tuple[str, TaskKind, int, int]


def _flexflow_label(label: str, times: dict[str, tuple[float, int]]) -> _Row | None:
    """The task of a label as FlexFlow writes it, ``None`` for anything else or a fault (left to
    :func:`_checked_flexflow_task`). ``times``: each time's text read before, its ns as a float and
    rounded (FlexFlow prints 6 digits: a text recurs)."""
    match = _FLEXFLOW_LABEL.fullmatch(label)
    if match is None:
        return None
    name, kind_text, start_text, end_text = match.groups()
    kind = KIND_OF_TEXT.get(kind_text)
    try:
        start, start_ns = times.get(start_text) or times.setdefault(start_text, _ns(start_text))
        end, end_ns = times.get(end_text) or times.setdefault(end_text, _ns(end_text))
    except (ValueError, OverflowError):  # not a number, or not finite
        return None
    if kind is None or not 0 <= start <= end <= MAX_DUR_NS:
        return None
    return (name.strip() if name is not None else "", kind, start_ns, end_ns - start_ns)


def _flexflow_columns(dot: DotGraph) -> tuple[list[str], list[TaskKind], list[int], list[int]]:
    """The name, kind, start and duration (ns) of every node of FlexFlow's own form. A label is read
    once: the devices of a data-parallel operator run the same tasks at the same times, so labels
    recur (a task is read from its label alone)."""
    times: dict[str, tuple[float, int]] = {}
    task_of: dict[str, _Row] = {}
    rows = []
    for index, attrs in enumerate(dot.attrs):
        label = attrs["label"]
        row = task_of.get(label)
        if row is None:
            read = _flexflow_label(label, times)
            if read is None:  # the checked reader says what is wrong, or reads another spacing
                line, column = dot.node_at[index].tolist()
                task = _checked_flexflow_task(index, DotNode(dot.names[index], attrs, line, column), dot.path)
                read = (task.name, task.kind, task.start_ns or 0, task.dur_ns)
            row = task_of[label] = read
        rows.append(row)
    name, kind, start_ns, dur_ns = zip(*rows, strict=True)
    return list(name), list(kind), list(start_ns), list(dur_ns)


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
    n = len(graph)
    sources, targets = graph.sources, graph.targets
    by_successor = np.argsort(targets, kind="stable")
    counts = np.bincount(targets, minlength=n)
    parents = sources[by_successor].astype(np.uint64)
    ids = np.arange(n, dtype=np.uint64)
    zeros = np.zeros(n, dtype=np.uint64)
    dag = graph_from_arrays(ids, np.zeros(n, np.int32), zeros, zeros, counts, parents, np.zeros(n, np.int64),
                            np.zeros(0, np.uint64))  # fmt: skip
    try:
        return topological_order(dag).tolist()
    except CycleError as cycle:
        # each id of the cycle depends on the next: shown as edges, predecessor first, back to the start
        names = [graph.node[int(i)] for i in reversed(cycle.ids)]
        names.append(names[0])
        line, column = graph.at[int(cycle.ids[-1])].tolist()
        raise position_error(
            graph.path,
            line,
            column,
            f"the dependencies form a cycle: {' -> '.join(names)}",
            "a task graph is acyclic: remove the edge that closes the cycle",
        ) from None
