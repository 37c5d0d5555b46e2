"""Replaying every rank together with their recorded durations: a receive waits for its send."""

from __future__ import annotations

from pathlib import Path

from helpers import make_node, write_et

from chakra.schedule.rank import schedule_table
from chakra.schedule.ranks import schedule_ranks
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE
from chakra.table import load_table


def _pair(tmp_path: Path, *, recv_tag: int = 0, recv_us: int = 0) -> dict[int, object]:
    """Rank 0 computes 10 µs then sends 5 µs to rank 1, which receives and computes 3 µs."""
    sender = [
        make_node(0, "work", COMP_NODE, duration_micros=10, start_time_micros=1, is_cpu_op=False, stream=0),
        make_node(1, "send", COMM_SEND_NODE, data_deps=[0], duration_micros=5, start_time_micros=11, is_cpu_op=False,
                  comm_src=0, comm_dst=1, comm_tag=0, comm_size=8),
    ]  # fmt: skip
    receiver = [
        make_node(1, "recv", COMM_RECV_NODE, duration_micros=recv_us, start_time_micros=11, is_cpu_op=False,
                  comm_src=0, comm_dst=1, comm_tag=recv_tag, comm_size=8),
        make_node(2, "use", COMP_NODE, data_deps=[1], duration_micros=3, start_time_micros=16, is_cpu_op=False,
                  stream=0),
    ]  # fmt: skip
    return {
        0: load_table(write_et(tmp_path / "job.0.et", sender)),
        1: load_table(write_et(tmp_path / "job.1.et", receiver)),
    }


def test_a_receive_waits_for_its_send_on_another_rank(tmp_path: Path):
    result = schedule_ranks(_pair(tmp_path))  # type: ignore[arg-type]
    assert result.start_us[1].tolist() == [15.0, 15.0] and result.predicted_span_us == 18.0  # arrival, then use
    assert (result.matched, result.unmatched) == (1, 0)


def test_the_recorded_span_is_measured_across_ranks_on_one_clock(tmp_path: Path):
    assert schedule_ranks(_pair(tmp_path)).measured_span_us == 18.0  # type: ignore[arg-type]


def test_a_receive_without_its_send_is_counted_and_takes_its_own_time(tmp_path: Path):
    result = schedule_ranks(_pair(tmp_path, recv_tag=9, recv_us=2))  # type: ignore[arg-type]
    assert (result.matched, result.unmatched) == (0, 2)
    assert result.start_us[1].tolist() == [0.0, 2.0]


def test_one_rank_replays_as_the_one_rank_replay(tmp_path: Path):
    tables = _pair(tmp_path)
    alone = schedule_ranks({0: tables[0]})  # type: ignore[dict-item]
    assert alone.predicted_span_us == schedule_table(tables[0]).predicted_span_us  # type: ignore[arg-type]
