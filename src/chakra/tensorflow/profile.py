"""What a TensorFlow profile measured: every op execution of every step, from the profiler's XSpace.

``tf.profiler.experimental.start(DIR)`` writes ``DIR/plugins/profile/RUN/HOST.xplane.pb``.
:func:`load_tf_profile` reads the host plane's events and the stats it needs from the bytes in C
(``chakra._xplane``: a protobuf message per event cost 3.5 µs), accepting what protobuf's parser
accepts there; bytes it refuses are parsed with protobuf (the minimal protos of
:mod:`chakra.schema.tensorflow`), whose error names the fault. The other planes are not read. On the
host plane (``/host:CPU``) the executor's threads are lines (``tf_Compute/…``,
``collective_ops/…``); an op execution is an event named ``NODE:OP_TYPE``. Collective events carry
their ``step_id``, ``group_key``, ``group_size`` is not recorded but ``instance_key`` is; other op
events are nested inside the executor's ``ExecutorState::Process`` event of their step, whose
``id`` stat is the step id. Every device of one function call shares the step id.

:class:`OpExecution` keeps the start and duration in ns, the thread (the line) and, for
collectives, the keys. Events that are neither (the executor's own regions, Python, tf.data)
are not op executions and are not counted.

Example:
    profile = load_tf_profile("out/worker0/profile")
    for step_id, ops in profile.steps.items():
        print(step_id, len(ops))
"""

from __future__ import annotations

import mmap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from chakra import io
from chakra._op_rows import row_executions, step_summaries
from chakra._xplane import STAT_INT, STAT_REF, STAT_STR, op_event_rows, plane_metadata
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError, ChakraInputError, PathLike
from chakra.schema.tensorflow.tf_subset_pb2 import XSpace
from chakra.tensorflow.graph import protobuf_fault
from chakra.units import PS_PER_NS

#: What the profiler names its files, and the plane of host threads TensorFlow's executor runs on.
XPLANE_GLOB = "*.xplane.pb"
HOST_PLANE = "/host:CPU"
#: The executor's event around the ops it runs inline for one step, and its step id stat.
PROCESS_EVENT = "ExecutorState::Process"
PROCESS_STEP_STAT = "id"
#: The executor's events around an asynchronous kernel (``_Recv``, collectives): launched, done.
ASYNC_START, ASYNC_DONE = "ExecutorState::ProcessAsync::Start", "ExecutorState::ProcessAsync::Done"
#: Stats of a collective op's event, and the node an async kernel's events name.
STEP_STAT, GROUP_STAT, INSTANCE_STAT, NAME_STAT = "step_id", "group_key", "instance_key", "name"
#: The integer stats an op event and the executor's step region are read for, in the roles
#: :func:`chakra._xplane.op_event_rows` reads them: an op's step, a region's step, a collective's keys.
_OP_STATS = (STEP_STAT, PROCESS_STEP_STAT, GROUP_STAT, INSTANCE_STAT)
#: Separators: an op event is "NODE:OP_TYPE"; the executor's own events are "Class::method".
OP_SEPARATOR, SCOPE_SEPARATOR = ":", "::"


class OpExecution(msgspec.Struct, frozen=True, gc=False):
    """One execution of a graph node: start (ns since the epoch of the profile), duration (ns),
    the thread line it ran on (``None`` for an asynchronous kernel: from its launch to its done
    callback it holds no thread), and a collective's group and instance keys."""

    start_ns: int
    dur_ns: int
    thread: int | None
    group_key: int | None = None
    instance_key: int | None = None


class StepSummary(NamedTuple):
    """One profiled step summed up against a graph (:meth:`TfProfile.step_summaries`): its executions,
    those of the graph's nodes (``ours``) with their first start, last end (ns) and least collective
    instance key, and how many of the graph's working nodes ran in it (``covered``)."""

    executions: int
    ours: int
    covered: int
    start_ns: int | None
    end_ns: int | None
    instance_key: int | None


