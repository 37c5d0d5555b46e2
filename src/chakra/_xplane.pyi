# Types of the C module src/chakra/_xplane.c (a profiler XSpace's host plane read from its wire bytes;
# see chakra/tensorflow/profile.py).
from typing import Any

STAT_INT: int
STAT_REF: int
STAT_STR: int
STAT_OTHER: int

def plane_metadata(
    data: bytes | bytearray | memoryview | Any, name: str
) -> tuple[dict[int, str], dict[int, str], list[tuple[int, int]]] | None: ...
def op_event_rows(
    data: bytes | bytearray | memoryview | Any,
    lines: list[tuple[int, int]],
    op_nodes: dict[int, str],
    region_ids: set[int],
    roles: tuple[set[int], ...],
    ps_per_ns: int,
    events: set[int],
    stats: set[int],
) -> tuple[
    bytes, list[int], list[str], int, list[tuple[int, list[tuple[int, int, int, tuple[tuple[int, int, Any], ...]]]]]
]: ...
