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
  children. A communication transfer is not split: all its own time is the collective's (a gloo
  work op's wire time between packing and unpacking its buffers), its inner ops after it;
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

The steps live in modules of their own: :mod:`~chakra.pytorch.items` (the items and the builder),
:mod:`~chakra.pytorch.transfers` (communication), :mod:`~chakra.pytorch.waits` (nesting, waits,
parts), :mod:`~chakra.pytorch.dependencies` (the other edges), :mod:`~chakra.pytorch.encode` (the
nodes) and :mod:`~chakra.pytorch.report` (the result).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from chakra.collector import gc_paused
from chakra.errors import PathLike
from chakra.pytorch.dependencies import (
    INTER_THREAD_IDLE_US,
    busy_gaps,
    chain,
    host_only_structure,
    inter_thread,
    tensor_deps,
)
from chakra.pytorch.encode import encode_nodes
from chakra.pytorch.groups import DEFAULT_GROUP, ProcessGroup, Resolution, group_table, node_attributes, resolve
from chakra.pytorch.host import HostTrace
from chakra.pytorch.items import SYNTHETIC_ROOTS, Builder
from chakra.pytorch.kineto import KinetoTrace
from chakra.pytorch.link import LinkedTrace, link
from chakra.pytorch.report import (
    KIND_COLL,
    KIND_CPU,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_METADATA,
    KIND_RECV,
    KIND_SEND,
    Conversion,
    ConversionReport,
)
from chakra.pytorch.syncs import stream_waits, sync_waits, timed_stream_waits
from chakra.pytorch.transfers import attach_comm
from chakra.pytorch.waits import (
    PART_MIN_US,
    WAIT_RESUME_SHARE,
    WAIT_RESUME_TOLERANCE_US,
    absorb_pickup,
    find_waits,
    nest,
    split_at_issue,
    split_parts,
    tie_waits,
)
from chakra.wire import AttrEncoder

__all__ = [
    "INTER_THREAD_IDLE_US",
    "KIND_COLL",
    "KIND_CPU",
    "KIND_KERNEL",
    "KIND_MEMCPY",
    "KIND_MEMSET",
    "KIND_METADATA",
    "KIND_RECV",
    "KIND_SEND",
    "PART_MIN_US",
    "SYNTHETIC_ROOTS",
    "WAIT_RESUME_SHARE",
    "WAIT_RESUME_TOLERANCE_US",
    "Conversion",
    "ConversionReport",
    "apply_groups",
    "convert",
    "convert_files",
    "load_pair",
]


def convert(
    host: HostTrace,
    device: KinetoTrace | None = None,
    *,
    rank: int | None = None,
    data_deps: bool = False,
    linked: LinkedTrace | None = None,
    release_timing: bool = False,
) -> Conversion:
    """Convert one rank: ``host`` with its Kineto ``device`` trace (or an already ``linked`` pair),
    or host-only when neither is given. Raises :class:`~chakra.errors.ChakraInputError` when the two
    traces come from different runs. Collectives are written as the types that ran. With
    ``release_timing``, ``linked.timing`` is emptied once the host ops' items are made from it, for a
    caller that keeps nothing of ``linked`` (a whole trace's timings are a twentieth of its peak)."""
    if linked is None and device is not None:
        linked = link(host, device)
    # the builder allocates a few objects per op and frees none until the end: the cyclic
    # collector would rescan the whole trace again and again (a third of the time)
    with gc_paused():
        return _convert(host, linked, rank, data_deps, release_timing)


def _convert(
    host: HostTrace, linked: LinkedTrace | None, rank: int | None, data_deps: bool, release_timing: bool
) -> Conversion:
    if rank is None and linked is not None:
        rank = linked.device.rank
    builder = Builder(host, linked, rank, data_deps)
    builder.add_host_ops()
    if release_timing and linked is not None:
        linked.timing = {}  # the items hold the times; nothing after reads them
    builder.add_device_activities()
    comm_nodes = attach_comm(builder)
    by_thread = builder.threads()
    report = builder.report
    if linked is not None:
        segments = nest(by_thread)
        split_at_issue(builder, segments)
        sync_waits(builder, by_thread, segments)
        find_waits(builder, by_thread, segments)
        split_parts(builder, by_thread, segments)
        del segments  # a few per op, not needed past here: freed before the nodes are encoded
        tie_waits(builder, by_thread)
        chain(builder, by_thread)
        inter_thread(builder, by_thread)
        absorb_pickup(builder, by_thread)
        busy_gaps(builder, by_thread)
        stream_waits(builder, by_thread)
        timed_stream_waits(builder, by_thread)
    else:
        host_only_structure(builder, by_thread)
        chain(builder, by_thread)
        report.lacks = [
            "durations and start times (no device trace: the host trace records none)",
            "device activities (kernels, memcpy, memset) and their streams",
            "waits measured from timing (only calls recorded as synchronous hold their thread)",
        ]
    del by_thread
    if data_deps:
        tensor_deps(builder)
    if (
        linked is not None
        and not linked.activities
        and any("nccl" in str(group.get("backend_config", "")) for group in builder.groups)
    ):
        report.notes.append("the process groups use CUDA but the Kineto trace has no device activity")
    report.notes.extend(host.notes)
    conversion = encode_nodes(builder, comm_nodes)
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
) -> Conversion:
    """Load, link, convert and write one rank; returns the :class:`Conversion` (nodes included)."""
    host, linked = load_pair(host_path, device_path)
    conversion = convert(host, linked=linked, rank=rank, data_deps=data_deps)
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
    device = load_kineto_trace(Path(device_path), inputs=False, flows=False)
    linked = link(host, device)
    device.events = []
    return host, linked


def convert_linked_file(path: PathLike) -> Conversion:
    """One rank's file as upstream's ``chakra_converter PyTorch`` takes it: a linked JSON (host trace
    and Kineto joined, :mod:`chakra.pytorch.linked_json`), or a plain host trace, converted host-only."""
    from chakra.pytorch.linked_json import UntimedTrace, load_linked_json

    try:
        linked = load_linked_json(path)
    except UntimedTrace as untimed:
        return convert(untimed.host)
    return convert(linked.host, linked=linked, rank=linked.device.rank)
