"""MkDocs hook: the command-line reference, generated from the ``chakra`` Typer app at every build
(``reference/cli.md``), so that it cannot drift from ``--help``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import typer
from mkdocs.structure.files import File, Files

#: Where the generated page lies in the site.
PAGE = "reference/cli.md"


def commands(command: click.Command, words: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every leaf command under ``command``, with the words that name it (``("convert", "xla")``)."""
    if hasattr(command, "list_commands"):  # a group (typer ships its own click classes)
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                yield from commands(sub, (*words, name))
    else:
        yield words, command


def _option_row(param: click.Parameter) -> str:
    names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    help_text = " ".join((getattr(param, "help", None) or "").split()).replace("|", "\\|")
    default = param.default if not callable(param.default) else None
    kind = "argument" if param.param_type_name == "argument" else "option"
    shown = "" if default in (None, False, (), []) or kind == "argument" else f" (default: `{default}`)"
    return f"| {names} | {kind} | {help_text}{shown} |"


def page() -> str:
    """The reference page: every command, its help text (with its example) and its parameters."""
    from chakra.cli.main import app

    root = typer.main.get_command(app)
    lines = [
        "# Command reference",
        "",
        "Every `chakra` command, generated from the command-line app at build time (the same text as",
        "`chakra COMMAND --help`).",
        "",
    ]
    for words, command in commands(root, ()):
        name = " ".join(words)
        lines += [f"## `chakra {name}`", ""]
        lines += [_paragraphs(command.help or ""), ""]
        params = [p for p in command.params if p.name not in ("help",) and not getattr(p, "hidden", False)]
        if params:
            lines += ["| name | kind | what |", "|---|---|---|", *(_option_row(p) for p in params), ""]
    return "\n".join(lines) + "\n"


def _paragraphs(text: str) -> str:
    """A docstring's paragraphs as Markdown, its ``Example:`` line as a code block."""
    out = []
    for block in text.strip().split("\n\n"):
        joined = " ".join(block.split())
        if joined.startswith("Example:"):
            out.append(f"```sh\n{joined.removeprefix('Example:').strip()}\n```")
        else:
            out.append(joined)
    return "\n\n".join(out)


def api_modules() -> list[str]:
    """Every module of the package whose API the reference shows: all but the generated protobuf
    modules, the command-line modules (the command reference shows them) and private ones."""
    root = Path(__file__).resolve().parents[2] / "src"
    names = []
    for path in sorted((root / "chakra").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if "schema" in parts or "cli" in parts or any(p.startswith("_") for p in parts[1:]):
            continue
        names.append(".".join(parts))
    return names


def attributes_page() -> str:
    """The well-known node attributes, from the registry every reader and writer uses (chakra.attrs)."""
    from chakra.attrs import WELL_KNOWN

    lines = [
        "# Node attributes",
        "",
        "The attributes chakra-et reads and writes with a meaning, generated from its registry",
        "(`chakra.attrs.WELL_KNOWN`) at build time: the value kind consumers read, the `AttributeProto`",
        "member it is written in, its unit, and who needs it.",
        "",
        "| attribute | member | kind | unit | meaning | needed by |",
        "|---|---|---|---|---|---|",
    ]
    for spec in WELL_KNOWN.values():
        cells = [f"`{spec.name}`", f"`{spec.member}`", spec.kind, spec.unit, spec.doc, spec.required_by]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def on_config(config: Any) -> Any:
    """Every module's API page in the navigation, under Reference."""
    modules = [{name: f"reference/api/{name}.md"} for name in api_modules()]
    for section in config["nav"]:
        if isinstance(section, dict) and "Reference" in section:
            section["Reference"].append({"Modules": modules})
    return config


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=page()))
    files.append(File.generated(config, "reference/attributes.md", content=attributes_page()))
    for name in api_modules():
        files.append(File.generated(config, f"reference/api/{name}.md", content=f"::: {name}\n"))
    return files
