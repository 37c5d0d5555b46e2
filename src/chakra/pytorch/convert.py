"""Convert one rank's PyTorch traces (host execution trace + optional Kineto trace) into a Chakra ET.

What becomes what:

* host op (ATen op, ``record_function`` range, ``ProfilerStep#N``): ``COMP_NODE``, ``is_cpu_op``
  true, with its **exclusive** time;
* ``## process_group:init ##``: ``METADATA_NODE`` keeping the record's ``inputs.values`` in the
  ``['...']`` form ASTRA-sim parses;
* kernel, memcpy, memset: ``COMP_NODE``, ``is_cpu_op`` false, ``stream``;
* the transfer of a communication call (the NCCL kernel, else the ``gloo:``/``nccl:`` work op,
  else the call's innermost op): ``COMM_COLL_NODE``/``COMM_SEND_NODE``/``COMM_RECV_NODE``,
  ``is_cpu_op`` false;
* observer roots ``[pytorch|profiler|execution_trace|...]``: dropped (no work of their own).

Node ids number the nodes from 0 in time order (start, then longer first), so consumers that issue
ready nodes by ascending id (ASTRA-sim) follow the recorded order; ``rf_id`` joins a node to its
host op and Kineto event, ``correlation`` a device node to its launch.

Dependencies (all point from an earlier to a later start, so the graph is acyclic by construction;
``data_deps`` gate every consumer, ``ctrl_deps`` hold the call-tree parent):

* per thread, every op after the op before it in start order (parents before children, so nesting
  is not double counted: each op carries its exclusive time). Busy time an op spends after one of
  its children (``PART_MIN_US`` or more, or anything after a wait) becomes a *part*: a node of the
  same name with ``part_of``, placed where it happened, so the op's own time does not delay its
  children;
* a kernel after the host op that launched it, and after the previous activity of its stream;
  ``Stream Wait Event`` sync activities order one stream after another;
* a communication transfer after the op that issued it; when the work started while the issuer was
  still running, the issuer is split at that moment (the rest becomes a part), and the delay
  between hand-over and a worker thread starting the work counts as part of the transfer;
* **waits**: where a thread sat idle (a gap inside an op between its children, or between ops) until
  an asynchronous activity it issued, or an op on another thread, finished -- the thread resumes
  within ``WAIT_RESUME_TOLERANCE_US`` (or a quarter of the wait) -- the op it resumed with depends on
  that activity, and the waiting time is taken out of the enclosing op's exclusive time. Synchronous
  collectives, ``cudaStreamSynchronize`` and friends, and autograd hand-offs all show up this way;
* a thread that starts work after being idle depends on the op that finished last on another thread;
* with ``data_deps=True``, also tensor producer -> consumer edges across threads (a communication
  transfer counts as writing the tensors it carries).

Host-only mode (no Kineto trace) keeps the structure: ops in entry (id) order per host thread,
transfers after their issuing op and, for calls recorded as synchronous, before the next op of the
thread. It has no durations, start times or device activities, and the report says so.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from chakra import __version__
from chakra.errors import PathLike
from chakra.io import FORMAT_VERSION, EtWriter
from chakra.pytorch.comms import CommCall, CommNode, comm_kind, find_calls, is_nccl_kernel
from chakra.pytorch.flops import MODELED_OPS, op_cost
from chakra.pytorch.groups import DEFAULT_GROUP, ProcessGroup, Resolution, group_table, node_attributes, resolve
from chakra.pytorch.host import PROCESS_GROUP_NODE, PROCESS_ROOT_NAMES, THREAD_ROOT_NAMES, HostNode, HostTrace
from chakra.pytorch.jsonfile import gc_paused
from chakra.pytorch.kineto import KinetoTrace
from chakra.pytorch.link import REPORT_EXAMPLES, DeviceActivity, LinkedTrace, LinkReport, link
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    BARRIER,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    GATHER,
    METADATA_NODE,
    REDUCE,
    REDUCE_SCATTER,
    SCATTER,
    AttributeProto,
    CollectiveCommType,
    GlobalMetadata,
    Node,
)
from chakra.wire import AttrEncoder, encode_node

#: A thread that resumes this soon after an activity it waited for finished is taken to have
#: waited for it. Measured resume latencies: 5-40 µs after a gloo work completes (Python returning
#: from ``Work.wait``), a few µs after a CUDA sync; 50 µs covers both with margin.
WAIT_RESUME_TOLERANCE_US = 50.0
#: ... or within this share of the wait itself (long waits on a busy machine resume later).
WAIT_RESUME_SHARE = 0.25
#: A thread idle for longer than this before an op was woken by another thread (µs). Shorter gaps
#: are its own bookkeeping between back-to-back ops.
INTER_THREAD_IDLE_US = 20.0

SYNTHETIC_ROOTS = frozenset(THREAD_ROOT_NAMES + PROCESS_ROOT_NAMES)
#: Busy time an op spends after one of its children becomes a node of its own from this length on
#: (µs); shorter stretches stay in the op (at its start), which keeps small ops whole.
PART_MIN_US = 20.0
#: Collectives ASTRA-sim refuses ("Unsupported collective comm type"), and the supported one with
#: the same traffic each is written as when ``astra_compatible`` (the original stays in
#: ``original_comm_type``): a barrier is an all-reduce of (next to) nothing in both gloo and NCCL; a
#: reduce moves what an all-reduce's first half does, so the all-reduce is an upper bound; gather
#: and scatter move what all-gather and reduce-scatter move, with the same ``comm_size`` meaning.
ASTRA_STAND_INS: dict[int, int] = {BARRIER: ALL_REDUCE, REDUCE: ALL_REDUCE, GATHER: ALL_GATHER, SCATTER: REDUCE_SCATTER}
#: Kineto ``cuda_sync`` kind that orders one stream after another (reference §2.7).
STREAM_WAIT_EVENT = "Stream Wait Event"

#: Labels of the node kinds the report counts.
KIND_CPU, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = "cpu op", "kernel", "memcpy", "memset"
KIND_COLL, KIND_SEND, KIND_RECV, KIND_METADATA = "collective", "send", "recv", "metadata"
_COMM_KIND_LABEL: dict[int, str] = {COMM_COLL_NODE: KIND_COLL, COMM_SEND_NODE: KIND_SEND, COMM_RECV_NODE: KIND_RECV}

_decode_json = msgspec.json.Decoder().decode


@dataclass
class ConversionReport:
    """What a conversion did with every input item, and what the result lacks.

    ``dropped`` counts items not written, by reason (``dropped_examples`` names a few); every
    host op and device activity is either a node (counted in ``nodes`` by kind) or dropped.
    """

    rank: int | None
    mode: str  # "linked" or "host-only"
    host_ops: int = 0
    device_activities: int = 0
    nodes: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_examples: list[tuple[int | str, str, str]] = field(default_factory=list)
    comm: Counter[str] = field(default_factory=Counter)  # "ALL_REDUCE", "send", ...
    comm_notes: Counter[str] = field(default_factory=Counter)  # how sizes were found, odd cases
    comm_groups: Counter[str] = field(default_factory=Counter)  # how each node's group was found
    waits: int = 0
    wait_us: float = 0.0
    inter_thread_deps: int = 0
    parts: int = 0  # extra nodes for exclusive time an op spent after a child (PART_MIN_US)
    data_deps: int = 0
    edges_against_time: int = 0
    measured_span_us: float | None = None
    lacks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    link: LinkReport | None = None

    def drop(self, key: int | str, name: str, reason: str) -> None:
        self.dropped[reason] += 1
        if len(self.dropped_examples) < REPORT_EXAMPLES:
            self.dropped_examples.append((key, name, reason))

    @property
    def node_count(self) -> int:
        return sum(self.nodes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "mode": self.mode,
            "host_ops": self.host_ops,
            "device_activities": self.device_activities,
            "nodes": dict(self.nodes),
            "node_count": self.node_count,
            "dropped": dict(self.dropped),
            "dropped_examples": [list(e) for e in self.dropped_examples],
            "comm": dict(self.comm),
            "comm_notes": dict(self.comm_notes),
            "comm_groups": dict(self.comm_groups),
            "waits": self.waits,
            "wait_us": round(self.wait_us, 3),
            "inter_thread_deps": self.inter_thread_deps,
            "parts": self.parts,
            "data_deps": self.data_deps,
            "edges_against_time": self.edges_against_time,
            "measured_span_us": self.measured_span_us,
            "lacks": self.lacks,
            "notes": self.notes,
            "link": self.link.to_dict() if self.link else None,
        }


@dataclass(slots=True)
class _Segment:
    """A stretch of an op's exclusive time on its thread (``owner`` None: between top-level ops)."""

    start_us: float
    end_us: float
    owner: _Item | None
    first: bool  # starts where the owner starts
    waited: bool = False  # the thread waited here until wait_end_us (for wait_edges[edge])
    wait_end_us: float = 0.0
    edge: int = -1


