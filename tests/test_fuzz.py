"""Seeded fuzzing of every kind of input a user hands chakra-et (issue 15).

Each case takes a valid input (an ``.et`` file plain, gzip or zstd; a PyTorch host trace; a Kineto
trace; an ASTRA-sim text workload; a system JSON, network YAML and communicator-group file; an LLM
spec; the JSON ``dejsonize`` reads; a TensorFlow recording's run metadata and profile; an XLA
module; FlexFlow's files; an MSCCL program; a custom collective algorithm's rank file; a synthetic
workload model; a workload written as classes; an output path that cannot be written), damages it
the way disks, editors and hand edits do (truncation, flipped bits, inserted or repeated bytes, a
key deleted, a value of the wrong kind or size), runs the command that reads it, and checks what a
user relies on:

* no traceback, and an exit code of 0, 1 (checks failed) or 2 (bad input), within
  :data:`HANG_LIMIT_S`;
* exit 2 names the damaged file (or the output path);
* nothing is left behind: no temporary file anywhere, no output from a failed command.

The cases are drawn from :data:`SEED`, so a failure is reproduced by running the test again; the
case's id names its kind, number and command.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from helpers import (
    DISK_SIZE,
    fill_disk,
    host_node,
    kineto_launch,
    kineto_op,
    no_hang,
    run_cli,
    tmpfs,
    write_allreduce_workload,
    write_tf_recording,
    write_trace_pair,
)

from chakra.generate.collective import AlgorithmSpec, write_algorithm

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "astra"
#: The seed every case is drawn from: change it to explore, keep it to reproduce.
SEED = 15
#: Cases per kind of input.
CASES = 20
#: A command still running after this long counts as a hang (s): a valid input of this size takes
#: well under a second.
HANG_LIMIT_S = 60
#: Exit codes a command may end with (DESIGN.md): done, checks failed, bad input.
EXIT_CODES = (0, 1, 2)
BAD_INPUT = 2

#: Values of the wrong kind or an absurd size, put where a JSON or YAML value was.
ODD_VALUES: list[Any] = [
    "two", "", -1, 0, 2**64, 2**70, -(2**63) - 1, 1e308, -1e-300, float("nan"), None, True, [], {},
    [1, "a", None], {"x": {"y": []}}, "\x00\udcff", "9" * 400,
]  # fmt: skip
ODD_TOKENS = ["-1", "0", "99999999999999999999", "nan", "1e999", "two", "", "[", "{", ":", "\t", "#", "\x00"]
#: A real XLA module (dumped by TensorFlow 2.21, tests/data/xla/README.md).
XLA_MODULE = REPO / "tests" / "data" / "xla" / "tf_dense_relu.after_optimizations.hlo.pb"
FLEXFLOW = REPO / "tests" / "data" / "flexflow"
MSCCL_PROGRAM = REPO / "tests" / "data" / "msccl" / "two_threadblocks.xml"
TEXT_WORKLOAD = "DATA\n2\na -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 1000 0\nb -1 11 NONE 0 21 NONE 0 31 ALLREDUCE 2000 0\n"
SMALL_SPEC = "model: {preset: llama3-8b, layers: 2, seq_len: 256}\nparallel: {tp: 2}\nglobal_batch: 2\n"


# ---- damage -----------------------------------------------------------------------------------
def damage_bytes(rng: random.Random, data: bytes) -> bytes:
    """``data`` cut short, with bits flipped, bytes inserted, a run zeroed or a slice repeated."""
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    at = rng.randrange(len(data))
    kind = rng.randrange(5)
    if kind == 0:
        return data[:at]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == 2:
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16))) + data[at:]
    if kind == 3:
        return data[:at] + bytes(rng.randrange(1, 256)) + data[at + 1 :]
    end = min(len(data), at + rng.randrange(1, 64))
    return data[:end] + data[at:end] * rng.randrange(2, 6) + data[end:]


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*here, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, (*here, i))


def damage_document(rng: random.Random, doc: Any) -> Any:
    """A copy of a JSON-like document with one value replaced by an odd one, or one key or item gone."""
    doc = json.loads(json.dumps(doc))
    where = rng.choice([p for p in _paths(doc) if p])
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    if rng.random() < 0.3:
        del parent[where[-1]]
    else:
        parent[where[-1]] = rng.choice(ODD_VALUES)
    return doc


def damage_text(rng: random.Random, text: str) -> str:
    """Text with a token replaced, a line dropped or repeated, or the end cut off."""
    lines = text.splitlines(keepends=True)
    kind = rng.randrange(4)
    if kind == 0:
        return text[: rng.randrange(len(text))]
    i = rng.randrange(len(lines))
    if kind == 1:
        return "".join(lines[:i] + lines[i + 1 :])
    if kind == 2:
        return "".join(lines[:i] + [lines[i]] * rng.randrange(2, 5) + lines[i:])
    tokens = lines[i].split(" ")
    tokens[rng.randrange(len(tokens))] = rng.choice(ODD_TOKENS)
    return "".join([*lines[:i], " ".join(tokens), *lines[i + 1 :]])


def damage_json_file(rng: random.Random, text: str) -> str:
    """A JSON file damaged as a document (mostly) or as text."""
    if rng.random() < 0.75:
        return json.dumps(damage_document(rng, json.loads(text)))
    return damage_text(rng, text)


# ---- the inputs --------------------------------------------------------------------------------
@dataclass
class Case:
    """One damaged input: the command (``{dir}`` is the case's folder) and the file it damaged."""

    argv: list[str]
    damaged: Path


def _host_trace(folder: Path) -> tuple[Path, Path]:
    nodes = [
        {"id": 1, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 0, "attrs": []},
        host_node(2, "aten::mm", 10, tid=1),
        host_node(3, "aten::relu", 11, tid=1),
    ]
    events = [kineto_op("aten::mm", 10, 100.0, 20.0), kineto_op("aten::relu", 11, 130.0, 5.0), kineto_launch(101, 1)]
    return write_trace_pair(folder, nodes, events)


def _workload(folder: Path) -> Path:
    return write_allreduce_workload(folder, "job", 2, comm_groups={1: [0, 1]})


def _simulate(prefix: Path, system: Path | None = None, network: Path | None = None) -> list[str]:
    return [
        "simulate", "--workload", str(prefix), "--system", str(system or EXAMPLES / "system.json"),
        "--network", str(network or EXAMPLES / "ring2.yml"),
    ]  # fmt: skip


def _et_commands(prefix: Path, damaged: Path, folder: Path) -> list[list[str]]:
    return [
        ["info", str(damaged)],
        ["validate", str(damaged)],
        ["analyze", "breakdown", str(prefix), "--workers", "1"],
        ["analyze", "critical-path", str(damaged)],
        ["jsonize", str(damaged), str(folder / "out" / "job.json")],
        ["report", str(damaged), "-o", str(folder / "out" / "report.html"), "--workers", "1"],
        ["adapt", str(prefix), "-o", str(folder / "out" / "job"), "--target", "astra-sim"],
        ["anonymize", str(prefix), "-o", str(folder / "out" / "anonymized"), "--key", "k"],
        ["synth", "fit", str(prefix), "-o", str(folder / "out" / "job.synth.json")],
        ["synth", "compare", str(prefix), str(prefix)],
        ["analyze", "summary", str(damaged)],
        ["analyze", "ranks", str(prefix), "--workers", "1"],
        ["analyze", "diff", str(damaged), str(damaged)],
        ["viz", "graph", str(damaged), "-o", str(folder / "out" / "graph.dot")],
        ["viz", "timeline", str(prefix), "-o", str(folder / "out" / "timeline.json")],
        [*_simulate(prefix), "--timeline", str(folder / "out" / "sim.json")],
        ["sweep", *_simulate(prefix)[1:], "--axis", "bandwidth-scale=1,2", "--workers", "1"],
        ["replay", str(prefix), "--dry-run"],
    ]


def et_case(rng: random.Random, folder: Path, suffix: str) -> Case:
    prefix = _workload(folder)
    plain = Path(f"{prefix}.0.et")
    data = plain.read_bytes()
    plain.unlink()
    target = Path(f"{prefix}.0{suffix}")
    if suffix == ".et":
        target.write_bytes(damage_bytes(rng, data))
    else:
        pack = gzip.compress if suffix == ".et.gz" else zstandard.ZstdCompressor().compress
        damaged = damage_bytes(rng, data)
        target.write_bytes(damage_bytes(rng, pack(data)) if rng.random() < 0.5 else pack(damaged))
    return Case(rng.choice(_et_commands(prefix, target, folder)), target)


def host_case(rng: random.Random, folder: Path) -> Case:
    host, device = _host_trace(folder)
    host.write_text(damage_json_file(rng, host.read_text()))
    return Case(["convert", "pytorch", "--host", str(host), "--device", str(device), "-o", f"{folder}/out/job"], host)


def kineto_case(rng: random.Random, folder: Path) -> Case:
    host, device = _host_trace(folder)
    device.write_text(damage_json_file(rng, device.read_text()))
    return Case(["convert", "pytorch", "--host", str(host), "--device", str(device), "-o", f"{folder}/out/job"], device)


def kineto_alone_case(rng: random.Random, folder: Path) -> Case:
    """A damaged profiler trace converted on its own (``convert kineto``, no host trace)."""
    host, device = _host_trace(folder)
    host.unlink()
    device.write_text(damage_json_file(rng, device.read_text()))
    return Case(["convert", "kineto", str(device), "-o", f"{folder}/out/job"], device)


def text_case(rng: random.Random, folder: Path) -> Case:
    text = folder / "workload.txt"
    text.write_text(damage_text(rng, TEXT_WORKLOAD))
    npus = str(rng.choice([2, 4]))
    return Case(["convert", "text", str(text), "-o", f"{folder}/out/w", "--num-npus", npus], text)


def system_case(rng: random.Random, folder: Path) -> Case:
    system = folder / "system.json"
    system.write_text(damage_json_file(rng, (EXAMPLES / "system.json").read_text()))
    return Case(_simulate(_workload(folder), system=system), system)


def network_case(rng: random.Random, folder: Path) -> Case:
    network = folder / "network.yml"
    network.write_text(damage_text(rng, (EXAMPLES / "ring2.yml").read_text()))
    return Case(_simulate(_workload(folder), network=network), network)


def groups_case(rng: random.Random, folder: Path) -> Case:
    prefix = _workload(folder)
    groups = Path(f"{prefix}.comm_groups.json")
    groups.write_text(damage_json_file(rng, groups.read_text()))
    command = rng.choice([_simulate(prefix), ["analyze", "ranks", str(prefix), "--workers", "1"]])
    return Case(command, groups)


def spec_case(rng: random.Random, folder: Path) -> Case:
    spec = folder / "spec.yaml"
    spec.write_text(damage_text(rng, SMALL_SPEC))
    return Case(["generate", "llm", "--spec", str(spec), "-o", f"{folder}/out/w"], spec)


def dejsonize_case(rng: random.Random, folder: Path) -> Case:
    prefix = _workload(folder)
    as_json = folder / "job.json"
    assert run_cli("jsonize", f"{prefix}.0.et", str(as_json)).returncode == 0
    as_json.write_text(damage_json_file(rng, as_json.read_text()))
    return Case(["dejsonize", str(as_json), str(folder / "out" / "job.0.et")], as_json)


def tf_case(rng: random.Random, folder: Path, damaged_file: str) -> Case:
    recording = write_tf_recording(folder / "rec")
    target = recording / damaged_file
    target.write_bytes(damage_bytes(rng, target.read_bytes()))
    return Case(["convert", "tensorflow", str(recording), "-o", f"{folder}/out/s", "--check"], target)


def xla_case(rng: random.Random, folder: Path) -> Case:
    module = folder / "module.hlo.pb"
    module.write_bytes(damage_bytes(rng, XLA_MODULE.read_bytes()))
    return Case(["convert", "xla", str(module), "-o", f"{folder}/out/m"], module)


def flexflow_case(rng: random.Random, folder: Path, damaged_file: str) -> Case:
    """A damaged FlexFlow task graph (either form) or strategy, with its undamaged companions."""
    files = {name: folder / name for name in ("mlp2.taskgraph.dot", "mlp2.strategy", "mlp2.labelled.dot")}
    for name, path in files.items():
        path.write_text((FLEXFLOW / name).read_text())
    target = files[damaged_file]
    target.write_text(damage_text(rng, target.read_text()))
    graph = files["mlp2.labelled.dot"] if damaged_file == "mlp2.labelled.dot" else files["mlp2.taskgraph.dot"]
    command = ["convert", "flexflow", str(graph), "--strategy", str(files["mlp2.strategy"]), "-o", f"{folder}/out/f"]
    return Case([*command, "--check"], target)


def msccl_case(rng: random.Random, folder: Path) -> Case:
    program = folder / "program.xml"
    program.write_text(damage_text(rng, MSCCL_PROGRAM.read_text()))
    return Case(["convert", "msccl", str(program), "-o", f"{folder}/out/a", "--size", "1MiB"], program)


def custom_algorithm_case(rng: random.Random, folder: Path) -> Case:
    """A custom collective algorithm (per-rank ETs) with one rank file damaged, run by simulate."""
    write_algorithm(folder / "algo" / "ring", AlgorithmSpec("ring", "all-reduce", 2, 1 << 16))
    target = folder / "algo" / f"ring.{rng.randrange(2)}.et"
    target.write_bytes(damage_bytes(rng, target.read_bytes()))
    system = folder / "custom.json"
    system.write_text(json.dumps({"scheduling-policy": "FIFO", "preferred-dataset-splits": 1, "local-mem-bw": 50,
                                  "all-reduce-implementation-custom": [str(folder / "algo" / "ring")]}))  # fmt: skip
    validate = ["validate", str(folder / "algo" / "ring"), "--target", "custom-collective"]
    return Case(rng.choice([_simulate(_workload(folder), system=system), validate]), target)


#: A model fitted once to the fuzzed workload (fitting takes a second; every case damages a copy).
_FITTED: dict[str, str] = {}


def synth_model_case(rng: random.Random, folder: Path) -> Case:
    if "model" not in _FITTED:
        source = folder / "source"
        source.mkdir()
        fitted = folder / "fitted.synth.json"
        done = run_cli("synth", "fit", str(_workload(source)), "-o", str(fitted))
        assert done.returncode == 0, done.stderr
        _FITTED["model"] = fitted.read_text()
        shutil.rmtree(source)
        fitted.unlink()
    model = folder / "job.synth.json"
    model.write_text(damage_json_file(rng, _FITTED["model"]))
    return Case(["synth", "sample", str(model), "-o", f"{folder}/out/s"], model)


#: A two-stage workload written as classes, generated once (every case damages a copy): name -> bytes.
_CLASSES: dict[str, bytes] = {}


def class_workload_case(rng: random.Random, folder: Path) -> Case:
    """A workload written as classes (``generate llm --classes``) with its mapping or a class file
    damaged, read by a command that takes it."""
    from chakra.generate.llm import generate_llm
    from chakra.generate.specs import HARDWARE_PRESETS, ModelSpec, ParallelSpec, WorkloadSpec

    if not _CLASSES:
        model = ModelSpec("tiny", layers=2, hidden=128, heads=4, kv_heads=4, ffn=256, vocab=500, seq_len=64)
        spec = WorkloadSpec(model, ParallelSpec(pp=2), HARDWARE_PRESETS["h100"], global_batch=2)
        made = generate_llm(spec, folder / "source" / "job", as_classes=True)
        _CLASSES.update({p.name: p.read_bytes() for p in made.prefix.parent.iterdir()})
        shutil.rmtree(folder / "source")
    for name, data in _CLASSES.items():
        (folder / name).write_bytes(data)
    target = folder / rng.choice(["job.classes.json", "job.class0.et", "job.class1.et"])
    if target.suffix == ".json":
        target.write_text(damage_json_file(rng, target.read_text()))
    else:
        target.write_bytes(damage_bytes(rng, target.read_bytes()))
    prefix = folder / "job"
    commands = [
        ["info", str(prefix)],
        ["validate", str(prefix)],
        ["analyze", "breakdown", str(prefix), "--workers", "1"],
        _simulate(prefix),
        ["expand", str(prefix), "-o", str(folder / "out" / "job")],
    ]
    return Case(rng.choice(commands), target)


KINDS: dict[str, Callable[[random.Random, Path], Case]] = {
    "et": lambda rng, folder: et_case(rng, folder, ".et"),
    "et.gz": lambda rng, folder: et_case(rng, folder, ".et.gz"),
    "et.zst": lambda rng, folder: et_case(rng, folder, ".et.zst"),
    "host trace": host_case,
    "kineto": kineto_case,
    "kineto alone": kineto_alone_case,
    "text workload": text_case,
    "system json": system_case,
    "network yaml": network_case,
    "comm groups": groups_case,
    "spec yaml": spec_case,
    "dejsonize json": dejsonize_case,
    "tf run metadata": lambda rng, folder: tf_case(rng, folder, "run_metadata.pb"),
    "tf profile": lambda rng, folder: tf_case(rng, folder, "profile/host.xplane.pb"),
    "xla module": xla_case,
    "flexflow task graph": lambda rng, folder: flexflow_case(rng, folder, "mlp2.taskgraph.dot"),
    "flexflow strategy": lambda rng, folder: flexflow_case(rng, folder, "mlp2.strategy"),
    "flexflow labelled graph": lambda rng, folder: flexflow_case(rng, folder, "mlp2.labelled.dot"),
    "msccl program": msccl_case,
    "custom algorithm": custom_algorithm_case,
    "synth model": synth_model_case,
    "class workload": class_workload_case,
}


#: Commands of ``chakra --help`` no damaged input of this suite reaches, and why.
NOT_FUZZED = {
    "generate micro": "it reads no file: its options are all it takes",
    "generate collective": "it reads no file: its options are all it takes",
}


def _commands() -> set[str]:
    """Every command of ``chakra --help``, as its words (``convert xla``)."""
    import click
    import typer

    from chakra.cli.main import app

    def walk(command: click.Command, words: tuple[str, ...]) -> Iterator[str]:
        if hasattr(command, "list_commands"):  # a group (typer's own Group class)
            context = click.Context(command)
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None
                yield from walk(sub, (*words, name))
        else:
            yield " ".join(words)

    return set(walk(typer.main.get_command(app), ()))


def _fuzzed(folder: Path) -> set[str]:
    """The commands the cases and the output checks run (each case kind built a few times)."""
    argvs = _et_commands(folder / "job", folder / "job.0.et", folder) + _writers(folder / "job", folder / "out")
    for kind, build in KINDS.items():
        for number in range(3):
            case_folder = folder / f"{kind}-{number}"
            (case_folder / "out").mkdir(parents=True, exist_ok=True)
            argvs.append(build(random.Random(f"{SEED}:{kind}:{number}"), case_folder).argv)
    commands = _commands()
    return {next(" ".join(a[:n]) for n in (2, 1) if " ".join(a[:n]) in commands) for a in argvs}


def test_every_command_of_chakra_help_gets_a_damaged_input_or_says_why_not(tmp_path: Path):
    commands = _commands()
    assert set(NOT_FUZZED) <= commands
    assert commands - set(NOT_FUZZED) <= _fuzzed(tmp_path), sorted(commands - set(NOT_FUZZED) - _fuzzed(tmp_path))


# ---- running and checking ----------------------------------------------------------------------
def temporary_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.endswith(".tmp"))


