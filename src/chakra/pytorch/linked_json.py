"""The linked host + device JSON ("ET+") that upstream's ``chakra_trace_link`` writes and
``chakra_converter PyTorch`` reads, for scripts built around those two steps.

Layout (``reference/upstream-behaviour.md`` §3.4): the host trace's header and nodes in the grouped
layout, each timed host node with ``ts`` (Kineto µs), ``inclusive_dur`` and ``exclusive_dur``; after
them one node per device activity, a copy of the launching host node's ``inputs``/``outputs``/
``attrs`` with ``cat`` (what marks it as device work), ``ts``, both durations = the activity's,
``stream`` and ``ctrl_deps`` = the launcher. Additions upstream readers ignore: ``kineto_tid`` on
host nodes (the thread the op really ran on), ``device``/``correlation`` on device nodes, and the
Kineto ``distributedInfo`` at the top. Written compact (upstream's ``indent=4`` made files ten times
the host trace).

:func:`load_linked_json` reads this form, ours or upstream's (ids renumbered from 0 there), back
into a :class:`~chakra.pytorch.link.LinkedTrace` that :func:`~chakra.pytorch.convert.convert` takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from chakra.errors import ChakraFormatError, PathLike
from chakra.io import AtomicFile
from chakra.pytorch.host import CORE_ATTRS, GroupedRecord, HostNode, HostTrace, SharedValues, host_node_from_record
from chakra.pytorch.jsonfile import decode_json, read_json_bytes
from chakra.pytorch.kineto import KinetoTrace
from chakra.pytorch.link import DeviceActivity, HostTiming, LinkedTrace, LinkReport

#: ``join_key`` of a LinkReport rebuilt from a linked file: the join happened when it was written.
FROM_LINKED_FILE = "linked file"

_ATTR_TYPES = {bool: "bool", int: "int64", float: "double", str: "string"}


def _attr(name: str, value: Any) -> dict[str, Any]:
    kind = "uint64" if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
    return {"name": name, "type": kind or _ATTR_TYPES.get(type(value), "string"), "value": value}


def _json(text: msgspec.Raw | bytes) -> msgspec.Raw:
    """JSON text to write as it is (bytes would be written as base64)."""
    return text if isinstance(text, msgspec.Raw) else msgspec.Raw(text)


def _io(lists: Any) -> dict[str, Any]:
    out = {"values": _json(lists.raw_values), "shapes": _json(lists.raw_shapes), "types": _json(lists.raw_types)}
    if bytes(lists.raw_strides) != b"null":
        out["strides"] = _json(lists.raw_strides)
    return out


def _host_dict(node: HostNode) -> dict[str, Any]:
    core = {name: getattr(node, name) for name in CORE_ATTRS}
    return {
        "id": node.id,
        "name": node.name,
        "ctrl_deps": node.parent,
        "inputs": _io(node.inputs),
        "outputs": _io(node.outputs),
        "attrs": [_attr(k, v) for k, v in core.items()] + [_attr(k, v) for k, v in node.attrs.items()],
    }


def write_linked_json(linked: LinkedTrace, path: PathLike) -> int:
    """Write ``linked`` as an ET+ file (atomically); returns the number of nodes written.
    Device activities whose launcher is unknown are left out (the link report counts them)."""
    host = linked.host
    nodes: list[dict[str, Any]] = []
    by_id = {}
    for node in host.nodes:
        entry = _host_dict(node)
        timing = linked.timing.get(node.id)
        if timing is not None:
            entry.update(ts=timing.ts_us, inclusive_dur=timing.dur_us, exclusive_dur=timing.exclusive_us)
            entry["kineto_tid"] = timing.thread
        nodes.append(entry)
        by_id[node.id] = entry
    next_id = max((n.id for n in host.nodes), default=0) + 1
    for activity in linked.activities:
        launcher = by_id.get(activity.host_id) if activity.host_id is not None else None
        if launcher is None:
            continue
        nodes.append(
            {
                "id": next_id,
                "name": activity.name,
                "ctrl_deps": activity.host_id,
                "inputs": launcher["inputs"],
                "outputs": launcher["outputs"],
                "attrs": launcher["attrs"],
                "cat": activity.cat,
                "ph": "X",
                "ts": activity.ts_us,
                "inclusive_dur": activity.dur_us,
                "exclusive_dur": activity.dur_us,
                "stream": activity.stream,
                "device": activity.device,
                "correlation": activity.correlation,
            }
        )
        next_id += 1
    document = {
        "schema": host.schema,
        "pid": host.pid,
        "time": host.time,
        "start_ts": host.start_ts,
        "nodes": nodes,
        "finish_ts": host.finish_ts,
        "distributedInfo": linked.device.distributed_info,
    }
    with AtomicFile(path) as handle:
        handle.write(msgspec.json.encode(document))
    return len(nodes)


class _LinkedNode(GroupedRecord, gc=False):
    ts: float | None = None
    inclusive_dur: float | None = None
    exclusive_dur: float | None = None
    cat: str | None = None
    stream: Any = None
    device: Any = 0
    correlation: int | None = None
    kineto_tid: Any = None


class _LinkedFile(msgspec.Struct):
    nodes: list[_LinkedNode]
    schema: str = ""
    pid: int | None = None
    time: str | None = None
    start_ts: int | None = None
    finish_ts: int | None = None
    distributedInfo: dict[str, Any] = msgspec.field(default_factory=dict)


_DECODER = msgspec.json.Decoder(_LinkedFile)


class UntimedTrace(ChakraFormatError):
    """A file read as a linked trace has no timing: a host execution trace. ``host`` is what was
    read, for callers that convert it host-only instead."""

    def __init__(self, host: HostTrace):
        super().__init__(
            "no node has timing: this is a host execution trace, not a linked one",
            path=host.path,
            hint="run chakra_trace_link first, or convert the host trace as it is (chakra convert pytorch --host)",
        )
        self.host = host


def load_linked_json(path: PathLike) -> LinkedTrace:
    """Read an ET+ file (written by :func:`write_linked_json` or upstream's linker)."""
    path = Path(path)
    data = read_json_bytes(path, "a linked trace")
    raw = decode_json(
        data,
        _DECODER.decode,
        path=path,
        kind="a linked host + device trace",
        hint="expected the JSON chakra_trace_link writes (a host trace with ts/inclusive_dur on its nodes)",
    )
    host_nodes: list[HostNode] = []
    timing: dict[int, HostTiming] = {}
    activities: list[DeviceActivity] = []
    shared = SharedValues()
    records = raw.nodes
    for index, node in enumerate(records):
        records[index] = None  # type: ignore[call-overload]  # each record freed once read (a lower peak)
        if node.cat is None:
            try:
                host_node = host_node_from_record(node, shared)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise ChakraFormatError(
                    f"not a linked trace: its attrs, inputs or outputs: {exc}",
                    path=path,
                    node_index=index,
                    hint="expected the JSON chakra_trace_link writes: attrs as a list of {name, type, value}",
                ) from None
            host_nodes.append(host_node)
            if node.ts is not None and node.inclusive_dur is not None:
                thread = node.kineto_tid if node.kineto_tid is not None else host_node.tid
                exclusive = node.exclusive_dur if node.exclusive_dur is not None else node.inclusive_dur
                timing[node.id] = HostTiming(node.ts, node.inclusive_dur, exclusive, thread)
        else:
            activities.append(
                DeviceActivity(
                    name=node.name,
                    cat=node.cat,
                    device=node.device,
                    stream=node.stream if node.stream is not None else 0,
                    ts_us=node.ts or 0.0,
                    dur_us=node.inclusive_dur or 0.0,
                    correlation=node.correlation,
                    host_id=node.ctrl_deps,
                    launch="",
                    args={},
                )
            )
    host = HostTrace(path, raw.schema, "grouped", host_nodes, raw.pid, raw.time, raw.start_ts, raw.finish_ts)
    if not timing and not activities:
        raise UntimedTrace(host)
    report = LinkReport(join_key=FROM_LINKED_FILE, host_ops=len(host_nodes), host_matched=len(timing))
    report.device_activities = report.device_attached = len(activities)
    device = KinetoTrace(path=path, events=[], distributed_info=raw.distributedInfo)
    activities.sort(key=lambda a: a.ts_us)
    return LinkedTrace(host, device, timing, activities, report)
