"""The command line: output, exit codes, and one clear line for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from handmade import build_workload
from helpers import BIN, assert_one_line_error, assert_usage_error, run_subprocess
from helpers import run_cli as run


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return build_workload(tmp_path)


@pytest.mark.parametrize("command", ["info", "validate", "jsonize", "dejsonize"])
def test_every_command_has_help_with_an_example(command: str):
    result = run(command, "--help")
    assert result.returncode == 0 and "Example: chakra" in result.stdout


def test_info_json_counts_node_types_and_collectives(demo: Path):
    result = run("info", f"{demo}.0.et", "--json")
    assert result.returncode == 0, result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["by_type"]["COMM_COLL_NODE"] == 8
    assert summary["collectives"]["ALL_REDUCE"]["count"] == 4
    assert summary["attribute_coverage"]["is_cpu_op"]["fraction"] == 1.0


def test_info_prints_tables(demo: Path):
    result = run("info", f"{demo}.0.et")
    assert result.returncode == 0
    assert "node types" in result.stdout and "ALL_GATHER" in result.stdout


def test_info_reads_the_upstream_gzip_trace(shared_data: Path):
    result = run("info", str(shared_data / "upstream-chakra" / "chakra.0.et.gz"), "--json")
    assert json.loads(result.stdout)[0]["num_nodes"] == 3664


def test_validate_clean_workload_exits_0(demo: Path):
    result = run("validate", str(demo), "--target", "astra-sim")
    assert result.returncode == 0, result.stdout
    assert "FAILED" not in result.stdout


def test_validate_exits_1_when_a_file_has_errors(upstream_et: Path):
    result = run("validate", str(upstream_et), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert not report["ok"] and report["files"][0]["counts"]["error"] > 0


def test_validate_reports_a_truncated_file_as_a_format_error(demo: Path, tmp_path: Path):
    broken = tmp_path / "broken.0.et"
    broken.write_bytes(Path(f"{demo}.0.et").read_bytes()[:-3])
    result = run("validate", str(broken), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["files"][0]["findings"][0]["code"] == "format"


def test_info_on_a_truncated_file_is_one_line_with_offset(demo: Path, tmp_path: Path):
    broken = tmp_path / "broken.0.et"
    broken.write_bytes(Path(f"{demo}.0.et").read_bytes()[:-3])
    assert_one_line_error(run("info", str(broken)), str(broken), "byte", "node #")


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path):
    assert_one_line_error(run("info", str(tmp_path / "nope.et")), "nope.et")
    assert_one_line_error(run("validate", str(tmp_path / "nope.et")), "nope.et")


def test_unknown_target_is_bad_input(demo: Path):
    assert_usage_error(run("validate", f"{demo}.0.et", "--target", "ns3"), "ns3", "astra-sim")


def test_jsonize_then_dejsonize_gives_identical_bytes(demo: Path, tmp_path: Path):
    for extra in ([], ["--lines"]):
        out_json = tmp_path / "out.json"
        back = tmp_path / "back.0.et"
        assert run("jsonize", f"{demo}.0.et", str(out_json), *extra).returncode == 0
        assert run("dejsonize", str(out_json), str(back)).returncode == 0
        assert back.read_bytes() == Path(f"{demo}.0.et").read_bytes()


def test_jsonize_document_is_valid_json(demo: Path, tmp_path: Path):
    out_json = tmp_path / "out.json"
    run("jsonize", f"{demo}.0.et", str(out_json))
    document = json.loads(out_json.read_text())
    assert len(document["nodes"]) == 28


def test_dejsonize_of_invalid_json_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"globalMetadata": {"version": "1.0.0"}, "nodes": [ {"id": "1",, } ]}')
    result = run("dejsonize", str(bad), str(tmp_path / "x.0.et"))
    assert_one_line_error(result, "bad.json")
    assert not (tmp_path / "x.0.et").exists()


def test_upstream_named_jsonizer_takes_upstream_flags(demo: Path, tmp_path: Path):
    exe = shutil.which("chakra_jsonizer", path=str(BIN))
    assert exe, "console script chakra_jsonizer is installed"
    out = tmp_path / "up.json"
    result = subprocess.run(
        [exe, "--input_filename", f"{demo}.0.et", "--output_filename", str(out)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    decoder = json.JSONDecoder()
    first, _ = decoder.raw_decode(text)
    assert first == {"version": "1.0.0", "attr": [{"name": "generator", "stringVal": "chakra-et demo"}]}


def test_upstream_named_jsonizer_bad_input_exits_2(tmp_path: Path):
    exe = shutil.which("chakra_jsonizer", path=str(BIN))
    result = subprocess.run(
        [exe, "--input_filename", str(tmp_path / "none.et"), "--output_filename", str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_info_prints_metadata_names_literally_not_as_markup(tmp_path: Path):
    from chakra import io
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

    metadata = GlobalMetadata(version="1.0.0")
    metadata.attr.add(name="[/]oops", string_val="[bold]x")
    io.write(tmp_path / "w.0.et", metadata, [Node(id=1, name="n")])
    result = run("info", str(tmp_path / "w.0.et"))
    assert result.returncode == 0, result.stderr
    assert "metadata.[/]oops" in result.stdout and "[bold]x" in result.stdout


def test_info_takes_a_workload_prefix(demo: Path):
    result = run("info", str(demo), "--json")
    assert result.returncode == 0, result.stderr
    assert [s["rank"] for s in json.loads(result.stdout)] == [0, 1, 2, 3]


def test_convert_pytorch_writes_every_rank_and_reports_fidelity(gloo_traces: Path, tmp_path: Path):
    result = run(
        "convert", "pytorch", "--host", str(gloo_traces / "host.{rank}.json"),
        "--device", str(gloo_traces / "device.{rank}.json"), "-o", str(tmp_path / "out" / "job"), "--check", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert sorted(summary["paths"]) == ["0", "1"]
    assert all(abs(f["error"]) <= 0.05 for f in summary["fidelity"]["ranks"].values())
    assert (tmp_path / "out" / "job.comm_groups.json").exists()


def test_convert_pytorch_without_matching_files_says_how_to_name_them(tmp_path: Path):
    result = run("convert", "pytorch", "--host", str(tmp_path / "host.{rank}.json"), "-o", str(tmp_path / "x"))
    assert_one_line_error(result, "no files match", "{rank}")


def test_convert_pytorch_refuses_a_device_trace_given_as_host(tmp_path: Path):
    kineto = tmp_path / "device.0.json"
    kineto.write_text('{"traceEvents": []}')
    result = run("convert", "pytorch", "--host", str(kineto), "-o", str(tmp_path / "x"))
    assert_one_line_error(result, "Kineto", "pass it as the device trace")


def test_convert_pytorch_names_the_rank_file_that_is_broken(gloo_traces: Path, tmp_path: Path):
    traces = tmp_path / "traces"
    shutil.copytree(gloo_traces, traces)
    (traces / "host.1.json").write_text('{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1, "name": ')
    result = run("convert", "pytorch", "--host", str(traces / "host.{rank}.json"), "-o", str(tmp_path / "x"))
    assert_one_line_error(result, "host.1.json")


# -- the console script itself, in a fresh process ----------------------------------------------


def test_the_console_script_turns_bad_input_into_one_line_and_exit_2(tmp_path: Path):
    (tmp_path / "broken.0.et").write_bytes(b"\x05abc")

    assert_one_line_error(run_subprocess("info", str(tmp_path / "broken.0.et")), "broken.0.et")


def test_the_console_script_exits_1_when_checks_fail(tmp_path: Path):
    from helpers import make_node, write_et

    write_et(tmp_path / "cycle.0.et", [make_node(1, data_deps=[2]), make_node(2, data_deps=[1])])

    result = run_subprocess("validate", str(tmp_path / "cycle.0.et"))

    assert result.returncode == 1 and "cycle" in result.stdout and "Traceback" not in result.stderr


def test_the_console_script_answers_a_usage_mistake_with_exit_2(tmp_path: Path):
    assert_usage_error(run_subprocess("info", "--no-such-option"), "--no-such-option")


def test_the_app_has_every_command_once_imported():
    import typer

    from chakra.cli.main import app

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]

    assert {"info", "validate", "jsonize", "dejsonize", "convert", "generate", "simulate", "sweep", "analyze",
            "viz", "report"} <= commands  # fmt: skip
