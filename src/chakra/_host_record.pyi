# Types of the C module src/chakra/_host_record.c and _host_scan.c (a host trace node's fields read in C;
# see chakra/pytorch/host.py).
from typing import Any

_Text = bytes | bytearray | memoryview | Any
_Extras = dict[tuple[tuple[str, Any], ...], dict[str, Any]]

def split_attrs(json: _Text, core: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]] | None: ...
def split_io(json: _Text, shared: dict[bytes, bytes]) -> tuple[bytes, bytes, bytes, bytes] | None: ...
def host_nodes(
    records: list[Any], core: dict[str, Any], extras: _Extras, texts: dict[bytes, bytes], strings: dict[str, str],
    node_type: type, io_type: type,
) -> list[int]: ...  # fmt: skip
def grouped_nodes(
    text: _Text, start: int, first: bool, core: dict[str, Any], extras: _Extras, texts: dict[bytes, bytes],
    strings: dict[str, str], node_type: type, io_type: type, tables: object = None,
) -> tuple[list[Any], list[tuple[int, int, int]], int, bool] | None: ...  # fmt: skip
def text_tables() -> object: ...
