"""Helpers shared by test modules (import them with ``from helpers import run_cli, ...``).

* :func:`run_cli` -- run the ``chakra`` command in a fresh process, capturing its output.
* :func:`assert_one_line_error` -- a refused input: exit code 2, one line on stderr, no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: The folder of the interpreter running the tests: the ``chakra`` command's own environment.
BIN = Path(sys.executable).parent


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``chakra ARGS...`` as a user runs it, 200 columns wide so that rich wraps no line."""
    return subprocess.run(
        [sys.executable, "-m", "chakra", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": str(BIN), "HOME": str(cwd or Path.cwd())},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """The command refused its input the way the CLI promises: exit code 2, no traceback, one
    line on stderr containing every fragment."""
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
