"""A TensorFlow partition graph read from its bytes in C (chakra._tf_graph, chakra.tensorflow.graph_table)
is what protobuf's messages read."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._tf_graph import function_graphs, io_bytes, node_facts, table_columns
from chakra.schema.tensorflow.tf_subset_pb2 import AttrValue, GraphDef, NodeDef, RunMetadata
from chakra.tensorflow.costs import FLAG_ATTRS
from chakra.tensorflow.graph import input_name
from chakra.tensorflow.graph_table import read_graph_table, read_step_tables

#: The attributes a node's type is read from, in the order they are tried.
TYPE_ATTRS = ("T", "dtype", "tensor_type", "out_type")


def _message_facts(node: NodeDef, span: tuple[int, int]) -> tuple:
    """What node_facts gives for one node, read from protobuf's message (``span``: where it lies)."""
    shapes = []
    if "_output_shapes" in node.attr:
        for shape in node.attr["_output_shapes"].list.shape:
            shapes.append(None if shape.unknown_rank else [d.size for d in shape.dim])
    dtype = next(
        (
            node.attr[name].type
            for name in TYPE_ATTRS
            if name in node.attr and node.attr[name].WhichOneof("value") == "type"
        ),
        None,
    )
    flags = {name: node.attr[name].b for name in FLAG_ATTRS if name in node.attr} or None
    return node.name, node.op, tuple(map(input_name, node.input)), shapes, dtype, flags, node.device, span


_names = st.sampled_from(["a", "b", "mm", "x:y", "^c", ""])
_inputs = st.one_of(
    st.builds(lambda n, p: f"{n}:{p}", st.sampled_from(["a", "b", ""]), st.integers(0, 10**20)),
    st.builds(lambda n: f"^{n}", _names),
    st.sampled_from(["a", "a:", "a:b", ":3", "a:1:2", "a:-1", "é:7", "a:0x1"]),
)
_shapes = st.lists(st.tuples(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3), st.booleans()), max_size=3)


def _attr_value(kind: str, value: object) -> AttrValue:
    attr = AttrValue()
    if kind == "shapes":
        for dims, unknown_rank in value:  # type: ignore[attr-defined]
            shape = attr.list.shape.add(unknown_rank=unknown_rank)
            for size in dims:
                shape.dim.add(size=size)
    else:
        setattr(attr, kind, value)
    return attr


