"""The TensorFlow front end's parts on hand-built inputs (no TensorFlow needed): FLOPs from shapes,
device names and rank order, and how a profiler XSpace becomes op executions by step."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._op_rows import row_executions
from chakra._xplane import STAT_INT, STAT_OTHER, STAT_REF, STAT_STR, op_event_rows, plane_metadata
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.schema.tensorflow.tf_subset_pb2 import XEvent, XLine, XPlane, XSpace
from chakra.tensorflow.costs import op_flops
from chakra.tensorflow.graph import Device, rank_order
from chakra.tensorflow.graph_table import read_step_tables
from chakra.tensorflow.profile import ASYNC_DONE, ASYNC_START, PROCESS_EVENT, StepSummary, load_tf_profile
from chakra.units import PS_PER_NS

PS_PER_US = 1_000_000


# ---- FLOPs --------------------------------------------------------------------------------------
def test_a_transposed_matmul_counts_its_inner_dimension_from_the_transposed_side():
    # gradient of a weight: x^T (64 x 32) @ dy (32 x 128), x given as 32 x 64
    assert op_flops("MatMul", [[32, 64], [32, 128]], [[64, 128]], {"transpose_a": True}) == 2 * 64 * 128 * 32


def test_a_batched_matmul_counts_every_batch():
    assert op_flops("BatchMatMulV2", [[8, 16, 32], [8, 32, 4]], [[8, 16, 4]], {}) == 2 * 8 * 16 * 4 * 32


def test_a_convolution_counts_output_elements_times_its_window():
    # NHWC 1 x 8 x 8 x 16 output, a 3 x 3 filter over 4 input channels
    assert op_flops("Conv2D", [[1, 8, 8, 4], [3, 3, 4, 16]], [[1, 8, 8, 16]], {}) == 2 * 8 * 8 * 16 * 3 * 3 * 4


def test_a_reduction_counts_its_input_and_data_movement_counts_nothing():
    assert op_flops("Sum", [[32, 128], []], [[128]], {}) == 32 * 128
    assert op_flops("Reshape", [[32, 128], [1]], [[4096]], {}) == 0


def test_an_unknown_dimension_leaves_the_count_unknown():
    assert op_flops("MatMul", [[-1, 64], [64, 128]], [[-1, 128]], {}) is None


# ---- devices --------------------------------------------------------------------------------------
def test_ranks_are_worker_major_and_device_minor():
    devices = [
        "/job:worker/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:1",
        "/job:worker/replica:0/task:10/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0",
    ]
    tasks = [(Device.parse(d).task, Device.parse(d).index) for d in rank_order(devices)]
    assert tasks == [(0, 0), (0, 1), (1, 0), (10, 0)]  # task 10 after task 1: numbers, not text


def test_run_metadata_of_another_kind_is_a_format_error_naming_the_file(tmp_path: Path):
    path = tmp_path / "run_metadata.pb"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(ChakraFormatError, match="not a TensorFlow RunMetadata") as raised:
        read_step_tables(path)
    assert str(path) in str(raised.value)


# ---- the profile ----------------------------------------------------------------------------------
def _event(plane: XPlane, name: str, start_us: float, dur_us: float, stats: dict[str, int | str]) -> XEvent:
    """An event on ``plane``'s metadata (names and stats interned as the profiler does)."""
    ids = {m.name: key for key, m in plane.event_metadata.items()}
    if name not in ids:
        ids[name] = len(ids) + 1
        plane.event_metadata[ids[name]].name = name
    event = XEvent(metadata_id=ids[name], offset_ps=round(start_us * PS_PER_US), duration_ps=round(dur_us * PS_PER_US))
    stat_ids = {m.name: key for key, m in plane.stat_metadata.items()}
    for key, value in stats.items():
        for text in (key, value) if isinstance(value, str) else (key,):
            if text not in stat_ids:
                stat_ids[text] = len(stat_ids) + 1
                plane.stat_metadata[stat_ids[text]].name = text
        stat = event.stats.add(metadata_id=stat_ids[key])
        if isinstance(value, str):
            stat.ref_value = stat_ids[value]
        else:
            stat.int64_value = value
    return event


