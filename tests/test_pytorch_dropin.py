"""chakra_trace_link and chakra_converter PyTorch: upstream's two-step pipeline, with upstream's flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import require_shared

from chakra import io
from chakra.adapt import Target, adapt_workload
from chakra.pytorch.convert import convert
from chakra.pytorch.host import load_host_trace
from chakra.pytorch.kineto import load_kineto_trace
from chakra.pytorch.link import link
from chakra.pytorch.linked_json import load_linked_json, write_linked_json
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE
from chakra.validate import ERROR, WARNING, validate_file

EXIT_BAD_INPUT = 2


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a drop-in console script the way upstream's combine_trace.sh does."""
    code = f"import sys; from chakra.cli.dropin import {tool}; sys.argv[0] = {tool!r}; {tool}()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def _link_and_convert(host: Path, device: Path, tmp_path: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    linked = tmp_path / "linked.0.json"
    result = run(
        "trace_link_main", "--rank", "0", "--chakra-host-trace", str(host),
        "--chakra-device-trace", str(device), "--output-file", str(linked),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = tmp_path / "chakra_trace.0.et"
    converted = run(
        "converter_main", "--log-filename", "/dev/null", "PyTorch", "--input", str(linked), "--output", str(out),
        "--simulate",
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr
    return out, converted


def test_the_two_step_pipeline_on_a_live_gloo_rank_validates_and_names_the_adapt_step(
    gloo_traces: Path, tmp_path: Path
):
    out, converted = _link_and_convert(gloo_traces / "host.0.json", gloo_traces / "device.0.json", tmp_path)
    assert [f.code for f in validate_file(out) if f.severity in (ERROR, WARNING)] == []
    assert "simulated span" in converted.stderr and "chakra adapt" in converted.stderr
    adapt_workload(out, tmp_path / "astra", Target.ASTRA_SIM)
    findings = validate_file(tmp_path / "astra.0.et", target="astra-sim")
    assert [f.code for f in findings if f.severity in (ERROR, WARNING)] == []
    _, nodes = io.read(out)
    assert sum(n.type == COMM_COLL_NODE for n in nodes) >= 14


def test_the_pipeline_equals_converting_directly(gloo_traces: Path, tmp_path: Path):
    out, _ = _link_and_convert(gloo_traces / "host.1.json", gloo_traces / "device.1.json", tmp_path)
    host = load_host_trace(gloo_traces / "host.1.json")
    direct = convert(host, load_kineto_trace(gloo_traces / "device.1.json"))
    _, nodes = io.read(out)
    assert [(n.name, n.type, list(n.data_deps)) for n in nodes] == [
        (n.name, n.type, list(n.data_deps)) for n in direct.nodes
    ]


def test_gpu_pair_links_with_kernels_and_converts(tmp_path: Path):
    out, _ = _link_and_convert(
        require_shared("hta/benchmark_simple_add_et.json.gz"),
        require_shared("hta/benchmark_simple_add_trace.json.gz"),
        tmp_path,
    )
    linked = json.loads((tmp_path / "linked.0.json").read_text())
    kernels = [n for n in linked["nodes"] if "cat" in n]
    assert [k["cat"] for k in kernels] == ["kernel"] * 4
    assert all({"ts", "inclusive_dur", "exclusive_dur", "stream", "ctrl_deps"} <= set(k) for k in kernels)
    assert [f for f in validate_file(out, target="astra-sim") if f.severity == ERROR] == []


def test_a_linked_file_reads_back_to_the_same_timing(gloo_traces: Path, tmp_path: Path):
    linked = link(load_host_trace(gloo_traces / "host.0.json"), load_kineto_trace(gloo_traces / "device.0.json"))
    write_linked_json(linked, tmp_path / "linked.json")
    again = load_linked_json(tmp_path / "linked.json")
    assert again.timing == linked.timing
    assert [n.id for n in again.host.nodes] == [n.id for n in linked.host.nodes]


def test_a_host_trace_given_to_the_converter_is_converted_host_only(tmp_path: Path):
    out = tmp_path / "x.et"
    result = run("converter_main", "PyTorch", "--input", str(require_shared("param/resnet_2gpu_et.json.gz")),
                 "--output", str(out))  # fmt: skip
    assert result.returncode == 0 and "host-only" in result.stderr


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("converter_main", ["PyTorch", "--input", "/nonexistent.json", "--output", "x.et"], "no such file"),
        (
            "trace_link_main",
            [
                "--rank",
                "0",
                "--chakra-host-trace",
                "PARAM_HOST",
                "--chakra-device-trace",
                "PARAM_DEVICE",
                "--output-file",
                "x.json",
            ],
            "different runs",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tool: str, args: list[str], message: str, tmp_path: Path):
    args = [
        str(require_shared("param/linear_et.json.gz")) if a == "PARAM_HOST" else
        str(require_shared("param/linear_kineto.json.gz")) if a == "PARAM_DEVICE" else
        str(tmp_path / a) if a.startswith("x.") else a
        for a in args
    ]  # fmt: skip
    result = run(tool, *args)
    assert result.returncode == EXIT_BAD_INPUT
    assert message in result.stderr and "Traceback" not in result.stderr
