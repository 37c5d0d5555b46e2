"""What every command shares: the consoles, progress, notes, exit codes, and how an error is shown.

Output goes through rich: tables and results to :data:`stdout`, notes, progress and errors to
:data:`stderr` (progress only when stderr is a terminal). Exit codes (DESIGN.md): 0 done, 1 checks
failed (``validate`` errors, a failed fidelity check, a simulation that cannot finish), 2 bad input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from chakra.errors import ChakraError, PathLike
from chakra.io import AtomicFile

#: Exit codes shared by every command (DESIGN.md): checks failed, bad input, interrupted (128 + SIGINT).
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

stdout = Console()
stderr = Console(stderr=True)


def progress_bar() -> Progress:
    """A transient progress bar on stderr (hidden when stderr is not a terminal)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=not stderr.is_terminal,
    )


@contextmanager
def busy(message: str) -> Iterator[None]:
    """A spinner on stderr while long work runs (nothing when stderr is not a terminal)."""
    if not stderr.is_terminal:
        yield
        return
    with stderr.status(message):
        yield


def note(text: str) -> None:
    """A remark the user should read (yellow, on stderr): what an analysis could not see, files removed."""
    stderr.print(Text(f"note: {text}", style="yellow"), soft_wrap=True)


def print_json(data: Any) -> None:
    stdout.print_json(json.dumps(data))


def write_json(path: PathLike, data: Any) -> None:
    """Write a report as JSON, atomically."""
    with AtomicFile(path) as handle:
        handle.write(json.dumps(data, indent=1).encode())


def report_error(error: ChakraError | str) -> None:
    """One line on stderr, no traceback."""
    stderr.print(Text.assemble(("error: ", "bold red"), str(error)), soft_wrap=True)