@dataclass(slots=True)
class _Item:
    """One node under construction. ``key`` orders nodes in time (ties: parents first)."""

    node_id: int
    name: str
    node_type: int
    key: tuple[float, float, int]
    thread: Any = None  # chain key: Kineto tid, host tid, or ("stream", device, stream)
    ts_us: float | None = None
    dur_us: float = 0.0
    excl_us: float = 0.0
    is_cpu: bool = True
    host: HostNode | None = None
    activity: DeviceActivity | None = None
    data: list[int] = field(default_factory=list)
    ctrl: list[int] = field(default_factory=list)
    attrs: list[tuple[str, Any]] = field(default_factory=list)
    depth: int = 0
    part_of: _Item | None = None  # for the later parts of an op split at its children

    @property
    def end_us(self) -> float:
        return (self.ts_us or 0.0) + self.dur_us


@dataclass
class Conversion:
    """The result for one rank: metadata, the encoded nodes (id ``i`` at position ``i``), its
    communication nodes and the report. ``nodes`` decodes them into messages on first use."""

    metadata: GlobalMetadata
    payloads: list[bytes]
    comm_nodes: list[CommNode]
    report: ConversionReport
    rank: int | None
    groups: dict[str, ProcessGroup] = field(default_factory=dict)
    group_attrs: dict[int, list[tuple[str, Any]]] = field(default_factory=dict)  # what apply_groups wrote
    _nodes: list[Node] | None = None

    @property
    def nodes(self) -> list[Node]:
        if self._nodes is None:
            self._nodes = [Node.FromString(payload) for payload in self.payloads]
        return self._nodes

    def add_attrs(self, node_id: int, fields: list[bytes]) -> None:
        """Append encoded attributes (:class:`chakra.wire.AttrEncoder`) to node ``node_id``."""
        self.payloads[node_id] += b"".join(fields)
        self._nodes = None

    def write(self, path: PathLike, *, compress: str | None = "auto") -> None:
        """Write the ET atomically."""
        with EtWriter(path, self.metadata, compress=compress) as writer:
            for payload in self.payloads:
                writer.write_serialized(payload)


# ---------------------------------------------------------------------------------------------


def _python_repr_of_json(raw: msgspec.Raw, cache: dict[bytes, bytes] | None = None) -> bytes:
    """The text upstream stores for an IO list, UTF-8 encoded: Python ``str()`` of the parsed
    JSON (``reference/chakra-format.md`` §7); shapes and types repeat, so callers pass a cache."""
    if cache is not None:
        key = bytes(raw)
        text = cache.get(key)
        if text is None:
            text = cache[key] = str(_decode_json(key)).encode()
        return text
    return str(_decode_json(raw)).encode()


