# Types of the C module src/chakra/_link_join.c (the joins of linking; see chakra/pytorch/link.py).
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
def enclosing_ops(
    ops: list[Any], parents: list[int] | None, calls: list[Any], step_prefix: str
) -> list[int] | None: ...
def attach_device_work(
    events: list[Any],
    calls: dict[int, Any],
    enclosing: list[int],
    ops: list[Any],
    host_of_event: dict[int, int] | None,
    activity_type: type,
    args_type: type,
    kept_args: type | None = None,
) -> tuple[list[Any], list[tuple[int, int]]]: ...
