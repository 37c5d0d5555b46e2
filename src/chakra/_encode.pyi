# Types of the C module src/chakra/_encode.c (Node records as protobuf writes them; see chakra/wire.py).
from collections.abc import Sequence

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
def varint(value: int) -> bytes: ...
def python_repr_of_json(json_text: bytes | bytearray | memoryview) -> bytes | None: ...
