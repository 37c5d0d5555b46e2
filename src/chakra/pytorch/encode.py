"""The items of a conversion as Chakra nodes: numbered from 0 in time order, dependencies that point
back in time only, the attributes in their registered value kinds (``num_ops``/``tensor_size`` of
modelled ops from :mod:`chakra.pytorch.flops`), the IO lists in upstream's text form, and the global
metadata; :func:`encode_nodes` returns the :class:`~chakra.pytorch.report.Conversion`.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Mapping
from itertools import compress, count, repeat
from operator import add, is_, is_not
from typing import Any, NamedTuple

import msgspec

from chakra import __version__
from chakra._encode import count_rows, dense_ranks, span_us
from chakra._item_passes import no_host_rows
from chakra._items import gather
from chakra.io import FORMAT_VERSION
from chakra.pytorch.comms import CommNode
from chakra.pytorch.flops import MODELED_OPS, OpCost, op_cost, reads_values
from chakra.pytorch.host import HostNode, IOLists
from chakra.pytorch.items import Builder, Item, sort_by_attribute
from chakra.pytorch.kineto import ActivityArgs, KinetoIdArgs
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
from chakra.wire import RAW, AttrColumn, AttrEncoder, EncodedNodes, encode_columns

_decode_json = msgspec.json.Decoder().decode

#: The attribute columns of a conversion's nodes, in the order a node lists them (no node has both
#: ``rf_id`` columns or both ``tensor_size`` ones); ``added`` holds the fields the steps added.
_COLUMN_ORDER = (
    "is_cpu_op", "rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema", "num_ops", "tensor_size",
    "stream", "device", "correlation", "launcher_rf_id", "activity_bytes", "added", "part_of",
)  # fmt: skip
#: Nodes encoded per call of the batch encoder: their columns are all that is held at once, and they
#: stay in the CPU's cache from being gathered to being encoded (8,192 rows: the encoder 5-15 % slower).
_BATCH_ROWS = 1024
#: Distinct (op, shapes, types) whose cost is kept for reuse: bounds the memory a trace of ever new
#: shapes can take (a step of a model repeats a few hundred).
_COSTS_KEPT = 1 << 16
#: What :meth:`_Encoder._cost` keeps for a key not seen yet, and for one whose cost reads the values.
_UNSEEN, _READS_VALUES = object(), object()
#: Columns named for their role, written as these attributes.
_COLUMN_ATTR = {"launcher_rf_id": "rf_id", "activity_bytes": "tensor_size"}
#: The member of the columns whose attribute has none registered: ints throughout, the member
#: :func:`chakra.attrs.set_attr` infers for them (given, it is not inferred again value by value).
_COLUMN_MEMBER = {"device": "int64_val", "correlation": "int64_val", "part_of": "int64_val"}


class _Columns(NamedTuple):
    """What the encoder reads of a batch of items, gathered in C (:func:`chakra._items.gather`): the
    items' own fields, then their host op's (None for items without one)."""

    name: list[str]
    node_type: list[int]
    ctrl: list[list[int]]
    data: list[list[int]]
    ts_us: list[float | None]
    excl_us: list[float]
    thread: list[Any]
    is_cpu: list[bool]
    attrs: list[tuple[tuple[str, Any], ...]]
    part_of: list[Item | None]
    host: list[HostNode | None]
    host_name: list[str | None]
    inputs: list[IOLists | None]
    outputs: list[IOLists | None]
    rf_id: list[int | None]
    fw_parent: list[int | None]
    seq_id: list[int | None]
    scope: list[int | None]
    fw_tid: list[int | None]
    op_schema: list[str | None]
    tid: list[int | None]


#: Each column's path from an item (the host op's fields are ``host.<field>``).
_ITEM_PATHS = tuple(
    (field,) if index < _Columns._fields.index("host_name") else ("host", field.removeprefix("host_"))
    for index, field in enumerate(_Columns._fields)
)
#: The columns of the whole conversion read before its nodes are encoded, a few at a time (each is a list
#: of a pointer per node: at a whole trace's peak, eight at once were 15 MiB).
_THREAD_PATHS = (("thread",), ("host", "tid"), ("host", "scope"))
_SPAN_PATHS = (("ts_us",), ("dur_us",))
_KIND_PATHS = (("node_type",), ("activity", "cat"))
#: The columns the rows of no host op write (:func:`chakra._item_passes.no_host_rows`), in its order.
_NO_HOST_COLUMNS = ("tid", "rf_id", "stream", "device", "correlation", "launcher_rf_id", "activity_bytes")
#: A device activity's args whose ``bytes`` is a field, not a key.
_SLOTTED_ARGS = (KinetoIdArgs, ActivityArgs)
#: The JSON texts of an op's IO lists that a node carries (:class:`~chakra.pytorch.host.IOLists`).
_IO_FIELDS = ("raw_values", "raw_shapes", "raw_types")


def encode_nodes(builder: Builder, comm_nodes: list[CommNode]) -> Conversion:
    """The conversion's items as encoded nodes, and ``comm_nodes`` renumbered to their ids. The items
    are let go as they are encoded: the builder holds none after (its records are in the nodes)."""
    return _Encoder(builder).finish(comm_nodes)


def _costed_ancestors(builder: Builder) -> set[int]:
    """Ops with a modelled op below them (``linear`` over ``addmm``, ``conv2d`` over
    ``convolution``) get no cost of their own: the work would be counted twice."""
    costed_below: set[int] = set()
    (names,) = gather(builder.host.nodes, (("name",),))
    by_id = builder.by_host_id
    for node in compress(builder.host.nodes, map(MODELED_OPS.__contains__, names)):
        if node.id not in builder.items:
            continue
        parent_id = node.parent
        while parent_id not in costed_below:  # siblings share their parent: looked up once
            parent = by_id.get(parent_id)
            if parent is None or parent_id == parent.parent:
                break
            costed_below.add(parent_id)
            parent_id = parent.parent
    return costed_below


class _Encoder:
    """Encodes the items of one conversion, caching what repeats (IO texts, shared attributes)."""

    def __init__(self, builder: Builder):
        self.builder = builder
        self.items = builder.items
        self.host = builder.host
        self.linked = builder.linked
        self.rank = builder.rank
        self.report = builder.report
        self.costed_below = _costed_ancestors(builder)
        self.encode = AttrEncoder()
        self.costs: dict[tuple[str | bytes, ...], OpCost | object | None] = {}  # see _cost
        self.launcher_rf_ids: dict[int, int | None] = {}  # host id -> rf_id, for the device activities

    def finish(self, comm_nodes: list[CommNode]) -> Conversion:
        """Nodes in time order, numbered from 0 in that order: consumers that issue ready nodes by
        ascending id (ASTRA-sim) then follow the recorded order, collectives included."""
        items = list(self.items.values())
        self.launcher_rf_ids = self._launcher_rf_ids()
        # the items are let go batch by batch, as their records are written: the records are a third of
        # the items' size, so the peak is before the first batch, not after the last; the builder's table
        # of them (as large as the sort's scratch) goes before the sort
        self.items.clear()
        self.builder.wait_edges.clear()
        sort_by_attribute(items, "key")
        (node_ids,) = gather(items, (("node_id",),))
        ranks = dense_ranks(node_ids)  # the encoder reads an array, not a dict, where ids allow it
        new_id: Mapping[int, int] | memoryview = (
            dict(zip(node_ids, range(len(items)), strict=True)) if ranks is None else memoryview(ranks).cast("q")
        )
        del node_ids
        thread_ids = _thread_ids(*gather(items, _THREAD_PATHS)) if self.linked else {}
        span_us = _measured_span_us(*gather(items, _SPAN_PATHS))
        if span_us is not None:
            self.report.measured_span_us = span_us
        for (node_type, category), kind_count in _count_rows(gather(items, _KIND_PATHS)).items():
            self.report.nodes[_kind_label(node_type, category)] += kind_count
        # in batches: the columns of one batch at a time beside the records written
        batches = deque(items[first : first + _BATCH_ROWS] for first in range(0, len(items), _BATCH_ROWS))
        del items
        payloads: list[bytes] = []
        first = 0
        while batches:
            batch = batches.popleft()
            done = self._encoded(batch, first, thread_ids, new_id)
            first += len(batch)
            del batch
            payloads += done.payloads
            self.report.edges_against_time += done.later
        for comm in comm_nodes:
            comm.node_id = _renumbered(new_id, comm.node_id)
        return Conversion(self._metadata(), payloads, comm_nodes, self.report, self.rank)

    def _launcher_rf_ids(self) -> dict[int, int | None]:
        """The ``rf_id`` of the host op that launched each device activity, by host id (None for an op
        without an item, or without a host op of its own)."""
        if self.linked is None:
            return {}
        (host_ids,) = gather(self.linked.activities, (("host_id",),))
        launchers = {host_id: self.items.get(host_id) for host_id in set(host_ids) if host_id is not None}
        launcher_items = list(launchers.values())
        (rf_ids,) = gather(launcher_items, (("host", "rf_id"),))
        return dict(zip(launchers, rf_ids, strict=True))

    def _encoded(
        self, items: list[Item], first: int, thread_ids: dict[Any, int], new_id: Mapping[int, int] | memoryview
    ) -> EncodedNodes:
        """Nodes ``first``, ``first + 1``, ... (``items``), encoded."""
        col = _Columns(*gather(items, _ITEM_PATHS))
        durations = col.excl_us
        if None in col.ts_us:  # no start, no duration (host-only mode)
            durations = [d if t is not None else 0 for t, d in zip(col.ts_us, durations, strict=True)]
        outputs = col.outputs
        metadata_rows = list(compress(count(), map(METADATA_NODE.__eq__, col.node_type)))
        if metadata_rows:
            outputs = list(outputs)
            for row in metadata_rows:
                outputs[row] = None  # the groups' JSON is in the inputs; upstream writes no outputs
        return encode_columns(
            col.name,
            col.node_type,
            col.ctrl,
            col.data,
            col.ts_us,
            durations,
            col.inputs,
            outputs,
            self._attribute_columns(items, col, metadata_rows, thread_ids, new_id),
            node_ids=range(first, first + len(items)),
            id_map=new_id,
            earlier_only=True,
            io_json=_python_text_of_json,
            io_fields=_IO_FIELDS,
            float_times=True,
        )

    def _attribute_columns(
        self,
        items: list[Item],
        col: _Columns,
        metadata_rows: list[int],
        thread_ids: dict[Any, int],
        new_id: Mapping[int, int] | memoryview,
    ) -> list[AttrColumn]:
        """The nodes' attributes as columns, in the order each kind of node lists them: a host op's
        own (its trace's core attributes, then ``num_ops``/``tensor_size`` of modelled ops), the
        later part of an op (its op's ``rf_id`` and thread), time between ops on a thread (the
        thread), a device activity (stream, device, correlation, its launcher's ``rf_id``, bytes),
        then the attributes the conversion's steps added, then ``part_of``."""
        rows = len(items)
        column: dict[str, list[Any]] = {name: [None] * rows for name in _COLUMN_ORDER}
        # a host op's own come whole from the gathered columns (most nodes are host ops)
        column["is_cpu_op"] = col.is_cpu
        if metadata_rows:
            column["is_cpu_op"] = list(col.is_cpu)
            for row in metadata_rows:
                column["is_cpu_op"][row] = None
        column["rf_id"] = col.rf_id
        column["fw_parent"] = col.fw_parent
        column["seq_id"] = col.seq_id
        column["scope"] = col.scope
        column["fw_tid"] = col.fw_tid
        column["op_schema"] = col.op_schema
        # a host op's thread as the host trace numbers it (rows of no host op: below)
        column["tid"] = list(map(thread_ids.get, col.thread, col.tid)) if self.linked else col.tid
        for row in compress(count(), map(MODELED_OPS.__contains__, col.host_name)):
            if col.node_type[row] == COMP_NODE:
                host = col.host[row]
                if host is not None and host.id not in self.costed_below:
                    cost = self._cost(host)
                    if cost is not None:
                        column["num_ops"][row] = cost.num_ops
                        column["tensor_size"][row] = cost.tensor_size
        # the rows of no host op: the later part of an op (its op's rf_id and thread), time outside operators
        # on a thread (the thread), a device activity (stream, device, correlation, its launcher's rf_id, bytes)
        no_host = list(compress(count(), map(is_, col.host, repeat(None))))
        if no_host:
            no_host_rows(
                [items[row] for row in no_host], no_host, col.node_type, thread_ids, self.launcher_rf_ids,
                tuple(column[name] for name in _NO_HOST_COLUMNS), _SLOTTED_ARGS, COMP_NODE,
            )  # fmt: skip
        encode = self.encode
        for row in compress(count(), col.attrs):  # the few rows with attributes added
            column["added"][row] = b"".join([encode(name, value) for name, value in col.attrs[row]])
        part_rows = list(compress(count(), map(is_not, col.part_of, repeat(None))))
        if part_rows:
            (owner_ids,) = gather(list(map(col.part_of.__getitem__, part_rows)), (("node_id",),))
            for row, owner in zip(part_rows, _renumbered_all(new_id, owner_ids), strict=True):
                column["part_of"][row] = owner
        return [AttrColumn(_COLUMN_ATTR.get(name, name), values, RAW if name == "added" else _COLUMN_MEMBER.get(name))
                for name, values in column.items()]  # fmt: skip

    def _cost(self, host: HostNode) -> OpCost | None:
        """The modelled cost of ``host``; ops that repeat a layer's shapes and types share one, and those
        whose cost reads the values too (:func:`~chakra.pytorch.flops.reads_values`: a convolution's
        strides) share one where the values repeat as well. The key is looked up before the types are
        decoded: a step repeats it."""
        key: tuple[str | bytes, ...] = (
            host.name,
            bytes(host.inputs.raw_shapes),
            bytes(host.inputs.raw_types),
            bytes(host.outputs.raw_shapes),
            bytes(host.outputs.raw_types),
        )
        cost = self.costs.get(key, _UNSEEN)
        try:
            if cost is _READS_VALUES:
                key = (*key, bytes(host.inputs.raw_values))
                cost = self.costs.get(key, _UNSEEN)
                if cost is not _UNSEEN:
                    return cost  # type: ignore[return-value]
                cost = _cost_of(host, host.inputs.types())
            elif cost is not _UNSEEN:
                return cost  # type: ignore[return-value]
            else:
                input_types = host.inputs.types()
                if reads_values(host.name, input_types):
                    self._keep(key, _READS_VALUES)
                    key = (*key, bytes(host.inputs.raw_values))
                cost = _cost_of(host, input_types)
        except msgspec.DecodeError:
            return None
        self._keep(key, cost)
        return cost

    def _keep(self, key: tuple[str | bytes, ...], cost: OpCost | object | None) -> None:
        if len(self.costs) < _COSTS_KEPT:
            self.costs[key] = cost

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


def _measured_span_us(starts: list[float | None], durations: list[float]) -> float | None:
    """From the first start to the last end among the items with a start (None: no item has one).

    Example:
        >>> _measured_span_us([2.0, None, 1.0], [5.0, 9.0, 1.0]), _measured_span_us([2.0, 1.0], [5.0, 1.0])
        (6.0, 6.0)
        >>> _measured_span_us([None], [3.0]), _measured_span_us([], [])
        (None, None)
        >>> _measured_span_us([2, None], [3, 1])  # ints: their sum stays an int
        3
    """
    span = span_us(starts, durations)  # in C when every value is a float
    if span is not NotImplemented:
        return span
    timed = [start for start in starts if start is not None]
    durations = [dur for start, dur in zip(starts, durations, strict=True) if start is not None]
    return max(map(add, timed, durations)) - min(timed) if timed else None


def _renumbered_all(new_id: Mapping[int, int] | memoryview, node_ids: list[int]) -> list[int]:
    """Each of ``node_ids`` renumbered as :func:`_renumbered` does it (KeyError for an id not written),
    the ranks read in one pass where every id is one of theirs.

    Example:
        >>> _renumbered_all(memoryview(dense_ranks([4, 2])).cast("q"), [2, 4, 2])
        [1, 0, 1]
    """
    if isinstance(new_id, memoryview) and node_ids and min(node_ids) >= 0 and max(node_ids) < len(new_id):
        ranks = list(map(new_id.__getitem__, node_ids))
        if min(ranks) >= 0:
            return ranks
    return [_renumbered(new_id, node_id) for node_id in node_ids]


def _renumbered(new_id: Mapping[int, int] | memoryview, node_id: int) -> int:
    """``node_id``'s new id through ``new_id`` (a dict, or ranks by id with -1 for an id not written);
    KeyError for an id not written, from either.

    Example:
        >>> ranks = memoryview(dense_ranks([4, 2])).cast("q")
        >>> _renumbered(ranks, 2), _renumbered({4: 0}, 4)
        (1, 0)
        >>> _renumbered(ranks, 3)
        Traceback (most recent call last):
        KeyError: 3
    """
    if isinstance(new_id, memoryview):
        rank = new_id[node_id] if 0 <= node_id < len(new_id) else -1
        if rank < 0:
            raise KeyError(node_id)
        return rank
    return new_id[node_id]


def _count_rows(columns: tuple[list[Any], ...], skip: int = -1) -> Mapping[tuple[Any, ...], int]:
    """How many times each row of ``columns`` occurs, in the order rows first occur (``Counter(zip(...))``),
    leaving out the rows whose column ``skip`` is None; counted in C without a tuple per row, where
    the rows are few.

    Example:
        >>> dict(_count_rows(([4, 4, 5, 4], ["a", "a", None, "a"]), skip=1))
        {(4, 'a'): 3}
    """
    found = count_rows(columns, skip)
    if found is not None:
        return found
    rows = zip(*columns, strict=True)
    return Counter(rows if skip < 0 else compress(rows, map(is_not, columns[skip], repeat(None))))


def _kind_label(node_type: int, category: str | None) -> str:
    """The report's label of a node of ``node_type`` made from a device activity of ``category`` (None:
    from a host op)."""
    if node_type == METADATA_NODE:
        return KIND_METADATA
    if node_type in COMM_KIND_LABEL:
        return COMM_KIND_LABEL[node_type]
    if category is not None:
        return {"gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET, "Memcpy": KIND_MEMCPY}.get(category, KIND_KERNEL)
    return KIND_CPU


def _python_text_of_json(raw: msgspec.Raw | bytes) -> bytes:
    """The text upstream stores for an IO list (Python ``str()`` of the parsed JSON,
    ``reference/chakra-format.md`` §7), for the forms :func:`chakra.wire.python_repr_of_json`
    leaves to Python."""
    return str(_decode_json(raw)).encode()


def _thread_ids(threads: list[Any], tids: list[int | None], scopes: list[int | None]) -> dict[Any, int]:
    """Host thread id for each Kineto thread (``threads``, the items' own; ``tids`` and ``scopes``
    their host ops', None for items without one): the host ``tid`` most of its ATen ops (scope 0)
    carry, else most of its ops (gloo works are recorded under the issuing thread's id although they
    run on a worker), a fresh id for threads without evidence.

    Example:
        >>> _thread_ids([7, 7, 7, 9, ("stream", 0, 7)], [1, 2, 2, 5, None], [0, 0, 0, 1, None])
        {7: 2, 9: 5}
    """
    votes: dict[Any, Counter[int]] = defaultdict(Counter)
    fallback: dict[Any, Counter[int]] = defaultdict(Counter)
    # only the items of a host op carry a tid: the rest (device work, parts) are not counted at all
    seen = _count_rows((threads, tids, scopes), skip=1)
    for (thread, tid, scope), times in seen.items():
        (votes if scope == 0 else fallback)[thread][tid] += times
    voted = sorted({thread for thread, _, _ in seen}, key=str)
    mapping: dict[Any, int] = {}
    used: set[int] = set()
    for thread in voted:
        counts = votes.get(thread) or fallback.get(thread) or Counter()
        for tid, _ in counts.most_common():
            if tid not in used:
                mapping[thread] = tid
                used.add(tid)
                break
    next_tid = max(used, default=0) + 1
    for thread in voted:
        if thread not in mapping:
            mapping[thread] = next_tid
            next_tid += 1
    return mapping


def _cost_of(host: HostNode, input_types: list[Any]) -> OpCost | None:
    return op_cost(
        host.name,
        host.inputs.shapes(),
        input_types,
        host.outputs.shapes(),
        host.outputs.types(),
        host.inputs.values(),
    )
