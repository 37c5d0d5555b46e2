# Types of the C module src/chakra/_dot.c (a DOT file of FlexFlow's plain statements read in C; see
# chakra/flexflow/dot.py).

# (names, attributes, node_at, edges): node_at (line, column) and edges (source, target, line, column) as
# native int64 rows in bytes, the ends as indices of nodes
def plain_statements(text: str) -> tuple[list[str], list[dict[str, str]], bytes, bytes] | None: ...
