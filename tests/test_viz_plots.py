"""chakra.viz.plots: PNG and SVG plots of plain data (ns), and inline SVG text for the HTML report."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from matplotlib.image import imread

from chakra.errors import ChakraInputError
from chakra.viz import plots
from chakra.viz.plots import PNG_DPI, plot_breakdown, plot_critical_path, plot_ops_diff, plot_rank_comparison

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_TAG = "{http://www.w3.org/2000/svg}svg"
MS = 1_000_000  # ns

BREAKDOWN = {
    0: {"compute only": 8 * MS, "exposed communication": 1 * MS, "idle": 1 * MS},
    1: {"compute only": 6 * MS, "overlap": 2 * MS, "idle": 3 * MS},
}
RANK_ROWS = [
    {"rank": 0, "span": 10 * MS, "compute": 8 * MS, "communication": 1 * MS, "idle": 1 * MS},
    {"rank": 1, "span": 11 * MS, "compute": 6 * MS, "communication": 2 * MS, "idle": 3 * MS},
]
BY_OPERATOR = {"aten::mm": 5 * MS, "aten::add": 1 * MS, "nccl:all_reduce": 2 * MS}
BY_CATEGORY = {"compute": 6 * MS, "communication": 2 * MS}
DELTAS = [("aten::mm", 3 * MS), ("aten::add", -2 * MS), ("aten::relu", 10_000)]

#: Every plot with arguments that draw it, by name.
PLOTS = {
    "breakdown": (plot_breakdown, (BREAKDOWN,)),
    "ranks": (plot_rank_comparison, (RANK_ROWS,)),
    "critical_path": (plot_critical_path, (BY_OPERATOR, BY_CATEGORY)),
    "ops_diff": (plot_ops_diff, (DELTAS,)),
}


def _texts(svg: str | Path) -> set[str]:
    """The text strings of an SVG (text stays text: svg.fonttype none)."""
    root = ET.fromstring(svg) if isinstance(svg, str) else ET.parse(svg).getroot()
    assert root.tag == SVG_TAG
    return {"".join(el.itertext()).strip() for el in root.iter("{http://www.w3.org/2000/svg}text")}


@pytest.mark.parametrize("name", PLOTS)
def test_each_plot_writes_a_png_of_its_figure_size(name: str, tmp_path: Path):
    function, args = PLOTS[name]
    out = function(*args, tmp_path / f"{name}.png")
    assert out == tmp_path / f"{name}.png"
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    height, width, _ = imread(out).shape
    assert width >= plots.MIN_WIDTH_IN * PNG_DPI and height > 0


def test_a_breakdown_png_is_six_by_four_inches_at_the_png_resolution(tmp_path: Path):
    # two ranks: width max(6, 3 + 0.35 x 2) = 6 in, height 4 in, at 150 dpi: 900 x 600 pixels
    height, width, _ = imread(plot_breakdown(BREAKDOWN, tmp_path / "b.png")).shape
    assert (width, height) == (900, 600)


@pytest.mark.parametrize("name", PLOTS)
def test_each_plot_writes_an_svg_an_xml_parser_reads(name: str, tmp_path: Path):
    function, args = PLOTS[name]
    out = function(*args, tmp_path / f"{name}.svg")
    assert _texts(out)


@pytest.mark.parametrize("name", PLOTS)
def test_without_a_path_a_plot_is_an_svg_element_to_inline(name: str, tmp_path: Path):
    function, args = PLOTS[name]
    svg = function(*args, None)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert _texts(svg)
    assert function(*args, None) == svg  # deterministic: no date, fixed ids
    assert list(tmp_path.iterdir()) == []


def test_the_breakdown_stacks_every_part_and_labels_ms(tmp_path: Path):
    texts = _texts(plot_breakdown(BREAKDOWN))
    assert {"compute only", "exposed communication", "overlap", "idle", "time (ms)", "rank"} <= texts


def test_times_below_a_millisecond_are_shown_in_microseconds():
    assert "time (µs)" in _texts(plot_breakdown({0: {"compute": 400_000}}))


def test_the_rank_comparison_draws_every_quantity_and_says_where_the_mean_is():
    texts = _texts(plot_rank_comparison(RANK_ROWS, quantities=("span", "idle")))
    assert {"span", "idle", "time (ms); dashed: mean"} <= texts
    assert "compute" not in texts


def test_the_critical_path_shows_only_the_top_operators_and_every_category():
    texts = _texts(plot_critical_path(BY_OPERATOR, BY_CATEGORY, top=2))
    assert {"aten::mm", "nccl:all_reduce", "top 2 of 3 operators", "compute", "communication"} <= texts
    assert "aten::add" not in texts


def test_long_operator_names_are_cut_with_an_ellipsis():
    name = "aten::" + "x" * 100
    texts = _texts(plot_critical_path({name: MS}, {}))
    assert name[: plots.MAX_LABEL_CHARS - 1] + "…" in texts


def test_the_ops_diff_keeps_the_largest_changes_either_way():
    texts = _texts(plot_ops_diff(DELTAS, top=2))
    assert {"aten::mm", "aten::add"} <= texts  # +3 ms and -2 ms; +10 µs is left out
    assert "aten::relu" not in texts


def test_a_suffix_other_than_png_or_svg_is_refused_before_drawing(tmp_path: Path):
    with pytest.raises(ChakraInputError, match=r"cannot write a plot as \.pdf.*\.png or \.svg"):
        plot_breakdown(BREAKDOWN, tmp_path / "b.pdf")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("function", "args"),
    [
        (plot_breakdown, ({},)),
        (plot_rank_comparison, ([],)),
        (plot_critical_path, ({}, {})),
        (plot_ops_diff, ([],)),
    ],
)
def test_empty_data_is_refused(function, args):
    with pytest.raises(ChakraInputError, match="nothing to plot"):
        function(*args)


def test_a_negative_time_is_refused():
    with pytest.raises(ChakraInputError, match="not a non-negative time"):
        plot_breakdown({0: {"idle": -1.0}})


def test_a_rank_row_without_a_quantity_is_refused():
    with pytest.raises(ChakraInputError, match="lacks idle"):
        plot_rank_comparison([{"rank": 0, "span": 1.0, "compute": 1.0, "communication": 0.0}])


def test_without_matplotlib_a_plot_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ChakraInputError, match=r"pip install 'chakra-et\[plot\]'"):
        plot_breakdown(BREAKDOWN)


def test_importing_the_module_does_not_import_matplotlib():
    code = "import sys, chakra.viz.plots; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
