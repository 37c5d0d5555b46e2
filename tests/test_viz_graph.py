"""chakra.viz.graph: which nodes and edges a dependency picture shows, and DOT/GraphML/SVG/PDF that tools read.

Graphviz ``dot`` reads the DOT files and networkx (the independent reader) the GraphML files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest
from helpers import UPSTREAM_NODE_COUNT, make_node, require_shared, write_et

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMM_SEND_NODE, COMP_NODE
from chakra.table import load_table, table_from_nodes
from chakra.viz import graph
from chakra.viz.graph import CONTROL, DATA, PATH, export_graph, select, write_dot, write_graphml

EXIT_BAD_INPUT = 2
SVG_NS = "{http://www.w3.org/2000/svg}"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")


def table_of(nodes):
    return table_from_nodes(nodes, path="hand-built.et")


def kept_ids(table, view) -> set[int]:
    return {int(i) for i in table.ids[view.positions]}


def edges_by_id(table, view) -> set[tuple[int, int, str]]:
    ids = table.ids
    return {(int(ids[a]), int(ids[b]), kind) for a, b, kind in view.edges}


def svg_of(dot_path: Path) -> str:
    done = subprocess.run(["dot", "-Tsvg", str(dot_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def svg_node_count(svg: str) -> int:
    return svg.count('class="node"')


def svg_texts(svg: str) -> list[str]:
    return [element.text or "" for element in ET.fromstring(svg).iter(f"{SVG_NS}text")]


def run_visualizer(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``chakra_visualizer`` the way upstream scripts do."""
    code = (
        "import sys; from chakra.cli.dropin import visualizer_main; "
        "sys.argv[0] = 'chakra_visualizer'; visualizer_main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def branchy():
    """ids and dependencies (parent -> child)::

    8 -> 7 -> 3
    1 -> 2 -> 3 -> 4 -> 5
         2 -> 6
    """
    return table_of([
        make_node(1), make_node(2, data_deps=[1]), make_node(8), make_node(7, data_deps=[8]),
        make_node(3, data_deps=[2, 7]), make_node(4, data_deps=[3]), make_node(5, data_deps=[4]),
        make_node(6, data_deps=[2]),
    ])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Selecting


def test_around_keeps_parents_and_children_one_hop_away_at_depth_1(branchy):
    # parents of 3: 2 and 7; child: 4
    view = select(branchy, around=3, depth=1)
    assert kept_ids(branchy, view) == {2, 3, 4, 7}
    assert view.dropped == 4
    assert edges_by_id(branchy, view) == {(2, 3, DATA), (7, 3, DATA), (3, 4, DATA)}


def test_around_at_depth_2_adds_grandparents_and_grandchildren_but_not_siblings(branchy):
    # grandparents 1 (via 2) and 8 (via 7), grandchild 5; 6 is a child of a parent, not a descendant
    view = select(branchy, around=3, depth=2)
    assert kept_ids(branchy, view) == {1, 2, 3, 4, 5, 7, 8}
    assert int(branchy.ids[view.around_position]) == 3


def test_around_an_id_not_in_the_trace_names_the_id_the_file_and_the_ids_present(branchy):
    with pytest.raises(ChakraInputError) as error:
        select(branchy, around=42)
    message = str(error.value)
    assert "node id 42" in message and "hand-built.et" in message
    assert "run from 1 to 8" in message


def test_comm_only_joins_collectives_through_hidden_nodes_with_path_edges():
    # c1 -> x2 -> c3 -> x4 -> c6 <- x5 <- c1, and c3 -> c6 directly; x7 hangs below c6.
    # 1 -> 3 through x2 only; 1 -> 6 through x5 only; 3 -> 6 is a direct data edge, so the
    # path 3 -> x4 -> 6 adds nothing.
    coll = {"type": COMM_COLL_NODE, "comm_type": ALL_REDUCE, "comm_size": 1024}
    table = table_of([
        make_node(1, **coll), make_node(2, data_deps=[1]), make_node(3, data_deps=[2], **coll),
        make_node(4, data_deps=[3]), make_node(5, data_deps=[1]), make_node(6, data_deps=[4, 5, 3], **coll),
        make_node(7, data_deps=[6]),
    ])  # fmt: skip
    view = select(table, comm_only=True)
    assert kept_ids(table, view) == {1, 3, 6}
    assert edges_by_id(table, view) == {(1, 3, PATH), (1, 6, PATH), (3, 6, DATA)}
    assert any("communication only" in note for note in view.notes)


def test_comm_only_on_a_trace_without_communication_says_there_is_nothing_to_draw(branchy):
    with pytest.raises(ChakraInputError, match="nothing to draw"):
        select(branchy, comm_only=True)


def test_collapse_cpu_hides_cpu_ops_and_bridges_paths_through_them():
    # GPU 0 -> CPU 1 -> GPU 2 (control); CPU 1 -> CPU 3 -> GPU 4; GPU 2 -> GPU 4.
    # Hidden: 1 and 3. 0 reaches 2 through 1, and 4 through 1 -> 3; 2 -> 4 stays a direct edge.
    table = table_of([
        make_node(0, is_cpu_op=False), make_node(1, data_deps=[0], is_cpu_op=True),
        make_node(2, ctrl_deps=[1], is_cpu_op=False), make_node(3, data_deps=[1], is_cpu_op=True),
        make_node(4, data_deps=[3, 2], is_cpu_op=False),
    ])  # fmt: skip
    view = select(table, collapse_cpu=True)
    assert kept_ids(table, view) == {0, 2, 4}
    assert edges_by_id(table, view) == {(0, 2, PATH), (0, 4, PATH), (2, 4, DATA)}


def test_max_nodes_keeps_the_first_nodes_in_dependency_order_and_says_so():
    # file order 10, 11, 12 but 12 -> 11 -> 10: dependency order 12, 11, 10
    table = table_of([make_node(10, data_deps=[11]), make_node(11, data_deps=[12]), make_node(12)])
    view = select(table, max_nodes=2)
    assert kept_ids(table, view) == {11, 12}
    assert view.dropped == 1
    assert any("first 2 of 3 nodes in dependency order" in note for note in view.notes)


def test_a_data_and_a_control_dependency_on_the_same_parent_stay_two_edges():
    table = table_of([make_node(1), make_node(2, data_deps=[1], ctrl_deps=[1])])
    assert edges_by_id(table, select(table)) == {(1, 2, DATA), (1, 2, CONTROL)}


def test_dependencies_on_missing_ids_are_counted_in_the_notes_not_drawn():
    table = table_of([make_node(1), make_node(2, data_deps=[1, 99])])
    view = select(table)
    assert edges_by_id(table, view) == {(1, 2, DATA)}
    assert "1 dependencies on ids not in the file are not drawn" in view.notes


def test_view_to_dict_is_json_ready(branchy):
    view = select(branchy, around=3, depth=1)
    assert json.loads(json.dumps(view.to_dict()))["dropped"] == 4


# ---------------------------------------------------------------------------------------------
# GraphML, read back by networkx


def test_graphml_reads_back_with_nodes_attributes_and_parallel_data_and_control_edges(tmp_path):
    table = table_of([
        make_node(1, "producer", duration_micros=5),
        make_node(2, "all_reduce", COMM_COLL_NODE, data_deps=[1], ctrl_deps=[1], duration_micros=7,
                  comm_type=ALL_REDUCE, comm_size=1 << 20),
    ])  # fmt: skip
    write_graphml(table, select(table), tmp_path / "g.graphml")
    g = nx.read_graphml(tmp_path / "g.graphml")
    assert isinstance(g, nx.MultiDiGraph)  # parallel edges kept
    assert sorted(g.nodes) == ["1", "2"]
    assert sorted(d["dependency"] for _, _, d in g.edges(data=True)) == ["control", "data"]
    comm = g.nodes["2"]
    assert (comm["name"], comm["node_id"], comm["type"], comm["category"]) == (
        "all_reduce",
        2,
        "COMM_COLL_NODE",
        "communication",
    )
    assert (comm["dur_us"], comm["comm_type"], comm["comm_size"]) == (7.0, "ALL_REDUCE", 1 << 20)
    assert comm["label"].splitlines()[0] == "all_reduce"
    assert "comm_type" not in g.nodes["1"]


def test_graphml_of_a_filtered_view_has_path_edges_and_the_notes(tmp_path):
    coll = {"type": COMM_COLL_NODE, "comm_type": ALL_REDUCE}
    table = table_of([make_node(1, **coll), make_node(2, data_deps=[1]), make_node(3, data_deps=[2], **coll)])
    export_graph(table, tmp_path / "g.graphml", comm_only=True)
    g = nx.read_graphml(tmp_path / "g.graphml")
    assert [(a, b, d["dependency"]) for a, b, d in g.edges(data=True)] == [("1", "3", "path")]
    assert "communication only" in g.graph["notes"]


def test_graphml_keeps_names_with_markup_characters_exactly(tmp_path):
    nasty = 'a"b\\c{d}<e>|f&amp;\nsecond line'
    table = table_of([make_node(1, nasty), make_node(2, "bell\x07", data_deps=[1])])
    write_graphml(table, select(table), tmp_path / "g.graphml")
    g = nx.read_graphml(tmp_path / "g.graphml")
    assert g.nodes["1"]["name"] == nasty
    assert g.nodes["2"]["name"] == "bell\ufffd"  # control characters are not allowed in XML


def test_graphml_gives_an_id_that_occurs_twice_a_key_per_occurrence(tmp_path):
    # dependencies resolve to the last occurrence of id 1 (position 1), as in the feeders
    table = table_of([make_node(1, "first"), make_node(1, "second"), make_node(2, data_deps=[1])])
    write_graphml(table, select(table), tmp_path / "g.graphml")
    g = nx.read_graphml(tmp_path / "g.graphml")
    assert sorted(g.nodes) == ["1", "1@0", "2"]
    assert list(g.edges) == [("1", "2")]
    assert g.nodes["1"]["name"] == "second"


# ---------------------------------------------------------------------------------------------
# DOT and rendered pictures


@needs_dot
def test_dot_is_read_by_graphviz_with_one_svg_node_per_drawn_node(tmp_path, branchy):
    write_dot(branchy, select(branchy, around=3, depth=1), tmp_path / "g.dot")
    assert svg_node_count(svg_of(tmp_path / "g.dot")) == 4


@needs_dot
def test_names_with_quotes_backslashes_braces_and_newlines_render_as_written(tmp_path):
    # every character upstream's record labels break on; a newline becomes a line break
    nasty = 'a"b\\c{d}<e>|f&amp;\nsecond line\\'
    table = table_of([make_node(1, nasty), make_node(2, "x\x07y", data_deps=[1])])
    write_dot(table, select(table), tmp_path / "g.dot")
    texts = svg_texts(svg_of(tmp_path / "g.dot"))
    assert 'a"b\\c{d}<e>|f&amp;' in texts
    assert "second line\\" in texts
    assert "x\ufffdy" in texts


@needs_dot
def test_data_control_and_path_edges_are_drawn_in_different_styles(tmp_path):
    table = table_of([make_node(1), make_node(2, data_deps=[1], ctrl_deps=[1])])
    write_dot(table, select(table), tmp_path / "g.dot")
    text = (tmp_path / "g.dot").read_text()
    assert '"1" -> "2";' in text
    assert '"1" -> "2" [style=dashed, arrowhead=tee];' in text
    assert graph._EDGE_STYLE[PATH] not in (graph._EDGE_STYLE[DATA], graph._EDGE_STYLE[CONTROL])


def test_dense_pictures_leave_out_edges_implied_by_longer_paths(tmp_path, monkeypatch):
    # 1 -> 2 -> 3 and 1 -> 3: the edge 1 -> 3 is implied by the path through 2
    monkeypatch.setattr(graph, "FULL_EDGES_LIMIT", 0)
    table = table_of([make_node(1), make_node(2, data_deps=[1]), make_node(3, data_deps=[1, 2])])
    view = select(table)
    write_dot(table, view, tmp_path / "reduced.dot")
    write_dot(table, view, tmp_path / "all.dot", all_edges=True)
    reduced = (tmp_path / "reduced.dot").read_text()
    assert reduced.count("->") == 2 and '"1" -> "3"' not in reduced
    assert "1 edges implied by longer paths are not drawn" in reduced
    assert (tmp_path / "all.dot").read_text().count("->") == 3
    assert len(view.edges) == 3  # the view (and GraphML) keep every edge


def test_reduction_never_leaves_out_an_edge_of_a_cycle(tmp_path, monkeypatch):
    # 1 <-> 2 and 2 -> 3: nothing is implied by another path
    monkeypatch.setattr(graph, "FULL_EDGES_LIMIT", 0)
    table = table_of([make_node(1, data_deps=[2]), make_node(2, data_deps=[1]), make_node(3, data_deps=[2])])
    write_dot(table, select(table), tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text().count("->") == 3


@needs_dot
def test_export_graph_renders_pdf_svg_and_png_by_suffix(tmp_path, branchy):
    for suffix, magic in ((".pdf", b"%PDF"), (".png", b"\x89PNG"), (".svg", b"<?xml")):
        export_graph(branchy, tmp_path / f"g{suffix}")
        assert (tmp_path / f"g{suffix}").read_bytes().startswith(magic)


def test_export_graph_to_an_unknown_suffix_lists_the_supported_ones(tmp_path, branchy):
    with pytest.raises(ChakraInputError, match=r"unknown graph format \.jpg.*\.dot \.gv \.graphml \.svg \.pdf \.png"):
        export_graph(branchy, tmp_path / "g.jpg")
    assert not (tmp_path / "g.jpg").exists()


def test_rendering_without_graphviz_says_how_to_install_it(tmp_path, branchy, monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda _: None)
    with pytest.raises(ChakraInputError, match="apt-get install graphviz"):
        export_graph(branchy, tmp_path / "g.svg")


def test_a_layout_that_takes_too_long_is_stopped_with_a_clear_error(tmp_path, branchy, monkeypatch):
    monkeypatch.setattr(graph, "DOT_TIMEOUT_S", 1e-6)
    with pytest.raises(ChakraInputError, match="did not finish laying out"):
        export_graph(branchy, tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


def test_send_nodes_are_labelled_with_direction_size_and_peer(tmp_path):
    table = table_of([make_node(1, "isend", COMM_SEND_NODE, comm_size=4096, comm_dst=3, pg_name="7")])
    write_graphml(table, select(table), tmp_path / "g.graphml")
    node = nx.read_graphml(tmp_path / "g.graphml").nodes["1"]
    assert node["label"].splitlines()[-1] == "send 4 KiB to 3 pg 7"
    assert node["comm_type"] == "send"


# ---------------------------------------------------------------------------------------------
# The real upstream trace and the drop-in


@pytest.fixture(scope="module")
def upstream_table():
    return load_table(require_shared("upstream-chakra/chakra.0.et.gz"))


@needs_dot
def test_a_dense_neighbourhood_of_the_upstream_trace_renders_in_seconds(tmp_path, upstream_table):
    # node 3317 has 112 nodes within one hop and 3,470 dependencies among them, which Graphviz
    # takes minutes to lay out; the picture leaves out the implied ones
    view = export_graph(upstream_table, tmp_path / "around.svg", around=3317, depth=1)
    assert len(view.edges) > graph.FULL_EDGES_LIMIT
    svg = (tmp_path / "around.svg").read_text()
    assert svg_node_count(svg) == len(view.positions)
    assert "implied by longer paths are not drawn" in svg
    assert any("implied by longer paths" in note for note in view.notes)  # told to the caller too


def test_drop_in_writes_graphml_and_dot_of_the_upstream_trace_capped_by_default(tmp_path):
    trace = require_shared("upstream-chakra/chakra.0.et.gz")
    for suffix in (".graphml", ".dot"):
        out = tmp_path / f"chakra.0{suffix}"
        result = run_visualizer("--input_filename", str(trace), "--output_filename", str(out))
        assert result.returncode == 0, result.stderr
        assert f"first {graph.DEFAULT_MAX_NODES:,} of {UPSTREAM_NODE_COUNT:,} nodes" in result.stderr
    assert nx.read_graphml(tmp_path / "chakra.0.graphml").number_of_nodes() == graph.DEFAULT_MAX_NODES
    node_statements = re.findall(r'^  "[^"]+" \[label=', (tmp_path / "chakra.0.dot").read_text(), re.MULTILINE)
    assert len(node_statements) == graph.DEFAULT_MAX_NODES


def test_drop_in_with_max_nodes_0_draws_every_node(tmp_path):
    trace = require_shared("upstream-chakra/chakra.0.et.gz")
    out = tmp_path / "all.graphml"
    result = run_visualizer("--input_filename", str(trace), "--output_filename", str(out), "--max_nodes", "0")
    assert result.returncode == 0, result.stderr
    assert nx.read_graphml(out).number_of_nodes() == UPSTREAM_NODE_COUNT


@needs_dot
def test_drop_in_writes_a_pdf_of_a_small_trace(tmp_path):
    trace = write_et(tmp_path / "small.0.et", [make_node(1, type=COMP_NODE), make_node(2, data_deps=[1])])
    out = tmp_path / "small.pdf"
    result = run_visualizer("--input_filename", str(trace), "--output_filename", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(b"%PDF")


def test_drop_in_reports_bad_input_in_one_line_with_exit_code_2(tmp_path):
    result = run_visualizer("--input_filename", str(tmp_path / "missing.et"), "--output_filename", "x.dot")
    assert result.returncode == EXIT_BAD_INPUT
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("chakra_visualizer: error:")
