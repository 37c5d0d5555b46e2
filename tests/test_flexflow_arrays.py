"""The FlexFlow front end's passes over arrays (the transfers' hops and ends, the classes of tasks
joined by direct edges, the transfers each class exchanges) find what a loop over every task and
edge finds, on any small task graph: several hops, several tasks at a transfer's ends, a class
exchanging with itself, unnamed tasks; a graph in which two hops follow one is refused."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chakra.errors import ChakraInputError
from chakra.flexflow.dot import parse_dot
from chakra.flexflow.placement import _classes
from chakra.flexflow.taskgraph import TaskGraph, task_graph_of
from chakra.flexflow.transfers import find_chains


@st.composite
def _task_graphs(draw) -> TaskGraph:
    """A FlexFlow task graph of up to 14 tasks: compute tasks of a few operators (or unnamed
    barriers) and comm tasks of two segment names; edges only forward, so it is acyclic."""
    count = draw(st.integers(2, 14))
    lines = []
    for i in range(count):
        start = draw(st.integers(0, 5))
        end = start + draw(st.integers(0, 3))
        kind = draw(st.sampled_from(["Forward", "Backward", "Barrier", "Comm", "Comm"]))
        name = {"Barrier": "", "Comm": draw(st.sampled_from(["seg 0", "seg 1"]))}.get(kind, draw(st.sampled_from("AB")))
        named = f"{name} | " if name else ""
        lines.append(f'node{i} [label="{{ {named}{kind} | {{ {start} | {end} }} }}"];')
    pairs = st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)).filter(lambda p: p[0] < p[1])
    lines += [f"node{a} -> node{b};" for a, b in draw(st.lists(pairs, max_size=3 * count))]
    return task_graph_of(parse_dot("digraph taskgraph {\n" + "\n".join(lines) + "\n}\n", "g.dot"))


def _neighbours(graph: TaskGraph) -> tuple[list[list[int]], list[list[int]]]:
    before: list[list[int]] = [[] for _ in range(len(graph))]
    after: list[list[int]] = [[] for _ in range(len(graph))]
    for a, b in zip(graph.sources.tolist(), graph.targets.tolist(), strict=True):
        before[b].append(a)
        after[a].append(b)
    return before, after


def _chains_by_loop(graph: TaskGraph) -> list[list[int]]:
    """Comm tasks of one name following each other, from a hop with no such predecessor."""
    before, after = _neighbours(graph)
    comm_name = [n if comm else None for n, comm in zip(graph.name, graph.is_comm, strict=True)]
    chains = []
    for task, name in enumerate(comm_name):
        if name is None or name in [comm_name[p] for p in before[task]]:
            continue
        chain = [task]
        while name in [comm_name[s] for s in after[chain[-1]]]:
            chain.append(next(s for s in after[chain[-1]] if comm_name[s] == name))
        chains.append(chain)
    return sorted(chains, key=lambda c: (graph.start_ns[c[0]], c[0]))


def _stray_hops(graph: TaskGraph, chains: list[list[int]]) -> bool:
    """Whether a comm task is in no chain (a later hop of a hop that another hop follows first)."""
    return sum(graph.is_comm) > len({hop for chain in chains for hop in chain})


@settings(max_examples=300, deadline=None)
@given(graph=_task_graphs())
def test_transfers_and_the_tasks_at_their_ends_are_what_a_loop_over_the_tasks_finds(graph):
    before, after = _neighbours(graph)
    computes = [not comm for comm in graph.is_comm]
    expected = _chains_by_loop(graph)
    if _stray_hops(graph, expected):  # a hop two hops follow: the file is refused
        with pytest.raises(ChakraInputError, match="follows a hop of its transfer"):
            find_chains(graph)
        return
    chains = find_chains(graph)
    assert chains.hops == expected
    ends = [([p for p in before[c[0]] if computes[p]], [s for s in after[c[-1]] if computes[s]]) for c in expected]
    for rows, side in ((chains.before, 0), (chains.after, 1)):
        transfer, task = rows
        assert [task[transfer == k].tolist() for k in range(len(expected))] == [e[side] for e in ends]


def _classes_by_loop(graph: TaskGraph) -> list[list[int]]:
    """Union-find over the direct edges, the classes in the order of their first task in time."""
    parent = list(range(len(graph)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    computes = [not comm for comm in graph.is_comm]
    for a, b in zip(graph.sources.tolist(), graph.targets.tolist(), strict=True):
        if computes[a] and computes[b]:
            parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for task in range(len(graph)):
        if computes[task]:
            groups.setdefault(root(task), []).append(task)
    return sorted(groups.values(), key=lambda m: min((graph.start_ns[i], i) for i in m))


@settings(max_examples=300, deadline=None)
@given(graph=_task_graphs())
def test_classes_and_the_transfers_they_exchange_are_what_a_loop_over_the_edges_finds(graph):
    assume(not _stray_hops(graph, _chains_by_loop(graph)))
    chains = find_chains(graph)
    classes = _classes(graph, {}, 1, chains)
    expected = _classes_by_loop(graph)
    assert [c.members for c in classes] == expected
    class_of = {task: number for number, members in enumerate(expected) for task in members}
    before, after = _neighbours(graph)
    exchanged: list[list[tuple]] = [[] for _ in expected]
    for chain in chains.hops:
        senders = {class_of[p] for p in before[chain[0]] if p in class_of}
        receivers = {class_of[s] for s in after[chain[-1]] if s in class_of}
        span = (graph.start_ns[chain[0]], graph.start_ns[chain[-1]] + graph.dur_ns[chain[-1]])
        for a in senders:
            for b in receivers:
                if a != b:
                    exchanged[a].append((b, span, True))
                    exchanged[b].append((a, span, False))
    assert [c.transfers for c in classes] == exchanged
    for cls in classes:
        assert cls.by_peer == {
            peer: [(span, sends) for other, span, sends in cls.transfers if other == peer]
            for peer in dict.fromkeys(other for other, _, _ in cls.transfers)
        }
