"""chakra.trace: one rank as a Trace, ASTRA-sim comm group files (a workload opened: tests/test_workload.py)."""

from __future__ import annotations

import json

import pytest
from helpers import UPSTREAM_NODE_COUNT, chain, make_metadata, make_node, write_et

from chakra import io
from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
from chakra.trace import Trace, rank_of

# ---------------------------------------------------------------------------------------------
# Trace: loading and saving


def test_load_reads_metadata_nodes_path_and_rank(tmp_path):
    path = write_et(tmp_path / "llama.3.et", chain(4), make_metadata("1.0.0"))

    trace = Trace.load(path)

    assert trace.metadata.version == "1.0.0"
    assert trace.nodes == chain(4)
    assert (trace.path, trace.rank, len(trace)) == (path, 3, 4)
    assert list(trace) == trace.nodes


def test_load_of_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError):
        Trace.load(tmp_path / "absent.0.et")


def test_save_then_load_round_trips(tmp_path):
    trace = Trace(make_metadata("1.0.0", pid=7), chain(5))
    trace.save(tmp_path / "t.0.et")

    loaded = Trace.load(tmp_path / "t.0.et")

    assert (loaded.metadata, loaded.nodes) == (trace.metadata, trace.nodes)


def test_save_compresses_by_suffix_unless_told_otherwise(tmp_path):
    trace = Trace(nodes=chain(2))
    trace.save(tmp_path / "t.0.et.gz")
    trace.save(tmp_path / "plain.0.et.gz", compress=None)

    assert (tmp_path / "t.0.et.gz").read_bytes().startswith(io.GZIP_MAGIC)
    assert not (tmp_path / "plain.0.et.gz").read_bytes().startswith(io.GZIP_MAGIC)
    assert Trace.load(tmp_path / "t.0.et.gz").nodes == chain(2)


def test_a_new_trace_has_metadata_with_the_format_version_and_no_path():
    trace = Trace()

    assert trace.metadata == GlobalMetadata(version=io.FORMAT_VERSION)
    assert (trace.path, trace.rank, len(trace)) == (None, None, 0)


def test_upstream_trace_loads_as_a_trace(upstream_et):
    trace = Trace.load(upstream_et)

    assert len(trace) == UPSTREAM_NODE_COUNT
    assert trace.rank == 0
    assert trace.node(216).name == "aten::flatten_dense_tensors(0)"


# ---------------------------------------------------------------------------------------------
# Trace: index and structure


def test_node_finds_a_node_by_id_not_by_position():
    trace = Trace(nodes=[make_node(10, "a"), make_node(5, "b"), make_node(7, "c")])

    assert trace.node(5).name == "b"
    assert trace.index == {10: 0, 5: 1, 7: 2}
    assert 7 in trace and 8 not in trace


def test_node_with_an_unknown_id_raises_key_error():
    with pytest.raises(KeyError):
        Trace(nodes=chain(2)).node(99)


def test_a_duplicated_id_indexes_the_last_node_as_the_cpp_feeders_do():
    trace = Trace(nodes=[make_node(1, "first"), make_node(1, "second")])

    assert trace.node(1).name == "second"


def test_add_copies_the_node_and_keeps_the_index_current():
    trace = Trace(nodes=chain(2))
    assert 1 in trace  # index built
    original = make_node(9, "added", data_deps=[1])

    stored = trace.add(original)
    original.name = "changed afterwards"

    assert trace.node(9) is stored
    assert stored.name == "added"
    assert trace.graph().num_nodes == 3


def test_reindex_is_needed_after_editing_nodes_in_place():
    trace = Trace(nodes=chain(2))
    assert 1 in trace and trace.graph().num_nodes == 2  # index and graph cached
    trace.nodes.append(make_node(2, "appended", data_deps=[1]))

    assert 2 not in trace and trace.graph().num_nodes == 2
    trace.reindex()
    assert 2 in trace
    assert trace.graph().num_nodes == 3


