"""ASTRA-sim's native collective algorithms: the time of one phase of one chunk, in integer ns.

The rules, as ASTRA-sim's source runs them, are described in :mod:`chakra.sim.collectives`; here the
code. A phase runs over a :class:`Span`: the NPUs of one network dimension (positions = that
dimension's coordinates), all NPUs in id order (``one*`` algorithms) or a subgroup's sorted members.

* ``ring`` and ``halvingDoubling`` are closed forms (every member does the same steps);
* ``direct`` replays ASTRA-sim's ``AllToAll`` state machine for one member (:class:`DirectMember`),
  which the span's symmetry makes stand for all, or for every member when they start apart
  (:func:`direct_member_ends_ns`);
* ``doubleBinaryTree`` replays ``DoubleBinaryTreeAllReduce`` on every member (:class:`TreeReplay`), since
  members differ by their place in the tree; it is the one algorithm whose members finish at
  different times (:func:`tree_member_times_ns`).

Event order in the replays follows ASTRA-sim's: a system event joins its NPU's bucket of that time
(one entry of the global queue, made by the first event of that time, ``Sys::try_register_event``);
a message arrival is its own entry, queued when the message is sent; a receive posted after its
message arrived runs as a new entry of the current time (``CommonNetworkApi::sim_recv``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from chakra.sim.config import NetworkConfig
from chakra.sim.events import Call, SystemEvents
from chakra.sim.network import dimension_hops, hop_delay_ns, message_delay_ns

#: Algorithm names of the system configuration (§4.1), without the ``one`` prefix of flat variants.
RING = "ring"
DIRECT = "direct"
HALVING_DOUBLING = "halvingDoubling"
DOUBLE_BINARY_TREE = "doubleBinaryTree"
FLAT_PREFIX = "one"
#: Phase type -> its name, for messages.
PHASE_NAMES: dict[int, str] = {
    ALL_REDUCE: "ALL_REDUCE",
    REDUCE_SCATTER: "REDUCE_SCATTER",
    ALL_GATHER: "ALL_GATHER",
    ALL_TO_ALL: "ALL_TO_ALL",
}

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


# --- the NPUs one phase runs over ---------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """The NPUs of one phase, as positions ``0 … n−1`` in ring order, and how a message between two costs.

    ``symmetric``: every position sees the same delays to its relative peers (a network dimension,
    or all NPUs of a network whose dimensions are each vertex-transitive), so position 0 speaks for all.
    ``local``: a communicator subgroup's members (ASTRA-sim's ``RingTopology::Dimension::Local``).
    """

    size: int
    endpoint_ns: int
    delay: Callable[[int, int, int], int]  # (from position, to position, size_bytes) -> ns
    symmetric: bool
    local: bool = False

    def sources(self) -> range:
        return range(1) if self.symmetric else range(self.size)


def dimension_span(network: NetworkConfig, dim: int, endpoint_ns: int) -> Span:
    def delay(a: int, b: int, size_bytes: int) -> int:
        return hop_delay_ns(network, dim, dimension_hops(network, dim, a, b), size_bytes)

    return Span(network.npus_count[dim], endpoint_ns, delay, symmetric=True)


def npu_span(
    network: NetworkConfig, npus: tuple[int, ...], endpoint_ns: int, symmetric: bool, local: bool = False
) -> Span:
    def delay(a: int, b: int, size_bytes: int) -> int:
        return message_delay_ns(network, npus[a], npus[b], size_bytes)

    return Span(len(npus), endpoint_ns, delay, symmetric, local)


def phase_ns(phase_type: int, algorithm: Algorithm, span: Span, size_bytes: int, t_red: ReductionCost) -> int:
    """Chunk time in ns of one AR/RS/AG/A2A phase with ``algorithm`` (its slowest member's, for a tree).

    Raises :class:`ChakraInputError` where ASTRA-sim cannot run it (halvingDoubling all-to-all; halvingDoubling
    or doubleBinaryTree on NPU counts where it never finishes or crashes).
    """
    if algorithm.name == DIRECT:
        return _direct_phase_ns(phase_type, span, size_bytes, algorithm.window, t_red)
    if algorithm.name == HALVING_DOUBLING:
        return _halving_doubling_phase_ns(phase_type, span, size_bytes, t_red)
    if algorithm.name == DOUBLE_BINARY_TREE:
        return max(tree_member_times_ns(span, size_bytes, 1, 1, 0, t_red))
    return ring_phase_ns(phase_type, span, size_bytes, t_red)


def size_after(phase_type: int, algorithm: Algorithm, size_bytes: int, n: int) -> int:
    """The data size a phase hands to the next: RS divides by ``n``, AG multiplies; a tree keeps it
    (``DoubleBinaryTreeAllReduce`` runs an all-reduce whatever the phase type)."""
    if algorithm.name == DOUBLE_BINARY_TREE:
        return size_bytes
    if phase_type == REDUCE_SCATTER:
        return size_bytes // n
    if phase_type == ALL_GATHER:
        return size_bytes * n
    return size_bytes


# --- ring (Ring.cc) -----------------------------------------------------------------------------


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


def ring_pipelined_ns(
    phase_type: int, span: Span, size_bytes: int, t_red: ReductionCost, waves: int
) -> tuple[int, ...]:
    """``waves`` chunks of a one-phase ring collective, one after the other on every member: the time
    of each member (by position in the ring), ns.

    Each member starts its next chunk the moment its own previous one ends, so a member ends with the
    chain of ``waves x steps`` consecutive links that arrive at it, not ``waves`` times the slowest
    chain of one chunk: on a ring of unequal links (a subgroup whose closing link crosses several hops)
    the slow link is crossed once a lap, not once a chunk, and members end apart by where the laps'
    remainder falls (measured against ASTRA-sim's binary: {0,1,2,3} on an 8-ring, 1 MiB all-reduce,
    49,001 ns). With equal links every member takes ``waves`` times one chunk's time.
    """
    n, d = span.size, span.endpoint_ns
    steps, message, reduced = ring_steps(phase_type, n, size_bytes)
    links_ns = [span.delay(p, (p + 1) % n, message) for p in range(n)]
    uniform_ns = waves * (d + steps * d + (reduced * t_red(message) if reduced else 0))
    laps, rest = divmod(waves * steps, n)
    lap_ns = sum(links_ns)
    # member p receives over link p-1: its chain is the `rest` links ending there, after whole laps
    return tuple(uniform_ns + laps * lap_ns + sum(links_ns[(p - 1 - j) % n] for j in range(rest)) for p in range(n))


def ring_steps(phase_type: int, n: int, size_bytes: int) -> tuple[int, int, int]:
    """Steps, message bytes and reduced steps of one ring phase over ``n`` members."""
    piece = size_bytes // n
    if phase_type == ALL_REDUCE:
        return 2 * (n - 1), piece, n - 1
    if phase_type == REDUCE_SCATTER:
        return n - 1, piece, n - 1
    if phase_type == ALL_GATHER:
        return n - 1, size_bytes, 0
    return n * (n - 1) // 2, piece, 0  # ALL_TO_ALL


def ring_phase_ns(phase_type: int, span: Span, size_bytes: int, t_red: ReductionCost) -> int:
    n, d = span.size, span.endpoint_ns
    steps, message, reduced = ring_steps(phase_type, n, size_bytes)
    links_ns = [span.delay(p, (p + 1) % n, message) for p in range(n)]
    reduction_ns = reduced * t_red(message) if reduced else 0
    return d + steps * d + reduction_ns + _longest_chain_ns(links_ns, steps)


# --- direct (AllToAll.cc over Ring.cc) ----------------------------------------------------------


def _direct_phase_ns(phase_type: int, span: Span, size_bytes: int, window: int | None, t_red: ReductionCost) -> int:
    """One member's chunk time under ASTRA-sim's ``AllToAll`` state machine (``direct``).

    Every member runs the same schedule (the span is symmetric; otherwise each offset is priced at
    its slowest pair), so the message a member receives from ``p − k`` arrives when its own message
    to ``p + k`` does.
    """
    n = span.size
    message = size_bytes if phase_type == ALL_GATHER else size_bytes // n
    offset_ns = [0] + [max(span.delay(p, (p + k) % n, message) for p in span.sources()) for k in range(1, n)]
    reduction_ns = t_red(message) if phase_type in (ALL_REDUCE, REDUCE_SCATTER) else 0
    return DirectMember(phase_type, n, window, span.endpoint_ns, reduction_ns, offset_ns, local=span.local).run()


class DirectMember:
    """ASTRA-sim's ``AllToAll`` for one member (names after ``Ring.cc``/``AllToAll.cc``).

    ``P`` packets (the window; ``n − 1`` without one) are injected at once (``StreamInit``); each
    crosses the memory bus (``d``) and, if it came from the network and the phase reduces, is reduced
    (``t_red``) before the member may send (``General``). Packets come in batches of ``P`` that
    alternate between NPU→MA (``zero_latency_packets``: never reduced) and MA→NPU
    (``non_zero_latency_packets``: reduced for RS, and for AR when ``toggle`` is set, i.e. every other
    batch). Destinations rotate ``+1, +2, …, +(n−1)``. An AR sends its first ``n − 1`` messages as
    packets free up, then holds every send until all ``n − 1`` messages arrived (``middle_point``)
    and sends one message per freed packet. The phase ends when every send is done and ``P`` packets
    are free (``iteratable``).
    """

    def __init__(
        self,
        phase_type: int,
        n: int,
        window: int | None,
        d: int,
        t_red: int,
        offset_ns: list[int],
        events: SystemEvents | None = None,
        npu: int = 0,
        local: bool = False,
    ):
        self.phase_type, self.n, self.d, self.t_red, self.offset_ns = phase_type, n, d, t_red, offset_ns
        self.npu = npu
        self.parallel = n - 1 if window is None else min(window, n - 1)
        # AllToAll::get_non_zero_latency_packets: on a subgroup's Local ring the MA->NPU batch is
        # (n - 1) windows long, elsewhere one window
        self.non_zero_batch = (n - 1) * self.parallel if local else self.parallel
        self.stream_count = 2 * (n - 1) if phase_type == ALL_REDUCE else n - 1
        self.middle_point = n - 1
        self.zero = self.non_zero = self.free = self.received = 0
        self.toggle = False
        self.receiver = 1  # offset of the next packet's destination
        self.packets: deque[int] = deque()  # destination offsets, in send order
        self.events = events if events is not None else SystemEvents()
        self.end_ns = -1

    def run(self) -> int:
        self.start(0)
        self.events.run()
        return self.end_ns

    def start(self, now: int) -> None:
        """``StreamInit``: the window's packets enter the memory bus."""
        for _ in range(self.parallel):
            self.insert(now)

    def transmit(self, now: int, offset: int) -> None:
        """Send the message to ``+offset``; here (one member standing for all) the message this member
        receives from ``−offset`` arrives with it."""
        self.events.entry(now + self.offset_ns[offset], self.arrive)

    def arrive(self, now: int) -> None:
        self.received += 1
        self.insert(now)

    def insert(self, now: int) -> None:
        """``insert_packet``: queue the next packet and send its bundle over the memory bus."""
        if self.zero == 0 and self.non_zero == 0:
            self.zero, self.non_zero = self.parallel, self.non_zero_batch
            self.toggle = not self.toggle
        self.packets.append(self.receiver)
        self.receiver = self.receiver % (self.n - 1) + 1
        if self.zero > 0:
            self.zero -= 1
            reduce = False
        else:
            self.non_zero -= 1
            reduce = self.phase_type == REDUCE_SCATTER or (self.phase_type == ALL_REDUCE and self.toggle)
        if reduce:
            self.events.at(self.npu, now + self.d, partial(self.events.later, self.npu, self.t_red, self.general))
        else:
            self.events.at(self.npu, now + self.d, self.general)

    def ready(self, now: int) -> bool:
        """Send the first queued packet if one is free; whether it did."""
        if not self.packets or self.stream_count == 0 or self.free == 0:
            return False
        self.transmit(now, self.packets.popleft())
        self.stream_count -= 1
        self.free -= 1
        return True

    def general(self, now: int) -> None:
        """A bundle is through the memory bus (``run(General)``)."""
        self.free += 1
        if self.phase_type == ALL_REDUCE and self.stream_count <= self.middle_point:
            if self.received < self.middle_point:
                return
            for _ in range(self.parallel):
                if not self.ready(now):
                    break  # nothing changes until the next event
        else:
            self.ready(now)
        if self.stream_count == 0 and self.free == self.parallel and self.end_ns < 0:
            self.end_ns = now


def direct_member_ends_ns(
    phase_type: int, span: Span, size_bytes: int, window: int | None, t_red: ReductionCost, inits_ns: Sequence[int]
) -> list[int]:
    """Each member's end, ns, of one ``direct`` phase whose members start at ``inits_ns`` (by position):
    every member's ``AllToAll`` state machine at once, the ``k``-th message of ``p`` going to
    ``p + o`` and its receive posted from ``p − o`` (``o`` rotating ``1 … n−1``), matched in order per
    pair of members; a message that arrived before its receive was posted is taken when it is."""
    n = span.size
    message = size_bytes if phase_type == ALL_GATHER else size_bytes // n
    reduction_ns = t_red(message) if phase_type in (ALL_REDUCE, REDUCE_SCATTER) else 0
    events = SystemEvents()
    arrived: dict[tuple[int, int], int] = {}  # (src, dst) -> messages there before their receive
    posted: dict[tuple[int, int], int] = {}  # (src, dst) -> receives posted before their message
    members: list[DirectMember] = []

    def deliver(src: int, dst: int) -> Call:
        def arrival(now: int) -> None:
            if posted.get((src, dst), 0):
                posted[(src, dst)] -= 1
                members[dst].arrive(now)
            else:
                arrived[(src, dst)] = arrived.get((src, dst), 0) + 1

        return arrival

    class Member(DirectMember):
        def transmit(self, now: int, offset: int) -> None:
            p = self.npu
            dst, src = (p + offset) % n, (p - offset) % n
            events.entry(now + span.delay(p, dst, message), deliver(p, dst))
            if arrived.get((src, p), 0):
                arrived[(src, p)] -= 1
                events.entry(now, self.arrive)
            else:
                posted[(src, p)] = posted.get((src, p), 0) + 1

    for p in range(n):
        member = Member(phase_type, n, window, span.endpoint_ns, reduction_ns, [], events, p, span.local)
        members.append(member)
        events.entry(inits_ns[p], member.start)
    events.run()
    return [member.end_ns for member in members]


# --- halvingDoubling (HalvingDoubling.cc) -------------------------------------------------------


def _halving_doubling_partner(p: int, distance: int, n: int) -> int:
    """``HalvingDoubling::specify_direction``: ``p + distance`` when ``p / distance`` is even, else ``p − distance``."""
    return (p + distance) % n if (p // distance) % 2 == 0 else (p - distance) % n


def _never_finishes(algorithm: str, phase_type: int, n: int, why: str) -> ChakraInputError:
    return ChakraInputError(
        f"{algorithm} {PHASE_NAMES[phase_type]} over {n} NPUs: {why}",
        hint="use ring or direct for this dimension, or a power-of-two npus_count",
    )


def halving_doubling_steps(
    phase_type: int, n: int, size_bytes: int, t_red: ReductionCost
) -> list[tuple[list[int], int, int]]:
    """The steps of ASTRA-sim's ``HalvingDoubling`` over ``n`` members (``L = floor(log2 n)`` steps; see
    collectives): each step's partner of every position, message bytes and reduction ns.

    Raises :class:`ChakraInputError` where ASTRA-sim cannot run it (all-to-all; pairs that do not match).
    """
    if phase_type == ALL_TO_ALL:
        raise ChakraInputError(
            "halvingDoubling cannot run ALL_TO_ALL collectives: ASTRA-sim exits with "
            "'unknown communication type for HalvingDoubling collective algorithm'",
            hint="set all-to-all-implementation to ring or direct",
        )
    count = n.bit_length() - 1
    plan: list[tuple[int, int, int]] = []  # (distance, message bytes, reduction ns)
    if phase_type == ALL_GATHER:
        distance = n // 2
        for s in range(count):
            plan.append((distance, size_bytes << s, 0))
            distance //= 2
    elif n & (n - 1):
        why = (
            "ASTRA-sim pairs NPU p with p ± 2^k, which needs a power-of-two NPU count; with any other count "
            "some NPUs never finish"
        )
        raise _never_finishes(HALVING_DOUBLING, phase_type, n, why)
    else:
        plan = [(1 << s, size_bytes >> (s + 1), t_red(size_bytes >> (s + 1)) if s else 0) for s in range(count)]
        if phase_type == ALL_REDUCE:
            base = size_bytes >> (count + 1)
            plan += [(n >> k, base << k, 0) for k in range(1, count + 1)]
    steps = []
    for distance, message, reduction_ns in plan:
        partners = [_halving_doubling_partner(p, distance, n) for p in range(n)]
        if any(partners[q] != p for p, q in enumerate(partners)):
            why = (
                f"at distance {distance} ASTRA-sim's pairs do not match (an NPU waits for a partner that sends "
                "elsewhere), so some NPUs never finish"
            )
            raise _never_finishes(HALVING_DOUBLING, phase_type, n, why)
        steps.append((partners, message, reduction_ns))
    return steps


def _halving_doubling_phase_ns(phase_type: int, span: Span, size_bytes: int, t_red: ReductionCost) -> int:
    """Chunk time of ASTRA-sim's ``HalvingDoubling``: each step the slowest pair's message, then ``d``."""
    total_ns = span.endpoint_ns
    for partners, message, reduction_ns in halving_doubling_steps(phase_type, span.size, size_bytes, t_red):
        total_ns += max(span.delay(p, q, message) for p, q in enumerate(partners)) + span.endpoint_ns + reduction_ns
    return total_ns


# --- doubleBinaryTree (DoubleBinaryTreeAllReduce.cc, BinaryTree.cc) -----------------------------


@dataclass(frozen=True)
class _Tree:
    """One binary tree over positions ``0 … n−1``: parent and children (−1 where there is none)."""

    parent: list[int]
    left: list[int]
    right: list[int]


def binary_tree(n: int, root_max: bool) -> _Tree:
    """``BinaryTree``: a virtual top over a perfect subtree of ``n − 1`` nodes (its left child for
    ``RootMax``, its right for ``RootMin``), numbered in order (left subtree, node, right subtree).
    ``RootMax``: the top is position ``n − 1``; ``RootMin``: position 0. ``n`` is a power of two."""
    parent, left, right = [-1] * n, [-1] * n, [-1] * n

    def number(first: int, size: int, above: int, side: list[int]) -> None:
        """The subtree of ``size`` nodes numbered from ``first``, hanging on ``above`` (its ``side`` child)."""
        if size == 0:
            return
        middle = first + size // 2
        parent[middle] = above
        side[above] = middle
        number(first, size // 2, middle, left)
        number(middle + 1, size // 2, middle, right)

    if root_max:
        number(0, n - 1, n - 1, left)
    else:
        number(1, n - 1, 0, right)
    return _Tree(parent, left, right)


def tree_member_times_ns(
    span: Span, size_bytes: int, streams: int, active: int, first_tree: int, t_red: ReductionCost
) -> list[int]:
    """Each position's time, from the common start, to finish ``streams`` chunks of ``size_bytes`` with
    ASTRA-sim's ``doubleBinaryTree``, ``active`` chunks at a time per NPU; chunk ``c`` uses the
    ``RootMax`` tree when ``first_tree + c`` is even, else ``RootMin``."""
    n = span.size
    if n & (n - 1):
        why = "ASTRA-sim's binary tree holds a power-of-two count of NPUs and crashes on the others"
        raise _never_finishes(DOUBLE_BINARY_TREE, ALL_REDUCE, n, why)
    return TreeReplay(span, size_bytes, streams, active, first_tree, t_red(size_bytes)).run()


class TreeReplay:
    """Every member's chunks of ASTRA-sim's ``DoubleBinaryTreeAllReduce``, event by event.

    Per chunk, every message is the whole chunk ``D``. A leaf crosses the bus (``d``), sends ``D`` to
    its parent, waits for the parent's ``D``, crosses the bus (``d``) and ends. An inner node waits
    for its two children; each arrival is reduced (``d + t_red``); after the second reduction it sends
    to its parent, and when the parent's ``D`` arrives it reduces it (``d + t_red``), sends it to both
    children and ends at once. The root waits for its only child, reduces (``d + t_red``), sends it
    back and ends. A member starts its next chunk (``active`` at a time) the moment one ends; a
    message that arrived before its receive was posted is taken when it is.
    """

    def __init__(self, span: Span, size: int, streams: int, active: int, first_tree: int, t_red: int):
        self.span, self.size, self.d, self.t_red = span, size, span.endpoint_ns, t_red
        self.streams, self.active = streams, active
        self.trees = [binary_tree(span.size, root_max=True), binary_tree(span.size, root_max=False)]
        self.first_tree = first_tree
        self.events = SystemEvents()
        self.now = 0
        # (src, dst, chunk) -> the receive's callback (posted first) or None (the message arrived first)
        self.messages: dict[tuple[int, int, int], Callable[[], None] | None] = {}
        self.next_chunk = [0] * span.size
        self.done = [0] * span.size
        self.finish = [0] * span.size

    def run(self) -> list[int]:
        for member in range(self.span.size):
            for _ in range(min(self.active, self.streams)):
                self.start(member)
        self.events.run()
        return self.finish

    def start(self, member: int) -> None:
        """The member's next chunk, on the tree the alternation gives it."""
        chunk = self.next_chunk[member]
        self.next_chunk[member] += 1
        self.begin(member, chunk, root_max=(self.first_tree + chunk) % 2 == 0)

    def begin(self, member: int, chunk: int, root_max: bool) -> None:
        """The member's part of ``chunk`` on the ``RootMax`` or ``RootMin`` tree: its role decides the steps."""
        tree = self.trees[0 if root_max else 1]
        up, children = tree.parent[member], [c for c in (tree.left[member], tree.right[member]) if c >= 0]

        def down() -> None:  # send the result to the children and end (no wait for their arrival)
            for child in children:
                self.send(member, child, chunk)
            self.end(member, chunk)

        def from_parent() -> None:  # the parent's result arrived
            if children:
                self.reduce(member, down)
            else:
                self.bus(member, lambda: self.end(member, chunk))

        def up_and_wait() -> None:
            self.send(member, up, chunk)
            self.receive(member, up, chunk, from_parent)

        if not children:  # a leaf
            self.bus(member, up_and_wait)
            return
        reduced = [0]

        def after_reduction() -> None:  # the last child's reduction sends up (the root: back down)
            reduced[0] += 1
            if reduced[0] == len(children):
                if up < 0:
                    down()
                else:
                    up_and_wait()

        for child in children:
            self.receive(member, child, chunk, lambda: self.reduce(member, after_reduction))

    def end(self, member: int, chunk: int) -> None:
        """The member's part of ``chunk`` ended: its next chunk starts."""
        self.done[member] += 1
        if self.done[member] == self.streams:
            self.finish[member] = self.now
        if self.next_chunk[member] < self.streams:
            self.start(member)

    def bus(self, member: int, then: Callable[[], None]) -> None:
        """A packet bundle through the memory bus: ``d``."""
        self.events.at(member, self.now + self.d, lambda now: self._call(now, then))

    def reduce(self, member: int, then: Callable[[], None]) -> None:
        """A bundle that needs processing: ``d``, then ``t_red`` (``PacketBundle::call``)."""
        self.events.at(
            member,
            self.now + self.d,
            lambda now: self.events.at(member, now + self.t_red, lambda later: self._call(later, then)),
        )

    def _call(self, now: int, then: Callable[[], None]) -> None:
        self.now = now
        then()

    def send(self, src: int, dst: int, chunk: int) -> None:
        key = (src, dst, chunk)

        def arrive(now: int) -> None:
            self.now = now
            waiting = self.messages.pop(key, None)
            if waiting is None:
                self.messages[key] = None  # taken when the receive is posted
            else:
                waiting()

        self.carry(src, dst, arrive)

    def carry(self, src: int, dst: int, arrive: Callable[[int], None]) -> None:
        """Carry one message from member ``src`` to member ``dst``: ``arrive(t_ns)`` when it has
        arrived, here the span's delay after now."""
        self.events.entry(self.now + self.span.delay(src, dst, self.size), arrive)

    def receive(self, dst: int, src: int, chunk: int, then: Callable[[], None]) -> None:
        key = (src, dst, chunk)
        if key in self.messages and self.messages[key] is None:
            del self.messages[key]
            self.events.entry(self.now, lambda now: self._call(now, then))
        else:
            self.messages[key] = then