def check(case: Case, folder: Path, before: set[Path]) -> None:
    with no_hang(HANG_LIMIT_S):
        done = run_cli(*case.argv)
    context = f"chakra {' '.join(case.argv)}\n{done.stderr[-3000:]}"
    assert "Traceback (most recent call last)" not in done.stderr, context
    assert done.returncode in EXIT_CODES, context
    if done.returncode == BAD_INPUT:
        assert case.damaged.name in done.stderr, f"the error does not name {case.damaged.name}: {context}"
    assert temporary_files(folder) == [], context
    if done.returncode == BAD_INPUT:
        made = {p for p in folder.rglob("*") if p.is_file()} - before
        assert made == set(), f"a failed command left {sorted(map(str, made))}: {context}"


def _cases() -> list[tuple[str, int]]:
    return [(kind, i) for kind in KINDS for i in range(CASES)]


@pytest.mark.parametrize(("kind", "number"), _cases(), ids=[f"{k}-{i}" for k, i in _cases()])
def test_a_damaged_input_is_refused_cleanly_or_read(kind: str, number: int, tmp_path: Path):
    rng = random.Random(f"{SEED}:{kind}:{number}")
    (tmp_path / "out").mkdir()
    case = KINDS[kind](rng, tmp_path)
    check(case, tmp_path, {p for p in tmp_path.rglob("*") if p.is_file()})


