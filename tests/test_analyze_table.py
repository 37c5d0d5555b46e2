"""chakra.table: one rank's nodes as arrays (categories, tracks, durations, communication)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_node, write_et

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, COMM_COLL_NODE, COMM_SEND_NODE, COMP_NODE, METADATA_NODE
from chakra.table import COMMUNICATION, COMPUTE, NO_COMM_TYPE, NO_TRACK, OTHER, load_table
from chakra.workload import open_workload


def test_nodes_get_their_category_track_and_duration(tmp_path):
    nodes = [
        make_node(1, type=COMP_NODE, duration_micros=5, is_cpu_op=True, tid=7, start_time_micros=100),
        make_node(2, type=COMP_NODE, duration_micros=3, is_cpu_op=False, stream=20, start_time_micros=106),
        make_node(3, type=COMM_COLL_NODE, comm_type=ALL_GATHER, comm_size=4096, pg_name="2", is_cpu_op=False),
        make_node(4, type=METADATA_NODE),
    ]
    write_et(tmp_path / "job.3.et", nodes)
    table = load_table(tmp_path / "job.3.et")
    assert table.rank == 3
    assert table.category.tolist() == [COMPUTE, COMPUTE, COMMUNICATION, OTHER]
    assert [table.track_names[t] for t in table.track[:3]] == ["thread 7", "stream 20", "GPU comm"]
    assert table.track[3] == NO_TRACK
    assert table.num_resources == 2
    assert table.dur_ns.tolist() == [5000, 3000, 0, 0]
    assert table.comm_type.tolist() == [NO_COMM_TYPE, NO_COMM_TYPE, ALL_GATHER, NO_COMM_TYPE]
    assert table.comm_size[2] == 4096 and table.comm[2].pg_name == "2"


def test_starts_are_relative_to_the_first_recorded_start(tmp_path):
    nodes = [make_node(1, start_time_micros=1_000_000, duration_micros=1), make_node(2, start_time_micros=1_000_004)]
    write_et(tmp_path / "t.et", nodes)
    assert load_table(tmp_path / "t.et").start_ns().tolist() == [0, 4000]


def test_a_trace_without_start_times_says_so(tmp_path):
    write_et(tmp_path / "t.et", [make_node(1, duration_micros=3)])
    with pytest.raises(ChakraInputError, match="no node records start_time_micros"):
        load_table(tmp_path / "t.et").start_ns()


def test_sends_keep_their_peer_and_tag(tmp_path):
    nodes = [make_node(1, type=COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_tag=9, comm_size=64, is_cpu_op=False)]
    write_et(tmp_path / "t.et", nodes)
    info = load_table(tmp_path / "t.et").comm[0]
    assert (info.src, info.dst, info.tag) == (0, 1, 9)


def test_a_workload_loads_every_rank(tmp_path):
    for rank in range(3):
        write_et(tmp_path / f"w.{rank}.et", [make_node(1, duration_micros=rank + 1)])
    workload = open_workload(tmp_path / "w")
    assert workload.ranks == [0, 1, 2]
    assert [int(np.sum(workload.tables[r].dur_ns)) for r in workload.ranks] == [1000, 2000, 3000]
