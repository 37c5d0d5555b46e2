"""Where each rank sits in a parallel job, and the process groups that follow from it.

Ranks are numbered Megatron-Core style, tensor parallelism innermost (``reference/workload-generators.md``
§4.1): ``rank = tp + t·(cp + c·(dp + d·pp))``. Experts are carved out of ``dp·cp`` with the expert
tensor size equal to ``t``: within one (tp, pp), the combined index ``x = cp + c·dp`` splits into
``ep = x mod e`` and ``edp = x div e``.

Groups (§4.2): all ranks that agree on every coordinate but the group's own. Size-1 groups are left
out (a dimension of size 1 issues no collective), identical member lists share one id, and ids are
dense from 1 in kind order, then by smallest member (§4.3). ASTRA-sim's tags overflow above id 2147
(:data:`chakra.validate.MAX_ASTRA_GROUP_ID`); with TP 8 that is reached near 17k ranks, and
:func:`chakra.generate.llm.generate_llm` notes it.

Example:
    >>> layout = Layout(tp=2, cp=1, dp=2, pp=2)
    >>> layout.coords(5)
    (1, 0, 0, 1)
    >>> groups, ids = comm_groups(layout)
    >>> groups[ids["tp"][5]], groups[ids["dpcp"][5]]
    ([4, 5], [5, 7])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from chakra.generate.specs import ParallelSpec

#: Group kinds in id order. ``dpcp`` reduces gradients of dense parameters, ``edp`` those of
#: experts, ``emb`` ties the first and last stage's embedding copies.
GROUP_KINDS = ("tp", "cp", "dp", "dpcp", "ep", "edp", "emb")

#: ASTRA-sim's first valid communicator id (0 means "all ranks").
FIRST_GROUP_ID = 1


@dataclass(frozen=True)
class Layout:
    """Sizes of the parallel dimensions; ``ep`` divides ``dp·cp``."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1

    @classmethod
    def of(cls, parallel: ParallelSpec) -> Layout:
        """The layout of a spec's parallelism."""
        return cls(tp=parallel.tp, cp=parallel.cp, dp=parallel.dp, pp=parallel.pp, ep=parallel.ep)

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def stage_stride(self) -> int:
        """Rank distance between neighbouring pipeline stages (``t·c·d``)."""
        return self.tp * self.cp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """``(tp, cp, dp, pp)`` of ``rank``."""
        t, c, d = self.tp, self.cp, self.dp
        return rank % t, (rank // t) % c, (rank // (t * c)) % d, rank // (t * c * d)

    def stage_of(self, rank: int) -> int:
        return rank // self.stage_stride


def _group_keys(layout: Layout, kind: str) -> np.ndarray | None:
    """Per rank, a key shared exactly by the members of its ``kind`` group (None: no such groups)."""
    ranks = np.arange(layout.world_size, dtype=np.int64)
    t, c, d, p, e = layout.tp, layout.cp, layout.dp, layout.pp, layout.ep
    tp, cp, dp, pp = ranks % t, (ranks // t) % c, (ranks // (t * c)) % d, ranks // (t * c * d)
    x = cp + c * dp  # the combined data x context index experts are carved from
    # every key below keeps the coordinates that stay fixed inside the group, in one integer
    if kind == "tp":
        return ranks // t
    if kind == "cp":
        return tp + t * (dp + d * pp)
    if kind == "dp":
        return tp + t * (cp + c * pp)
    if kind == "dpcp":
        return tp + t * pp
    if kind == "ep":
        return tp + t * ((x // e) + (c * d // e) * pp)
    if kind == "edp":
        return tp + t * ((x % e) + e * pp)
    if kind == "emb":
        if p < 2:
            return None
        ends = (pp == 0) | (pp == p - 1)
        # only the first and last stage belong; the others get a key of their own (a singleton)
        return np.where(ends, tp + t * (cp + c * dp), layout.world_size + ranks)
    raise ValueError(f"unknown group kind {kind!r}")


def comm_groups(
    layout: Layout, kinds: tuple[str, ...] = GROUP_KINDS
) -> tuple[dict[int, list[int]], dict[str, np.ndarray]]:
    """``(groups, ids)``: ``groups`` maps each id to its sorted member ranks (ASTRA-sim's
    communicator-group JSON); ``ids[kind][rank]`` is the id of ``rank``'s group of that kind, 0 when
    that group would have a single member (no collective runs there)."""
    groups: dict[int, list[int]] = {}
    by_members: dict[tuple[int, ...], int] = {}
    ids: dict[str, np.ndarray] = {}
    for kind in kinds:
        rank_ids = np.zeros(layout.world_size, dtype=np.int64)
        ids[kind] = rank_ids
        keys = _group_keys(layout, kind)
        if keys is None:
            continue
        order = np.argsort(keys, kind="stable")
        bounds = np.flatnonzero(np.diff(keys[order])) + 1
        members_list = np.split(order, bounds)
        members_list.sort(key=lambda members: int(members[0]))
        for members in members_list:
            if len(members) < 2:
                continue
            key = tuple(int(r) for r in members)
            gid = by_members.get(key)
            if gid is None:
                gid = FIRST_GROUP_ID + len(groups)
                by_members[key] = gid
                groups[gid] = list(key)
            rank_ids[members] = gid
    return groups, ids
