"""The items of a conversion as Chakra nodes: numbered from 0 in time order, dependencies that point
back in time only, the attributes in their registered value kinds (``num_ops``/``tensor_size`` of
modelled ops from :mod:`chakra.pytorch.flops`), the IO lists in upstream's text form, and the global
metadata; :func:`encode_nodes` returns the :class:`~chakra.pytorch.report.Conversion`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import msgspec

from chakra import __version__
from chakra.io import FORMAT_VERSION
from chakra.pytorch.comms import CommNode
from chakra.pytorch.flops import MODELED_OPS, op_cost
from chakra.pytorch.host import HostNode
from chakra.pytorch.items import Builder, Item
from chakra.pytorch.report import (
    COMM_KIND_LABEL,
    KIND_CPU,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_METADATA,
    Conversion,
)
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, METADATA_NODE, AttributeProto, GlobalMetadata
from chakra.wire import AttrEncoder, encode_node, python_repr_of_json

_decode_json = msgspec.json.Decoder().decode


def encode_nodes(builder: Builder, comm_nodes: list[CommNode]) -> Conversion:
    """The conversion's items as encoded nodes, and ``comm_nodes`` renumbered to their ids."""
    return _Encoder(builder).finish(comm_nodes)


def _costed_ancestors(builder: Builder) -> set[int]:
    """Ops with a modelled op below them (``linear`` over ``addmm``, ``conv2d`` over
    ``convolution``) get no cost of their own: the work would be counted twice."""
    costed_below: set[int] = set()
    for node in builder.host.nodes:
        if node.name not in MODELED_OPS or node.id not in builder.items:
            continue
        parent = builder.by_host_id.get(node.parent)
        while parent is not None and parent.id not in costed_below and parent.id != parent.parent:
            costed_below.add(parent.id)
            parent = builder.by_host_id.get(parent.parent)
    return costed_below


class _Encoder:
    """Encodes the items of one conversion, caching what repeats (IO texts, shared attributes)."""

    def __init__(self, builder: Builder):
        self.items = builder.items
        self.host = builder.host
        self.linked = builder.linked
        self.rank = builder.rank
        self.report = builder.report
        self.costed_below = _costed_ancestors(builder)
        self.io_cache: dict[bytes, bytes] = {}
        self.encode = AttrEncoder()
        self.shared_attrs: dict[tuple[Any, ...], bytes] = {}

    def finish(self, comm_nodes: list[CommNode]) -> Conversion:
        """Nodes in time order, numbered from 0 in that order: consumers that issue ready nodes by
        ascending id (ASTRA-sim) then follow the recorded order, collectives included."""
        items = sorted(self.items.values(), key=lambda i: i.key)
        new_id = {item.node_id: index for index, item in enumerate(items)}
        thread_ids = _thread_ids(items) if self.linked else {}
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

    def _kind_label(self, item: Item) -> str:
        if item.node_type == METADATA_NODE:
            return KIND_METADATA
        if item.node_type in COMM_KIND_LABEL:
            return COMM_KIND_LABEL[item.node_type]
        if item.activity is not None:
            return {"gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET, "Memcpy": KIND_MEMCPY}.get(
                item.activity.cat, KIND_KERNEL
            )
        return KIND_CPU

    def _attributes(self, item: Item, thread_ids: dict[Any, int]) -> list[bytes]:
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
        elif item.activity is None and item.thread in thread_ids:
            out.append(encode("tid", thread_ids[item.thread]))  # time outside operators on a thread
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
            if value is None or value == "":
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


def _python_repr_of_json(raw: msgspec.Raw | bytes, cache: dict[bytes, bytes] | None = None) -> bytes:
    """The text upstream stores for an IO list, UTF-8 encoded: Python ``str()`` of the parsed
    JSON (``reference/chakra-format.md`` §7), written from the JSON where it can be
    (:func:`chakra.wire.python_repr_of_json`); shapes and types repeat, so callers pass a cache."""
    if cache is None:
        return python_repr_of_json(raw) or str(_decode_json(raw)).encode()
    key = bytes(raw)
    text = cache.get(key)
    if text is None:
        text = cache[key] = _python_repr_of_json(key)
    return text


def _thread_ids(items: list[Item]) -> dict[Any, int]:
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
