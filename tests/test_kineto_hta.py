"""A profiler trace converted alone keeps its GPU time split: idle, compute, communication and
memory, and the overlap of communication by compute, equal HolisticTraceAnalysis's
``get_temporal_breakdown`` and ``get_comm_comp_overlap`` on the same trace and step, within 1 % of
the span."""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path

import pytest
from helpers import require_shared

from chakra.analyze.breakdown import breakdown
from chakra.analyze.choices import Scope
from chakra.kineto.window import ALL_STEPS
from chakra.kineto.workload import convert_kineto_workload
from chakra.table import load_table

hta_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is in the dev extra")

#: The shared GPU traces HTA analyses: the step we convert, and the iteration of HTA's frame
#: compared (``None``: as HTA reads the trace). HTA drops the device work of a trace's last step
#: when it has several, so a step before it; it reads the whole trace when it has at most one.
#: AMD's kernels run on stream 0, which HTA gives no iteration: its frame is taken as read
#: (every step but the last, the first step of this trace).
GPU_TRACES = {
    "hta/alexnet_kineto.json.gz": (ALL_STEPS, None),
    "hta/amd_mi250_rocm62_kineto.json.gz": (1, None),
    "hta/cuda_event_sync_kineto.json.gz": (ALL_STEPS, None),
    "hta/cuda_event_sync_multi_stream_kineto.json.gz": (ALL_STEPS, None),
    "hta/nccl_2rank_rank0_kineto.json.gz": (4, 4),
    "hta/sampled_128rank_rank0_kineto.json.gz": (551, 551),
    "hta/sampled_128rank_rank1_kineto.json.gz": (551, 551),
    "hta/triton_kineto.json.gz": (ALL_STEPS, None),
    "hta/benchmark_simple_add_trace.json.gz": (ALL_STEPS, None),
}
#: Rows of HTA's frame that carry a stream without being device work, which its breakdown then
#: counts as GPU time: ``cuda_sync`` events (a host's wait, drawn on the stream it waited for) and
#: Triton's launcher ``cpu_op`` (its ``stream`` argument). They are left out of HTA's input here;
#: everything else is HTA's own computation.
NOT_DEVICE_WORK = ("cuda_sync", "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
#: Agreement asked of every quantity, as a share of the span ...
SPAN_SHARE = 0.01
#: ... and at least the resolution both keep: whole µs (HTA reads times as integer µs, the format
#: writes them so), for spans of a few µs.
RESOLUTION_US = 1.0


def _hta(trace: Path, folder: Path, step: int | None) -> dict[str, float]:
    """HTA's split of ``trace``'s device work (µs) and its overlap ratio, over iteration ``step``
    when given."""
    folder.mkdir()
    shutil.copy(trace, folder / trace.name)
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analysis = hta_analysis.TraceAnalysis(trace_dir=str(folder))
            symbols = analysis.t.symbol_table.get_sym_id_map()
            not_device = [symbols[cat] for cat in NOT_DEVICE_WORK if cat in symbols]
            for rank, frame in analysis.t.traces.items():
                keep = ~frame["cat"].isin(not_device)
                if step is not None:
                    keep &= frame["iteration"] == step
                analysis.t.traces[rank] = frame[keep]
            split = analysis.get_temporal_breakdown(visualize=False).iloc[0]
            overlap = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
    finally:
        logging.disable(logging.NOTSET)
    return {
        "span": float(split["kernel_time(us)"]),
        "idle": float(split["idle_time(us)"]),
        "compute": float(split["compute_time(us)"]),
        "non_compute": float(split["non_compute_time(us)"]),
        "overlap_pctg": float(overlap["comp_comm_overlap_pctg"]),
    }


@pytest.mark.parametrize("relpath", sorted(GPU_TRACES))
def test_the_gpu_time_split_equals_htas(relpath: str, tmp_path: Path):
    trace = require_shared(relpath)
    step, iteration = GPU_TRACES[relpath]
    theirs = _hta(trace, tmp_path / "hta", iteration)
    result = convert_kineto_workload([trace], tmp_path / "w", step=step, workers=1)
    (path,) = result.written.paths.values()
    ours = breakdown(load_table(path), timing="recorded", scope=Scope.DEVICE)
    span_us = ours.span_ns / 1000
    bound_us = max(SPAN_SHARE * theirs["span"], RESOLUTION_US)
    assert abs(span_us - theirs["span"]) <= bound_us
    assert abs(ours.idle_ns / 1000 - theirs["idle"]) <= bound_us
    assert abs(ours.compute_ns / 1000 - theirs["compute"]) <= bound_us
    non_compute_us = (ours.span_ns - ours.idle_ns - ours.compute_ns) / 1000
    assert abs(non_compute_us - theirs["non_compute"]) <= bound_us
    if ours.communication_ns:
        ratio = 100 * ours.comm_overlapped_ns / ours.communication_ns
        # HTA rounds its percentage to two places: the overlap in µs within 1 % of the span
        overlap_gap_us = abs(ratio - theirs["overlap_pctg"]) / 100 * ours.communication_ns / 1000
        assert overlap_gap_us <= bound_us + 0.005 * ours.communication_ns / 1000
