# Types of the C module src/chakra/_link_join.c (host ops joined to Kineto host events; see chakra/pytorch/link.py).
from collections.abc import Collection
from typing import Any

def join_host_ops(
    nodes: list[Any],
    skip_names: Collection[str],
    index_of: dict[int, int],
    events: list[Any],
    exclusive_us: list[float],
    timing_type: type,
) -> tuple[dict[int, Any], dict[int, int], int, int, int, list[Any]]: ...
