"""One phase of one chunk when its members start it at different times: each member's end, in ns.

ASTRA-sim's members do not wait for each other to start a phase: each starts its part of a chunk's
phase when its own queue lets it (:mod:`chakra.sim.streams`), sends at once (messages are eager:
``CommonNetworkApi``; a message that arrived before its receive was posted is taken the moment the
receive is), and waits only where the algorithm needs a peer's data. Every step is a ``max`` of
times plus fixed delays, so a phase is a function from the members' start times to their end times,
computed here step by step (``inits``/results by position in the :class:`~chakra.sim.algorithms.Span`):

* ``ring`` (``Ring.cc``): member ``p`` sends its first message ``d`` after it starts and posts the
  matching receive with it; receive ``k`` completes at ``max(arrival of p−1's k-th message, p's k-th
  send)``; then ``d`` (and ``t_red`` on the reduced receives) until its next send; it ends ``d``
  (+ ``t_red``) after its last receive. A late member holds up its successor first, and the delay
  travels one member per step (measured against ASTRA-sim's binary: every late-member case exact).
* ``halvingDoubling``: the same with the step's partner in place of the ring predecessor.
* ``doubleBinaryTree``: the tree's dataflow (see :class:`chakra.sim.algorithms.TreeReplay`): a leaf
  sends up ``d`` after it starts; an inner node reduces each child's message (``d + t_red``) after
  the later of its arrival and its own start, sends up after the last, reduces the parent's result
  when it arrives (``d + t_red``), passes it down and ends; a leaf ends ``d`` after the result.
* ``direct``: every member's ``AllToAll`` state machine, replayed together
  (:func:`chakra.sim.algorithms.direct_member_ends_ns`).
"""

from __future__ import annotations

from collections.abc import Sequence

from chakra.sim.algorithms import (
    DIRECT,
    DOUBLE_BINARY_TREE,
    HALVING_DOUBLING,
    Algorithm,
    ReductionCost,
    Span,
    binary_tree,
    direct_member_ends_ns,
    halving_doubling_steps,
    phase_ns,
    ring_steps,
)

#: Members from which the ring's steps are computed with numpy rather than lists (measured: below
#: this the lists are faster, above it numpy's per-call cost is repaid).
NUMPY_MEMBERS = 48


def member_ends_ns(
    phase_type: int,
    algorithm: Algorithm,
    span: Span,
    size_bytes: int,
    t_red: ReductionCost,
    inits_ns: Sequence[int],
    root_max: bool = True,
    reverse: bool = False,
) -> list[int]:
    """Each member's end in ns of one chunk's phase, from each member's start ``inits_ns`` (by position).

    ``root_max``: which of doubleBinaryTree's two trees the chunk uses; ``reverse``: ring and direct
    go anticlockwise (position ``p`` sends to ``p − 1``, ``p − 2``, …).

    >>> from chakra.sim.algorithms import Algorithm, Span
    >>> ring = Span(3, 10, lambda a, b, size: 100, symmetric=True)
    >>> member_ends_ns(2, Algorithm("ring"), ring, 300, lambda m: 0, [0, 0, 0])  # ALL_GATHER: 2 steps
    [230, 230, 230]
    >>> member_ends_ns(2, Algorithm("ring"), ring, 300, lambda m: 0, [0, 500, 0])  # member 1 late: its messages wait
    [730, 530, 630]
    """
    if algorithm.name == DOUBLE_BINARY_TREE:
        return tree_ends_ns(span, size_bytes, root_max, t_red(size_bytes), inits_ns)
    first = inits_ns[0]
    together = all(t == first for t in inits_ns)
    if together and span.symmetric:
        return [first + phase_ns(phase_type, algorithm, span, size_bytes, t_red)] * span.size
    if algorithm.name == HALVING_DOUBLING:
        return _halving_doubling_ends_ns(phase_type, span, size_bytes, t_red, inits_ns)
    if reverse:  # ring and direct go round the other way: the same on the mirrored positions
        n = span.size
        mirrored = Span(n, span.endpoint_ns, lambda a, b, size: span.delay(n - 1 - a, n - 1 - b, size), span.symmetric)
        return member_ends_ns(phase_type, algorithm, mirrored, size_bytes, t_red, list(inits_ns)[::-1])[::-1]
    if algorithm.name == DIRECT:
        return direct_member_ends_ns(phase_type, span, size_bytes, algorithm.window, t_red, inits_ns)
    return ring_ends_ns(phase_type, span, size_bytes, t_red, inits_ns)


