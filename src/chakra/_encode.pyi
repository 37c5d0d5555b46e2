# Types of the C module src/chakra/_encode.c (Node records as protobuf writes them; see chakra/wire.py).
from collections.abc import Callable, Sequence
from types import NotImplementedType
from typing import Any

def encode_node(
    node_id: int,
    name: str | bytes,
    node_type: int,
    ctrl_deps: Sequence[int],
    data_deps: Sequence[int],
    start_time_micros: int,
    duration_micros: int,
    inputs: tuple[str | bytes, str | bytes, str | bytes] | None,
    outputs: tuple[str | bytes, str | bytes, str | bytes] | None,
    attrs: Sequence[bytes],
) -> bytes: ...
def encode_nodes(
    names: Sequence[str | bytes],
    node_types: Sequence[int],
    ctrl_deps: Sequence[Sequence[int]],
    data_deps: Sequence[Sequence[int]],
    start_time_micros: Sequence[float | None],
    duration_micros: Sequence[float | None],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    attrs: Sequence[tuple[str, str, Sequence[Any]]],
    *,
    node_ids: Sequence[int] | None = None,
    id_map: dict[Any, Any] | memoryview | None = None,
    earlier_only: bool = False,
    io_json: Callable[[Any], str | bytes] | None = None,
    io_fields: tuple[str, str, str] | None = None,
    float_times: bool = False,
) -> tuple[list[bytes], int, int]: ...
def varint(value: int) -> bytes: ...
def python_repr_of_json(json_text: bytes | bytearray | memoryview) -> bytes | None: ...
def frame_records(payloads: list[bytes]) -> bytes: ...
def dense_ranks(ids: list[int]) -> bytearray | None: ...
def span_us(starts: list[float | None], durations: list[float]) -> float | NotImplementedType | None: ...
def count_rows(columns: tuple[list[Any], ...], skip: int) -> dict[tuple[Any, ...], int] | None: ...