def _profile(tmp_path: Path, lines: list[list[tuple]]) -> Path:
    space = XSpace()
    plane = space.planes.add(name="/host:CPU")
    for k, events in enumerate(lines):
        line: XLine = plane.lines.add(id=k, name=f"tf_Compute/{k}", timestamp_ns=1_000_000)
        for name, start_us, dur_us, stats in events:
            line.events.append(_event(plane, name, start_us, dur_us, stats))
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def test_an_op_belongs_to_the_step_of_the_innermost_executor_region_around_it(tmp_path: Path):
    path = _profile(tmp_path, [[
        (PROCESS_EVENT, 0, 100, {"id": 7}),
        ("mm:MatMul", 10, 20, {}),
        (PROCESS_EVENT, 40, 30, {"id": 8}),  # nested: a function called inside step 7
        ("inner:Relu", 45, 5, {}),
        ("after:AddV2", 80, 5, {}),
        ("outside:Mul", 200, 5, {}),
    ]])  # fmt: skip
    profile = load_tf_profile(path)
    assert set(profile.steps[7]) == {"mm", "after"} and set(profile.steps[8]) == {"inner"}
    assert profile.stepless == 1
    execution = profile.steps[7]["mm"][0]
    assert (execution.start_ns, execution.dur_ns, execution.thread) == (1_000_000 + 10_000, 20_000, 0)


def test_an_async_kernel_spans_its_launch_to_its_done_on_no_thread_keeping_its_collective_keys(tmp_path: Path):
    path = _profile(tmp_path, [
        [(ASYNC_START, 10, 2, {"step_id": 5, "name": "ar"}), (ASYNC_DONE, 90, 4, {"step_id": 5, "name": "ar"})],
        [("ar:CollectiveReduceV2", 30, 50, {"step_id": 5, "group_key": 1, "instance_key": 101})],
    ])  # fmt: skip
    (execution,) = load_tf_profile(path).steps[5]["ar"]
    assert (execution.start_ns - 1_000_000, execution.dur_ns) == (10_000, 84_000)
    assert execution.thread is None and (execution.group_key, execution.instance_key) == (1, 101)


def _summed(steps: dict, graph: set[str], working: set[str]) -> dict[int, StepSummary]:
    """Every step summed up from its executions, as StepSummary defines it."""
    out = {}
    for step_id, ops in steps.items():
        ours = [e for node, runs in ops.items() if node in graph for e in runs]
        instances = [e.instance_key for e in ours if e.instance_key is not None]
        out[step_id] = StepSummary(
            sum(map(len, ops.values())),
            len(ours),
            len(working.intersection(ops)),
            min((e.start_ns for e in ours), default=None),
            max((e.start_ns + e.dur_ns for e in ours), default=None),
            min(instances, default=None),
        )
    return out


_NODES = [f"n{k}" for k in range(5)]
#: op events with their own step and maybe a collective's keys, and async kernels' launches and dones
_summed_events = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from([f"{node}:Op" for node in _NODES]),
            st.integers(0, 20),
            st.integers(0, 5),
            st.fixed_dictionaries({"step_id": st.integers(1, 3)}, optional={"instance_key": st.integers(-3, 9)}),
        ),
        st.tuples(
            st.sampled_from([ASYNC_START, ASYNC_DONE]),
            st.integers(0, 20),
            st.integers(0, 5),
            st.fixed_dictionaries({"step_id": st.integers(1, 3), "name": st.sampled_from(_NODES)}),
        ),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_summed_events, min_size=1, max_size=3), graph=st.sets(st.sampled_from(_NODES)), data=st.data())
def test_the_steps_summed_up_without_their_executions_are_their_executions_summed(lines, graph, data):
    working = data.draw(st.sets(st.sampled_from(sorted(graph))) if graph else st.just(set()))
    with tempfile.TemporaryDirectory() as folder:
        path = _profile(Path(folder), lines)
        try:
            profile = load_tf_profile(path)
        except ChakraInputError:  # no op execution of a step
            return
    assert profile.step_summaries(graph, working) == _summed(profile.steps, graph, working)


