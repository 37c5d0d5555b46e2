"""What is in a trace: node and collective counts, communication bytes, time span, attribute coverage.

:func:`summarize_file` streams the file a buffer at a time through the node table's decoder
(:func:`chakra.table.iter_chunks`: the same attribute rules as every other consumer; memory does not
grow with the file); :func:`summarize_nodes` works on nodes held in memory. The result is plain
data (``TraceSummary.to_dict()`` is JSON-ready).

Example:
    s = summarize_file("llama.0.et")
    s.by_type["COMP_NODE"], s.comm_size_total
"""

from __future__ import annotations

import base64
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chakra.attrs import member_value
from chakra.chunks import MISSING, NodeChunk, attr_counts, chunk_of_nodes, iter_chunks
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    CollectiveCommType,
    GlobalMetadata,
    Node,
    NodeType,
)
from chakra.trace import rank_of


def _type_name(value: int) -> str:
    return NodeType.Name(value) if value in NodeType.values() else f"UNKNOWN_{value}"


def _collective_name(value: int) -> str:
    return CollectiveCommType.Name(value) if value in CollectiveCommType.values() else f"UNKNOWN_{value}"


@dataclass
class TraceSummary:
    """Counts for one file. Times in µs, sizes in bytes.

    * ``comm_size_total``: the sum of ``comm_size`` over collectives and sends (receives are not
      counted again). ``comm_size`` means different things per collective (all-gather: the per-rank
      input; all-reduce, reduce-scatter, all-to-all: the whole buffer), so this is a volume of
      communication requests, not bytes on the wire.
    * ``total_dur_us`` and the CPU/device split add up ``duration_micros`` of every node; upstream
      PyTorch conversions store exclusive times for host ops, so nesting is not counted twice.
    * ``span_us``: from the first start to the last end among nodes with ``start_time_micros``;
      a start of 0 means "not recorded" (proto3 cannot tell 0 from absent).
    """

    path: str | None
    rank: int | None
    version: str
    metadata: dict[str, object]
    num_nodes: int = 0
    num_data_deps: int = 0
    num_ctrl_deps: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    collectives: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> {count, bytes}
    p2p: dict[str, dict[str, int]] = field(default_factory=dict)  # send/recv -> {count, bytes}
    comm_size_total: int = 0
    total_dur_us: int = 0
    cpu_dur_us: int = 0
    device_dur_us: int = 0
    first_start_us: int | None = None
    last_end_us: int | None = None
    attr_nodes: Counter[str] = field(default_factory=Counter)  # attribute name -> nodes carrying it
    attr_members: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    @property
    def span_us(self) -> int | None:
        """Wall-clock span from the first start to the last end, when the trace has start times."""
        if self.first_start_us is None or self.last_end_us is None:
            return None
        return self.last_end_us - self.first_start_us

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "rank": self.rank,
            "version": self.version,
            "metadata": self.metadata,
            "num_nodes": self.num_nodes,
            "num_data_deps": self.num_data_deps,
            "num_ctrl_deps": self.num_ctrl_deps,
            "by_type": dict(sorted(self.by_type.items())),
            "collectives": self.collectives,
            "p2p": self.p2p,
            "comm_size_total": self.comm_size_total,
            "total_dur_us": self.total_dur_us,
            "cpu_dur_us": self.cpu_dur_us,
            "device_dur_us": self.device_dur_us,
            "span_us": self.span_us,
            "attribute_coverage": {
                name: {
                    "nodes": count,
                    "fraction": count / self.num_nodes if self.num_nodes else 0.0,
                    "members": dict(self.attr_members[name]),
                }
                for name, count in sorted(self.attr_nodes.items())
            },
        }


def _json_safe(value: object) -> object:
    """A metadata attribute value as JSON can hold it (bytes as base64, non-finite floats as text)."""
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _metadata_dict(metadata: GlobalMetadata) -> dict[str, object]:
    return {attr.name: _json_safe(member_value(attr)) for attr in metadata.attr}


def _bump(table: dict[str, dict[str, int]], key: str, count: int, size: int) -> None:
    entry = table.setdefault(key, {"count": 0, "bytes": 0})
    entry["count"] += count
    entry["bytes"] += size


