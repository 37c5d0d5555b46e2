"""chakra.pytorch.convert and convert_workload: real gloo jobs, shared real traces, hand-made GPU traces."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    GLOO_RANKS,
    host_node,
    kineto_kernel,
    kineto_launch,
    kineto_op,
    require_shared,
    write_trace_pair,
)

from chakra import io
from chakra.adapt import Change, Target, adapt_workload
from chakra.attrs import get_attr
from chakra.errors import ChakraInputError
from chakra.pytorch import encode
from chakra.pytorch.convert import convert
from chakra.pytorch.flops import op_cost
from chakra.pytorch.host import load_host_trace
from chakra.pytorch.kineto import load_kineto_trace
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BARRIER,
    BROADCAST,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    METADATA_NODE,
    REDUCE_SCATTER,
    Node,
)
from chakra.validate import ERROR, WARNING, validate_set
from chakra.workload import open_workload

#: What examples/collect_gloo.py moves each step (4-byte floats, 2 ranks): comm_type -> comm_size.
#: all_reduce of world*4 floats; all_gather: per-rank input of 4 floats; reduce_scatter: the full
#: 8-float input; broadcast and all_to_all of the 8-float tensor; barrier: nothing.
EXPECTED_COLLECTIVE_BYTES = {ALL_REDUCE: 32, ALL_GATHER: 16, REDUCE_SCATTER: 32, BROADCAST: 32, ALL_TO_ALL: 32}
#: DDP's gradient bucket: Linear(64, 64) + Linear(64, 1) parameters, 4-byte floats.
DDP_BUCKET_BYTES = (64 * 64 + 64 + 64 + 1) * 4
P2P_BYTES, P2P_TAG = 32, 3
ACTIVE_STEPS = 2  # GLOO_STEPS minus the warm-up step
FIDELITY_TOLERANCE = 0.05


def _comm_nodes(path: Path) -> list[Node]:
    _, nodes = io.read(path)
    return [n for n in nodes if n.type in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE)]


def _problems(prefix: Path | str, severities: tuple[str, ...] = (ERROR, WARNING)) -> list[str]:
    """Codes of the findings ``chakra validate --target astra-sim`` reports for a workload."""
    findings = validate_set(open_workload(prefix, whole=True), target="astra-sim")
    return [f"{f.code}: {f.message}" for f in findings if f.severity in severities]


def _attrs(node: Node, *names: str) -> tuple[Any, ...]:
    return tuple(get_attr(node, name, None) for name in names)


@pytest.fixture(scope="module")
def gloo_workload(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("converted") / "job"
    return convert_workload(
        str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), out, check=True
    )


# -- live gloo job ---------------------------------------------------------------------------------


def test_every_rank_of_the_job_is_written_with_the_groups_file(gloo_workload):
    assert sorted(gloo_workload.written.paths) == list(range(GLOO_RANKS))
    assert all(path.exists() for path in gloo_workload.written.paths.values())
    assert gloo_workload.written.groups_path.read_text().strip() == "{}"  # only the default group


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_every_collective_has_its_type_and_bytes(gloo_workload, rank: int):
    collectives = [n for n in _comm_nodes(gloo_workload.written.paths[rank]) if n.type == COMM_COLL_NODE]
    by_type: dict[int, Counter[int]] = {}
    for node in collectives:
        comm_type, size = _attrs(node, "comm_type", "comm_size")
        by_type.setdefault(comm_type, Counter())[size] += 1
    for comm_type, size in EXPECTED_COLLECTIVE_BYTES.items():
        assert by_type[comm_type][size] >= ACTIVE_STEPS, (comm_type, by_type[comm_type])
    assert by_type[ALL_REDUCE][DDP_BUCKET_BYTES] == ACTIVE_STEPS


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_barriers_are_written_as_the_barriers_that_ran(gloo_workload, rank: int):
    nodes = _comm_nodes(gloo_workload.written.paths[rank])
    barriers = [n for n in nodes if n.type == COMM_COLL_NODE and get_attr(n, "comm_type") == BARRIER]
    assert len(barriers) == ACTIVE_STEPS
    assert not any(get_attr(n, "recorded_comm_type") is not None for n in nodes)


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_sends_and_receives_carry_global_peers_tag_and_bytes(gloo_workload, rank: int):
    nodes = _comm_nodes(gloo_workload.written.paths[rank])
    peer = (rank + 1) % GLOO_RANKS
    sends = [_attrs(n, "comm_src", "comm_dst", "comm_tag", "comm_size") for n in nodes if n.type == COMM_SEND_NODE]
    recvs = [_attrs(n, "comm_src", "comm_dst", "comm_tag", "comm_size") for n in nodes if n.type == COMM_RECV_NODE]
    assert sends == [(rank, peer, P2P_TAG, P2P_BYTES)] * ACTIVE_STEPS
    assert recvs == [((rank - 1) % GLOO_RANKS, rank, P2P_TAG, P2P_BYTES)] * ACTIVE_STEPS


def test_ranks_agree_on_the_order_of_collectives(gloo_workload):
    sequences = []
    for rank in range(GLOO_RANKS):
        collectives = [n for n in _comm_nodes(gloo_workload.written.paths[rank]) if n.type == COMM_COLL_NODE]
        collectives.sort(key=lambda n: get_attr(n, "comm_seq"))
        sequences.append([_attrs(n, "pg_name", "comm_seq", "comm_type", "comm_size") for n in collectives])
        assert [s[1] for s in sequences[-1]] == list(range(len(collectives)))
        assert sorted(n.id for n in collectives) == [n.id for n in collectives]  # issue order = id order
    assert all(seq == sequences[0] for seq in sequences)


def test_the_faithful_workload_is_refused_for_astra_sim_with_chakra_adapt_as_the_fix(gloo_workload):
    findings = validate_set(open_workload(gloo_workload.written.prefix, whole=True), target="astra-sim")
    errors = {f.code for f in findings if f.severity == ERROR}
    assert errors == {"astra-metadata-node", "astra-unsupported-collective"}
    assert all("chakra adapt" in f.hint for f in findings if f.severity == ERROR)


def test_the_workload_adapted_for_astra_sim_validates_clean(gloo_workload, tmp_path: Path):
    adapt_workload(gloo_workload.written.prefix, tmp_path / "job", Target.ASTRA_SIM)
    assert _problems(tmp_path / "job") == []


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_replaying_recorded_durations_reproduces_the_measured_span(gloo_workload, rank: int):
    fidelity = gloo_workload.fidelity.results[rank]
    assert fidelity.measured_span_us > 0
    assert abs(fidelity.error) <= FIDELITY_TOLERANCE, fidelity.to_dict()


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_every_host_op_is_converted_or_dropped_with_a_reason(gloo_workload, gloo_traces: Path, rank: int):
    report = gloo_workload.conversion.reports[rank]
    host_ops = len(load_host_trace(gloo_traces / f"host.{rank}.json").nodes)
    written_from_host = report.node_count - report.parts - report.gaps  # extra nodes: parts, time outside ops
    assert report.host_ops == host_ops
    assert written_from_host + sum(report.dropped.values()) == host_ops
    assert set(report.dropped) == {"observer root (no work of its own)"}


@pytest.mark.parametrize("rank", range(GLOO_RANKS))
def test_synchronous_collectives_hold_the_issuing_thread(gloo_workload, rank: int):
    _, nodes = io.read(gloo_workload.written.paths[rank])
    by_id = {n.id: n for n in nodes}
    waiting = [n for n in nodes if n.type == COMP_NODE and any(by_id[d].type == COMM_COLL_NODE for d in n.data_deps)]
    assert gloo_workload.conversion.reports[rank].waits >= ACTIVE_STEPS
    assert waiting, "no CPU op waits for a collective"


def test_the_process_group_record_becomes_a_metadata_node_astra_sim_parses(gloo_workload):
    _, nodes = io.read(gloo_workload.written.paths[0])
    (metadata,) = [n for n in nodes if n.type == METADATA_NODE]
    text = metadata.inputs.values
    assert text.startswith("['[{") and text.endswith("}]']")
    assert '"pg_name": "0"' in text[2:-2]


def test_host_only_conversion_is_a_valid_graph_that_says_what_it_lacks(gloo_traces: Path, tmp_path: Path):
    result = convert_workload(
        str(gloo_traces / "host.{rank}.json"), None, tmp_path / "host_only", target=Target.ASTRA_SIM
    )
    report = result.conversion.reports[0]
    assert report.mode == "host-only" and any("durations" in lack for lack in report.lacks)
    assert _problems(tmp_path / "host_only", (ERROR,)) == []
    sends = [n for n in _comm_nodes(result.written.paths[0]) if n.type == COMM_SEND_NODE]
    assert [_attrs(n, "comm_dst", "comm_tag", "comm_size") for n in sends] == [(1, P2P_TAG, P2P_BYTES)] * ACTIVE_STEPS


def test_targeting_astra_sim_writes_barriers_as_its_all_reduce_keeping_the_recorded_type(
    gloo_traces: Path, tmp_path: Path
):
    result = convert_workload(
        str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), tmp_path / "job",
        target=Target.ASTRA_SIM,
    )  # fmt: skip
    assert result.conversion.adapted is not None
    assert (
        result.conversion.adapted.changes.details[Change.STAND_IN]["BARRIER as ALL_REDUCE"] == ACTIVE_STEPS * GLOO_RANKS
    )
    nodes = _comm_nodes(result.written.paths[0])
    stand_ins = [n for n in nodes if get_attr(n, "recorded_comm_type") == BARRIER]
    assert {_attrs(n, "comm_type", "comm_size") for n in stand_ins} == {(ALL_REDUCE, 0)}
    assert len(stand_ins) == ACTIVE_STEPS


# -- shared real traces ----------------------------------------------------------------------------


def test_nccl_collectives_take_bytes_and_group_from_record_param_comms(tmp_path: Path):
    conversion = convert(load_host_trace(require_shared("param/resnet_2gpu_et.json.gz")))
    collectives = [n for n in conversion.nodes if n.type == COMM_COLL_NODE]
    sizes = Counter(_attrs(n, "comm_type", "comm_size", "pg_name") for n in collectives)
    assert sizes[(ALL_REDUCE, 2049000 * 4, "0")] == 3  # in_msg_nelems x Float, three steps
    assert conversion.report.comm_groups == {"recorded in the trace": 21}
    assert all(n.name.startswith("nccl:") for n in collectives)  # host-only: the work annotation


def test_schema_1_0_2_groups_come_from_the_backend_id(tmp_path: Path):
    conversion = convert(load_host_trace(require_shared("upstream-chakra/1.0.2-chakra.0.0.4.json")))
    collectives = [n for n in conversion.nodes if n.type == COMM_COLL_NODE]
    assert len(collectives) == 10
    assert {_attrs(n, "comm_type", "comm_size", "pg_name") for n in collectives} == {(ALL_GATHER, 4, "0")}


@pytest.mark.parametrize(
    "name", ["param/resnet_1gpu_et.json.gz", "param/linear_et.json.gz", "hta/benchmark_simple_add_et.json.gz"]
)
def test_every_shared_host_trace_converts_to_a_valid_graph(name: str, tmp_path: Path):
    conversion = convert(load_host_trace(require_shared(name)))
    conversion.write(tmp_path / "x.0.et")
    assert _problems(tmp_path / "x", (ERROR,)) == []
    assert conversion.report.node_count + sum(conversion.report.dropped.values()) == conversion.report.host_ops


def test_gpu_pair_gets_kernels_after_their_launchers_and_replays_exactly(tmp_path: Path):
    result = convert_workload(
        str(require_shared("hta/benchmark_simple_add_et.json.gz")),
        str(require_shared("hta/benchmark_simple_add_trace.json.gz")),
        tmp_path / "add",
        check=True,
    )
    _, nodes = io.read(result.written.paths[0])
    by_id = {n.id: n for n in nodes}
    kernels = [n for n in nodes if get_attr(n, "stream", None) is not None]
    assert len(kernels) == 4 and all(not get_attr(k, "is_cpu_op") for k in kernels)
    assert [by_id[k.ctrl_deps[0]].name for k in kernels] == ["aten::uniform_"] * 2 + ["aten::add"] * 2
    assert abs(result.fidelity.results[0].error) <= FIDELITY_TOLERANCE


def test_traces_of_different_runs_are_refused(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="different runs"):
        convert_workload(
            str(require_shared("param/linear_et.json.gz")),
            str(require_shared("param/linear_kineto.json.gz")),
            tmp_path / "x",
        )


# -- hand-made GPU traces --------------------------------------------------------------------------


def _gpu_pair(tmp_path: Path, events: list[dict], host_nodes: list[dict] | None = None):
    host_nodes = host_nodes or [host_node(2, "aten::mm", 1), host_node(3, "aten::item", 2)]
    host, device = write_trace_pair(tmp_path, host_nodes, events)
    return convert(load_host_trace(host), load_kineto_trace(device))


def _by_name(conversion) -> dict[str, Node]:
    return {n.name: n for n in conversion.nodes}


def test_kernels_of_one_stream_run_in_order(tmp_path: Path):
    conversion = _gpu_pair(
        tmp_path,
        [
            kineto_op("aten::mm", 1, 0, 20),
            kineto_launch(2, 10),
            kineto_kernel(5, 10, name="k1", dur=30),
            kineto_launch(8, 11),
            kineto_kernel(35, 11, name="k2"),
            kineto_op("aten::item", 2, 30, 5),
        ],
    )
    nodes = _by_name(conversion)
    assert nodes["k1"].id in nodes["k2"].data_deps
    assert nodes["aten::mm"].id in nodes["k1"].data_deps


def test_host_op_after_a_stream_synchronize_waits_for_the_kernel(tmp_path: Path):
    conversion = _gpu_pair(
        tmp_path,
        [
            kineto_op("aten::mm", 1, 0, 100),
            kineto_launch(2, 10),
            kineto_kernel(5, 10, name="k1", dur=80),
            kineto_launch(10, 12, name="cudaStreamSynchronize", dur=78),
            kineto_op("aten::item", 2, 100, 5),
        ],
    )
    (kernel,) = [n for n in conversion.nodes if n.name == "k1"]
    (mm,) = [n for n in conversion.nodes if n.name == "aten::mm" and get_attr(n, "part_of", None) is None]
    waiters = {n.name for n in conversion.nodes if kernel.id in n.data_deps}
    assert waiters == {"aten::mm"}  # the rest of aten::mm after the sync returned, then aten::item
    assert conversion.report.waits == 1
    assert mm.duration_micros < 20  # the wait is no longer part of the op's own time


def test_stream_wait_event_orders_one_stream_after_another(tmp_path: Path):
    args = {"correlation": 13, "stream": 9, "wait_on_stream": 7, "cuda_sync_kind": "Stream Wait Event"}
    wait = {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 9, "ts": 40, "dur": 1}
    wait["args"] = args
    conversion = _gpu_pair(
        tmp_path,
        [
            kineto_op("aten::mm", 1, 0, 20),
            kineto_launch(2, 10),
            kineto_kernel(5, 10, name="k_producer", dur=30, stream=7),
            kineto_launch(4, 13, name="cudaStreamWaitEvent"),
            wait,
            kineto_launch(6, 11),
            kineto_kernel(42, 11, name="k_consumer", stream=9),
        ],
    )
    nodes = _by_name(conversion)
    assert nodes["k_producer"].id in nodes["k_consumer"].data_deps
    assert conversion.report.dropped["synchronisation event (turned into dependencies)"] == 1


def test_nccl_kernel_becomes_the_collective_with_the_host_call_attributes(tmp_path: Path):
    call = host_node(2, "c10d::allreduce_", 1)
    call["inputs"] = {"values": [[[5, 6, 0, 1024, 4, "cuda:0"]], "<Object>"], "shapes": [[[1024]], []],
                      "types": ["GenericList[Tensor(float)]", "Object"]}  # fmt: skip
    conversion = _gpu_pair(
        tmp_path,
        [
            kineto_op("c10d::allreduce_", 1, 0, 20),
            kineto_launch(2, 10),
            kineto_kernel(5, 10, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL", dur=50, stream=20),
        ],
        host_nodes=[call],
    )
    (kernel,) = [n for n in conversion.nodes if n.type == COMM_COLL_NODE]
    assert kernel.name.startswith("ncclDevKernel")
    assert _attrs(kernel, "comm_type", "comm_size", "is_cpu_op", "pg_name") == (ALL_REDUCE, 4096, False, "0")


def test_ids_never_depend_on_a_later_start(gloo_workload):
    for path in gloo_workload.written.paths.values():
        _, nodes = io.read(path)
        starts = {n.id: (n.start_time_micros, -n.duration_micros) for n in nodes}
        for node in nodes:
            for dep in list(node.data_deps) + list(node.ctrl_deps):
                assert starts[dep][0] <= starts[node.id][0] or nodes[0].type == METADATA_NODE
    assert all(rep.edges_against_time == 0 for rep in gloo_workload.conversion.reports.values())


def test_tensor_data_dependencies_tie_consumers_to_the_transfers_that_wrote_their_tensors(gloo_traces: Path):
    host = load_host_trace(gloo_traces / "host.0.json")
    conversion = convert(host, load_kineto_trace(gloo_traces / "device.0.json"), data_deps=True)
    assert conversion.report.data_deps > 0
    by_id = {n.id: n for n in conversion.nodes}
    fed_by_comm = [n for n in conversion.nodes if any(by_id[d].type == COMM_COLL_NODE for d in n.data_deps)]
    assert fed_by_comm


def test_ranks_convert_the_same_on_a_dask_cluster(gloo_traces: Path, gloo_workload, tmp_path: Path):
    result = convert_workload(
        str(gloo_traces / "host.{rank}.json"),
        str(gloo_traces / "device.{rank}.json"),
        tmp_path / "dask",
        scheduler="local",
        workers=GLOO_RANKS,
    )
    for rank in range(GLOO_RANKS):
        assert result.written.paths[rank].read_bytes() == gloo_workload.written.paths[rank].read_bytes()


def test_ops_whose_cost_reads_their_values_are_each_costed_with_their_own(tmp_path: Path):
    # the same shapes and types twice (a cost kept for reuse), the transposed flag differing
    shapes = [[1, 8, 4, 4], [8, 2, 3, 3], [], [[], []], [[], []], [[], []], [], [[], []], []]
    types = ["Tensor(float)", "Tensor(float)", "Tensor(nullptr (uninitialized))", *["GenericList[Int,Int]"] * 3, "Bool",
             "GenericList[Int,Int]", "Int"]  # fmt: skip
    outputs = {"values": [[9, 9, 0, 32, 4, "cpu"]], "shapes": [[1, 8, 2, 2]], "types": ["Tensor(float)"]}
    nodes = [host_node(1, "[pytorch|profiler|execution_trace|process]", 0, parent=1)]
    for node_id, transposed in ((2, True), (3, False), (4, True)):
        node = host_node(node_id, "aten::convolution", node_id)
        values = [[1, 1, 0, 128, 4, "cpu"], [2, 2, 0, 144, 4, "cpu"], None, [2, 2], [0, 0], [1, 1], transposed,
                  [0, 0], 2]  # fmt: skip
        node.update(inputs={"values": values, "shapes": shapes, "types": types}, outputs=outputs)
        nodes.append(node)
    host_path, _ = write_trace_pair(tmp_path, nodes, [])
    conversion = convert(load_host_trace(host_path))
    expected = {
        transposed: op_cost("aten::convolution", shapes, types, outputs["shapes"], outputs["types"],
                            [None, None, None, [2, 2], [0, 0], [1, 1], transposed, [0, 0], 2]).num_ops
        for transposed in (True, False)
    }  # fmt: skip
    assert expected[True] != expected[False]
    costs = [get_attr(n, "num_ops") for n in sorted(conversion.nodes, key=lambda n: get_attr(n, "rf_id"))]
    assert costs == [expected[True], expected[False], expected[True]]


def test_an_op_whose_cost_reads_its_values_is_costed_once_for_each_values_it_repeats(tmp_path: Path, monkeypatch):
    shapes = [[1, 8, 4, 4], [8, 2, 3, 3], [], [[], []], [[], []], [[], []], [], [[], []], []]
    types = ["Tensor(float)", "Tensor(float)", "Tensor(nullptr (uninitialized))", *["GenericList[Int,Int]"] * 3, "Bool",
             "GenericList[Int,Int]", "Int"]  # fmt: skip
    outputs = {"values": [[9, 9, 0, 32, 4, "cpu"]], "shapes": [[1, 8, 2, 2]], "types": ["Tensor(float)"]}
    nodes = [host_node(1, "[pytorch|profiler|execution_trace|process]", 0, parent=1)]
    for node_id, transposed in ((2, True), (3, False), (4, True), (5, False), (6, True)):
        node = host_node(node_id, "aten::convolution", node_id)
        values = [None, None, None, [2, 2], [0, 0], [1, 1], transposed, [0, 0], 2]
        node.update(inputs={"values": values, "shapes": shapes, "types": types}, outputs=outputs)
        nodes.append(node)
    host_path, _ = write_trace_pair(tmp_path, nodes, [])
    costed = []
    real_cost_of = encode._cost_of
    monkeypatch.setattr(encode, "_cost_of", lambda host, types: costed.append(host.id) or real_cost_of(host, types))
    conversion = convert(load_host_trace(host_path))
    assert costed == [2, 3]  # the later convolutions repeat the first two's values
    assert len({get_attr(n, "num_ops") for n in conversion.nodes if n.name == "aten::convolution"}) == 2
