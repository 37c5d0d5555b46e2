"""Convert a multi-rank PyTorch job: every rank's traces to ``PREFIX.{rank}.et`` plus the groups.

:func:`convert_workload` finds the rank files from patterns with a ``{rank}`` placeholder
(``traces/host.{rank}.json``), converts the ranks in parallel through :mod:`chakra.parallel`
(local processes, or a Dask cluster), then settles what needs every rank at once: which process
group each collective used where the traces do not say (:mod:`chakra.pytorch.groups`), global
peers of sends and receives, and consistent ``comm_seq`` numbers. Ranks whose group-dependent
attributes change are rewritten. ``PREFIX.comm_groups.json`` lists the non-default groups in
ASTRA-sim's format. Everything is written through :class:`chakra.workload_writer.WorkloadWriter`: all ranks
or none, and files of an earlier, larger job converted to the same prefix are removed (``removed``).
With ``check=True`` each rank is replayed with its recorded durations
(:func:`chakra.schedule.rank.schedule_file`) and the predicted span compared with the measured one.
The files record what ran; with ``target`` the written workload is then adapted in place for that
consumer (:func:`chakra.adapt.adapt_workload`, the same pass as ``chakra adapt``; ``adapted`` holds
its report), after the fidelity check.

Example:
    result = convert_workload("traces/host.{rank}.json", "traces/device.{rank}.json", "out/job")
    result.written.paths[0], result.conversion.reports[0].node_count, result.fidelity
"""

from __future__ import annotations

import glob
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra import io
from chakra.adapt import AdaptResult, Target, adapt_workload
from chakra.attrs import set_attr
from chakra.conversion import ConversionResult
from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.parallel import map_ranks
from chakra.pytorch.comms import CommNode, recorded_rank
from chakra.pytorch.convert import ConversionReport, convert, load_pair
from chakra.pytorch.groups import DEFAULT_GROUP, comm_groups_json, group_table, node_attributes, resolve
from chakra.pytorch.host import HostTrace
from chakra.pytorch.link import LinkedTrace
from chakra.schedule.fidelity import check_fidelity
from chakra.schedule.rank import ScheduleResult, schedule_file
from chakra.workload_writer import WorkloadWriter

RANK_PLACEHOLDER = "{rank}"
#: The fidelity check fails a rank whose replayed span is further than this from the measured one
#: (the converter is measured within 1.5 % on the gloo example; docs/frontends/pytorch.md, Fidelity).
PYTORCH_FIDELITY_TOLERANCE = 0.05


#: Key of the one file a pattern without ``{rank}`` names: its rank is read from the device trace.
SINGLE = -1


def rank_job_files(pattern: str) -> dict[int, Path]:
    """Files matching ``pattern`` (a path with ``{rank}``), by rank. A pattern without the
    placeholder names one file, returned under the key ``SINGLE``."""
    if RANK_PLACEHOLDER not in pattern:
        path = Path(pattern)
        if not path.exists():
            raise ChakraInputError("no such file", path=path, hint="check the path")
        return {SINGLE: path}
    head, _, tail = pattern.partition(RANK_PLACEHOLDER)
    regex = re.compile(re.escape(head) + r"(\d+)" + re.escape(tail) + r"\Z")
    found: dict[int, Path] = {}
    for name in glob.glob(glob.escape(head) + "*" + glob.escape(tail)):
        match = regex.match(name)
        if match:
            found[int(match.group(1))] = Path(name)
    if not found:
        raise ChakraInputError(
            f"no files match {pattern!r}", hint="use {rank} where the rank number is, e.g. traces/host.{rank}.json"
        )
    return dict(sorted(found.items()))


@dataclass
class RankResult:
    """What a worker sends back for one rank (small: no nodes)."""

    rank: int
    path: Path
    report: ConversionReport
    comm_nodes: list[CommNode]
    group_records: list[list[dict[str, Any]]]
    world_size: int
    written_attrs: dict[int, list[tuple[str, Any]]]


@dataclass
class PyTorchConversion:
    """What converting a job's ranks made of them: each rank's report, the non-default groups (id ->
    global ranks), how each collective's group was found, the ranks rewritten once the groups were
    settled, the ranks converted host-only (no device trace), and the adapt pass's report (with a
    target)."""

    reports: dict[int, ConversionReport]
    comm_groups: dict[int, list[int]]
    group_methods: Counter[str] = field(default_factory=Counter)
    rewritten: list[int] = field(default_factory=list)
    missing_device: list[int] = field(default_factory=list)
    adapted: AdaptResult | None = None


