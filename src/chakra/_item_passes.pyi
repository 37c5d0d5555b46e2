# Types of the C module src/chakra/_item_passes.c (passes over every item; see chakra/pytorch/items.py).
from typing import Any

def group_by_thread(items: list[Any], skipped_type: int) -> dict[Any, list[Any]]: ...
def chain_items(items: list[Any], head: Any | None) -> None: ...
def device_items(
    activities: list[Any],
    items: dict[int, Any],
    item_type: type,
    node_type: int,
    next_id: int,
    skipped_category: str,
    stream_tag: str,
) -> tuple[int, list[Any], list[Any]]: ...
def no_host_rows(
    items: list[Any],
    rows: list[int],
    node_types: list[int],
    thread_ids: dict[Any, int],
    launcher_rf_ids: dict[int, int | None],
    columns: tuple[list[Any], ...],
    args_types: tuple[type, ...],
    comp_node: int,
) -> None: ...
