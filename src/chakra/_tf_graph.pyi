# Types of the C module src/chakra/_tf_graph.c (a TensorFlow RunMetadata's graphs read from its wire
# bytes; see chakra/tensorflow/graph_table.py).
from collections.abc import Callable
from typing import Any

def function_graphs(data: bytes | bytearray | memoryview | Any) -> list[list[tuple[int, int]]]: ...
def node_facts(
    data: bytes | bytearray | memoryview | Any,
    bool_attrs: tuple[str, ...],
    parse_input: Callable[[str], tuple[str, int, bool]],
    offset: int = 0,
    length: int = -1,
) -> list[
    tuple[
        str,
        str,
        tuple[tuple[str, int, bool], ...],
        list[list[int] | None],
        int | None,
        dict[str, bool] | None,
        str,
        tuple[int, int],
    ]
]: ...
def table_columns(
    facts: list[Any], dtype_bytes: dict[int, int], ref_offset: int
) -> tuple[dict[str, int], list[tuple[tuple[int, int, bool], ...]], list[list[int | None]]]: ...
def io_bytes(
    inputs: list[tuple[tuple[int, int, bool], ...]], output_bytes: list[list[int | None]]
) -> tuple[list[int | None], list[int | None]]: ...