def test_a_profile_of_no_ops_is_refused_saying_what_to_profile(tmp_path: Path):
    from chakra.errors import ChakraInputError

    path = _profile(tmp_path, [[("TFE_Py_Execute", 0, 5, {})]])
    with pytest.raises(ChakraInputError, match="no op executions of a step"):
        load_tf_profile(path)


# ---- a whole recording, built by hand ---------------------------------------------------------------
def test_a_recording_of_two_devices_converts_to_paired_transfers_and_one_group(tmp_path: Path):
    from helpers import write_tf_recording

    from chakra.tensorflow.convert import convert_workers
    from chakra.tensorflow.recording import load_recorded_workers

    conversion = convert_workers(load_recorded_workers([write_tf_recording(tmp_path / "rec")]))
    assert conversion.groups.groups == {1: (0, 1)}
    (send,) = [n for n in conversion.nodes[1] if n.name == "replica_1/ar/_send"]
    (receive,) = [n for n in conversion.nodes[0] if n.name == "ar/_recv"]
    attrs = {a.name: a for a in send.attr}
    assert attrs["comm_dst"].int32_val == 0 and attrs["comm_size"].int64_val == 8 * 4 * 4
    assert {a.name: a for a in receive.attr}["comm_src"].int32_val == 1
    assert conversion.folded == {"_Arg": 4, "Const": 4}