@dataclass
class TfProfile:
    """Op executions by step id, then node name (in time order); op events with no step counted.

    The executions are kept as rows (``chakra._op_rows``): :meth:`step` makes one step's objects,
    :meth:`step_summaries` sums every step up without them, :attr:`steps` makes them all."""

    path: str
    step_ids: list[int] = field(default_factory=list)  # in the order first met
    stepless: int = 0
    _rows: bytes = b""
    _nodes: list[str] = field(default_factory=list)  # the node of each op index of the rows
    #: (step, node) -> the launch and done times (ns) of an asynchronous kernel, paired in order
    _spans: dict[tuple[int, str], tuple[list[int], list[int]]] = field(default_factory=dict)

    @property
    def steps(self) -> dict[int, dict[str, list[OpExecution]]]:
        """Every step's executions (made at each call: :meth:`step` makes one step's)."""
        return {step_id: self.step(step_id) for step_id in self.step_ids}

    def step(self, step_id: int) -> dict[str, list[OpExecution]]:
        """The executions of one step by node, each node's in time order."""
        index = self.step_ids.index(step_id)
        wanted = bytearray(len(self.step_ids))
        wanted[index] = 1
        with gc_paused():  # an execution and a list per op, kept: see chakra.collector
            ops = row_executions(self._rows, OpExecution, self._nodes, bytes(wanted)).get(index, {})
        for (step, node), (starts, ends) in self._spans.items():
            if step == step_id:
                ops[node] = _async_spans(starts, ends, ops.get(node, []))
        for executions in ops.values():
            if len(executions) > 1:
                executions.sort(key=lambda e: e.start_ns)
        return ops

    def step_summaries(self, graph: set[str], working: set[str]) -> dict[int, StepSummary]:
        """Every step summed up against a graph's node names (``working``: those that do work)."""
        async_nodes = {node for _, node in self._spans}
        summed = step_summaries(self._rows, len(self.step_ids), self._nodes, graph, working, async_nodes)
        out = {step_id: StepSummary(*summary) for step_id, summary in zip(self.step_ids, summed, strict=True)}
        if not async_nodes:
            return out
        # the asynchronous kernels' nodes, summed here: their executions are their spans where they have them
        by_step: dict[int, list[tuple[str, list[OpExecution]]]] = defaultdict(list)
        op_events = row_executions(self._rows, OpExecution, self._nodes, b"\x01" * len(self.step_ids), async_nodes)
        for index, ops in op_events.items():
            step_id = self.step_ids[index]
            by_step[step_id].extend((node, runs) for node, runs in ops.items() if (step_id, node) not in self._spans)
        index_of = {step_id: index for index, step_id in enumerate(self.step_ids)}
        for (step_id, node), (starts, ends) in self._spans.items():
            runs = op_events.get(index_of[step_id], {}).get(node, [])
            by_step[step_id].append((node, _async_spans(starts, ends, runs)))
        for step_id, nodes in by_step.items():
            out[step_id] = _with_nodes(out[step_id], nodes, graph, working)
        return out


def _with_nodes(
    summary: StepSummary, nodes: list[tuple[str, list[OpExecution]]], graph: set[str], working: set[str]
) -> StepSummary:
    """``summary`` with the executions of more nodes of its step added (each node once)."""
    executions = summary.executions + sum(len(runs) for _, runs in nodes)
    ours = [runs for node, runs in nodes if node in graph or node in working]
    starts = [e.start_ns for runs in ours for e in runs]
    ends = [e.start_ns + e.dur_ns for runs in ours for e in runs]
    instances = [e.instance_key for runs in ours for e in runs if e.instance_key is not None]
    if summary.start_ns is not None and summary.end_ns is not None:
        starts.append(summary.start_ns)
        ends.append(summary.end_ns)
    if summary.instance_key is not None:
        instances.append(summary.instance_key)
    return StepSummary(
        executions,
        summary.ours + sum(map(len, ours)),
        summary.covered + sum(1 for node, runs in nodes if node in working and runs),
        min(starts, default=None),
        max(ends, default=None),
        min(instances, default=None),
    )


def load_tf_profile(path: PathLike) -> TfProfile:
    """Read a TensorFlow profile (an ``.xplane.pb``, or the newest one under a folder)."""
    path = _find(Path(path))
    data = io.read_mapped(path, what="a TensorFlow profile")
    with gc_paused():  # names and executions a node, kept: see chakra.collector
        profile = _read_host_plane(data, path)
    if profile is None:
        raise ChakraFormatError(f"the profile has no {HOST_PLANE} plane", path=path, hint="profile on the host")
    if not profile.step_ids:
        raise ChakraInputError(
            "the profile has no op executions of a step",
            path=path,
            hint="profile whole steps: call the step function inside chakra.tensorflow.collect",
        )
    return profile


