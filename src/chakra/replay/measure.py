"""What a replay measured, summed up: time per node kind against the recording, and bandwidth per
collective by the nccl-tests definitions.

Per rank, :func:`kind_times` puts the replayed time of each kind of node (``compute``, and every
communication type: ``ALL_REDUCE``, ``SEND``, ...) beside the recorded durations of the same nodes;
:func:`comm_timings` groups the communication nodes by (type, group size, ``comm_size``) with the
median time of one (issue to completion, µs). Across ranks :func:`collective_bandwidth` takes the
slowest member's time (a collective is as fast as its last rank) and derives, as nccl-tests does,

* ``algbw = S / t`` with S the bytes of the operation: the buffer of an all-reduce, broadcast,
  reduce, send or receive; the whole output of an all-gather or gather and the whole input of a
  reduce-scatter, all-to-all or scatter (the format's ``comm_size`` is one rank's part of an
  all-gather, gather and scatter: times the group size);
* ``busbw = algbw x factor(n)``: all-reduce ``2(n-1)/n``; all-gather, reduce-scatter, all-to-all,
  gather, scatter ``(n-1)/n``; broadcast, reduce, send, receive ``1``
  (``reference/analysis-tools.md`` §2.3).

A replayed time includes waiting for members that issued later: bandwidths are what the workload
got, not the link's peak (for that, replay ``chakra generate micro``, whose collectives run alone).

Example:
    >>> round(bus_factor("ALL_REDUCE", 4), 2), bus_factor("SEND", 2)
    (1.5, 1.0)
    >>> algorithm_bytes("ALL_GATHER", 1024, 4)
    4096
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from chakra.replay.program import IssueProgram, Kind
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType
from chakra.units import NS_PER_US

#: The kinds of operation whose S is the whole of what the group exchanges, and comm_size one rank's part.
PER_RANK_SIZE = frozenset({"ALL_GATHER", "GATHER", "SCATTER"})
#: nccl-tests' bus bandwidth factors, by operation: 2(n-1)/n, (n-1)/n, or 1.
ALL_REDUCE_LIKE = frozenset({"ALL_REDUCE"})
RING_LIKE = frozenset({"ALL_GATHER", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "ALL_TO_ALL", "GATHER", "SCATTER"})
#: Operations that move no data: no bandwidth.
NO_DATA = frozenset({"BARRIER"})


def bus_factor(comm_type: str, n: int) -> float:
    """nccl-tests' ``busbw / algbw`` for ``comm_type`` (a CollectiveCommType name, SEND or RECV) on ``n`` ranks."""
    if comm_type in ALL_REDUCE_LIKE:
        return 2 * (n - 1) / n
    if comm_type in RING_LIKE:
        return (n - 1) / n
    return 1.0


def algorithm_bytes(comm_type: str, comm_size_bytes: int, n: int) -> int:
    """S of nccl-tests' ``algbw = S / t`` for a node of ``comm_size_bytes`` (the format's convention)."""
    return comm_size_bytes * n if comm_type in PER_RANK_SIZE else comm_size_bytes


def comm_type_label(program: IssueProgram, step: int) -> str:
    """A communication node's type as reports name it: the collective type, ``SEND`` or ``RECV``."""
    kind = Kind(int(program.kind[step]))
    if kind is not Kind.COLLECTIVE:
        return kind.name
    value = int(program.comm_type[step])
    return CollectiveCommType.Name(value) if value in CollectiveCommType.values() else f"comm_type {value}"


@dataclass(frozen=True)
class KindTime:
    """One kind of node on one rank: how many, the replayed time of one iteration (median over the
    measured iterations; communication from issue to completion) and the recorded durations (µs)."""

    count: int
    replayed_us: float
    recorded_us: float


def kind_times(
    program: IssueProgram,
    compute_ns: Sequence[int],
    comm: Sequence[Sequence[tuple[int, int, int]]],
) -> dict[str, KindTime]:
    """Per node kind, replayed against recorded: ``compute_ns`` is each iteration's compute time and
    ``comm`` each iteration's communication spans ((issue step, issued ns, finished ns))."""
    kinds = program.kind
    result: dict[str, KindTime] = {}
    compute = kinds == Kind.COMPUTE
    if compute.any():
        result["compute"] = KindTime(
            int(compute.sum()),
            statistics.median(compute_ns) / NS_PER_US if compute_ns else 0.0,
            float(program.dur_ns[compute].sum()) / NS_PER_US,
        )
    recorded_ns: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for step in np.flatnonzero((kinds != Kind.COMPUTE) & (kinds != Kind.NOTHING)).tolist():
        name = comm_type_label(program, step)
        recorded_ns[name] += int(program.dur_ns[step])
        counts[name] += 1
    per_iteration: dict[str, list[int]] = {name: [] for name in counts}
    for spans in comm:
        totals: dict[str, int] = dict.fromkeys(counts, 0)
        for step, issued_ns, finished_ns in spans:
            totals[comm_type_label(program, step)] += finished_ns - issued_ns
        for name, total in totals.items():
            per_iteration[name].append(total)
    for name, count in sorted(counts.items()):
        replayed = statistics.median(per_iteration[name]) / NS_PER_US if per_iteration[name] else 0.0
        result[name] = KindTime(count, replayed, recorded_ns[name] / NS_PER_US)
    return result


