# Types of the C module src/chakra/_op_rows.c (a TensorFlow profile's op execution rows made objects
# or summed up per step; see chakra/tensorflow/profile.py).
from collections.abc import Callable
from typing import Any

def row_executions(
    rows: bytes,
    make: Callable[[int, int, int, int | None, int | None], Any],
    nodes: list[str],
    steps_wanted: bytes,
    only: set[str] | None = None,
) -> dict[int, dict[str, list[Any]]]: ...
def step_summaries(
    rows: bytes, step_count: int, nodes: list[str], graph: set[str], working: set[str], left: set[str]
) -> list[tuple[int, int, int, int | None, int | None, int | None]]: ...
