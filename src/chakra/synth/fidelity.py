"""How close a synthetic workload is to its source: :func:`compare_workloads`.

Every figure is computed the same way on both workloads, by the core analyses:

* **breakdown shares** (:func:`chakra.analyze.breakdown.breakdown`, replayed schedule on both: a
  sample has no recorded start times): compute, communication, exposed communication and idle time
  as shares of the span, over all ranks (sums of times over the sum of spans); bound: within
  :data:`SHARE_BOUND` of the span;
* **critical path** (:func:`chakra.analyze.critical_path.critical_path`): the longest rank's, ns;
  bound: :data:`CRITICAL_PATH_BOUND` relative;
* **busy time** (compute, communication), **bytes per collective type** and **nodes per kind**, per
  rank (totals over the ranks over their number): bound :data:`BYTES_BOUND` relative (nodes are
  reported);
* **durations per operator class**: the two-sample Kolmogorov-Smirnov statistic of every class with
  at least :data:`KS_MIN_SAMPLES` nodes in both; bound: below :data:`KS_BOUND`;
* **simulated step time** (:func:`chakra.sim.run.simulate_workload` on the system and network given):
  the last rank's finish; bound :data:`SIM_BOUND` relative.

Per-rank figures compare at any scale; the critical path and the simulated time are bounded only
when both workloads have as many ranks (a wider data-parallel group is a different job).

Example:
    report = compare_workloads("runs/job", "synthetic/job", system="system.json", network="net.yml")
    report.ok, [row.name for row in report.failed()]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from chakra.errors import PathLike
from chakra.synth.fit import node_classes
from chakra.table import NodeTable

#: Bounds of the issue that asked for synthesis (issue 19): shares within 5 % of the span, bytes and
#: simulated time within 5 %, the critical path within 10 %, KS below 0.1 for classes of 50 or more.
SHARE_BOUND, BYTES_BOUND, SIM_BOUND, CRITICAL_PATH_BOUND = 0.05, 0.05, 0.05, 0.10
KS_BOUND, KS_MIN_SAMPLES = 0.1, 50


@dataclass
class Row:
    """One figure: its value on both workloads, how far apart (relative, or absolute for shares and
    KS), the bound it must keep (``None``: reported only), and whether it does."""

    group: str
    name: str
    source: float
    sample: float
    difference: float
    bound: float | None

    @property
    def ok(self) -> bool:
        return self.bound is None or self.difference <= self.bound + 1e-12

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "ok": self.ok}


@dataclass
class FidelityReport:
    source: str
    sample: str
    source_ranks: int
    sample_ranks: int
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    def failed(self) -> list[Row]:
        return [row for row in self.rows if not row.ok]

    def row(self, group: str, name: str) -> Row:
        return next(r for r in self.rows if r.group == group and r.name == name)

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source, "sample": self.sample, "source_ranks": self.source_ranks,
            "sample_ranks": self.sample_ranks, "ok": self.ok, "rows": [r.to_dict() for r in self.rows],
        }  # fmt: skip


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs.

    >>> ks_statistic(np.array([1, 2, 3, 4]), np.array([1, 2, 3, 4]))
    0.0
    >>> ks_statistic(np.array([1, 2]), np.array([3, 4]))
    1.0
    """
    a, b = np.sort(a), np.sort(b)
    points = np.concatenate((a, b))
    cdf_a = np.searchsorted(a, points, side="right") / len(a)
    cdf_b = np.searchsorted(b, points, side="right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


@dataclass
class _Figures:
    ranks: int = 0
    span_ns: int = 0
    times_ns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    nodes_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    critical_ns: int = 0
    durations: dict[str, list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))
    finish_ns: int | None = None


_RankFigures = tuple[dict[str, int], dict[str, int], dict[str, int], int, dict[str, np.ndarray]]


def _rank_figures(table: NodeTable) -> _RankFigures:
    from chakra.analyze.breakdown import breakdown
    from chakra.analyze.critical_path import critical_path

    b = breakdown(table, timing="replay")
    times = {"span": b.span_ns, "compute": b.compute_ns, "communication": b.communication_ns,
             "exposed communication": b.comm_exposed_ns, "idle": b.idle_ns}  # fmt: skip
    classes, class_of = node_classes(table)
    durations = {name: table.dur_ns[class_of == i] for i, name in enumerate(classes) if (class_of == i).any()}
    return times, b.bytes_by_collective, b.nodes_by_category, critical_path(table).length_ns, durations