def total_kind_times(per_rank: Iterable[Mapping[str, KindTime]]) -> dict[str, KindTime]:
    """Every rank's :func:`kind_times` added up, kind by kind (in the order kinds first appear).

    >>> total_kind_times([{"compute": KindTime(2, 5.0, 4.0)}, {"compute": KindTime(3, 1.0, 2.0)}])
    {'compute': KindTime(count=5, replayed_us=6.0, recorded_us=6.0)}
    """
    totals: dict[str, KindTime] = {}
    for kinds in per_rank:
        for name, kind in kinds.items():
            total = totals.get(name, KindTime(0, 0.0, 0.0))
            totals[name] = KindTime(total.count + kind.count, total.replayed_us + kind.replayed_us,
                                    total.recorded_us + kind.recorded_us)  # fmt: skip
    return totals


@dataclass(frozen=True, order=True)
class CommKey:
    """Communication nodes alike: type, group size, bytes (``comm_size``)."""

    comm_type: str
    group_size: int
    size_bytes: int


def comm_timings(
    program: IssueProgram,
    group_sizes: Mapping[int, int],
    world: int,
    comm: Iterable[Sequence[tuple[int, int, int]]],
) -> dict[CommKey, tuple[int, float]]:
    """Per kind of communication node on one rank: (nodes of one iteration, median µs of one).
    ``group_sizes`` maps a group id to its size; other nodes span the ``world``."""
    times: dict[CommKey, list[int]] = defaultdict(list)
    per_iteration: dict[CommKey, int] = defaultdict(int)
    for iteration, spans in enumerate(comm):
        for step, issued_ns, finished_ns in spans:
            name = comm_type_label(program, step)
            n = 2 if name in ("SEND", "RECV") else group_sizes.get(int(program.group[step]), world)
            key = CommKey(name, n, max(0, int(program.comm_size[step])))
            times[key].append(finished_ns - issued_ns)
            if iteration == 0:
                per_iteration[key] += 1
    return {key: (per_iteration[key], statistics.median(ns) / NS_PER_US) for key, ns in times.items()}


@dataclass(frozen=True)
class CollectiveBandwidth:
    """One kind of communication across the ranks: nodes of one iteration on its slowest rank, that
    rank's median time of one (µs), and nccl-tests' algorithm and bus bandwidth (GB/s, None for a
    barrier or a time of 0)."""

    key: CommKey
    count: int
    time_us: float
    algbw_gbps: float | None
    busbw_gbps: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "comm_type": self.key.comm_type, "group_size": self.key.group_size,
            "size_bytes": self.key.size_bytes, "count": self.count, "time_us": self.time_us,
            "algbw_GBps": self.algbw_gbps, "busbw_GBps": self.busbw_gbps,
        }  # fmt: skip


def collective_bandwidth(per_rank: Iterable[Mapping[CommKey, tuple[int, float]]]) -> list[CollectiveBandwidth]:
    """Every kind of communication node of the ranks' :func:`comm_timings`, by type then size.

    >>> rows = collective_bandwidth([{CommKey("ALL_REDUCE", 2, 1_000_000): (3, 500.0)},
    ...                              {CommKey("ALL_REDUCE", 2, 1_000_000): (3, 1000.0)}])
    >>> rows[0].time_us, rows[0].algbw_gbps, rows[0].busbw_gbps
    (1000.0, 1.0, 1.0)
    """
    slowest: dict[CommKey, tuple[int, float]] = {}
    for timings in per_rank:
        for key, (count, time_us) in timings.items():
            if key not in slowest or time_us > slowest[key][1]:
                slowest[key] = (count, time_us)
    rows = []
    for key, (count, time_us) in sorted(slowest.items()):
        algbw = busbw = None
        if key.comm_type not in NO_DATA and time_us > 0:
            algbw = algorithm_bytes(key.comm_type, key.size_bytes, key.group_size) / (time_us * NS_PER_US)
            busbw = algbw * bus_factor(key.comm_type, key.group_size)
        rows.append(CollectiveBandwidth(key, count, time_us, algbw, busbw))
    return rows
