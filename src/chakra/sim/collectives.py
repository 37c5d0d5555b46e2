"""Time of one collective, in integer ns, from issue (all members present) to each member's completion.

The analytical model of ASTRA-sim's native collectives on the congestion-unaware backend
(``reference/astra-sim.md`` §5.3–§5.6, subgroups §2.5), for a contention-free collective:

1. **Chunking** (§5.4): ``C = floor(S / splits)``; a collective other than ALL_GATHER with
   ``total NPUs > C`` is padded to ``C = total NPUs``, ``S = splits · C``; ``K = ceil(S / C)`` streams.
2. **Phases** of one stream: one per involved dimension (dimensions with one NPU, or beyond the
   configured algorithm list, are skipped). Baseline: the collective's own type on each dimension
   ascending (ALL_GATHER descending). ``localBWAware`` all-reduce: RS on every involved dimension but
   the last (ascending), AR on the last, AG back down (descending); these phases use the all-reduce
   algorithm of their dimension. RS divides the data size by ``n_d`` (integer), AG multiplies it.
   A ``one*`` algorithm on an involved dimension turns the collective into one flat phase over all
   NPUs (id order), timed with :func:`chakra.sim.network.message_delay_ns`.
   A subgroup (fewer members than NPUs) runs one phase over its sorted members, real NPU-to-NPU
   delays, a fixed 10 ns endpoint cost, with the type's algorithm when the system file lists one
   (direct then batches its MA->NPU packets n−1 windows long) and ring when it lists one per
   dimension (§2.5, ``CommunicatorGroup::get_collective_plan``); doubleBinaryTree is refused
   (ASTRA-sim crashes on it).
3. **Per-phase chunk time** by algorithm (below, :mod:`chakra.sim.algorithms`). Every message
   crosses the NPU↔memory bus once on each side (``d`` = ``endpoint-delay``; ``PacketBundle``,
   ``MemBus``); a received message that is reduced adds ``t_red(m) = 3 · trunc(m / (local-mem-bw ·
   1e9) · 1e9)`` after its crossing. Every delay is truncated to whole ns where it is computed (§5.1).
4. **Streams** (:mod:`chakra.sim.streams`): every NPU runs the K streams through one queue per
   dimension, ``a = active-chunks-per-dimension`` at a time, first come first served; a stream that
   ends a phase joins the back of its next phase's queue (a localBWAware all-reduce's reduce-scatter
   and all-gather phases of a dimension share one). Members that start together and phases whose
   members run in step reduce this to one NPU (one phase: ``ceil(K / a) · T_chunk``); otherwise
   every NPU is followed, each line of NPUs starting a phase when their queues let them, its
   members ending by the phase's dataflow (:mod:`chakra.sim.dataflow`). A collective whose members
   issue it at different times (``offsets_ns``) is timed this way too: each member starts its part
   when it issues it (exact against ASTRA-sim's binary for every algorithm).

Algorithms, as ASTRA-sim's source runs them (``astra-sim/system/astraccl/native_collectives/
collective_algorithm/``; ``n`` = NPUs of the phase, ``D`` = phase input size, ``m = floor(D / n)``):

* ``ring`` (``Ring.cc``): AR 2(n−1) steps of ``m`` to the ring neighbour (reductions on the first
  n−1 receives), RS n−1 steps of ``m`` (all reduced), AG n−1 steps of ``D``, A2A n(n−1)/2 steps of
  ``m``. Each step is the message, then ``d``; one ``d`` starts the phase. With unequal links
  (subgroups, flat rings) each NPU waits for its predecessor, and starts its next chunk the moment
  its own previous one ends, so after the ``ceil(K / a)`` waves of a subgroup's ring each member ends
  with the chain of ``ceil(K / a) · steps`` consecutive links that arrive at it (a slow closing link
  is crossed once a lap, not once a chunk, and members end apart by where the laps' remainder
  falls; exact against ASTRA-sim on every subgroup of an 8-ring tried, 1, 2 and 4 active chunks).
* ``direct`` / ``directN`` (``AllToAll.cc``, a ``Ring`` with ``P`` = N, or n−1, packets in flight):
  ``P`` messages leave at once (one ``d``) to ``+1, +2, …`` (rotating); each arrival crosses the bus
  (``d``) and, for RS and for AR's first sweep, is reduced — all arrivals side by side, so a
  window-less RS is ``2d + slowest message + t_red(m)``, not n−1 serial reductions. Each freed
  packet sends the next message. AR holds its second sweep (n−1 more messages of ``m``) until every
  first-sweep message has arrived, then sends one message per finished reduction; the phase ends
  ``d`` after the last arrival. Packets come in batches of ``P`` alternating between bus directions
  (``zero_latency_packets`` / ``non_zero_latency_packets``), and only the second kind is reduced:
  with a window (``P < n − 1``) some received RS pieces are not reduced at all. AG sends ``D``, A2A
  ``m``, never reduced. The member's schedule is replayed event by event.
* ``halvingDoubling`` (``HalvingDoubling.cc``): ``L = floor(log2 n)`` steps with the partner
  ``p ± distance`` (``+`` when ``p / distance`` is even: ``p XOR distance`` for powers of two). RS/AR
  step ``s`` sends ``m_s = D / 2^(s+1)`` at distance ``2^s``; a received message is reduced at the
  size of the next one to send and the last receive is not reduced, so the reductions are
  ``t_red(m_1) + … + t_red(m_(L−1))`` (none for n = 2). AR then comes back from distance ``n/2`` to 1
  with ``2^k · floor(D / 2^(L+1))`` bytes, without reductions. AG: ``D · 2^s`` at distance
  ``n / 2^(s+1)``. Each step is the message plus ``d``; one ``d`` starts the phase. ASTRA-sim exits on
  an ALL_TO_ALL ("unknown communication type for HalvingDoubling"), and with n not a power of two
  its AR and RS (and an AG whose pairs do not match) never finish: all refused here.
* ``doubleBinaryTree`` (``DoubleBinaryTreeAllReduce.cc``, ``BinaryTree.cc``): an all-reduce of the
  full ``D`` whatever the phase type (the size after it is unchanged), on one of two in-order
  binary trees, alternating per chunk: ``RootMax`` (root n−1 above the perfect tree of positions
  0…n−2) and ``RootMin`` (root 0 above 1…n−1); the alternation counts on across the collectives of
  one type on each NPU. A leaf crosses the bus, sends ``D`` to its parent, waits for the parent's
  result and crosses the bus again; an inner node reduces each child's ``D`` as it arrives
  (``d + t_red(D)``), sends up after the second, reduces the parent's result (``d + t_red``),
  sends it to both children and is done; the root reduces its one child's ``D``, sends it back and
  is done. So members finish at different times (:class:`CollectiveTimes`), each starting its next
  chunk when one ends. n must be a power of two (ASTRA-sim crashes otherwise). Exact per member
  for a single-phase plan; in a multi-phase plan a tree phase counts its slowest member.

Types ASTRA-sim does not simulate get a documented standard model over the group's NPUs (all NPUs
in id order, or the subgroup's members), the root being the first of them, chunked and pipelined
like the others (and padded, since they are not ALL_GATHER):

* REDUCE: the group's reduce-scatter plan, then a gather of the reduced pieces to the root (each
  non-root sends its piece at once: ``d + max delay + d``).
* GATHER: ``comm_size`` is the per-rank input; every non-root sends it to the root at once.
* SCATTER: ``comm_size`` is the root's full buffer; the root sends ``floor(C / n)`` to every member at
  once.
* BROADCAST: binomial tree, ``ceil(log2 n)`` rounds of the full chunk (round k: members
  ``0 … 2^k−1`` send to ``+2^k``).
* BARRIER: dissemination barrier, ``ceil(log2 n)`` rounds of 0-byte messages from member ``i`` to
  ``i + 2^k`` (mod n), latency only; no data, so no chunking or padding.
* REDUCE_SCATTER_BLOCK: exactly REDUCE_SCATTER.

With the system key ``chakra-astra-compat: 1`` these types are treated as ASTRA-sim treats them
(``Workload::issue_coll_comm``): a BROADCAST takes its node's ``duration_micros`` × 1000 ns (1 ns when
0) on its rank alone, unmatched (:func:`replays_duration`; the engine runs it), and the others are
refused with ASTRA-sim's "Unsupported collective comm type" (:func:`astra_compat_refusal`).

Results are memoised (an LRU cache) by the network's value and the system's identity (a
``SystemConfig`` holds a dict, so it cannot be hashed by value; it is frozen, so its identity names it).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    SCATTER,
    CollectiveCommType,
)
from chakra.sim.algorithms import (
    DOUBLE_BINARY_TREE,
    RING,
    ReductionCost,
    Span,
    npu_span,
    ring_pipelined_ns,
    tree_member_times_ns,
)
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.network import message_delay_ns
from chakra.sim.plans import ALGORITHM_LIST, line_phases, native_plan, phase_times_ns
from chakra.sim.streams import queue_schedule_ns, schedule_ns
from chakra.units import BYTES_PER_GB, NS_PER_S

#: The subgroup ring's endpoint (MA bus) crossing: ASTRA-sim fixes it at 10 ns for the "Local"
#: dimension it builds for a communicator subgroup, whatever ``endpoint-delay`` says (§2.5, §5.5).
SUBGROUP_ENDPOINT_DELAY_NS = 10
#: A reduction reads the received message and the local buffer and writes the result (§5.5).
REDUCTION_MEMORY_PASSES = 3
#: Memoised (type, size, group, system, network) results: a workload has few distinct collectives;
#: the bound keeps long parameter sweeps from growing without limit.
CACHE_ENTRIES = 4096

#: Every type's protobuf name, for messages.
_TYPE_NAMES = {value: CollectiveCommType.Name(value) for value in CollectiveCommType.values()}


def type_name(comm_type: int) -> str:
    """A collective type's protobuf name (its number when it has none), as the totals and messages say it.

    >>> type_name(0), type_name(42)
    ('ALL_REDUCE', '42')
    """
    return _TYPE_NAMES.get(comm_type, str(comm_type))


#: Collectives whose phases reduce received data (they need ``local-mem-bw``).
REDUCING_TYPES = frozenset({ALL_REDUCE, REDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK})
#: Every ``CollectiveCommType`` (0–9).
KNOWN_TYPES = frozenset(
    {
        ALL_REDUCE,
        REDUCE,
        ALL_GATHER,
        GATHER,
        SCATTER,
        BROADCAST,
        ALL_TO_ALL,
        REDUCE_SCATTER,
        REDUCE_SCATTER_BLOCK,
        BARRIER,
    }
)

#: What ASTRA-sim's ``Workload::issue_coll_comm`` does with the types it does not simulate, followed
#: under the system key ``chakra-astra-compat: 1`` (:func:`astra_compat_refusal`, :func:`replays_duration`).
ASTRA_REFUSED_TYPES = frozenset({REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK, BARRIER})
ASTRA_REPLAYED_TYPES = frozenset({BROADCAST})


def chunk_plan(comm_type: int, size_bytes: int, splits: int, total_npus: int) -> tuple[int, int]:
    """Chunk size in bytes and number of streams of a collective (§5.4): ``(C, K)``.

    Padding uses the total NPU count of the network, not the group's, as ASTRA-sim does.
    """
    chunk_bytes = size_bytes // splits
    if comm_type != ALL_GATHER and total_npus > chunk_bytes:
        chunk_bytes = total_npus
        size_bytes = splits * chunk_bytes
    if chunk_bytes == 0:
        raise ChakraInputError(
            f"an all-gather of {size_bytes} bytes has a zero chunk size with preferred-dataset-splits {splits}",
            hint="all-gather comm_size is the per-rank input; make it at least preferred-dataset-splits bytes",
        )
    return chunk_bytes, -(-size_bytes // chunk_bytes)


def pipelined_time_ns(phase_times_ns: Sequence[int], streams: int, active_streams: int) -> int:
    """Time of ``streams`` chunk streams, ``active_streams`` at a time, each crossing the phases in order,
    for this package's models of the types ASTRA-sim does not simulate.

    ``Σ phases + (ceil(streams / active) − 1) · max phase``: the bottleneck phase sets the pace of the
    later waves (the native types go through :mod:`chakra.sim.streams` instead).
    """
    if not phase_times_ns:
        return 0
    waves = -(-streams // active_streams)
    return sum(phase_times_ns) + (waves - 1) * max(phase_times_ns)


def reduction_delay_ns(size_bytes: int, local_mem_bw_gbps: float) -> int:
    """Cost in ns of reducing a received ``size_bytes`` message: ``3 · trunc(m / (bw · 1e9) · 1e9)`` (§5.5).

    0 when ``local-mem-bw`` is 0 or absent: ASTRA-sim's ``size / 0`` overflows its integer delay and
    its reductions then take no time (measured on its binaries: 48 cases of four algorithms, one and
    two dimensions, all-reduce and reduce-scatter).

    >>> reduction_delay_ns(1 << 20, 1600.0), reduction_delay_ns(1 << 20, 0.0)
    (1965, 0)
    """
    if local_mem_bw_gbps == 0:
        return 0
    return REDUCTION_MEMORY_PASSES * int(size_bytes / (local_mem_bw_gbps * BYTES_PER_GB) * NS_PER_S)


# --- the types ASTRA-sim does not simulate ----------------------------------------------------


def _gather_phase_ns(span: Span, size_bytes: int) -> int:
    """Every non-root member sends ``size_bytes`` to the root (position 0) at once."""
    slowest = max((span.delay(p, 0, size_bytes) for p in range(1, span.size)), default=0)
    return span.endpoint_ns + slowest + span.endpoint_ns


def _scatter_phase_ns(span: Span, size_bytes: int) -> int:
    """The root (position 0) sends ``size_bytes`` to every other member at once."""
    slowest = max((span.delay(0, p, size_bytes) for p in range(1, span.size)), default=0)
    return span.endpoint_ns + slowest + span.endpoint_ns


def _broadcast_phase_ns(span: Span, size_bytes: int) -> int:
    """Binomial tree from position 0: round k, positions ``p < 2^k`` send to ``p + 2^k``."""
    n, d = span.size, span.endpoint_ns
    total_ns = d
    for k in range((n - 1).bit_length()):
        reach = 2**k
        total_ns += max(span.delay(p, p + reach, size_bytes) for p in range(min(reach, n - reach))) + d
    return total_ns


def _barrier_ns(span: Span) -> int:
    """Dissemination barrier: round k, position ``i`` sends 0 bytes to ``i + 2^k`` (mod n)."""
    n, d = span.size, span.endpoint_ns
    total_ns = d
    for k in range((n - 1).bit_length()):
        total_ns += max(span.delay(p, (p + 2**k) % n, 0) for p in range(n)) + d
    return total_ns


class CollectiveTimes(NamedTuple):
    """A collective's time in ns from its common start: its last member's (``longest_ns``), and each
    rank's where members differ (``by_rank_ns``, a default-group doubleBinaryTree alone), with how
    many trees it took from its type's alternation (``trees``, see :func:`collective_times`)."""

    longest_ns: int
    by_rank_ns: tuple[int, ...] | None = None
    trees: int = 0
    #: each member's where members differ and the plan ran member by member (NPU -> ns; the others:
    #: ``longest_ns``): as long as the group, not the network
    by_member_ns: Mapping[int, int] | None = None

    def of(self, rank: int) -> int:
        """The time of member ``rank``."""
        if self.by_rank_ns is not None:
            return self.by_rank_ns[rank]
        if self.by_member_ns is not None:
            return self.by_member_ns.get(rank, self.longest_ns)
        return self.longest_ns


