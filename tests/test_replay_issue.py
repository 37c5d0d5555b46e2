"""One rank's replay loop (chakra.replay.issue, issue 18) without a job: compute on its recorded
tracks as timers, dependencies gating starts, nothing issued twice. These programs have no
communication, so no process group is needed; the spans checked are the schedule the loop planned
(deterministic), not wall-clock measurements."""

from __future__ import annotations

from pathlib import Path

from helpers import make_node, write_et

from chakra.replay.issue import ComputeMode, Issuer
from chakra.replay.program import issue_program
from chakra.schema.protobuf.et_def_pb2 import METADATA_NODE
from chakra.table import load_table

MS_US = 1000
NS_PER_US = 1000


def _spans_us(tmp_path: Path, nodes: list, scale: float = 1.0) -> dict[int, tuple[float, float]]:
    """Node id -> (start, end) µs of one replayed iteration in ``duration`` mode."""
    program = issue_program(load_table(write_et(tmp_path / "rank.0.et", nodes), 0))
    issuer = Issuer(program, 0, {}, {}, ComputeMode.DURATION, compute_scale=scale)
    times = issuer.run(record=True)
    assert times.wall_ns >= max(end for _, _, end in times.spans)
    return {int(program.ids[step]): (start / NS_PER_US, end / NS_PER_US) for step, start, end in times.spans}


def kernel(id: int, stream: int, deps: tuple[int, ...] = ()) -> object:
    return make_node(id, data_deps=deps, duration_micros=MS_US, is_cpu_op=False, stream=stream)


def test_kernels_on_two_streams_run_side_by_side(tmp_path: Path):
    spans = _spans_us(tmp_path, [kernel(0, stream=7), kernel(1, stream=8)])
    assert spans == {0: (0, MS_US), 1: (0, MS_US)}


def test_kernels_on_one_stream_run_one_after_the_other_without_deps(tmp_path: Path):
    spans = _spans_us(tmp_path, [kernel(0, stream=7), kernel(1, stream=7)])
    assert spans == {0: (0, MS_US), 1: (MS_US, 2 * MS_US)}


def test_a_node_starts_when_its_last_parent_ends_on_another_stream(tmp_path: Path):
    nodes = [kernel(0, stream=7), kernel(1, stream=7), kernel(2, stream=8, deps=(1,))]
    assert _spans_us(tmp_path, nodes)[2] == (2 * MS_US, 3 * MS_US)


def test_a_host_op_and_the_kernel_it_launches_overlap_with_what_follows(tmp_path: Path):
    host = make_node(0, duration_micros=10, is_cpu_op=True, tid=1)
    launched = make_node(1, data_deps=[0], duration_micros=MS_US, is_cpu_op=False, stream=7)
    after = make_node(2, data_deps=[0], duration_micros=10, is_cpu_op=True, tid=1)
    spans = _spans_us(tmp_path, [host, launched, after])
    assert spans == {0: (0, 10), 1: (10, 10 + MS_US), 2: (10, 20)}


def test_nodes_without_thread_or_stream_share_their_slots_track(tmp_path: Path):
    # a generated workload records no streams: its device compute runs one node at a time (ASTRA-sim's GPU slot)
    nodes = [make_node(i, duration_micros=MS_US, is_cpu_op=False) for i in range(2)]
    assert _spans_us(tmp_path, nodes) == {0: (0, MS_US), 1: (MS_US, 2 * MS_US)}


def test_a_node_that_does_nothing_passes_its_parents_end_on(tmp_path: Path):
    nodes = [kernel(0, stream=7), make_node(1, type=METADATA_NODE, data_deps=[0]), kernel(2, stream=8, deps=(1,))]
    assert _spans_us(tmp_path, nodes)[2] == (MS_US, 2 * MS_US)


def test_compute_scale_stretches_every_duration(tmp_path: Path):
    assert _spans_us(tmp_path, [kernel(0, stream=7)], scale=0.5) == {0: (0, MS_US / 2)}
