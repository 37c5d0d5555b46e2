"""`chakra convert kineto`: PyTorch profiler traces alone, converted, counted against the traces' own
events, checked by replay, validated, and taken by ASTRA-sim."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from helpers import ASTRA_SIM_STOCK, GLOO_RANKS, kineto_kernel, kineto_launch, require_shared, run_astra_sim, run_cli

from chakra.kineto.inputs import job_traces
from chakra.kineto.view import profiler_view
from chakra.kineto.window import ALL_STEPS, WHOLE_TRACE, choose_window
from chakra.kineto.workload import KINETO_FIDELITY_TOLERANCE, convert_kineto_workload
from chakra.pytorch.convert import convert
from chakra.pytorch.kineto import classify, load_kineto_trace
from chakra.pytorch.syncs import HOST_DEVICE, HOST_STREAM, STREAM_EVENT
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, ALL_TO_ALL, BROADCAST, COMM_COLL_NODE
from chakra.table import MISSING, load_table

ASTRA_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
ASTRA_SYSTEM, ASTRA_NETWORK = ASTRA_EXAMPLES / "system.json", ASTRA_EXAMPLES / "ring2.yml"

#: Every Kineto trace of the shared data, with whether it ran on a GPU.
SHARED_TRACES = {
    "hta/alexnet_kineto.json.gz": True,
    "hta/amd_mi250_rocm62_kineto.json.gz": True,
    "hta/cpu_only_no_distinfo_kineto.json.gz": False,
    "hta/cuda_event_sync_kineto.json.gz": True,
    "hta/cuda_event_sync_multi_stream_kineto.json.gz": True,
    "hta/cupti_counters_kineto.json.gz": True,
    "hta/nccl_2rank_rank0_kineto.json.gz": True,
    "hta/sampled_128rank_rank0_kineto.json.gz": True,
    "hta/sampled_128rank_rank1_kineto.json.gz": True,
    "hta/triton_kineto.json.gz": True,
    "hta/benchmark_simple_add_trace.json.gz": True,
    "param/linear_kineto.json.gz": True,
}


def _raw_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def _whole(relpath: str):
    trace = load_kineto_trace(require_shared(relpath))
    linked = profiler_view(trace, WHOLE_TRACE)
    return trace, linked, convert(linked.host, linked=linked)


@pytest.mark.parametrize("relpath", sorted(SHARED_TRACES))
def test_every_shared_trace_converts_whole_with_each_device_event_a_node(relpath: str, tmp_path: Path):
    events = _raw_events(require_shared(relpath))
    device = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_profiler_range") for e in events)
    result = convert_kineto_workload([require_shared(relpath)], tmp_path / "w", step=ALL_STEPS, workers=1)
    ((rank, report),) = result.conversion.reports.items()
    device_nodes = sum(report.nodes[k] for k in ("kernel", "memcpy", "memset", "collective", "send", "recv"))
    host_comm = sum(report.comm.values()) if not SHARED_TRACES[relpath] else 0
    assert device_nodes - host_comm == device
    assert report.mode == "kineto-only"
    done = run_cli("validate", str(result.written.paths[rank]))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("relpath", sorted(SHARED_TRACES))
def test_every_shared_trace_replays_within_the_bound_of_its_measured_step(relpath: str, tmp_path: Path):
    result = convert_kineto_workload([require_shared(relpath)], tmp_path / "w", check=True, workers=1)
    (fidelity,) = result.fidelity.results.values()
    assert fidelity.error is not None and abs(fidelity.error) <= KINETO_FIDELITY_TOLERANCE, (relpath, fidelity)


@pytest.mark.parametrize("relpath", sorted(SHARED_TRACES))
def test_each_device_stream_of_a_trace_is_one_track(relpath: str):
    events = _raw_events(require_shared(relpath))
    recorded = {
        (e["pid"], e.get("args", {}).get("stream", e["tid"]))
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_profiler_range")
    }
    _, _, conversion = _whole(relpath)
    from chakra.table import table_from_nodes

    table = table_from_nodes(conversion.nodes)
    device = ~table.is_cpu & (table.stream != MISSING)
    assert len(set(table.stream[device].tolist())) == len({stream for _, stream in recorded})


def test_nccl_collectives_are_typed_sized_and_grouped_from_record_param_comms(tmp_path: Path):
    path = require_shared("hta/nccl_2rank_rank0_kineto.json.gz")
    kernels = [e for e in _raw_events(path) if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
    result = convert_kineto_workload([path], tmp_path / "w", step=ALL_STEPS, workers=1)
    table = load_table(result.written.paths[0])
    comm = table.comm
    assert len(comm) == len(kernels)
    kinds = {ALL_REDUCE: "allreduce", BROADCAST: "broadcast"}
    recorded = sorted(
        (e["args"]["Collective name"], e["args"]["In msg nelems"] * (4 if e["args"]["dtype"] == "Float" else 8))
        for e in kernels
    )
    converted = sorted((kinds[int(k)], int(size)) for k, size in zip(comm.kind, comm.size, strict=True))
    assert converted == recorded
    assert set(comm.pg_name) == {"0"}
    assert result.conversion.group_methods == {"recorded in the trace": len(kernels)}


def test_all_to_all_run_as_sendrecv_kernels_is_one_all_to_all_sized_from_its_annotation():
    trace, _linked, conversion = _whole("hta/sampled_128rank_rank0_kineto.json.gz")
    annotations = [e for e in trace.events if e.name == "nccl:all_to_all"]
    nodes = [n for n in conversion.nodes if n.type == COMM_COLL_NODE]
    all_to_all = [n for n in nodes if any(a.name == "comm_type" and a.int64_val == ALL_TO_ALL for a in n.attr)]
    assert len(all_to_all) == len(annotations) and all(n.name.startswith("ncclKernel_SendRecv") for n in all_to_all)
    sizes = sorted(next(a.int64_val for a in n.attr if a.name == "comm_size") for n in all_to_all)
    bytes_of = {"long": 8, "unsigned char": 1, "int": 4}
    expected = []
    for annotation in annotations:
        dims = json.loads(bytes(annotation.args.input_dims))[0]
        count = 1
        for d in dims:
            count *= d
        expected.append(count * bytes_of[json.loads(bytes(annotation.args.input_type))[0]])
    assert sizes == sorted(expected)


def test_a_call_run_as_two_nccl_kernels_is_one_collective_on_the_earlier_kernel(tmp_path: Path):
    comm_args = {"Collective name": "allreduce", "In msg nelems": 256, "Out msg nelems": 256, "dtype": "Float"}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 0, "tid": 1, "ts": 0, "dur": 20,
         "args": comm_args},
        kineto_launch(2, correlation=1), kineto_launch(6, correlation=2),
        # the later launch's kernel runs first: the collective is the kernel that ran first
        kineto_kernel(30, correlation=1, name="ncclKernel_AllReduce_RING_LL_Sum_float_b"),
        kineto_kernel(10, correlation=2, stream=8, name="ncclKernel_AllReduce_RING_LL_Sum_float_a"),
    ]  # fmt: skip
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    linked = profiler_view(load_kineto_trace(path), WHOLE_TRACE)
    conversion = convert(linked.host, linked=linked)
    (collective,) = [n for n in conversion.nodes if n.type == COMM_COLL_NODE]
    assert collective.name == "ncclKernel_AllReduce_RING_LL_Sum_float_a"
    assert conversion.report.comm_notes["extra kernel of one call kept as device compute"] == 1
    assert [n.name for n in conversion.nodes if n.name.endswith("_b")] == ["ncclKernel_AllReduce_RING_LL_Sum_float_b"]


def test_a_conversion_that_releases_the_timing_writes_the_same_nodes():
    trace = load_kineto_trace(require_shared("hta/cuda_event_sync_multi_stream_kineto.json.gz"))
    kept, released = profiler_view(trace, WHOLE_TRACE), profiler_view(trace, WHOLE_TRACE)
    assert convert(released.host, linked=released, release_timing=True).payloads == (
        convert(kept.host, linked=kept).payloads
    )
    assert kept.timing and released.timing == {}


def test_what_the_view_keeps_of_the_events_is_copies_equal_to_them():
    """The conversion lets the events go after the view: the args of its activities and the sync calls and
    event records it keeps are its own copies, so that none of the events stays in memory."""
    trace = load_kineto_trace(require_shared("hta/cuda_event_sync_multi_stream_kineto.json.gz"))
    linked = profiler_view(trace, WHOLE_TRACE)
    assert linked.events is not None
    kept = [(linked.sync_calls, linked.events.sync_calls), (linked.event_records, linked.events.event_records)]
    for copies, events in kept:
        assert copies and copies == events
        assert not any(copy is event or copy.args is event.args for copy, event in zip(copies, events, strict=True))
    device_args = {id(event.args) for event in linked.events.device_ops + linked.events.syncs}
    assert linked.activities and not any(id(activity.args) in device_args for activity in linked.activities)


def test_stream_waits_come_from_cuda_sync_events_with_the_records_correlation():
    _trace, _linked, conversion = _whole("hta/cuda_event_sync_multi_stream_kineto.json.gz")
    assert conversion.report.sync_deps[STREAM_EVENT] == 1
    assert conversion.report.sync_deps[HOST_DEVICE] == 1
    nodes = conversion.nodes
    by_id = {n.id: n for n in nodes}
    waiting = [
        n
        for n in nodes
        if n.name == "Memset (Device)" and any(a.name == "stream" and a.int64_val == 24 for a in n.attr)
    ]
    assert len(waiting) == 1
    awaited = [
        by_id[d] for d in waiting[0].data_deps if any(a.name == "stream" and a.int64_val == 20 for a in by_id[d].attr)
    ]
    assert awaited and awaited[0].name == "ampere_sgemm_128x64_nn"


def test_host_waits_for_a_stream_sync_resume_after_the_awaited_copy():
    _trace, _linked, conversion = _whole("hta/cuda_event_sync_kineto.json.gz")
    assert conversion.report.sync_deps[HOST_STREAM] == 1
    assert conversion.report.waits >= 2


def test_the_default_step_is_the_complete_one_of_median_span():
    trace = load_kineto_trace(require_shared("hta/nccl_2rank_rank0_kineto.json.gz"))
    window = choose_window(trace, classify(trace))
    assert window.label == "ProfilerStep#4"
    assert any("3 profiled steps" in note for note in window.notes)


def test_a_step_whose_launched_kernels_are_missing_is_not_the_default(tmp_path: Path):
    """As when the profiler stopped before the device ran a step's work."""
    source = require_shared("hta/nccl_2rank_rank0_kineto.json.gz")
    with gzip.open(source, "rt") as handle:
        document = json.load(handle)
    step = next(e for e in document["traceEvents"] if e.get("name") == "ProfilerStep#4")
    launched = {
        e["args"]["correlation"]
        for e in document["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "Launch" in e["name"] and step["ts"] <= e["ts"] < step["ts"] + step["dur"]
    }
    document["traceEvents"] = [
        e for e in document["traceEvents"] if not (e.get("cat") == "kernel" and e["args"]["correlation"] in launched)
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(document))
    trace = load_kineto_trace(path)
    assert launched
    assert choose_window(trace, classify(trace)).label != "ProfilerStep#4"
    only = choose_window(trace, classify(trace), step=4)
    assert only.label == "ProfilerStep#4"


def test_device_work_launched_before_a_step_that_ran_in_it_is_kept_and_counted(tmp_path: Path):
    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 1, "ts": ts, "dur": dur, "args": args}

    events = [
        x("user_annotation", "ProfilerStep#1", 0, 100),
        x("user_annotation", "ProfilerStep#2", 100, 100),
        x("cpu_op", "aten::mm", 10, 20, **{"External id": 1}),
        x("cuda_runtime", "cudaLaunchKernel", 15, 5, correlation=7),
        x("cuda_runtime", "cudaLaunchKernel", 16, 2, correlation=8),
        x("cpu_op", "aten::add", 120, 20, **{"External id": 2}),
        x("cuda_runtime", "cudaLaunchKernel", 125, 5, correlation=9),
        x("kernel", "gemm", 90, 50, correlation=7, stream=7, device=0),  # from step 1, into step 2
        x("kernel", "small", 40, 5, correlation=8, stream=7, device=0),  # step 1's alone
        x("kernel", "add", 140, 10, correlation=9, stream=7, device=0),
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_kineto_trace(path)
    window = choose_window(trace, classify(trace), step=2)
    linked = profiler_view(trace, window)
    assert linked.events is not None
    assert [e.name for e in linked.events.device_ops] == ["gemm", "add"]
    assert linked.events.earlier_work == 1
    assert any("1 device activities launched before ProfilerStep#2 ran in it" in n for n in linked.host.notes)


def test_operators_become_nodes_numbered_by_start_with_their_threads_ids_and_inputs(tmp_path: Path):
    def op(name: str, ts: float, dur: float, tid: int, cat: str = "cpu_op", **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [
        op("aten::add", 20, 5, 9, **{"Record function id": 5, "Sequence number": 3, "Fwd thread id": 1}),
        op("aten::mm", 0, 10, 4, **{"Record function id": True, "Sequence number": "7", "Input Dims": [[2, 3]]}),
        op("step", 2, 50, 4, cat="user_annotation"),
        op("aten::relu", 3, 1, 4, **{"Input type": ["float"]}),
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    linked = profiler_view(load_kineto_trace(path), WHOLE_TRACE)
    nodes = linked.host.nodes
    assert [(n.id, n.name, n.parent, n.tid) for n in nodes] == [
        (1, "aten::mm", 0, 1), (2, "step", 1, 1), (3, "aten::relu", 2, 1), (4, "aten::add", 0, 2),
    ]  # fmt: skip
    # ids that are not ints (a bool, a string) are read as absent
    assert [(n.rf_id, n.seq_id, n.fw_tid, n.scope) for n in nodes] == [(0, -1, 0, 0), (0, -1, 0, 7), (0, -1, 0, 0),
                                                                        (5, 3, 1, 0)]  # fmt: skip
    assert [bytes(n.inputs.raw_shapes) for n in nodes] == [b"[[2, 3]]", b"[]", b"[]", b"[]"]
    assert [bytes(n.inputs.raw_types) for n in nodes] == [b"[]", b"[]", b'["float"]', b"[]"]
    assert [(t.ts_us, t.dur_us, t.exclusive_us, t.thread) for t in linked.timing.values()] == [
        (0.0, 10.0, 2.0, 4), (2.0, 50.0, 49.0, 4), (3.0, 1.0, 1.0, 4), (20.0, 5.0, 5.0, 9),
    ]  # fmt: skip


def test_the_nodes_of_a_thread_share_its_tid_and_a_child_its_parents_id(tmp_path: Path):
    """A whole trace holds a few hundred thousand operators: one object per thread and per id, not per event."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 0, "tid": 123456, "ts": ts, "dur": dur, "args": {}}
        for name, ts, dur in [("outer", 0, 10), ("inner", 1, 5), ("next", 20, 5)]
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    linked = profiler_view(load_kineto_trace(path), WHOLE_TRACE)
    outer, inner, _next = linked.host.nodes
    assert inner.parent == outer.id and inner.parent is outer.id
    first, *others = linked.timing.values()
    assert first.thread == 123456 and all(timing.thread is first.thread for timing in others)


def test_a_step_the_trace_lacks_is_one_line_naming_its_steps(tmp_path: Path):
    done = run_cli(
        "convert", "kineto", str(require_shared("hta/nccl_2rank_rank0_kineto.json.gz")), "-o", str(tmp_path / "w"),
        "--step", "99",
    )  # fmt: skip
    assert done.returncode == 2
    assert "ProfilerStep#99" in done.stderr and "4, 5, 6" in done.stderr and "Traceback" not in done.stderr


def test_a_recorded_gloo_job_converts_from_its_profiler_traces_alone_within_the_fidelity_bound(
    gloo_traces: Path, tmp_path: Path
):
    traces = tmp_path / "traces"
    traces.mkdir()
    for rank in (0, 1):
        shutil.copy(gloo_traces / f"device.{rank}.json", traces / f"device.{rank}.json")
    result = convert_kineto_workload([traces], tmp_path / "job", check=True, workers=1)
    assert sorted(result.written.paths) == [0, 1]
    for rank, fidelity in result.fidelity.results.items():
        assert fidelity.error is not None and abs(fidelity.error) <= KINETO_FIDELITY_TOLERANCE, (rank, fidelity)
    report = result.conversion.reports[0]
    assert report.comm["send"] == 1 and report.comm["recv"] == 1 and report.comm["ALL_REDUCE"] >= 1
    table = load_table(result.written.paths[0])
    sends = [i for i, n in enumerate(table.names) if n == "gloo:send"]
    assert sends and table.comm.dst[table.comm.index(sends[0])] == 1


def test_the_kineto_conversion_of_a_gloo_job_runs_to_the_end_in_astra_sim(gloo_traces: Path, tmp_path: Path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for rank in range(GLOO_RANKS):
        shutil.copy(gloo_traces / f"device.{rank}.json", traces / f"device.{rank}.json")
    prefix = tmp_path / "job"
    done = run_cli("convert", "kineto", str(traces), "-o", str(prefix), "--target", "astra-sim")
    assert done.returncode == 0, done.stderr
    code, finished = run_astra_sim(prefix, ASTRA_NETWORK, ASTRA_SYSTEM, ASTRA_SIM_STOCK)
    assert code == 0 and sorted(finished) == list(range(GLOO_RANKS))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "dur": 1}]}', "has no ts"),
        ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, ', "not a Kineto trace"),
        ('{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1, "name": "x"}]}', "host execution trace"),
    ],
)
def test_bad_traces_are_one_line_naming_the_file(content: str, expected: str, tmp_path: Path):
    bad = tmp_path / "rank0.json"
    bad.write_text(content)
    done = run_cli("convert", "kineto", str(bad), "-o", str(tmp_path / "w"))
    assert done.returncode == 2
    assert expected in done.stderr and "rank0.json" in done.stderr and "Traceback" not in done.stderr


def test_a_chakra_et_given_as_a_profiler_trace_is_refused(tmp_path: Path, upstream_et: Path):
    done = run_cli("convert", "kineto", str(upstream_et), "-o", str(tmp_path / "w"))
    assert done.returncode == 2 and "not a Kineto trace" in done.stderr and "Traceback" not in done.stderr


def _trace_of(rank: int, world: int) -> str:
    info = {"backend": "nccl", "rank": rank, "world_size": world}
    return json.dumps(
        {"distributedInfo": info, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}
    )


def test_ranks_that_disagree_on_the_world_size_are_two_jobs(tmp_path: Path):
    (tmp_path / "a.json").write_text(_trace_of(0, 2))
    (tmp_path / "b.json").write_text(_trace_of(1, 4))
    done = run_cli("convert", "kineto", str(tmp_path), "-o", str(tmp_path / "out" / "w"))
    assert done.returncode == 2 and "disagree on the world size" in done.stderr


def test_two_traces_of_one_rank_in_a_folder_are_refused(tmp_path: Path):
    (tmp_path / "a.json").write_text(_trace_of(0, 2))
    (tmp_path / "b.json").write_text(_trace_of(0, 2))
    done = run_cli("convert", "kineto", str(tmp_path), "-o", str(tmp_path / "out" / "w"))
    assert done.returncode == 2 and "two traces of rank 0" in done.stderr


def test_the_rank_comes_from_distributed_info_then_the_file_name(tmp_path: Path):
    (tmp_path / "x_rank3.json").write_text(_trace_of(1, 2))
    (tmp_path / "worker_rank0.json").write_text('{"traceEvents": []}')
    traces = job_traces([tmp_path]).ranks
    assert {r: t.rank_from for r, t in traces.items()} == {0: "the file name", 1: "distributedInfo"}


def test_host_traces_in_a_folder_are_set_aside_and_said(gloo_traces: Path, tmp_path: Path):
    result = convert_kineto_workload([gloo_traces], tmp_path / "job", workers=1)
    assert sorted(result.written.paths) == [0, 1]
    assert any("2 host execution traces" in note for note in result.conversion.reports[0].notes)


def test_a_host_trace_named_as_a_profiler_trace_is_refused(gloo_traces: Path, tmp_path: Path):
    done = run_cli("convert", "kineto", str(gloo_traces / "host.0.json"), "-o", str(tmp_path / "w"))
    assert done.returncode == 2 and "host execution trace" in done.stderr and "Traceback" not in done.stderr


def test_two_ranks_of_a_128_rank_job_convert_together_with_their_recorded_ranks(tmp_path: Path):
    traces = [require_shared(f"hta/sampled_128rank_rank{rank}_kineto.json.gz") for rank in (1, 0)]
    result = convert_kineto_workload(traces, tmp_path / "w", workers=1)
    assert sorted(result.written.paths) == [0, 1]
    assert {r.window for r in result.conversion.reports.values()} == {"ProfilerStep#551"}
    kinds = [sorted(load_table(result.written.paths[rank]).comm.kind.tolist()) for rank in (0, 1)]
    assert kinds[0] == kinds[1] and len(kinds[0]) == 5


def test_a_gpu_trace_gets_the_same_gpu_semantics_with_or_without_its_host_trace(tmp_path: Path):
    from chakra.pytorch.convert import load_pair

    host, linked = load_pair(
        require_shared("hta/benchmark_simple_add_et.json.gz"), require_shared("hta/benchmark_simple_add_trace.json.gz")
    )
    with_host = convert(host, linked=linked).report
    _, _, alone = _whole("hta/benchmark_simple_add_trace.json.gz")
    assert with_host.mode == "linked" and alone.report.mode == "kineto-only"
    assert with_host.sync_deps == alone.report.sync_deps and with_host.sync_deps[HOST_DEVICE] > 0
    for kind in ("kernel", "memcpy", "memset"):
        assert with_host.nodes[kind] == alone.report.nodes[kind]


def test_the_command_converts_a_named_step_and_reports_every_event_as_json(tmp_path: Path):
    trace = require_shared("hta/nccl_2rank_rank0_kineto.json.gz")
    done = run_cli("convert", "kineto", str(trace), "-o", str(tmp_path / "w"), "--step", "5", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["reports"]["0"]
    assert report["window"] == "ProfilerStep#5" and report["mode"] == "kineto-only"
    kernels = report["events"]["kernel"]
    assert sum(kernels.values()) == sum(e.get("cat") == "kernel" for e in _raw_events(trace))
    assert kernels["converted"] > 0 and kernels["dropped: outside ProfilerStep#5"] > 0
    assert set(report["events"]["ac2g flow"]) == {"folded: repeats a correlation or sequence number"}


def test_a_step_that_is_no_number_is_one_line(tmp_path: Path):
    trace = require_shared("hta/nccl_2rank_rank0_kineto.json.gz")
    done = run_cli("convert", "kineto", str(trace), "-o", str(tmp_path / "w"), "--step", "last")
    assert done.returncode == 2 and "--step 'last'" in done.stderr and "Traceback" not in done.stderr


def test_a_glob_names_the_traces_of_a_job(gloo_traces: Path, tmp_path: Path):
    done = run_cli("convert", "kineto", str(gloo_traces / "device.*.json"), "-o", str(tmp_path / "job"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "job.0.et").exists() and (tmp_path / "job.1.et").exists()
