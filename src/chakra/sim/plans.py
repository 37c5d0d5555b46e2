"""The phase plan of a native collective (AR, RS, AG, A2A) and how the NPUs run it together.

:func:`native_plan` lists one chunk stream's phases (§5.4; the rules in :mod:`chakra.sim.collectives`);
:func:`line_phases` turns a plan into what :mod:`chakra.sim.streams` runs: each phase's queue, its
lines of NPUs and their dataflow; :func:`collective_parts` says which members a plan runs together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
)
from chakra.sim.algorithms import (
    DOUBLE_BINARY_TREE,
    PHASE_NAMES,
    RING,
    Algorithm,
    ReductionCost,
    Span,
    dimension_span,
    npu_span,
    parse_algorithm,
    phase_ns,
    size_after,
)
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.dataflow import member_ends_ns, tree_lags_ns
from chakra.sim.streams import LinePhase

#: ``collective-optimization`` values (§4.1).
BASELINE = "baseline"
LOCAL_BW_AWARE = "localBWAware"
#: The comm type whose configured algorithm list (``system.algorithms``) a collective uses: its name.
ALGORITHM_LIST = PHASE_NAMES


@dataclass(frozen=True)
class Phase:
    """One phase of a stream: its type, algorithm, the NPUs it runs over and their network dimension
    (``None`` for a flat phase over all NPUs or a subgroup's ring); ``reverse``: its ring runs
    anticlockwise (a localBWAware all-reduce's all-gather phases: ``get_next_queue_at_level_last``)."""

    phase_type: int
    algorithm: Algorithm
    span: Span
    dim: int | None
    reverse: bool = False


def default_group_plan(phase_type: int, system: SystemConfig, network: NetworkConfig) -> list[Phase]:
    """The phases of one stream of an AR/RS/AG/A2A collective on all NPUs (§5.4)."""
    algorithms = [parse_algorithm(name) for name in system.algorithms(ALGORITHM_LIST[phase_type], network.dims)]
    involved = [dim for dim in range(min(len(algorithms), network.dims)) if network.npus_count[dim] > 1]
    endpoint_ns = int(system.endpoint_delay_ns)
    flat = next((algorithms[dim] for dim in involved if algorithms[dim].flat), None)
    if flat is not None:
        span = npu_span(network, tuple(range(network.num_npus)), endpoint_ns, symmetric=True)
        return [Phase(phase_type, flat, span, None)]
    optimization = system.collective_optimization
    if optimization is None:
        if phase_type == ALL_REDUCE and len(involved) > 1:
            raise ChakraInputError(
                "the system configuration has no collective-optimization: ASTRA-sim leaves it uninitialised, "
                "and an all-reduce over several network dimensions stalls on it",
                path=system.path,
                hint='add "collective-optimization": "baseline" (or "localBWAware")',
            )
        optimization = BASELINE  # one dimension: both plan alike
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
    back_down = phase_type == ALL_REDUCE and optimization == LOCAL_BW_AWARE
    return [
        Phase(step, algorithms[dim], dimension_span(network, dim, endpoint_ns), dim, back_down and step == ALL_GATHER)
        for step, dim in plan
    ]


def native_plan(phase_type: int, group: Span | None, system: SystemConfig, network: NetworkConfig) -> list[Phase]:
    """One stream's AR/RS/AG/A2A phases: the subgroup's one phase, or the multi-dimensional plan.

    A subgroup (``CommunicatorGroup::get_collective_plan``) runs over its members in one phase with
    the type's configured algorithm when the system file lists one, and with ring when it lists one
    per dimension of a multi-dimensional network; ASTRA-sim crashes on a doubleBinaryTree subgroup
    (its ring of members is read as a tree), so that is refused.
    """
    if group is None:
        return default_group_plan(phase_type, system, network)
    configured = system.algorithms(ALGORITHM_LIST[phase_type], network.dims)
    algorithm = parse_algorithm(configured[0]) if len(configured) == 1 else Algorithm(RING)
    if algorithm.name == DOUBLE_BINARY_TREE:
        raise ChakraInputError(
            f"doubleBinaryTree on a communicator subgroup ({group.size} of {network.num_npus} NPUs): "
            "ASTRA-sim crashes on it (it reads the subgroup's ring as a tree)",
            path=system.path,
            hint="use ring, direct or halvingDoubling for this type, or list one algorithm per network dimension",
        )
    return [Phase(phase_type, algorithm, group, None)]


def phase_times_ns(plan: list[Phase], chunk_bytes: int, t_red: ReductionCost) -> tuple[list[int], int]:
    """Chunk time in ns of each phase of ``plan``, and the size in bytes the stream ends with."""
    times_ns = []
    size_bytes = chunk_bytes
    for phase in plan:
        times_ns.append(phase_ns(phase.phase_type, phase.algorithm, phase.span, size_bytes, t_red))
        size_bytes = size_after(phase.phase_type, phase.algorithm, size_bytes, phase.span.size)
    return times_ns, size_bytes


def line_phases(
    plan: list[Phase],
    npus: Sequence[int],
    chunk_bytes: int,
    first_tree: int,
    t_red: ReductionCost,
    network: NetworkConfig,
) -> list[LinePhase]:
    """The plan as :mod:`chakra.sim.streams` runs it over ``npus``: each phase's queue (its dimension),
    lines (the NPUs differing only in that coordinate; a flat or subgroup phase: all, in order) and
    dataflow at the size the phase receives (doubleBinaryTree's trees chosen by :func:`tree_roots`).
    """
    roots = tree_roots(plan, first_tree)
    phases = []
    size_bytes = chunk_bytes
    for phase, root_max_of in zip(plan, roots, strict=True):
        lines, line_of, position_of = phase_lines(phase, npus, network)

        def ends(
            stream: int, inits: Sequence[int], phase: Phase = phase, size: int = size_bytes,
            root_max_of: Callable[[int], bool] = root_max_of,
        ) -> list[int]:  # fmt: skip
            return member_ends_ns(
                phase.phase_type, phase.algorithm, phase.span, size, t_red, inits, root_max_of(stream), phase.reverse
            )

        lags = None
        if phase.algorithm.name == DOUBLE_BINARY_TREE:

            def lags(
                stream: int, phase: Phase = phase, size: int = size_bytes,
                root_max_of: Callable[[int], bool] = root_max_of,
            ) -> list[int]:  # fmt: skip
                return tree_lags_ns(phase.span, root_max_of(stream), t_red(size))

        queue = phase.dim if phase.dim is not None else 0
        phases.append(LinePhase(queue, lines, line_of, position_of, ends, lags))
        size_bytes = size_after(phase.phase_type, phase.algorithm, size_bytes, phase.span.size)
    return phases


def phase_lines(
    phase: Phase, npus: Sequence[int], network: NetworkConfig
) -> tuple[list[list[int]], list[int], list[int]]:
    """The lines of NPUs that run ``phase`` together, as indexes into ``npus``: each line's members by
    position, and each NPU's line and position. A phase on a dimension has a line per slice of the
    other dimensions (the NPUs differing only in that coordinate, by that coordinate); a flat or
    subgroup phase has one line of every NPU, in order.

    >>> from chakra.sim.config import NetworkConfig
    >>> two_d = NetworkConfig(("Ring", "Ring"), (2, 2), (50.0, 50.0), (500.0, 500.0))
    >>> on_dim_1 = Phase(0, Algorithm(RING), Span(2, 0, lambda a, b, size: 0, True), 1)
    >>> phase_lines(on_dim_1, range(4), two_d)  # NPUs 0 and 2 differ in dimension 1 only
    ([[0, 2], [1, 3]], [0, 1, 0, 1], [0, 0, 1, 1])
    """
    if phase.dim is None:
        return [list(range(len(npus)))], [0] * len(npus), list(range(len(npus)))
    keyed: dict[tuple[int, ...], int] = {}
    lines: list[list[int]] = []
    line_of, position_of = [], []
    for i, npu in enumerate(npus):
        coords = network.coordinates(npu)
        key = coords[: phase.dim] + coords[phase.dim + 1 :]
        if key not in keyed:
            keyed[key] = len(lines)
            lines.append([0] * network.npus_count[phase.dim])
        lines[keyed[key]][coords[phase.dim]] = i
        line_of.append(keyed[key])
        position_of.append(coords[phase.dim])
    return lines, line_of, position_of


def tree_roots(plan: Sequence[Phase], first_tree: int) -> list[Callable[[int], bool]]:
    """For each phase of ``plan``, whether stream ``s``'s chunk takes doubleBinaryTree's ``RootMax``
    tree there (else ``RootMin``).

    The two trees alternate per dimension (``DoubleBinaryTreeTopology::counter``, one per dimension
    and collective type, advanced by every phase generated on it): a dimension with one phase per
    stream continues the type's alternation (``first_tree``), one with two (localBWAware
    reduce-scatter and all-gather) advances by two per stream, so its first phase takes ``RootMax``
    and its second ``RootMin`` every time.

    >>> ring = Span(2, 0, lambda a, b, size: 0, True)
    >>> rs, ag = Phase(1, Algorithm(RING), ring, 0), Phase(2, Algorithm(RING), ring, 0)
    >>> [[root(s) for s in range(3)] for root in tree_roots([rs, ag], first_tree=1)]
    [[True, True, True], [False, False, False]]
    >>> [root(s) for s in range(3) for root in tree_roots([rs], first_tree=1)]
    [False, True, False]
    """
    per_dim: dict[int | None, int] = {}
    for phase in plan:
        per_dim[phase.dim] = per_dim.get(phase.dim, 0) + 1
    seen: dict[int | None, int] = {}
    roots: list[Callable[[int], bool]] = []
    for phase in plan:
        on_dim = per_dim[phase.dim]
        index = seen.get(phase.dim, 0)
        seen[phase.dim] = index + 1
        base = first_tree if on_dim == 1 else 0

        def root_max(stream: int, on_dim: int = on_dim, index: int = index, base: int = base) -> bool:
            return (base + stream * on_dim + index) % 2 == 0

        roots.append(root_max)
    return roots


def collective_parts(
    comm_type: int, members: Sequence[int] | None, system: SystemConfig, network: NetworkConfig
) -> list[frozenset[int]]:
    """The members of a collective that run it together: one part, unless its plan leaves NPUs apart.

    A collective over the whole network runs on the dimensions its algorithm list covers (§5.4): with
    fewer algorithms than dimensions (``all-reduce-implementation: [ring]`` on a 2-D network),
    ASTRA-sim runs it in every slice of the other dimensions alone, so each slice's members end
    without waiting for the others'. Subgroups, flat (``one*``) plans and this package's own models
    join all their members.

    >>> from chakra.sim.config import NetworkConfig, SystemConfig
    >>> two_d = NetworkConfig(("Ring", "Ring"), (2, 2), (50.0, 50.0), (500.0, 500.0))
    >>> one_list = SystemConfig("LIFO", "localBWAware", {"ALL_REDUCE": ("ring",)}, preferred_dataset_splits=1)
    >>> collective_parts(0, None, one_list, two_d)  # ALL_REDUCE on dimension 0 only: {0, 1} and {2, 3}
    [frozenset({0, 1}), frozenset({2, 3})]
    """
    ranks = tuple(range(network.num_npus)) if members is None else tuple(sorted(members))
    whole = [frozenset(ranks)]
    phase_type = REDUCE_SCATTER if comm_type == REDUCE_SCATTER_BLOCK else comm_type
    if len(ranks) != network.num_npus or phase_type not in ALGORITHM_LIST:
        return whole
    plan = default_group_plan(phase_type, system, network)
    if any(phase.dim is None for phase in plan):
        return whole
    involved = {phase.dim for phase in plan}
    parts: dict[tuple[int, ...], set[int]] = {}
    for rank in ranks:
        coords = network.coordinates(rank)
        parts.setdefault(tuple(c for d, c in enumerate(coords) if d not in involved), set()).add(rank)
    return [frozenset(part) for part in parts.values()]
