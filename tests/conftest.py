"""Fixtures of the chakra-et test suite; the helpers they use are in ``helpers.py``.

Fixtures: ``shared_data``, ``upstream_et_gz``, ``upstream_et``, ``upstream_et_bytes``,
``allreduce_workload``, ``gloo_training_traces``, ``gloo_traces``, ``full_disk``, ``read_only_disk``,
``no_processes``.
"""

from __future__ import annotations

import gzip
import inspect
import multiprocessing
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    DISK_SIZE,
    TRAINING_JOB_ARGS,
    UPSTREAM_ET_GZ,
    fill_disk,
    record_gloo,
    require_shared,
    tmpfs,
    write_allreduce_workload,
)


@pytest.fixture
def shared_data() -> Path:
    """The shared real-trace folder (skip/fail as in :func:`require_shared` when absent)."""
    return require_shared()


@pytest.fixture(scope="session")
def upstream_et_gz() -> Path:
    """The gzip-compressed upstream trace, read in place (read-only)."""
    return require_shared(UPSTREAM_ET_GZ)


@pytest.fixture(scope="session")
def upstream_et_bytes(upstream_et_gz: Path) -> bytes:
    """The raw bytes of the decompressed upstream ``chakra.0.et`` (3,664 nodes)."""
    return gzip.decompress(upstream_et_gz.read_bytes())


@pytest.fixture
def upstream_et(tmp_path: Path, upstream_et_bytes: bytes) -> Path:
    """The upstream ``chakra.0.et`` decompressed into a fresh tmp dir as a plain file (3,664 nodes)."""
    path = tmp_path / "chakra.0.et"
    path.write_bytes(upstream_et_bytes)
    return path


@pytest.fixture
def allreduce_workload(tmp_path: Path) -> Path:
    """A 4-rank all-reduce workload in a fresh tmp dir; returns its prefix ``tmp/workload``."""
    return write_allreduce_workload(tmp_path, "workload", 4)


@pytest.fixture(scope="session")
def gloo_training_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """host/device traces of a real 2-rank gloo DDP training job whose steps are mostly compute."""
    return record_gloo(tmp_path_factory.mktemp("gloo_training"), *TRAINING_JOB_ARGS)


@pytest.fixture(scope="session")
def gloo_job(gloo_training_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded 2-rank gloo DDP training job, converted: the prefix of its ``job.{rank}.et``."""
    from helpers import run_cli

    prefix = tmp_path_factory.mktemp("gloo_job") / "job"
    host, device = gloo_training_traces / "host.{rank}.json", gloo_training_traces / "device.{rank}.json"
    done = run_cli("convert", "pytorch", "--host", str(host), "--device", str(device), "-o", str(prefix))
    assert done.returncode == 0, done.stderr
    return prefix


@pytest.fixture(scope="session")
def gloo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of host.{rank}.json + device.{rank}.json recorded from a real 2-rank gloo job
    (DDP training plus every collective and a send/recv ring), once per test session."""
    return record_gloo(tmp_path_factory.mktemp("gloo_traces"))


@pytest.fixture(scope="session")
def gloo_groups_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """host/device traces of a real 4-rank gloo job of nested process groups (world, DP and TP
    pairs, a trio) issuing every collective on each, plus ``program.{rank}.json``, once per session."""
    from helpers import record_gloo_groups

    return record_gloo_groups(tmp_path_factory.mktemp("gloo_groups"))


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs, filled up (root only: skipped elsewhere)."""
    with tmpfs(tmp_path / "full", f"size={DISK_SIZE}") as folder:
        fill_disk(folder)
        yield folder


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs mounted read-only (root only: skipped elsewhere)."""
    with tmpfs(tmp_path / "read_only", f"size={DISK_SIZE},ro") as folder:
        yield folder


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a process through multiprocessing fails the test (a dry run, or a refusal before any
    rank starts, must start none)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(multiprocessing, "get_context", refuse)


# -- tiers: `make test-quick` leaves out what records a live job or runs an outside binary ---------

#: Fixtures that record a live job (PyTorch with gloo in worker processes): a test using one is live.
LIVE_FIXTURES = frozenset({"gloo_training_traces", "gloo_job", "gloo_traces", "gloo_groups_traces"})
#: Modules whose every test runs a framework or starts rank processes itself.
LIVE_MODULES = frozenset(
    {
        "test_hardware_replay",
        "test_tensorflow",
        "test_pytorch_groups_live",
        "test_xla_module",
        "test_pytorch_collect",
        "test_demo",
    }
)
#: What in a test's own code records a live job or starts rank processes.
LIVE_CALLS = re.compile(r"record_gloo|examples/|EXAMPLES? /|torchrun|replay_workload\(|\"replay\", str\(")
#: What in a test's own code runs an outside binary: ASTRA-sim's builds, a headless Chromium.
BINARY_CALLS = re.compile(r"run_astra_sim|_printed_by_every_rank|ASTRA_SIM|chromium\(|BrowserPage\(")


def _source(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    try:
        return inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return ""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test ``live`` (it records a job with a framework, or runs ranks as processes) or
    ``binaries`` (it runs ASTRA-sim's binaries or Chromium), from its fixtures, module and code."""
    for item in items:
        module = item.module.__name__ if getattr(item, "module", None) is not None else ""
        source = _source(item)
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & LIVE_FIXTURES or module in LIVE_MODULES or LIVE_CALLS.search(source):
            item.add_marker(pytest.mark.live)
        if BINARY_CALLS.search(source):
            item.add_marker(pytest.mark.binaries)
