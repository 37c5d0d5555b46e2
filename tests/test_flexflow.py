"""The FlexFlow front end (issue 20): FlexFlow's task graphs (its simulator's, with the strategy or the
computation graph; upstream's labelled form) become one ET per device, node by node as FlexFlow ran
them, and replay to the task graph's makespan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flexflow_graphs import large_model, simulate, write_compgraph, write_strategy, write_task_graph
from helpers import assert_one_line_error, run_astra_sim, run_cli, validate_and_simulate
from hypothesis import given
from hypothesis import strategies as st

from chakra import io
from chakra.attrs import get_attr
from chakra.cli.dropin import converter_main
from chakra.errors import ChakraInputError
from chakra.flexflow import convert_flexflow
from chakra.flexflow.compgraph import read_compgraph
from chakra.flexflow.dot import DotGraph, DotNode
from chakra.flexflow.placement import _MERGE_AT, _Timeline
from chakra.flexflow.strategy import read_strategy
from chakra.flexflow.taskgraph import TaskKind, _checked_flexflow_task, task_graph_of
from chakra.schema.flexflow.strategy_pb2 import Strategy
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, Node

DATA = Path(__file__).resolve().parent / "data" / "flexflow"
TASKGRAPH, STRATEGY, COMPGRAPH, LABELLED = (
    DATA / "mlp2.taskgraph.dot", DATA / "mlp2.strategy", DATA / "mlp2.compgraph.dot", DATA / "mlp2.labelled.dot",
)  # fmt: skip
#: The 2-device MLP of mlp2.taskgraph.dot, by device, in id order: (id, type, name, start µs, duration µs,
#: data deps). Starts are FlexFlow's ms from 0, written from 1 µs.
EXPECTED_NODES = {
    0: [
        (0, COMP_NODE, "Barrier", 1, 0, []),
        (1, COMP_NODE, "Forward Dense_1", 1, 500, []),
        (3, COMM_RECV_NODE, "seg 0 from Dense_1 to Dense_2", 501, 200, []),
        (4, COMP_NODE, "Forward Dense_2", 701, 300, [1, 3]),
        (5, COMP_NODE, "Backward Dense_2", 1001, 600, [4]),
        (6, COMP_NODE, "Backward Dense_1", 1601, 1000, [1, 5]),
        (7, COMM_SEND_NODE, "seg 0 from Dense_2 to Dense_1", 1601, 200, [5]),
        (9, COMP_NODE, "Barrier", 2601, 0, [5, 6]),
        (10, COMP_NODE, "Update", 2601, 0, [9]),
        (12, COMM_RECV_NODE, "seg 0 from  to", 2801, 400, []),
        (13, COMP_NODE, "Update", 3201, 0, [9, 12]),
        (14, COMM_SEND_NODE, "seg 0 from  to", 3201, 400, [13]),
    ],
    1: [
        (2, COMP_NODE, "Forward Dense_1", 1, 500, []),
        (3, COMM_SEND_NODE, "seg 0 from Dense_1 to Dense_2", 501, 200, [2]),
        (7, COMM_RECV_NODE, "seg 0 from Dense_2 to Dense_1", 1601, 200, []),
        (8, COMP_NODE, "Backward Dense_1", 1801, 1000, [2, 7]),
        (11, COMP_NODE, "Barrier", 2801, 0, [8]),
        (12, COMM_SEND_NODE, "seg 0 from  to", 2801, 400, [11]),
        (14, COMM_RECV_NODE, "seg 0 from  to", 3201, 400, []),
        (15, COMP_NODE, "Barrier", 3601, 0, [14]),
    ],
}
#: (id, source, destination, tag, bytes) of each transfer: activations and gradients sized by the
#: computation graph (Dense_1's 4096 output bytes per partition), weights by 25 GB/s.
EXPECTED_TRANSFERS = [(3, 1, 0, 0, 4096), (7, 0, 1, 0, 4096), (12, 1, 0, 1, 10_000_000), (14, 0, 1, 1, 10_000_000)]
MAKESPAN_US = 3600.0
LINK_GBPS = 25.0


def _nodes(prefix: Path, device: int) -> list[Node]:
    return io.read(Path(f"{prefix}.{device}.et"))[1]


def _rows(nodes: list[Node]) -> list[tuple]:
    return [(n.id, n.type, n.name, n.start_time_micros, n.duration_micros, list(n.data_deps)) for n in nodes]


def _transfers(prefix: Path, devices: int) -> list[tuple[int, int, int, int, int]]:
    found = set()
    for device in range(devices):
        for node in _nodes(prefix, device):
            if node.type in (COMM_SEND_NODE, COMM_RECV_NODE):
                found.add((node.id, *(get_attr(node, a) for a in ("comm_src", "comm_dst", "comm_tag", "comm_size"))))
    return sorted(found)


@pytest.fixture(scope="module")
def mlp2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    prefix = tmp_path_factory.mktemp("mlp2") / "mlp"
    result = convert_flexflow(TASKGRAPH, prefix, strategy=STRATEGY, compgraph=COMPGRAPH, bandwidth_gbps=LINK_GBPS)
    return prefix, result


def test_flexflows_task_graph_of_a_2_device_mlp_becomes_its_nodes_on_each_device(mlp2):
    prefix, _ = mlp2
    assert {d: _rows(_nodes(prefix, d)) for d in (0, 1)} == EXPECTED_NODES


def test_each_transfer_is_a_send_and_a_receive_with_peers_tag_and_bytes(mlp2):
    prefix, _ = mlp2
    assert _transfers(prefix, 2) == EXPECTED_TRANSFERS


def test_compute_runs_on_the_devices_stream_and_each_send_on_its_links(mlp2):
    prefix, _ = mlp2
    nodes = _nodes(prefix, 1)
    assert {get_attr(n, "stream") for n in nodes if n.type == COMP_NODE} == {0}
    assert [get_attr(n, "stream") for n in nodes if n.type == COMM_SEND_NODE] == [1, 1]  # to device 0
    assert all(get_attr(n, "is_cpu_op") is False and get_attr(n, "duration_ns") is not None for n in nodes)


def test_the_report_says_what_it_inferred_and_the_replay_meets_the_makespan(mlp2):
    _, result = mlp2
    conversion, together = result.conversion, result.fidelity.whole
    assert conversion.tasks == {"Forward": 3, "Backward": 3, "Comm": 4, "Barrier": 4, "Update": 2}
    assert conversion.inferred == {
        "devices: their operator's one device": 7, "devices: in order among their operator's devices": 3,
        "devices: no name, the first free device": 2, "bytes from the computation graph": 2,
        "bytes from the duration and --bandwidth": 2,
    }  # fmt: skip
    assert conversion.makespan_us == MAKESPAN_US and together.predicted_span_us == MAKESPAN_US
    assert together.matched == 4 and together.unmatched == 0 and result.fidelity.ok


def test_the_protobuf_strategy_places_the_tasks_as_the_text_one(tmp_path: Path):
    strategy = Strategy()
    for name, placement in read_strategy(STRATEGY).items():
        strategy.ops.add(name=name, device_type=0, dims=placement.dims, device_ids=placement.device_ids)
    binary = tmp_path / "mlp2.pb"
    binary.write_bytes(strategy.SerializeToString())
    convert_flexflow(TASKGRAPH, tmp_path / "pb" / "mlp", strategy=binary)
    convert_flexflow(TASKGRAPH, tmp_path / "text" / "mlp", strategy=STRATEGY)
    for device in (0, 1):
        assert _nodes(tmp_path / "pb" / "mlp", device) == _nodes(tmp_path / "text" / "mlp", device)


def test_the_computation_graph_alone_places_and_sizes_the_tasks(tmp_path: Path):
    convert_flexflow(TASKGRAPH, tmp_path / "mlp", compgraph=COMPGRAPH)
    rows = {d: _rows(_nodes(tmp_path / "mlp", d)) for d in (0, 1)}
    assert rows == EXPECTED_NODES
    assert [t[4] for t in _transfers(tmp_path / "mlp", 2)] == [4096, 4096, 0, 0]  # weights: no size given


def test_the_computation_graph_keeps_parallel_operators_and_their_costs():
    ops = read_compgraph(COMPGRAPH)
    assert ops["Repartition_3"].is_parallel_op and ops["Repartition_3"].dims == (0, 2)
    assert (ops["Dense_1"].device_ids, ops["Dense_1"].out_bytes, ops["Dense_1"].backward_ms) == ((0, 1), 4096, 1.0)


def test_upstreams_labelled_mlp_becomes_its_nodes_with_the_labels_devices_and_bytes(tmp_path: Path):
    result = convert_flexflow(LABELLED, tmp_path / "mlp")
    rows = {d: [(n.id, n.type, n.name, n.duration_micros, list(n.data_deps)) for n in _nodes(tmp_path / "mlp", d)]
            for d in (0, 1)}  # fmt: skip
    assert rows == {
        0: [(0, COMP_NODE, "Forward Dense_1", 500, []), (2, COMM_RECV_NODE, "Comm from Dense_1 to Dense_2", 200, []),
            (3, COMP_NODE, "Forward Dense_2", 300, [0, 2]), (4, COMP_NODE, "Backward Dense_2", 600, [3]),
            (5, COMP_NODE, "Backward Dense_1", 1000, [0, 4]),
            (6, COMM_SEND_NODE, "Comm from Dense_2 to Dense_1", 200, [4])],
        1: [(1, COMP_NODE, "Forward Dense_1", 500, []), (2, COMM_SEND_NODE, "Comm from Dense_1 to Dense_2", 200, [1]),
            (6, COMM_RECV_NODE, "Comm from Dense_2 to Dense_1", 200, []),
            (7, COMP_NODE, "Backward Dense_1", 1000, [1, 6])],
    }  # fmt: skip
    assert _transfers(tmp_path / "mlp", 2) == [(2, 1, 0, 0, 4096), (6, 0, 1, 0, 4096)]
    assert result.fidelity is None and all(n.start_time_micros == 0 for n in _nodes(tmp_path / "mlp", 0))


def test_upstreams_reading_of_the_labelled_times_as_seconds_is_a_choice(tmp_path: Path):
    convert_flexflow(LABELLED, tmp_path / "mlp", time_unit="s")
    assert _nodes(tmp_path / "mlp", 0)[0].duration_micros == 500_000


def test_a_dependency_across_devices_that_no_transfer_carries_becomes_an_empty_transfer(tmp_path: Path):
    graph = tmp_path / "g.dot"
    graph.write_text(
        "digraph g {\n"
        ' a [label="{device_id=0|A|Forward|COMP_NODE|simulated_run_time=1}"];\n'
        ' b [label="{device_id=1|B|Forward|COMP_NODE|simulated_run_time=1}"];\n'
        ' c [label="{device_id=1|C|Comm|COMM_SEND_RECV_NODE|src_device_id=0|dst_device_id=1|comm_size=8|'
        'run_time=1}"];\n'
        " a -> c; c -> b; a -> b;\n}\n"
    )
    conversion = convert_flexflow(graph, tmp_path / "g").conversion
    assert conversion.transfers == 1 and conversion.empty_transfers == 1
    # ids in dependency order: A, then the empty transfer right after it, then C's transfer, then B;
    # tags count the transfers from device 0 to 1 in that order: (id, src, dst, tag, bytes)
    assert _transfers(tmp_path / "g", 2) == [(1, 0, 1, 0, 0), (2, 0, 1, 1, 8)]
    b = next(n for n in _nodes(tmp_path / "g", 1) if n.name == "Forward B")
    assert list(b.data_deps) == [1, 2]


def _graph_and_strategy(folder: Path, statements: list[str], strategy: str) -> tuple[Path, Path]:
    """FlexFlow's task graph of these statements and a text strategy, written in ``folder``."""
    graph = folder / "g.dot"
    graph.write_text("digraph taskgraph {\n" + "".join(f"  {statement}\n" for statement in statements) + "}\n")
    (folder / "g.strategy").write_text(strategy)
    return graph, folder / "g.strategy"


