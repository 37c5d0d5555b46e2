"""Structural and consumer-compatibility checks of Chakra traces. Returns findings, never prints.

:func:`validate_table` checks one rank's node table (:mod:`chakra.table`: the values every other
consumer reads), :func:`validate_trace` / :func:`validate_file` a trace or a file; :func:`validate_set`
checks every rank of a workload plus what only shows across ranks (missing rank files, unmatched
send/recv pairs, collectives issued in different orders). ``target="astra-sim"`` adds what that
simulator aborts, hangs or silently misbehaves on (``reference/astra-sim.md`` §2, §7).

Example:
    findings = validate_trace(Trace.load("llama.0.et"), target="astra-sim")
    [f for f in findings if f.severity == ERROR]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chakra.errors import ChakraFormatError
from chakra.paths import rank_of
from chakra.validate.findings import (
    DEFAULT_LIMIT_PER_CODE,
    ERROR,
    INFO,
    SEVERITY_ORDER,
    TARGETS,
    WARNING,
    Collector,
    Finding,
    Target,
    count_by_severity,
)

# The checks read node tables (numpy, protobuf): imported where a check runs, so that the findings'
# vocabulary (Target, DEFAULT_LIMIT_PER_CODE: what the ``chakra`` command offers at start-up) comes
# without them.
if TYPE_CHECKING:
    from chakra.groups import MAX_ASTRA_GROUP_ID, astra_group_id_note
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
    from chakra.table import NodeTable
    from chakra.trace import Trace
    from chakra.validate.rank import ASTRA_UNSUPPORTED_COLLECTIVES, RankSummary
    from chakra.workload import Workload

#: Re-exported names read on first use, and the module each comes from.
_LAZY = {
    "ASTRA_UNSUPPORTED_COLLECTIVES": "chakra.validate.rank",
    "MAX_ASTRA_GROUP_ID": "chakra.groups",
    "astra_group_id_note": "chakra.groups",
}

__all__ = [
    "ASTRA_UNSUPPORTED_COLLECTIVES",
    "DEFAULT_LIMIT_PER_CODE",
    "ERROR",
    "INFO",
    "MAX_ASTRA_GROUP_ID",
    "SEVERITY_ORDER",
    "TARGETS",
    "WARNING",
    "Finding",
    "Target",
    "astra_group_id_note",
    "count_by_severity",
    "iter_validate_set",
    "validate_file",
    "validate_nodes",
    "validate_set",
    "validate_table",
    "validate_trace",
]

Groups = Mapping[int, Iterable[int]]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def _target(target: Target | str | None) -> Target | None:
    """``target`` as a :class:`Target`; ``ValueError`` for a target that is not known."""
    if target is None:
        return None
    if target not in TARGETS:  # a Target is a str equal to its value
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    return Target(target)


def _validate(
    table: NodeTable,
    target: Target | str | None,
    rank: int | None,
    comm_groups: Groups | None,
    limit_per_code: int | None,
) -> tuple[list[Finding], RankSummary]:
    from chakra.validate.rank import check_rank

    chosen = _target(target)
    out = Collector(rank, limit_per_code)
    summary = check_rank(
        table, out, astra=chosen is Target.ASTRA_SIM, rank=rank, groups_defined=set(comm_groups or {}), path=table.path
    )
    if chosen is Target.CUSTOM_COLLECTIVE:
        from chakra.validate.custom import check_custom_rank

        check_custom_rank(table, out, summary)
    return out.result(), summary


def validate_table(
    table: NodeTable,
    *,
    target: Target | str | None = None,
    rank: int | None = None,
    comm_groups: Groups | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """The findings of one rank's node table (``rank`` defaults to the table's)."""
    return _validate(table, target, table.rank if rank is None else rank, comm_groups, limit_per_code)[0]


def validate_trace(
    trace: Trace,
    *,
    target: Target | str | None = None,
    rank: int | None = None,
    comm_groups: Groups | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """The findings of one rank held in memory."""
    return validate_table(
        trace.table(), target=target, rank=rank, comm_groups=comm_groups, limit_per_code=limit_per_code
    )


def validate_nodes(
    metadata: GlobalMetadata,
    nodes: Iterable[Node],
    *,
    path: str | Path | None = None,
    target: Target | str | None = None,
    rank: int | None = None,
    comm_groups: Groups | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """:func:`validate_table` of the table of ``nodes``."""
    from chakra.table import table_from_nodes

    table = table_from_nodes(nodes, metadata=metadata, path=path, rank=rank_of(path) if path and rank is None else rank)
    return validate_table(table, target=target, comm_groups=comm_groups, limit_per_code=limit_per_code)


def validate_file(
    path: str | Path,
    *,
    target: Target | str | None = None,
    comm_groups: Groups | None = None,
    limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE,
) -> list[Finding]:
    """Check one file; a file that does not parse is one ``format`` error finding.

    Without ``comm_groups``, the workload's ``PREFIX.comm_groups.json`` beside a ``PREFIX.{rank}.et``
    file is used when it exists.
    """
    from chakra.workload import open_workload

    if comm_groups is None:
        comm_groups = open_workload(path).comm_groups
    from chakra.table import load_table

    rank = rank_of(path)
    findings, _ = _validate_loaded(lambda: load_table(path, rank), target, rank, comm_groups, limit_per_code)
    return findings


def _validate_loaded(
    load: Callable[[], NodeTable],
    target: Target | str | None,
    rank: int | None,
    comm_groups: Groups | None,
    limit_per_code: int | None,
) -> tuple[list[Finding], RankSummary | None]:
    _target(target)
    try:
        table = load()
    except ChakraFormatError as exc:
        where = ""
        if exc.offset is not None:
            record = f"node #{exc.node_index}" if exc.node_index is not None else "GlobalMetadata record"
            where = f" (byte {exc.offset}, {record})"
        return [Finding(ERROR, "format", exc.message + where, None, exc.hint, rank)], None
    return _validate(table, target, rank, comm_groups, limit_per_code)


def iter_validate_set(
    workload: Workload, *, target: Target | str | None = None, limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE
) -> Iterator[tuple[int | None, list[Finding]]]:
    """Validate a workload rank by rank, yielding ``(rank, findings)``; the last item has rank ``None``
    and holds the cross-rank findings. One rank's table is held at a time."""
    from chakra.validate.workload import cross_rank_findings

    summaries: dict[int, RankSummary] = {}
    for rank in workload.files:
        findings, summary = _validate_loaded(partial(workload.read_table, rank), target, rank, workload.comm_groups,
                                             limit_per_code)  # fmt: skip
        if summary is not None:
            summaries[rank] = summary
        yield rank, findings
    yield None, cross_rank_findings(
        list(workload.missing), workload.comm_groups or None, summaries, _target(target) is Target.ASTRA_SIM,
        limit_per_code, custom=_target(target) is Target.CUSTOM_COLLECTIVE,
        ranks=len(workload.files) + len(workload.missing),
    )  # fmt: skip


def validate_set(
    workload: Workload, *, target: Target | str | None = None, limit_per_code: int | None = DEFAULT_LIMIT_PER_CODE
) -> list[Finding]:
    """All findings of every rank of ``workload`` plus the cross-rank ones."""
    return [
        f for _, findings in iter_validate_set(workload, target=target, limit_per_code=limit_per_code) for f in findings
    ]