class _Summing:
    """Adds :class:`chakra.table.NodeChunk`\\ s into a :class:`TraceSummary`, a chunk at a time."""

    def __init__(self, summary: TraceSummary):
        self.summary = summary
        self.by_type: Counter[int] = Counter()
        self.first_start: int | None = None
        self.last_end: int | None = None
        self.member_counts = np.zeros(0, dtype=np.int64)

    def add(self, chunk: NodeChunk) -> None:
        s = self.summary
        rows = chunk.rows
        types = rows["type"]
        dur = rows["dur_us"]
        start = rows["start_us"]
        s.num_nodes += len(rows)
        s.num_data_deps += int(rows["n_data"].sum())
        s.num_ctrl_deps += int(rows["n_ctrl"].sum())
        kinds, counts = np.unique(types, return_counts=True)
        self.by_type.update(dict(zip(kinds.tolist(), counts.tolist(), strict=True)))
        total = int(dur.sum(dtype=np.uint64))
        cpu = int(dur[chunk.is_cpu].sum(dtype=np.uint64))
        s.total_dur_us += total
        s.cpu_dur_us += cpu
        s.device_dur_us += total - cpu
        timed = start > 0
        if timed.any():
            first = int(start[timed].min())
            last = int((start[timed] + dur[timed]).max())
            self.first_start = first if self.first_start is None else min(first, self.first_start)
            self.last_end = last if self.last_end is None else max(last, self.last_end)
        sizes = chunk.column("comm_size")
        size = np.where(sizes != MISSING, sizes, 0)
        comm_type = chunk.column("comm_type")
        coll = types == COMM_COLL_NODE
        for value in np.unique(comm_type[coll]).tolist():
            mine = coll & (comm_type == value)
            name = "MISSING" if value == MISSING else _collective_name(value)
            _bump(s.collectives, name, int(mine.sum()), int(size[mine].sum()))
        for node_type, key, counted in ((COMM_SEND_NODE, "send", True), (COMM_RECV_NODE, "recv", False)):
            mine = types == node_type
            if mine.any():
                volume = int(size[mine].sum())
                _bump(s.p2p, key, int(mine.sum()), volume)
                if counted:  # a transfer's bytes are counted once, at its send
                    s.comm_size_total += volume
        s.comm_size_total += int(size[coll].sum())
        counts_now = chunk.member_counts
        if len(counts_now) > len(self.member_counts):
            self.member_counts = np.pad(self.member_counts, (0, len(counts_now) - len(self.member_counts)))
        self.member_counts[: len(counts_now)] += counts_now

    def finish(self, attr_names: list[str]) -> TraceSummary:
        s = self.summary
        s.by_type = Counter({_type_name(t): c for t, c in self.by_type.items()})
        s.first_start_us = self.first_start
        s.last_end_us = self.last_end
        for name, members in attr_counts(self.member_counts, attr_names).items():
            s.attr_nodes[name] = sum(members.values())
            s.attr_members[name].update(members)
        return s


def summarize_nodes(metadata: GlobalMetadata, nodes: Iterable[Node], *, path: str | Path | None = None) -> TraceSummary:
    """Summarize nodes held in memory (decoded as :func:`summarize_file` decodes a file)."""
    chunk, decoder = chunk_of_nodes(nodes, str(path) if path is not None else None)
    summing = _Summing(_empty_summary(metadata, path))
    summing.add(chunk)
    return summing.finish(decoder.attr_name_list())


def summarize_file(path: str | Path) -> TraceSummary:
    """Stream ``path`` and summarize it, a buffer of nodes at a time (memory does not grow with it)."""
    metadata, chunks, decoder = iter_chunks(path)
    summing = _Summing(_empty_summary(metadata, path))
    for chunk in chunks:
        summing.add(chunk)
    return summing.finish(decoder.attr_name_list())


def _empty_summary(metadata: GlobalMetadata, path: str | Path | None) -> TraceSummary:
    return TraceSummary(
        path=str(path) if path is not None else None,
        rank=rank_of(path) if path is not None else None,
        version=metadata.version,
        metadata=_metadata_dict(metadata),
    )


def combine_summaries(summaries: Iterable[TraceSummary], *, path: str | Path | None = None) -> TraceSummary:
    """The summary of a whole workload: every count, byte and duration of ``summaries`` added up, the
    span from the earliest start to the latest end, and the version and metadata the ranks share
    (a metadata key whose value differs between ranks is left out; the version reads ``mixed``).

    >>> a = TraceSummary(path="a", rank=0, version="0.0.4", metadata={"pid": 1}, num_nodes=3)
    >>> b = TraceSummary(path="b", rank=1, version="0.0.4", metadata={"pid": 2}, num_nodes=4)
    >>> whole = combine_summaries([a, b], path="job")
    >>> whole.num_nodes, whole.version, whole.metadata
    (7, '0.0.4', {})
    """
    parts = list(summaries)
    versions = {s.version for s in parts}
    shared = dict(parts[0].metadata) if parts else {}
    for s in parts[1:]:
        shared = {k: v for k, v in shared.items() if k in s.metadata and s.metadata[k] == v}
    whole = TraceSummary(
        path=str(path) if path is not None else None,
        rank=None,
        version=versions.pop() if len(versions) == 1 else "mixed",
        metadata=shared,
    )
    starts = [s.first_start_us for s in parts if s.first_start_us is not None]
    ends = [s.last_end_us for s in parts if s.last_end_us is not None]
    whole.first_start_us = min(starts) if starts else None
    whole.last_end_us = max(ends) if ends else None
    for s in parts:
        whole.num_nodes += s.num_nodes
        whole.num_data_deps += s.num_data_deps
        whole.num_ctrl_deps += s.num_ctrl_deps
        whole.by_type.update(s.by_type)
        for kind, entries in ((whole.collectives, s.collectives), (whole.p2p, s.p2p)):
            for name, entry in entries.items():
                _bump(kind, name, entry["count"], entry["bytes"])
        whole.comm_size_total += s.comm_size_total
        whole.total_dur_us += s.total_dur_us
        whole.cpu_dur_us += s.cpu_dur_us
        whole.device_dur_us += s.device_dur_us
        whole.attr_nodes.update(s.attr_nodes)
        for name, members in s.attr_members.items():
            whole.attr_members[name].update(members)
    return whole
