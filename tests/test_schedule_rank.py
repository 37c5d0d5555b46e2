"""chakra.schedule.rank: one rank scheduled with its recorded durations (the fidelity check)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import chain, make_node, write_et
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra.graph import CycleError
from chakra.schedule.rank import schedule_file, schedule_nodes
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, METADATA_NODE, Node


def cpu(id: int, tid: int, dur: int, deps: list[int] | None = None, **fields: int) -> Node:
    """A host op on thread ``tid`` lasting ``dur`` µs."""
    return make_node(id, data_deps=deps or [], duration_micros=dur, is_cpu_op=True, tid=tid, **fields)


def kernel(id: int, stream: int, dur: int, deps: list[int] | None = None, **fields: int) -> Node:
    """A device kernel on ``stream`` lasting ``dur`` µs."""
    return make_node(id, data_deps=deps or [], duration_micros=dur, is_cpu_op=False, stream=stream, **fields)


def test_a_serial_chain_takes_the_sum_of_its_durations():
    result = schedule_nodes(chain(4, duration_micros=5))
    assert result.predicted_span_us == 20
    assert result.start_us.tolist() == [0, 5, 10, 15]
    assert result.end_us.tolist() == [5, 10, 15, 20]


def test_independent_nodes_on_different_threads_overlap():
    result = schedule_nodes([cpu(0, tid=1, dur=10), cpu(1, tid=2, dur=30)])
    assert result.predicted_span_us == 30
    assert result.resources == 2


def test_independent_nodes_on_the_same_thread_serialize():
    result = schedule_nodes([cpu(0, tid=1, dur=10), cpu(1, tid=1, dur=30)])
    assert result.predicted_span_us == 40
    assert result.resources == 1


def test_a_cpu_op_without_tid_runs_on_thread_zero():
    nodes = [make_node(0, duration_micros=10, is_cpu_op=True), cpu(1, tid=0, dur=10)]
    assert schedule_nodes(nodes).predicted_span_us == 20


def test_a_cpu_node_and_a_kernel_on_a_stream_overlap():
    result = schedule_nodes([cpu(0, tid=1, dur=10), kernel(1, stream=7, dur=25)])
    assert result.predicted_span_us == 25


def test_two_kernels_on_the_same_stream_serialize_without_deps():
    result = schedule_nodes([kernel(0, stream=7, dur=10), kernel(1, stream=7, dur=25)])
    assert result.predicted_span_us == 35


def test_device_work_without_stream_but_with_tid_occupies_that_thread():
    gloo_work = make_node(1, type=COMM_COLL_NODE, duration_micros=20, is_cpu_op=False, tid=3)
    assert schedule_nodes([cpu(0, tid=3, dur=10), gloo_work]).predicted_span_us == 30


def test_nodes_without_thread_or_stream_are_not_limited_by_a_resource():
    nodes = [make_node(i, type=METADATA_NODE, duration_micros=10) for i in range(3)]
    result = schedule_nodes(nodes)
    assert result.predicted_span_us == 10
    assert result.resources == 0


def test_a_node_waits_for_its_slowest_parent():
    nodes = [cpu(0, tid=1, dur=10), cpu(1, tid=2, dur=40), kernel(2, stream=7, dur=5, deps=[0, 1])]
    result = schedule_nodes(nodes)
    assert result.start_us[2] == 40
    assert result.predicted_span_us == 45


def test_ctrl_deps_gate_like_data_deps():
    nodes = [cpu(0, tid=1, dur=10), make_node(1, ctrl_deps=[0], duration_micros=5, is_cpu_op=True, tid=2)]
    result = schedule_nodes(nodes)
    assert result.start_us[1] == 10
    assert result.predicted_span_us == 15


def test_a_free_thread_takes_the_ready_node_recorded_first():
    # 1 and 2 both become ready when 0 ends; 2 was recorded earlier, so it runs first despite its larger id
    nodes = [
        cpu(0, tid=1, dur=10, start_time_micros=100),
        cpu(1, tid=1, dur=5, deps=[0], start_time_micros=130),
        cpu(2, tid=1, dur=5, deps=[0], start_time_micros=115),
    ]
    result = schedule_nodes(nodes)
    assert result.start_us.tolist() == [0, 15, 10]


def test_nodes_ready_at_one_instant_are_all_considered_before_a_thread_picks():
    # 3 (recorded first) is released by 1 and 4 by 2, both at t=10: 3 must run first
    nodes = [
        cpu(1, tid=1, dur=10, start_time_micros=100),
        cpu(2, tid=2, dur=10, start_time_micros=100),
        cpu(4, tid=3, dur=5, deps=[1], start_time_micros=120),
        cpu(3, tid=3, dur=5, deps=[2], start_time_micros=110),
    ]
    result = schedule_nodes(nodes)
    assert result.start_us.tolist() == [0, 0, 15, 10]


def test_nodes_without_a_recorded_start_run_after_timed_ones_in_the_order_they_became_ready():
    nodes = [
        cpu(0, tid=1, dur=20, start_time_micros=100),
        cpu(1, tid=2, dur=5),
        cpu(2, tid=2, dur=8),
        cpu(9, tid=1, dur=1, deps=[2]),  # untimed, ready at 13
        cpu(8, tid=1, dur=1, deps=[1]),  # untimed, ready at 5: before 9 despite the larger id
        cpu(7, tid=1, dur=1, deps=[1], start_time_micros=500),  # timed: first of the three
    ]
    assert schedule_nodes(nodes).start_us.tolist() == [0, 0, 5, 22, 21, 20]


def test_measured_span_runs_from_the_first_recorded_start_to_the_last_recorded_end():
    nodes = [
        cpu(0, tid=1, dur=10, start_time_micros=1000),
        cpu(1, tid=2, dur=50, start_time_micros=1005),
        make_node(2, duration_micros=500),  # no start time: not part of the measurement
    ]
    assert schedule_nodes(nodes).measured_span_us == 55


def test_measured_span_is_none_without_start_times():
    result = schedule_nodes(chain(3))
    assert result.measured_span_us is None
    assert result.error is None


def test_error_is_relative_to_the_measured_span():
    # measured 50 µs (with an idle gap), the replay packs the chain into 40 µs
    nodes = [
        cpu(0, tid=1, dur=20, start_time_micros=1000),
        cpu(1, tid=1, dur=20, deps=[0], start_time_micros=1030),
    ]
    result = schedule_nodes(nodes)
    assert (result.predicted_span_us, result.measured_span_us) == (40, 50)
    assert result.error == pytest.approx(-0.2)
    assert result.to_dict()["error"] == pytest.approx(-0.2)


def test_duration_ns_attribute_overrides_duration_micros():
    nodes = [make_node(0, duration_micros=1, duration_ns=1500), make_node(1, data_deps=[0], duration_micros=2)]
    result = schedule_nodes(nodes)
    assert result.end_us.tolist() == [1.5, 3.5]


def test_missing_deps_are_ignored_and_counted():
    nodes = [cpu(0, tid=1, dur=10, deps=[99]), cpu(1, tid=1, dur=10, deps=[0, 98])]
    result = schedule_nodes(nodes)
    assert result.predicted_span_us == 20
    assert result.missing_deps == 2


def test_a_dependency_cycle_raises_with_the_stuck_node_count():
    nodes = [make_node(0), make_node(1, data_deps=[2]), make_node(2, data_deps=[1]), make_node(3, data_deps=[2])]
    with pytest.raises(CycleError, match=r"cycle of 2 nodes: 1 -> 2 -> 1.*3 nodes can never run") as caught:
        schedule_nodes(nodes)
    assert "chakra validate" in str(caught.value) and caught.value.ids == [1, 2]


def test_nodes_may_come_in_any_order():
    forward = chain(3, duration_micros=4)
    result = schedule_nodes(list(reversed(forward)))
    assert result.start_us.tolist() == [8, 4, 0]  # positions follow the list given


def test_an_empty_trace_replays_to_zero():
    result = schedule_nodes([])
    assert (result.predicted_span_us, result.nodes, result.measured_span_us) == (0.0, 0, None)


def test_replay_file_equals_replay_of_the_nodes(tmp_path: Path):
    nodes = [
        cpu(0, tid=1, dur=10, start_time_micros=100),
        kernel(1, stream=7, dur=30, deps=[0], start_time_micros=112),
        cpu(2, tid=1, dur=5, deps=[0], start_time_micros=111),
        make_node(3, type=COMP_NODE, ctrl_deps=[1, 2], duration_micros=3, is_cpu_op=True, tid=1, start_time_micros=150),
    ]
    from_file = schedule_file(write_et(tmp_path / "w.0.et.zst", nodes))
    in_memory = schedule_nodes(nodes)
    assert from_file.to_dict() == in_memory.to_dict()
    np.testing.assert_array_equal(from_file.start_us, in_memory.start_us)
    np.testing.assert_array_equal(from_file.end_us, in_memory.end_us)


# ---------------------------------------------------------------------------------------------
# The event-driven scheduler against a plain instant-by-instant simulation

#: ``make_node`` keywords of each resource kind a random node may get.
RESOURCE_CHOICES = st.sampled_from(
    [{}, {"is_cpu_op": True}]
    + [{"is_cpu_op": True, "tid": t} for t in range(3)]
    + [{"is_cpu_op": False, "stream": s} for s in range(3)]
    + [{"is_cpu_op": False, "tid": t} for t in range(3)]
)


@st.composite
def random_graphs(draw: st.DrawFn) -> list[Node]:
    """Up to 20 nodes with random deps (some on missing ids), resources, durations (0 included), start times."""
    ids = draw(st.lists(st.integers(0, 99), min_size=1, max_size=20, unique=True))
    nodes = []
    for k, node_id in enumerate(ids):
        deps = draw(st.lists(st.sampled_from([*ids[:k], 100]), max_size=3, unique=True))
        split = draw(st.integers(0, len(deps)))
        nodes.append(
            make_node(
                node_id,
                data_deps=deps[:split],
                ctrl_deps=deps[split:],
                duration_micros=draw(st.integers(0, 5)),
                start_time_micros=draw(st.integers(1, 30)),
                **draw(RESOURCE_CHOICES),
            )
        )
    return draw(st.permutations(nodes))


#: Far more instants than 20 nodes of at most 5 µs can need: a guard that turns a hang into a failure.
REFERENCE_MAX_INSTANTS = 10_000


def reference_starts(nodes: list[Node]) -> list[int]:
    """Replayed starts by brute force: at each instant finish what ends, let unlimited zero-length
    nodes run through, then let each free resource take its ready node recorded first."""
    position = {node.id: i for i, node in enumerate(nodes)}
    deps = [[position[d] for d in [*node.data_deps, *node.ctrl_deps] if d in position] for node in nodes]

    def resource(node: Node) -> tuple[str, int] | None:
        attrs = {a.name: a for a in node.attr}
        if "is_cpu_op" in attrs and attrs["is_cpu_op"].bool_val:
            return ("thread", attrs["tid"].int64_val if "tid" in attrs else 0)
        if "stream" in attrs:
            return ("stream", attrs["stream"].int64_val)
        return ("thread", attrs["tid"].int64_val) if "tid" in attrs else None

    resources = [resource(node) for node in nodes]
    start: list[int | None] = [None] * len(nodes)
    end: list[int] = [0] * len(nodes)
    now = 0
    for _ in range(REFERENCE_MAX_INSTANTS):
        if None not in start:
            break
        done = {i for i, s in enumerate(start) if s is not None and end[i] <= now}
        busy = {resources[i] for i, s in enumerate(start) if s is not None and end[i] > now}
        ready = [i for i, s in enumerate(start) if s is None and all(d in done for d in deps[i])]
        instant = [i for i in ready if resources[i] is None and nodes[i].duration_micros == 0]
        ended_now = False  # a zero-length node ran: look at this instant again
        for i in instant or sorted(ready, key=lambda i: (nodes[i].start_time_micros, nodes[i].id, i)):
            if resources[i] is None or resources[i] not in busy:
                start[i], end[i] = now, now + nodes[i].duration_micros
                busy.add(resources[i])
                ended_now = ended_now or end[i] == now
        if not ended_now:
            now = min(e for i, e in enumerate(end) if start[i] is not None and e > now)
    else:
        raise AssertionError("the reference simulation did not finish")
    return [s for s in start if s is not None]


@settings(max_examples=150, deadline=None)
@given(random_graphs())
def test_the_scheduler_matches_an_instant_by_instant_simulation(nodes: list[Node]):
    assert schedule_nodes(nodes).start_us.tolist() == reference_starts(nodes)