def _one_device_each(devices: dict[str, int]) -> str:
    """FlexFlow's text strategy: the operator count, then per operator its name, device type, one
    dimension of one part, and its one device."""
    return f"{len(devices)}\n" + "".join(f"{op}\n0\n1\n1\t\n1\n{device}\t\n" for op, device in devices.items())


def test_a_dependency_on_a_later_hop_of_a_transfer_is_dropped_and_counted(tmp_path: Path):
    graph, strategy = _graph_and_strategy(
        tmp_path,
        [
            'node0 [label="{ A | Forward | { 0 | 1 } }"];',
            'node1 [label="{ seg 0 from A to B | Comm | { 1 | 1.5 } }"];',
            'node2 [label="{ seg 0 from A to B | Comm | { 1.5 | 2 } }"];',
            'node3 [label="{ B | Forward | { 2 | 3 } }"];',
            'node4 [label="{ C | Forward | { 0 | 1 } }"];',
            "node0 -> node1; node1 -> node2; node2 -> node3; node4 -> node2;",
        ],
        _one_device_each({"A": 0, "B": 1, "C": 0}),
    )  # fmt: skip
    conversion = convert_flexflow(graph, tmp_path / "g", strategy=strategy, bandwidth_gbps=1.0).conversion
    assert conversion.transfers == 1 and conversion.empty_transfers == 0
    assert conversion.dropped == {"dependencies on a later hop of a transfer (kept by the hops' order)": 1}
    # one transfer of its two hops, A to B, sized from its 1 ms at 1 GB/s
    assert _transfers(tmp_path / "g", 2) == [(2, 0, 1, 0, 1_000_000)]