def _collective_times(
    comm_type: int,
    size_bytes: int,
    members: tuple[int, ...] | None,
    system: SystemConfig,
    network: NetworkConfig,
    first_tree: int,
    offsets: tuple[int, ...] | None,
) -> CollectiveTimes:
    if comm_type not in KNOWN_TYPES:
        raise ChakraInputError(f"unknown collective type {comm_type}", hint="use a CollectiveCommType value 0–9")
    if size_bytes < 0:
        raise ChakraInputError(f"negative collective size {size_bytes} bytes")
    refusal = astra_compat_refusal(comm_type, system)
    if refusal is not None or replays_duration(comm_type, system):
        why, hint = refusal or ("replays its node's duration_micros: it has no collective time", "")
        raise ChakraInputError(f"a collective that {why}", path=system.path, hint=hint or None)
    active = system.active_chunks_per_dimension
    if system.preferred_dataset_splits < 1 or active < 1:
        raise ChakraInputError(
            "preferred-dataset-splits and active-chunks-per-dimension must be at least 1",
            hint="set both in the system configuration",
        )
    total_npus = network.num_npus
    if members is not None and any(not 0 <= rank < total_npus for rank in members):
        raise ChakraInputError(
            f"group {list(members)} names ranks outside the network's {total_npus} NPUs",
            hint="make npus_count in the network configuration cover every rank of every group",
        )
    if members is not None and len(members) <= 1:
        return CollectiveTimes(0)  # a group of one has nobody to talk to

    subgroup = (
        npu_span(network, members, SUBGROUP_ENDPOINT_DELAY_NS, symmetric=False, local=True)
        if members is not None
        else None
    )
    whole = (
        subgroup
        if subgroup is not None
        else npu_span(network, tuple(range(total_npus)), int(system.endpoint_delay_ns), symmetric=True)
    )
    last_ns = max(offsets) if offsets else 0  # this package's own models start with the last member
    if comm_type == BARRIER:
        return CollectiveTimes(last_ns + _barrier_ns(whole))

    def t_red(message_bytes: int) -> int:
        return reduction_delay_ns(message_bytes, system.local_mem_bw_gbps)

    chunk_bytes, streams = chunk_plan(comm_type, size_bytes, system.preferred_dataset_splits, total_npus)
    phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
    if phase_type not in ALGORITHM_LIST:
        modelled_ns = _modelled_time_ns(comm_type, chunk_bytes, streams, whole, subgroup, system, network, t_red)
        return CollectiveTimes(last_ns + modelled_ns)
    plan = native_plan(phase_type, subgroup, system, network)
    trees = streams if any(phase.algorithm.name == DOUBLE_BINARY_TREE for phase in plan) else 0
    npus = members if members is not None else tuple(range(total_npus))
    if offsets is None and len(plan) == 1 and plan[0].algorithm.name == DOUBLE_BINARY_TREE:
        # the members of a tree finish apart; chunks follow each other per member (§5.4)
        (phase,) = plan
        by_position = tree_member_times_ns(phase.span, chunk_bytes, streams, active, first_tree, t_red)
        dim = phase.dim if phase.dim is not None else 0
        by_rank = tuple(by_position[network.coordinates(rank)[dim]] for rank in range(total_npus))
        return CollectiveTimes(max(by_rank), by_rank, trees)
    if offsets is None and len(plan) == 1 and plan[0].algorithm.name == RING and subgroup is not None:
        # a subgroup's members end apart on a ring of unequal links
        member_ns = ring_pipelined_ns(phase_type, subgroup, chunk_bytes, t_red, -(-streams // active))
        return _by_rank(npus, member_ns, trees)
    if offsets is None and not trees and all(phase.span.symmetric for phase in plan):
        # every NPU runs in step: one NPU's queues stand for all
        times_ns, _ = phase_times_ns(plan, chunk_bytes, t_red)
        queued = [(phase.dim if phase.dim is not None else 0, ns) for phase, ns in zip(plan, times_ns, strict=True)]
        return CollectiveTimes(queue_schedule_ns(queued, streams, active), None, trees)
    phases = line_phases(plan, npus, chunk_bytes, first_tree, t_red, network)
    ends_ns = schedule_ns(offsets or (0,) * len(npus), phases, streams, active)
    return _by_rank(npus, ends_ns, trees)


def _by_rank(npus: Sequence[int], ends_ns: Sequence[int], trees: int) -> CollectiveTimes:
    """Times of the collective's NPUs ``npus`` (``ends_ns`` in their order) as a :class:`CollectiveTimes`."""
    return CollectiveTimes(max(ends_ns), None, trees, dict(zip(npus, ends_ns, strict=True)))


def _modelled_time_ns(
    comm_type: int,
    chunk_bytes: int,
    streams: int,
    whole: Span,
    subgroup: Span | None,
    system: SystemConfig,
    network: NetworkConfig,
    t_red: ReductionCost,
) -> int:
    """This package's models of REDUCE, GATHER, SCATTER and BROADCAST (see the module docstring)."""
    if comm_type == REDUCE:
        plan = native_plan(REDUCE_SCATTER, subgroup, system, network)
        times_ns, piece_bytes = phase_times_ns(plan, chunk_bytes, t_red)
        times_ns.append(_gather_phase_ns(whole, piece_bytes))
    elif comm_type == GATHER:
        times_ns = [_gather_phase_ns(whole, chunk_bytes)]
    elif comm_type == SCATTER:
        times_ns = [_scatter_phase_ns(whole, chunk_bytes // whole.size)]
    else:  # BROADCAST
        times_ns = [_broadcast_phase_ns(whole, chunk_bytes)]
    return pipelined_time_ns(times_ns, streams, system.active_chunks_per_dimension)


@dataclass(frozen=True, eq=False)
class _ByIdentity:
    """Cache key for a system configuration: it holds a dict, so it cannot be hashed by value.

    Two keys are equal only when they wrap the same object; the key keeps that object alive, so its
    ``id`` is not reused while the entry is cached.
    """

    system: SystemConfig

    def __hash__(self) -> int:
        return id(self.system)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.system is self.system


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _cached_collective_time_ns(
    comm_type: int,
    size_bytes: int,
    members: tuple[int, ...] | None,
    system: _ByIdentity,
    network: NetworkConfig,
    first_tree: int,
    offsets: tuple[int, ...] | None,
) -> CollectiveTimes:
    return _collective_times(comm_type, size_bytes, members, system.system, network, first_tree, offsets)


def collective_times(
    comm_type: int,
    size_bytes: int,
    members: Sequence[int] | None,
    system: SystemConfig,
    network: NetworkConfig,
    *,
    first_tree: int = 0,
    offsets_ns: Sequence[int] | None = None,
) -> CollectiveTimes:
    """Time in ns of one collective from its first member's issue to each member's completion.

    ``comm_type`` is a ``CollectiveCommType`` value, ``size_bytes`` the ``comm_size`` (ALL_GATHER,
    GATHER: per-rank input; the others: the full buffer), ``members`` ``None`` for all NPUs or a
    group's global ranks (sorted here; a group as large as the network uses the full plan, §2.5).
    ``system.endpoint_delay_ns`` is used as given (apply ``--injection-scale`` before).

    ``first_tree``: a doubleBinaryTree's chunks alternate between its two trees, counting on from
    the previous collective of the same type on each NPU (``DoubleBinaryTreeTopology::counter``):
    pass the ``trees`` of the earlier default-group collectives of this ``comm_type``, summed (only
    its parity matters).

    ``offsets_ns``: when each member issues it, ns after the first (in the order of the sorted
    members, or of all ranks); ``None`` when they issue it together. ASTRA-sim's members start their
    part at once and wait only for the data they need (:mod:`chakra.sim.streams`); this package's
    models of the types ASTRA-sim does not simulate, and BARRIER, start with the last member.

    Raises :class:`ChakraInputError` for a reducing collective with ``local-mem-bw`` 0, an
    all-gather below ``preferred-dataset-splits`` bytes, unknown types or algorithms, an algorithm
    ASTRA-sim cannot run on this collective, and (``chakra-astra-compat``) the types ASTRA-sim refuses
    or replays. Memoised by the network's value and the system's identity.
    """
    group = None if members is None else tuple(sorted(members))
    if group is not None and len(group) == network.num_npus:
        group = None
    offsets = None if offsets_ns is None or not any(offsets_ns) else tuple(offsets_ns)
    expected = network.num_npus if group is None else len(group)
    if offsets is not None and len(offsets) != expected:
        raise ValueError(f"{len(offsets)} offsets for a collective of {expected} members")
    return _cached_collective_time_ns(
        comm_type, size_bytes, group, _ByIdentity(system), network, first_tree % 2, offsets
    )


def collective_time_ns(
    comm_type: int, size_bytes: int, members: Sequence[int] | None, system: SystemConfig, network: NetworkConfig
) -> int:
    """Time in ns of one collective from issue (all members present) to its last member's completion,
    as the first collective of its type (:func:`collective_times`)."""
    return collective_times(comm_type, size_bytes, members, system, network).longest_ns


def replays_duration(comm_type: int, system: SystemConfig) -> bool:
    """Whether a collective of ``comm_type`` takes its node's ``duration_micros`` on its rank alone (1 ns
    when 0), unmatched, as ASTRA-sim runs a BROADCAST: with ``chakra-astra-compat`` on."""
    return system.astra_compat and comm_type in ASTRA_REPLAYED_TYPES


def astra_compat_refusal(comm_type: int, system: SystemConfig) -> tuple[str, str] | None:
    """Why a collective of ``comm_type`` cannot run with ``chakra-astra-compat`` on, with a hint; ``None``
    when it can (always, with the switch off: this package models every type)."""
    if not system.astra_compat or comm_type not in ASTRA_REFUSED_TYPES:
        return None
    name = type_name(comm_type)
    return (
        f"is a {name} collective, which ASTRA-sim refuses (Unsupported collective comm type)",
        "set chakra-astra-compat to 0 to simulate it with this package's model, or rewrite it "
        "(chakra adapt --target astra-sim)",
    )


def p2p_time_ns(src: int, dst: int, size_bytes: int, network: NetworkConfig) -> int:
    """Time in ns of a SEND/RECV message: the network delay alone (no chunking, no bus costs, §5.7)."""
    return message_delay_ns(network, src, dst, size_bytes)
