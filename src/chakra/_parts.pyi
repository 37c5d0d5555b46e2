# Types of the C module src/chakra/_parts.c (the parts of ops split at their children; see chakra/pytorch/waits.py).
from collections.abc import Collection
from typing import Any

def make_parts(
    segments: list[Any],
    candidates: list[int],
    launched: dict[int, tuple[list[float], list[Any]]],
    thread: Any,
    next_id: int,
    item_type: type,
    node_type: int,
    transfer_types: Collection[int],
    min_us: float,
    items: dict[int, Any],
    thread_items: list[Any],
    wait_edges: list[tuple[Any, Any]],
) -> int: ...
