"""chakra.pytorch.link: host ops get their timing, device work finds its launcher, mismatches are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import GLOO_RANKS, require_shared

from chakra.errors import ChakraInputError
from chakra.pytorch.host import load_host_trace
from chakra.pytorch.kineto import load_kineto_trace
from chakra.pytorch.link import link


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
    host = tmp_path / "host.0.json"
    host.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": host_nodes}))
    device = tmp_path / "device.0.json"
    device.write_text(json.dumps({"traceEvents": events}))
    return load_host_trace(host), load_kineto_trace(device)


def _host(node_id: int, name: str, rf_id: int, parent: int = 1) -> dict:
    return {"id": node_id, "name": name, "ctrl_deps": parent, "attrs": [{"name": "rf_id", "value": rf_id}]}


def _op(name: str, rf_id: int, ts: float, dur: float, tid: int = 1) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"Record function id": rf_id},
    }


def test_exclusive_time_subtracts_direct_children_only(tmp_path: Path):
    host, device = _write(
        tmp_path,
        [_host(2, "outer", 1), _host(3, "child", 2, 2), _host(4, "grandchild", 3, 3), _host(5, "child2", 4, 2)],
        [_op("outer", 1, 0, 100), _op("child", 2, 10, 30), _op("grandchild", 3, 15, 5), _op("child2", 4, 50, 20)],
    )
    timing = link(host, device).timing
    assert (timing[2].exclusive_us, timing[3].exclusive_us, timing[4].exclusive_us) == (50, 25, 5)


def _kernel(ts: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": 5,
            "args": {"correlation": correlation, "stream": 7}}  # fmt: skip


def _launch(ts: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": ts, "dur": 2,
            "args": {"correlation": correlation}}  # fmt: skip


def test_device_work_without_its_runtime_call_is_reported_unattached(tmp_path: Path):
    host, device = _write(tmp_path, [_host(2, "op", 1)], [_op("op", 1, 0, 100), _kernel(20, 99)])
    report = link(host, device).report
    assert report.device_unattached == {"no runtime call with its correlation id": 1}


def test_launch_inside_a_host_op_attaches_its_kernel_to_that_op(tmp_path: Path):
    host, device = _write(tmp_path, [_host(2, "op", 1)], [_op("op", 1, 0, 100), _launch(50, 5), _kernel(60, 5)])
    (activity,) = link(host, device).activities
    assert activity.host_id == 2


def test_launch_outside_every_host_op_is_reported(tmp_path: Path):
    host, device = _write(tmp_path, [_host(2, "op", 1)], [_op("op", 1, 0, 100), _launch(500, 5), _kernel(510, 5)])
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
