"""chakra.pytorch.link: host ops get their timing, device work finds its launcher, mismatches are refused."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
from helpers import GLOO_RANKS, host_node, kineto_kernel, kineto_launch, kineto_op, require_shared, write_trace_pair
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._kineto_events import sort_by_start
from chakra._link_join import attach_device_work, join_host_ops
from chakra.errors import ChakraInputError
from chakra.pytorch.host import HostNode, IOLists, load_host_trace
from chakra.pytorch.kineto import (
    PROFILER_STEP_PREFIX,
    ActivityArgs,
    KinetoArgs,
    KinetoEvent,
    KinetoIdArgs,
    load_kineto_trace,
)
from chakra.pytorch.link import SYNTHETIC_HOST_OPS, DeviceActivity, HostTiming, enclosing_ops, link, nest_events


def _hta_pair():
    return (
        load_host_trace(require_shared("hta/benchmark_simple_add_et.json.gz")),
        load_kineto_trace(require_shared("hta/benchmark_simple_add_trace.json.gz")),
    )


def test_traces_without_record_function_ids_join_by_external_id():
    linked = link(*_hta_pair())
    report = linked.report
    assert report.join_key == "External id"
    assert (report.host_ops, report.host_matched, report.name_agreement) == (36, 36, 1.0)


def test_kernels_attach_to_the_host_op_that_launched_them():
    linked = link(*_hta_pair())
    launchers = [(linked.host.by_id()[a.host_id].name, a.launch) for a in linked.activities]
    assert launchers == [("aten::uniform_", "cudaLaunchKernel")] * 2 + [("aten::add", "cudaLaunchKernel")] * 2
    assert linked.report.device_attached == linked.report.device_activities == 4


def test_host_ops_get_kineto_timing():
    linked = link(*_hta_pair())
    uniform = linked.timing[8]
    assert (uniform.ts_us, uniform.dur_us) == (1689360808079151.0, 189.0)


def test_mismatched_runs_are_refused_with_the_measured_rate():
    host = load_host_trace(require_shared("param/linear_et.json.gz"))
    device = load_kineto_trace(require_shared("param/linear_kineto.json.gz"))
    with pytest.raises(ChakraInputError, match=r"different runs: .* only 23% of those have the same name"):
        link(host, device)


def _write(tmp_path: Path, host_nodes: list[dict], events: list[dict]):
    host, device = write_trace_pair(tmp_path, host_nodes, events)
    return load_host_trace(host), load_kineto_trace(device)


def test_exclusive_time_subtracts_direct_children_only(tmp_path: Path):
    host, device = _write(
        tmp_path,
        [
            host_node(2, "outer", 1),
            host_node(3, "child", 2, 2),
            host_node(4, "grandchild", 3, 3),
            host_node(5, "child2", 4, 2),
        ],
        [
            kineto_op("outer", 1, 0, 100),
            kineto_op("child", 2, 10, 30),
            kineto_op("grandchild", 3, 15, 5),
            kineto_op("child2", 4, 50, 20),
        ],
    )
    timing = link(host, device).timing
    assert (timing[2].exclusive_us, timing[3].exclusive_us, timing[4].exclusive_us) == (50, 25, 5)


def test_device_work_without_its_runtime_call_is_reported_unattached(tmp_path: Path):
    host, device = _write(tmp_path, [host_node(2, "op", 1)], [kineto_op("op", 1, 0, 100), kineto_kernel(20, 99)])
    report = link(host, device).report
    assert report.device_unattached == {"no runtime call with its correlation id": 1}


def test_launch_inside_a_host_op_attaches_its_kernel_to_that_op(tmp_path: Path):
    host, device = _write(
        tmp_path, [host_node(2, "op", 1)], [kineto_op("op", 1, 0, 100), kineto_launch(50, 5), kineto_kernel(60, 5)]
    )
    (activity,) = link(host, device).activities
    assert activity.host_id == 2


def test_launch_inside_a_kineto_op_the_host_trace_lacks_is_reported_with_its_stream(tmp_path: Path):
    host, device = _write(
        tmp_path,
        [host_node(2, "op", 1)],
        [kineto_op("op", 1, 0, 100), kineto_op("unrecorded", 5, 200, 100), kineto_launch(250, 5),
         kineto_kernel(260, 5, stream=9)],
    )  # fmt: skip
    linked = link(host, device)
    (activity,) = linked.activities
    assert (activity.host_id, activity.stream, activity.launch_ts_us, activity.launch_end_us) == (None, 9, 250, 252)
    assert linked.report.device_unattached == {"the host op that launched it is not in the host trace": 1}
    assert linked.report.device_unattached_examples == [("k", "the host op that launched it is not in the host trace")]


def test_launch_outside_every_host_op_is_reported(tmp_path: Path):
    host, device = _write(
        tmp_path, [host_node(2, "op", 1)], [kineto_op("op", 1, 0, 100), kineto_launch(500, 5), kineto_kernel(510, 5)]
    )
    linked = link(host, device)
    (activity,) = linked.activities
    assert activity.host_id is None and activity.launch == "cudaLaunchKernel"
    assert linked.report.device_unattached == {"its runtime call is outside every recorded host op": 1}


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_live_gloo_traces_link_completely(gloo_traces: Path, rank: int):
    host = load_host_trace(gloo_traces / f"host.{rank}.json")
    linked = link(host, load_kineto_trace(gloo_traces / f"device.{rank}.json"))
    report = linked.report
    assert report.join_key == "Record function id" and report.name_agreement == 1.0
    assert report.host_matched == report.host_ops - 1  # all but the process-group record
    assert list(report.host_unmatched) == [
        "process-group record (written when the observer starts, no Kineto event by design)"
    ]


def _nested_by_stacks(events: list[KinetoEvent]) -> tuple[list[float], list[int]]:
    """The rule nest_events follows, thread by thread with a stack of open events."""
    exclusive = [e.dur for e in events]
    parents = [-1] * len(events)
    stacks: dict[object, list[int]] = {}
    for index, event in enumerate(events):
        stack = stacks.setdefault(event.tid, [])
        while stack and event.ts >= events[stack[-1]].ts + events[stack[-1]].dur:
            stack.pop()
        if stack:
            parent = stack[-1]
            parents[index] = parent
            exclusive[parent] -= min(event.dur, events[parent].ts + events[parent].dur - event.ts)
        stack.append(index)
    return [max(x, 0.0) for x in exclusive], parents


host_events = st.lists(
    st.builds(
        KinetoEvent,
        tid=st.sampled_from([1, 2, "gpu"]),
        ts=st.integers(0, 30).map(float),
        dur=st.integers(0, 12).map(float),
    ),
    max_size=30,
).map(lambda events: sorted(events, key=lambda e: (e.ts, -e.dur)))


@settings(max_examples=300, deadline=None)
@given(host_events)
def test_each_host_event_nests_in_the_innermost_open_event_of_its_thread(events: list[KinetoEvent]):
    assert nest_events(events) == _nested_by_stacks(events)


def _node(node_id: int, name: str, rf_id: int) -> HostNode:
    return HostNode(node_id, name, 1, rf_id, 1, 0, -1, 0, 0, "", IOLists(), IOLists(), {})


def _joined_one_at_a_time(
    nodes: list[HostNode], index_of: dict[int, int], events: list[KinetoEvent], exclusive: list[float]
):
    """The join written plainly: the rule :func:`join_host_ops` must follow."""
    timing, host_of_event, unmatched = {}, {}, []
    considered = joined = agree = 0
    for node in nodes:
        if node.name in SYNTHETIC_HOST_OPS:
            continue
        considered += 1
        at = index_of.get(node.rf_id) if node.rf_id else None
        if at is None:
            unmatched.append(node)
            continue
        joined += 1
        event = events[at]
        agree += event.name == node.name
        timing[node.id] = HostTiming(event.ts, event.dur, exclusive[at], event.tid)
        host_of_event[id(event)] = node.id
    return timing, host_of_event, considered, joined, agree, unmatched


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["aten::mm", "aten::add", *sorted(SYNTHETIC_HOST_OPS)]), st.integers(0, 6)),
        max_size=25,
    ),
    st.lists(st.tuples(st.sampled_from(["aten::mm", "aten::add"]), st.integers(0, 9)), min_size=1, max_size=8),
    st.data(),
)
def test_host_ops_join_their_kineto_events_by_the_plain_rule(node_specs, event_specs, data):
    nodes = [_node(node_id, name, rf_id) for node_id, (name, rf_id) in enumerate(node_specs)]
    events = [KinetoEvent(name=name, tid=1, ts=float(ts), dur=1.0) for name, ts in event_specs]
    index_of = data.draw(st.dictionaries(st.integers(1, 6), st.integers(0, len(events) - 1)))
    exclusive = [float(k) / 2 for k in range(len(events))]
    got = join_host_ops(nodes, SYNTHETIC_HOST_OPS, index_of, events, exclusive, HostTiming)
    assert got == _joined_one_at_a_time(nodes, index_of, events, exclusive)


def test_an_index_past_the_kineto_events_is_refused():
    with pytest.raises(IndexError, match="index_of gives 3 for a list of 1 events"):
        join_host_ops([_node(0, "aten::mm", 5)], SYNTHETIC_HOST_OPS, {5: 3}, [KinetoEvent()], [0.0], HostTiming)


class _EmptyingNode:
    """A host node whose rf_id, when read, empties the lists the join was given."""

    def __init__(self, node_id: int, rf_id: int, lists: list[list]):
        self.id, self.name, self._rf_id, self.lists = node_id, "aten::mm", rf_id, lists

    @property
    def rf_id(self) -> int:
        for passed in self.lists:
            passed.clear()
        return self._rf_id


def test_the_join_reads_the_lists_as_given_when_reading_a_node_empties_them():
    events, exclusive = [KinetoEvent(name="aten::mm", ts=1.0, dur=2.0)], [0.5]
    nodes: list = []
    nodes += [_EmptyingNode(7, 3, [nodes, events, exclusive]), _EmptyingNode(8, 4, [])]
    timing, _, considered, joined, agree, unmatched = join_host_ops(
        nodes, SYNTHETIC_HOST_OPS, {3: 0}, events, exclusive, HostTiming
    )
    assert timing == {7: HostTiming(1.0, 2.0, 0.5, 0)}
    assert (considered, joined, agree, [n.id for n in unmatched]) == (2, 1, 1, [8])


def _enclosing_by_a_stack(ops: list[KinetoEvent], calls: list[KinetoEvent]) -> list[int]:
    """The innermost op open at each call, by a sweep: ops and calls in time order (an op before a
    call at the same time, longer ops first), a stack of each thread's open ops (ProfilerStep marks
    left out), closed ops taken off its top at each start."""
    timeline = sorted(
        [(op.ts, 0, -op.dur, k) for k, op in enumerate(ops) if not op.name.startswith(PROFILER_STEP_PREFIX)]
        + [(call.ts, 1, -call.dur, k) for k, call in enumerate(calls)]
    )
    stacks: dict[object, list[int]] = {}
    found = [-1] * len(calls)
    for ts, is_call, _, k in timeline:
        event = calls[k] if is_call else ops[k]
        stack = stacks.setdefault(event.tid, [])
        while stack and ts >= ops[stack[-1]].ts + ops[stack[-1]].dur:
            stack.pop()
        if is_call:
            found[k] = stack[-1] if stack else -1
        else:
            stack.append(k)
    return found


_times = st.integers(0, 12).map(float)
_ops = st.builds(
    lambda tid, ts, dur, step: KinetoEvent(name="ProfilerStep#1" if step else "aten::op", tid=tid, ts=ts, dur=dur),
    st.sampled_from([1, 2, "pool"]), _times, _times, st.booleans(),
)  # fmt: skip
_calls = st.builds(lambda tid, ts: KinetoEvent(name="cudaLaunchKernel", tid=tid, ts=ts, dur=1.0),
                   st.sampled_from([1, 2, 3]), _times)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_ops, max_size=12), calls=st.lists(_calls, max_size=8))
def test_the_op_enclosing_a_call_is_the_innermost_a_sweep_of_open_ops_finds(ops, calls):
    """Overlapping ops that do not nest, ops starting or ending with a call, steps, threads without ops;
    the nesting given (as the view's and the link's callers have it) or found in the pass."""
    sort_by_start(ops)
    expected = _enclosing_by_a_stack(ops, calls)
    assert enclosing_ops(ops, nest_events(ops)[1], calls) == enclosing_ops(ops, None, calls) == expected


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_ops, max_size=12), calls=st.lists(_calls, max_size=8))
def test_ops_whose_times_are_not_floats_find_the_same_enclosing_ops(ops, calls):
    """Integer times (a trace built in code) leave the pass in C for its rule in Python: same answers."""
    sort_by_start(ops)
    for event in [*ops, *calls]:
        event.ts, event.dur = int(event.ts), int(event.dur)
    expected = _enclosing_by_a_stack(ops, calls)
    assert enclosing_ops(ops, nest_events(ops)[1], calls) == enclosing_ops(ops, None, calls) == expected


def test_enclosing_ops_refuses_ops_out_of_start_order():
    ops = [KinetoEvent(name="b", tid=1, ts=5.0, dur=1.0), KinetoEvent(name="a", tid=1, ts=0.0, dur=10.0)]
    with pytest.raises(ValueError, match="sorted by start"):
        enclosing_ops(ops, [-1, -1], [KinetoEvent(tid=1, ts=6.0)])


def test_device_work_is_attached_as_given_when_reading_its_stream_changes_the_calls():
    """Args of another type are read with .get, which may run user code: the launch found stays whole."""
    calls = {5: KinetoEvent(name="cudaLaunchKernel", tid=1, ts=3.0, dur=1.0)}

    class Args:
        correlation = 5

        def get(self, key, default):
            calls.clear()
            return 1

    (activity,), unattached = attach_device_work(
        [KinetoEvent(name="k", cat="kernel", args=Args())], calls, [-1], [], {}, DeviceActivity, KinetoArgs
    )
    assert (activity.launch, activity.launch_end_us, activity.stream) == ("cudaLaunchKernel", 4.0, 1)
    assert unattached == [(0, 1)]  # its launch is outside every op


def test_a_launch_mapped_to_none_outside_every_op_or_in_an_op_mapped_to_none_is_missing():
    launch, op = KinetoEvent(name="cudaLaunchKernel", tid=1, ts=3.0), KinetoEvent(name="op", tid=1)
    kernel = KinetoEvent(name="k", cat="kernel", args=KinetoArgs(correlation=5))
    found = [
        attach_device_work([kernel], calls, enclosing, [op], hosts, DeviceActivity, KinetoArgs)[1]
        for calls, enclosing, hosts in [
            ({5: None}, [-1], {}),
            ({5: launch}, [-1], {}),
            ({5: launch}, [0], {id(op): None}),
        ]
    ]
    assert found == [[(0, 0)], [(0, 1)], [(0, 2)]]


def test_the_host_id_of_a_launch_is_its_ops_by_the_host_map_or_its_place_in_a_profiler_view():
    launches = {5: KinetoEvent(name="cudaLaunchKernel", tid=1, ts=3.0), 6: KinetoEvent(name="cudaMemcpyAsync", tid=1)}
    ops = [KinetoEvent(name="a", tid=1), KinetoEvent(name="b", tid=1)]
    kernels = [KinetoEvent(name="k", cat="kernel", args=KinetoArgs(correlation=c)) for c in (6, 5, 6)]
    mapped, _ = attach_device_work(kernels, launches, [1, 0], ops, {id(ops[0]): 70, id(ops[1]): 71}, DeviceActivity,
                                   KinetoArgs)  # fmt: skip
    placed, _ = attach_device_work(kernels, launches, [1, 0], ops, None, DeviceActivity, KinetoArgs)
    assert [a.host_id for a in mapped] == [70, 71, 70] and [a.host_id for a in placed] == [1, 2, 1]
    assert placed[0].host_id is placed[2].host_id  # the activities of one launch share it


def test_a_launch_added_to_the_calls_after_the_call_began_is_outside_every_op():
    """Args of another type are read with .get, which may run user code: one adding a launch."""
    calls: dict[int, KinetoEvent] = {}

    class Args:
        correlation = 5

        def get(self, key, default):
            calls[5] = KinetoEvent(name="cudaLaunchKernel", tid=1)
            return default

    events = [KinetoEvent(name="m", cat="kernel", args=Args()), KinetoEvent(name="k", cat="kernel", args=Args())]
    (first, second), unattached = attach_device_work(events, calls, [], [], None, DeviceActivity, KinetoArgs)
    assert unattached == [(0, 0), (1, 1)]  # no launch yet; then one not among the calls when it began
    assert (first.launch, second.launch, second.host_id) == ("", "cudaLaunchKernel", None)


def test_device_work_can_keep_what_a_conversion_reads_of_its_args_for_a_caller_that_lets_the_events_go():
    class Args:  # args of another type are kept as they are
        correlation = 5

        def get(self, key, default):
            return default

    launch = KinetoEvent(name="cudaLaunchKernel", tid=123456, ts=3.0, dur=1.0)
    kernels = [
        KinetoEvent(name="k", cat="kernel", args=KinetoArgs(correlation=5, stream=7, external_id=9)),
        KinetoEvent(name="m", cat="gpu_memcpy", args=KinetoArgs(correlation=5, stream=7, bytes=64)),
        KinetoEvent(name="c", cat="gpu_memcpy", args=Args()),
    ]
    shared, _ = attach_device_work(kernels, {5: launch}, [-1], [], {}, DeviceActivity, KinetoArgs)
    kept, _ = attach_device_work(kernels, {5: launch}, [-1], [], {}, DeviceActivity, KinetoArgs, ActivityArgs)
    assert [a.args is k.args for a, k in zip(shared, kernels, strict=True)] == [True, True, True]
    assert [a.args for a in kept[:2]] == [ActivityArgs(stream=7), ActivityArgs(bytes=64, stream=7)]
    assert kept[2].args is kernels[2].args
    assert [msgspec.structs.replace(a, args=None) for a in kept] == [
        msgspec.structs.replace(a, args=None) for a in shared
    ]


def test_an_activity_whose_args_hold_nothing_a_conversion_reads_shares_one_empty_kept_args():
    kernels = [KinetoEvent(name="k", cat="kernel", args=KinetoArgs(correlation=c, external_id=c)) for c in (5, 6)]
    first, second = attach_device_work(kernels, {}, [], [], {}, DeviceActivity, KinetoArgs, ActivityArgs)[0]
    assert first.args == ActivityArgs() and second.args is first.args


def test_the_launches_of_a_thread_share_one_tid_object():
    launches = {c: KinetoEvent(name="cudaLaunchKernel", tid=123456, ts=float(c), dur=1.0) for c in (5, 6)}
    kernels = [KinetoEvent(name="k", cat="kernel", args=KinetoArgs(correlation=c)) for c in (5, 6)]
    first, second = attach_device_work(kernels, launches, [-1, -1], [], {}, DeviceActivity, KinetoArgs)[0]
    assert first.launch_thread == 123456 and second.launch_thread is first.launch_thread


def test_kept_args_whose_type_cannot_be_made_are_refused_without_holding_their_names():
    name = "".join(["kept", "_field"])  # a str of its own, whose references are counted

    class Kept:
        __struct_fields__ = (name,)

        def __init__(self, *values: object):
            raise RuntimeError("cannot be made")

    before = sys.getrefcount(name)
    for _ in range(100):
        with pytest.raises(RuntimeError, match="cannot be made"):
            attach_device_work([], {}, [], [], None, DeviceActivity, KinetoIdArgs, Kept)
    assert sys.getrefcount(name) == before
