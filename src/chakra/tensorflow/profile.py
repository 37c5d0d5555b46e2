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

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from chakra import io
from chakra._xplane import STAT_INT, STAT_REF, STAT_STR, line_events, op_executions, plane_metadata
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
#: :func:`chakra._xplane.op_executions` reads them: an op's step, a region's step, a collective's keys.
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


@dataclass
class TfProfile:
    """Op executions by step id, then node name (in time order); op events with no step id counted."""

    path: str
    steps: dict[int, dict[str, list[OpExecution]]] = field(default_factory=dict)
    stepless: int = 0


def load_tf_profile(path: PathLike) -> TfProfile:
    """Read a TensorFlow profile (an ``.xplane.pb``, or the newest one under a folder)."""
    path = _find(Path(path))
    stream, _ = io.open_decompressed(path, what="a TensorFlow profile")
    try:
        data = stream.read()
    finally:
        stream.close()
    profile = _read_host_plane(data, path)
    if profile is None:
        raise ChakraFormatError(f"the profile has no {HOST_PLANE} plane", path=path, hint="profile on the host")
    if not profile.steps:
        raise ChakraInputError(
            "the profile has no op executions of a step",
            path=path,
            hint="profile whole steps: call the step function inside chakra.tensorflow.collect",
        )
    return profile


def _read_host_plane(data: bytes, path: Path) -> TfProfile | None:
    """The op executions of the host plane's lines, read in C (``None``: no host plane); a format
    error for bytes that are not an XSpace where they are read (the other planes are not)."""
    try:
        found = plane_metadata(data, HOST_PLANE)
    except ValueError as exc:  # bytes the C reader refuses, as upb would: upb names the fault
        raise _not_an_xspace(path, data, exc) from None
    if found is None:
        return None
    names, stat_names, lines = found
    profile = TfProfile(str(path))
    steps: dict[int, dict[str, list[OpExecution]]] = {}
    op_nodes = {
        key: name.rpartition(OP_SEPARATOR)[0]
        for key, name in names.items()
        if OP_SEPARATOR in name and SCOPE_SEPARATOR not in name
    }
    process_ids = {key for key, name in names.items() if name == PROCESS_EVENT}
    async_kinds = {key: name for key, name in names.items() if name in (ASYNC_START, ASYNC_DONE)}
    launched: dict[tuple[int, str], list[int]] = defaultdict(list)  # (step, node) -> launch times
    finished: dict[tuple[int, str], list[int]] = defaultdict(list)  # (step, node) -> done times
    roles = tuple({key for key, name in stat_names.items() if name == role} for role in _OP_STATS)
    async_ids = set(async_kinds)
    async_stats = {key for key, name in stat_names.items() if name in (STEP_STAT, NAME_STAT)}
    with gc_paused():  # an execution per op event, kept: see chakra.collector
        try:
            profile.stepless = op_executions(data, lines, op_nodes, process_ids, roles, OpExecution, steps, PS_PER_NS)
            async_events = [line_events(data, offset, length, async_ids, async_stats) for offset, length in lines]
        except ValueError as exc:
            raise _not_an_xspace(path, data, exc) from None
        for timestamp_ns, events in async_events:
            _read_async(timestamp_ns, events, async_kinds, stat_names, launched, finished)
    _merge_async(steps, launched, finished)
    for ops in steps.values():
        for executions in ops.values():
            if len(executions) > 1:
                executions.sort(key=lambda e: e.start_ns)
    profile.steps = steps
    return profile


def _not_an_xspace(path: Path, data: bytes, refused: ValueError) -> ChakraFormatError:
    return ChakraFormatError(
        f"not a profiler XSpace ({protobuf_fault(XSpace(), data, refused)}; {len(data):,} bytes)",
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


#: An event of a line as :func:`chakra._xplane.line_events` gives it: (metadata id, offset ps,
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


def _merge_async(
    steps: dict[int, dict[str, list[OpExecution]]],
    launched: dict[tuple[int, str], list[int]],
    finished: dict[tuple[int, str], list[int]],
) -> None:
    """An asynchronous kernel's executions span its launch to its done callback (the k-th launch
    with the k-th done), on no thread; a collective keeps the keys of its own op event."""
    for (step, node), starts in launched.items():
        ends = sorted(finished.get((step, node), []))
        starts.sort()
        if len(ends) != len(starts):
            continue  # cut by the profiling window: the op events, if any, stay
        ops = steps.setdefault(step, {}).get(node, [])
        ops.sort(key=lambda e: e.start_ns)
        spans = []
        for k, (start_ns, end_ns) in enumerate(zip(starts, ends, strict=True)):
            keys = ops[k] if k < len(ops) else None
            group = keys.group_key if keys is not None else None
            instance = keys.instance_key if keys is not None else None
            spans.append(OpExecution(start_ns, max(0, end_ns - start_ns), None, group, instance))
        steps[step][node] = spans


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
