"""A TensorFlow partition graph read from its bytes in C (chakra._tf_graph, chakra.tensorflow.graph_table)
is what protobuf's messages read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._tf_graph import node_facts
from chakra.schema.tensorflow.tf_subset_pb2 import AttrValue, GraphDef, NodeDef
from chakra.tensorflow.costs import FLAG_ATTRS
from chakra.tensorflow.graph import input_name
from chakra.tensorflow.graph_table import read_graph_table

#: The attributes a node's type is read from, in the order they are tried.
TYPE_ATTRS = ("T", "dtype", "tensor_type", "out_type")


def _message_facts(node: NodeDef) -> tuple:
    """What node_facts gives for one node, read from protobuf's message."""
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
    return node.name, node.op, tuple(map(input_name, node.input)), shapes, dtype, flags


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
        _names, st.sampled_from(["MatMul", "Const", "_Recv"]), st.lists(_inputs, max_size=3),
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
    for name, op, inputs, attrs in pieces:
        out += NodeDef(name=name, op=op, input=inputs).SerializeToString()
        for key, values in attrs:  # a map entry whose value is given in parts merges them
            value = b"".join(_field(2, v.SerializeToString()) for v in values)
            out += _field(5, _field(1, key.encode()) + value)
    return out


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(_node_pieces, max_size=4))
def test_the_nodes_read_from_a_graphs_bytes_are_what_protobuf_reads(nodes):
    data = b"".join(_field(1, _node_bytes(pieces)) for pieces in nodes)
    graph = GraphDef.FromString(data)
    assert node_facts(data, FLAG_ATTRS, input_name) == [_message_facts(node) for node in graph.node]


def test_a_graph_table_names_each_input_by_its_row_and_sizes_each_output():
    graph = GraphDef()
    graph.node.add(name="w", op="Const")
    matmul = graph.node.add(name="mm", op="MatMul", input=["w", "x:1", "^w"])
    matmul.attr["T"].type = 1  # DT_FLOAT: 4 bytes
    for dims in ([8, 16], [-1, 16]):
        shape = matmul.attr["_output_shapes"].list.shape.add()
        for size in dims:
            shape.dim.add(size=size)
    table = read_graph_table(graph)
    assert table.row_of == {"w": 0, "mm": 1}
    assert table.inputs[1] == ((0, 0, False), (-1, 1, False), (0, 0, True))  # "x" is on another device
    assert table.output_bytes[1] == [8 * 16 * 4, None]  # a dimension unknown: no size
