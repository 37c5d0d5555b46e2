"""Plots of analysis results: time breakdown, ranks compared, critical path, operator changes.

Every function takes plain data (mappings and sequences of numbers in **ns**), so it does not
depend on the analysis classes, and writes a PNG or an SVG chosen by the suffix of ``path``
(atomically) and returns the path. With ``path=None`` it returns the SVG text instead: just the
``<svg>`` element, without XML prolog, ready to be inlined in HTML (text stays text, element ids
are salted per plot kind and deterministic). Time axes are in ms, or in µs when every value is
below 1 ms.

matplotlib is imported only when a plot is drawn, so importing this module is cheap; it draws on
plain :class:`matplotlib.figure.Figure` objects (Agg renders PNG, the SVG backend SVG), never
through ``pyplot``, so neither the caller's backend nor pyplot's figure list is touched. Without
matplotlib every function raises :class:`ChakraInputError` with the hint to install
``chakra-et[plot]``.

Example:
    plot_breakdown({0: {"compute": 8e6, "idle": 2e6}, 1: {"compute": 7e6, "idle": 3e6}}, "b.png")
    svg = plot_breakdown({0: {"compute": 8e6, "idle": 2e6}})  # '<svg ...'
"""

from __future__ import annotations

import io as _io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from chakra import io
from chakra.errors import ChakraInputError, PathLike
from chakra.units import NS_PER_MS, NS_PER_US

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Output formats by file suffix.
FORMATS = {".png": "png", ".svg": "svg"}
#: Raster resolution of PNG files (dots per inch; matplotlib's default is 100, too coarse for slides).
PNG_DPI = 150
#: Figure size in inches: width grows with the bars per axis between these bounds; height fixed.
MIN_WIDTH_IN, MAX_WIDTH_IN, WIDTH_PER_BAR_IN, BASE_WIDTH_IN = 6.0, 16.0, 0.35, 3.0
HEIGHT_IN = 4.0
#: Height of one horizontal bar (critical path, operator changes), in inches, plus room for axes.
BAR_HEIGHT_IN, HBAR_BASE_HEIGHT_IN = 0.3, 1.4
#: Operator names longer than this are cut (with an ellipsis) so the bars keep their room.
MAX_LABEL_CHARS = 48
#: Default quantities of :func:`plot_rank_comparison`: keys of its rows (ns).
RANK_QUANTITIES = ("span", "compute", "communication", "idle")
#: Colours of :func:`plot_ops_diff`: slower (positive change) and faster (negative).
SLOWER_COLOR, FASTER_COLOR = "#d62728", "#2ca02c"
#: Bar width as a fraction of the distance between ranks.
BAR_WIDTH = 0.8


def _format(path: PathLike | None) -> str:
    """The output format of ``path`` (``svg`` for ``None``); refuses other suffixes before any drawing."""
    if path is None:
        return "svg"
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ChakraInputError(
            f"cannot write a plot as {Path(path).suffix or 'a file without suffix'}",
            path=path,
            hint="name the file .png or .svg",
        )
    return fmt