@pytest.mark.parametrize("source", [TASKGRAPH, LABELLED])
def test_the_small_outputs_validate_clean_and_simulate(source: Path, tmp_path: Path):
    convert_flexflow(source, tmp_path / "mlp", strategy=STRATEGY if source == TASKGRAPH else None)
    validate_and_simulate(tmp_path / "mlp", tmp_path, 2)


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, int]:
    folder = tmp_path_factory.mktemp("large")
    ops = large_model(num_devices=64, layers=64)
    ran = simulate(ops, 64, updates=True)
    write_task_graph(ran, folder / "big.dot")
    write_strategy(ops, folder / "big.strategy")
    write_compgraph(ops, folder / "big.compgraph.dot")
    result = convert_flexflow(folder / "big.dot", folder / "et" / "big", strategy=folder / "big.strategy",
                              compgraph=folder / "big.compgraph.dot", bandwidth_gbps=LINK_GBPS)  # fmt: skip
    return folder / "et" / "big", result, len(ran)


def test_a_generated_64_device_task_graph_converts_every_task(large):
    _, result, tasks = large
    conversion = result.conversion
    assert tasks > 10_000 and sum(conversion.tasks.values()) == tasks
    comm = conversion.tasks["Comm"]
    assert conversion.transfers == comm and conversion.nodes == tasks + comm  # each transfer: one task, two nodes
    assert len(result.written.paths) == 64 and conversion.dropped == {}


