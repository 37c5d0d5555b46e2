"""The ``chakra`` command: argument parsing and error reporting; the work happens in the library."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from chakra import __version__
from chakra.errors import ChakraError

#: Exit codes shared by every command (DESIGN.md): checks failed, bad input.
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2

app = typer.Typer(
    name="chakra",
    help="Read, check and explain Chakra execution traces (.et files).\n\nExample: chakra info llama.0.et",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # docstrings are wrapped prose: markdown joins their lines into paragraphs (rich mode keeps the
    # line breaks of every paragraph after the first)
    rich_markup_mode="markdown",
)

stdout = Console()
stderr = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        stdout.print(f"chakra-et {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Read, check and explain Chakra execution traces."""


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


def report_error(error: ChakraError) -> None:
    """One line on stderr, no traceback."""
    stderr.print(Text.assemble(("error: ", "bold red"), str(error)), soft_wrap=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``chakra`` console script."""
    # the command modules register themselves on ``app`` when imported
    from chakra.cli import analyze_cmds, convert_cmds, generate_cmds, inspect_cmds, sim_cmds  # noqa: F401

    try:
        app(args=argv, prog_name="chakra")
    except ChakraError as error:
        report_error(error)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        stderr.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
