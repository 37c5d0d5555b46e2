# Types of the C module src/chakra/_host_record.c (a host trace node's fields read in C; see chakra/pytorch/host.py).
from typing import Any

def split_attrs(
    json: bytes | bytearray | memoryview | Any, core: dict[str, Any]
) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]] | None: ...
def split_io(
    json: bytes | bytearray | memoryview | Any, shared: dict[bytes, bytes]
) -> tuple[bytes, bytes, bytes, bytes] | None: ...
def host_nodes(
    records: list[Any],
    core: dict[str, Any],
    extras: dict[tuple[tuple[str, Any], ...], dict[str, Any]],
    texts: dict[bytes, bytes],
    strings: dict[str, str],
    node_type: type,
    io_type: type,
) -> list[int]: ...
