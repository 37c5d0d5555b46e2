# Types of the C module src/chakra/_kineto_events.c (passes over every event of a Kineto trace; see
# chakra/pytorch/kineto.py).
from typing import Any

ROLE_HOST: int
ROLE_RUNTIME: int
ROLE_DEVICE: int
ROLE_SYNC: int

def first_bad_time(events: list[Any]) -> int: ...
def count_kinds(events: list[Any]) -> dict[tuple[str, str], int]: ...
def sort_roles(
    events: list[Any],
    roles: dict[str, int],
    launch_names: frozenset[str],
    sync_names: frozenset[str],
    record_names: frozenset[str],
    mark_prefix: str,
) -> tuple[
    list[Any], dict[int, Any], list[int], list[Any], list[Any], list[Any], list[Any], list[Any], int, list[Any]
]: ...
def sort_by_start(events: list[Any]) -> None: ...
def share_values(events: list[Any], start: int, field: str, shared: dict[Any, Any]) -> None: ...
def slim_args(
    events: list[Any], start: int, full_types: tuple[type, ...], slim_type: type, absent: dict[str, Any]
) -> None: ...
def step_spans(
    launches: dict[int, Any], device_ops: list[Any], starts: list[float], ends: list[float]
) -> tuple[list[float], list[int]]: ...
def window_work(
    activities: list[Any],
    kept: set[int],
    known: set[int],
    launches: dict[int, Any],
    start_us: float,
    end_us: float,
    earlier: bool,
) -> tuple[list[Any], int]: ...
def nest_by_thread(events: list[Any]) -> tuple[list[float], list[int]]: ...
def join_index(events: list[Any], id_field: str) -> tuple[dict[int, int], int]: ...
