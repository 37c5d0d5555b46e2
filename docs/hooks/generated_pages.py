"""MkDocs hook: the pages generated from the code at every build, so that they cannot drift from it:
the command reference (``reference/cli.md``, from the ``chakra`` Typer app), a page per module
(mkdocstrings), the node attributes (``attrs.WELL_KNOWN``) and the fidelity tolerances."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import typer
from mkdocs.structure.files import File, Files

#: Where the generated page lies in the site.
PAGE = "reference/cli.md"
#: A module's API page; searches rank it below the pages written to explain (its constants and
#: signatures match many words those pages are the better answer for).
API_PAGE = """---
search:
  boost: 0.0005
---
::: {module}
"""


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


def fidelity_page() -> str:
    """What each front end's fidelity check compares, with the tolerances the code states."""
    from chakra.flexflow.convert import FLEXFLOW_FIDELITY_TOLERANCE
    from chakra.kineto.workload import KINETO_FIDELITY_TOLERANCE
    from chakra.pytorch.workload import PYTORCH_FIDELITY_TOLERANCE
    from chakra.tensorflow.pipeline import TF_FIDELITY_TOLERANCE
    from chakra.xla.pipeline import XLA_FIDELITY_TOLERANCE

    rows = [
        ("PyTorch host + Kineto (`convert pytorch --check`)", PYTORCH_FIDELITY_TOLERANCE,
         "each rank replayed alone with its recorded durations, against its measured step"),
        ("Kineto alone (`convert kineto --check`)", KINETO_FIDELITY_TOLERANCE,
         "each rank replayed alone, against the measured span of the converted ProfilerStep"),
        ("JAX / XLA (`convert xla --check`)", XLA_FIDELITY_TOLERANCE,
         "each device replayed with the profiled op times, against the profiled step"),
        ("TensorFlow (`convert tensorflow --check`)", TF_FIDELITY_TOLERANCE,
         "each rank replayed, against the measured step of its worker"),
        ("FlexFlow (`convert flexflow --check`)", FLEXFLOW_FIDELITY_TOLERANCE,
         "every device replayed together, against the task graph's makespan"),
    ]  # fmt: skip
    lines = [
        "# Fidelity checks",
        "",
        "Every front end says how close its ETs are to what was measured: with `--check`, the converted",
        "graph is replayed by the core's list scheduler (`chakra.schedule`: one operation at a time per",
        "thread and stream, each after its dependencies, with the recorded durations) and the replayed",
        "step is compared with the measured one. The command fails when a rank lands outside the",
        "tolerance; `--json` reports every rank's figures (`FidelityCheck`). The tolerances, as the code",
        "states them (generated at build time):",
        "",
        "| front end | tolerance | what is compared |",
        "|---|---:|---|",
        *(f"| {name} | {tolerance:.0%} | {what} |" for name, tolerance, what in rows),
        "",
        "A check within tolerance says the graph's dependencies and durations reproduce the step as it",
        "ran; it does not say the step was typical (the converters take the complete step of median",
        "span) nor that a simulator given the ET predicts another system well.",
    ]
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
    files.append(File.generated(config, "concepts/fidelity.md", content=fidelity_page()))
    for name in api_modules():
        files.append(File.generated(config, f"reference/api/{name}.md", content=API_PAGE.format(module=name)))
    return files
