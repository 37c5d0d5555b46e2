"""Rewrite a workload into what one consumer runs, and report every change (``chakra adapt``).

An ET records what ran; a consumer may not take all of it (ASTRA-sim aborts on METADATA nodes and on
collectives it does not simulate, and stops at dangling dependencies). Adapting is this explicit
step: any workload (ours, upstream's, a third party's) is read through the core, the consumer's
rules (:mod:`chakra.adapt.rules`) decide what changes, and every change is counted by kind
(:class:`~chakra.adapt.report.Change`) in the :class:`~chakra.adapt.report.AdaptResult`.

Two streaming passes per rank, ranks in parallel: :func:`~chakra.adapt.plan.plan_rank` decides (ids,
types and dependencies kept, not the nodes), :func:`~chakra.adapt.rewrite.rewrite_rank` copies
unchanged records as their bytes and re-encodes the changed ones. The process groups METADATA nodes
held go to ``PREFIX.comm_groups.json`` (merged with the workload's groups file, which is copied as
it is when nothing is added). The output is written like every workload: all ranks or none.

Example:
    result = adapt_workload("runs/job", "runs/job-astra", Target.ASTRA_SIM)
    result.changes.counts  # Counter({Change.METADATA_NODE_REMOVED: 4, ...})
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chakra.adapt.plan import NodeEdit, RankPlan, plan_rank
from chakra.adapt.report import CHANGE_TEXT, AdaptResult, Change, RankChanges
from chakra.adapt.rewrite import rewrite_rank
from chakra.adapt.rules import RULES, TargetRules, rules_for
from chakra.errors import PathLike
from chakra.groups import DEFAULT_PG_NAMES, CommGroups
from chakra.io.writer import output_error
from chakra.parallel import map_ranks
from chakra.paths import groups_path
from chakra.validate.findings import Target
from chakra.workload import Workload, open_workload
from chakra.workload_writer import WorkloadWriter

__all__ = [
    "CHANGE_TEXT",
    "RULES",
    "AdaptResult",
    "Change",
    "RankChanges",
    "Target",
    "TargetRules",
    "adapt_workload",
    "rules_for",
]

#: Group ids METADATA nodes may carry that mean every rank: ASTRA-sim's default group, never a file key.
_DEFAULT_GROUP_IDS = frozenset(int(name) for name in DEFAULT_PG_NAMES if name)


def _plan_one(job: tuple[int, str, TargetRules]) -> RankPlan:
    rank, path, rules = job
    return plan_rank(Path(path), rank, rules)


def _rewrite_one(job: tuple[RankPlan, TargetRules, str]) -> RankChanges:
    plan, rules, out_path = job
    try:
        return rewrite_rank(plan, rules, Path(out_path))
    except OSError as exc:  # the input was read through EtReader, whose errors are ChakraInputErrors
        raise output_error(exc, Path(out_path)) from None


def adapt_workload(
    source: PathLike,
    out_prefix: PathLike,
    target: Target | str = Target.ASTRA_SIM,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> AdaptResult:
    """Adapt the workload at ``source`` (a prefix, one of its files, or its folder) for ``target`` and
    write it as ``out_prefix.{rank}.et`` (``out_prefix`` may be ``source``'s own prefix: the files are
    replaced only once every rank is written). ``progress(stage, done, total)`` hears of each rank.
    """
    rules = rules_for(target)
    workload = open_workload(source, whole=True)
    workload.require_rank_files("adapt")

    def tell(stage: str) -> Callable[[int, int], None] | None:
        return (lambda done, total: progress(stage, done, total)) if progress else None

    plans: list[RankPlan] = map_ranks(
        _plan_one,
        [(rank, str(path), rules) for rank, path in workload.files.items()],
        workers=workers,
        scheduler=scheduler,
        progress=tell("planning"),
        description="adapt",
    )
    moved = _groups_of_metadata(plans, workload)
    world = _explicit_world_group(plans, workload, moved)
    with WorkloadWriter(out_prefix) as writer:
        pattern = writer.staging_pattern()
        for plan in plans:  # staged before the workers write them, so a failure removes every one
            writer.adopt(plan.rank)
        written: list[RankChanges] = map_ranks(
            _rewrite_one,
            [(plan, rules, pattern.format(rank=plan.rank)) for plan in plans],
            workers=workers,
            scheduler=scheduler,
            progress=tell("writing"),
            description="adapt",
        )
        existing = groups_file = None
        if workload.comm_groups is not None:
            existing = workload.comm_groups
            groups_file = groups_path(workload.prefix)
        if moved or world:
            writer.groups = (existing or CommGroups()).merged(moved).merged(world)
        elif groups_file is not None:
            writer.groups_file = groups_file
    ranks: dict[int, RankChanges] = {}
    for plan, changes in zip(plans, written, strict=True):
        plan.changes.merge(changes)
        if plan.groups and moved:
            plan.changes.add(Change.GROUPS_MOVED, count=len(set(plan.groups) & set(moved)))
        ranks[plan.rank] = plan.changes
    done = writer.result
    assert done is not None
    return AdaptResult(
        target=rules.target,
        prefix=done.prefix,
        paths=done.paths,
        groups_path=done.groups_path,
        ranks=ranks,
        removed=list(done.removed),
    )


def _explicit_world_group(
    plans: list[RankPlan], workload: Workload, moved: dict[int, tuple[int, ...]]
) -> dict[int, tuple[int, ...]]:
    """Where the ranks issue different numbers of other groups' collectives before the same
    collective of the default group (ASTRA-sim hangs there: its tags for the default group count a
    rank's collectives), put the default group's collectives in a new group of every rank, the id
    after every group in use; returns that group (``{}`` when not needed)."""
    patterns = {plan.world_after for plan in plans if plan.world_after}
    if len(patterns) <= 1:
        return {}
    known = [*(workload.comm_groups or {}), *moved, *(plan.max_group for plan in plans)]
    world_id = max((int(k) for k in known), default=0) + 1
    for plan in plans:
        for pos in plan.world_pos.tolist():
            plan.edits.setdefault(pos, NodeEdit()).pg_name = str(world_id)
        plan.changes.add(Change.WORLD_GROUP, count=len(plan.world_pos))
    return {world_id: tuple(range(max(workload.files) + 1))}


def _groups_of_metadata(plans: list[RankPlan], workload: Workload) -> dict[int, tuple[int, ...]]:
    """The process groups the ranks' METADATA nodes define, as the comm groups file writes them: the
    default group left out (it is every rank without a definition), an empty member list (every rank)
    written out in full."""
    world = tuple(range(max(workload.files) + 1)) if workload.files else ()
    groups: dict[int, tuple[int, ...]] = {}
    for plan in plans:
        for group, members in plan.groups.items():
            if group not in _DEFAULT_GROUP_IDS:
                groups[group] = tuple(sorted(members)) if members else world
    return groups
