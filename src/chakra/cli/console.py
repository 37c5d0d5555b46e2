"""What every command shares: the consoles, progress, notes, exit codes, and how an error is shown.

Output goes through rich: tables and results to :data:`stdout`, notes, progress and errors to
:data:`stderr` (progress only when stderr is a terminal). Exit codes (DESIGN.md): 0 done, 1 checks
failed (``validate`` errors, a failed fidelity check, a simulation that cannot finish), 2 bad input.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from chakra.errors import ChakraError, PathLike

# Start-up (``chakra --help`` under 0.5 s) imports only what every command needs: progress bars and
# the library's writers are imported when a command uses them.
if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from rich.table import Table

#: Exit codes shared by every command (DESIGN.md): checks failed, bad input, interrupted (128 + SIGINT).
EXIT_CHECKS_FAILED = 1
#: A decorated command function (:func:`quoting`).
F = TypeVar("F", bound=Callable[..., Any])
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

stdout = Console()
stderr = Console(stderr=True)


def progress_bar() -> Progress:
    """A transient progress bar on stderr (hidden when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
def stage_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A :func:`progress_bar` with a bar per stage, and the ``(stage, done, total)`` callback that
    drives it (what the library's long passes tell)."""
    with progress_bar() as progress:
        tasks: dict[str, TaskID] = {}

        def tell(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done)

        yield tell


@contextmanager
def busy(message: str) -> Iterator[None]:
    """A spinner on stderr while long work runs (nothing when stderr is not a terminal)."""
    if not stderr.is_terminal:
        yield
        return
    with stderr.status(message):
        yield


#: Measuring a table without the console's width limit: its true minimum width.
_UNBOUNDED_WIDTH = 1 << 20


def print_table(table: Table) -> None:
    """Print a table on :data:`stdout` whole: when even its minimum width (numbers never wrap) is more
    than the console's, it is drawn at that width and left uncropped (the terminal wraps the lines)
    rather than letting rich cut numbers short (``446.3…``)."""
    from rich.measure import Measurement

    needed = Measurement.get(stdout, stdout.options.update(max_width=_UNBOUNDED_WIDTH), table).minimum
    if needed > stdout.width:
        table.width = needed
        stdout.print(table, crop=False)
        return
    stdout.print(table)


def note(text: str) -> None:
    """A remark the user should read (yellow, on stderr): what an analysis could not see, files removed."""
    stderr.print(Text(f"note: {text}", style="yellow"), soft_wrap=True)


def print_json(data: Any) -> None:
    stdout.print_json(json.dumps(data))


def write_json(path: PathLike, data: Any) -> None:
    """Write a report as JSON, atomically."""
    from chakra.io import AtomicFile

    with AtomicFile(path) as handle:
        handle.write(json.dumps(data, indent=1).encode())


def emit_results(data: Any, report: PathLike | None, as_json: bool) -> bool:
    """Write ``data`` to ``report`` when given and print it as JSON when ``as_json``; returns whether
    it was printed (the caller renders its tables otherwise)."""
    if report is not None:
        write_json(report, data)
    if as_json:
        print_json(data)
    return as_json


def report_error(error: ChakraError | str) -> None:
    """One line on stderr, no traceback."""
    stderr.print(Text.assemble(("error: ", "bold red"), str(error)), soft_wrap=True)


def late_help(**texts: Callable[[], str]) -> type[TyperCommand]:
    """A command class (``@app.command(cls=late_help(target=...))``) whose parameters' help texts
    quote the library (``parameter name -> function returning the text``): the functions run only
    when the command's help is shown, so its module need not import the library at start-up."""

    class LateHelpCommand(TyperCommand):
        # typer's own click (typer._click) declares the context and formatter types
        def format_help(self, ctx: Any, formatter: Any) -> None:
            for param in self.params:
                if param.name in texts and isinstance(param, TyperOption | TyperArgument):
                    param.help = inspect.cleandoc(texts[param.name]())
            super().format_help(ctx, formatter)

    return LateHelpCommand


def quoting(**values: object) -> Callable[[F], F]:
    """A command whose help states library values: ``{NAME}`` in its docstring becomes
    ``values["NAME"]`` (so a figure a help text quotes is defined once, in the library).

    >>> @quoting(LIMIT=16)
    ... def listed() -> None:
    ...     'Past {LIMIT} ranks, grouped.'
    >>> listed.__doc__
    'Past 16 ranks, grouped.'
    """

    def fill(command: F) -> F:
        text = command.__doc__ or ""
        for name, value in values.items():
            text = text.replace("{" + name + "}", str(value))
        command.__doc__ = text
        return command

    return fill


class CommandGroup(TyperGroup):
    """A command group (``typer.Typer(cls=CommandGroup)``) that passes its commands on without pydantic.

    typer coerces every parameter value that is not already a bool through a pydantic TypeAdapter,
    built on first use (importing pydantic: about 0.1 to 0.2 s). A group's own help flag is None
    when not given, so every group on the way to ``chakra COMMAND --help`` would pay for it; False is
    the same "not given" and needs no coercion.
    """

    # typer's own click (typer._click) declares the context and option types
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option