_attr_values = st.one_of(
    st.builds(_attr_value, st.just("shapes"), _shapes),
    st.builds(_attr_value, st.just("shapes"), _shapes),
    st.builds(_attr_value, st.just("type"), st.integers(-(2**31), 2**31 - 1)),
    st.builds(_attr_value, st.just("b"), st.booleans()),
    st.builds(_attr_value, st.just("i"), st.integers(-5, 5)),
    st.builds(_attr_value, st.just("s"), st.binary(max_size=3)),
    st.builds(_attr_value, st.just("f"), st.floats(allow_nan=False, width=32)),
)
_attr_keys = st.sampled_from(["_output_shapes", "_output_shapes", *TYPE_ATTRS, *FLAG_ATTRS, "other"])
#: A node as the wire may hold it: pieces of one NodeDef serialized one after the other (a parser
#: merges them: the last name wins, inputs add up, an attribute given again replaces the earlier).
_node_pieces = st.lists(
    st.tuples(
        _names, st.sampled_from(["MatMul", "Const", "_Recv"]), st.sampled_from(["", "/device:CPU:0", "/cpu:1"]),
        st.lists(_inputs, max_size=3),
        st.lists(st.tuples(_attr_keys, st.lists(_attr_values, min_size=1, max_size=3)), max_size=4),
    ),
    min_size=1,
    max_size=2,
)  # fmt: skip


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (field numbers below 16)."""
    size, length = len(payload), b""
    while size >= 0x80:
        length += bytes([size & 0x7F | 0x80])
        size >>= 7
    return bytes([number << 3 | 2]) + length + bytes([size]) + payload


def _node_bytes(pieces: list) -> bytes:
    out = b""
    for name, op, device, inputs, attrs in pieces:
        out += NodeDef(name=name, op=op, device=device, input=inputs).SerializeToString()
        for key, values in attrs:  # a map entry whose value is given in parts merges them
            value = b"".join(_field(2, v.SerializeToString()) for v in values)
            out += _field(5, _field(1, key.encode()) + value)
    return out


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(_node_pieces, max_size=4), before=st.binary(max_size=3), after=st.binary(max_size=3))
def test_the_nodes_read_from_a_graphs_bytes_are_what_protobuf_reads(nodes, before, after):
    graph_bytes, spans = b"", []
    for pieces in nodes:
        field = _field(1, _node_bytes(pieces))
        payload = len(_node_bytes(pieces))
        spans.append((len(before) + len(graph_bytes) + len(field) - payload, payload))
        graph_bytes += field
    data = before + graph_bytes + after  # the graph read where it lies in a larger buffer
    graph = GraphDef.FromString(graph_bytes)
    found = node_facts(data, FLAG_ATTRS, input_name, len(before), len(graph_bytes))
    assert found == [_message_facts(node, span) for node, span in zip(graph.node, spans, strict=True)]
    assert [NodeDef.FromString(data[a : a + n]) for *_, (a, n) in found] == list(graph.node)


def test_a_name_that_is_not_utf8_is_refused_as_protobuf_refuses_it():
    data = _field(1, _field(1, b"mm\xff"))  # a node named with a byte that is not UTF-8
    with pytest.raises(DecodeError):
        GraphDef.FromString(data)
    with pytest.raises(ValueError, match="UTF-8"):
        node_facts(data, FLAG_ATTRS, input_name)


def test_a_run_metadatas_function_graphs_are_found_where_protobuf_reads_them():
    metadata = RunMetadata()
    metadata.partition_graphs.add().node.add(name="not-a-function")
    for k, sizes in enumerate([[2, 1], [], [3]]):
        function = metadata.function_graphs.add()
        for size in sizes:
            graph = function.partition_graphs.add()
            for n in range(size):
                graph.node.add(name=f"f{k}n{n}", op="AddV2")
    data = metadata.SerializeToString()
    found = [[GraphDef.FromString(data[a : a + n]) for a, n in spans] for spans in function_graphs(data)]
    assert found == [list(function.partition_graphs) for function in metadata.function_graphs]


def test_the_step_function_is_the_one_that_talks_and_its_graphs_are_keyed_by_device(tmp_path: Path):
    metadata = RunMetadata()
    large = metadata.function_graphs.add().partition_graphs.add()  # the dataset's: larger, but silent
    for n in range(5):
        large.node.add(name=f"d{n}", op="MapDataset", device="/cpu:0")
    step = metadata.function_graphs.add()
    for device in ("/job:w/replica:0/task:0/device:CPU:0", "/job:w/replica:0/task:0/device:CPU:1"):
        graph = step.partition_graphs.add()
        graph.node.add(name="ar", op="CollectiveReduceV2", device=device)
    path = tmp_path / "run_metadata.pb"
    path.write_bytes(metadata.SerializeToString())
    tables = read_step_tables(path)
    assert sorted(tables) == ["/job:w/replica:0/task:0/device:CPU:0", "/job:w/replica:0/task:0/device:CPU:1"]
    assert tables["/job:w/replica:0/task:0/device:CPU:1"].node(0) == step.partition_graphs[1].node[0]


def test_a_graph_table_names_each_input_by_its_row_and_sizes_each_output():
    graph = GraphDef()
    graph.node.add(name="w", op="Const")
    matmul = graph.node.add(name="mm", op="MatMul", input=["w", "x:1", "^w"])
    matmul.attr["T"].type = 1  # DT_FLOAT: 4 bytes
    for dims in ([8, 16], [-1, 16]):
        shape = matmul.attr["_output_shapes"].list.shape.add()
        for size in dims:
            shape.dim.add(size=size)
    table = read_graph_table(graph.SerializeToString())
    assert table.row_of == {"w": 0, "mm": 1}
    assert table.inputs[1] == ((0, 0, False), (-1, 1, False), (0, 0, True))  # "x" is on another device
    assert table.output_bytes[1] == [8 * 16 * 4, None]  # a dimension unknown: no size


def _python_columns(facts: list, dtype_bytes: dict[int, int], ref_offset: int):
    """What table_columns makes of facts, stated in Python."""
    row_of = {fact[0]: row for row, fact in enumerate(facts)}
    inputs = [tuple((row_of.get(source, -1), port, control) for source, port, control in fact[2]) for fact in facts]
    sizes = []
    for fact in facts:
        shapes, dtype = fact[3], fact[4]
        size = None if dtype is None else dtype_bytes.get(dtype - ref_offset if dtype > ref_offset else dtype)
        row_sizes = []
        for shape in shapes:
            if size is None or shape is None or any(d < 0 for d in shape):
                row_sizes.append(None)
                continue
            count = size
            for d in shape:
                count *= d
            row_sizes.append(count)
        sizes.append(row_sizes)
    return row_of, inputs, sizes


_facts = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.just("Op"),
        st.lists(st.tuples(st.sampled_from(["a", "b", "x"]), st.integers(0, 3), st.booleans()), max_size=3).map(tuple),
        st.lists(st.one_of(st.none(), st.lists(st.integers(-1, 1 << 40), max_size=4)), max_size=3),
        st.one_of(st.none(), st.sampled_from([0, 1, 9, 101, 109, 150])),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(facts=_facts)
def test_the_table_columns_are_the_rules_stated_in_python(facts):
    dtype_bytes = {1: 4, 9: 8}
    assert table_columns(facts, dtype_bytes, 100) == _python_columns(facts, dtype_bytes, 100)


def test_an_output_past_64_bits_of_bytes_is_sized_exactly():
    (_, _, sizes) = table_columns([("t", "Op", (), [[1 << 40, 1 << 40]], 1)], {1: 4}, 100)
    assert sizes == [[4 << 80]]


def _python_io_sums(inputs: list, output_bytes: list) -> tuple[list, list]:
    """What io_bytes makes of a table's inputs and output bytes, stated in Python."""
    input_sums = []
    for row_inputs in inputs:
        sizes = [
            output_bytes[source][port] if port < len(output_bytes[source]) else None
            for source, port, control in row_inputs
            if not control and source >= 0
        ]
        input_sums.append(None if None in sizes else sum(sizes))
    output_sums = [None if None in sizes else sum(sizes) for sizes in output_bytes]
    return input_sums, output_sums


@settings(max_examples=300, deadline=None)
@given(facts=_facts)
def test_the_bytes_summed_in_and_out_of_each_row_are_the_rules_stated_in_python(facts):
    _, inputs, output_bytes = table_columns(facts, {1: 4, 9: 8}, 100)
    assert io_bytes(inputs, output_bytes) == _python_io_sums(inputs, output_bytes)


def test_a_row_fed_by_an_output_of_unknown_size_has_no_input_sum():
    inputs = [(), ((0, 0, False), (0, 1, True)), ((0, 1, False),)]
    output_bytes = [[64, None], [8], []]
    assert io_bytes(inputs, output_bytes) == ([0, 64, None], [None, 8, 0])