def _thread_ids(items: list[_Item]) -> dict[Any, int]:
    """Host thread id for each Kineto thread: the host ``tid`` most of its ATen ops carry (gloo
    works are recorded under the issuing thread's id although they run on a worker), a fresh id
    for threads without evidence."""
    votes: dict[Any, Counter[int]] = defaultdict(Counter)
    fallback: dict[Any, Counter[int]] = defaultdict(Counter)
    for item in items:
        if item.host is None:
            continue
        (votes if item.host.scope == 0 else fallback)[item.thread][item.host.tid] += 1
    mapping: dict[Any, int] = {}
    used: set[int] = set()
    threads = sorted({i.thread for i in items if i.host is not None}, key=str)
    for thread in threads:
        counts = votes.get(thread) or fallback.get(thread) or Counter()
        for tid, _ in counts.most_common():
            if tid not in used:
                mapping[thread] = tid
                used.add(tid)
                break
    next_tid = max(used, default=0) + 1
    for thread in threads:
        if thread not in mapping:
            mapping[thread] = next_tid
            next_tid += 1
    return mapping


class _Builder:
    """Holds the state of one conversion; :func:`convert` drives it."""

    def __init__(
        self, host: HostTrace, linked: LinkedTrace | None, rank: int | None, data_deps: bool, astra_compatible: bool
    ):
        self.astra_compatible = astra_compatible
        self.host = host
        self.linked = linked
        self.rank = rank
        self.with_data_deps = data_deps
        self.report = ConversionReport(rank=rank, mode="linked" if linked else "host-only")
        self.report.link = linked.report if linked else None
        self.items: dict[int, _Item] = {}
        self.by_host_id = host.by_id()
        self.groups = host.process_groups()
        self.calls = find_calls(host.nodes, self.groups)
        self.metadata_item: _Item | None = None
        self.wait_edges: list[tuple[_Item, _Item]] = []  # (waited, resumed), tied after split_parts
        self.next_id = max((n.id for n in host.nodes), default=0) + 1  # for nodes the host trace lacks

    # -- nodes ------------------------------------------------------------------------------

    def add_host_ops(self) -> None:
        timing = self.linked.timing if self.linked else {}
        for node in self.host.nodes:
            self.report.host_ops += 1
            if node.name in SYNTHETIC_ROOTS:
                self.report.drop(node.id, node.name, "observer root (no work of its own)")
                continue
            if node.name == PROCESS_GROUP_NODE:
                item = _Item(node.id, node.name, METADATA_NODE, (float("-inf"), 0.0, node.id), host=node, is_cpu=False)
                self.metadata_item = self.items[node.id] = item
                continue
            if self.linked is not None:
                t = timing.get(node.id)
                if t is None:
                    reason = (
                        "recorded without an rf_id, so it cannot be timed"
                        if not node.rf_id
                        else "outside the profiled window (no Kineto op with its rf_id)"
                    )
                    self.report.drop(node.id, node.name, reason)
                    continue
                item = _Item(node.id, node.name, COMP_NODE, (t.ts_us, -t.dur_us, node.id), thread=t.thread)
                item.ts_us, item.dur_us, item.excl_us = t.ts_us, t.dur_us, t.exclusive_us
            else:
                item = _Item(node.id, node.name, COMP_NODE, (float(node.id), 0.0, node.id), thread=node.tid)
            item.host = node
            self.items[node.id] = item

    def add_device_activities(self) -> None:
        if self.linked is None:
            return
        next_id = self.next_id
        for activity in self.linked.activities:
            self.report.device_activities += 1
            if activity.cat == "cuda_sync":
                # orders streams (see _stream_waits); it does no work of its own
                self.report.drop(activity.name, activity.name, "synchronisation event (turned into dependencies)")
                continue
            item = _Item(next_id, activity.name, COMP_NODE, (activity.ts_us, -activity.dur_us, next_id))
            item.thread = ("stream", activity.device, activity.stream)
            item.ts_us, item.dur_us, item.excl_us = activity.ts_us, activity.dur_us, activity.dur_us
            item.is_cpu = False
            item.activity = activity
            if activity.host_id is not None and activity.host_id in self.items:
                item.data.append(activity.host_id)
                item.ctrl.append(activity.host_id)
            self.items[next_id] = item
            next_id += 1
        self.next_id = next_id

    # -- threads and chains -----------------------------------------------------------------

    def threads(self) -> dict[Any, list[_Item]]:
        by_thread: dict[Any, list[_Item]] = defaultdict(list)
        for item in self.items.values():
            if item.node_type != METADATA_NODE:
                by_thread[item.thread].append(item)
        for items in by_thread.values():
            items.sort(key=lambda i: i.key)
        return by_thread

    def chain(self, by_thread: dict[Any, list[_Item]]) -> None:
        """Each op of a thread or stream after the one before it."""
        for items in by_thread.values():
            for prev, item in itertools.pairwise(items):
                item.data.append(prev.node_id)
            if self.metadata_item is not None and items:
                items[0].data.append(self.metadata_item.node_id)

    def nest(self, by_thread: dict[Any, list[_Item]]) -> dict[Any, list[_Segment]]:
        """Per CPU thread: depth of every op, call-tree parents (``ctrl_deps``) and the segments of
        exclusive time where the thread ran no child (owner ``None``: between top-level ops)."""
        segments: dict[Any, list[_Segment]] = {}
        for thread, items in by_thread.items():
            if isinstance(thread, tuple):  # device streams have no nesting
                continue
            segs: list[_Segment] = []
            stack: list[list[Any]] = []  # [item, cursor: where its exclusive time resumes]
            top_cursor = float("-inf")
            for item in items:
                ts = item.ts_us or 0.0
                while stack and ts >= stack[-1][0].end_us:
                    top_cursor = _close(stack, segs, top_cursor)
                if stack:
                    parent, cursor = stack[-1]
                    if ts > cursor:
                        segs.append(_Segment(cursor, ts, parent, cursor == (parent.ts_us or 0.0)))
                    stack[-1][1] = max(cursor, ts)
                    item.depth = len(stack)
                    if item.host is not None and item.host.parent == parent.node_id:
                        item.ctrl.append(parent.node_id)
                else:
                    if top_cursor != float("-inf") and ts > top_cursor:
                        segs.append(_Segment(top_cursor, ts, None, False))
                    item.depth = 0
                stack.append([item, ts])
            while stack:
                top_cursor = _close(stack, segs, top_cursor)
            segments[thread] = segs
            # exclusive time = the op's segments, consistent with how children were assigned above
            for item in items:
                item.excl_us = 0.0
            for segment in segs:
                if segment.owner is not None:
                    segment.owner.excl_us += segment.end_us - segment.start_us
        return segments

    # -- communication ----------------------------------------------------------------------

    def attach_comm(self) -> list[CommNode]:
        """Turn each call's transfer into a communication node with its attributes."""
        kernels_of: dict[int, list[_Item]] = defaultdict(list)
        for item in self.items.values():
            if item.activity is not None and item.activity.host_id is not None and is_nccl_kernel(item.name):
                kernels_of[item.activity.host_id].append(item)
        comm_nodes: list[CommNode] = []
        claimed: set[int] = set()
        for call in self.calls.values():
            members = [m for m in call.member_ids if m in self.items]
            if not members:
                self.report.comm_notes["call outside the converted window"] += 1
                continue
            kernels = sorted((k for m in members for k in kernels_of.get(m, [])), key=lambda i: i.key)
            if kernels:
                transfer = kernels[0]
                for extra in kernels[1:]:
                    self.report.comm_notes["extra kernel of one call kept as device compute"] += 1
                    claimed.add(extra.node_id)
            elif call.work_id is not None and call.work_id in self.items:
                transfer = self.items[call.work_id]
            else:
                transfer = self.items[max(members)]  # innermost op of the nest (ids grow inwards)
            claimed.add(transfer.node_id)
            issuer = self.items.get(call.root_id)
            if (
                issuer is not None
                and issuer is not transfer
                and issuer.thread != transfer.thread
                and issuer.node_id not in transfer.data
            ):
                transfer.data.append(issuer.node_id)
            comm_nodes.append(self._make_comm(call, transfer))
        for item in self.items.values():
            if item.activity is not None and is_nccl_kernel(item.name) and item.node_id not in claimed:
                kind = comm_kind(item.name)
                if kind is None or "sendrecv" in item.name.lower():
                    self.report.comm_notes["NCCL kernel without its call kept as device compute"] += 1
                    continue
                call = CommCall(item.node_id, item.name, kind[0], kind[1], 0, "kernel name only", 0)
                self.report.comm_notes["NCCL kernel without its call: size unknown (0)"] += 1
                comm_nodes.append(self._make_comm(call, item))
        return comm_nodes

    def _make_comm(self, call: CommCall, transfer: _Item) -> CommNode:
        transfer.node_type = call.node_type
        transfer.is_cpu = False
        self.report.comm[_comm_label(call)] += 1
        self.report.comm_notes[f"size from {call.size_source or 'nothing'}"] += 1
        if call.node_type == COMM_COLL_NODE:
            comm_type = call.comm_type
            if self.astra_compatible and comm_type in ASTRA_STAND_INS:
                transfer.attrs.append(("original_comm_type", comm_type))
                comm_type = ASTRA_STAND_INS[comm_type]
                stand_in = CollectiveCommType.Name(comm_type)  # type: ignore[arg-type]
                self.report.comm_notes[f"{_comm_label(call)} written as {stand_in} for ASTRA-sim"] += 1
            transfer.attrs.append(("comm_type", comm_type))
        transfer.attrs.append(("comm_size", call.size_bytes))  # comm_root, pg_name, peers: apply_groups
        transfer.attrs.append(("comm_call", call.name))
        return CommNode(
            node_id=transfer.node_id,
            node_type=call.node_type,
            comm_type=call.comm_type,
            size_bytes=call.size_bytes,
            pg_name=call.pg_name,
            start_us=transfer.ts_us,
            end_us=transfer.end_us if transfer.ts_us is not None else None,
            issue_order=call.root_id,
            root=call.root,
            peer=call.peer,
            tag=call.tag,
        )

    # -- waits and inter-thread edges ----------------------------------------------------------

    def split_at_issue(self, segments: dict[Any, list[_Segment]]) -> None:
        """Where work on another thread started while the op that issued it was still running
        (a gloo ``c10d::`` op that stays busy after handing its work to the worker), split the
        issuer's time at that moment: the work depends on the issuer's first piece, the rest
        becomes a part (or a wait, if the issuer then waited for the work)."""
        by_owner: dict[int, list[_Segment]] = defaultdict(list)
        for segs in segments.values():
            for segment in segs:
                if segment.owner is not None:
                    by_owner[segment.owner.node_id].append(segment)
        for item in self.items.values():
            if item.ts_us is None or isinstance(item.thread, tuple):
                continue
            for dep in item.data:
                issuer = self.items.get(dep)
                if (
                    issuer is None
                    or issuer.ts_us is None
                    or isinstance(issuer.thread, tuple)
                    or issuer.thread == item.thread
                    or not issuer.ts_us < item.ts_us < issuer.end_us - PART_MIN_US
                ):
                    continue
                for segment in by_owner.get(issuer.node_id, []):
                    if segment.start_us < item.ts_us < segment.end_us - PART_MIN_US:
                        rest = _Segment(item.ts_us, segment.end_us, issuer, False)
                        segment.end_us = item.ts_us
                        segments[issuer.thread].append(rest)
                        by_owner[issuer.node_id].append(rest)
                        break

    def waits(self, by_thread: dict[Any, list[_Item]], segments: dict[Any, list[_Segment]]) -> None:
        """Dependencies for the places a thread waited (see the module docstring)."""
        cpu_threads = [t for t in by_thread if not isinstance(t, tuple)]
        issued: dict[Any, list[_Item]] = defaultdict(list)  # thread -> async items it started
        for item in self.items.values():
            if item.ts_us is None or item.node_type == METADATA_NODE:
                continue
            for dep in item.data:
                parent = self.items.get(dep)
                if parent is not None and parent.thread != item.thread and not isinstance(parent.thread, tuple):
                    issued[parent.thread].append(item)
        for thread in cpu_threads:
            items = by_thread[thread]
            starts = [i.ts_us or 0.0 for i in items]
            issued_here = sorted(issued.get(thread, []), key=lambda i: i.end_us)
            others = [i for t in cpu_threads if t != thread for i in by_thread[t] if i.depth == 0]
            # inside an op: anything the thread could have waited for; between top-level ops only
            # what it issued itself (a worker thread idles between works without waiting for them)
            inside = sorted(issued_here + others, key=lambda i: i.end_us)
            lists = {True: (inside, [c.end_us for c in inside]), False: (issued_here, [c.end_us for c in issued_here])}
            for segment in segments.get(thread, []):
                seg_start, seg_end, owner = segment.start_us, segment.end_us, segment.owner
                candidates, ends = lists[owner is not None]
                k = bisect.bisect_right(ends, seg_end) - 1
                if k < 0 or ends[k] <= seg_start:
                    continue
                waited = candidates[k]
                wait_us = ends[k] - seg_start
                if seg_end - ends[k] > max(WAIT_RESUME_TOLERANCE_US, WAIT_RESUME_SHARE * wait_us):
                    continue
                j = bisect.bisect_left(starts, seg_end)
                if j >= len(items):
                    continue
                self.wait_edges.append((waited, items[j]))
                if owner is not None:
                    owner.excl_us = max(0.0, owner.excl_us - wait_us)
                segment.waited = True
                segment.wait_end_us = ends[k]
                segment.edge = len(self.wait_edges) - 1
                self.report.waits += 1
                self.report.wait_us += wait_us

    def split_parts(self, by_thread: dict[Any, list[_Item]], segments: dict[Any, list[_Segment]]) -> None:
        """Give busy exclusive time that an op spent *after* one of its children (at least
        ``PART_MIN_US``, or any time after a wait) a node of its own at that place in the thread,
        named like the op: left at the op's start it would delay the op's children and hide
        overlap with what they issued."""
        for thread, segs in segments.items():
            added = False
            for segment in segs:
                owner = segment.owner
                if owner is None:
                    continue
                if segment.waited:
                    # what the op did after the wait ended (at least returning from it) comes after it
                    start_us = segment.wait_end_us
                    length = segment.end_us - start_us
                    if length <= 0:
                        continue
                elif segment.first or segment.end_us - segment.start_us < PART_MIN_US:
                    continue
                else:
                    start_us, length = segment.start_us, segment.end_us - segment.start_us
                node_id = self.next_id
                self.next_id += 1
                part = _Item(node_id, owner.name, COMP_NODE, (start_us, -length, node_id), thread=thread)
                part.ts_us, part.dur_us, part.excl_us = start_us, length, length
                if segment.waited:
                    waited, _ = self.wait_edges[segment.edge]
                    self.wait_edges[segment.edge] = (waited, part)
                part.depth = owner.depth + 1
                part.ctrl.append(owner.node_id)
                part.part_of = owner
                owner.excl_us = max(0.0, owner.excl_us - length)
                self.items[node_id] = part
                by_thread[thread].append(part)
                self.report.parts += 1
                added = True
            if added:
                by_thread[thread].sort(key=lambda i: i.key)

    def tie_waits(self, by_thread: dict[Any, list[_Item]]) -> None:
        """The op that resumed after a wait depends on the *last* node of what it waited for: an op
        with children (a gloo work that copies, an autograd function) is only done when its last
        child or part is."""
        starts = {t: [i.ts_us or 0.0 for i in items] for t, items in by_thread.items()}
        for waited, resumed in self.wait_edges:
            items = by_thread.get(waited.thread, [])
            k = bisect.bisect_left(starts.get(waited.thread, []), waited.end_us) - 1
            last = items[k] if k >= 0 and items[k].key >= waited.key else waited
            if last.node_id not in resumed.data and last is not resumed:
                resumed.data.append(last.node_id)

    def absorb_pickup(self, by_thread: dict[Any, list[_Item]]) -> None:
        """A transfer run by a worker thread (gloo) starts some time after its issuer handed it over
        and the worker was free (µs normally, ms for a group's first collective); nothing else
        explains that delay, so it counts as part of the communication as the program sees it:
        the transfer node starts at the hand-over."""
        for thread, items in by_thread.items():
            if isinstance(thread, tuple):
                continue
            for k, item in enumerate(items):
                if item.node_type not in _COMM_KIND_LABEL or item.ts_us is None:
                    continue
                issuers = [self.items[d] for d in item.data if d in self.items and self.items[d].thread != thread]
                ready_us = max([i.end_us for i in issuers if i.ts_us is not None], default=None)
                if ready_us is None:
                    continue
                if k > 0:
                    ready_us = max(ready_us, items[k - 1].end_us)
                delay_us = item.ts_us - ready_us
                if delay_us > 0:
                    item.ts_us -= delay_us
                    item.dur_us += delay_us
                    item.excl_us += delay_us

    def inter_thread(self, by_thread: dict[Any, list[_Item]]) -> None:
        """A top-level op that starts a busy period of its thread depends on the op that finished
        last on another CPU thread before it started."""
        cpu_threads = [t for t in by_thread if not isinstance(t, tuple)]
        if len(cpu_threads) < 2:
            return
        finished = {t: sorted(by_thread[t], key=lambda i: i.end_us) for t in cpu_threads}
        finished_ends = {t: [i.end_us for i in items] for t, items in finished.items()}
        for thread in cpu_threads:
            last_end = float("-inf")
            for item in by_thread[thread]:
                if item.depth != 0:
                    continue
                ts = item.ts_us or 0.0
                idle = ts - last_end
                last_end = max(last_end, item.end_us)
                if idle <= INTER_THREAD_IDLE_US or any(
                    not isinstance(self.items[d].thread, tuple) and self.items[d].thread != thread
                    for d in item.data
                    if d in self.items
                ):
                    continue  # busy or already tied to another thread (an issued transfer)
                best: _Item | None = None
                for other in cpu_threads:
                    if other == thread:
                        continue
                    k = bisect.bisect_right(finished_ends[other], ts) - 1
                    if k >= 0 and (best is None or finished_ends[other][k] > best.end_us):
                        best = finished[other][k]
                if best is not None and best.node_id not in item.data:
                    item.data.append(best.node_id)
                    self.report.inter_thread_deps += 1

    def stream_waits(self, by_thread: dict[Any, list[_Item]]) -> None:
        """``Stream Wait Event`` sync activities: the next activity of the waiting stream after
        the last activity of the awaited stream that finished before the wait."""
        if self.linked is None:
            return
        for sync in self.linked.activities:
            if sync.cat != "cuda_sync" or (sync.args.get("cuda_sync_kind") or sync.name) != STREAM_WAIT_EVENT:
                continue
            waiting = by_thread.get(("stream", sync.device, sync.args.get("stream", sync.stream)))
            awaited = by_thread.get(("stream", sync.device, sync.args.get("wait_on_stream")))
            if not waiting or not awaited:
                continue
            sync_end = sync.ts_us + sync.dur_us
            before = [a for a in awaited if a.end_us <= sync_end]
            after = [w for w in waiting if (w.ts_us or 0.0) >= sync.ts_us]
            if before and after and before[-1].node_id not in after[0].data:
                after[0].data.append(before[-1].node_id)

    # -- host-only structure ------------------------------------------------------------------

    def host_only_structure(self, by_thread: dict[Any, list[_Item]]) -> None:
        """Without timing: call-tree parents as ``ctrl_deps``; transfers leave their thread's
        chain (they run asynchronously) and synchronous calls hold the thread until they finish."""
        transfers = {
            i.node_id: i for i in self.items.values() if i.node_type in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE)
        }
        for items in by_thread.values():
            kept = [i for i in items if i.node_id not in transfers]
            items[:] = kept
        for item in self.items.values():
            parent = item.host.parent if item.host is not None else None
            if parent is not None and parent != item.node_id and parent in self.items and parent not in item.ctrl:
                item.ctrl.append(parent)
        for call in self.calls.values():
            transfer = next((transfers[m] for m in call.member_ids if m in transfers), None)
            issuer = self.items.get(call.root_id)
            if transfer is None or issuer is None:
                continue
            if transfer is not issuer and issuer.node_id not in transfer.data:
                transfer.data.append(issuer.node_id)
            if call.async_op is False:
                after = max(call.member_ids)
                items = by_thread.get(issuer.thread, [])
                k = bisect.bisect_right([i.node_id for i in items], after)
                if k < len(items):
                    items[k].data.append(transfer.node_id)

    # -- tensors ------------------------------------------------------------------------------

    def tensor_deps(self) -> None:
        """Producer -> consumer edges across threads, by tensor id, among leaf ops and transfers."""
        has_child = {i.host.parent for i in self.items.values() if i.host is not None}
        writer: dict[int, _Item] = {}
        for item in sorted(self.items.values(), key=lambda i: i.key):
            if item.host is None or item.node_type == METADATA_NODE:
                continue
            is_transfer = item.node_type != COMP_NODE
            if item.node_id in has_child and not is_transfer:
                continue
            inputs = _tensor_ids(_safe_values(item.host.inputs.raw_values))
            for tensor in inputs:
                producer = writer.get(tensor)
                if producer is not None and producer.thread != item.thread and producer.node_id not in item.data:
                    item.data.append(producer.node_id)
                    self.report.data_deps += 1
            outputs = _tensor_ids(_safe_values(item.host.outputs.raw_values))
            for tensor in outputs + (inputs if is_transfer else []):
                writer[tensor] = item

    # -- output -------------------------------------------------------------------------------

    def mark_costed_ancestors(self) -> None:
        """Ops with a modelled op below them (``linear`` over ``addmm``, ``conv2d`` over
        ``convolution``) get no cost of their own: the work would be counted twice."""
        self.costed_below: set[int] = set()
        for node in self.host.nodes:
            if node.name not in MODELED_OPS or node.id not in self.items:
                continue
            parent = self.by_host_id.get(node.parent)
            while parent is not None and parent.id not in self.costed_below and parent.id != parent.parent:
                self.costed_below.add(parent.id)
                parent = self.by_host_id.get(parent.parent)

    def finish(self, comm_nodes: list[CommNode]) -> Conversion:
        """Nodes in time order, numbered from 0 in that order: consumers that issue ready nodes by
        ascending id (ASTRA-sim) then follow the recorded order, collectives included."""
        self.mark_costed_ancestors()
        items = sorted(self.items.values(), key=lambda i: i.key)
        new_id = {item.node_id: index for index, item in enumerate(items)}
        thread_ids = _thread_ids(items) if self.linked else {}
        self.io_cache: dict[bytes, bytes] = {}
        self.encode = AttrEncoder()
        self.shared_attrs: dict[tuple[Any, ...], bytes] = {}
        payloads: list[bytes] = []
        starts = [i.ts_us for i in items if i.ts_us is not None]
        if starts:
            self.report.measured_span_us = max(i.end_us for i in items if i.ts_us is not None) - min(starts)
        kinds = self.report.nodes
        for own, item in enumerate(items):
            data = [new_id[d] for d in item.data if d in new_id]
            ctrl = [new_id[d] for d in item.ctrl if d in new_id]
            kept_data = _dedupe([d for d in data if d < own])
            kept_ctrl = _dedupe([d for d in ctrl if d < own])
            self.report.edges_against_time += len(data) - len(kept_data) + len(ctrl) - len(kept_ctrl)
            attrs = self._attributes(item, thread_ids)
            if item.part_of is not None:
                attrs.append(self.encode("part_of", new_id[item.part_of.node_id]))
            timed = item.ts_us is not None
            payloads.append(
                encode_node(
                    own,
                    item.name,
                    item.node_type,
                    kept_ctrl,
                    kept_data,
                    max(0, round(item.ts_us)) if timed else 0,  # type: ignore[arg-type]
                    max(0, round(item.excl_us)) if timed else 0,
                    self._io(item.host.inputs) if item.host is not None else None,
                    self._io(item.host.outputs) if item.host is not None and item.node_type != METADATA_NODE else None,
                    attrs,
                )
            )
            kinds[self._kind_label(item)] += 1
        for comm in comm_nodes:
            comm.node_id = new_id[comm.node_id]
        return Conversion(self._metadata(), payloads, comm_nodes, self.report, self.rank)

    def _io(self, lists: Any) -> tuple[bytes, bytes, bytes]:
        """The host trace's IO lists in upstream's text form (values unique, shapes/types repeat)."""
        return (
            _python_repr_of_json(lists.raw_values),
            _python_repr_of_json(lists.raw_shapes, self.io_cache),
            _python_repr_of_json(lists.raw_types, self.io_cache),
        )

    def _kind_label(self, item: _Item) -> str:
        if item.node_type == METADATA_NODE:
            return KIND_METADATA
        if item.node_type in _COMM_KIND_LABEL:
            return _COMM_KIND_LABEL[item.node_type]
        if item.activity is not None:
            return {"gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET, "Memcpy": KIND_MEMCPY}.get(
                item.activity.cat, KIND_KERNEL
            )
        return KIND_CPU

    def _attributes(self, item: _Item, thread_ids: dict[Any, int]) -> list[bytes]:
        """The node's attributes, encoded, in the registered value kinds."""
        encode = self.encode
        out: list[bytes] = []
        host = item.host
        if item.node_type != METADATA_NODE:
            out.append(encode("is_cpu_op", item.is_cpu))
        if host is not None:
            tid = thread_ids.get(item.thread, host.tid) if self.linked else host.tid
            out += [encode.int64("rf_id", host.rf_id), encode("fw_parent", host.fw_parent)]
            out.append(encode.int64("seq_id", host.seq_id))
            # these four repeat together (one op kind on one thread): encoded once per combination
            key = (host.scope, tid, host.fw_tid, host.op_schema)
            shared = self.shared_attrs.get(key)
            if shared is None:
                shared = self.shared_attrs[key] = b"".join(
                    [
                        encode("scope", key[0]),
                        encode("tid", key[1]),
                        encode("fw_tid", key[2]),
                        encode("op_schema", key[3]),
                    ]
                )
            out.append(shared)
            if host.name in MODELED_OPS and item.node_type == COMP_NODE and host.id not in self.costed_below:
                cost = _cost(host)
                if cost is not None:
                    out += [encode("num_ops", cost.num_ops), encode("tensor_size", cost.tensor_size)]
        elif item.part_of is not None and item.part_of.host is not None:
            owner = item.part_of.host
            out += [encode("rf_id", owner.rf_id), encode("tid", thread_ids.get(item.thread, owner.tid))]
        elif item.activity is not None:
            activity = item.activity
            out.append(encode("stream", activity.stream if isinstance(activity.stream, int) else 0))
            if isinstance(activity.device, int):
                out.append(encode("device", activity.device))
            if activity.correlation is not None:
                out.append(encode("correlation", int(activity.correlation)))
            launcher = self.items.get(activity.host_id) if activity.host_id is not None else None
            if launcher is not None and launcher.host is not None:
                out.append(encode("rf_id", launcher.host.rf_id))
            nbytes = activity.args.get("bytes")
            if isinstance(nbytes, int) and item.node_type == COMP_NODE:
                out.append(encode("tensor_size", nbytes))
        out += [encode(name, value) for name, value in item.attrs]
        return out

    def _metadata(self) -> GlobalMetadata:
        metadata = GlobalMetadata(version=FORMAT_VERSION)
        host = self.host
        for name, value in (
            ("schema", host.schema),
            ("pid", host.pid),
            ("time", host.time),
            ("start_ts", host.start_ts),
            ("finish_ts", host.finish_ts),
            ("rank", self.rank),
            ("converter", f"chakra-et {__version__} (pytorch, {self.report.mode})"),
        ):
            if value is None:
                continue
            attr = AttributeProto(name=name)
            if isinstance(value, str):
                attr.string_val = value
            elif value >= 0:
                attr.uint64_val = value
            else:
                attr.int64_val = value
            metadata.attr.append(attr)
        return metadata


