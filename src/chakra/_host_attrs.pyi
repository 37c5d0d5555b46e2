# Types of the C module src/chakra/_host_attrs.c (a host trace node's attrs list, split; see chakra/pytorch/host.py).
from typing import Any

def split_attrs(
    json: bytes | bytearray | memoryview | Any, core: dict[str, Any]
) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]] | None: ...