# ---- output paths -----------------------------------------------------------------------------
def _writers(prefix: Path, out: Path) -> list[list[str]]:
    return [
        ["jsonize", f"{prefix}.0.et", str(out / "job.json")],
        ["convert", "text", "-o", str(out / "w"), "--num-npus", "2"],
        ["generate", "micro", "ALL_REDUCE", "-o", str(out), "--ranks", "2"],
        ["report", str(prefix), "-o", str(out / "report.html"), "--workers", "1"],
        ["viz", "plot", str(prefix), "-o", str(out / "breakdown.png")],
        [*_simulate(prefix), "--timeline", str(out / "sim.json")],
        ["adapt", str(prefix), "-o", str(out / "job"), "--target", "astra-sim"],
        ["anonymize", str(prefix), "-o", str(out / "anonymized"), "--key", "k"],
        ["generate", "llm", "--preset", "llama3-8b", "--tp", "2", "-o", str(out / "llm")],
    ]


def _text_input(argv: list[str], folder: Path) -> list[str]:
    if argv[:2] == ["convert", "text"]:
        text = folder / "workload.txt"
        text.write_text(TEXT_WORKLOAD)
        return [*argv[:2], str(text), *argv[2:]]
    return argv


OUTPUT_KINDS = ("missing folder", "a file as folder", "full disk", "read-only disk")


