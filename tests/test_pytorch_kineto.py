"""chakra.pytorch.kineto: device traces read and sorted by role."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import require_shared

from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.pytorch.kineto import classify, load_kineto_trace


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
