"""The repeating structure of a sequence of symbols: nested tandem repeats, found greedily.

A rank's nodes, each turned into a symbol (what it is and how far back its dependencies reach, see
:mod:`chakra.synth.fit`), read as a sequence. Steps, micro-batches and layers are runs of
one block of symbols repeated back to back (a *tandem repeat*). :func:`tandem_grammar` covers the
sequence with them: it takes the repeat that covers the most symbols, then looks for repeats inside
its block (layers inside a step) and in what lies before and after it, until no repeat of at least
:data:`MIN_REPEAT_SYMBOLS` symbols is left. The result is a grammar whose expansion is the sequence:
a list of :class:`Literal` ranges (of positions of the sequence) and :class:`Repeat` items.

Example:
    >>> import numpy as np
    >>> seq = np.array([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 7])
    >>> grammar = tandem_grammar(seq)
    >>> grammar
    [Literal(start=0, stop=1), Repeat(count=3, body=[Literal(start=1, stop=4)]), Literal(start=10, stop=11)]
    >>> expand_positions(grammar).tolist() == [0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 10]
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: The fewest symbols a repeat must cover (all its copies together): shorter runs stay literal,
#: since a model gains nothing from naming them.
MIN_REPEAT_SYMBOLS = 6
#: Candidate periods tried per segment: the most frequent distances between consecutive
#: occurrences of one symbol, by count and by count x distance (long periods, steps, recur rarely).
CANDIDATE_PERIODS = 24


@dataclass(frozen=True)
class Literal:
    """Positions ``start`` to ``stop`` (exclusive) of the sequence, once."""

    start: int
    stop: int


@dataclass
class Repeat:
    """``body`` (its first copy's positions) ``count`` times back to back."""

    count: int
    body: list[Literal | Repeat] = field(default_factory=list)


Item = Literal | Repeat


def best_tandem(seq: np.ndarray, lo: int = 0, hi: int | None = None) -> tuple[int, int, int] | None:
    """The tandem repeat in ``seq[lo:hi]`` covering the most symbols, as ``(start, period, count)``
    (``start`` a position of ``seq``), or ``None`` when none covers :data:`MIN_REPEAT_SYMBOLS`. Ties
    go to the shorter period (the primitive block).

    >>> best_tandem(np.array([5, 1, 2, 1, 2, 1, 2, 1, 2]))
    (1, 2, 4)
    """
    hi = len(seq) if hi is None else hi
    segment = seq[lo:hi]
    best: tuple[int, int, int] | None = None
    best_cover = MIN_REPEAT_SYMBOLS - 1
    for period in _candidate_periods(segment):
        equal = segment[period:] == segment[:-period]
        edges = np.diff(np.concatenate(([False], equal, [False])).astype(np.int8))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        if len(starts) == 0:
            continue
        counts = (ends - starts) // period + 1
        covers = counts * period
        k = int(np.argmax(covers))
        cover = int(covers[k])
        if counts[k] >= 2 and (cover > best_cover or (cover == best_cover and best is not None and period < best[1])):
            best, best_cover = (lo + int(starts[k]), period, int(counts[k])), cover
    return best


def _candidate_periods(segment: np.ndarray) -> list[int]:
    if len(segment) < MIN_REPEAT_SYMBOLS:
        return []
    order = np.argsort(segment, kind="stable")
    ordered = segment[order]
    same = ordered[1:] == ordered[:-1]
    distances = (order[1:] - order[:-1])[same]
    distances = distances[distances * 2 <= len(segment)]
    if len(distances) == 0:
        return []
    values, counts = np.unique(distances, return_counts=True)
    by_count = values[np.argsort(-counts, kind="stable")[:CANDIDATE_PERIODS]]
    by_cover = values[np.argsort(-(counts * values), kind="stable")[:CANDIDATE_PERIODS]]
    return sorted({int(v) for v in (*by_count, *by_cover)})


def tandem_grammar(seq: np.ndarray) -> list[Item]:
    """``seq`` as nested tandem repeats and literal ranges (see the module's docstring)."""
    return _cover(seq, 0, len(seq))


def _cover(seq: np.ndarray, lo: int, hi: int) -> list[Item]:
    # iterative over the segments left and right of each repeat; recursion only into bodies,
    # which shrink by at least half each level
    items: list[Item] = []
    pending = [(lo, hi)]
    placed: list[tuple[int, Item]] = []
    while pending:
        a, b = pending.pop()
        if a >= b:
            continue
        found = best_tandem(seq, a, b)
        if found is None:
            placed.append((a, Literal(a, b)))
            continue
        start, period, count = found
        placed.append((start, Repeat(count, _cover(seq, start, start + period))))
        pending.append((a, start))
        pending.append((start + period * count, b))
    for _, item in sorted(placed, key=lambda entry: entry[0]):
        items.append(item)
    return items


def expand_positions(items: list[Item], scale: dict[int, int] | None = None) -> np.ndarray:
    """The positions ``items`` stand for, in order; ``scale`` maps ``id()`` of a :class:`Repeat` to the
    count to use instead of its own."""
    parts = [_expand(item, scale or {}) for item in items]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _expand(item: Item, scale: dict[int, int]) -> np.ndarray:
    if isinstance(item, Literal):
        return np.arange(item.start, item.stop, dtype=np.int64)
    body = expand_positions(item.body, scale)
    return np.tile(body, scale.get(id(item), item.count))
