"""What is in a trace: node and collective counts, communication bytes, time span, attribute coverage.

:func:`summarize_file` streams the file (constant memory); :func:`summarize_nodes` works on any
iterable of nodes. The result is plain data (``TraceSummary.to_dict()`` is JSON-ready).

Example:
    >>> s = summarize_file("llama.0.et")          # doctest: +SKIP
    >>> s.by_type["COMP_NODE"], s.comm_size_total
"""

from __future__ import annotations

import base64
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from chakra import io
from chakra.attrs import flag_value, int_value, member_value
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, GlobalMetadata, Node, NodeType
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


def _bump(table: dict[str, dict[str, int]], key: str, size: int) -> None:
    entry = table.setdefault(key, {"count": 0, "bytes": 0})
    entry["count"] += 1
    entry["bytes"] += size


def summarize_nodes(metadata: GlobalMetadata, nodes: Iterable[Node], *, path: str | Path | None = None) -> TraceSummary:
    """Summarize ``nodes`` in one pass (they are not kept)."""
    summary = TraceSummary(
        path=str(path) if path is not None else None,
        rank=rank_of(path) if path is not None else None,
        version=metadata.version,
        metadata=_metadata_dict(metadata),
    )
    by_type: Counter[int] = Counter()
    attr_nodes = summary.attr_nodes
    attr_members = summary.attr_members
    first_start: int | None = None
    last_end: int | None = None
    for node in nodes:
        summary.num_nodes += 1
        ntype = node.type
        by_type[ntype] += 1
        summary.num_data_deps += len(node.data_deps)
        summary.num_ctrl_deps += len(node.ctrl_deps)
        dur = node.duration_micros
        summary.total_dur_us += dur
        start = node.start_time_micros
        if start:
            first_start = start if first_start is None or start < first_start else first_start
            end = start + dur
            last_end = end if last_end is None or end > last_end else last_end
        is_cpu = False
        comm_type = comm_size = None
        seen: set[str] = set()
        for attr in node.attr:
            name = attr.name
            if name in seen:
                continue
            seen.add(name)
            member = attr.WhichOneof("value")
            attr_nodes[name] += 1
            attr_members[name][member or "unset"] += 1
            if name == "is_cpu_op":
                is_cpu = flag_value(attr)
            elif name == "comm_type":
                comm_type = int_value(attr)
            elif name == "comm_size":
                comm_size = int_value(attr)
        if is_cpu:
            summary.cpu_dur_us += dur
        else:
            summary.device_dur_us += dur
        size = comm_size or 0
        if ntype == NodeType.COMM_COLL_NODE:
            _bump(summary.collectives, _collective_name(comm_type) if comm_type is not None else "MISSING", size)
            summary.comm_size_total += size
        elif ntype == NodeType.COMM_SEND_NODE:
            _bump(summary.p2p, "send", size)
            summary.comm_size_total += size
        elif ntype == NodeType.COMM_RECV_NODE:
            _bump(summary.p2p, "recv", size)
    summary.by_type = Counter({_type_name(t): c for t, c in by_type.items()})
    summary.first_start_us = first_start
    summary.last_end_us = last_end
    return summary


def summarize_file(path: str | Path) -> TraceSummary:
    """Stream ``path`` and summarize it."""
    with io.EtReader(path) as reader:
        return summarize_nodes(reader.metadata, reader, path=path)