@contextmanager
def _drawing(kind: str) -> Iterator[type[Figure]]:
    """matplotlib's ``Figure`` under the settings of every plot: SVG text as text, element ids salted by
    plot kind (deterministic, and distinct between plots of one page)."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ChakraInputError(
            "plots need matplotlib, which is not installed", hint="pip install 'chakra-et[plot]'"
        ) from None
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"chakra-{kind}"}):
        yield Figure


def _save(figure: Figure, path: PathLike | None, fmt: str) -> Path | str:
    """Write ``figure`` to ``path`` atomically (returns the path), or return its ``<svg>`` element for ``None``."""
    metadata = {"Date": None} if fmt == "svg" else None  # no timestamp: the same data gives the same file
    if path is None:
        buffer = _io.StringIO()
        figure.savefig(buffer, format="svg", metadata=metadata)
        text = buffer.getvalue()
        return text[text.index("<svg") :]
    with io.AtomicFile(path) as handle:
        figure.savefig(handle, format=fmt, metadata=metadata, dpi=PNG_DPI)
    return Path(path)


def _time_unit(max_ns: float) -> tuple[str, float]:
    """The axis unit for values up to ``max_ns``: (label, ns per unit)."""
    return ("ms", NS_PER_MS) if max_ns >= NS_PER_MS else ("µs", NS_PER_US)


def _check_values(values: Sequence[float], what: str, *, signed: bool = False) -> None:
    for value in values:
        if not math.isfinite(value) or (value < 0 and not signed):
            raise ChakraInputError(f"{what}: {value!r} is not a {'finite' if signed else 'non-negative'} time in ns")


def _width(bars: int) -> float:
    return min(MAX_WIDTH_IN, max(MIN_WIDTH_IN, BASE_WIDTH_IN + WIDTH_PER_BAR_IN * bars))


def _label(name: str) -> str:
    return name if len(name) <= MAX_LABEL_CHARS else name[: MAX_LABEL_CHARS - 1] + "…"


def _hbars(ax: Any, items: Sequence[tuple[str, float]], **style: Any) -> None:
    """Horizontal bars bottom to top, labelled by name (by position: equal names stay separate bars)."""
    positions = range(len(items))
    ax.barh(positions, [value for _, value in items], **style)
    ax.set_yticks(positions, [_label(name) for name, _ in items])


def _rank_axis(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("rank")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _finish_by_rank(figure: Any, ax: Any, ylabel: str, title: str, path: PathLike | None, fmt: str) -> Path | str:
    """Label a plot with a bar group per rank, put its legend outside, and save it."""
    _rank_axis(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _save(figure, path, fmt)


@overload
def plot_breakdown(per_rank: Mapping[int, Mapping[str, float]], path: None = ..., *, title: str = ...) -> str: ...
@overload
def plot_breakdown(per_rank: Mapping[int, Mapping[str, float]], path: PathLike, *, title: str = ...) -> Path: ...
def plot_breakdown(
    per_rank: Mapping[int, Mapping[str, float]], path: PathLike | None = None, *, title: str = "Time per rank"
) -> Path | str:
    """Stacked bars per rank of the parts of its time (ns), e.g. ``{"compute only": ..., "idle": ...}``.

    Parts stack in order of first appearance; a part missing on a rank counts 0 there.
    """
    fmt = _format(path)
    if not per_rank or not any(per_rank.values()):
        raise ChakraInputError("nothing to plot: no rank has a time breakdown")
    parts: dict[str, None] = {}
    for values in per_rank.values():
        parts.update(dict.fromkeys(values))
        _check_values(list(values.values()), "breakdown")
    ranks = sorted(per_rank)
    unit, ns_per_unit = _time_unit(max(sum(per_rank[r].values()) for r in ranks))
    with _drawing("breakdown") as figure_class:
        figure = figure_class(figsize=(_width(len(ranks)), HEIGHT_IN), layout="constrained")
        ax = figure.add_subplot()
        bottom = [0.0] * len(ranks)
        for part in parts:
            heights = [per_rank[r].get(part, 0.0) / ns_per_unit for r in ranks]
            ax.bar(ranks, heights, BAR_WIDTH, bottom=bottom, label=part)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        return _finish_by_rank(figure, ax, f"time ({unit})", title, path, fmt)


@overload
def plot_rank_comparison(
    rows: Sequence[Mapping[str, float]], path: None = ..., *, quantities: Sequence[str] = ..., title: str = ...
) -> str: ...
@overload
def plot_rank_comparison(
    rows: Sequence[Mapping[str, float]], path: PathLike, *, quantities: Sequence[str] = ..., title: str = ...
) -> Path: ...
def plot_rank_comparison(
    rows: Sequence[Mapping[str, float]],
    path: PathLike | None = None,
    *,
    quantities: Sequence[str] = RANK_QUANTITIES,
    title: str = "Ranks compared",
) -> Path | str:
    """Grouped bars per rank of ``quantities`` (ns), each with a dashed line at its mean over the ranks.

    ``rows`` hold one mapping per rank: ``{"rank": 0, "span": ..., "compute": ..., ...}`` (the
    row's position when it has no ``rank``). Every row must have every quantity.
    """
    fmt = _format(path)
    if not rows or not quantities:
        raise ChakraInputError("nothing to plot: no rank rows or no quantities")
    for row in rows:
        missing = [q for q in quantities if q not in row]
        if missing:
            raise ChakraInputError(f"rank row {dict(row)!r} lacks {', '.join(missing)}")
        _check_values([row[q] for q in quantities], "rank comparison")
    ranks = [int(row.get("rank", i)) for i, row in enumerate(rows)]
    unit, ns_per_unit = _time_unit(max(row[q] for row in rows for q in quantities))
    width = BAR_WIDTH / len(quantities)
    with _drawing("ranks") as figure_class:
        figure = figure_class(figsize=(_width(len(rows) * len(quantities)), HEIGHT_IN), layout="constrained")
        ax = figure.add_subplot()
        for k, quantity in enumerate(quantities):
            values = [row[quantity] / ns_per_unit for row in rows]
            offset = (k - (len(quantities) - 1) / 2) * width
            bars = ax.bar([r + offset for r in ranks], values, width, label=quantity)
            ax.axhline(sum(values) / len(values), color=bars.patches[0].get_facecolor(), linestyle="--", linewidth=1)
        return _finish_by_rank(figure, ax, f"time ({unit}); dashed: mean", title, path, fmt)


@overload
def plot_critical_path(
    by_operator: Mapping[str, float], by_category: Mapping[str, float], path: None = ..., *, top: int = ...,
    title: str = ...,
) -> str: ...  # fmt: skip
@overload
def plot_critical_path(
    by_operator: Mapping[str, float], by_category: Mapping[str, float], path: PathLike, *, top: int = ...,
    title: str = ...,
) -> Path: ...  # fmt: skip
def plot_critical_path(
    by_operator: Mapping[str, float],
    by_category: Mapping[str, float],
    path: PathLike | None = None,
    *,
    top: int = 15,
    title: str = "Critical path",
) -> Path | str:
    """Horizontal bars of the ``top`` operators by time on the critical path (ns, longest on top), and
    below them the path's time per category."""
    fmt = _format(path)
    if not by_operator and not by_category:
        raise ChakraInputError("nothing to plot: the critical path has no operators")
    _check_values(list(by_operator.values()), "critical path operators")
    _check_values(list(by_category.values()), "critical path categories")
    operators = sorted(by_operator.items(), key=lambda item: -item[1])[: max(top, 0)]
    categories = sorted(by_category.items(), key=lambda item: -item[1])
    unit, ns_per_unit = _time_unit(max([0.0, *by_operator.values(), *by_category.values()]))
    panels = [(f"top {len(operators)} of {len(by_operator)} operators", operators), ("categories", categories)]
    panels = [(label, items) for label, items in panels if items]
    height = HBAR_BASE_HEIGHT_IN * len(panels) + BAR_HEIGHT_IN * sum(len(items) for _, items in panels)
    with _drawing("critical-path") as figure_class:
        figure = figure_class(figsize=(MIN_WIDTH_IN * 1.5, height), layout="constrained")
        axes = figure.subplots(len(panels), 1, squeeze=False, height_ratios=[len(items) + 1 for _, items in panels])
        for ax, (label, items) in zip(axes[:, 0], panels, strict=True):
            _hbars(ax, [(name, value / ns_per_unit) for name, value in reversed(items)])
            ax.set_title(label, loc="left", fontsize="medium")
        axes[-1, 0].set_xlabel(f"time on the path ({unit})")
        figure.suptitle(title)
        return _save(figure, path, fmt)


@overload
def plot_ops_diff(
    deltas: Sequence[tuple[str, float]], path: None = ..., *, top: int = ..., title: str = ...
) -> str: ...
@overload
def plot_ops_diff(deltas: Sequence[tuple[str, float]], path: PathLike, *, top: int = ..., title: str = ...) -> Path: ...
def plot_ops_diff(
    deltas: Sequence[tuple[str, float]],
    path: PathLike | None = None,
    *,
    top: int = 20,
    title: str = "Time change per operator",
) -> Path | str:
    """Diverging horizontal bars of the ``top`` operator time changes by size, ``(name, delta_ns)``:
    slower (positive) in red to the right, faster (negative) in green to the left, the largest
    increase on top."""
    fmt = _format(path)
    if not deltas:
        raise ChakraInputError("nothing to plot: no operator changed")
    _check_values([delta for _, delta in deltas], "operator changes", signed=True)
    largest = sorted(deltas, key=lambda item: -abs(item[1]))[: max(top, 0)]
    shown = sorted(largest, key=lambda item: item[1])
    unit, ns_per_unit = _time_unit(max(abs(delta) for _, delta in shown))
    with _drawing("ops-diff") as figure_class:
        figure = figure_class(
            figsize=(MIN_WIDTH_IN * 1.5, HBAR_BASE_HEIGHT_IN + BAR_HEIGHT_IN * len(shown)), layout="constrained"
        )
        ax = figure.add_subplot()
        colors = [SLOWER_COLOR if delta > 0 else FASTER_COLOR for _, delta in shown]
        _hbars(ax, [(name, delta / ns_per_unit) for name, delta in shown], color=colors)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(f"change ({unit}); right: slower, left: faster")
        ax.set_title(title)
        return _save(figure, path, fmt)
