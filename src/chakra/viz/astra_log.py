"""A simulator's issue/callback log as a Chrome/Perfetto trace (upstream ``chakra_timeline_visualizer``).

The input is the log of a simulator that writes one line when it issues a node and one when the
node completes. Two line forms are read, anywhere in the line (a logger prefix such as
``[2024-05-01 10:00:00.000] [workload] [debug] `` is skipped):

* upstream's short form: ``issue,<k>=<npu>,<k>=<cycle>,<k>=<node id>,<k>=<node name>`` (keys ignored);
* ASTRA-sim's ``trace-enabled`` debug form: ``issue,sys->id=<npu>, tick=<cycle>, node->id=<id>,
  node->name=<name>, node->type=<NodeType int>`` (and the same with ``callback``).

The node name is everything after the fourth key's ``=`` (names may hold ``,`` and ``=``); in the
debug form it ends at the last ``, node->type=``. Lines without an ``issue,`` or ``callback,``
keyword are other log output and are skipped; a line with one that does not parse is an error
naming its line number.

Each issue is paired with the next callback of the same (npu, node id), in order. Issues never
called back (nodes still running when the log ends) and callbacks without an issue are counted in
:class:`AstraLog` and reported, not drawn.

**Time.** A cycle count divided by the NPU frequency in MHz is microseconds, Chrome's unit for
``ts`` and ``dur``, so the events are written in µs. (Upstream divides by a further 1000 and writes
milliseconds into the µs fields, so its timelines are 1000x too short; ``--npu_frequency`` also
accepts ``1.5GHz``/``1500MHz`` as upstream's documentation shows, not only an integer in MHz.)

**Lanes** (``tid``): from ``node->type`` when the line has it, else from the keywords upstream looks
for in the name; a node that fits no lane goes on "other" (upstream stops with an error there,
which every PyTorch-derived trace hits).

Example:
    log = parse_log("astra.log", num_npus=8)
    write_log_timeline(log, "timeline.json", parse_frequency_mhz("1.5GHz"), num_npus=8)
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from chakra import io
from chakra.analyze.frames import to_frame
from chakra.errors import ChakraInputError, PathLike
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
)

#: Lanes (Chrome ``tid``) per NPU. 1-4 are upstream's ``TID`` values; 5 and 6 are ours (upstream
#: stops with an error instead): memory nodes whose name says neither local nor remote, and nodes of
#: no known kind.
LANE_LOCAL_MEMORY, LANE_REMOTE_MEMORY, LANE_COMPUTE, LANE_COMMUNICATION, LANE_MEMORY, LANE_OTHER = 1, 2, 3, 4, 5, 6
LANE_NAMES = {
    LANE_LOCAL_MEMORY: "local memory",
    LANE_REMOTE_MEMORY: "remote memory",
    LANE_COMPUTE: "compute",
    LANE_COMMUNICATION: "communication",
    LANE_MEMORY: "memory",
    LANE_OTHER: "other",
}
#: ``node_type`` of an event whose line records none (the short form).
NO_NODE_TYPE = -1

#: Chrome trace time unit: ``ts`` and ``dur`` are microseconds.
DISPLAY_TIME_UNIT = "ns"

ISSUE, CALLBACK = "issue", "callback"
_KEYWORD = re.compile(r"\b(issue|callback),")
#: npu, cycle, node id (``<key>=<int>`` each), then ``<key>=<name ...>`` to the end of the line.
_FIELDS = re.compile(r"\s*[^=,]*=\s*(\d+)\s*,\s*[^=,]*=\s*(\d+)\s*,\s*[^=,]*=\s*(\d+)\s*,\s*([^=,]*)=(.*)")
#: ASTRA-sim's name key, after which ``, node->type=<int>`` closes the name.
_DEBUG_NAME_KEY = "node->name"
_DEBUG_NAME_AND_TYPE = re.compile(r"(.*),\s*node->type=(\d+)\s*")
#: Longest log line quoted in an error message (longer ones are cut).
MAX_SHOWN_LINE_CHARS = 120
#: Numbers in a log line must fit the int64 columns of :class:`AstraLog` (ASTRA-sim's ticks are uint64).
MAX_LOG_INT = (1 << 63) - 1
_EXPECTED = "issue,sys->id=NPU, tick=CYCLE, node->id=ID, node->name=NAME[, node->type=TYPE]"

#: Frequency units accepted by :func:`parse_frequency_mhz`, as multiples of 1 MHz.
_MHZ_PER_UNIT = {"hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3}
_FREQUENCY = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*")

# Name keywords upstream's timeline visualizer assigns lanes by (used when a line has no node->type).
_MEMORY_KEYWORDS = ("MEM_LOAD_NODE", "MEM_STORE_NODE")
_COMPUTE_KEYWORD = "COMP_NODE"
_COMMUNICATION_KEYWORDS = ("COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
_LOCAL_KEYWORD, _REMOTE_KEYWORD = "LOCAL_MEMORY", "REMOTE_MEMORY"


@dataclass
class AstraLog:
    """The issue/callback pairs of a log, as columns (index ``i`` is the ``i``-th node to complete).

    * ``npu``, ``node_id`` (int64); ``issue_cycle``, ``callback_cycle`` (int64 cycles)
    * ``node_type`` (int64, :data:`NO_NODE_TYPE` where the line records none); ``names``
    * ``unmatched_issues``: issues never called back; ``unmatched_callbacks``: callbacks without
      an issue; ``skipped_lines``: other log lines
    """

    path: str | None
    npu: np.ndarray
    node_id: np.ndarray
    issue_cycle: np.ndarray
    callback_cycle: np.ndarray
    node_type: np.ndarray
    names: list[str]
    unmatched_issues: int = 0
    unmatched_callbacks: int = 0
    skipped_lines: int = 0
    npus: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    def to_dict(self) -> dict[str, Any]:
        """Counts (the events themselves: :meth:`to_pandas` or :func:`log_events`)."""
        return {
            "path": self.path,
            "events": len(self),
            "npus": list(self.npus),
            "unmatched_issues": self.unmatched_issues,
            "unmatched_callbacks": self.unmatched_callbacks,
            "skipped_lines": self.skipped_lines,
        }

    def to_pandas(self) -> Any:
        """One row per completed node: npu, node_id, name, node_type, issue_cycle, callback_cycle."""
        columns = ["npu", "node_id", "name", "node_type", "issue_cycle", "callback_cycle"]
        rows = zip(
            self.npu.tolist(), self.node_id.tolist(), self.names, self.node_type.tolist(),
            self.issue_cycle.tolist(), self.callback_cycle.tolist(), strict=True,
        )  # fmt: skip
        return to_frame((dict(zip(columns, row, strict=True)) for row in rows), columns)


def parse_frequency_mhz(text: str | float) -> float:
    """An NPU frequency in MHz from ``1500``, ``"1500"``, ``"1500MHz"``, ``"1.5GHz"``, ``"1.5 ghz"`` (bare: MHz).

    Raises :class:`ChakraInputError` for anything else, zero or negative.
    """
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = _FREQUENCY.fullmatch(text)
        unit = match.group(2).lower() if match else ""
        if match is None or (unit and unit not in _MHZ_PER_UNIT):
            raise ChakraInputError(
                f"{text!r} is not a frequency", hint="give MHz as a number (1500) or with a unit: 1500MHz, 1.5GHz"
            )
        value = float(match.group(1)) * _MHZ_PER_UNIT.get(unit, 1.0)
    if not math.isfinite(value) or value <= 0:
        raise ChakraInputError(f"the NPU frequency must be positive, not {text!r}", hint="for example 1.5GHz")
    return value


def _bad_line(path: str, number: int, line: str, why: str) -> ChakraInputError:
    shown = line if len(line) <= MAX_SHOWN_LINE_CHARS else line[: MAX_SHOWN_LINE_CHARS - 3] + "..."
    return ChakraInputError(f"line {number}: {why}: {shown!r}", path=path, hint=f"expected {_EXPECTED}")


def parse_log(path: PathLike, *, num_npus: int | None = None) -> AstraLog:
    """Read the issue/callback lines of a simulator log (plain, ``.gz`` or ``.zst``) into an :class:`AstraLog`.

    ``num_npus``, when given, is the number of NPUs of the run: an event of another NPU is an
    error. Raises :class:`ChakraInputError` naming the line for an event line that does not parse
    or a callback earlier than its issue, and for a log without any event.
    """
    label = str(path)
    npu_col, id_col, issue_col, callback_col, type_col = (array("q") for _ in range(5))
    names: list[str] = []
    # (npu, node id) -> issued and not yet called back: (cycle, name, type, line), oldest first
    pending: dict[tuple[int, int], list[tuple[int, str, int, int]]] = {}
    unmatched_callbacks = skipped = 0
    npus: set[int] = set()
    for number, line in enumerate(_lines(path), start=1):
        if "issue," not in line and "callback," not in line:
            skipped += 1
            continue
        keyword = _KEYWORD.search(line)
        if keyword is None:
            skipped += 1
            continue
        fields = _FIELDS.fullmatch(line, keyword.end())
        if fields is None:
            raise _bad_line(label, number, line, f"{keyword.group(1)} event that does not parse")
        npu, cycle, node_id = int(fields.group(1)), int(fields.group(2)), int(fields.group(3))
        name, node_type = fields.group(5), NO_NODE_TYPE
        if fields.group(4).strip() == _DEBUG_NAME_KEY:
            typed = _DEBUG_NAME_AND_TYPE.fullmatch(name)
            if typed is not None:
                name, node_type = typed.group(1), int(typed.group(2))
        if max(npu, cycle, node_id, node_type) > MAX_LOG_INT:
            raise _bad_line(label, number, line, "a number too large for a cycle count or id")
        if num_npus is not None and npu >= num_npus:
            raise _bad_line(label, number, line, f"NPU {npu} is not one of the {num_npus} NPUs of the run")
        npus.add(npu)
        key = (npu, node_id)
        if keyword.group(1) == ISSUE:
            pending.setdefault(key, []).append((cycle, name, node_type, number))
            continue
        issued = pending.get(key)
        if not issued:
            unmatched_callbacks += 1
            continue
        issue_cycle, issue_name, issue_type, issue_line = issued.pop(0)
        if not issued:
            del pending[key]
        if cycle < issue_cycle:
            raise _bad_line(label, number, line, f"callback at cycle {cycle} before its issue on line {issue_line}")
        npu_col.append(npu)
        id_col.append(node_id)
        issue_col.append(issue_cycle)
        callback_col.append(cycle)
        type_col.append(issue_type if issue_type != NO_NODE_TYPE else node_type)
        names.append(issue_name)
    unmatched_issues = sum(len(issued) for issued in pending.values())
    if not names and not unmatched_issues and not unmatched_callbacks:
        raise ChakraInputError(
            "no issue or callback line in the log",
            path=label,
            hint="run the simulator with trace-enabled so that it logs issue,... and callback,... lines",
        )
    return AstraLog(
        path=label,
        npu=np.array(npu_col, dtype=np.int64),
        node_id=np.array(id_col, dtype=np.int64),
        issue_cycle=np.array(issue_col, dtype=np.int64),
        callback_cycle=np.array(callback_col, dtype=np.int64),
        node_type=np.array(type_col, dtype=np.int64),
        names=names,
        unmatched_issues=unmatched_issues,
        unmatched_callbacks=unmatched_callbacks,
        skipped_lines=skipped,
        npus=sorted(npus),
    )


def _lines(path: PathLike) -> Iterator[str]:
    """The lines of a text file (decompressed by name or content), without line ends, in bounded memory."""
    stream, _ = io.open_decompressed(path, what="a simulator log")
    rest = b""
    try:
        with closing(stream):
            while chunk := stream.read(io.READ_CHUNK_BYTES):
                *lines, rest = (rest + chunk).split(b"\n")
                for raw in lines:
                    yield raw.decode("utf-8", errors="replace").rstrip("\r")
    except io.DECOMPRESS_ERRORS as exc:
        raise ChakraInputError(f"cannot read the log: {exc}", path=path) from None
    if rest:
        yield rest.decode("utf-8", errors="replace").rstrip("\r")


def lane(name: str, node_type: int = NO_NODE_TYPE) -> int:
    """The lane of a node: by ``node_type`` (a Chakra ``NodeType``) when known, else by the keywords in ``name``.

    Memory nodes go on local or remote memory when their name says which, else on "memory";
    anything that is neither memory, compute nor communication on "other".
    Example: ``lane("x", COMP_NODE) == LANE_COMPUTE``; ``lane("COMM_COLL_NODE_ar") == LANE_COMMUNICATION``;
    ``lane("aten::mm") == LANE_OTHER``.
    """
    if node_type == NO_NODE_TYPE:
        memory = any(keyword in name for keyword in _MEMORY_KEYWORDS)
        compute = _COMPUTE_KEYWORD in name
        communication = any(keyword in name for keyword in _COMMUNICATION_KEYWORDS)
    else:
        memory = node_type in (MEM_LOAD_NODE, MEM_STORE_NODE)
        compute = node_type == COMP_NODE
        communication = node_type in (COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE)
    if memory:
        if _LOCAL_KEYWORD in name:
            return LANE_LOCAL_MEMORY
        return LANE_REMOTE_MEMORY if _REMOTE_KEYWORD in name else LANE_MEMORY
    if compute:
        return LANE_COMPUTE
    return LANE_COMMUNICATION if communication else LANE_OTHER


def log_events(log: AstraLog, npu_frequency_mhz: float) -> list[dict[str, Any]]:
    """The Chrome trace events of ``log``: per NPU a process (``npu N``), per lane a thread, one ``X`` per node.

    ``ts`` = issue cycle / MHz and ``dur`` = (callback - issue) cycles / MHz, both in µs
    (1500 cycles at 1500 MHz = 1 µs). ``args`` hold the node id, the cycles and the node type.
    """
    mhz = parse_frequency_mhz(npu_frequency_mhz)
    lane_of: dict[tuple[str, int], int] = {}  # names repeat: classify each (name, type) once
    lanes = [
        lane_of.get(key) or lane_of.setdefault(key, lane(*key))
        for key in zip(log.names, log.node_type.tolist(), strict=True)
    ]
    events: list[dict[str, Any]] = []
    used = sorted(set(zip(log.npu.tolist(), lanes, strict=True)))
    for npu in log.npus:
        events.append({"ph": "M", "name": "process_name", "pid": npu, "tid": 0, "args": {"name": f"npu {npu}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": npu, "tid": 0, "args": {"sort_index": npu}})
    for npu, tid in used:
        events.append({"ph": "M", "name": "thread_name", "pid": npu, "tid": tid, "args": {"name": LANE_NAMES[tid]}})
    ts_us = (log.issue_cycle / mhz).tolist()
    cycles = (log.callback_cycle - log.issue_cycle).tolist()
    rows = zip(
        log.npu.tolist(), lanes, ts_us, cycles, log.names, log.node_id.tolist(), log.node_type.tolist(), strict=True
    )
    for npu, tid, ts, dur_cycles, name, node_id, node_type in rows:
        args: dict[str, Any] = {"node_id": node_id, "cycles": dur_cycles}
        if node_type != NO_NODE_TYPE:
            args["node_type"] = node_type
        events.append(
            {"ph": "X", "name": name, "pid": npu, "tid": tid, "ts": ts, "dur": dur_cycles / mhz, "args": args}
        )
    return events


def write_log_timeline(log: AstraLog, path: PathLike, npu_frequency_mhz: float, *, num_npus: int | None = None) -> int:
    """Write ``log`` as a Chrome/Perfetto trace JSON at ``path`` (atomically; see :func:`log_events`).

    ``num_npus`` is recorded as ``meta_cpu_count`` as upstream does. Returns the number of node events.
    """
    document: dict[str, Any] = {"traceEvents": log_events(log, npu_frequency_mhz), "displayTimeUnit": DISPLAY_TIME_UNIT}
    if num_npus is not None:
        document["meta_cpu_count"] = num_npus
    with io.AtomicFile(Path(path)) as handle:
        handle.write(orjson.dumps(document))
    return len(log)
