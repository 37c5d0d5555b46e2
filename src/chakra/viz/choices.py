"""The analyses :func:`chakra.viz.report.plot_analysis` draws, as an enum in a module of its own:
``chakra viz plot --kind`` offers them at start-up without importing the analyses and plots.
:mod:`chakra.viz.report` re-exports it."""

from __future__ import annotations

from enum import Enum


class PlotKind(str, Enum):
    """The analyses :func:`chakra.viz.report.plot_analysis` draws."""

    #: stacked time breakdown per rank
    BREAKDOWN = "breakdown"
    #: ranks side by side
    RANKS = "ranks"
    #: operators and kinds on the critical path of one rank (the slowest unless told)
    CRITICAL_PATH = "critical-path"
