"""Run a function once per item (typically once per rank): local processes, or a Dask cluster.

:func:`map_ranks` is the one entry point. Without a scheduler it uses a local process pool; with a
Dask scheduler address it sends the work to that cluster (``pip install 'chakra-et[dask]'``), and
with ``scheduler="local"`` it starts a throw-away Dask cluster on this machine for the call.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import reprlib
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import ExitStack
from typing import Any, NoReturn, TypeVar

from chakra.errors import ChakraError, ChakraInputError

T = TypeVar("T")
R = TypeVar("R")

#: ``scheduler`` value that starts a Dask ``LocalCluster`` on this machine for the one call.
LOCAL_CLUSTER = "local"

#: How long to wait for a Dask scheduler to answer. A reachable one answers in milliseconds; an
#: unreachable one would otherwise stall the call for Dask's default of 30 s.
DASK_CONNECT_TIMEOUT = "10s"

#: What to tell users whose environment lacks Dask.
DASK_INSTALL_HINT = "pip install 'chakra-et[dask]'"


def map_ranks(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    description: str = "",
) -> list[R]:
    """Return ``[fn(item) for item in items]``, computed in parallel, in the order of ``items``.

    ``scheduler=None`` runs a pool of ``workers`` local processes (default: one per item, at most
    one per CPU). With one worker or one item it runs in this process instead: no start-up cost, and
    breakpoints and profilers work. ``fn`` must then be a top-level function of an importable module.
    ``scheduler`` may also be a Dask scheduler address (``"tcp://host:8786"``; the cluster decides
    how many workers) or ``"local"`` for a Dask cluster of ``workers`` processes started for this call.

    ``progress(done, total)`` is called in this process after each item finishes, in finishing order.
    ``description`` names the work in error messages (e.g. ``"summarize"``).

    When items fail, the remaining work is cancelled and the failure of the lowest item index among
    those failed so far is raised: a :class:`ChakraError` unchanged, any other exception with a note
    naming the item. Raises :class:`ChakraInputError` for bad arguments or an unusable scheduler.
    """
    if workers is not None and workers < 1:
        raise ChakraInputError(f"workers must be at least 1, got {workers}", hint="omit it for one per CPU")
    if not items:
        return []
    workers = workers or min(len(items), os.cpu_count() or 1)
    if scheduler is not None:
        return _map_dask(fn, items, scheduler, workers, progress, description)
    if workers == 1 or len(items) == 1:
        return _map_in_process(fn, items, progress, description)
    return _map_processes(fn, items, workers, progress, description)


def _map_in_process(
    fn: Callable[[T], R], items: Sequence[T], progress: Callable[[int, int], None] | None, description: str
) -> list[R]:
    results = []
    for i, item in enumerate(items):
        try:
            results.append(fn(item))
        except Exception as exc:
            _name_failed_item(exc, i, items, description)
            raise
        if progress:
            progress(i + 1, len(items))
    return results


def _map_processes(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    progress: Callable[[int, int], None] | None,
    description: str,
) -> list[R]:
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise ChakraInputError(
            f"{fn!r} cannot be sent to worker processes: {exc}",
            hint="pass a function defined at the top level of a module, or workers=1",
        ) from exc
    # Not plain fork: the caller may run threads (torch does), and forking those can deadlock.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(fn, item) for item in items]
        for done, future in enumerate(as_completed(futures), start=1):
            if future.exception() is not None:
                failed = {i: f.exception() for i, f in enumerate(futures) if _failed(f)}
                for pending in futures:
                    pending.cancel()
                _raise_first(failed, items, description)
            if progress:
                progress(done, len(items))
        return [future.result() for future in futures]


def _failed(future: Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is not None


def _map_dask(
    fn: Callable[[T], R],
    items: Sequence[T],
    scheduler: str,
    workers: int,
    progress: Callable[[int, int], None] | None,
    description: str,
) -> list[R]:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_as_completed
    except ImportError as exc:
        raise ChakraInputError("running on a Dask scheduler needs dask[distributed]", hint=DASK_INSTALL_HINT) from exc
    with ExitStack() as stack:
        if scheduler == LOCAL_CLUSTER:
            # Dask's nannies set OMP_NUM_THREADS=1 and friends in *this* process's environment for
            # the workers they spawn; give the caller (and the processes it starts later) its own back.
            stack.callback(_restore_environment, dict(os.environ))
            # No dashboard: its fixed port would clash between concurrent calls and is not needed here.
            cluster = LocalCluster(processes=True, n_workers=workers, threads_per_worker=1, dashboard_address=None)
            stack.enter_context(cluster)
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout=DASK_CONNECT_TIMEOUT))
            except (OSError, ValueError) as exc:
                raise ChakraInputError(
                    f"cannot use the Dask scheduler at {scheduler}: {exc}",
                    hint=f"start one with `dask scheduler` and check the address, or use scheduler={LOCAL_CLUSTER!r}",
                ) from exc
        futures = client.map(fn, items, pure=False)
        index_of = {future.key: i for i, future in enumerate(futures)}
        for done, future in enumerate(dask_as_completed(futures), start=1):
            if future.status == "error":
                failed = {
                    index_of[f.key]: f.exception().with_traceback(f.traceback()) for f in futures if f.status == "error"
                }
                client.cancel(futures)
                _raise_first(failed, items, description)
            if progress:
                progress(done, len(items))
        return client.gather(futures)


def _raise_first(failed: dict[int, BaseException | None], items: Sequence[Any], description: str) -> NoReturn:
    """Raise the failure of the lowest item index (item order, not finishing order: reproducible)."""
    index = min(failed)
    exc = failed[index]
    assert exc is not None
    _name_failed_item(exc, index, items, description)
    raise exc


def _name_failed_item(exc: BaseException, index: int, items: Sequence[Any], description: str) -> None:
    # ChakraErrors already name their file and position; other exceptions need the item to be found.
    if isinstance(exc, ChakraError) or sys.version_info < (3, 11):
        return
    work = f"{description} of " if description else ""
    exc.add_note(f"while running {work}item {index} of {len(items)}: {reprlib.repr(items[index])}")


def _restore_environment(saved: dict[str, str]) -> None:
    """Put ``os.environ`` back as ``saved`` had it."""
    for key in set(os.environ) - set(saved):
        del os.environ[key]
    os.environ.update(saved)