class PyTorchResult(ConversionResult[PyTorchConversion]):
    """What converting a PyTorch job (host + device traces, or Kineto traces alone) did: the
    conversion, the files written, and each rank's fidelity check (``None`` when not asked for)."""

    def report(self) -> dict[str, Any]:
        c = self.conversion
        return {
            "paths": {r: str(p) for r, p in self.written.paths.items()},
            "comm_groups_path": str(self.written.groups_path),
            "comm_groups": c.comm_groups,
            "group_methods": dict(c.group_methods),
            "rewritten": c.rewritten,
            "missing_device": c.missing_device,
            "removed": [str(p) for p in self.written.removed],
            "reports": {r: rep.to_dict() for r, rep in c.reports.items()},
            "adapted": c.adapted.to_dict() if c.adapted is not None else None,
        }


def _single_rank(host: HostTrace, linked: LinkedTrace | None, given: int | None) -> tuple[int, list[str]]:
    """The rank of one host trace converted on its own, and notes on how it was found: ``given``
    (``--rank``), else the device trace's ``distributedInfo``, else the rank its own
    ``record_param_comms`` ops name, else 0; any of those that disagrees with the one used is noted."""
    from_device = linked.device.rank if linked is not None else None
    from_comms = recorded_rank(host.nodes)
    sources = [("--rank", given), ("the device trace's distributedInfo", from_device)]
    sources.append(("the host trace's record_param_comms", from_comms))
    known = [(where, r) for where, r in sources if r is not None]
    if not known:
        return 0, ["neither trace says which rank it is: written as rank 0 (--rank sets it)"]
    used_from, used = known[0]
    notes = [
        f"{where} says rank {r}, but rank {used} (from {used_from}) is used" for where, r in known[1:] if r != used
    ]
    return used, notes


def _convert_one(job: tuple[int, str, str | None, str, bool, int | None]) -> RankResult:
    """Worker: convert one rank and write it where ``staging`` (a path with ``{rank}``) says (runs in
    another process)."""
    rank, host_path, device_path, staging, data_deps, given_rank = job
    host, linked = load_pair(host_path, device_path)
    records = [host.process_groups()]
    world_size = 0
    if linked is not None:
        records.append(linked.device.process_groups())
        world_size = int(linked.device.distributed_info.get("world_size") or 0)
    notes: list[str] = []
    if rank == SINGLE:
        rank, notes = _single_rank(host, linked, given_rank)
    out_path = staging.format(rank=rank)
    conversion = convert(host, linked=linked, rank=rank, data_deps=data_deps)
    conversion.report.notes.extend(notes)
    conversion.write(out_path)
    return RankResult(
        rank, Path(out_path), conversion.report, conversion.comm_nodes, records, world_size, conversion.group_attrs
    )


def _fidelity_one(path: str) -> ScheduleResult:
    return schedule_file(path)


def _rewrite(path: Path, changes: dict[int, list[tuple[str, Any]]]) -> None:
    """Set the given attributes on the given nodes of an .et file (atomically)."""
    metadata, nodes = io.read(path)
    for node in nodes:
        for name, value in changes.get(node.id, ()):
            set_attr(node, name, value)
    io.write(path, metadata, nodes)


def convert_workload(
    host_pattern: str,
    device_pattern: str | None,
    out_prefix: str | Path,
    *,
    data_deps: bool = False,
    target: Target | None = None,
    check: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    rank: int | None = None,
) -> PyTorchResult:
    """Convert every rank of a job. ``progress(stage, done, total)`` is told how far each stage got.
    ``rank`` is the rank of a single host trace (patterns without ``{rank}``; default: from the
    traces' own records, see :func:`_single_rank`).

    Ranks with a host trace but no device trace are converted host-only (listed in
    ``missing_device``); a device trace without its host trace is an error.
    """
    hosts = rank_job_files(host_pattern)
    devices = rank_job_files(device_pattern) if device_pattern else {}
    if (SINGLE in hosts) != (SINGLE in devices) and devices:
        raise ChakraInputError(
            "give both --host and --device with {rank}, or both as single files",
            hint=f"--host {host_pattern!r}, --device {device_pattern!r}",
        )
    if rank is not None and SINGLE not in hosts:
        raise ChakraInputError(
            "--rank is for a single host trace", hint="with {rank} patterns each file's rank is in its name"
        )
    orphans = sorted(set(devices) - set(hosts))
    if orphans:
        raise ChakraInputError(
            f"device traces of ranks {orphans} have no host trace", hint=f"check the --host pattern {host_pattern!r}"
        )

    def make_jobs(staging: str) -> list[tuple[int, str, str | None, str, bool, int | None]]:
        return [
            (key, str(path), str(devices[key]) if key in devices else None, staging, data_deps, rank)
            for key, path in hosts.items()
        ]

    result = convert_rank_jobs(
        make_jobs,
        _convert_one,
        out_prefix,
        [key for key in hosts if key != SINGLE],
        target=target,
        check=check,
        workers=workers,
        scheduler=scheduler,
        progress=progress,
    )
    result.conversion.missing_device = sorted(set(hosts) - set(devices)) if device_pattern else []
    return result