def _read_host_plane(data: bytes | mmap.mmap, path: Path) -> TfProfile | None:
    """The op executions of the host plane's lines, read in C (``None``: no host plane); a format
    error for bytes that are not an XSpace where they are read (the other planes are not)."""
    try:
        found = plane_metadata(data, HOST_PLANE)
    except ValueError as exc:  # bytes the C reader refuses, as upb would: upb names the fault
        raise _not_an_xspace(path, data, exc) from None
    if found is None:
        return None
    names, stat_names, lines = found
    op_nodes: dict[int, str] = {}  # "node:Op" names, the node's name by metadata id
    process_ids: set[int] = set()
    async_kinds: dict[int, str] = {}
    for key, name in names.items():  # one look at each of the many names (the executor's hold "::")
        if OP_SEPARATOR not in name:
            continue
        if SCOPE_SEPARATOR not in name:
            op_nodes[key] = name.rpartition(OP_SEPARATOR)[0]
        elif name == PROCESS_EVENT:
            process_ids.add(key)
        elif name in (ASYNC_START, ASYNC_DONE):
            async_kinds[key] = name
    launched: dict[tuple[int, str], list[int]] = defaultdict(list)  # (step, node) -> launch times
    finished: dict[tuple[int, str], list[int]] = defaultdict(list)  # (step, node) -> done times
    roles = tuple({key for key, name in stat_names.items() if name == role} for role in _OP_STATS)
    async_ids = set(async_kinds)
    async_stats = {key for key, name in stat_names.items() if name in (STEP_STAT, NAME_STAT)}
    try:
        rows, step_ids, nodes, stepless, async_events = op_event_rows(
            data, lines, op_nodes, process_ids, roles, PS_PER_NS, async_ids, async_stats
        )
    except ValueError as exc:
        raise _not_an_xspace(path, data, exc) from None
    for timestamp_ns, events in async_events:
        _read_async(timestamp_ns, events, async_kinds, stat_names, launched, finished)
    profile = TfProfile(str(path), step_ids, stepless, rows, nodes)
    for (step, node), starts in launched.items():
        ends = sorted(finished.get((step, node), []))
        if len(ends) != len(starts):
            continue  # cut by the profiling window: the op events, if any, stay
        profile._spans[(step, node)] = (sorted(starts), ends)
        if step not in step_ids:  # a step of asynchronous kernels only
            step_ids.append(step)
    return profile


def _not_an_xspace(path: Path, data: bytes | mmap.mmap, refused: ValueError) -> ChakraFormatError:
    return ChakraFormatError(
        f"not a profiler XSpace ({protobuf_fault(XSpace(), bytes(data), refused)}; {len(data):,} bytes)",
        path=path,
        hint="pass the *.xplane.pb tf.profiler.experimental.stop wrote (the file is damaged or of another kind)",
    )


def _find(path: Path) -> Path:
    if not path.is_dir():
        if not path.exists():
            raise ChakraInputError("no such file or folder", path=path, hint="pass the folder collect() wrote")
        return path
    found = sorted(path.rglob(XPLANE_GLOB), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ChakraInputError(
            f"no {XPLANE_GLOB} under this folder",
            path=path,
            hint="pass the folder tf.profiler.experimental.start wrote (TensorFlow writes no trace.json since 2.16)",
        )
    return found[-1]


#: An event of a line as :func:`chakra._xplane.op_event_rows` gives the events asked for: (metadata id, offset ps,
#: duration ps, stats), each stat (metadata id, kind, value).
_Event = tuple[int, int, int, tuple[tuple[int, int, Any], ...]]


def _read_async(
    timestamp_ns: int,
    events: list[_Event],
    async_kinds: dict[int, str],
    stat_names: dict[int, str],
    launched: dict[tuple[int, str], list[int]],
    finished: dict[tuple[int, str], list[int]],
) -> None:
    """Collect the launch and done times (ns) of the asynchronous kernels on one line."""
    for metadata_id, offset_ps, duration_ps, stats in events:
        kind = async_kinds.get(metadata_id)
        if kind is None:
            continue
        step = _int_stat(stats, stat_names, STEP_STAT)
        node = _ref_stat(stats, stat_names, NAME_STAT)
        if step is None or node is None:
            continue
        at_ns = timestamp_ns + offset_ps // PS_PER_NS
        if kind == ASYNC_START:
            launched[(step, node)].append(at_ns)
        else:
            finished[(step, node)].append(at_ns + duration_ps // PS_PER_NS)


def _async_spans(starts: list[int], ends: list[int], ops: list[OpExecution]) -> list[OpExecution]:
    """An asynchronous kernel's executions in a step: its launch to its done callback (the k-th launch
    with the k-th done, both sorted), on no thread; a collective keeps the keys of its own k-th op
    event (in time order)."""
    ops = sorted(ops, key=lambda e: e.start_ns)
    spans = []
    for k, (start_ns, end_ns) in enumerate(zip(starts, ends, strict=True)):
        keys = ops[k] if k < len(ops) else None
        group = keys.group_key if keys is not None else None
        instance = keys.instance_key if keys is not None else None
        spans.append(OpExecution(start_ns, max(0, end_ns - start_ns), None, group, instance))
    return spans


def _ref_stat(stats: tuple[tuple[int, int, Any], ...], stat_names: dict[int, str], wanted: str) -> str | None:
    """The first stat named ``wanted``, whose value is the name of another stat metadata (how the
    profiler interns strings) or a string."""
    for metadata_id, kind, value in stats:
        if stat_names.get(metadata_id) == wanted:
            if kind == STAT_REF:
                return stat_names.get(value)
            return value if kind == STAT_STR else None
    return None


def _int_stat(stats: tuple[tuple[int, int, Any], ...], stat_names: dict[int, str], wanted: str) -> int | None:
    """The first stat named ``wanted``, if an integer."""
    for metadata_id, kind, value in stats:
        if stat_names.get(metadata_id) == wanted:
            return value if kind == STAT_INT else None
    return None