def _close(stack: list[list[Any]], segs: list[_Segment], top_cursor: float) -> float:
    """Pop the innermost open op: its last exclusive segment, and move its parent's cursor (or the
    thread's, returned) past everything below it."""
    owner, cursor = stack.pop()
    if owner.end_us > cursor:
        segs.append(_Segment(cursor, owner.end_us, owner, cursor == (owner.ts_us or 0.0)))
    # a child may outlast its parent (gloo's recv runs on after c10d::recv_ returns): that time
    # is the child's, not the grandparent's
    subtree_end = max(owner.end_us, cursor)
    if stack:
        stack[-1][1] = max(stack[-1][1], subtree_end)
        return top_cursor
    return max(top_cursor, subtree_end)


def _comm_label(call: CommCall) -> str:
    if call.node_type == COMM_COLL_NODE and call.comm_type is not None:
        return CollectiveCommType.Name(call.comm_type)
    return _COMM_KIND_LABEL[call.node_type]


def _cost(host: HostNode) -> Any:
    try:
        return op_cost(
            host.name,
            host.inputs.shapes(),
            host.inputs.types(),
            host.outputs.shapes(),
            host.outputs.types(),
            host.inputs.values(),
        )
    except msgspec.DecodeError:
        return None


def _dedupe(ids: list[int]) -> list[int]:
    return list(dict.fromkeys(ids)) if len(ids) > 1 else ids


