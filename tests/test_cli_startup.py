"""The ``chakra`` command starts without the library's heavy parts: importing the app and showing
help import none of them; each command imports what it needs when it runs (issue 14: start-up under
0.5 s). No timings here, the machine is shared: ``benchmarks/startup_bench.py`` measures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import run_cli

#: Third-party packages the CLI must not import at start-up: the array, plotting, protobuf, typed
#: config, YAML, compression, JSON and cluster libraries the commands use, and pydantic (typer builds
#: a pydantic TypeAdapter for a parameter value it has to coerce).
HEAVY = frozenset(
    {
        "dask",
        "distributed",
        "google",
        "matplotlib",
        "msgspec",
        "networkx",
        "numpy",
        "orjson",
        "pandas",
        "pydantic",
        "scipy",
        "torch",
        "yaml",
        "zstandard",
    }
)
#: Parts of chakra that only a running command needs (they import the packages above).
LIBRARY = ("chakra.io", "chakra.table", "chakra.trace", "chakra.schema", "chakra.sim", "chakra.pytorch")
#: ... except the light modules of their packages that hold the choices the parser offers.
LIGHT = frozenset({"chakra.sim", "chakra.sim.choices"})

#: Run in a fresh interpreter: what ``chakra ARGS`` (or only the import, without ARGS) leaves in
#: ``sys.modules``, as JSON on the last line of stdout.
PROBE = """
import json, sys
from chakra.cli.main import main
args = sys.argv[1:]
if args:
    try:
        main(args)
    except SystemExit:
        pass
print()
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def heavy_of(modules: set[str]) -> list[str]:
    return sorted(
        name
        for name in modules
        if name.split(".")[0] in HEAVY
        or (name not in LIGHT and any(name == part or name.startswith(part + ".") for part in LIBRARY))
    )


def test_importing_the_cli_imports_no_heavy_module():
    assert heavy_of(loaded_after()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["simulate", "--help"],
        ["info", "--help"],
        ["analyze", "breakdown", "--help"],
        ["generate", "micro", "--help"],
    ],
    ids=" ".join,
)
def test_help_imports_no_heavy_module(args: list[str]):
    # the groups on the way (chakra, analyze, generate) pass the command on without pydantic too
    assert heavy_of(loaded_after(*args)) == []


def test_a_command_imports_its_library_when_it_runs(tmp_path):
    modules = loaded_after("generate", "micro", "ALL_REDUCE", "-o", str(tmp_path), "--ranks", "2")

    assert (tmp_path / "ALL_REDUCE.1.et").exists()
    assert {"chakra.generate.micro", "numpy"} <= modules
    others = (n for n in modules if n not in LIGHT)
    assert not any(name.startswith(("chakra.sim", "chakra.pytorch", "matplotlib")) for name in others)


def test_a_running_command_does_not_import_pydantic(tmp_path):
    # typer from 0.29 coerces every option value through pydantic (0.1 s of start-up): pinned below
    modules = loaded_after("generate", "micro", "ALL_REDUCE", "-o", str(tmp_path), "--ranks", "2")
    assert not any(name.split(".")[0] in ("pydantic", "pydantic_core") for name in modules)


def test_help_texts_quoting_the_library_are_filled_in_when_shown():
    from chakra.adapt.rules import RULES
    from chakra.pytorch.workload import PYTORCH_FIDELITY_TOLERANCE

    adapt = run_cli("adapt", "--help").stdout
    convert = run_cli("convert", "pytorch", "--help").stdout

    # rich wraps the option help over lines: compare the words
    assert " ".join(RULES[next(iter(RULES))].description.split()[:2]) in " ".join(adapt.split())
    assert f"more than {PYTORCH_FIDELITY_TOLERANCE:.0%}" in " ".join(convert.split())


def test_the_package_reexports_resolve_on_first_use():
    import chakra
    from chakra.schema.protobuf.et_def_pb2 import Node
    from chakra.workload import Workload, open_workload

    assert chakra.Node is Node and chakra.Workload is Workload and chakra.open is open_workload
    assert {"Node", "Trace", "open", "__version__"} <= set(dir(chakra))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = chakra.nothing  # type: ignore[attr-defined]


def test_moved_choices_and_defaults_are_the_same_objects_where_they_were():
    from chakra import validate
    from chakra.analyze import breakdown, choices
    from chakra.generate import micro, micro_defaults
    from chakra.validate import rank
    from chakra.viz import choices as viz_choices
    from chakra.viz import report

    assert breakdown.Timing is choices.Timing and breakdown.RankBy is choices.RankBy
    assert report.PlotKind is viz_choices.PlotKind
    assert micro.DEFAULT_NUM_NPUS == micro_defaults.DEFAULT_NUM_NPUS
    assert validate.ASTRA_UNSUPPORTED_COLLECTIVES is rank.ASTRA_UNSUPPORTED_COLLECTIVES


def _every_invocation_of_help() -> list[list[str]]:
    """``NAME --help`` for every top-level command and group, and ``GROUP SUB --help`` for each of a
    group's commands (and a group alone, which shows its usage)."""
    import typer.main

    from chakra.cli.main import app

    root = typer.main.get_command(app)
    context = root.make_context("chakra", [], resilient_parsing=True)
    out = []
    for name in root.list_commands(context):  # type: ignore[attr-defined]
        out.append([name, "--help"])
        command = root.get_command(context, name)  # type: ignore[attr-defined]
        if hasattr(command, "list_commands"):
            out.append([name])
            sub_context = command.make_context(name, [], parent=context, resilient_parsing=True)
            out.extend([name, sub, "--help"] for sub in command.list_commands(sub_context))
    assert len(out) > 40  # every command of the CLI
    return out


def test_the_app_of_one_command_helps_and_errs_as_the_whole_app():
    from helpers import CLI_COLUMNS
    from typer.testing import CliRunner

    from chakra.cli import console
    from chakra.cli.main import app, app_for

    console.stdout.width = console.stderr.width = CLI_COLUMNS
    runner = CliRunner(env={"COLUMNS": str(CLI_COLUMNS)})
    invocations = [*_every_invocation_of_help(), ["conver", "pytorch"], ["convert", "tensorflw"], ["info"]]
    for args in invocations:
        whole, one = runner.invoke(app, args), runner.invoke(app_for(args), args)
        assert (one.exit_code, one.stdout, one.stderr) == (whole.exit_code, whole.stdout, whole.stderr), args


def test_the_app_of_one_command_holds_only_that_command():
    import typer.main

    from chakra.cli.main import app, app_for

    trimmed = typer.main.get_command(app_for(["convert", "tensorflow"]))
    context = trimmed.make_context("chakra", [], resilient_parsing=True)
    assert trimmed.list_commands(context) == ["convert"]  # type: ignore[attr-defined]
    assert app_for(["--version"]) is app and app_for(["no-such-command"]) is app
