"""A workload written as classes (chakra.class_layout: one file per class of equivalent ranks and the
rank-to-class mapping): generated with ``--classes``, read by chakra-et's commands as the same
workload its rank files are, expanded back to rank files byte for byte, and refused with one line by
the commands that need one file per rank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SIM_SYSTEM_JSON, assert_one_line_error, run_cli

from chakra import io
from chakra.class_expansion import expand_classes
from chakra.class_layout import RENAMED_ATTRS, ClassLayout
from chakra.generate.llm import generate_llm
from chakra.generate.specs import HARDWARE_PRESETS, ModelSpec, ParallelSpec, WorkloadSpec
from chakra.workload import open_workload

TINY = ModelSpec("tiny", layers=4, hidden=256, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq_len=128)
TINY_MOE = ModelSpec("tiny-moe", layers=2, hidden=256, heads=8, kv_heads=8, ffn=512, vocab=1000, seq_len=128,
                     experts=8, top_k=2)  # fmt: skip
#: Every parallelism the generator has, small: (model, parallel sizes, global batch, step).
PARALLELISMS = {
    "tp-pp-dp": (TINY, ParallelSpec(tp=2, pp=2, dp=4), 16, "train"),
    "sp": (TINY, ParallelSpec(tp=4, pp=2, dp=2, sp=True), 16, "train"),
    "zero-3": (TINY, ParallelSpec(tp=2, pp=2, dp=8, zero=3), 32, "train"),
    "context parallel": (TINY, ParallelSpec(tp=2, cp=2, dp=2, pp=2), 16, "train"),
    "expert parallel": (TINY_MOE, ParallelSpec(tp=2, dp=4, ep=4), 16, "train"),
    "interleaved": (TINY, ParallelSpec(pp=2, dp=4, schedule="interleaved", virtual_stages=2), 16, "train"),
    "inference": (TINY, ParallelSpec(tp=2, pp=2, dp=2), 4, "inference"),
}


def spec_of(case: str) -> WorkloadSpec:
    model, parallel, batch, step = PARALLELISMS[case]
    return WorkloadSpec(model, parallel, HARDWARE_PRESETS["h100"], global_batch=batch, step=step)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 16 ranks of the TP/PP/DP case written per rank and as classes."""
    folder = tmp_path_factory.mktemp("both")
    generate_llm(spec_of("tp-pp-dp"), folder / "ranks" / "w")
    generate_llm(spec_of("tp-pp-dp"), folder / "classes" / "w", as_classes=True)
    return folder / "ranks" / "w", folder / "classes" / "w"


@pytest.mark.parametrize("case", PARALLELISMS)
def test_expanding_a_workload_written_as_classes_gives_the_generators_rank_files_byte_for_byte(case, tmp_path):
    direct = generate_llm(spec_of(case), tmp_path / "direct" / "w")
    classes = generate_llm(spec_of(case), tmp_path / "classes" / "w", as_classes=True)
    expanded = expand_classes(open_workload(classes.prefix), tmp_path / "expanded" / "w")

    assert len(classes.class_files) == spec_of(case).parallel.pp
    assert sorted(expanded.paths) == list(range(direct.world_size))
    for rank, path in enumerate(direct.files):
        assert expanded.paths[rank].read_bytes() == path.read_bytes(), rank
    assert expanded.groups_path is not None and direct.groups_file is not None
    assert expanded.groups_path.read_bytes() == direct.groups_file.read_bytes()


def test_every_rank_reads_as_its_rank_file_does(both):
    ranks, classes = open_workload(both[0]), open_workload(both[1])
    assert classes.ranks == ranks.ranks and classes.comm_groups == ranks.comm_groups
    for rank in ranks.ranks:
        mine, theirs = classes.table(rank).comm, ranks.table(rank).comm
        assert mine.pg_name == theirs.pg_name
        for column in ("group", "src", "dst", "kind", "size", "tag"):
            assert np.array_equal(getattr(mine, column), getattr(theirs, column)), (rank, column)
        assert [n.SerializeToString() for n in classes.trace(rank).nodes] == [
            n.SerializeToString() for n in ranks.trace(rank).nodes
        ]