def convert_rank_jobs(
    make_jobs: Callable[[str], list[Any]],
    convert_one: Callable[[Any], RankResult],
    out_prefix: str | Path,
    known_ranks: list[int],
    *,
    target: Target | None = None,
    check: bool = False,
    tolerance: float = PYTORCH_FIDELITY_TOLERANCE,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> PyTorchResult:
    """Convert every rank of a job with ``convert_one`` (in worker processes: one job each, from
    ``make_jobs(staging)``, where ``staging`` is the writer's path pattern with ``{rank}``), then
    settle the groups across ranks, rewrite the ranks whose group attributes change, write the
    groups file, check fidelity and adapt (module docstring). ``known_ranks`` are staged before the
    workers run (a worker that learns its rank from what it reads is adopted after)."""
    with WorkloadWriter(out_prefix) as writer:
        prefix = writer.prefix
        jobs = make_jobs(writer.staging_pattern())
        for key in known_ranks:  # staged before the workers write them, so a failure removes every one
            writer.adopt(key)

        def tell(stage: str) -> Callable[[int, int], None] | None:
            return (lambda done, total: progress(stage, done, total)) if progress else None

        results: list[RankResult] = map_ranks(
            convert_one, jobs, workers=workers, scheduler=scheduler, progress=tell("converting")
        )
        by_rank = {r.rank: r for r in results}
        for key in by_rank:
            writer.adopt(key)
        world_size = max([r.world_size for r in results] + [max(by_rank) + 1])
        records = [entries for r in results for entries in r.group_records]
        groups = group_table(*records, world_size=world_size)
        have_records = any(records)
        resolution = resolve(
            {r: res.comm_nodes for r, res in by_rank.items()}, groups, world_size, have_records=have_records
        )

        group_methods: Counter[str] = Counter()
        rewritten: list[int] = []
        used: set[str] = set()
        for rank, result in by_rank.items():
            found = resolution[rank]
            group_methods.update(res.method for res in found.values())
            used.update(res.pg_name for res in found.values())
            result.report.comm_groups = Counter(res.method for res in found.values())
            wanted = node_attributes(result.comm_nodes, found, groups, rank)
            changes = {
                node_id: attrs
                for node_id, attrs in wanted.items()
                if sorted(attrs) != sorted(result.written_attrs.get(node_id, []))
            }
            if changes:
                _rewrite(result.path, changes)
                rewritten.append(rank)
        comm_groups = comm_groups_json(groups, used - {DEFAULT_GROUP}, world_size)
        writer.groups = CommGroups({k: tuple(v) for k, v in comm_groups.items()})
    written = writer.result
    assert written is not None
    for rank, result in by_rank.items():
        result.path = written.paths[rank]

    fidelity = None
    if check:
        replays = map_ranks(
            _fidelity_one,
            [str(by_rank[r].path) for r in sorted(by_rank)],
            workers=workers,
            scheduler=scheduler,
            progress=tell("checking"),
        )
        fidelity = check_fidelity(dict(zip(sorted(by_rank), replays, strict=True)), tolerance)
    adapted = None
    if target is not None:
        adapted = adapt_workload(prefix, prefix, target, workers=workers, scheduler=scheduler, progress=progress)
    conversion = PyTorchConversion(
        reports={r: by_rank[r].report for r in sorted(by_rank)},
        comm_groups=comm_groups,
        group_methods=group_methods,
        rewritten=rewritten,
        adapted=adapted,
    )
    return PyTorchResult(conversion, written, fidelity)