def tree_lags_ns(span: Span, root_max: bool, reduction_ns: int) -> list[int]:
    """How long before its end each member's last event of a doubleBinaryTree chunk was registered: a
    leaf's last bus crossing (``d``), the others' reduction (``t_red``)."""
    tree = binary_tree(span.size, root_max)
    return [reduction_ns if tree.left[m] >= 0 or tree.right[m] >= 0 else span.endpoint_ns for m in range(span.size)]


def ring_ends_ns(
    phase_type: int, span: Span, size_bytes: int, t_red: ReductionCost, inits_ns: Sequence[int]
) -> list[int]:
    """Each member's end of one ring phase (``Ring.cc``) from each member's start, ns."""
    n, d = span.size, span.endpoint_ns
    steps, message, reduced = ring_steps(phase_type, n, size_bytes)
    links_ns = [span.delay(p, (p + 1) % n, message) for p in range(n)]
    reduction_ns = t_red(message) if reduced else 0
    if n >= NUMPY_MEMBERS:
        import numpy as np

        sends = np.asarray(inits_ns, dtype=np.int64) + d
        into = np.roll(np.asarray(links_ns, dtype=np.int64), 1)  # into[p]: the link p-1 -> p
        for k in range(steps):
            sends = np.maximum(np.roll(sends, 1) + into, sends) + (d + (reduction_ns if k < reduced else 0))
        return [int(t) for t in sends]
    into_list = [links_ns[p - 1] for p in range(n)]
    sends_list = [t + d for t in inits_ns]
    for k in range(steps):
        cost = d + (reduction_ns if k < reduced else 0)
        sends_list = [max(sends_list[p - 1] + into_list[p], sends_list[p]) + cost for p in range(n)]
    return sends_list


def _halving_doubling_ends_ns(
    phase_type: int, span: Span, size_bytes: int, t_red: ReductionCost, inits_ns: Sequence[int]
) -> list[int]:
    d = span.endpoint_ns
    sends = [t + d for t in inits_ns]
    for partners, message, reduction_ns in halving_doubling_steps(phase_type, span.size, size_bytes, t_red):
        sends = [max(sends[q] + span.delay(q, p, message), sends[p]) + d + reduction_ns for p, q in enumerate(partners)]
    return sends


def tree_ends_ns(span: Span, size_bytes: int, root_max: bool, reduction_ns: int, inits_ns: Sequence[int]) -> list[int]:
    """Each member's end of one chunk on one of doubleBinaryTree's trees, from each member's start, ns."""
    tree = binary_tree(span.size, root_max)
    d = span.endpoint_ns
    n = span.size
    children = [[c for c in (tree.left[m], tree.right[m]) if c >= 0] for m in range(n)]
    root = tree.parent.index(-1)
    up = [0] * n  # when each member sends its subtree's sum up (the root: has it all)
    order: list[int] = []  # parents before children
    stack = [root]
    while stack:
        m = stack.pop()
        order.append(m)
        stack.extend(children[m])
    for m in reversed(order):
        if children[m]:
            up[m] = max(max(up[c] + span.delay(c, m, size_bytes), inits_ns[m]) for c in children[m]) + d + reduction_ns
        else:
            up[m] = inits_ns[m] + d
    ends = [0] * n
    ends[root] = up[root]
    for m in order:
        parent = tree.parent[m]
        if parent < 0:
            continue
        received = max(ends[parent] + span.delay(parent, m, size_bytes), up[m])
        ends[m] = received + d + (reduction_ns if children[m] else 0)
    return ends