def test_graph_is_built_once_and_cached():
    trace = Trace(nodes=chain(3))

    assert trace.graph() is trace.graph()


def test_children_maps_each_parent_to_dependents_over_data_and_ctrl_edges():
    trace = Trace(
        nodes=[
            make_node(1, "root"),
            make_node(2, "both", data_deps=[1], ctrl_deps=[1]),
            make_node(3, "ctrl", ctrl_deps=[1]),
            make_node(4, "data", data_deps=[2, 3]),
            make_node(5, "dangling", data_deps=[42]),
        ]
    )

    assert trace.children() == {1: [2, 3], 2: [4], 3: [4], 42: [5]}


def test_topological_order_puts_every_node_after_its_dependencies():
    nodes = [make_node(3, "c", data_deps=[2]), make_node(1, "a"), make_node(2, "b", ctrl_deps=[1])]
    trace = Trace(nodes=nodes)

    assert [n.id for n in trace.topological_order()] == [1, 2, 3]


def test_topological_order_raises_on_a_cycle():
    trace = Trace(nodes=[make_node(1, "a", data_deps=[2]), make_node(2, "b", ctrl_deps=[1]), make_node(3, "c")])

    with pytest.raises(ChakraInputError, match="cycle") as info:
        trace.topological_order()
    assert "2 nodes can never run" in str(info.value) and info.value.ids == [1, 2]


def test_durations_are_the_duration_micros_in_file_order():
    trace = Trace(nodes=[make_node(1, "a", duration_micros=5), make_node(2, "b", duration_micros=0)])

    assert trace.durations_us().tolist() == [5, 0]


# ---------------------------------------------------------------------------------------------
# Rank file names


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("llama.0.et", 0),
        ("llama.12.et", 12),
        ("dir.with.dots.3.et", 3),
        ("llama.1.et.gz", 1),
        ("llama.2.et.zst", 2),
        ("llama.2.et.zstd", 2),
        ("llama.et", None),
        ("llama.x.et", None),
        ("llama.0.json", None),
        ("0.et", None),
    ],
)
def test_rank_is_read_from_prefix_dot_rank_dot_et(name, rank):
    assert rank_of(name) == rank


# ---------------------------------------------------------------------------------------------
# Comm groups


def test_comm_groups_are_written_in_astra_sim_format_and_read_back(tmp_path):
    path = tmp_path / "w.comm_groups.json"
    CommGroups({2: (2, 3), 1: (0, 1)}).write(path)

    assert json.loads(path.read_text()) == {"1": [0, 1], "2": [2, 3]}
    assert list(json.loads(path.read_text())) == ["1", "2"]  # sorted by group id
    assert CommGroups.read(path) == CommGroups({1: (0, 1), 2: (2, 3)})


def test_writing_comm_groups_into_a_missing_directory_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError):
        CommGroups({1: (0,)}).write(tmp_path / "nowhere" / "g.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        ("[[0, 1]]", "JSON object"),
        ('{"tp_group": [0, 1]}', "not a decimal integer"),
        ('{"-1": [0, 1]}', "not a decimal integer"),
        ('{"\u00b2": [0, 1]}', "not a decimal integer"),  # superscript two: isdigit() but not int()
        ('{"1": 0}', "list of integers"),
        ('{"1": [0, "1"]}', "list of integers"),
        ('{"1": [true, false]}', "list of integers"),
        ('{"1": [0.5]}', "list of integers"),
    ],
)
def test_bad_comm_groups_files_are_input_errors(tmp_path, content, message):
    path = tmp_path / "w.comm_groups.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")

    with pytest.raises(ChakraInputError, match=message) as info:
        CommGroups.read(path)
    assert info.value.path == str(path)


def test_a_missing_comm_groups_file_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="no such"):
        CommGroups.read(tmp_path / "absent.json")


def test_repr_names_the_path_and_node_count(tmp_path):
    path = write_et(tmp_path / "w.0.et", [Node(id=1, name="a")])

    assert repr(Trace.load(path)) == f"<Trace {path}: 1 nodes>"
