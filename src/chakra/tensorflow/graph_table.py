"""A partition graph as columns: every node's name, op, inputs, output shapes and sizes, read once.

:func:`read_graph_table` reads a ``GraphDef``'s nodes from its bytes in C (``chakra._tf_graph``):
reading a node's shapes and type through protobuf's Python messages cost 15 µs a node, a tenth
of that here. Rows are the graph's nodes in order; an input names its source by row (-1 for a
node not in this graph, the other end of a transfer). The messages stay in :attr:`GraphTable.nodes`
for the attributes read of a few nodes (a transfer's rendezvous, a collective's keys, a constant).

Example:
    table = read_graph_table(graph)
    for row, name in enumerate(table.names):
        print(name, table.ops[row], table.output_bytes[row])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chakra._tf_graph import node_facts
from chakra.collector import gc_paused
from chakra.schema.tensorflow.tf_subset_pb2 import GraphDef, NodeDef
from chakra.tensorflow.costs import FLAG_ATTRS, Shape
from chakra.tensorflow.graph import dtype_bytes, input_name, tensor_elements

#: An input of a row: (source row or -1, output port of the source, is a control edge).
Input = tuple[int, int, bool]


@dataclass
class GraphTable:
    """One partition graph's nodes as columns (see the module's docstring)."""

    nodes: Sequence[NodeDef]
    names: list[str]
    ops: list[str]
    inputs: list[tuple[Input, ...]]
    #: each output's dimensions from ``_output_shapes`` (-1: unknown; ``None``: unknown rank)
    shapes: list[list[Shape]]
    #: each output's bytes from its shape and the node's type, ``None`` where either is unknown
    output_bytes: list[list[int | None]]
    #: the boolean attributes of :data:`chakra.tensorflow.costs.FLAG_ATTRS` the node has
    flags: list[dict[str, bool]]
    row_of: dict[str, int]


def read_graph_table(graph: GraphDef) -> GraphTable:
    """``graph``'s nodes as columns (a node named twice: the name's row is its last)."""
    with gc_paused():  # tuples and lists a node, kept: see chakra.collector
        return _read(graph)


def _read(graph: GraphDef) -> GraphTable:
    facts = node_facts(graph.SerializeToString(), FLAG_ATTRS, input_name)
    names = [fact[0] for fact in facts]
    row_of = {name: row for row, name in enumerate(names)}
    inputs = [tuple((row_of.get(source, -1), port, control) for source, port, control in fact[2]) for fact in facts]
    shapes = [fact[3] for fact in facts]
    output_bytes = [_output_bytes(fact[3], fact[4]) for fact in facts]
    return GraphTable(
        graph.node,
        names,
        [fact[1] for fact in facts],
        inputs,
        shapes,
        output_bytes,
        [fact[5] or {} for fact in facts],
        row_of,
    )


def _output_bytes(shapes: list[Shape], dtype: int | None) -> list[int | None]:
    """Bytes of each output of these shapes, of elements of TensorFlow DataType ``dtype``.

    >>> _output_bytes([[32, 64], [-1, 4], None], 1), _output_bytes([[2]], None)
    ([8192, None, None], [None])
    """
    size = None if dtype is None else dtype_bytes(dtype)
    if size is None:
        return [None] * len(shapes)
    return [None if (count := tensor_elements(shape)) is None else count * size for shape in shapes]
