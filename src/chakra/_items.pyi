# Types of the C module src/chakra/_items.c (passes over a conversion's items; see chakra/pytorch/waits.py).
from typing import Any

def nest_thread(items: list[Any], segment_type: type) -> list[Any]: ...
