# Types of the C module src/chakra/_tf_graph.c (a TensorFlow GraphDef's nodes read from its wire bytes;
# see chakra/tensorflow/graph_table.py).
from collections.abc import Callable
from typing import Any

def node_facts(
    data: bytes | bytearray | memoryview | Any,
    bool_attrs: tuple[str, ...],
    parse_input: Callable[[str], tuple[str, int, bool]],
) -> list[
    tuple[str, str, tuple[tuple[str, int, bool], ...], list[list[int] | None], int | None, dict[str, bool] | None]
]: ...