def _safe_values(raw: bytes) -> Any:
    try:
        return _decode_json(raw)
    except msgspec.DecodeError:
        return []


def _tensor_ids(value: Any) -> list[int]:
    """Tensor ids (first field of ``[tensor_id, storage_id, offset, numel, itemsize, device]``)."""
    found: list[int] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if not isinstance(v, list):
            continue
        if len(v) == 6 and isinstance(v[5], str) and isinstance(v[0], int):
            found.append(v[0])
        else:
            stack.extend(v)
    return found


def convert(
    host: HostTrace,
    device: KinetoTrace | None = None,
    *,
    rank: int | None = None,
    data_deps: bool = False,
    linked: LinkedTrace | None = None,
    astra_compatible: bool = True,
) -> Conversion:
    """Convert one rank: ``host`` with its Kineto ``device`` trace (or an already ``linked`` pair),
    or host-only when neither is given. Raises :class:`~chakra.errors.ChakraInputError` when the two
    traces come from different runs.

    ``astra_compatible`` writes the collectives ASTRA-sim cannot simulate as the ones it can
    (``ASTRA_STAND_INS``), keeping the recorded type in ``original_comm_type``; pass ``False`` to
    write the recorded types only."""
    if linked is None and device is not None:
        linked = link(host, device)
    # the builder allocates a few objects per op and frees none until the end: the cyclic
    # collector would rescan the whole trace again and again (a third of the time)
    with gc_paused():
        return _convert(host, linked, rank, data_deps, astra_compatible)


