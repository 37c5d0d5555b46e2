"""Time of one collective, in integer ns, from issue (all members present) to completion.

The analytical model of ASTRA-sim's native collectives on the congestion-unaware backend
(``reference/astra-sim.md`` §5.3–§5.6, subgroups §2.5), for a symmetric, contention-free collective:

1. **Chunking** (§5.4): ``C = floor(S / splits)``; a collective other than ALL_GATHER with
   ``total NPUs > C`` is padded to ``C = total NPUs``, ``S = splits · C``; ``K = ceil(S / C)`` streams.
2. **Phases** of one stream: one per involved dimension (dimensions with one NPU, or beyond the
   configured algorithm list, are skipped). Baseline: the collective's own type on each dimension
   ascending (ALL_GATHER descending). ``localBWAware`` all-reduce: RS on every involved dimension but
   the last (ascending), AR on the last, AG back down (descending); these phases use the all-reduce
   algorithm of their dimension. RS divides the data size by ``n_d`` (integer), AG multiplies it.
   A ``one*`` algorithm on an involved dimension turns the collective into one flat phase over all
   NPUs (id order), timed with :func:`chakra.sim.network.message_delay_ns`.
   A subgroup (fewer members than NPUs) runs one phase: a ring over its sorted members, real
   NPU-to-NPU delays, a fixed 10 ns endpoint cost, algorithm forced to ring (§2.5).
3. **Per-phase chunk time** by algorithm; every algorithm follows the accounting of the §5.6 ring
   closed forms: one endpoint crossing ``d`` to inject, then per step the network delay of the step,
   one ``d`` on the receiving side and, on reducing steps, ``t_red(m) = 3 · trunc(m / (local-mem-bw ·
   1e9) · 1e9)``. Every delay is truncated to whole ns where it is computed (§5.1).
4. **Pipelining** of the K streams (an approximation of ASTRA-sim's event-driven queues, which is
   exact for one dimension): ``T = Σ_phases T_phase + (ceil(K / a) − 1) · max_phases T_phase`` with
   ``a = active-chunks-per-dimension``: the first wave of ``a`` streams crosses every phase, later
   waves follow one bottleneck phase apart. For one phase this is ``ceil(K / a) · T_chunk`` (§5.6).

Algorithms (``n`` = NPUs of the phase, ``D`` = phase input size, ``m = floor(D / n)``):

* ``ring``: AR 2(n−1) steps of ``m`` (reductions on the first n−1), RS n−1 steps of ``m`` (all
  reduced), AG n−1 steps of ``D``, A2A n(n−1)/2 steps of ``m``, always to the ring neighbour. With
  equal links this is exactly the §5.6 closed form. With unequal links (subgroups, flat rings) each
  NPU waits for its predecessor, so the phase takes the longest chain of consecutive links.
* ``direct`` / ``directN`` (interpretation; the reference gives only message counts): the n−1
  messages of a sweep go to rotating destinations ``i+1, …, i+n−1``, ``N`` at a time (all n−1 when no
  window): each round costs its slowest message plus one ``d``. AR = an RS sweep and an AG sweep;
  RS and AR reduce the n−1 received ``m``-byte pieces one after another (one memory) at the end.
* ``halvingDoubling``: log2(n) exchange steps with partner ``i XOR distance``; RS/AR send ``D/2`` at
  distance 1, halving the size while the distance doubles (reduced); AR then reverses without
  reductions; AG sends ``D`` at distance n/2, doubling the size while the distance halves.
  **Note:** n not a power of two, or an all-to-all, falls back to ``ring``.
* ``doubleBinaryTree`` (AR only; other types fall back to ``ring``): an in-order binary tree over
  the dimension, ``depth = ceil(log2 n)``; the reduce sweep climbs one level per step (children at
  distance 1, 2, 4, … from their parent), each step one full-``D`` message, one ``d`` and the
  reduction of both children (``2 · t_red(D)``); the broadcast sweep comes back down the same
  distances without reductions. Both trees of the "double" tree carry the full ``D`` as in the
  reference, so they run side by side and the time is one tree's.

Types ASTRA-sim does not simulate get a documented standard model over the group's NPUs (all NPUs
in id order, or the subgroup's members), the root being the first of them, chunked and pipelined
like the others (and padded, since they are not ALL_GATHER):

* REDUCE: the group's reduce-scatter plan, then a gather of the reduced pieces to the root (each
  non-root sends its piece at once: ``d + max delay + d``).
* GATHER: ``comm_size`` is the per-rank input; every non-root sends it to the root at once.
* SCATTER: ``comm_size`` is the root's full buffer; the root sends ``floor(C / n)`` to every member at
  once.
* BROADCAST: binomial tree, ``ceil(log2 n)`` rounds of the full chunk (round k: members
  ``0 … 2^k−1`` send to ``+2^k``). ASTRA-sim only replays a BROADCAST's ``duration_micros``; a caller
  that wants that behaviour must not ask for this model.
* BARRIER: dissemination barrier, ``ceil(log2 n)`` rounds of 0-byte messages from member ``i`` to
  ``i + 2^k`` (mod n), latency only; no data, so no chunking or padding.
* REDUCE_SCATTER_BLOCK: exactly REDUCE_SCATTER.

Results are memoised (an LRU cache) by the network's value and the system's identity (a
``SystemConfig`` holds a dict, so it cannot be hashed by value; it is frozen, so its identity names it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
)
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.network import dimension_hops, hop_delay_ns, message_delay_ns

#: The subgroup ring's endpoint (MA bus) crossing: ASTRA-sim fixes it at 10 ns for the "Local"
#: dimension it builds for a communicator subgroup, whatever ``endpoint-delay`` says (§2.5, §5.5).
SUBGROUP_ENDPOINT_DELAY_NS = 10
#: A reduction reads the received message and the local buffer and writes the result (§5.5).
REDUCTION_MEMORY_PASSES = 3
#: ``local-mem-bw`` is decimal GB/s (§5.1).
BYTES_PER_GB = 1e9
NS_PER_S = 1e9
#: A binary tree's inner node reduces the messages of its two children (doubleBinaryTree model).
TREE_CHILDREN = 2
#: ``collective-optimization`` values (§4.1).
BASELINE = "baseline"
LOCAL_BW_AWARE = "localBWAware"
#: Memoised (type, size, group, system, network) results: a workload has few distinct collectives;
#: the bound keeps long parameter sweeps from growing without limit.
CACHE_ENTRIES = 4096

#: Algorithm names of the system configuration (§4.1), without the ``one`` prefix of flat variants.
RING = "ring"
DIRECT = "direct"
HALVING_DOUBLING = "halvingDoubling"
DOUBLE_BINARY_TREE = "doubleBinaryTree"
FLAT_PREFIX = "one"

#: The comm type whose configured algorithm list (``system.algorithms``) a collective uses.
_ALGORITHM_LIST: dict[int, str] = {
    ALL_REDUCE: "ALL_REDUCE",
    REDUCE_SCATTER: "REDUCE_SCATTER",
    ALL_GATHER: "ALL_GATHER",
    ALL_TO_ALL: "ALL_TO_ALL",
}
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

#: ``t_red``: ns to reduce a received message of the given bytes.
ReductionCost = Callable[[int], int]


@dataclass(frozen=True)
class Algorithm:
    """One entry of an ``*-implementation`` list: base algorithm, flat (``one*``) or not, direct window."""

    name: str  # RING | DIRECT | HALVING_DOUBLING | DOUBLE_BINARY_TREE
    flat: bool = False
    window: int | None = None  # directN: at most N messages in flight; None = all n−1


def parse_algorithm(text: str) -> Algorithm:
    """Read ``ring``, ``oneRing``, ``direct``, ``direct8``, ``oneDirect``, ``halvingDoubling``, ….

    Raises :class:`ChakraInputError` for a name ASTRA-sim does not know.
    """
    flat = text.startswith(FLAT_PREFIX) and len(text) > len(FLAT_PREFIX) and text[len(FLAT_PREFIX)].isupper()
    base = text[len(FLAT_PREFIX)].lower() + text[len(FLAT_PREFIX) + 1 :] if flat else text
    if base in (RING, HALVING_DOUBLING) or (base == DOUBLE_BINARY_TREE and not flat):
        return Algorithm(base, flat)
    if base.startswith(DIRECT):
        window_text = base[len(DIRECT) :]
        if window_text == "":
            return Algorithm(DIRECT, flat)
        if window_text.isdigit() and int(window_text) > 0:
            return Algorithm(DIRECT, flat, int(window_text))
    raise ChakraInputError(
        f"unknown collective algorithm {text!r}",
        hint="use ring, oneRing, direct, directN, oneDirect, oneDirectN, halvingDoubling, "
        "oneHalvingDoubling or doubleBinaryTree",
    )


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
    """Time of ``streams`` chunk streams, ``active_streams`` at a time, each crossing the phases in order.

    ``Σ phases + (ceil(streams / active) − 1) · max phase``: the bottleneck phase sets the pace of the
    later waves (an approximation of ASTRA-sim's per-dimension queues; exact for one phase).
    """
    if not phase_times_ns:
        return 0
    waves = -(-streams // active_streams)
    return sum(phase_times_ns) + (waves - 1) * max(phase_times_ns)


def _zero_bandwidth_error() -> ChakraInputError:
    return ChakraInputError(
        "local-mem-bw is 0: reductions would take forever",
        hint="set local-mem-bw (GB/s) in the system configuration",
    )


def reduction_delay_ns(size_bytes: int, local_mem_bw_gbps: float) -> int:
    """Cost in ns of reducing a received ``size_bytes`` message: ``3 · trunc(m / (bw · 1e9) · 1e9)`` (§5.5)."""
    if local_mem_bw_gbps == 0:
        raise _zero_bandwidth_error()
    return REDUCTION_MEMORY_PASSES * int(size_bytes / (local_mem_bw_gbps * BYTES_PER_GB) * NS_PER_S)


# --- the NPUs one phase runs over ---------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    """The NPUs of one phase, as positions ``0 … n−1`` in ring order, and how a message between two costs.

    ``symmetric``: every position sees the same delays to its relative peers (a network dimension,
    or all NPUs of a network whose dimensions are each vertex-transitive), so position 0 speaks for all.
    """

    size: int
    endpoint_ns: int
    delay: Callable[[int, int, int], int]  # (from position, to position, size_bytes) -> ns
    symmetric: bool

    def sources(self) -> range:
        return range(1) if self.symmetric else range(self.size)


def _dimension_span(network: NetworkConfig, dim: int, endpoint_ns: int) -> _Span:
    def delay(a: int, b: int, size_bytes: int) -> int:
        return hop_delay_ns(network, dim, dimension_hops(network, dim, a, b), size_bytes)

    return _Span(network.npus_count[dim], endpoint_ns, delay, symmetric=True)


def _npu_span(network: NetworkConfig, npus: tuple[int, ...], endpoint_ns: int, symmetric: bool) -> _Span:
    def delay(a: int, b: int, size_bytes: int) -> int:
        return message_delay_ns(network, npus[a], npus[b], size_bytes)

    return _Span(len(npus), endpoint_ns, delay, symmetric)


# --- per-phase chunk times ----------------------------------------------------------------------


def _longest_chain_ns(links_ns: Sequence[int], steps: int) -> int:
    """Largest sum of ``steps`` consecutive links of a ring (wrapping as often as needed)."""
    n = len(links_ns)
    laps, rest = divmod(steps, n)
    best = 0
    if rest:
        window = best = sum(links_ns[:rest])
        for start in range(1, n):
            window += links_ns[(start + rest - 1) % n] - links_ns[start - 1]
            best = max(best, window)
    return laps * sum(links_ns) + best


def _ring_phase_ns(phase_type: int, span: _Span, size_bytes: int, t_red: ReductionCost) -> int:
    n, d = span.size, span.endpoint_ns
    piece = size_bytes // n
    if phase_type == ALL_REDUCE:
        steps, message, reduced = 2 * (n - 1), piece, n - 1
    elif phase_type == REDUCE_SCATTER:
        steps, message, reduced = n - 1, piece, n - 1
    elif phase_type == ALL_GATHER:
        steps, message, reduced = n - 1, size_bytes, 0
    else:  # ALL_TO_ALL
        steps, message, reduced = n * (n - 1) // 2, piece, 0
    links_ns = [span.delay(p, (p + 1) % n, message) for p in range(n)]
    reduction_ns = reduced * t_red(message) if reduced else 0
    return d + steps * d + reduction_ns + _longest_chain_ns(links_ns, steps)


def _direct_phase_ns(phase_type: int, span: _Span, size_bytes: int, window: int | None, t_red: ReductionCost) -> int:
    n, d = span.size, span.endpoint_ns
    piece = size_bytes // n
    message = size_bytes if phase_type == ALL_GATHER else piece
    per_round = n - 1 if window is None else min(window, n - 1)
    offsets = list(range(1, n))
    sweep_ns = 0
    for first in range(0, n - 1, per_round):
        round_offsets = offsets[first : first + per_round]
        slowest = max(span.delay(p, (p + k) % n, message) for p in span.sources() for k in round_offsets)
        sweep_ns += slowest + d
    sweeps = 2 if phase_type == ALL_REDUCE else 1
    reduction_ns = (n - 1) * t_red(piece) if phase_type in (ALL_REDUCE, REDUCE_SCATTER) else 0
    return d + sweeps * sweep_ns + reduction_ns


def _exchange_ns(span: _Span, distance: int, size_bytes: int) -> int:
    """Slowest pairwise exchange between positions ``p`` and ``p XOR distance``."""
    return max(span.delay(p, p ^ distance, size_bytes) for p in range(span.size))


def _halving_doubling_phase_ns(phase_type: int, span: _Span, size_bytes: int, t_red: ReductionCost) -> int:
    n, d = span.size, span.endpoint_ns
    steps = n.bit_length() - 1  # log2(n); n is a power of two here
    total_ns = d
    if phase_type in (ALL_REDUCE, REDUCE_SCATTER):
        for s in range(steps):  # D/2 at distance 1, halving while the distance doubles
            message = size_bytes // 2 ** (s + 1)
            total_ns += _exchange_ns(span, 2**s, message) + d + t_red(message)
    if phase_type == ALL_REDUCE:
        for s in reversed(range(steps)):  # back: the size doubles while the distance halves
            message = size_bytes // 2 ** (s + 1)
            total_ns += _exchange_ns(span, 2**s, message) + d
    if phase_type == ALL_GATHER:
        for s in range(steps):  # D at distance n/2, doubling while the distance halves
            total_ns += _exchange_ns(span, n >> (s + 1), size_bytes << s) + d
    return total_ns


def _double_binary_tree_phase_ns(span: _Span, size_bytes: int, t_red: ReductionCost) -> int:
    n, d = span.size, span.endpoint_ns
    depth = (n - 1).bit_length()  # ceil(log2 n)
    level_ns = [max(span.delay(p, (p + 2**j) % n, size_bytes) for p in span.sources()) for j in range(depth)]
    reduce_sweep_ns = sum(t + d + TREE_CHILDREN * t_red(size_bytes) for t in level_ns)
    broadcast_sweep_ns = sum(t + d for t in level_ns)
    return d + reduce_sweep_ns + broadcast_sweep_ns


def _phase_ns(phase_type: int, algorithm: Algorithm, span: _Span, size_bytes: int, t_red: ReductionCost) -> int:
    """Chunk time in ns of one AR/RS/AG/A2A phase with ``algorithm`` (falling back to ring where it cannot run)."""
    n = span.size
    if algorithm.name == DIRECT:
        return _direct_phase_ns(phase_type, span, size_bytes, algorithm.window, t_red)
    if algorithm.name == HALVING_DOUBLING and phase_type != ALL_TO_ALL and n & (n - 1) == 0:
        return _halving_doubling_phase_ns(phase_type, span, size_bytes, t_red)
    if algorithm.name == DOUBLE_BINARY_TREE and phase_type == ALL_REDUCE:
        return _double_binary_tree_phase_ns(span, size_bytes, t_red)
    return _ring_phase_ns(phase_type, span, size_bytes, t_red)


def _gather_phase_ns(span: _Span, size_bytes: int) -> int:
    """Every non-root member sends ``size_bytes`` to the root (position 0) at once."""
    slowest = max((span.delay(p, 0, size_bytes) for p in range(1, span.size)), default=0)
    return span.endpoint_ns + slowest + span.endpoint_ns


def _scatter_phase_ns(span: _Span, size_bytes: int) -> int:
    """The root (position 0) sends ``size_bytes`` to every other member at once."""
    slowest = max((span.delay(0, p, size_bytes) for p in range(1, span.size)), default=0)
    return span.endpoint_ns + slowest + span.endpoint_ns


def _broadcast_phase_ns(span: _Span, size_bytes: int) -> int:
    """Binomial tree from position 0: round k, positions ``p < 2^k`` send to ``p + 2^k``."""
    n, d = span.size, span.endpoint_ns
    total_ns = d
    for k in range((n - 1).bit_length()):
        reach = 2**k
        total_ns += max(span.delay(p, p + reach, size_bytes) for p in range(min(reach, n - reach))) + d
    return total_ns


def _barrier_ns(span: _Span) -> int:
    """Dissemination barrier: round k, position ``i`` sends 0 bytes to ``i + 2^k`` (mod n)."""
    n, d = span.size, span.endpoint_ns
    total_ns = d
    for k in range((n - 1).bit_length()):
        total_ns += max(span.delay(p, (p + 2**k) % n, 0) for p in range(n)) + d
    return total_ns


# --- plans --------------------------------------------------------------------------------------


def _size_after(phase_type: int, size_bytes: int, n: int) -> int:
    if phase_type == REDUCE_SCATTER:
        return size_bytes // n
    if phase_type == ALL_GATHER:
        return size_bytes * n
    return size_bytes


def _default_group_phases(
    phase_type: int, chunk_bytes: int, system: SystemConfig, network: NetworkConfig, t_red: ReductionCost
) -> tuple[list[int], int]:
    """Chunk times in ns of one stream's phases on all NPUs, and the size in bytes the stream ends with."""
    algorithms = [parse_algorithm(name) for name in system.algorithms(_ALGORITHM_LIST[phase_type], network.dims)]
    involved = [dim for dim in range(min(len(algorithms), network.dims)) if network.npus_count[dim] > 1]
    endpoint_ns = int(system.endpoint_delay_ns)
    flat = next((algorithms[dim] for dim in involved if algorithms[dim].flat), None)
    if flat is not None:
        span = _npu_span(network, tuple(range(network.num_npus)), endpoint_ns, symmetric=True)
        return [_phase_ns(phase_type, flat, span, chunk_bytes, t_red)], _size_after(phase_type, chunk_bytes, span.size)
    optimization = system.collective_optimization
    if optimization not in (BASELINE, LOCAL_BW_AWARE):
        raise ChakraInputError(
            f"unknown collective-optimization {optimization!r}", hint=f"use {BASELINE} or {LOCAL_BW_AWARE}"
        )
    plan: Sequence[tuple[int, int]]  # (phase type, dimension)
    if phase_type == ALL_REDUCE and optimization == LOCAL_BW_AWARE and len(involved) > 1:
        plan = (
            [(REDUCE_SCATTER, dim) for dim in involved[:-1]]
            + [(ALL_REDUCE, involved[-1])]
            + [(ALL_GATHER, dim) for dim in reversed(involved[:-1])]
        )
    elif phase_type == ALL_GATHER:
        plan = [(ALL_GATHER, dim) for dim in reversed(involved)]
    else:
        plan = [(phase_type, dim) for dim in involved]
    times_ns = []
    size_bytes = chunk_bytes
    for step_type, dim in plan:
        span = _dimension_span(network, dim, endpoint_ns)
        times_ns.append(_phase_ns(step_type, algorithms[dim], span, size_bytes, t_red))
        size_bytes = _size_after(step_type, size_bytes, span.size)
    return times_ns, size_bytes


def _native_phases(
    phase_type: int,
    chunk_bytes: int,
    group: _Span | None,
    system: SystemConfig,
    network: NetworkConfig,
    t_red: ReductionCost,
) -> tuple[list[int], int]:
    """One stream's AR/RS/AG/A2A phases: the subgroup ring, or the multi-dimensional plan."""
    if group is not None:
        time_ns = _ring_phase_ns(phase_type, group, chunk_bytes, t_red)
        return [time_ns], _size_after(phase_type, chunk_bytes, group.size)
    return _default_group_phases(phase_type, chunk_bytes, system, network, t_red)


def _collective_time_ns(
    comm_type: int, size_bytes: int, members: tuple[int, ...] | None, system: SystemConfig, network: NetworkConfig
) -> int:
    if comm_type not in KNOWN_TYPES:
        raise ChakraInputError(f"unknown collective type {comm_type}", hint="use a CollectiveCommType value 0–9")
    if size_bytes < 0:
        raise ChakraInputError(f"negative collective size {size_bytes} bytes")
    if comm_type in REDUCING_TYPES and system.local_mem_bw_gbps == 0:
        raise _zero_bandwidth_error()
    if system.preferred_dataset_splits < 1 or system.active_chunks_per_dimension < 1:
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
        return 0  # a group of one has nobody to talk to

    subgroup = _npu_span(network, members, SUBGROUP_ENDPOINT_DELAY_NS, symmetric=False) if members is not None else None
    whole = (
        subgroup
        if subgroup is not None
        else _npu_span(network, tuple(range(total_npus)), int(system.endpoint_delay_ns), symmetric=True)
    )
    if comm_type == BARRIER:
        return _barrier_ns(whole)

    def t_red(message_bytes: int) -> int:
        return reduction_delay_ns(message_bytes, system.local_mem_bw_gbps)

    chunk_bytes, streams = chunk_plan(comm_type, size_bytes, system.preferred_dataset_splits, total_npus)
    phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
    if phase_type in _ALGORITHM_LIST:
        times_ns, _ = _native_phases(phase_type, chunk_bytes, subgroup, system, network, t_red)
    elif comm_type == REDUCE:
        times_ns, piece_bytes = _native_phases(REDUCE_SCATTER, chunk_bytes, subgroup, system, network, t_red)
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
    comm_type: int, size_bytes: int, members: tuple[int, ...] | None, system: _ByIdentity, network: NetworkConfig
) -> int:
    return _collective_time_ns(comm_type, size_bytes, members, system.system, network)


