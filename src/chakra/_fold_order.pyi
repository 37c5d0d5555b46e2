# Types of the C module src/chakra/_fold_order.c (a graph's rows in dependency order, the rows that do
# no work folded; see chakra/tensorflow/convert.py).

def fold_in_order(
    inputs: list[tuple[tuple[int, int, bool], ...]],
    folding: bytes,
    loop_back: bytes,
    starts: list[int | None],
) -> tuple[list[int], list[list[int]], list[list[int]], list[int], int, int]: ...