def test_a_profile_of_times_past_64_bits_converts_in_the_order_its_times_give(tmp_path: Path):
    from helpers import write_tf_recording

    from chakra.tensorflow.convert import convert_workers
    from chakra.tensorflow.recording import load_recorded_workers

    converted, shift_ns = [], 0
    for moved in (False, True):
        recording = write_tf_recording(tmp_path / str(moved))
        path = recording / "profile" / "host.xplane.pb"
        space = XSpace.FromString(path.read_bytes())
        lines = space.planes[0].lines
        if moved:  # the lines' clocks just under 2**63 ns (whole µs later): the events' times past it
            shift_ns = ((1 << 63) - 1000 - max(line.timestamp_ns for line in lines)) // 1000 * 1000
            for line in lines:
                line.timestamp_ns += shift_ns
        path.write_bytes(space.SerializeToString())
        converted.append(convert_workers(load_recorded_workers([recording])).nodes[0])
    plain, shifted = converted
    assert [n.name for n in shifted] == [n.name for n in plain]
    assert [n.start_time_micros for n in shifted] == [n.start_time_micros + shift_ns // 1000 for n in plain]


def test_a_step_without_gaps_replays_to_its_measured_span(tmp_path: Path):
    from helpers import write_tf_recording

    from chakra.tensorflow.pipeline import convert_tensorflow_recordings

    converted = convert_tensorflow_recordings([write_tf_recording(tmp_path / "rec")], tmp_path / "s", check=True)
    assert converted.fidelity is not None and converted.fidelity.ok
    for result in converted.fidelity.results.values():
        assert result.predicted_span_us == result.measured_span_us == 80.0


# ---- the XSpace read from its bytes (chakra._xplane) against protobuf's messages --------------------
_STAT_KINDS = {"int64_value": STAT_INT, "uint64_value": STAT_INT, "ref_value": STAT_REF, "str_value": STAT_STR}


def _message_events(line: XLine, events: set[int], stats: set[int]) -> tuple[int, list[tuple]]:
    """What op_event_rows gives of a line's events asked for, read from protobuf's messages."""
    out = []
    for event in line.events:
        if event.metadata_id not in events:
            continue
        kept = []
        for stat in event.stats:
            if stat.metadata_id in stats:
                member = stat.WhichOneof("value")
                kind = _STAT_KINDS.get(member, STAT_OTHER)
                kept.append((stat.metadata_id, kind, getattr(stat, member) if kind != STAT_OTHER else None))
        out.append((event.metadata_id, event.offset_ps, event.duration_ps, tuple(kept)))
    return line.timestamp_ns, out


_stat_values = st.one_of(
    st.builds(lambda v: ("int64_value", v), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: ("uint64_value", v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: ("ref_value", v), st.integers(0, 9)),
    st.builds(lambda v: ("str_value", v), st.text(max_size=5)),
    st.builds(lambda v: ("double_value", v), st.floats(allow_nan=False)),
    st.builds(lambda v: ("bytes_value", v), st.binary(max_size=4)),
)
#: An event as the wire may hold it: pieces of one XEvent, each serialized on its own, one after the
#: other (a parser merges them: the last scalar and oneof member win, stats add up).
_event_pieces = st.lists(
    st.tuples(
        st.integers(0, 6),  # metadata id
        st.one_of(st.builds(lambda v: ("offset_ps", v), st.integers(0, 10**12)), st.just(("num_occurrences", 3))),
        st.integers(0, 10**9),
        st.lists(st.tuples(st.integers(0, 6), _stat_values), max_size=3),
    ),
    min_size=1,
    max_size=2,
)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (field numbers below 16, lengths below 2**14)."""
    size = len(payload)
    length = bytes([size]) if size < 0x80 else bytes([size & 0x7F | 0x80, size >> 7])
    return bytes([number << 3 | 2]) + length + payload


def _event_bytes(pieces: list) -> bytes:
    out = b""
    for metadata_id, (member, value), duration_ps, stats in pieces:
        event = XEvent(metadata_id=metadata_id, duration_ps=duration_ps)
        setattr(event, member, value)
        for stat_id, (stat_member, stat_value) in stats:
            setattr(event.stats.add(metadata_id=stat_id), stat_member, stat_value)
        out += event.SerializeToString()
    return out


@settings(max_examples=200, deadline=None)
@given(
    planes=st.lists(
        st.tuples(
            st.sampled_from(["/host:CPU", "/device:GPU:0"]), st.lists(st.lists(_event_pieces, max_size=6), max_size=3)
        ),
        max_size=3,
    ),
    wanted_events=st.sets(st.integers(0, 6)),
    wanted_stats=st.sets(st.integers(0, 6)),
)
def test_the_host_plane_read_from_its_bytes_is_what_protobuf_reads(planes, wanted_events, wanted_stats):
    data = b""
    for name, lines in planes:
        head = XPlane(name=name)
        for key in range(7):
            head.event_metadata[key].name = f"op{key}:Op"
            head.stat_metadata[key].name = f"stat{key}"
        plane = head.SerializeToString()
        for k, events in enumerate(lines):
            line = XLine(id=k, timestamp_ns=k * 1000).SerializeToString()
            plane += _field(3, line + b"".join(_field(4, _event_bytes(pieces)) for pieces in events))
        data += _field(1, plane)
    space = XSpace.FromString(data)
    host = next((plane for plane in space.planes if plane.name == "/host:CPU"), None)
    found = plane_metadata(data, "/host:CPU")
    if host is None:
        assert found is None
        return
    assert found is not None
    names, stat_names, spans = found
    assert names == {key: m.name for key, m in host.event_metadata.items()}
    assert stat_names == {key: m.name for key, m in host.stat_metadata.items()}
    no_roles = (set(), set(), set(), set())
    *_, line_events = op_event_rows(data, spans, {}, set(), no_roles, PS_PER_NS, wanted_events, wanted_stats)
    assert line_events == [_message_events(line, wanted_events, wanted_stats) for line in host.lines]


def _message_ops(line: XLine, op_nodes: dict[int, str], regions: set[int], roles: tuple[set[int], ...], thread: int):
    """What op_event_rows finds of each step for one line, and counts as stepless, read from protobuf's messages."""
    entries = []
    for index, event in enumerate(line.events):
        if event.metadata_id in op_nodes or event.metadata_id in regions:
            ints = {}  # role -> the last integer stat in that role
            for stat in event.stats:
                member = stat.WhichOneof("value")
                if member in ("int64_value", "uint64_value"):
                    ints.update(
                        {role: getattr(stat, member) for role, ids in enumerate(roles) if stat.metadata_id in ids}
                    )
            entries.append((event.offset_ps, -event.duration_ps, index, event.metadata_id, ints))
    steps: dict = {}
    stepless = 0
    open_regions: list[tuple[int, int]] = []  # (end ps, step), innermost last
    for offset_ps, minus_duration_ps, _, metadata_id, ints in sorted(entries):
        end_ps = offset_ps - minus_duration_ps
        while open_regions and open_regions[-1][0] < offset_ps:
            open_regions.pop()
        if metadata_id not in op_nodes:
            if 1 in ints:
                open_regions.append((end_ps, ints[1]))
            continue
        step = ints.get(0, next((step for end, step in reversed(open_regions) if end >= end_ps), None))
        if step is None:
            stepless += 1
            continue
        execution = (
            line.timestamp_ns + offset_ps // PS_PER_NS,
            (end_ps - offset_ps) // PS_PER_NS,
            thread,
            ints.get(2),
            ints.get(3),
        )
        steps.setdefault(step, {}).setdefault(op_nodes[metadata_id], []).append(execution)
    return steps, stepless


#: Events of a few times and small ints, so that regions hold ops, end together and share a start.
_op_event_pieces = st.lists(
    st.tuples(
        st.integers(0, 6),
        st.one_of(st.builds(lambda v: ("offset_ps", v * 500), st.integers(0, 6)), st.just(("num_occurrences", 3))),
        st.integers(0, 6).map(lambda v: v * 500),
        st.lists(
            st.tuples(
                st.integers(0, 6), st.one_of(_stat_values, st.builds(lambda v: ("int64_value", v), st.integers(-2, 3)))
            ),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=2,
)


def _spread(pieces: list, offset: int) -> list:
    """Event pieces with their metadata and stat ids moved up by ``offset``."""
    return [
        (metadata_id + offset, member, duration_ps, [(stat_id + offset, value) for stat_id, value in stats])
        for metadata_id, member, duration_ps, stats in pieces
    ]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.lists(st.one_of(_op_event_pieces, _event_pieces), max_size=10), min_size=1, max_size=3),
    ops=st.sets(st.integers(0, 6)),
    roles=st.tuples(*[st.sets(st.integers(0, 6), max_size=2)] * 4),
    spread=st.sampled_from([0, 1 << 40]),
)
def test_the_op_executions_read_from_lines_bytes_are_what_protobuf_reads(lines, ops, roles, spread):
    # metadata ids past what the reader keeps a table by id for are searched for: both ways are read
    lines = [[_spread(pieces, spread) for pieces in events] for events in lines]
    ops = {key + spread for key in ops}
    roles = tuple({key + spread for key in role} for role in roles)
    op_nodes = {key: f"node{key}" for key in ops}
    regions = {key + spread for key in range(7)} - ops
    data, spans, expected, stepless = b"", [], {}, 0
    for thread, events in enumerate(lines):
        line_bytes = XLine(id=thread, timestamp_ns=thread * 10**9).SerializeToString()
        line_bytes += b"".join(_field(4, _event_bytes(pieces)) for pieces in events)
        spans.append((len(data) + 1, len(line_bytes)))
        data += b"\x00" + line_bytes  # a byte between lines: each is read within its span
        steps, line_stepless = _message_ops(XLine.FromString(line_bytes), op_nodes, regions, roles, thread)
        for step, nodes in steps.items():
            for node, executions in nodes.items():
                expected.setdefault(step, {}).setdefault(node, []).extend(executions)
        stepless += line_stepless
    rows, step_ids, nodes, found, _ = op_event_rows(data, spans, op_nodes, regions, roles, PS_PER_NS, set(), set())
    made = row_executions(rows, lambda *execution: execution, nodes, b"\x01" * len(step_ids))
    assert ({step_ids[index]: ops for index, ops in made.items()}, found) == (expected, stepless)


def test_a_damaged_profile_is_one_line_naming_it(tmp_path: Path):
    path = _profile(tmp_path, [[(PROCESS_EVENT, 0, 100, {"id": 7}), ("mm:MatMul", 10, 20, {})]])
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ChakraFormatError, match="not a profiler XSpace"):
        load_tf_profile(path)
