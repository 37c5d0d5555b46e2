"""Load Kineto device traces (``torch.profiler`` Chrome-trace JSON) and sort their events by role.

:func:`load_kineto_trace` reads plain or gzip JSON into :class:`KinetoEvent` structs (msgspec,
typed, no dict per event beyond ``args``); :func:`classify` splits the events into what linking
needs (``reference/pytorch-traces.md`` §2-3): host operators and annotations, runtime launches
indexed by ``correlation``, device activity (kernels, memcpy, memset), synchronisation events.

Times are those of the file: ``ts``/``dur`` in µs, ``ts`` based on the Unix epoch.

Example:
    trace = load_kineto_trace("traces/device.0.json")
    events = classify(trace)
    len(events.host_ops), len(events.device_ops), trace.rank
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from chakra import _kineto_events, io
from chakra._json_scan import without_flows
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError
from chakra.pytorch.jsonfile import ArrayPieces, NotStreamable, decode_json, read_json_bytes

PathLike = str | Path

#: The top-level key of a trace's event list.
TRACE_EVENTS_KEY = b"traceEvents"
#: Host-side operator categories (``user_annotation`` covers ``record_function`` ranges).
HOST_OP_CATEGORIES = frozenset({"cpu_op", "user_annotation", "Operator"})  # "Operator": old Kineto
#: Runtime/driver API call categories.
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
#: Kernels timed by CUPTI's range profiler (counter collection replays each one) instead of kernels.
PROFILER_RANGE = "cuda_profiler_range"
#: Work that runs on a device stream.
DEVICE_OP_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", PROFILER_RANGE})
SYNC_CATEGORY = "cuda_sync"

#: Runtime calls that put work on a stream (Chakra's linker list plus memset and graph launches,
#: reference §3.1), and the ones that make the host or a stream wait.
LAUNCH_NAMES = frozenset({
    "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cudaMemset", "cudaMemsetAsync",
    "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel",
    "hipMemcpyWithStream", "hipMemcpyAsync", "hipMemsetAsync", "hipGraphLaunch",
})  # fmt: skip
SYNC_CALL_NAMES = frozenset({
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipStreamWaitEvent",
})  # fmt: skip
#: Runtime calls that record an event on a stream: what ``cudaStreamWaitEvent`` and
#: ``cudaEventSynchronize`` wait for (``wait_on_cuda_event_record_corr_id`` names one by correlation).
EVENT_RECORD_NAMES = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "hipEventRecord"})

#: Host operators that only mark profiler steps; linkers skip them as parents of device work.
PROFILER_STEP_PREFIX = "ProfilerStep"


#: The ``args`` keys linking and converting read, by attribute name. Everything else in ``args``
#: (occupancy, grid, call stacks, input dims, ...) is skipped while decoding: kept as dicts, the
#: args were most of a Kineto trace's memory.
_ARG_KEYS = {
    "external_id": "External id",
    "rf_id": "Record function id",
    "correlation": "correlation",
    "stream": "stream",
    "device": "device",
    "bytes": "bytes",
    "cuda_sync_kind": "cuda_sync_kind",
    "wait_on_stream": "wait_on_stream",
    "wait_on_cuda_event_record_corr_id": "wait_on_cuda_event_record_corr_id",
    "collective_name": "Collective name",
    "in_msg_nelems": "In msg nelems",
    "out_msg_nelems": "Out msg nelems",
    "dtype": "dtype",
    "pg_name": "Process Group Name",
    "group_size": "Group size",
    # what a profiler trace alone offers in place of the host trace (chakra.kineto)
    "seq_id": "Sequence number",
    "fw_tid": "Fwd thread id",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "concrete_inputs": "Concrete Inputs",
    "pg_desc": "Process Group Description",
    "pg_ranks": "Process Group Ranks",
    "global_rank_start": "Global rank start",
    "global_rank_stride": "Global rank stride",
    "in_split_size": "In split size",
    "out_split_size": "Out split size",
}
_ATTR_OF_KEY = {key: attr for attr, key in _ARG_KEYS.items()}
#: A list argument the event does not carry (JSON ``null``).
NO_VALUE = msgspec.Raw(b"null")


class KinetoIdArgs(msgspec.Struct, frozen=True, gc=False, rename=_ARG_KEYS):
    """The ``args`` of an event that carries only ids, a stream and bytes (runtime calls, kernels, copies,
    operators recorded without their inputs: most of a trace's events): the loader keeps these in place
    of its decoded :class:`KinetoArgs`, a third of their size (:func:`chakra._kineto_events.slim_args`).
    The other args read as absent (class attributes, no memory per event); :meth:`get` reads them by
    their Kineto key."""

    external_id: Any = None
    rf_id: Any = None
    correlation: Any = None
    stream: Any = None
    device: Any = None
    bytes: Any = None
    seq_id: Any = None
    fw_tid: Any = None
    # the args an event of this kind does not carry (fields of KinetoArgs and KinetoInputArgs)
    cuda_sync_kind = None
    wait_on_stream = None
    wait_on_cuda_event_record_corr_id = None
    collective_name = None
    in_msg_nelems = None
    out_msg_nelems = None
    dtype = None
    pg_name = None
    group_size = None
    pg_desc = None
    pg_ranks = None
    global_rank_start = None
    global_rank_stride = None
    in_split_size = None
    out_split_size = None
    input_dims = NO_VALUE
    input_type = NO_VALUE
    concrete_inputs = NO_VALUE

    def get(self, key: str, default: Any = None) -> Any:
        """The value of Kineto arg ``key`` (``"External id"``, ``"stream"``, ...), else ``default``."""
        attr = _ATTR_OF_KEY.get(key)
        value = getattr(self, attr, None) if attr is not None else None
        return default if value is None else value


class KinetoArgs(KinetoIdArgs, frozen=True, gc=False, rename=_ARG_KEYS):
    """The ``args`` of an event that linking reads (as decoded); :meth:`get` reads them by their Kineto
    key. The operators' input lists are in :class:`KinetoInputArgs`, read only where they are used."""

    cuda_sync_kind: Any = None
    wait_on_stream: Any = None
    wait_on_cuda_event_record_corr_id: Any = None
    collective_name: Any = None
    in_msg_nelems: Any = None
    out_msg_nelems: Any = None
    dtype: Any = None
    pg_name: Any = None
    group_size: Any = None
    pg_desc: Any = None
    pg_ranks: Any = None
    global_rank_start: Any = None
    global_rank_stride: Any = None
    in_split_size: Any = None
    out_split_size: Any = None


class ActivityArgs(msgspec.Struct, frozen=True, gc=False):
    """What a conversion reads of a device event's :class:`KinetoArgs`: a copy's bytes, and a sync
    event's streams and the event record it waits for. A device activity of a profiler view holds these
    in place of its event's args (a fifth of their size): the conversion lets the events go. Read by
    Kineto key with :meth:`KinetoIdArgs.get`."""

    bytes: Any = None
    stream: Any = None
    wait_on_stream: Any = None
    wait_on_cuda_event_record_corr_id: Any = None

    get = KinetoIdArgs.get


class KinetoInputArgs(KinetoArgs, frozen=True, gc=False, rename=_ARG_KEYS):
    """:class:`KinetoArgs` with the operators' input lists (what a profiler trace alone offers in place
    of the host trace's), kept as their JSON text: views of the file's bytes, which they keep in
    memory, so a trace loaded to be linked with its host trace reads none."""

    input_dims: msgspec.Raw = NO_VALUE
    input_type: msgspec.Raw = NO_VALUE
    concrete_inputs: msgspec.Raw = NO_VALUE


#: The args of an event that has none.
NO_ARGS = KinetoArgs()
NO_INPUT_ARGS = KinetoInputArgs()
#: The decoded args the loader makes slim where they carry only ids (:class:`KinetoIdArgs`), and what the
#: others must hold for that: what a slim one reads for them.
_FULL_ARGS = (KinetoArgs, KinetoInputArgs)
_SLIM_ABSENT = {
    name: getattr(KinetoIdArgs, name)
    for name in KinetoInputArgs.__struct_fields__
    if name not in KinetoIdArgs.__struct_fields__
}


class KinetoEvent(msgspec.Struct, gc=False):
    """One trace event as Kineto writes it. ``ts``/``dur`` in µs; for device events ``pid`` is the
    device and ``tid`` the stream."""

    name: str = ""
    cat: str = ""
    ph: str = ""
    # numbers, or names ("Spans", "stream 7 ...") in some Kineto versions; anything else is refused
    pid: int | str = 0
    tid: int | str = 0
    # NaN when absent: a complete event without a start is refused (load_kineto_trace), not put at 0
    ts: float = math.nan
    dur: float = 0.0
    # events without args (a third: flows) share one, read-only; the loader keeps KinetoIdArgs in place of
    # args that carry only ids
    args: KinetoArgs = NO_ARGS
    id: Any = None
    bp: str | None = None

    # id arguments read from their fields (these run once per event or more: no lookup by key);
    # one that is not an integer (a damaged file) joins nothing, as if absent

    @property
    def external_id(self) -> int | None:
        value = self.args.external_id
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def correlation(self) -> int | None:
        value = self.args.correlation
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def rf_id(self) -> int | None:
        """``Record function id``: joins to the host trace's ``rf_id`` (0/absent when no observer ran)."""
        value = self.args.rf_id
        return value if isinstance(value, int) and not isinstance(value, bool) and value else None


class KinetoInputEvent(KinetoEvent, gc=False):
    """A :class:`KinetoEvent` with its operators' input lists (:class:`KinetoInputArgs`)."""

    args: KinetoInputArgs = NO_INPUT_ARGS


class _ValueEnum(str, enum.Enum):
    """A string read as one shared member (no string object per event); prints as its value."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class KinetoPhase(_ValueEnum):
    """Every phase of the Chrome trace event format (``ph``), and ``""`` for an event without one."""

    NONE = ""
    BEGIN, END, COMPLETE, INSTANT, INSTANT_LEGACY, COUNTER = "B", "E", "X", "i", "I", "C"
    ASYNC_BEGIN, ASYNC_INSTANT, ASYNC_END = "b", "n", "e"
    ASYNC_START_LEGACY, ASYNC_STEP_INTO, ASYNC_STEP_PAST, ASYNC_FINISH = "S", "T", "p", "F"
    FLOW_START, FLOW_STEP, FLOW_END = "s", "t", "f"
    SAMPLE, OBJECT_CREATED, OBJECT_SNAPSHOT, OBJECT_DESTROYED = "P", "N", "O", "D"
    METADATA, GLOBAL_MEMORY_DUMP, PROCESS_MEMORY_DUMP, MARK, CLOCK_SYNC = "M", "V", "v", "R", "c"
    CONTEXT_ENTER, CONTEXT_EXIT = "(", ")"


class KinetoCategory(_ValueEnum):
    """The categories Kineto writes (libkineto's activity type names, the trace writer's own flows
    and spans, and the names of older versions), and ``""`` for an event without one. A trace with
    another category is read all the same, as plain strings (:func:`load_kineto_trace`)."""

    NONE = ""
    CPU_OP, USER_ANNOTATION, GPU_USER_ANNOTATION = "cpu_op", "user_annotation", "gpu_user_annotation"
    GPU_MEMCPY, GPU_MEMSET, KERNEL, EXTERNAL_CORRELATION = "gpu_memcpy", "gpu_memset", "kernel", "external_correlation"
    CUDA_RUNTIME, CUDA_DRIVER, CUDA_SYNC, CUDA_PROFILER_RANGE = (
        "cuda_runtime",
        "cuda_driver",
        "cuda_sync",
        PROFILER_RANGE,
    )
    CPU_INSTANT_EVENT, PYTHON_FUNCTION, OVERHEAD, GLOW_RUNTIME = (
        "cpu_instant_event",
        "python_function",
        "overhead",
        "glow_runtime",
    )
    MTIA_RUNTIME, MTIA_CCP_EVENTS, HPU_OP, XPU_RUNTIME, XPU_DRIVER = (
        "mtia_runtime",
        "mtia_ccp_events",
        "hpu_op",
        "xpu_runtime",
        "xpu_driver",
    )
    COLLECTIVE_COMM, PRIVATEUSE1_RUNTIME, PRIVATEUSE1_DRIVER = (
        "collective_comm",
        "privateuse1_runtime",
        "privateuse1_driver",
    )
    FLOW_LAUNCH, FLOW_FORWARD_BACKWARD, PROFILER_SPAN = "ac2g", "fwdbwd", "Trace"
    OPERATOR, KERNEL_LEGACY, MEMCPY, MEMSET, RUNTIME = "Operator", "Kernel", "Memcpy", "Memset", "Runtime"


class _KnownEvent(KinetoEvent, gc=False):
    """A :class:`KinetoEvent` whose phase and category are known values, each one shared member."""

    cat: KinetoCategory = KinetoCategory.NONE
    ph: KinetoPhase = KinetoPhase.NONE


class _KnownInputEvent(KinetoInputEvent, gc=False):
    """A :class:`KinetoInputEvent` whose phase and category are known values."""

    cat: KinetoCategory = KinetoCategory.NONE
    ph: KinetoPhase = KinetoPhase.NONE


#: The categories a flow the loader leaves out may have (:func:`chakra._json_scan.without_flows`): the
#: known ones, which the decoder of known categories would take.
_FLOW_CATEGORIES = tuple(category.value.encode() for category in KinetoCategory)


class _KinetoFile(msgspec.Struct):
    traceEvents: list[KinetoEvent] = msgspec.field(default_factory=list)
    schemaVersion: int | None = None
    distributedInfo: dict[str, Any] = msgspec.field(default_factory=dict)
    deviceProperties: list[dict[str, Any]] = msgspec.field(default_factory=list)
    baseTimeNanoseconds: int | None = None
    traceName: str | None = None


@dataclass
class KinetoTrace:
    """A device trace: its header and events in file order."""

    path: Path | None
    events: list[KinetoEvent]
    schema_version: int | None = None
    distributed_info: dict[str, Any] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    base_time_ns: int | None = None
    trace_name: str | None = None
    #: The flow events the loader did not decode (``load_kineto_trace(..., flows=False)``), by (category,
    #: phase): counted, not in ``events``.
    flows_left_out: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        """The rank recorded in ``distributedInfo`` (absent when torch.distributed was not initialised)."""
        rank = self.distributed_info.get("rank")
        return rank if isinstance(rank, int) else None

    def process_groups(self) -> list[dict[str, Any]]:
        """``distributedInfo.pg_config``: the process groups with their ranks."""
        groups = self.distributed_info.get("pg_config", [])
        return groups if isinstance(groups, list) else []


@dataclass
class KinetoEvents:
    """The events of a trace sorted by role, each list in time order (``ts``, then longer first)."""

    host_ops: list[KinetoEvent] = field(default_factory=list)  # cpu_op + user_annotation
    launches: dict[int, KinetoEvent] = field(default_factory=dict)  # correlation -> runtime launch
    sync_calls: list[KinetoEvent] = field(default_factory=list)  # host-side waits (cudaStreamSynchronize, ...)
    event_records: list[KinetoEvent] = field(default_factory=list)  # cudaEventRecord calls
    other_runtime: list[KinetoEvent] = field(default_factory=list)  # other runtime calls (cudaMalloc, ...)
    device_ops: list[KinetoEvent] = field(default_factory=list)  # kernels, memcpy, memset
    syncs: list[KinetoEvent] = field(default_factory=list)  # cuda_sync activities on the device timeline
    duplicate_correlations: list[int] = field(default_factory=list)  # ids seen on more than one launch
    earlier_work: int = 0  # device work launched before a window that ran in it (chakra.kineto.view.window_events)
    other: int = 0  # events with no role in linking (flows, metadata, instants, python stacks, ...)
    step_marks: list[KinetoEvent] = field(default_factory=list)  # host events named ProfilerStep*, also in host_ops


def _refuse_time(events: list[KinetoEvent], index: int, path: Path) -> NoReturn:
    """Refuse ``events[index]``, a complete (``X``) event without a start, or with a negative or
    non-finite start or duration (:func:`chakra._kineto_events.first_bad_time`): converted, it would
    start at 0 or last for months."""
    event = events[index]
    what = "has no ts" if math.isnan(event.ts) else f"has ts {event.ts!r} and dur {event.dur!r}"
    raise ChakraFormatError(
        f"trace event {index} ({event.name!r}) {what}: a complete event needs a start and a duration >= 0",
        path=path,
        hint="the file is damaged or not from torch.profiler: export the trace again",
    )


#: The role of a complete event of each category (:func:`classify`).
_ROLES = {
    **dict.fromkeys(HOST_OP_CATEGORIES, _kineto_events.ROLE_HOST),
    **dict.fromkeys(RUNTIME_CATEGORIES, _kineto_events.ROLE_RUNTIME),
    **dict.fromkeys(DEVICE_OP_CATEGORIES, _kineto_events.ROLE_DEVICE),
    SYNC_CATEGORY: _kineto_events.ROLE_SYNC,
}


def classify(trace: KinetoTrace) -> KinetoEvents:
    """Split ``trace.events`` by role. A correlation id used by two launches is kept for the first
    and listed in ``duplicate_correlations`` (the upstream linker aborts on it)."""
    host_ops, launches, duplicates, sync_calls, records, other_runtime, device_ops, syncs, other, marks = (
        _kineto_events.sort_roles(
            trace.events, _ROLES, LAUNCH_NAMES, SYNC_CALL_NAMES, EVENT_RECORD_NAMES, PROFILER_STEP_PREFIX
        )
    )
    for events in (host_ops, sync_calls, records, device_ops, syncs, marks):
        _kineto_events.sort_by_start(events)  # by start, then longer first
    return KinetoEvents(
        host_ops=host_ops,
        launches=launches,
        sync_calls=sync_calls,
        event_records=records,
        other_runtime=other_runtime,
        device_ops=device_ops,
        syncs=syncs,
        duplicate_correlations=duplicates,
        other=other,
        step_marks=marks,
    )


class _KinetoInputFile(_KinetoFile):
    traceEvents: list[KinetoInputEvent] = msgspec.field(default_factory=list)  # type: ignore[assignment]


class _KnownFile(_KinetoFile):
    traceEvents: list[_KnownEvent] = msgspec.field(default_factory=list)  # type: ignore[assignment]


class _KnownInputFile(_KinetoFile):
    traceEvents: list[_KnownInputEvent] = msgspec.field(default_factory=list)  # type: ignore[assignment]


#: Decoders by (input lists read, phases and categories known): a known phase or category is one
#: shared member, where a string would cost an object per event (a fifth of a trace's memory).
_DECODERS: dict[tuple[bool, bool], msgspec.json.Decoder[_KinetoFile]] = {
    (False, False): msgspec.json.Decoder(_KinetoFile),
    (True, False): msgspec.json.Decoder(_KinetoInputFile),
    (False, True): msgspec.json.Decoder(_KnownFile),
    (True, True): msgspec.json.Decoder(_KnownInputFile),
}


#: Decoders of a piece of the event list, by (input lists read, phases and categories known).
_EVENT_DECODERS: dict[tuple[bool, bool], msgspec.json.Decoder[list[KinetoEvent]]] = {
    (False, False): msgspec.json.Decoder(list[KinetoEvent]),
    (True, False): msgspec.json.Decoder(list[KinetoInputEvent]),
    (False, True): msgspec.json.Decoder(list[_KnownEvent]),
    (True, True): msgspec.json.Decoder(list[_KnownInputEvent]),
}


def _decode_events(data: bytes, inputs: bool) -> _KinetoFile:
    """The trace, its phases and categories as shared members; as strings where one is not known
    (decoded again: a category of a newer Kineto, a damaged file, whose error the second names)."""
    try:
        return _DECODERS[(inputs, True)].decode(data)
    except msgspec.ValidationError:
        return _DECODERS[(inputs, False)].decode(data)


def _read_in_pieces(path: Path, inputs: bool, flows: bool) -> tuple[_KinetoFile, Counter[tuple[str, str]]] | None:
    """The trace, its events decoded a piece of the file at a time (:class:`ArrayPieces`): the file's
    text is never all in memory beside its events; without ``flows``, the flow events left out of each
    piece before it is decoded, and counted. ``None`` where that cannot be done (a damaged file, no
    events, an unusual layout): :func:`load_kineto_trace` reads the whole file, and names the error."""
    stream, _ = io.open_decompressed(path, what="a Kineto trace")
    events: list[KinetoEvent] = []
    known = True
    names: dict[str, str] = {}
    threads: dict[int, int] = {}
    left_out: Counter[tuple[str, str]] = Counter()

    def decode(piece: bytes | bytearray) -> list[KinetoEvent]:
        nonlocal known
        cut = None if flows else without_flows(piece, _FLOW_CATEGORIES)
        counts: dict[tuple[str, str], int] = {}
        if cut is not None:
            piece, counts = cut
        if known:
            try:
                decoded = _EVENT_DECODERS[(inputs, True)].decode(piece)
            except msgspec.ValidationError:  # a category not known: strings from here on
                known = False
        if not known:
            decoded = _EVENT_DECODERS[(inputs, False)].decode(piece)
        left_out.update(counts)  # once decoded: a piece that is not is read again, or the file is
        return decoded

    try:
        reader = ArrayPieces(stream, TRACE_EVENTS_KEY, decode)
        with gc_paused():  # an object per event, kept: see chakra.collector
            for piece in reader.items():
                # each piece's freed memory serves the next: args that carry only ids made slim, and a
                # trace's few hundred operator names and threads over its hundreds of thousands of events
                _kineto_events.slim_args(piece, 0, _FULL_ARGS, KinetoIdArgs, _SLIM_ABSENT)
                _kineto_events.share_values(piece, 0, "name", names)
                _kineto_events.share_values(piece, 0, "tid", threads)
                _kineto_events.share_values(piece, 0, "pid", threads)
                events += piece
        head = _DECODERS[(False, False)].decode(reader.rest)
    except (NotStreamable, msgspec.DecodeError, *io.DECOMPRESS_ERRORS):
        return None
    finally:
        stream.close()
    if not events or head.traceEvents:  # none, or a second list of events after the first
        return None
    head.traceEvents = events
    return head, left_out


def load_kineto_trace(path: PathLike, *, inputs: bool = True, flows: bool = True) -> KinetoTrace:
    """Read a Kineto trace (plain or gzip JSON); ``inputs``: with the operators' input lists
    (:class:`KinetoInputEvent`), which linking with a host trace does not need; without ``flows``, the
    flow events (a third of a trace, which converting does not read: they repeat correlations) are
    counted in ``flows_left_out``, not decoded, where the loader can tell them from their text.

    Raises :class:`ChakraFormatError` (with line and column) for files that are not Kineto traces
    and :class:`ChakraInputError` for files that cannot be read.
    """
    path = Path(path)
    read = _read_in_pieces(path, inputs, flows)
    left_out: Counter[tuple[str, str]] = Counter()
    if read is not None:
        raw, left_out = read
    else:
        data = read_json_bytes(path, "a Kineto trace")
        raw = decode_json(
            data,
            lambda data: _decode_events(data, inputs),
            path=path,
            kind="a Kineto trace",
            hint="expected the JSON written by torch.profiler's export_chrome_trace",
        )
        if not raw.traceEvents and b'"nodes"' in data[: 1 << 16]:
            raise ChakraFormatError(
                "this is a host execution trace, not a Kineto (device) trace",
                path=path,
                hint="pass it as the host trace",
            )
        del data
        _kineto_events.slim_args(raw.traceEvents, 0, _FULL_ARGS, KinetoIdArgs, _SLIM_ABSENT)
    if not raw.traceEvents:
        raise ChakraFormatError(
            "the Kineto trace has no events (traceEvents is missing or empty)",
            path=path,
            hint="profile at least one step (torch.profiler's schedule, then export_chrome_trace)",
        )
    bad = _kineto_events.first_bad_time(raw.traceEvents)
    if bad >= 0 and left_out:
        return load_kineto_trace(path, inputs=inputs)  # to name the bad event by its place among all
    if bad >= 0:
        _refuse_time(raw.traceEvents, bad, path)
    return KinetoTrace(
        path=path,
        events=raw.traceEvents,
        schema_version=raw.schemaVersion,
        distributed_info=raw.distributedInfo,
        device_properties=raw.deviceProperties,
        base_time_ns=raw.baseTimeNanoseconds,
        trace_name=raw.traceName,
        flows_left_out=dict(left_out),
    )
