# Types of the C module src/chakra/_kineto_view.c (the profiler view's nodes; see chakra/kineto/view.py).
from collections.abc import Callable
from typing import Any, TypeVar

_Event = TypeVar("_Event")

def own_copies(events: list[_Event]) -> list[_Event]: ...
def view_nodes(
    operators: list[Any],
    exclusive_us: list[float],
    parents: list[int],
    node_type: type,
    timing_type: type,
    input_args_type: type,
    no_io: Any,
    no_value: Any,
    no_attrs: dict[str, Any],
    annotation_categories: frozenset[str],
    scopes: tuple[int, int],
    inputs_of: Callable[[Any], Any],
    comm_attrs_of: Callable[[Any], dict[str, Any]],
) -> tuple[list[Any], dict[int, Any]]: ...
