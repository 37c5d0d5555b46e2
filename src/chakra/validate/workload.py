"""The checks that only show across the ranks of a workload: missing rank files, transfers without
their other half, and group members that issue different collectives (``reference/astra-sim.md`` §2.5)."""

from __future__ import annotations

from collections import Counter

from chakra.groups import CommGroups
from chakra.validate.findings import ADAPT_FIX, ERROR, WARNING, Collector, Finding
from chakra.validate.rank import RankSummary


def cross_rank_findings(
    missing: list[int],
    comm_groups: CommGroups | None,
    summaries: dict[int, RankSummary],
    astra: bool,
    limit: int | None,
    *,
    custom: bool = False,
    ranks: int = 0,
) -> list[Finding]:
    """The cross-rank findings of ranks ``summaries`` (``missing``: ranks without a file); ``custom``:
    the files are a custom collective algorithm of ``ranks`` ranks (:mod:`chakra.validate.custom`)."""
    out = Collector(None, limit)
    if missing:
        out.add(
            ERROR if astra else WARNING,
            "missing-rank",
            f"no file for rank(s) {', '.join(map(str, missing))}",
            hint="ASTRA-sim opens PREFIX.{rank}.et for every NPU",
        )
    _check_transfers(summaries, out)
    _check_collectives(summaries, comm_groups, out)
    if astra:
        _check_world_tags(summaries, out)
    if custom:
        from chakra.validate.custom import custom_cross_rank

        custom_cross_rank(summaries, ranks, out)
    return out.result()


def _check_world_tags(summaries: dict[int, RankSummary], out: Collector) -> None:
    """ASTRA-sim tags a collective of the default group by how many collectives its rank issued
    before it (of any group): ranks that issued different numbers of other groups' collectives before
    the same default-group collective never match, and the run hangs with every rank waiting (seen in
    its analytical builds: a pair's all-reduce, then one of all ranks; broadcasts, which it replays,
    neither count nor hang). An explicit group of every rank is tagged by its group and simulated
    with the same plan."""
    issuing = {rank: s.world_after for rank, s in summaries.items() if s.world_after}
    if len(set(issuing.values())) <= 1:
        return
    (first, reference), *rest = sorted(issuing.items())
    for rank, after in rest:
        k = next((i for i, (a, b) in enumerate(zip(after, reference, strict=False)) if a != b), None)
        if k is None:
            continue
        out.add(
            ERROR,
            "astra-world-collective-tags",
            f"before its collective #{k} on all ranks (broadcasts aside), rank {rank} issues {after[k]} collectives "
            "of other groups "
            f"and rank {first} {reference[k]}: ASTRA-sim's tags for the default group then differ and it hangs",
            hint=f"{ADAPT_FIX} puts the collectives of all ranks in an explicit group of every rank",
        )
        return


def _check_transfers(summaries: dict[int, RankSummary], out: Collector) -> None:
    sends: Counter[tuple[int, int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int, int]] = Counter()
    for summary in summaries.values():
        sends.update(summary.sends)
        recvs.update(summary.recvs)
    for key in sorted(set(sends) | set(recvs)):
        diff = sends[key] - recvs[key]
        if diff:
            src, dst, tag, size = key
            what = "send(s) without a matching receive" if diff > 0 else "receive(s) without a matching send"
            out.add(
                ERROR,
                "unmatched-p2p",
                f"{abs(diff)} {what}: rank {src} -> rank {dst}, tag {tag}, {size} bytes",
                hint="send and receive must agree on peer, tag and size, or the run hangs",
            )


def _check_collectives(summaries: dict[int, RankSummary], comm_groups: CommGroups | None, out: Collector) -> None:
    by_group: dict[str, dict[int, list[tuple[int, int]]]] = {}
    defined: dict[int, tuple[int, ...]] = {}
    for rank, summary in summaries.items():
        defined.update(summary.groups)
        for label, seq in summary.collectives.items():
            by_group.setdefault(label, {})[rank] = seq
    defined.update(comm_groups or {})  # the groups file wins, as in ASTRA-sim
    all_ranks = sorted(summaries)
    for label, per_rank in sorted(by_group.items()):
        members = defined.get(int(label)) if label.lstrip("-").isdigit() else None
        expected = all_ranks if not members else [r for r in sorted(members) if r in summaries]
        for r in sorted(set(per_rank) - set(expected)):
            out.add(
                ERROR,
                "collective-non-member",
                f"rank {r} issues collectives on group {label}, which does not include it",
                hint="a rank may only issue collectives of its own groups",
            )
        reference_rank = next((r for r in expected if r in per_rank), None)
        if reference_rank is None:
            continue
        reference = per_rank[reference_rank]
        for r in expected:
            seq = per_rank.get(r, [])
            if seq != reference:
                detail = "" if len(seq) != len(reference) else " (same count, different types, sizes or order)"
                out.add(
                    ERROR,
                    "collective-mismatch",
                    f"group {label}: rank {r} issues {len(seq)} collectives, rank {reference_rank} "
                    f"{len(reference)}{detail}",
                    hint="every member must issue a group's collectives in the same order (by dependencies, "
                    "then ascending node id) with matching sizes, or the simulation hangs",
                )