def test_ranks_of_a_class_share_every_column_but_their_groups_and_peers(both):
    workload = open_workload(both[1]).load(workers=1)
    first, other = workload.table(0), workload.table(1)
    assert first.dur_ns is other.dur_ns and first.graph is other.graph
    assert first.comm.src is not other.comm.src


def test_the_mapping_file_and_the_folder_open_the_same_workload(both):
    mapping = Path(f"{both[1]}.classes.json")
    assert open_workload(mapping).ranks == open_workload(both[1].parent).ranks == list(range(16))
    assert open_workload(both[1], ranks=[5]).ranks == [5]


def test_info_validate_and_analyses_print_what_they_print_for_the_rank_files(both):
    for command in (["info", "--json"], ["analyze", "breakdown", "--json"], ["analyze", "ranks", "--json"],
                    ["analyze", "critical-path", "--json"]):  # fmt: skip
        per_rank, as_classes = (run_cli(*command[:-1], str(prefix), command[-1]) for prefix in both)
        assert per_rank.returncode == as_classes.returncode == 0, as_classes.stderr
        found = [json.loads(r.stdout) for r in (per_rank, as_classes)]
        assert _without_paths(found[1]) == _without_paths(found[0]), command
    checked = run_cli("validate", str(both[1]))
    assert checked.returncode == 0 and "rank 15 (" in checked.stdout and "0 errors" in checked.stdout


def _without_paths(value: object) -> object:
    """A JSON value with every string that names a file of either layout blanked."""
    if isinstance(value, dict):
        return {k: _without_paths(v) for k, v in value.items() if k != "path"}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    if isinstance(value, str) and ("/ranks/" in value or "/classes/" in value):
        return "<path>"
    return value


def test_simulate_reads_each_class_file_once_and_finishes_as_the_rank_files_do(both, tmp_path):
    system = tmp_path / "system.json"
    system.write_text(SIM_SYSTEM_JSON)
    network = tmp_path / "network.yml"
    network.write_text("topology: [ Switch, Switch ]\nnpus_count: [ 2, 8 ]\nbandwidth: [ 50, 50 ]\n"
                       "latency: [ 500, 500 ]\n")  # fmt: skip
    runs = [run_cli("simulate", "--workload", str(p), "--system", str(system), "--network", str(network), "--json")
            for p in both]  # fmt: skip
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    assert json.loads(runs[1].stdout) == json.loads(runs[0].stdout)


def test_generate_says_it_wrote_classes_and_expand_writes_the_rank_files(tmp_path):
    made = run_cli("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--pp", "2", "--dp", "2",
                   "--global-batch", "4", "--classes", "-o", str(tmp_path / "c" / "w"))  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "as 2 classes" in made.stdout
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "w.class0.et", "w.class1.et", "w.classes.json", "w.comm_groups.json"]  # fmt: skip
    expanded = run_cli("expand", str(tmp_path / "c" / "w"), "-o", str(tmp_path / "r" / "w"))
    assert expanded.returncode == 0, expanded.stderr
    assert "wrote 8 ranks" in expanded.stdout
    assert len(list((tmp_path / "r").glob("w.*.et"))) == 8


def test_expanding_in_place_replaces_the_class_files_and_the_mapping(tmp_path):
    generate_llm(spec_of("tp-pp-dp"), tmp_path / "w", as_classes=True)
    written = expand_classes(open_workload(tmp_path / "w"), tmp_path / "w")
    assert {p.name for p in written.removed} == {"w.class0.et", "w.class1.et", "w.classes.json"}
    assert open_workload(tmp_path / "w").classes is None and len(open_workload(tmp_path / "w")) == 16


