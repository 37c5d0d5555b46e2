"""``chakra jsonize`` and ``chakra dejsonize``: .et <-> JSON."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from chakra import jsonize as jsonize_lib
from chakra.cli.main import app, busy, stderr, stdout


@app.command()
def jsonize(
    input_file: Path = typer.Argument(..., help="The .et file (plain, .gz or .zst)."),
    output_file: Path = typer.Argument(..., help="Where to write the JSON (.json, or .jsonl with --lines)."),
    lines: bool = typer.Option(False, "--lines", help="Write JSON Lines: metadata first, then one node per line."),
) -> None:
    """Write a trace as one valid JSON document (or JSON Lines), in the proto3 JSON mapping.

    Example: chakra jsonize llama.0.et llama.0.json
    """
    with busy(f"writing {output_file}"):
        result = jsonize_lib.jsonize(input_file, output_file, lines=lines)
    stdout.print(Text(f"wrote {result.nodes:,} nodes to {output_file}"))
    if result.nodes_with_unknown_fields:
        stderr.print(
            Text(
                f"warning: {result.nodes_with_unknown_fields:,} nodes carry protobuf fields unknown to "
                "this schema; JSON cannot hold them and they were dropped",
                style="yellow",
            )
        )


@app.command()
def dejsonize(
    input_file: Path = typer.Argument(
        ..., help="JSON from `chakra jsonize` (document or lines) or upstream chakra_jsonizer."
    ),
    output_file: Path = typer.Argument(..., help="The .et file to write (.gz/.zst compress)."),
) -> None:
    """Turn JSON back into the identical .et file.

    Example: chakra dejsonize llama.0.json llama.0.et
    """
    with busy(f"writing {output_file}"):
        count = jsonize_lib.dejsonize(input_file, output_file)
    stdout.print(Text(f"wrote {count:,} nodes to {output_file}"))
