"""chakra.sim.sweep and ``chakra sweep``: a grid of what-if knobs, simulated in parallel, tabled and plotted."""

from __future__ import annotations

import csv
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import assert_one_line_error, make_node, write_et
from helpers import run_cli as run

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
from chakra.sim.program import RankProgram, program_of
from chakra.sim.results import SimulationStuck
from chakra.sim.scenario import Scenario
from chakra.sim.sweep import (
    SweepPoint,
    SweepResult,
    baseline_index,
    grid,
    parse_axis,
    run_sweep,
    speedups,
    write_csv,
    write_plot,
)
from chakra.table import NodeTable

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM, RING2 = EXAMPLES / "system.json", EXAMPLES / "ring2.yml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _workload(folder: Path, *, compute_us: int, allreduce_bytes: int, both_ranks_reduce: bool = True) -> Path:
    """Two ranks: a GPU compute node of ``compute_us`` µs, then an all-reduce of ``allreduce_bytes``."""
    compute = make_node(1, "fwd", COMP_NODE, duration_micros=compute_us, is_cpu_op=False)
    reduce = make_node(2, "ar", COMM_COLL_NODE, [1], is_cpu_op=False, comm_type=ALL_REDUCE, comm_size=allreduce_bytes)
    write_et(folder / "job.0.et", [compute, reduce])
    write_et(folder / "job.1.et", [compute, reduce] if both_ranks_reduce else [compute])
    return folder / "job"


@pytest.fixture
def comm_bound(tmp_path: Path) -> Path:
    return _workload(tmp_path, compute_us=1, allreduce_bytes=64 << 20)


@pytest.fixture
def compute_bound(tmp_path: Path) -> Path:
    return _workload(tmp_path, compute_us=10_000, allreduce_bytes=1024)


def _result(finish_ns: int, **knobs) -> SweepResult:
    return SweepResult(SweepPoint(**knobs), finish_ns=finish_ns, max_comm_exposed_ns=0, total_compute_ns=0)


# --- the grid ---------------------------------------------------------------------------------


def test_the_grid_is_every_combination_first_axis_slowest():
    points = grid({"bandwidth-scale": [0.5, 1, 2], "compute-scale": [0.5, 1]})
    assert len(points) == 6
    assert [(p.bandwidth_scale, p.compute_scale) for p in points] == [
        (0.5, 0.5), (0.5, 1), (1, 0.5), (1, 1), (2, 0.5), (2, 1),
    ]  # fmt: skip
    assert all(p.latency_scale == 1 and not p.system_overrides and not p.network_overrides for p in points)


def test_system_keys_and_network_keys_become_overrides():
    points = grid({"preferred-dataset-splits": [4, 8], "network.latency": [[100], [500]]})
    assert len(points) == 4
    assert points[1].system_overrides == {"preferred-dataset-splits": 4}
    assert points[1].network_overrides == {"latency": [500]}
    assert points[1].label() == "preferred-dataset-splits=4, network.latency=[500]"


def test_no_axes_is_the_one_default_point():
    assert grid({}) == [SweepPoint()]
    assert SweepPoint().label() == "defaults"


def test_axis_values_are_read_like_set_values():
    assert parse_axis("bandwidth-scale=0.5,1,2,4") == ("bandwidth-scale", [0.5, 1, 2, 4])
    assert parse_axis("scheduling-policy=LIFO,FIFO") == ("scheduling-policy", ["LIFO", "FIFO"])
    assert parse_axis("network.bandwidth=[100,50],[200,100]") == ("network.bandwidth", [[100, 50], [200, 100]])
    assert parse_axis("latency-scale=1e-1,1") == ("latency-scale", [0.1, 1])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("bandwidth-scale", "bandwidth-scale"),  # no values
        ("bandwidth-scale=", "bandwidth-scale"),
        ("bandwidth-scale=0,1", "bandwidth-scale"),  # a link without bandwidth never delivers
        ("compute-scale=fast", "compute-scale"),
        ("bandwith-scale=1,2", "bandwith-scale"),  # not a knob
        ("network.links=1,2", "network.links"),
        ("bandwidth-scale=[1,2", "bandwidth-scale"),  # not YAML
    ],
)
def test_a_bad_axis_names_itself_and_shows_an_example(text: str, named: str):
    with pytest.raises(ChakraInputError) as caught:
        parse_axis(text)
    assert repr(named) in str(caught.value) and "e.g." in str(caught.value)


