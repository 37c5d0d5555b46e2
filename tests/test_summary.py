"""chakra.analyze.summary: what `chakra info` counts."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import make_metadata, make_node, write_et

from chakra.analyze.summary import summarize_file
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, Node


def test_counts_node_types_collectives_and_point_to_point(tmp_path: Path):
    nodes = [
        make_node(0, "ar", COMM_COLL_NODE, is_cpu_op=False, comm_type=0, comm_size=100),
        make_node(1, "ag", COMM_COLL_NODE, is_cpu_op=False, comm_type=2, comm_size=10),
        make_node(2, "send", COMM_SEND_NODE, is_cpu_op=False, comm_size=7, comm_dst=1),
        make_node(3, "recv", COMM_RECV_NODE, is_cpu_op=False, comm_size=7, comm_src=1),
    ]
    s = summarize_file(write_et(tmp_path / "w.0.et", nodes))
    assert s.by_type == {"COMM_COLL_NODE": 2, "COMM_SEND_NODE": 1, "COMM_RECV_NODE": 1}
    assert s.collectives == {"ALL_REDUCE": {"count": 1, "bytes": 100}, "ALL_GATHER": {"count": 1, "bytes": 10}}
    assert s.p2p == {"send": {"count": 1, "bytes": 7}, "recv": {"count": 1, "bytes": 7}}
    assert s.comm_size_total == 117  # receives are not counted again


def test_splits_durations_into_cpu_and_device(tmp_path: Path):
    nodes = [
        make_node(0, "host", COMP_NODE, duration_micros=5, is_cpu_op=True),
        make_node(1, "kernel", COMP_NODE, duration_micros=20, is_cpu_op=False),
    ]
    s = summarize_file(write_et(tmp_path / "w.0.et", nodes))
    assert (s.total_dur_us, s.cpu_dur_us, s.device_dur_us) == (25, 5, 20)


def test_is_cpu_op_in_a_string_member_does_not_count_as_cpu(tmp_path: Path):
    node = Node(id=0, name="k", type=COMP_NODE, duration_micros=7)
    node.attr.add(name="is_cpu_op", string_val="false")
    s = summarize_file(write_et(tmp_path / "w.0.et", [node]))
    assert (s.cpu_dur_us, s.device_dur_us) == (0, 7)


def test_span_runs_from_first_start_to_last_end(tmp_path: Path):
    nodes = [
        make_node(0, "a", COMP_NODE, start_time_micros=1000, duration_micros=10),
        make_node(1, "b", COMP_NODE, start_time_micros=1005, duration_micros=50),
    ]
    assert summarize_file(write_et(tmp_path / "w.0.et", nodes)).span_us == 55


def test_span_is_unknown_without_start_times(tmp_path: Path):
    assert summarize_file(write_et(tmp_path / "w.0.et", [make_node(0, "a")])).span_us is None


def test_float_comm_size_is_not_counted_and_does_not_crash(tmp_path: Path):
    node = Node(id=0, name="ar", type=COMM_COLL_NODE)
    node.attr.add(name="comm_type", int64_val=0)
    node.attr.add(name="comm_size", double_val=float("inf"))
    s = summarize_file(write_et(tmp_path / "w.0.et", [node]))
    assert s.collectives == {"ALL_REDUCE": {"count": 1, "bytes": 0}}


def test_attribute_coverage_lists_the_members_used(tmp_path: Path):
    node = make_node(0, "ar", COMM_COLL_NODE, comm_type=0)
    node.attr.add(name="comm_size", uint64_val=8)
    s = summarize_file(write_et(tmp_path / "w.0.et", [node, make_node(1, "c")]))
    coverage = s.to_dict()["attribute_coverage"]
    assert coverage["comm_size"] == {"nodes": 1, "fraction": 0.5, "members": {"uint64_val": 1}}


def test_metadata_of_every_kind_turns_into_json(tmp_path: Path):
    metadata = make_metadata()
    metadata.attr.add(name="blobs").bytes_list.values.extend([b"\x00\x01"])
    metadata.attr.add(name="nan", double_val=float("nan"))
    s = summarize_file(write_et(tmp_path / "w.0.et", [make_node(0, "a")], metadata))
    assert json.loads(json.dumps(s.to_dict()))["metadata"] == {"blobs": ["AAE="], "nan": "nan"}
