"""Convert a job's profiler traces alone (one Kineto trace per rank) to ``PREFIX.{rank}.et``.

Each rank's trace is read in a worker, its window chosen (:mod:`chakra.kineto.window`), seen as a
linked host trace (:mod:`chakra.kineto.view`) and converted by the PyTorch converter; then, as for a
host + device job (:func:`chakra.pytorch.workload.convert_rank_jobs`), the groups are settled
across ranks (``distributedInfo.pg_config`` where recorded, else inferred by aligning the ranks'
collectives), ``PREFIX.comm_groups.json`` written, and with ``check`` every rank replayed with its
recorded durations against the measured step. Each rank's report holds the
:class:`~chakra.kineto.inventory.EventInventory` of its trace: every event converted, folded or
dropped, by category.

Example:
    result = convert_kineto_workload(["traces/"], "out/job", check=True)
    result.written.paths[0], result.conversion.reports[0].node_count, result.fidelity.failures()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from chakra.adapt import Target
from chakra.collector import gc_paused
from chakra.kineto.inputs import RankTrace, job_traces
from chakra.kineto.inventory import event_kinds, inventory
from chakra.kineto.view import profiler_view
from chakra.kineto.window import ALL_STEPS, choose_window
from chakra.pytorch.convert import convert
from chakra.pytorch.kineto import classify, load_kineto_trace
from chakra.pytorch.workload import PyTorchResult, RankResult, convert_rank_jobs

#: A Kineto-only conversion's fidelity bound: the step replayed with its recorded durations is
#: within this share of the measured one (issue 30).
KINETO_FIDELITY_TOLERANCE = 0.05

_Job = tuple[RankTrace, str, "int | str | None"]


def _convert_trace(job: _Job) -> RankResult:
    """Worker: convert one rank's trace and write it where ``staging`` says (another process)."""
    # one pause for the whole job: its steps each pause the collector, and between them its first passes
    # walked everything the step before had built (all of it alive to the end: nothing to find)
    with gc_paused():
        return _convert_paused(job)


def _convert_paused(job: _Job) -> RankResult:
    trace_file, staging, step = job
    trace = load_kineto_trace(trace_file.path, flows=False)
    kinds = event_kinds(trace)  # for the inventory
    events = classify(trace)
    # the lists by role hold every event the conversion reads: the rest (flows, Python frames, the
    # profiler's own) are let go now, and their memory serves what the conversion makes
    trace.events = []
    window = choose_window(trace, events, step)
    linked = profiler_view(trace, window, events)
    assert linked.events is not None, "a profiler view keeps its events"
    fates = inventory(kinds, linked.events, window.label)
    # the view copied what the conversion reads of the events (the runtime calls it still reads are
    # the link's own lists): let go now, their memory serves the conversion's items (a fifth of the peak)
    del events
    linked.events = None
    rank = trace_file.rank
    conversion = convert(linked.host, linked=linked, rank=rank, release_timing=True)
    report = conversion.report
    report.window = window.label
    report.events = fates
    if trace_file.rank_from != "distributedInfo":
        report.notes.append(f"rank {rank} from {trace_file.rank_from}")
    path = staging.format(rank=rank)
    conversion.write(path)
    world_size = int(trace.distributed_info.get("world_size") or 0)
    return RankResult(
        rank, Path(path), report, conversion.comm_nodes, [trace.process_groups()], world_size, conversion.group_attrs
    )


def _common_step(first: RankTrace) -> int | str:
    """The step every rank converts: the one the first rank's trace chooses (the ranks' collectives
    must be the same ones), or the whole traces when it has no steps."""
    trace = load_kineto_trace(first.path, flows=False)
    window = choose_window(trace, classify(trace))
    if window.start_us is None:
        return ALL_STEPS
    return int(window.label.rsplit("#", 1)[1])


def convert_kineto_workload(
    inputs: Sequence[str | Path],
    out_prefix: str | Path,
    *,
    rank: int | None = None,
    step: int | str | None = None,
    target: Target | None = None,
    check: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> PyTorchResult:
    """Convert the profiler traces ``inputs`` names (files, folders, globs; one per rank) to a
    workload at ``out_prefix``. ``rank`` is a single trace's rank, ``step`` the ``ProfilerStep``
    number to convert (:data:`~chakra.kineto.window.ALL_STEPS`: the whole trace; default: the
    complete step of median span). See :func:`~chakra.pytorch.workload.convert_rank_jobs` for
    ``target``, ``check``, ``workers``, ``scheduler`` and ``progress``."""
    job = job_traces(inputs, rank)
    traces = job.ranks
    if step is None and len(traces) > 1:
        step = _common_step(next(iter(traces.values())))

    def make_jobs(staging: str) -> list[_Job]:
        return [(trace, staging, step) for trace in traces.values()]

    result = convert_rank_jobs(
        make_jobs,
        _convert_trace,
        out_prefix,
        list(traces),
        target=target,
        check=check,
        tolerance=KINETO_FIDELITY_TOLERANCE,
        workers=workers,
        scheduler=scheduler,
        progress=progress,
    )
    if job.host_traces:
        note = (
            f"{len(job.host_traces)} host execution traces beside the profiler traces were left out "
            "(chakra convert pytorch takes them with their device traces)"
        )
        for report in result.conversion.reports.values():
            report.notes.append(note)
    return result