# --- running ----------------------------------------------------------------------------------


def test_more_bandwidth_finishes_a_communication_bound_workload_sooner(comm_bound: Path):
    points = grid({"bandwidth-scale": [0.5, 1, 2, 4]})
    results = run_sweep(comm_bound, Scenario(SYSTEM, RING2), points, workers=2)
    finish = [r.finish_ns for r in results]
    assert finish == sorted(finish, reverse=True) and len(set(finish)) == 4
    assert [r.point for r in results] == points  # results in the order of the points
    assert all(r.max_comm_exposed_ns > 0.9 * r.finish_ns for r in results)


def test_faster_compute_finishes_a_compute_bound_workload_sooner(compute_bound: Path):
    slow, fast = run_sweep(compute_bound, Scenario(SYSTEM, RING2), grid({"compute-scale": [1, 0.5]}), workers=1)
    assert fast.finish_ns < slow.finish_ns
    assert (slow.total_compute_ns, fast.total_compute_ns) == (2 * 10_000_000, 2 * 5_000_000)  # two ranks, ns


def test_a_sweep_loads_each_rank_once_not_once_per_point(comm_bound: Path, monkeypatch: pytest.MonkeyPatch):
    from chakra.sim import sweep

    loaded: list[int] = []

    def counting_program_of(table: NodeTable, rank: int) -> RankProgram:
        loaded.append(rank)
        return program_of(table, rank)

    monkeypatch.setattr(sweep, "program_of", counting_program_of)
    # the points run in this process
    run_sweep(comm_bound, Scenario(SYSTEM, RING2), grid({"bandwidth-scale": [0.5, 1, 2]}), workers=1)
    assert sorted(loaded) == [0, 1]


def test_a_sweep_run_in_this_process_does_not_keep_the_workload(comm_bound: Path):
    from chakra.sim.sweep import _programs  # the per-process cache of loaded programs

    run_sweep(comm_bound, Scenario(SYSTEM, RING2), grid({"bandwidth-scale": [1, 2]}), workers=1)
    assert _programs.cache_info().currsize == 0


def test_a_bad_override_fails_before_any_simulation(comm_bound: Path):
    with pytest.raises(ChakraInputError, match="preferred-dataset-splits"):
        run_sweep(comm_bound, Scenario(SYSTEM, RING2), grid({"preferred-dataset-splits": [4, 0]}), workers=2)


def test_a_workload_that_hangs_names_the_point_across_processes(tmp_path: Path):
    prefix = _workload(tmp_path, compute_us=1, allreduce_bytes=1024, both_ranks_reduce=False)
    # both points hang; whichever a worker reports first is named
    with pytest.raises(SimulationStuck, match=r"at (defaults|bandwidth-scale=2): .*never issue it") as caught:
        run_sweep(prefix, Scenario(SYSTEM, RING2), grid({"bandwidth-scale": [1, 2]}), workers=2)
    assert caught.value.waiting[0][:2] == (0, 2)  # rank 0 node 2 waits


# --- reading the results ----------------------------------------------------------------------


def test_speed_up_is_against_the_default_point_when_swept():
    results = [_result(200, bandwidth_scale=0.5), _result(100), _result(50, bandwidth_scale=2)]
    assert baseline_index(results) == 1
    assert speedups(results) == [0.5, 1.0, 2.0]


def test_without_the_default_point_the_closest_one_is_the_baseline():
    results = [_result(100, bandwidth_scale=4), _result(200, bandwidth_scale=2), _result(90, compute_scale=0.5)]
    assert baseline_index(results) == 1  # one knob off, and 2 is nearer 1 than 4 (0.5 ties with 2: first wins)


def test_the_csv_has_one_row_per_point(tmp_path: Path):
    results = [_result(100 * i, bandwidth_scale=i, network_overrides={"latency": [i]}) for i in (1, 2, 4)]
    write_csv(results, tmp_path / "sweep.csv")
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [row["finish_ns"] for row in rows] == ["100", "200", "400"]
    assert rows[2]["bandwidth-scale"] == "4" and rows[2]["network.latency"] == "[4]"