def _convert(
    host: HostTrace, linked: LinkedTrace | None, rank: int | None, data_deps: bool, astra_compatible: bool
) -> Conversion:
    if rank is None and linked is not None:
        rank = linked.device.rank
    builder = _Builder(host, linked, rank, data_deps, astra_compatible)
    builder.add_host_ops()
    builder.add_device_activities()
    comm_nodes = builder.attach_comm()
    by_thread = builder.threads()
    report = builder.report
    if linked is not None:
        segments = builder.nest(by_thread)
        builder.split_at_issue(segments)
        builder.waits(by_thread, segments)
        builder.split_parts(by_thread, segments)
        builder.tie_waits(by_thread)
        builder.chain(by_thread)
        builder.inter_thread(by_thread)
        builder.absorb_pickup(by_thread)
        builder.stream_waits(by_thread)
    else:
        builder.host_only_structure(by_thread)
        builder.chain(by_thread)
        report.lacks = [
            "durations and start times (no device trace: the host trace records none)",
            "device activities (kernels, memcpy, memset) and their streams",
            "waits measured from timing (only calls recorded as synchronous hold their thread)",
        ]
    if data_deps:
        builder.tensor_deps()
    if (
        linked is not None
        and not linked.activities
        and any("nccl" in str(group.get("backend_config", "")) for group in builder.groups)
    ):
        report.notes.append("the process groups use CUDA but the Kineto trace has no device activity")
    report.notes.extend(host.notes)
    conversion = builder.finish(comm_nodes)
    device_groups = linked.device.process_groups() if linked else []
    world_size = _world_size(builder.groups, linked)
    table = group_table(builder.groups, device_groups, world_size=world_size)
    rank = conversion.rank or 0
    have_records = bool(builder.groups or device_groups)
    resolution = resolve({rank: comm_nodes}, table, world_size, have_records=have_records, align=False)
    apply_groups(conversion, resolution[rank], table)
    return conversion


