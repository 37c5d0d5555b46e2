"""chakra.validate: every check finds its problem, and a clean workload has no errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from helpers import make_node

from chakra.groups import CommGroups, group_id
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, GlobalMetadata, Node, NodeType
from chakra.trace import Trace
from chakra.validate import (
    ERROR,
    INFO,
    WARNING,
    count_by_severity,
    validate_file,
    validate_set,
    validate_trace,
)
from chakra.workload import Workload, open_workload


def _codes(findings, severity=None):
    return {f.code for f in findings if severity is None or f.severity == severity}


def _trace(*nodes: Node, path: str | None = None) -> Trace:
    return Trace(GlobalMetadata(version="1.0.0"), nodes, path)


def _comp(node_id: int, *deps: int, **attrs) -> Node:
    return make_node(node_id, f"comp{node_id}", NodeType.COMP_NODE, data_deps=deps, is_cpu_op=False, **attrs)


def _allreduce(node_id: int, *deps: int, size: int = 1024, **attrs) -> Node:
    return make_node(
        node_id,
        f"ar{node_id}",
        NodeType.COMM_COLL_NODE,
        data_deps=deps,
        is_cpu_op=False,
        comm_type=CollectiveCommType.ALL_REDUCE,
        comm_size=size,
        **attrs,
    )


def test_clean_trace_has_no_findings():
    assert validate_trace(_trace(_comp(0), _comp(1, 0), _allreduce(2, 1)), target="astra-sim") == []


def test_duplicate_ids_are_errors():
    assert "duplicate-id" in _codes(validate_trace(_trace(_comp(1), _comp(1))), ERROR)


def test_data_dep_on_missing_node_is_an_error():
    findings = validate_trace(_trace(_comp(0), _comp(1, 7)))
    (finding,) = [f for f in findings if f.code == "missing-data-dep"]
    assert finding.node_id == 1 and "7" in finding.message


def test_ctrl_dep_on_missing_node_is_an_error():
    node = _comp(1)
    node.ctrl_deps.append(99)
    assert "missing-ctrl-dep" in _codes(validate_trace(_trace(_comp(0), node)), ERROR)


def test_cycle_is_reported_with_its_nodes():
    findings = validate_trace(_trace(_comp(0), _comp(1, 0, 3), _comp(2, 1), _comp(3, 2)))
    (cycle,) = [f for f in findings if f.code == "cycle"]
    assert "3 nodes" in cycle.message


def test_cycle_through_ctrl_deps_counts_because_feederv3_waits_on_them():
    a, b = _comp(1, 2), _comp(2)
    b.ctrl_deps.append(1)
    assert "cycle" in _codes(validate_trace(_trace(_comp(0), a, b)), ERROR)


def test_deep_cycle_is_found_without_recursion_limits():
    n = 50_000
    nodes = [_comp(0, n - 1)] + [_comp(i, i - 1) for i in range(1, n)]
    findings = validate_trace(_trace(*nodes))
    assert any(f.code == "cycle" and f"{n} nodes" in f.message for f in findings)


def test_nodes_behind_a_cycle_are_unreachable():
    findings = validate_trace(_trace(_comp(0), _comp(1, 2), _comp(2, 1), _comp(3, 2)), limit_per_code=None)
    assert [f.node_id for f in findings if f.code == "unreachable"] == [3]


def test_comm_size_as_uint64_is_flagged_for_the_v2_feeder():
    node = _allreduce(0)
    attr = next(a for a in node.attr if a.name == "comm_size")
    attr.uint64_val = 1024
    findings = validate_trace(_trace(node))
    assert any(f.code == "attr-kind" and f.severity == WARNING and "comm_size" in f.message for f in findings)


def test_float_in_an_integer_attribute_is_an_error():
    node = _allreduce(0)
    next(a for a in node.attr if a.name == "comm_size").double_val = 1024.0
    assert "attr-kind" in _codes(validate_trace(_trace(node)), ERROR)


def test_involved_dim_in_another_member_is_an_error():
    node = _allreduce(0)
    node.attr.add(name="involved_dim").int32_list.values.extend([1, 1])
    assert "attr-kind" in _codes(validate_trace(_trace(node)), ERROR)


def test_collective_without_type_or_size_is_an_error():
    node = make_node(0, "ar", NodeType.COMM_COLL_NODE, is_cpu_op=False)
    findings = validate_trace(_trace(node), limit_per_code=None)
    assert sum(f.code == "comm-missing-attr" for f in findings) == 2


def test_send_without_destination_is_an_error():
    node = make_node(0, "send", NodeType.COMM_SEND_NODE, is_cpu_op=False, comm_size=8)
    assert "p2p-missing-peer" in _codes(validate_trace(_trace(node)), ERROR)


def test_recv_without_source_is_an_error():
    node = make_node(0, "recv", NodeType.COMM_RECV_NODE, is_cpu_op=False, comm_size=8)
    assert "p2p-missing-peer" in _codes(validate_trace(_trace(node)), ERROR)


def test_comm_node_marked_cpu_is_an_error():
    node = _allreduce(0)
    next(a for a in node.attr if a.name == "is_cpu_op").bool_val = True
    assert "comm-on-cpu" in _codes(validate_trace(_trace(node)), ERROR)


@pytest.mark.parametrize(
    "groups",
    [
        "[{pg_name: 0}]",  # not JSON
        '[{"pg_name": 1, "ranks": [0, 1]}]',  # pg_name must be a string
        '[{"pg_name": "1"}]',  # ranks missing
        '[{"pg_name": "1", "ranks": ["0", 1.5]}]',  # ranks must be integers
    ],
)
def test_process_group_metadata_that_astra_sim_cannot_parse_is_an_error_for_astra(groups):
    node = make_node(0, "## process_group:init ##", NodeType.METADATA_NODE, is_cpu_op=True)
    node.inputs.values = f"['{groups}']"
    assert "metadata-parse" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)
    assert "metadata-parse" in _codes(validate_trace(_trace(node)), WARNING)


def test_process_group_metadata_in_the_converter_wrapping_parses():
    node = make_node(0, "## process_group:init ##", NodeType.METADATA_NODE, is_cpu_op=True)
    node.inputs.values = (
        '[\'[{"pg_name": "0", "backend_id": 1, "backend_config": "cuda:nccl", "ranks": [], '
        '"group_size": 2, "group_count": 1}]\']'
    )
    assert "metadata-parse" not in _codes(validate_trace(_trace(node)))


def test_empty_metadata_is_a_warning():
    trace = Trace(GlobalMetadata(), [_comp(0)])
    assert "empty-metadata" in _codes(validate_trace(trace), WARNING)


def test_findings_beyond_the_limit_are_summed_in_one_line():
    nodes = [_comp(0)] + [_comp(i, 10_000 + i) for i in range(1, 31)]
    findings = [f for f in validate_trace(_trace(*nodes), limit_per_code=5) if f.code == "missing-data-dep"]
    assert len(findings) == 6 and findings[-1].count == 25
    assert count_by_severity(findings)[ERROR] == 30


# -- astra-sim target -----------------------------------------------------------------------


def test_astra_target_rejects_collectives_it_does_not_simulate():
    node = _allreduce(0)
    next(a for a in node.attr if a.name == "comm_type").int64_val = CollectiveCommType.REDUCE
    assert "astra-unsupported-collective" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)
    assert "astra-unsupported-collective" not in _codes(validate_trace(_trace(node)))


def test_astra_target_rejects_non_numeric_pg_name():
    node = _allreduce(0, pg_name="tp_group")
    assert "astra-pg-name" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)


@pytest.mark.parametrize(("pg_name", "group"), [("", None), ("0", None), ("00", 0), (" 1", 1), ("+2", 2), ("3x", 3)])
def test_pg_name_is_read_like_astra_sims_stoi(pg_name, group):
    assert group_id(pg_name) == group


@pytest.mark.parametrize("pg_name", ["tp_group", "²", "--5", "99999999999"])
def test_pg_name_that_stoi_refuses_is_an_error_for_astra(pg_name):
    node = _allreduce(0, pg_name=pg_name)
    assert "astra-pg-name" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)


def test_a_group_id_whose_collective_tags_overflow_astra_sim_is_a_warning():
    too_large = validate_trace(_trace(_allreduce(0, pg_name="2148")), target="astra-sim")
    assert "astra-group-id" in _codes(too_large, WARNING)
    assert "astra-group-id" not in _codes(validate_trace(_trace(_allreduce(0, pg_name="2147")), target="astra-sim"))


def test_astra_target_wants_a_definition_for_every_group():
    node = _allreduce(0, pg_name="3")
    assert "astra-unknown-group" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)
    assert validate_trace(_trace(node), target="astra-sim", comm_groups={3: [0, 1]}) == []


def test_astra_target_needs_comm_tag_on_send_and_recv():
    node = make_node(0, "send", NodeType.COMM_SEND_NODE, is_cpu_op=False, comm_size=8, comm_dst=1)
    assert "astra-missing-attr" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)


def test_astra_target_checks_the_senders_own_rank():
    node = make_node(
        0, "send", NodeType.COMM_SEND_NODE, is_cpu_op=False, comm_size=8, comm_dst=1, comm_tag=0, comm_src=3
    )
    findings = validate_trace(_trace(node), target="astra-sim", rank=0)
    assert "astra-p2p-own-rank" in _codes(findings, ERROR)


def test_astra_target_needs_tensor_size_on_memory_nodes():
    node = make_node(0, "load", NodeType.MEM_LOAD_NODE, is_cpu_op=False)
    assert "astra-missing-attr" in _codes(validate_trace(_trace(node), target="astra-sim"), ERROR)


def test_astra_target_needs_a_dependency_free_node():
    assert "astra-no-root" in _codes(validate_trace(_trace(), target="astra-sim"), ERROR)


def test_astra_target_notes_cpu_nodes_break_overlap_statistics():
    node = make_node(0, "aten::mm", NodeType.COMP_NODE, is_cpu_op=True)
    assert "astra-overlap-stats" in _codes(validate_trace(_trace(node), target="astra-sim"), INFO)


def test_astra_target_rejects_compressed_files(tmp_path: Path):
    path = tmp_path / "w.0.et.gz"
    _trace(_comp(0)).save(path)
    assert "astra-compressed" in _codes(validate_file(path, target="astra-sim"), ERROR)


# -- files and workloads --------------------------------------------------------------------


def test_unparsable_file_is_one_format_error(tmp_path: Path):
    path = tmp_path / "w.0.et"
    path.write_bytes(b"\x05\x0a\x03abc\x7f\x01")
    (finding,) = validate_file(path)
    assert finding.code == "format" and finding.severity == ERROR


def _write_workload(tmp_path: Path, per_rank: dict[int, list[Node]]) -> Workload:
    for rank, nodes in per_rank.items():
        _trace(*nodes).save(tmp_path / f"w.{rank}.et")
    return open_workload(tmp_path / "w", whole=True)


def _p2p(node_id: int, kind: int, src: int, dst: int, size: int = 64, tag: int = 0) -> Node:
    return make_node(node_id, "p2p", kind, is_cpu_op=False, comm_src=src, comm_dst=dst, comm_size=size, comm_tag=tag)


def test_matched_send_and_recv_across_ranks_are_clean(tmp_path: Path):
    workload = _write_workload(
        tmp_path, {0: [_p2p(0, NodeType.COMM_SEND_NODE, 0, 1)], 1: [_p2p(0, NodeType.COMM_RECV_NODE, 0, 1)]}
    )
    assert validate_set(workload, target="astra-sim") == []


def test_send_whose_receive_has_another_size_is_unmatched(tmp_path: Path):
    workload = _write_workload(
        tmp_path,
        {0: [_p2p(0, NodeType.COMM_SEND_NODE, 0, 1, size=64)], 1: [_p2p(0, NodeType.COMM_RECV_NODE, 0, 1, size=32)]},
    )
    assert sum(f.code == "unmatched-p2p" for f in validate_set(workload)) == 2


def test_ranks_issuing_different_collectives_are_reported(tmp_path: Path):
    workload = _write_workload(tmp_path, {0: [_allreduce(0), _allreduce(1, 0)], 1: [_allreduce(0)]})
    assert "collective-mismatch" in _codes(validate_set(workload), ERROR)


def test_collectives_of_a_subgroup_are_compared_among_its_members_only(tmp_path: Path):
    _write_workload(tmp_path, {0: [_allreduce(0, pg_name="1")], 1: [_allreduce(0, pg_name="1")], 2: [_comp(0)]})
    CommGroups({1: [0, 1]}).write(tmp_path / "w.comm_groups.json")
    assert validate_set(open_workload(tmp_path / "w", whole=True), target="astra-sim") == []


def _gather(node_id: int, *deps: int, **attrs) -> Node:
    return make_node(
        node_id,
        f"ag{node_id}",
        NodeType.COMM_COLL_NODE,
        data_deps=deps,
        is_cpu_op=False,
        comm_type=CollectiveCommType.ALL_GATHER,
        comm_size=64,
        **attrs,
    )


def test_collective_order_is_astra_sims_issue_order_by_id_not_file_order(tmp_path: Path):
    """Both ranks list all-reduce then all-gather, but rank 1's ids make ASTRA-sim issue the
    all-gather first: a tag mismatch that hangs the simulation."""
    workload = _write_workload(tmp_path, {0: [_allreduce(1), _gather(2)], 1: [_allreduce(2), _gather(1)]})
    assert "collective-mismatch" in _codes(validate_set(workload), ERROR)


def test_same_issue_order_in_a_different_file_order_is_clean(tmp_path: Path):
    workload = _write_workload(tmp_path, {0: [_allreduce(1), _gather(2)], 1: [_gather(2), _allreduce(1)]})
    assert validate_set(workload) == []


def _pg_metadata(groups: str) -> Node:
    node = make_node(0, "## process_group:init ##", NodeType.METADATA_NODE, is_cpu_op=True)
    node.inputs.values = f"['{groups}']"
    return node


def test_groups_defined_by_metadata_nodes_limit_who_must_issue_their_collectives(tmp_path: Path):
    groups = '[{"pg_name": "1", "ranks": [0, 1]}, {"pg_name": "2", "ranks": [2, 3]}]'
    per_rank = {r: [_pg_metadata(groups), _allreduce(1, pg_name="1" if r < 2 else "2")] for r in range(4)}
    findings = validate_set(_write_workload(tmp_path, per_rank), target="astra-sim")
    assert {f.code for f in findings if f.severity == ERROR} == {"astra-metadata-node"}  # the groups themselves hold


def test_a_metadata_node_is_an_astra_sim_error_naming_chakra_adapt(tmp_path: Path):
    per_rank = {r: [_pg_metadata('[{"pg_name": "0", "ranks": []}]'), _allreduce(1)] for r in range(2)}
    findings = validate_set(_write_workload(tmp_path, per_rank), target="astra-sim")
    (finding,) = [f for f in findings if f.rank == 0 and f.severity == ERROR]
    assert (finding.code, finding.node_id) == ("astra-metadata-node", 0)
    assert "chakra adapt" in finding.hint


def test_an_invalid_node_is_an_astra_sim_error_it_may_stall_on(tmp_path: Path):
    per_rank = {r: [make_node(0, "nothing", NodeType.INVALID_NODE), _allreduce(1)] for r in range(2)}
    findings = validate_set(_write_workload(tmp_path, per_rank), target="astra-sim")
    assert {(f.code, f.node_id) for f in findings if f.severity == ERROR} == {("astra-invalid-node", 0)}


def test_rank_issuing_collectives_of_a_group_it_is_not_in_is_reported(tmp_path: Path):
    CommGroups({1: [0, 1]}).write(tmp_path / "w.comm_groups.json")
    workload = _write_workload(tmp_path, {r: [_allreduce(0, pg_name="1")] for r in range(3)})
    assert "collective-non-member" in _codes(validate_set(workload), ERROR)


def test_single_rank_file_uses_the_comm_groups_file_beside_it(tmp_path: Path):
    CommGroups({1: [0, 1]}).write(tmp_path / "w.comm_groups.json")
    _trace(_allreduce(0, pg_name="1")).save(tmp_path / "w.0.et")
    assert validate_file(tmp_path / "w.0.et", target="astra-sim") == []


def test_missing_rank_file_is_reported(tmp_path: Path):
    workload = _write_workload(tmp_path, {0: [_comp(0)], 2: [_comp(0)]})
    findings = validate_set(workload, target="astra-sim")
    assert any(f.code == "missing-rank" and "1" in f.message for f in findings)


# -- real traces ----------------------------------------------------------------------------


def test_upstream_2023_trace_shows_its_known_defects(upstream_et: Path):
    """The upstream converter's test trace has the bugs the reference lists: dangling ctrl deps to
    the removed root, a ctrl/data cycle, and comm nodes flagged as CPU ops without comm attributes."""
    codes = _codes(validate_file(upstream_et), ERROR)
    assert {"missing-ctrl-dep", "cycle", "comm-on-cpu", "comm-missing-attr"} <= codes


def test_upstream_trace_read_from_gzip_validates_the_same(shared_data: Path, upstream_et: Path):
    gz = shared_data / "upstream-chakra" / "chakra.0.et.gz"
    assert gzip.decompress(gz.read_bytes()) == upstream_et.read_bytes()
    assert {f.code for f in validate_file(gz)} == {f.code for f in validate_file(upstream_et)}


@pytest.mark.parametrize("target", [None, "astra-sim"])
def test_demo_workload_is_clean(tmp_path: Path, target):
    from handmade import build_workload

    prefix = build_workload(tmp_path)
    findings = validate_set(open_workload(prefix, whole=True), target=target)
    assert count_by_severity(findings)[ERROR] == 0, findings


def test_streaming_validation_finds_what_in_memory_validation_finds(upstream_et: Path):
    from chakra import io
    from chakra.validate import validate_nodes

    with io.EtReader(upstream_et) as reader:
        streamed = validate_nodes(reader.metadata, reader, path=upstream_et, target="astra-sim")
    assert streamed == validate_trace(Trace.load(upstream_et), target="astra-sim")


def test_a_corrupt_rank_is_a_format_error_and_the_others_are_still_checked(tmp_path: Path):
    workload = _write_workload(tmp_path, {0: [_allreduce(0)], 1: [_allreduce(0)]})
    path = workload.files[1]
    path.write_bytes(path.read_bytes()[:-2])
    (finding,) = validate_set(workload)
    assert (finding.rank, finding.code) == (1, "format")
    assert "byte" in finding.message and "node #0" in finding.message
