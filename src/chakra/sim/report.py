"""A simulation's results as JSON or CSV (per rank, per collective type)."""

from __future__ import annotations

import csv
import io as _io
import json
from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError
from chakra.io import AtomicFile
from chakra.sim.results import SimResult

#: Per-rank columns of the CSV report (all ns).
RANK_COLUMNS = (
    "rank", "finish_ns", "cpu_ns", "gpu_compute_ns", "astra_exposed_comm_ns", "comm_ns", "compute_only_ns",
    "comm_exposed_ns", "overlap_ns", "idle_ns", "nodes",
)  # fmt: skip


def report_dict(result: SimResult) -> dict[str, Any]:
    """Finish time, per-rank figures (ns), per-collective-type totals and warnings.

    The time split adds up to ``finish_ns``: ``compute_only_ns`` (compute, CPU or GPU, and no
    communication), ``comm_exposed_ns`` (communication and no compute: the exposed communication,
    named as :class:`chakra.analyze.breakdown.Breakdown` names it), ``overlap_ns`` (both), ``idle_ns``
    (neither). ``astra_exposed_comm_ns`` is the figure ASTRA-sim prints as "exposed communication":
    finish minus GPU compute, which also counts CPU work and idle time. Under the congestion-aware
    model, ``links`` lists every link that carried a message, busiest first: bytes, the time it
    carried them (``busy_ns``; ``utilization`` its share of ``finish_ns``), messages, and the time
    messages waited for it (``queued_ns``, added up). ``classes``: how many classes of equivalent
    ranks were simulated, one rank each (:mod:`chakra.sim.classes`), or ``None`` with the reason the
    ranks ran one by one (``rank_by_rank``).
    """
    return {
        "finish_ns": result.finish_ns,
        "ranks": [
            {
                "rank": stats.rank,
                "finish_ns": stats.finish_ns,
                "cpu_ns": stats.cpu_ns,
                "gpu_compute_ns": stats.gpu_compute_ns,
                "astra_exposed_comm_ns": stats.astra_exposed_comm_ns,
                "comm_ns": stats.comm_ns,
                "compute_only_ns": stats.compute_only_ns,
                "comm_exposed_ns": stats.comm_exposed_ns,
                "overlap_ns": stats.overlap_ns,
                "idle_ns": stats.idle_ns,
                "nodes": stats.nodes,
            }
            for _, stats in sorted(result.ranks.items())
        ],
        "collectives": result.collectives,
        "links": None
        if result.links is None
        else [
            {
                "source": link.source,
                "target": link.target,
                "bytes": link.bytes,
                "busy_ns": link.busy_ns,
                "utilization": link.busy_ns / result.finish_ns if result.finish_ns else 0.0,
                "messages": link.messages,
                "queued_ns": link.queued_ns,
            }
            for link in result.links
        ],
        "warnings": result.warnings,
        "classes": result.classes,
        "rank_by_rank": result.rank_by_rank,
    }


#: What ``--report`` writes, by suffix.
REPORT_SUFFIXES = (".json", ".csv")


def check_report_path(path: str | Path) -> None:
    """Raise :class:`ChakraInputError` unless ``path`` ends in a suffix :func:`write_sim_report` writes."""
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise ChakraInputError(
            f"cannot tell the report's format from {Path(path).name!r}",
            path=path,
            hint="name it .json (every figure) or .csv (the per-rank rows)",
        )


def write_sim_report(result: SimResult, path: str | Path) -> None:
    """JSON (``.json``) or CSV (``.csv``) of the per-rank rows, written atomically."""
    check_report_path(path)
    data = report_dict(result)
    if Path(path).suffix.lower() == ".json":
        text = json.dumps(data, indent=1)
    else:
        buffer = _io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=RANK_COLUMNS)
        writer.writeheader()
        writer.writerows(data["ranks"])
        text = buffer.getvalue()
    with AtomicFile(path) as handle:
        handle.write(text.encode())
