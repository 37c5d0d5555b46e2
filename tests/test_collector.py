"""How the cyclic garbage collector is held off around bulk building (:mod:`chakra.collector`): a
library caller's process keeps collecting what a block built, a batch process (the ``chakra``
command) leaves it out of later passes."""

from __future__ import annotations

import gc

from chakra.collector import batch_process, gc_paused


def _cycle() -> list[object]:
    """A list that holds itself: freed only by the cyclic collector."""
    looped: list[object] = []
    looped.append(looped)
    return looped


def test_a_paused_block_restores_the_collector_and_freezes_nothing_outside_a_batch_process():
    frozen_before = gc.get_freeze_count()
    with gc_paused():
        built = [[k] for k in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() == frozen_before
    assert len(built) == 1000


def test_cyclic_garbage_made_in_a_paused_block_is_still_collected_by_a_library_caller():
    with gc_paused():
        garbage = _cycle()
    alive = id(garbage)
    del garbage
    gc.collect()
    assert all(id(obj) != alive for obj in gc.get_objects())


def test_in_a_batch_process_what_a_paused_block_built_is_frozen_until_the_batch_ends():
    with batch_process():
        with gc_paused():
            built = [[k] for k in range(1000)]
        assert gc.get_freeze_count() >= len(built)
    assert gc.get_freeze_count() == 0
