"""chakra.pytorch.kineto: device traces read and sorted by role."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from helpers import require_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._kineto_events import count_kinds, share_values, slim_args, sort_by_start
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.pytorch.kineto import (
    NO_VALUE,
    KinetoCategory,
    KinetoEvent,
    KinetoIdArgs,
    KinetoInputArgs,
    _KinetoInputFile,
    classify,
    load_kineto_trace,
)

ARG_FIELDS = KinetoInputArgs.__struct_fields__


def test_gpu_trace_events_are_sorted_by_role():
    trace = load_kineto_trace(require_shared("hta/alexnet_kineto.json.gz"))
    events = classify(trace)
    assert (len(events.host_ops), len(events.device_ops), len(events.syncs)) == (367, 98, 41)
    assert all(e.correlation in events.launches for e in events.device_ops)
    assert events.duplicate_correlations == []


def test_host_ops_are_in_time_order_with_enclosing_ops_first():
    events = classify(load_kineto_trace(require_shared("hta/alexnet_kineto.json.gz")))
    keys = [(e.ts, -e.dur) for e in events.host_ops]
    assert keys == sorted(keys)


def test_a_trace_without_record_function_ids_has_none():
    events = classify(load_kineto_trace(require_shared("param/linear_kineto.json.gz")))
    assert all(e.rf_id is None for e in events.host_ops)
    assert all(e.external_id is not None for e in events.host_ops)


def test_rank_comes_from_distributed_info():
    assert load_kineto_trace(require_shared("hta/benchmark_simple_add_trace.json.gz")).rank == 0
    assert load_kineto_trace(require_shared("param/linear_kineto.json.gz")).rank is None


def test_a_launch_correlation_seen_twice_is_reported_not_fatal(tmp_path: Path):
    launch = {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "ts": 1,
        "dur": 1,
        "args": {"correlation": 7},
    }
    path = tmp_path / "device.0.json"
    path.write_text(json.dumps({"traceEvents": [launch, {**launch, "ts": 5}]}))
    events = classify(load_kineto_trace(path))
    assert events.launches[7].ts == 1 and events.duplicate_correlations == [7]


def test_gzip_and_plain_read_the_same(tmp_path: Path):
    packed = require_shared("hta/benchmark_simple_add_trace.json.gz")
    plain = tmp_path / "device.0.json"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    assert load_kineto_trace(plain).events == load_kineto_trace(packed).events


def test_a_host_trace_is_named_as_such():
    with pytest.raises(ChakraFormatError, match="host execution trace"):
        load_kineto_trace(require_shared("param/resnet_1gpu_et.json.gz"))


def test_broken_json_is_reported_with_line_and_column(tmp_path: Path):
    path = tmp_path / "device.0.json"
    path.write_text('{"traceEvents": [\n {"ph": "X", "ts": }]}')
    with pytest.raises(ChakraFormatError, match="line 2, column"):
        load_kineto_trace(path)


def test_a_missing_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="no such file"):
        load_kineto_trace(tmp_path / "device.0.json")


SHARED_TRACES = ["hta/alexnet_kineto.json.gz", "param/linear_kineto.json.gz", "hta/benchmark_simple_add_trace.json.gz"]


def _every_arg(event: KinetoEvent) -> tuple:
    """An event's fields with every arg it reads, whatever kind of args holds them."""
    args = tuple(bytes(v) if isinstance(v := getattr(event.args, f), msgspec.Raw) else v for f in ARG_FIELDS)
    return (*(getattr(event, f) for f in event.__struct_fields__ if f != "args"), args)


@pytest.mark.parametrize("name", SHARED_TRACES)
def test_a_trace_read_in_pieces_has_the_events_of_the_whole_file(name: str):
    path = require_shared(name)
    whole = msgspec.json.decode(gzip.decompress(path.read_bytes()), type=_KinetoInputFile)
    trace = load_kineto_trace(path)
    assert [_every_arg(e) for e in trace.events] == [_every_arg(e) for e in whole.traceEvents]
    assert (trace.schema_version, trace.distributed_info, trace.device_properties, trace.trace_name) == (
        whole.schemaVersion,
        whole.distributedInfo,
        whole.deviceProperties,
        whole.traceName,
    )


@pytest.mark.parametrize("name", SHARED_TRACES)
def test_a_trace_read_without_flows_holds_every_other_event_and_counts_the_flows(name: str):
    path = require_shared(name)
    whole = load_kineto_trace(path)
    trace = load_kineto_trace(path, flows=False)
    flows = [e for e in whole.events if e.ph in ("s", "f", "t")]
    assert flows and not whole.flows_left_out
    assert [_every_arg(e) for e in trace.events] == [_every_arg(e) for e in whole.events if e.ph not in ("s", "f", "t")]
    assert trace.flows_left_out == Counter((str(e.cat), str(e.ph)) for e in flows)