def test_writing_classes_over_rank_files_of_the_same_prefix_removes_them_and_the_reverse(tmp_path):
    generate_llm(spec_of("tp-pp-dp"), tmp_path / "w")
    classes = generate_llm(spec_of("tp-pp-dp"), tmp_path / "w", as_classes=True)
    assert len(classes.removed_stale) == 16 and not list(tmp_path.glob("w.[0-9]*.et"))
    again = generate_llm(spec_of("tp-pp-dp"), tmp_path / "w")
    assert {p.name for p in again.removed_stale} == {"w.class0.et", "w.class1.et", "w.classes.json"}


def test_commands_that_need_rank_files_refuse_a_class_workload_naming_expand(both, tmp_path):
    for command in (["adapt", str(both[1]), "-o", str(tmp_path / "a"), "--target", "astra-sim"],
                    ["anonymize", str(both[1]), "-o", str(tmp_path / "b")],
                    ["replay", str(both[1]), "--dry-run"]):  # fmt: skip
        assert_one_line_error(run_cli(*command), "reads one file per rank", "chakra expand")


def test_a_prefix_with_rank_files_and_class_files_is_refused(both, tmp_path):
    for path in [*both[0].parent.iterdir(), *both[1].parent.iterdir()]:
        if not path.name.endswith(".comm_groups.json") or not (tmp_path / path.name).exists():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    assert_one_line_error(run_cli("info", str(tmp_path / "w")), "both rank files and class files")


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda doc: doc.update(version=9), "version 9"),
        (lambda doc: doc.update(format="other"), "no matching"),
        (lambda doc: doc["ranks"][3].__setitem__(1, ["1"]), "rank 3: class 0 has 2 groups"),
        (lambda doc: doc["ranks"][3].__setitem__(0, 7), "rank 3: expected [class"),
        (lambda doc: doc["classes"][0].update(file="../x.et"), 'class 0: "file"'),
        (lambda doc: doc["classes"][1].update(representative=0), "class 1: its representative 0"),
    ],
)
def test_a_broken_mapping_is_one_line_naming_the_file_and_the_place(both, tmp_path, edit, fragment):
    for path in both[1].parent.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    mapping = tmp_path / "w.classes.json"
    document = json.loads(mapping.read_text())
    edit(document)
    mapping.write_text(json.dumps(document))
    assert_one_line_error(run_cli("info", str(tmp_path / "w")), "w.classes.json", fragment)


def test_a_missing_class_file_is_one_line_naming_it(both, tmp_path):
    for path in both[1].parent.iterdir():
        if path.name != "w.class1.et":
            (tmp_path / path.name).write_bytes(path.read_bytes())
    assert_one_line_error(run_cli("validate", str(tmp_path / "w")), "w.class1.et", "missing")


def test_the_mapping_round_trips_and_lists_one_rank_a_line(both):
    mapping = Path(f"{both[1]}.classes.json")
    layout = ClassLayout.read(mapping)
    assert ClassLayout.from_json(layout.to_json(), mapping) == layout
    assert len(mapping.read_text().splitlines()) == 16 + 3
    assert layout.ranks_of(1) == list(range(8, 16))


def test_a_class_file_whose_groups_and_peers_come_before_other_attributes_expands_to_the_same_values(tmp_path):
    generate_llm(spec_of("tp-pp-dp"), tmp_path / "w", as_classes=True)
    for path in tmp_path.glob("w.class*.et"):
        metadata, nodes = io.read(path)
        for node in nodes:
            ordered = sorted(node.attr, key=lambda attr: attr.name not in RENAMED_ATTRS)
            copies = [type(attr)() for attr in ordered]
            for copy, attr in zip(copies, ordered, strict=True):
                copy.CopyFrom(attr)
            del node.attr[:]
            node.attr.extend(copies)
        io.write(path, metadata, nodes)
    expanded = expand_classes(open_workload(tmp_path / "w"), tmp_path / "x" / "w")
    direct = generate_llm(spec_of("tp-pp-dp"), tmp_path / "d" / "w")
    for rank, path in enumerate(direct.files):
        theirs, mine = io.read(path)[1], io.read(expanded.paths[rank])[1]
        assert [{a.name: a.SerializeToString() for a in n.attr} for n in mine] == [
            {a.name: a.SerializeToString() for a in n.attr} for n in theirs
        ], rank