def test_a_generated_64_device_task_graph_replays_to_its_makespan_within_1_percent(large):
    _, result, _ = large
    assert result.fidelity.tolerance == 0.01 and result.fidelity.ok
    assert result.fidelity.whole.unmatched == 0


def test_a_generated_64_device_task_graph_validates_clean_and_simulates(large, tmp_path: Path):
    prefix, _, _ = large
    validate_and_simulate(prefix, tmp_path, 64)


# ---- bad files: one clear line, exit 2 -------------------------------------------------------
BAD_FILES = {
    "unbalanced braces": ('digraph taskgraph {\n  node0 [label="{ A | Forward | { 0 | 1 } }"];\n', "line 1, column 19",
                          "never closed"),
    "unbalanced label": ('digraph taskgraph {\n  node0 [label="{ A | Forward | { 0 | 1 }"];\n}', "line 2, column 3",
                         "unbalanced braces"),
    "unknown kind": ('digraph taskgraph {\n  node0 [label="{ A | Sideways | { 0 | 1 } }"];\n}', "line 2, column 3",
                     "unknown task kind 'Sideways'"),
    "comm_dst out of range": (
        'digraph taskgraph {\n  node0 [label="{device_id=0|A|Forward|COMP_NODE|simulated_run_time=1}"];\n'
        '  node1 [label="{device_id=4|C|Comm|COMM_SEND_RECV_NODE|src_device_id=0|dst_device_id=7|comm_size=8|'
        'run_time=1}"];\n  node0 -> node1;\n}', "line 3, column 3", "out of range"),
    "a node named but not declared": (
        'digraph taskgraph {\n  node0 [label="{ A | Forward | { 0 | 1 } }"];\n  node0 -> node1;\n}',
        "line 3, column 3", "node1 has no label"),
    "a task depending on itself": (
        'digraph taskgraph {\n  node0 [label="{ A | Forward | { 0 | 1 } }"];\n  node0 -> node0;\n}',
        "line 3, column 3", "node0 depends on itself"),
    "cycle": ('digraph taskgraph {\n  node0 [label="{ A | Forward | { 0 | 1 } }"];\n  node0 -> node1;\n'
              '  node1 [label="{ B | Forward | { 1 | 2 } }"];\n  node1 -> node0;\n}', "line 4, column 3",
              "cycle: node1 -> node0 -> node1"),
    "a transfer to its own device": (
        'digraph taskgraph {\n  node0 [label="{device_id=0|A|Forward|COMP_NODE|simulated_run_time=1}"];\n'
        '  node1 [label="{device_id=0|C|Comm|COMM_SEND_RECV_NODE|src_device_id=0|dst_device_id=0|comm_size=8|'
        'run_time=1}"];\n  node0 -> node1;\n}', "line 3, column 3", "node1 sends from device 0 to itself"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_malformed_task_graph_is_refused_in_one_line_with_its_position(case: str, tmp_path: Path):
    text, position, message = BAD_FILES[case]
    bad = tmp_path / "bad.dot"
    bad.write_text(text)
    done = run_cli("convert", "flexflow", str(bad), "-o", str(tmp_path / "out" / "x"))
    assert_one_line_error(done, "bad.dot", position, message)
    assert not (tmp_path / "out").exists()


def test_a_strategy_with_the_wrong_number_of_devices_is_refused_at_its_line(tmp_path: Path):
    bad = tmp_path / "bad.strategy"
    bad.write_text("1\nDense_1\n0\n2\n1 2\n3\n0 1 2\n")
    done = run_cli("convert", "flexflow", str(TASKGRAPH), "--strategy", str(bad), "-o", str(tmp_path / "x"))
    assert_one_line_error(done, "bad.strategy", "line 6, column 1", "3 devices for 2 partitions")


#: FlexFlow's text strategy of one operator, A, in two partitions on devices 0 and 1.
A_ON_TWO_DEVICES = "1\nA\n0\n1\n2\t\n2\n0\t1\t\n"
#: A's task, then a transfer from it.
A_THEN_A_TRANSFER = ['node0 [label="{ A | Forward | { 0 | 1 } }"];',
                     'node1 [label="{ seg 0 from A to B | Comm | { 1 | 2 } }"];', "node0 -> node1;"]  # fmt: skip


def test_a_task_of_an_operator_the_strategy_does_not_place_is_refused_at_its_line(tmp_path: Path):
    graph, strategy = _graph_and_strategy(
        tmp_path, [*A_THEN_A_TRANSFER, 'node2 [label="{ B | Forward | { 2 | 3 } }"];', "node1 -> node2;"],
        A_ON_TWO_DEVICES,
    )  # fmt: skip
    done = run_cli("convert", "flexflow", str(graph), "--strategy", str(strategy), "-o", str(tmp_path / "x"))
    assert_one_line_error(done, "g.dot", "line 5, column 3", "operator 'B' is not in", "g.strategy")


def test_a_transfer_that_reaches_no_compute_task_is_refused_naming_its_hop(tmp_path: Path):
    graph, strategy = _graph_and_strategy(tmp_path, A_THEN_A_TRANSFER, A_ON_TWO_DEVICES)
    done = run_cli("convert", "flexflow", str(graph), "--strategy", str(strategy), "-o", str(tmp_path / "x"))
    assert_one_line_error(done, "g.dot", "node1 (seg 0 from A to B) has no compute task at its end")


def test_a_hop_that_two_hops_of_its_transfer_follow_is_refused_at_the_second(tmp_path: Path):
    graph, strategy = _graph_and_strategy(
        tmp_path,
        [*A_THEN_A_TRANSFER, 'node2 [label="{ seg 0 from A to B | Comm | { 2 | 3 } }"];',
         'node3 [label="{ seg 0 from A to B | Comm | { 2 | 3 } }"];', "node1 -> node2;", "node1 -> node3;"],
        A_ON_TWO_DEVICES,
    )  # fmt: skip
    done = run_cli("convert", "flexflow", str(graph), "--strategy", str(strategy), "-o", str(tmp_path / "x"))
    assert_one_line_error(done, "g.dot", "line 6, column 3", "node3 (seg 0 from A to B) follows a hop")


def test_fewer_devices_than_the_strategy_names_are_refused_naming_the_operator(tmp_path: Path):
    done = run_cli("convert", "flexflow", str(TASKGRAPH), "--strategy", str(STRATEGY), "-o", str(tmp_path / "x"),
                   "--num-npus", "1")  # fmt: skip
    assert_one_line_error(done, "mlp2.strategy", "runs on device 1, past the 1 device asked for", "--num-npus")


def test_a_transfer_that_the_bandwidth_sizes_past_what_a_node_holds_is_refused(tmp_path: Path):
    graph = tmp_path / "long.dot"
    graph.write_text(
        TASKGRAPH.read_text().replace("{ seg 0 from Dense_1 to Dense_2 | Comm | { 0.5 | 0.7 } }",
                                      "{ seg 0 from Dense_1 to Dense_2 | Comm | { 0.5 | 4000000000000 } }")
    )  # fmt: skip
    assert graph.read_text() != TASKGRAPH.read_text()
    done = run_cli("convert", "flexflow", str(graph), "--strategy", str(STRATEGY), "-o", str(tmp_path / "x"),
                   "--bandwidth", "100")  # fmt: skip
    assert_one_line_error(done, "long.dot", "past what a transfer holds", "--bandwidth")
    assert not (tmp_path / "x.0.et").exists()


def test_flexflows_task_graph_without_a_strategy_is_refused_naming_what_to_give(tmp_path: Path):
    done = run_cli("convert", "flexflow", str(TASKGRAPH), "-o", str(tmp_path / "x"))
    assert_one_line_error(done, "mlp2.taskgraph.dot", "--strategy")


# ---- command lines -----------------------------------------------------------------------------
def test_the_command_checks_the_makespan_and_reports_as_json(tmp_path: Path):
    done = run_cli("convert", "flexflow", str(TASKGRAPH), "--strategy", str(STRATEGY), "-o", str(tmp_path / "mlp"),
                   "--check", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["makespan_us"] == MAKESPAN_US and report["fidelity"]["whole"]["predicted_span_us"] == MAKESPAN_US


def test_upstreams_converter_command_line_converts_the_labelled_form(tmp_path: Path, capsys: pytest.CaptureFixture):
    converter_main([
        "FlexFlow", "--input_filename", str(LABELLED), "--output_filename", str(tmp_path / "mlp"),
        "--npu_frequency", "1000", "--num_dims", "1",
    ])  # fmt: skip
    assert "--npu_frequency is not needed" in capsys.readouterr().err
    assert _nodes(tmp_path / "mlp", 0)[0].duration_micros == 500_000  # seconds, as upstream read them


def test_a_task_graph_with_comments_and_defaults_reads_as_the_plain_one(tmp_path: Path):
    # FlexFlow's own statements are read at once; anything else DOT allows takes the token parser
    dressed = tmp_path / "dressed.dot"
    text = TASKGRAPH.read_text()
    dressed.write_text(text.replace("digraph taskgraph {", "digraph taskgraph { // 2021\n node [shape=record];"))
    convert_flexflow(dressed, tmp_path / "dressed" / "mlp", strategy=STRATEGY)
    convert_flexflow(TASKGRAPH, tmp_path / "plain" / "mlp", strategy=STRATEGY)
    for device in (0, 1):
        assert _nodes(tmp_path / "dressed" / "mlp", device) == _nodes(tmp_path / "plain" / "mlp", device)


def test_astra_sims_own_build_runs_the_converted_mlp_to_the_cycles_our_simulator_gives(mlp2):
    prefix, _ = mlp2
    examples = Path(__file__).resolve().parents[1] / "examples" / "astra"
    system, network = examples / "system.json", examples / "ring2.yml"
    code, finished = run_astra_sim(prefix, network, system)
    done = run_cli("simulate", "--workload", str(prefix), "--system", str(system), "--network", str(network), "--json")
    ours = {r["rank"]: r["finish_ns"] for r in json.loads(done.stdout)["ranks"]}
    assert code == 0 and finished == ours and sorted(ours) == [0, 1]


# ---- a label as FlexFlow writes it, read at once, is the label the checked reader reads --------------
LABEL_TIMES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "0.05", "-1", "1e300", "4611686018427.39", " 2", "x", "", "1_0", "inf", "nan"]),
)
LABEL_NAMES = st.one_of(st.none(), st.sampled_from(["Dense_100", " pad ", "", "a b", "Conv2D_3"]))
LABEL_KINDS = st.sampled_from([kind.value for kind in TaskKind] + ["Sideways", ""])