def test_phases_categories_operator_names_and_thread_and_process_ids_are_kept_once():
    events = load_kineto_trace(require_shared("hta/alexnet_kineto.json.gz")).events
    for field in ("ph", "cat", "name", "tid", "pid"):
        values = [getattr(e, field) for e in events]
        assert len({id(v) for v in values}) == len(set(values)), field
    assert {type(e.cat) for e in events} == {KinetoCategory}


def test_args_that_carry_only_ids_are_kept_slim_and_read_the_same(tmp_path: Path):
    """A third of the size: every arg a reader asks of them is what the decoded args held."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"correlation": 7, "stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "mm", "ts": 1, "dur": 1, "args": {"External id": 3, "Input Dims": [[2]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "ts": 1, "dur": 1,
         "args": {"correlation": 9, "wait_on_stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 2, "dur": 1},
    ]  # fmt: skip
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    kernel, op, wait, bare = load_kineto_trace(path).events
    assert type(kernel.args) is KinetoIdArgs and type(bare.args) is KinetoIdArgs
    assert (kernel.correlation, kernel.args.get("stream"), kernel.args.collective_name) == (7, 7, None)
    assert kernel.args.input_dims is NO_VALUE and bare.args == KinetoIdArgs()
    assert type(op.args) is KinetoInputArgs and bytes(op.args.input_dims) == b"[[2]]"  # inputs are kept
    assert type(wait.args) is KinetoInputArgs and wait.args.get("wait_on_stream") == 7


def test_a_category_kineto_does_not_write_is_read_as_a_string(tmp_path: Path):
    path = tmp_path / "device.0.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}] * 3
    path.write_text(json.dumps({"traceEvents": [*events, {**events[0], "cat": "npu_kernel"}]}))
    trace = load_kineto_trace(path)
    assert [e.cat for e in trace.events] == ["cpu_op"] * 3 + ["npu_kernel"]
    assert classify(trace).other == 1


def test_the_event_list_may_come_after_other_keys_or_hold_no_complete_event(tmp_path: Path):
    path = tmp_path / "device.0.json"
    path.write_text('{"deviceProperties": [{"id": 0}], "traceEvents": [{"ph": "i", "name": "x"}], "traceName": "t"}')
    trace = load_kineto_trace(path)
    assert (len(trace.events), trace.device_properties, trace.trace_name) == (1, [{"id": 0}], "t")


@pytest.mark.parametrize("flows", [True, False])
def test_a_complete_event_without_a_start_is_refused_with_its_index_among_all(tmp_path: Path, flows: bool):
    path = tmp_path / "device.0.json"
    events = [{"ph": "X", "name": "ok", "ts": 1, "dur": 0}, {"ph": "s", "name": "flow"}, {"ph": "X", "name": "bad"}]
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ChakraFormatError, match=r"trace event 2 \('bad'\) has no ts"):
        load_kineto_trace(path, flows=flows)


timed_events = st.lists(
    st.builds(
        KinetoEvent,
        ph=st.just("X"),
        ts=st.floats(0, 10).map(lambda x: round(x, 1)) | st.just(math.nan),
        dur=st.sampled_from([0.0, 1.0, 2.5]),
        name=st.sampled_from(["a", "b"]),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(timed_events)
def test_events_sort_by_start_then_longer_first_then_as_listed(events: list[KinetoEvent]):
    got = list(events)
    sort_by_start(got)
    expected = sorted(events, key=lambda e: (math.isnan(e.ts), 0 if math.isnan(e.ts) else e.ts, -e.dur))
    assert [id(e) for e in got] == [id(e) for e in expected]


def test_events_are_counted_by_category_and_phase():
    events = load_kineto_trace(require_shared("hta/alexnet_kineto.json.gz")).events
    assert count_kinds(events) == Counter((e.cat, e.ph) for e in events)


def test_values_are_shared_as_given_when_reading_one_changes_the_dict():
    """Reading an event's value may run Python code (a property): the value kept stays alive."""
    shared: dict[str, str] = {}

    class Event:
        def __init__(self, clears: bool):
            self.clears, self.stored = clears, None

        @property
        def tid(self) -> str:
            value = "thread-" + str(len(events))  # a new str at each read
            if self.clears:
                shared.clear()
            return value

        @tid.setter
        def tid(self, value: str) -> None:
            self.stored = value

    events = [Event(False), Event(True)]
    share_values(events, 0, "tid", shared)
    assert events[1].stored == "thread-2"


def test_args_are_made_slim_as_given_when_making_one_empties_the_list():
    """A slim type's constructor may run Python code: the event whose args it makes stays alive."""

    class Full:
        __slots__ = ("a", "b")

        def __init__(self, a: int):
            self.a, self.b = a, None

    class Event:
        __slots__ = ("args",)

        def __init__(self, args: Full):
            self.args = args

    events: list[Event] = []

    class Slim:
        __struct_fields__ = ("a",)

        def __init__(self, a: int | None = None):
            self.a = a
            if a is not None:
                events.clear()

    first = Event(Full(7))
    events += [first, Event(Full(8))]
    slim_args(events, 0, (Full,), Slim, {"b": None})
    assert type(first.args) is Slim and first.args.a == 7 and events == []
