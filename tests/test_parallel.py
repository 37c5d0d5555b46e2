"""chakra.parallel.map_ranks: one call per item, results in item order, failures named.

The worker functions are top-level functions of this module: worker processes (forkserver, spawn,
Dask) receive them by reference and import this module to find them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest

from chakra import parallel
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.parallel import map_ranks

#: Per-step delay that makes later items finish first, so order is not an accident of timing.
STAGGER_S = 0.05


def square_late_first(n: int) -> int:
    time.sleep((4 - n) * STAGGER_S)
    return n * n


def process_id(_: object) -> int:
    return os.getpid()


def truncated_at_rank_two(rank: int) -> int:
    if rank == 2:
        raise ChakraFormatError("truncated record", path=f"run.{rank}.et", offset=12, node_index=3, hint="re-record")
    return rank


def value_error_at_rank_two(rank: int) -> int:
    if rank == 2:
        raise ValueError("bad rank")
    return rank


@pytest.fixture(scope="module")
def dask_scheduler() -> Iterator[str]:
    """Address of a two-process Dask cluster shared by this module's Dask tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_local_processes_return_results_in_item_order() -> None:
    assert map_ranks(square_late_first, [0, 1, 2, 3], workers=2) == [0, 1, 4, 9]


def test_local_processes_run_outside_the_caller() -> None:
    assert os.getpid() not in map_ranks(process_id, [0, 1], workers=2)


def test_one_worker_runs_in_the_calling_process() -> None:
    assert map_ranks(process_id, [0, 1, 2], workers=1) == [os.getpid()] * 3


def test_in_process_path_accepts_functions_that_cannot_be_pickled() -> None:
    assert map_ranks(lambda n: n + 1, [1], workers=4) == [2]


def test_progress_counts_up_to_total_once_per_item() -> None:
    calls: list[tuple[int, int]] = []
    map_ranks(square_late_first, [0, 1, 2, 3], workers=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_no_items_give_no_results() -> None:
    assert map_ranks(square_late_first, []) == []


def test_workers_below_one_are_refused() -> None:
    with pytest.raises(ChakraInputError, match="workers must be at least 1"):
        map_ranks(square_late_first, [1, 2], workers=0)


def test_unpicklable_function_is_refused_with_a_hint() -> None:
    with pytest.raises(ChakraInputError) as info:
        map_ranks(lambda n: n, [1, 2], workers=2)
    assert info.value.hint is not None and "top level" in info.value.hint


def test_chakra_error_in_a_worker_reaches_the_caller_unchanged() -> None:
    with pytest.raises(ChakraFormatError) as info:
        map_ranks(truncated_at_rank_two, [0, 1, 2, 3], workers=2)
    error = info.value
    assert (error.message, error.path, error.offset, error.node_index, error.hint) == (
        "truncated record",
        "run.2.et",
        12,
        3,
        "re-record",
    )
    assert not getattr(error, "__notes__", [])


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes arrived in Python 3.11")
@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "processes"])
def test_other_exception_is_reraised_with_the_failing_item_named(workers: int) -> None:
    with pytest.raises(ValueError, match="bad rank") as info:
        map_ranks(value_error_at_rank_two, [0, 1, 2, 3], workers=workers, description="summarize")
    assert info.value.__notes__ == ["while running summarize of item 2 of 4: 2"]


def test_dask_local_cluster_returns_results_in_item_order() -> None:
    pytest.importorskip("distributed")
    assert map_ranks(square_late_first, [0, 1, 2, 3], workers=2, scheduler="local") == [0, 1, 4, 9]


def test_a_local_dask_cluster_leaves_the_callers_environment_as_it_was() -> None:
    pytest.importorskip("distributed")
    import os

    before = dict(os.environ)
    map_ranks(square_late_first, [0, 1], workers=2, scheduler="local")
    assert dict(os.environ) == before  # Dask's nannies set OMP_NUM_THREADS=1 here otherwise


def test_dask_scheduler_address_returns_results_in_item_order_with_progress(dask_scheduler: str) -> None:
    calls: list[tuple[int, int]] = []
    results = map_ranks(
        square_late_first,
        [0, 1, 2, 3],
        scheduler=dask_scheduler,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert results == [0, 1, 4, 9]
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_chakra_error_on_a_dask_worker_reaches_the_caller_unchanged(dask_scheduler: str) -> None:
    with pytest.raises(ChakraFormatError) as info:
        map_ranks(truncated_at_rank_two, [0, 1, 2, 3], scheduler=dask_scheduler)
    assert (info.value.path, info.value.offset, info.value.hint) == ("run.2.et", 12, "re-record")


def test_unreachable_scheduler_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(parallel, "DASK_CONNECT_TIMEOUT", "1s")  # the default waits longer than a test should
    with pytest.raises(ChakraInputError, match=r"tcp://127\.0\.0\.1:1\b"):
        map_ranks(square_late_first, [1, 2], scheduler="tcp://127.0.0.1:1")


def test_missing_dask_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # makes the import fail
    with pytest.raises(ChakraInputError) as info:
        map_ranks(square_late_first, [1, 2], scheduler="local")
    assert info.value.hint == "pip install 'chakra-et[dask]'"
