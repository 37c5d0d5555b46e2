"""The tutorials run as written: every ``sh`` block of a tutorial, in order, in one shell that stops
at the first failing command, from a folder that looks like the repository's root (``examples/``
and ``tests/`` there) with ``chakra`` and ``python`` of this environment on the path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = REPO / "docs" / "tutorials"
#: A fenced shell block of a page.
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: Tutorials that record a job with PyTorch, JAX or TensorFlow or run ranks as processes (the ``live`` tier).
RECORDING = {"pytorch-to-astra-sim", "profiler-trace-alone", "jax-and-tensorflow", "replay"}


def shell_blocks(page: Path) -> list[str]:
    """The ``sh`` blocks of ``page``, in order."""
    return SH_BLOCK.findall(page.read_text())


def run_tutorial(page: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    for shipped in ("examples", "tests"):
        (folder / shipped).symlink_to(REPO / shipped)
    (folder / "out").mkdir()
    script = "set -euo pipefail\n" + "\n".join(shell_blocks(page))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, "COLUMNS": "100"}, timeout=900)  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(p.stem, marks=[pytest.mark.live] if p.stem in RECORDING else [])
        for p in sorted(TUTORIALS.glob("*.md"))
    ],
)
def test_a_tutorial_runs_as_written(name: str, tmp_path: Path):
    page = TUTORIALS / f"{name}.md"
    assert shell_blocks(page), f"{page.name} has no sh block to run"
    done = run_tutorial(page, tmp_path)
    assert done.returncode == 0, f"{page.name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