def test_the_png_plot_is_a_real_png(tmp_path: Path):
    results = [_result(100 // b, bandwidth_scale=b, compute_scale=c) for b in (1, 2, 4) for c in (0.5, 1)]
    write_plot(results, tmp_path / "sweep.png", "bandwidth-scale")
    assert (tmp_path / "sweep.png").read_bytes().startswith(PNG_MAGIC)


def test_the_svg_plot_parses_as_xml_with_a_line_per_other_axis_value(tmp_path: Path):
    results = [_result(100 // b, bandwidth_scale=b, compute_scale=c) for b in (1, 2, 4) for c in (0.5, 1)]
    write_plot(results, tmp_path / "sweep.svg", "bandwidth-scale")
    text = (tmp_path / "sweep.svg").read_text()
    assert ET.fromstring(text).tag.endswith("svg")
    assert "compute-scale=0.5" in text and "compute-scale=1" in text  # the legend


def test_a_plot_needs_a_known_suffix_and_axis(tmp_path: Path):
    results = [_result(100, bandwidth_scale=1)]
    with pytest.raises(ChakraInputError, match=r"\.png or \.svg"):
        write_plot(results, tmp_path / "sweep.jpg", "bandwidth-scale")
    with pytest.raises(ChakraInputError, match="no axis 'bogus'"):
        write_plot(results, tmp_path / "sweep.png", "bogus")


def test_without_matplotlib_the_plot_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ChakraInputError, match=r"chakra-et\[plot\]"):
        write_plot([_result(100)], tmp_path / "sweep.png", "bandwidth-scale")
    assert not (tmp_path / "sweep.png").exists()


# --- the command ------------------------------------------------------------------------------


def test_sweep_prints_a_row_per_point_and_writes_plot_and_csv(comm_bound: Path, tmp_path: Path):
    result = run(
        "sweep", "--workload", str(comm_bound), "--system", str(SYSTEM), "--network", str(RING2),
        "--axis", "bandwidth-scale=0.5,1,2", "--axis", "compute-scale=0.5,1",
        "--plot", str(tmp_path / "sweep.png"), "--csv", str(tmp_path / "sweep.csv"), "--workers", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "speed-up vs defaults" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 6 and "1.00x" in rows[3]  # bandwidth-scale=1, compute-scale=1
    assert (tmp_path / "sweep.png").read_bytes().startswith(PNG_MAGIC)
    assert len(list(csv.DictReader((tmp_path / "sweep.csv").open()))) == 6


def test_sweep_json_lists_every_point(comm_bound: Path):
    result = run(
        "sweep", "--workload", str(comm_bound), "--system", str(SYSTEM), "--network", str(RING2),
        "--axis", "preferred-dataset-splits=4,8", "--json", "--workers", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [p["preferred-dataset-splits"] for p in data["points"]] == [4, 8]
    assert data["baseline"] == "preferred-dataset-splits=4"


def test_a_bad_axis_exits_2_with_one_line(comm_bound: Path):
    result = run(
        "sweep", "--workload", str(comm_bound), "--system", str(SYSTEM), "--network", str(RING2),
        "--axis", "bandwidth-scale=fast,slow",
    )  # fmt: skip
    assert_one_line_error(result, "bandwidth-scale", "e.g. --axis bandwidth-scale=")


def test_sweep_help_has_an_example():
    result = run("sweep", "--help")
    assert result.returncode == 0 and "Example: chakra sweep" in result.stdout


def test_a_scenario_at_a_point_keeps_its_own_changes_under_the_points(tmp_path: Path):
    base = Scenario(SYSTEM, RING2, system_overrides={"endpoint-delay": 5}, bandwidth_scale=2.0, astra_compat=True)
    point = SweepPoint(compute_scale=0.5, bandwidth_scale=3.0, system_overrides={"preferred-dataset-splits": 2})

    at = point.on(base)

    assert at.system_overrides == {"endpoint-delay": 5, "preferred-dataset-splits": 2}
    assert (at.bandwidth_scale, at.compute_scale, at.astra_compat) == (6.0, 0.5, True)
    system, _, _ = at.load()
    assert (system.preferred_dataset_splits, system.endpoint_delay_ns, system.astra_compat) == (2, 5, True)
