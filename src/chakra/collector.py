"""Pausing Python's cyclic garbage collector around bulk building.

Building millions of small acyclic objects (a host trace's nodes, a rank program's lists) makes the
collector run again and again, each pass walking every object alive: up to 3x the building time,
measured on host traces. :func:`gc_paused` holds it off for the block and restores it after.

Held off, the collector still walks those objects later: they wait in its youngest generation, and the
first passes after the block walk them all (a fifth of a 2,000-layer TensorFlow conversion). A
process that builds, writes and exits (the ``chakra`` command: :func:`batch_process`) has them
frozen instead as each block ends (``gc.freeze``: left out of every later pass, still freed when no
longer referenced); a library caller's process keeps the default, in which cyclic garbage made in a
block is still collected.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_batch = False  # inside batch_process(): blocks freeze what they built


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (it stays off if it was off); inside
    :func:`batch_process`, freeze what is alive when it ends.

    >>> with gc_paused():
    ...     gc.isenabled()
    False
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _batch:
            gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def batch_process() -> Iterator[None]:
    """Run the block as a batch job: what :func:`gc_paused` blocks built is frozen as each ends, and
    thawed (back in the collector's oldest generation) when the block ends, unless the process had
    frozen objects of its own before.

    >>> with batch_process():
    ...     with gc_paused():
    ...         built = [[k] for k in range(3)]
    ...     gc.get_freeze_count() > 0
    True
    """
    global _batch
    before = _batch
    thaw = not before and gc.get_freeze_count() == 0  # a caller's own frozen objects stay frozen
    _batch = True
    try:
        yield
    finally:
        _batch = before
        if thaw:
            gc.unfreeze()
