"""The ``chakra`` command: the verb groups of the other modules, composed into one app at import.

Each ``*_cmds`` module builds its own Typer app; this module adds them to :data:`app`, whose group
turns a :class:`~chakra.errors.ChakraError` from any command into one line and exit code 2, in
process too: ``typer.testing.CliRunner().invoke(app, [...])`` runs any command. A command-line
mistake (an unknown option, a value of the wrong type) is typer's usage message, also exit code 2.
"""

from __future__ import annotations

import copy
import os
import signal
import sys
from typing import Any

import typer
from typer.main import get_command_name

from chakra import __version__
from chakra.cli import (
    adapt_cmds,
    analyze_cmds,
    collective_cmds,
    convert_cmds,
    generate_cmds,
    inspect_cmds,
    replay_cmds,
    share_cmds,
    sim_cmds,
    synth_cmds,
)
from chakra.cli.console import EXIT_BAD_INPUT, EXIT_INTERRUPTED, CommandGroup, report_error, stderr, stdout
from chakra.collector import batch_process
from chakra.errors import ChakraError


class ChakraGroup(CommandGroup):
    """The root command group: errors of the library become one line and an exit code."""

    # typer's own click (typer._click) declares the context type; typer.Context is its public subclass
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except ChakraError as error:
            report_error(error)
            ctx.exit(EXIT_BAD_INPUT)
        except KeyboardInterrupt:
            stderr.print("interrupted")
            ctx.exit(EXIT_INTERRUPTED)


app = typer.Typer(
    name="chakra",
    cls=ChakraGroup,
    help="Read, check and explain Chakra execution traces (.et files).\n\nExample: chakra info llama.0.et",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # docstrings are wrapped prose: markdown joins their lines into paragraphs (rich mode keeps the
    # line breaks of every paragraph after the first)
    rich_markup_mode="markdown",
)
COMMAND_GROUPS = (
    inspect_cmds,
    adapt_cmds,
    convert_cmds,
    generate_cmds,
    collective_cmds,
    sim_cmds,
    analyze_cmds,
    replay_cmds,
    share_cmds,
    synth_cmds,
)
for commands in (group.app for group in COMMAND_GROUPS):
    app.add_typer(commands)


def _version(value: bool) -> None:
    if value:
        stdout.print(f"chakra-et {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Read, check and explain Chakra execution traces."""


#: numpy's OpenBLAS starts a thread per core when numpy is imported; chakra does no linear algebra,
#: so the command asks for one (measured: a third of numpy's import CPU on this 2-core machine, more
#: on large ones). A value the user set is kept.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the command as an exception would: the ``with`` blocks of the writers run, so no
    temporary or half-written file stays (the default action kills the process where it stands)."""
    raise SystemExit(SIGNAL_EXIT_BASE + signum)


#: A process stopped by signal N exits with 128 + N, as shells report it.
SIGNAL_EXIT_BASE = 128


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``chakra`` console script."""
    os.environ.setdefault(BLAS_THREADS_ENV, "1")
    signal.signal(signal.SIGTERM, _stop)
    args = sys.argv[1:] if argv is None else argv
    with batch_process():  # the command builds, writes and exits: see chakra.collector
        app_for(args)(args=args, prog_name="chakra")


def app_for(args: list[str]) -> typer.Typer:
    """The app holding only the command or group ``args`` start with, else the whole app: typer
    builds every command's parameters before it runs one (0.04 s of the 0.3 s a command takes at
    the least), and the others are not needed. Help, errors and outputs are the whole app's."""
    if not args or args[0].startswith("-"):
        return app
    name, kept = args[0], []
    for info in app.registered_groups:  # each module's commands, merged into the root
        commands = info.typer_instance
        if commands is None:
            return app
        groups = [group for group in commands.registered_groups if group.name == name]
        named = [
            command for command in commands.registered_commands
            if (command.name or get_command_name(command.callback.__name__ if command.callback else "")) == name
        ]  # fmt: skip
        if groups or named:
            part = copy.copy(commands)
            part.registered_groups, part.registered_commands = groups, named
            trimmed_info = copy.copy(info)
            trimmed_info.typer_instance = part
            kept.append(trimmed_info)
    if not kept:
        return app  # not a command: the whole app names the mistake and what is near it
    trimmed = copy.copy(app)
    trimmed.registered_groups = kept
    return trimmed


if __name__ == "__main__":
    main()