def _world_size(host_groups: list[dict[str, Any]], linked: LinkedTrace | None) -> int:
    """World size from Kineto's ``distributedInfo``, else the default group's record, else 1."""
    if linked is not None and isinstance(linked.device.distributed_info.get("world_size"), int):
        return int(linked.device.distributed_info["world_size"])
    for group in host_groups:
        if str(group.get("pg_name")) == DEFAULT_GROUP and isinstance(group.get("group_size"), int):
            return int(group["group_size"])
    return 1


def apply_groups(conversion: Conversion, resolution: dict[int, Resolution], groups: dict[str, ProcessGroup]) -> None:
    """Write the group-dependent attributes (:func:`~chakra.pytorch.groups.node_attributes`) of the
    conversion's communication nodes and count how each group was found."""
    rank = conversion.rank or 0
    encode = AttrEncoder()
    conversion.report.comm_groups = Counter(r.method for r in resolution.values())
    conversion.group_attrs = node_attributes(conversion.comm_nodes, resolution, groups, rank)
    for node_id, values in conversion.group_attrs.items():
        conversion.add_attrs(node_id, [encode(name, value) for name, value in values])
    conversion.groups = groups


def convert_files(
    host_path: PathLike,
    device_path: PathLike | None,
    out_path: PathLike,
    *,
    rank: int | None = None,
    data_deps: bool = False,
    astra_compatible: bool = True,
) -> Conversion:
    """Load, link, convert and write one rank; returns the :class:`Conversion` (nodes included)."""
    host, linked = load_pair(host_path, device_path)
    conversion = convert(host, linked=linked, rank=rank, data_deps=data_deps, astra_compatible=astra_compatible)
    conversion.write(Path(out_path))
    return conversion


def load_pair(host_path: PathLike, device_path: PathLike | None) -> tuple[HostTrace, LinkedTrace | None]:
    """The host trace and, when there is a device trace, the two linked; the Kineto events are freed
    once joined (the conversion needs only the link, and they are a third of the peak memory)."""
    from chakra.pytorch.host import load_host_trace
    from chakra.pytorch.kineto import load_kineto_trace

    host = load_host_trace(Path(host_path))
    if device_path is None:
        return host, None
    device = load_kineto_trace(Path(device_path))
    linked = link(host, device)
    device.events = []
    return host, linked
