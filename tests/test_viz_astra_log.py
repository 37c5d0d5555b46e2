"""chakra.viz.astra_log and chakra_timeline_visualizer: a simulator's issue/callback log as a Chrome trace in µs."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, MEM_LOAD_NODE, METADATA_NODE
from chakra.viz.astra_log import (
    LANE_COMMUNICATION,
    LANE_COMPUTE,
    LANE_LOCAL_MEMORY,
    LANE_MEMORY,
    LANE_OTHER,
    LANE_REMOTE_MEMORY,
    NO_NODE_TYPE,
    lane,
    log_events,
    parse_frequency_mhz,
    parse_log,
    write_log_timeline,
)

EXIT_BAD_INPUT = 2
PREFIX = "[2024-05-01 10:00:00.000] [workload] [debug] "

#: ASTRA-sim's trace-enabled lines behind spdlog's prefix, between other log output. At 1500 MHz:
#: npu 0 "fwd" from cycle 0 to 3000 (0 µs, 2 µs); npu 1 "all_reduce(a=1, b=2)" from 1500 to 4500 (1 µs, 2 µs).
DEBUG_LOG = f"""\
[2024-05-01 10:00:00.000] [system] [info] ring of node 0, id: 0 dimension: local total nodes in ring: 2
{PREFIX}issue,sys->id=0, tick=0, node->id=1, node->name=fwd, node->type={COMP_NODE}
{PREFIX}issue,sys->id=1, tick=1500, node->id=1, node->name=all_reduce(a=1, b=2), node->type={COMM_COLL_NODE}
{PREFIX}callback,sys->id=0, tick=3000, node->id=1, node->name=fwd, node->type={COMP_NODE}
{PREFIX}callback,sys->id=1, tick=4500, node->id=1, node->name=all_reduce(a=1, b=2), node->type={COMM_COLL_NODE}
[2024-05-01 10:00:00.002] [workload] [info] sys[0] finished, 3000 cycles, exposed communication 0 cycles.
"""

#: Upstream's short form; the name is the fifth field on, commas and equals signs included.
SHORT_LOG = """\
issue,npu=0,cycle=1500,node=3,name=COMP_NODE_mm, alpha=1
callback,npu=0,cycle=4500,node=3,name=COMP_NODE_mm, alpha=1
"""


def _write(tmp_path: Path, text: str, name: str = "astra.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _complete(events: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in events if e["ph"] == "X"}


def test_debug_lines_behind_a_logger_prefix_are_read_and_other_lines_skipped(tmp_path: Path):
    log = parse_log(_write(tmp_path, DEBUG_LOG))
    assert log.names == ["fwd", "all_reduce(a=1, b=2)"]
    assert log.npu.tolist() == [0, 1] and log.node_id.tolist() == [1, 1]
    assert log.node_type.tolist() == [COMP_NODE, COMM_COLL_NODE]
    assert (log.issue_cycle.tolist(), log.callback_cycle.tolist()) == ([0, 1500], [3000, 4500])
    assert log.skipped_lines == 2


def test_times_are_microseconds_cycles_over_megahertz(tmp_path: Path):
    # 1500 cycles at 1500 MHz are 1 µs; upstream would write 0.001 (ms) into these µs fields
    events = _complete(log_events(parse_log(_write(tmp_path, DEBUG_LOG)), 1500))
    assert (events["fwd"]["ts"], events["fwd"]["dur"]) == (0, 2)
    assert (events["all_reduce(a=1, b=2)"]["ts"], events["all_reduce(a=1, b=2)"]["dur"]) == (1, 2)
    assert events["fwd"]["args"] == {"node_id": 1, "cycles": 3000, "node_type": COMP_NODE}


def test_short_form_names_keep_their_commas_and_equals_signs(tmp_path: Path):
    log = parse_log(_write(tmp_path, SHORT_LOG))
    assert log.names == ["COMP_NODE_mm, alpha=1"]
    assert log.node_type.tolist() == [NO_NODE_TYPE]
    event = _complete(log_events(log, "1.5GHz"))["COMP_NODE_mm, alpha=1"]
    assert (event["ts"], event["dur"], event["tid"]) == (1, 2, LANE_COMPUTE)


def test_a_debug_name_ends_at_the_last_node_type_key(tmp_path: Path):
    line = f"{PREFIX}issue,sys->id=0, tick=0, node->id=7, node->name=odd, node->type=x, node->type=4\n"
    log = parse_log(_write(tmp_path, line + line.replace("issue", "callback")))
    assert log.names == ["odd, node->type=x"] and log.node_type.tolist() == [COMP_NODE]


@pytest.mark.parametrize(
    ("text", "mhz"),
    [("1500", 1500.0), (1500, 1500.0), ("1500MHz", 1500.0), ("1.5GHz", 1500.0), ("1.5 ghz", 1500.0), ("2e9Hz", 2000.0)],
)
def test_frequencies_are_megahertz_by_default_or_carry_a_unit(text: str | int, mhz: float):
    assert parse_frequency_mhz(text) == pytest.approx(mhz)


@pytest.mark.parametrize("text", ["fast", "1.5THz", "0", "-3MHz", ""])
def test_a_frequency_that_is_not_a_positive_frequency_is_refused(text: str):
    with pytest.raises(ChakraInputError, match="frequency"):
        parse_frequency_mhz(text)


def test_lanes_come_from_the_node_type_else_from_name_keywords_else_other():
    assert lane("anything", COMP_NODE) == LANE_COMPUTE
    assert lane("anything", COMM_COLL_NODE) == LANE_COMMUNICATION
    assert lane("x_REMOTE_MEMORY", MEM_LOAD_NODE) == LANE_REMOTE_MEMORY
    assert lane("weights", MEM_LOAD_NODE) == LANE_MEMORY
    assert lane("COMP_NODE_in_the_name", METADATA_NODE) == LANE_OTHER  # the type wins over the name
    assert lane("MEM_STORE_NODE_LOCAL_MEMORY") == LANE_LOCAL_MEMORY
    assert lane("COMM_SEND_NODE_0") == LANE_COMMUNICATION
    assert lane("aten::mm") == LANE_OTHER  # upstream stops with an error here


def test_a_node_issued_again_pairs_with_its_own_callbacks_in_order(tmp_path: Path):
    # node 5 of npu 0 runs twice (two iterations): 0 -> 10, then 20 -> 50 cycles
    lines = [
        "issue,a=0,b=0,c=5,d=x",
        "callback,a=0,b=10,c=5,d=x",
        "issue,a=0,b=20,c=5,d=x",
        "callback,a=0,b=50,c=5,d=x",
    ]
    log = parse_log(_write(tmp_path, "\n".join(lines)))
    assert (log.issue_cycle.tolist(), log.callback_cycle.tolist()) == ([0, 20], [10, 50])


def test_unmatched_issues_and_callbacks_are_counted_not_drawn(tmp_path: Path):
    # npu 1's node 9 never completes; npu 0 reports a callback of node 4 it never issued
    lines = ["issue,a=0,b=0,c=1,d=x", "issue,a=1,b=0,c=9,d=y", "callback,a=0,b=10,c=1,d=x", "callback,a=0,b=12,c=4,d=z"]
    log = parse_log(_write(tmp_path, "\n".join(lines)))
    assert log.names == ["x"]
    assert (log.unmatched_issues, log.unmatched_callbacks) == (1, 1)
    assert log.to_dict()["npus"] == [0, 1]


def test_a_malformed_event_line_is_an_error_naming_its_line_number(tmp_path: Path):
    text = DEBUG_LOG + f"{PREFIX}callback,sys->id=0, tick=soon, node->id=1, node->name=fwd\n"
    with pytest.raises(ChakraInputError, match=r"line 7: callback event that does not parse"):
        parse_log(_write(tmp_path, text))


def test_a_callback_before_its_issue_is_an_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="line 2: callback at cycle 5 before its issue on line 1"):
        parse_log(_write(tmp_path, "issue,a=0,b=9,c=1,d=x\ncallback,a=0,b=5,c=1,d=x\n"))


def test_an_npu_outside_the_run_is_an_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="line 3: NPU 1 is not one of the 1 NPUs"):
        parse_log(_write(tmp_path, DEBUG_LOG), num_npus=1)


def test_a_log_without_events_is_refused_with_a_hint(tmp_path: Path):
    with pytest.raises(ChakraInputError, match=r"no issue or callback line.*trace-enabled"):
        parse_log(_write(tmp_path, "[info] nothing to see\n"))


def test_a_gzip_log_is_read_like_a_plain_one(tmp_path: Path):
    path = tmp_path / "astra.log.gz"
    path.write_bytes(gzip.compress(DEBUG_LOG.encode()))
    assert parse_log(path).names == ["fwd", "all_reduce(a=1, b=2)"]


def test_the_written_file_is_a_chrome_trace_with_one_process_per_npu(tmp_path: Path):
    count = write_log_timeline(parse_log(_write(tmp_path, DEBUG_LOG)), tmp_path / "t.json", 1500, num_npus=2)
    document = json.loads((tmp_path / "t.json").read_text())
    assert count == 2 and document["meta_cpu_count"] == 2 and document["displayTimeUnit"] == "ns"
    events = document["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert processes == {0: "npu 0", 1: "npu 1"}
    assert threads == {(0, LANE_COMPUTE): "compute", (1, LANE_COMMUNICATION): "communication"}
    assert all({"ph", "name", "pid", "tid", "ts", "dur"} <= set(e) for e in events if e["ph"] == "X")


# ---------------------------------------------------------------------------------------------
# The drop-in command, with upstream's flags


def run_dropin(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from chakra.cli.dropin import timeline_visualizer_main as m; m()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_dropin_writes_the_timeline_and_reports_what_it_left_out(tmp_path: Path):
    log = _write(tmp_path, DEBUG_LOG + f"{PREFIX}issue,sys->id=1, tick=9000, node->id=2, node->name=bwd\n")
    out = tmp_path / "timeline.json"
    result = run_dropin(
        "--input_filename", str(log), "--output_filename", str(out), "--num_npus", "2", "--npu_frequency", "1500",
        "--log_filename", str(tmp_path / "debug.log"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote 2 events of 2 NPUs at 1500 MHz" in result.stderr
    assert "1 issues without callback, 0 callbacks without issue" in result.stderr
    assert _complete(json.loads(out.read_text())["traceEvents"])["fwd"]["dur"] == 2
    assert "wrote 2 events" in (tmp_path / "debug.log").read_text()


def test_dropin_accepts_a_frequency_in_gigahertz(tmp_path: Path):
    out = tmp_path / "timeline.json"
    result = run_dropin(
        "--input_filename", str(_write(tmp_path, SHORT_LOG)), "--output_filename", str(out),
        "--num_npus", "1", "--npu_frequency", "1.5GHz",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _complete(json.loads(out.read_text())["traceEvents"])["COMP_NODE_mm, alpha=1"]["ts"] == 1


@pytest.mark.parametrize(
    ("text", "frequency", "fragment"),
    [
        ("issue,a=0,b=x,c=1,d=n\n", "1500", "line 1: issue event that does not parse"),
        (SHORT_LOG, "fast", "'fast' is not a frequency"),
    ],
)
def test_dropin_bad_input_is_one_line_and_exit_2(tmp_path: Path, text: str, frequency: str, fragment: str):
    out = tmp_path / "timeline.json"
    result = run_dropin(
        "--input_filename", str(_write(tmp_path, text)), "--output_filename", str(out),
        "--num_npus", "1", "--npu_frequency", frequency,
    )  # fmt: skip
    assert result.returncode == EXIT_BAD_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr and fragment in lines[0]
    assert lines[0].startswith("chakra_timeline_visualizer: error:")
    assert not out.exists()


def test_a_number_beyond_int64_is_an_error_naming_its_line(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="line 1: a number too large"):
        parse_log(_write(tmp_path, f"issue,a=0,b={1 << 64},c=1,d=x\n"))