def collective_time_ns(
    comm_type: int, size_bytes: int, members: Sequence[int] | None, system: SystemConfig, network: NetworkConfig
) -> int:
    """Time in ns of one collective from issue (all members present) to completion.

    ``comm_type`` is a ``CollectiveCommType`` value, ``size_bytes`` the ``comm_size`` (ALL_GATHER,
    GATHER: per-rank input; the others: the full buffer), ``members`` ``None`` for all NPUs or a
    group's global ranks (sorted here; a group as large as the network uses the full plan, §2.5).
    ``system.endpoint_delay_ns`` is used as given (apply ``--injection-scale`` before).
    Raises :class:`ChakraInputError` for a reducing collective with ``local-mem-bw`` 0, an
    all-gather below ``preferred-dataset-splits`` bytes, unknown types or algorithms.

    Memoised by the network's value and the system's identity.
    """
    group = None if members is None else tuple(sorted(members))
    if group is not None and len(group) == network.num_npus:
        group = None
    return _cached_collective_time_ns(comm_type, size_bytes, group, _ByIdentity(system), network)


def p2p_time_ns(src: int, dst: int, size_bytes: int, network: NetworkConfig) -> int:
    """Time in ns of a SEND/RECV message: the network delay alone (no chunking, no bus costs, §5.7)."""
    return message_delay_ns(network, src, dst, size_bytes)