def _read_at_once(node: DotNode) -> object:
    """The task (name, kind, start, duration) the task graph reader makes of a one-node graph, or its error."""
    try:
        graph = task_graph_of(DotGraph.of("g.dot", [node], []))
    except ChakraInputError as error:
        return str(error)
    return graph.name[0], graph.kind[0], graph.start_ns[0], graph.dur_ns[0]


def _read_checked(node: DotNode) -> object:
    try:
        task = _checked_flexflow_task(0, node, "g.dot")
    except ChakraInputError as error:
        return str(error)
    return task.name, task.kind, task.start_ns, task.dur_ns


@given(name=LABEL_NAMES, kind=LABEL_KINDS, start=LABEL_TIMES, end=LABEL_TIMES)
def test_a_flexflow_label_read_at_once_is_the_task_the_checked_reader_reads(name, kind, start, end):
    label = f"{{ {'' if name is None else name + ' | '}{kind} | {{ {start} | {end} }} }}"
    node = DotNode("node7", {"label": label}, 3, 5)
    assert _read_at_once(node) == _read_checked(node)


_INTERVALS = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)).map(lambda p: (p[0], p[0] + p[1])), max_size=40)


@given(held=_INTERVALS, added=_INTERVALS, probe=st.tuples(st.integers(0, 6), st.integers(0, 4)))
def test_a_timeline_given_many_intervals_at_once_holds_them_as_given_one_at_a_time(held, added, probe):
    """At one start, the interval inserted later comes first (the order the placement's checks read)."""
    at_once, one_by_one = _Timeline(), _Timeline()
    for timeline in (at_once, one_by_one):
        for interval in held:
            timeline.add([interval])
    at_once.add(added + [(0, 0)] * _MERGE_AT)  # enough to be merged at once
    for interval in added + [(0, 0)] * _MERGE_AT:
        one_by_one.add([interval])
    assert (at_once.starts, at_once.ends) == (one_by_one.starts, one_by_one.ends)
    start, end = probe[0], probe[0] + probe[1]
    assert at_once.fits_one(start, end) == at_once.fits([(start, end)])