@pytest.mark.parametrize("where", OUTPUT_KINDS)
@pytest.mark.parametrize("writer", range(9))
def test_an_output_that_cannot_be_written_is_one_line_naming_it(where: str, writer: int, tmp_path: Path):
    (tmp_path / "in").mkdir()
    prefix = _workload(tmp_path / "in")
    with _output_place(where, tmp_path) as out:
        argv = _text_input(_writers(prefix, out)[writer], tmp_path)
        with no_hang(HANG_LIMIT_S):
            done = run_cli(*argv)
        context = f"chakra {' '.join(argv)}\n{done.stderr[-3000:]}"
        assert "Traceback (most recent call last)" not in done.stderr, context
        if where == "missing folder" and done.returncode == 0:  # writers make the folders they need
            assert out.parent.is_dir(), context
            return
        assert done.returncode == BAD_INPUT, context
        assert str(out.parent if where == "missing folder" else out) in done.stderr, context
        assert temporary_files(tmp_path) == [], context
        if where in ("full disk", "read-only disk"):
            assert [p.name for p in out.iterdir() if p.name != "filler"] == [], context


@contextlib.contextmanager
def _output_place(where: str, tmp_path: Path) -> Iterator[Path]:
    if where == "missing folder":
        yield tmp_path / "nowhere" / "out"
    elif where == "a file as folder":
        (tmp_path / "afile").write_text("x")
        yield tmp_path / "afile" / "out"
    elif where == "full disk":
        with tmpfs(tmp_path / "full", f"size={DISK_SIZE}") as folder:
            fill_disk(folder)
            yield folder
    else:
        with tmpfs(tmp_path / "ro", f"size={DISK_SIZE},ro") as folder:
            yield folder
    shutil.rmtree(tmp_path / "afile", ignore_errors=True)
