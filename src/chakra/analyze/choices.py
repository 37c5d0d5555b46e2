"""The choices the analyses take (``timing=``, ``by=``), as enums in a module of their own: the
``chakra`` command offers them as options at start-up without importing the analyses (numpy, the
node table). :mod:`chakra.analyze.breakdown` documents what each means and re-exports them."""

from __future__ import annotations

from enum import Enum


#: ``timing=`` values: where the start times come from (see :mod:`chakra.analyze.breakdown`).
class Timing(str, Enum):
    """Where the start times of an analysis come from (see :mod:`chakra.analyze.breakdown`)."""

    AUTO = "auto"
    RECORDED = "recorded"
    REPLAY = "replay"


#: ``by=`` values of :func:`chakra.analyze.breakdown.top_operators`.
class RankBy(str, Enum):
    """What :func:`chakra.analyze.breakdown.top_operators` ranks operators by."""

    TOTAL = "total"
    EXCLUSIVE = "exclusive"


#: ``scope=`` values of :func:`chakra.analyze.breakdown.breakdown`.
class Scope(str, Enum):
    """Which nodes a breakdown counts: all of them, or the device's only (kernels, copies,
    collectives: what runs off the host's threads, the GPU time split HolisticTraceAnalysis reports)."""

    ALL = "all"
    DEVICE = "device"
