# Types of the C module src/chakra/_dot.c (a DOT file of FlexFlow's plain statements read in C; see
# chakra/flexflow/dot.py).

from typing import Any

# nodes: [name, attributes, line, column] each, as lists (a node statement moves its node)
def plain_statements(text: str) -> tuple[list[list[Any]], list[tuple[str, str, int, int]]] | None: ...