def _figures(prefix: PathLike, system: PathLike | None, network: PathLike | None) -> _Figures:
    from chakra.workload import open_workload

    found = open_workload(prefix).map(_rank_figures)
    figures = _Figures(ranks=len(found.results))
    for times, bytes_by, nodes_by, critical_ns, durations in found.results.values():
        for key, value in times.items():
            figures.times_ns[key] += value
        for key, value in bytes_by.items():
            figures.bytes_by[key] += value
        for key, value in nodes_by.items():
            figures.nodes_by[key] += value
        figures.critical_ns = max(figures.critical_ns, critical_ns)
        for name, values in durations.items():
            figures.durations[name].append(values)
    if system is not None and network is not None:
        from chakra.sim.config.network import load_network
        from chakra.sim.config.system import load_system
        from chakra.sim.run import simulate_workload

        figures.finish_ns = simulate_workload(str(prefix), load_system(system), load_network(network)).finish_ns
    return figures


def _relative(a: float, b: float) -> float:
    return abs(b - a) / abs(a) if a else (0.0 if b == 0 else float("inf"))


def compare_workloads(
    source: PathLike,
    sample: PathLike,
    *,
    system: PathLike | None = None,
    network: PathLike | None = None,
    sample_network: PathLike | None = None,
) -> FidelityReport:
    """Compare ``sample`` with ``source`` (see the module's docstring); the simulated step time only
    with ``system`` and ``network`` (``sample_network`` for a sample of another size)."""
    a = _figures(source, system, network)
    b = _figures(sample, system, sample_network or network)
    report = FidelityReport(str(source), str(sample), a.ranks, b.ranks)
    same_scale = a.ranks == b.ranks
    span_a, span_b = a.times_ns["span"], b.times_ns["span"]
    for key in ("compute", "communication", "exposed communication", "idle"):
        share_a = a.times_ns[key] / span_a if span_a else 0.0
        share_b = b.times_ns[key] / span_b if span_b else 0.0
        report.rows.append(Row("share of span", key, share_a, share_b, abs(share_b - share_a), SHARE_BOUND))
    for key in ("compute", "communication"):
        per_a, per_b = a.times_ns[key] / a.ranks, b.times_ns[key] / b.ranks
        report.rows.append(Row("busy ns per rank", key, per_a, per_b, _relative(per_a, per_b), BYTES_BOUND))
    for key in sorted(set(a.bytes_by) | set(b.bytes_by)):
        per_a, per_b = a.bytes_by.get(key, 0) / a.ranks, b.bytes_by.get(key, 0) / b.ranks
        report.rows.append(Row("bytes per rank", key, per_a, per_b, _relative(per_a, per_b), BYTES_BOUND))
    for key in sorted(set(a.nodes_by) | set(b.nodes_by)):
        per_a, per_b = a.nodes_by.get(key, 0) / a.ranks, b.nodes_by.get(key, 0) / b.ranks
        report.rows.append(Row("nodes per rank", key, per_a, per_b, _relative(per_a, per_b), None))
    report.rows.append(Row(
        "time", "critical path (ns)", a.critical_ns, b.critical_ns, _relative(a.critical_ns, b.critical_ns),
        CRITICAL_PATH_BOUND if same_scale else None,
    ))  # fmt: skip
    if a.finish_ns is not None and b.finish_ns is not None:
        report.rows.append(Row(
            "time", "simulated step (ns)", a.finish_ns, b.finish_ns, _relative(a.finish_ns, b.finish_ns),
            SIM_BOUND if same_scale else None,
        ))  # fmt: skip
    for key in sorted(set(a.durations) & set(b.durations)):
        da, db = np.concatenate(a.durations[key]), np.concatenate(b.durations[key])
        if min(len(da), len(db)) >= KS_MIN_SAMPLES:
            report.rows.append(Row("duration KS", key, len(da), len(db), ks_statistic(da, db), KS_BOUND))
    return report
