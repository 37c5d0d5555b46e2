"""The step function's partition graphs as tables, one per device, read from a worker's
``run_metadata.pb`` (:mod:`chakra.tensorflow.collect`).

:func:`read_step_tables` reads the file's bytes in C (``chakra._tf_graph``: reading a node's shapes and
type through protobuf's Python messages cost 15 µs a node, a tenth of that here), picks the step
function among the function graphs TensorFlow kept (the one holding collectives or cross-device
transfers, else the largest: the dataset's ``next`` functions and the optimizer's helpers are
smaller) and returns its partition graphs by device as :class:`GraphTable` columns: every node's
name, op, inputs, output shapes and sizes. Rows are a graph's nodes in order; an input names its
source by row (-1 for a node not in this graph, the other end of a transfer). The few attributes read
of a few nodes (a transfer's rendezvous, a collective's keys, a constant) come from the node's
message, parsed from the file's bytes when asked for (:meth:`GraphTable.node`). Bytes the C reader
refuses are parsed with protobuf (the minimal protos of :mod:`chakra.schema.tensorflow`), whose error
names the fault.

Example:
    tables = read_step_tables("out/worker0/run_metadata.pb")
    for device, table in tables.items():
        print(device, len(table.names), table.ops[0], table.output_bytes[0])
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from chakra import io
from chakra._tf_graph import function_graphs, node_facts, table_columns
from chakra.collector import gc_paused
from chakra.errors import ChakraFormatError, ChakraInputError, PathLike
from chakra.schema.tensorflow.tf_subset_pb2 import NodeDef, RunMetadata
from chakra.tensorflow.costs import FLAG_ATTRS, Shape
from chakra.tensorflow.graph import (
    COLLECTIVE_PREFIX,
    DTYPE_BYTES,
    REF_OFFSET,
    TRANSFER_OPS,
    input_name,
    protobuf_fault,
)

#: The flags of a node that has none of them (one, read only, for every such node).
NO_FLAGS: Mapping[str, bool] = MappingProxyType({})

#: An input of a row: (source row or -1, output port of the source, is a control edge).
Input = tuple[int, int, bool]


@dataclass
class GraphTable:
    """One partition graph's nodes as columns (see the module's docstring)."""

    #: the bytes the graph was read from, and where each row's NodeDef lies in them
    data: bytes | mmap.mmap  # the run metadata's bytes, mapped (chakra.io.read_mapped)
    spans: list[tuple[int, int]]
    names: list[str]
    ops: list[str]
    devices: list[str]
    inputs: list[tuple[Input, ...]]
    #: each output's dimensions from ``_output_shapes`` (-1: unknown; ``None``: unknown rank)
    shapes: list[list[Shape]]
    #: each output's bytes from its shape and the node's type, ``None`` where either is unknown
    output_bytes: list[list[int | None]]
    #: the boolean attributes of :data:`chakra.tensorflow.costs.FLAG_ATTRS` the node has
    flags: list[Mapping[str, bool]]
    row_of: dict[str, int]

    def node(self, row: int) -> NodeDef:
        """The row's NodeDef, parsed whole (for the attributes not in the columns)."""
        offset, length = self.spans[row]
        return NodeDef.FromString(self.data[offset : offset + length])


def read_step_tables(path: PathLike) -> dict[str, GraphTable]:
    """The step function's partition graphs of a ``run_metadata.pb``, by device name."""
    path = Path(path)
    if path.is_dir():
        raise ChakraInputError("a folder, not a run metadata file", path=path)
    if not path.exists():
        raise ChakraInputError("no such file", path=path, hint="pass the folder chakra.tensorflow.collect wrote")
    data = io.read_mapped(path, what="a TensorFlow RunMetadata")
    try:
        with gc_paused():  # tuples and lists a node, kept: see chakra.collector
            functions = [[read_graph_table(data, *span) for span in spans] for spans in function_graphs(data)]
    except ValueError as exc:  # bytes the C reader refuses, as upb would: upb names the fault
        raise _not_a_run_metadata(path, data, exc) from None
    if not functions:
        raise ChakraFormatError(
            "no function graphs in this RunMetadata",
            path=path,
            hint="record with chakra.tensorflow.collect, entered before the step function's first call",
        )
    out: dict[str, GraphTable] = {}
    for table in max(functions, key=_step_weight):
        devices = {device for device in table.devices if device}
        if len(devices) != 1:
            raise ChakraFormatError(
                f"a partition graph runs on {len(devices)} devices ({', '.join(sorted(devices)) or 'none'})",
                path=path,
                hint="the partition graphs TensorFlow keeps run on one device each: record again",
            )
        out[devices.pop()] = table
    return out


def _step_weight(tables: list[GraphTable]) -> tuple[bool, int]:
    """How like the step function a function's graphs are: whether they talk, then their size."""
    talks = any(op.startswith(COLLECTIVE_PREFIX) or op in TRANSFER_OPS for table in tables for op in table.ops)
    return talks, sum(len(table.names) for table in tables)


def _not_a_run_metadata(path: Path, data: bytes | mmap.mmap, refused: ValueError) -> ChakraFormatError:
    return ChakraFormatError(
        f"not a TensorFlow RunMetadata ({protobuf_fault(RunMetadata(), bytes(data), refused)}; {len(data):,} bytes)",
        path=path,
        hint="the file is damaged or of another kind; record it again with chakra.tensorflow.collect",
    )


def read_graph_table(data: bytes | mmap.mmap, offset: int = 0, length: int = -1) -> GraphTable:
    """The nodes of the GraphDef at ``data[offset:offset + length]`` (all of ``data`` by default) as
    columns (a node named twice: the name's row is its last); ValueError for bytes that are not a
    GraphDef where they are read."""
    facts = node_facts(data, FLAG_ATTRS, input_name, offset, length)
    row_of, inputs, output_bytes = table_columns(facts, DTYPE_BYTES, REF_OFFSET)
    names, ops, _, shapes, _, flags, devices, spans = (
        (list(column) for column in zip(*facts, strict=True)) if facts else ([],) * 8
    )
    return GraphTable(
        data, spans, names, ops, devices, inputs, shapes, output_bytes,
        [NO_FLAGS if node_flags is None else node_flags for node_flags in flags], row_of,
    )  # fmt: skip
