"""Record the two traces a Chakra conversion needs, in one profiler session so they join by id.

Per rank, :func:`collect` writes ``host.{rank}.json`` (the host execution trace, with the
``## process_group:init ##`` record when ``torch.distributed`` is initialised) and
``device.{rank}.json`` (the Kineto trace) into one folder, following the recipe of
``reference/pytorch-traces.md`` §4: the ``ExecutionTraceObserver`` is attached to the profiler (so
Kineto events carry the ``Record function id`` the host trace's ``rf_id`` joins to), shapes are
recorded, and on CUDA the experimental sync events are switched on.

Example (inside each rank, after ``dist.init_process_group``)::

    with collect("traces", warmup_steps=1, active_steps=2) as recorder:
        for batch in loader:
            train_step(batch)
            recorder.step()

The profiler records ``warmup_steps`` steps without keeping them, then ``active_steps`` steps,
then stops: call :meth:`TraceCollector.step` once per iteration, at least
``warmup_steps + active_steps`` times. Needs PyTorch (``pip install torch``).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from chakra.errors import ChakraInputError

HOST_FILE = "host.{rank}.json"
DEVICE_FILE = "device.{rank}.json"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ChakraInputError(
            "PyTorch is not installed", hint="pip install torch (the CPU build is enough for CPU/gloo jobs)"
        ) from None
    return torch


def _current_rank(torch: Any) -> int:
    dist = torch.distributed
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class TraceCollector:
    """Records one rank's host and device traces; use through :func:`collect`.

    ``host_path``/``device_path`` say where the files go; ``complete`` tells after the context
    ended whether the profiler's active window was reached and both files were written.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        rank: int | None = None,
        wait_steps: int = 0,
        warmup_steps: int = 1,
        active_steps: int = 1,
        record_shapes: bool = True,
    ):
        self._torch = _torch()
        self.out_dir = Path(out_dir)
        self.rank = _current_rank(self._torch) if rank is None else rank
        self.host_path = self.out_dir / HOST_FILE.format(rank=self.rank)
        self.device_path = self.out_dir / DEVICE_FILE.format(rank=self.rank)
        self._schedule = (wait_steps, warmup_steps, active_steps)
        self._record_shapes = record_shapes
        self._observer: Any = None
        self._profiler: Any = None
        self._device_written = False

    @property
    def complete(self) -> bool:
        return self._device_written and self.host_path.exists()

    def _export(self, profiler: Any) -> None:
        profiler.export_chrome_trace(str(self.device_path))
        self._device_written = True

    def __enter__(self) -> TraceCollector:
        torch = self._torch
        profiler_mod = torch.profiler
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._observer = profiler_mod.ExecutionTraceObserver()
        self._observer.register_callback(str(self.host_path))
        activities = [profiler_mod.ProfilerActivity.CPU]
        options: dict[str, Any] = {}
        if torch.cuda.is_available():
            activities.append(profiler_mod.ProfilerActivity.CUDA)
            # sync events give GPU->CPU and stream->stream edges without HTA (reference §2.7)
            options["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        wait, warmup, active = self._schedule
        self._profiler = profiler_mod.profile(
            activities=activities,
            schedule=profiler_mod.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            record_shapes=self._record_shapes,
            execution_trace_observer=self._observer,
            on_trace_ready=self._export,
            **options,
        )
        self._profiler.__enter__()
        return self

    def step(self) -> None:
        """Mark the end of one training iteration (emits the ``ProfilerStep#N`` annotations)."""
        self._profiler.step()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._profiler.__exit__(exc_type, exc, tb)
        finally:
            # finalises host.{rank}.json: without it the file is not valid JSON
            self._observer.unregister_callback()


def collect(out_dir: str | Path, **options: Any) -> TraceCollector:
    """A context manager recording this rank's ``host.{rank}.json`` and ``device.{rank}.json``
    into ``out_dir``; options as :class:`TraceCollector`."""
    return TraceCollector(out_dir, **options)
