"""chakra report: one self-contained HTML page, opened in a real (headless) Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import ARTIFACTS, chromium
from helpers import make_node, write_et

from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
from chakra.viz.report import write_report
from chakra.workload import open_workload

SCREENSHOT_SIZE = "1280,4000"
#: A PNG with less than this share of non-white pixels would be a blank page.
MIN_INK_FRACTION = 0.01


@pytest.fixture(scope="module")
def gloo_report(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), out / "job")
    return write_report(open_workload(out / "job"), out / "report.html")


def test_the_report_renders_every_plot_in_chromium(gloo_report: Path):
    dom = chromium("--dump-dom", gloo_report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    plots = len(re.findall(r'<div class="plot">', gloo_report.read_text()))
    assert plots >= 3  # breakdown, ranks compared, critical path
    match = re.search(r'data-plots-rendered="(\d+)"', dom.stdout)
    assert match is not None, "the page's load handler did not run"
    assert int(match.group(1)) == plots


def test_a_screenshot_of_the_report_is_kept_and_not_blank(gloo_report: Path):
    import matplotlib.image

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    done = chromium(f"--screenshot={shot}", f"--window-size={SCREENSHOT_SIZE}", gloo_report.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = matplotlib.image.imread(str(shot))[..., :3]
    ink = (pixels < 0.9).any(axis=-1).mean()
    assert ink > MIN_INK_FRACTION


def test_the_report_needs_nothing_from_the_network(gloo_report: Path):
    text = gloo_report.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text)
    assert "<link" not in text


def test_the_report_shows_the_breakdown_critical_path_and_operators(gloo_report: Path):
    text = gloo_report.read_text()
    for heading in ("Time breakdown per rank", "Ranks compared", "Critical path of rank", "Top operators of rank"):
        assert heading in text
    assert "ALL_REDUCE" in text  # the DDP buckets and the explicit all_reduce


def test_a_workload_without_start_times_is_reported_from_its_replay(tmp_path: Path):
    for rank in (0, 1):
        nodes = [
            make_node(1, type=COMP_NODE, duration_micros=10 + rank, is_cpu_op=False),
            make_node(2, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=1024, is_cpu_op=False,
                      duration_micros=4, data_deps=[1]),
            make_node(3, type=COMP_NODE, duration_micros=5, is_cpu_op=False, data_deps=[2]),
        ]  # fmt: skip
        write_et(tmp_path / f"w.{rank}.et", nodes)
    html = write_report(open_workload(tmp_path / "w"), tmp_path / "r.html").read_text()
    assert "replay timing" in html
    assert "Critical path of rank" in html
    assert "Stragglers unknown" in html and "record no start times" in html


def test_the_report_says_untimed_communication_is_left_to_the_simulator(tmp_path: Path):
    for rank in (0, 1):
        nodes = [
            make_node(1, type=COMP_NODE, duration_micros=10, is_cpu_op=False),
            make_node(2, type=COMM_COLL_NODE, comm_type=ALL_REDUCE, comm_size=1024, is_cpu_op=False, data_deps=[1]),
        ]
        write_et(tmp_path / f"w.{rank}.et", nodes)
    html = write_report(open_workload(tmp_path / "w"), tmp_path / "r.html").read_text()
    assert "2 communication nodes have no recorded duration" in html


def test_a_trace_with_a_dependency_cycle_still_gets_a_report_naming_the_cycle(tmp_path: Path):
    from helpers import UPSTREAM_ET_GZ, require_shared, run_cli

    upstream = require_shared(UPSTREAM_ET_GZ)
    done = run_cli("report", str(upstream), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    # the two members of the cycle, not the 2,283 nodes it blocks
    assert "dependency cycle of 2 nodes: 3317 -&gt; 3318 -&gt; 3317" in page
    assert "chakra adapt --target astra-sim" in page
    assert "ncclKernel_AllReduce_RING_LL_Sum_float" in page  # operator totals need no schedule
    assert "ALL_REDUCE" in page  # nor does the communication volume
    dom = chromium("--dump-dom", (tmp_path / "r.html").as_uri())
    assert dom.returncode == 0 and "3317" in dom.stdout


def test_the_report_never_shows_the_same_operator_table_twice(gloo_report: Path):
    # a converted trace stores exclusive times: "by total" and "by exclusive" often rank alike
    page = gloo_report.read_text()
    if "<p>by exclusive time</p>" in page:
        by_total, by_exclusive = page.split("<p>by total time</p>")[1].split("<p>by exclusive time</p>")
        assert by_total.split("</table>")[0] != by_exclusive.split("</table>")[0]
    else:
        assert "these operators come in the same order" in page


def test_operators_ranked_alike_by_total_and_exclusive_time_get_one_table(tmp_path: Path):
    ops = [
        make_node(i, f"op{i}", COMP_NODE, start_time_micros=10 * i + 1, duration_micros=9 - i, tid=1) for i in range(3)
    ]
    write_et(tmp_path / "w.0.et", ops)
    page = write_report(open_workload(tmp_path / "w"), tmp_path / "r.html").read_text()
    assert "<p>by total time</p>" in page and "<p>by exclusive time</p>" not in page
    assert "these operators come in the same order" in page


def test_a_trace_with_nesting_shows_both_operator_tables(tmp_path: Path):
    outer = make_node(1, "outer", COMP_NODE, start_time_micros=10, duration_micros=100, tid=1, is_cpu_op=True)
    inner = make_node(2, "inner", COMP_NODE, start_time_micros=20, duration_micros=90, tid=1, is_cpu_op=True)
    write_et(tmp_path / "w.0.et", [outer, inner])
    page = write_report(open_workload(tmp_path / "w"), tmp_path / "r.html").read_text()
    assert "by total time" in page and "by exclusive time" in page
