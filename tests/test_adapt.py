"""``chakra adapt``: what each change does to a workload, what it keeps, and what it reports."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import (
    assert_one_line_error,
    make_node,
    require_shared,
    run_cli,
    write_allreduce_workload,
    write_et,
)

from chakra import io
from chakra.adapt import Change, Target, adapt_workload
from chakra.attrs import get_attr
from chakra.groups import CommGroups, process_groups_values
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, CollectiveCommType, Node, NodeType
from chakra.validate import ERROR, WARNING, validate_set
from chakra.workload import open_workload

COLL, COMP = NodeType.COMM_COLL_NODE, NodeType.COMP_NODE


def _write(folder: Path, per_rank: dict[int, list[Node]]) -> Path:
    for rank, nodes in per_rank.items():
        write_et(folder / f"w.{rank}.et", nodes)
    return folder / "w"


def _nodes(path: Path) -> dict[int, Node]:
    return {n.id: n for n in io.read(path)[1]}


def _allreduce(node_id: int, *deps: int, **attrs) -> Node:
    attrs = {"is_cpu_op": False, "comm_type": CollectiveCommType.ALL_REDUCE, "comm_size": 64, **attrs}
    return make_node(node_id, f"ar{node_id}", COLL, data_deps=deps, **attrs)


def _metadata(node_id: int, groups: dict[int, tuple[int, ...]]) -> Node:
    node = make_node(node_id, "## process_group:init ##", NodeType.METADATA_NODE, is_cpu_op=True)
    node.inputs.values = process_groups_values(groups)
    return node


def _astra_problems(prefix: Path) -> list[str]:
    findings = validate_set(open_workload(prefix, whole=True), target="astra-sim")
    return [f"{f.code}: {f.message}" for f in findings if f.severity in (ERROR, WARNING)]


# -- what is kept ---------------------------------------------------------------------------------


def test_a_workload_that_needs_nothing_is_copied_byte_for_byte(tmp_path: Path):
    (tmp_path / "in").mkdir()
    prefix = write_allreduce_workload(tmp_path / "in", num_ranks=3, comm_groups={1: [0, 1, 2]})
    result = adapt_workload(prefix, tmp_path / "out" / "w", Target.ASTRA_SIM)
    assert result.changes.total == 0 and result.unchanged_ranks == [0, 1, 2]
    for rank in range(3):
        assert (tmp_path / "out" / f"w.{rank}.et").read_bytes() == Path(f"{prefix}.{rank}.et").read_bytes()
    assert (tmp_path / "out" / "w.comm_groups.json").read_bytes() == Path(f"{prefix}.comm_groups.json").read_bytes()


def test_nodes_that_do_not_change_keep_their_bytes_next_to_ones_that_do(tmp_path: Path):
    kept = [make_node(i, f"op{i}", COMP, [i - 1] if i else [], duration_micros=i) for i in range(4)]
    prefix = _write(tmp_path, {0: [*kept, _allreduce(9, 3, comm_type=CollectiveCommType.BARRIER)]})
    adapt_workload(prefix, tmp_path / "out", Target.ASTRA_SIM)
    source, written = Path(f"{prefix}.0.et").read_bytes(), (tmp_path / "out.0.et").read_bytes()
    unchanged_part = b"".join(io.frame(n.SerializeToString()) for n in kept)
    assert source.index(unchanged_part) == written.index(unchanged_part)  # metadata and nodes: same bytes
    assert written != source


# -- what changes ---------------------------------------------------------------------------------


def test_a_metadata_root_is_removed_and_its_groups_go_to_the_groups_file(tmp_path: Path):
    groups = {1: (0, 1), 2: (2, 3)}
    per_rank = {
        r: [_metadata(0, groups), _allreduce(1, ctrl_deps=[0], pg_name="1" if r < 2 else "2")] for r in range(4)
    }
    result = adapt_workload(_write(tmp_path, per_rank), tmp_path / "out", Target.ASTRA_SIM)
    assert result.changes.counts[Change.METADATA_NODE_REMOVED] == 4
    assert list(_nodes(tmp_path / "out.0.et")) == [1] and list(_nodes(tmp_path / "out.0.et")[1].ctrl_deps) == []
    assert dict(CommGroups.read(tmp_path / "out.comm_groups.json")) == groups
    assert _astra_problems(tmp_path / "out") == []


def test_dependents_of_a_removed_node_wait_for_its_dependencies_through_chains(tmp_path: Path):
    nodes = [
        make_node(1, "a", COMP, duration_micros=5),
        make_node(2, "meta", NodeType.METADATA_NODE, data_deps=[1]),
        make_node(3, "nothing", NodeType.INVALID_NODE, ctrl_deps=[2]),
        make_node(4, "b", COMP, data_deps=[3], duration_micros=5),
    ]
    result = adapt_workload(_write(tmp_path, {0: nodes}), tmp_path / "out", Target.ASTRA_SIM)
    after = _nodes(tmp_path / "out.0.et")
    assert sorted(after) == [1, 4] and list(after[4].data_deps) == [1]
    assert result.changes.counts[Change.INVALID_NODE_REMOVED] == 1


def test_a_dependent_written_before_the_removed_node_it_waits_for_inherits_its_dependencies(tmp_path: Path):
    nodes = [
        make_node(4, "b", COMP, data_deps=[2]),
        make_node(2, "meta", NodeType.METADATA_NODE, ctrl_deps=[1]),
        make_node(1, "a", COMP),
    ]
    adapt_workload(_write(tmp_path, {0: nodes}), tmp_path / "out", Target.ASTRA_SIM)
    assert list(_nodes(tmp_path / "out.0.et")[4].data_deps) == [1]


def test_dependencies_on_later_nodes_without_a_cycle_are_left_as_they_are(tmp_path: Path):
    nodes = [make_node(3, "c", COMP, data_deps=[1, 2]), make_node(2, "b", COMP, ctrl_deps=[1]), make_node(1, "a", COMP)]
    prefix = _write(tmp_path, {0: nodes})
    result = adapt_workload(prefix, tmp_path / "out", Target.ASTRA_SIM)
    assert result.changes.total == 0
    assert (tmp_path / "out.0.et").read_bytes() == Path(f"{prefix}.0.et").read_bytes()


@pytest.mark.parametrize(
    ("recorded", "stand_in"),
    [("BARRIER", "ALL_REDUCE"), ("REDUCE", "ALL_REDUCE"), ("GATHER", "ALL_GATHER"), ("SCATTER", "REDUCE_SCATTER"),
     ("REDUCE_SCATTER_BLOCK", "REDUCE_SCATTER")],
)  # fmt: skip
def test_a_refused_collective_is_written_as_its_stand_in_keeping_the_type_that_ran(
    tmp_path: Path, recorded: str, stand_in: str
):
    node = _allreduce(1, comm_type=CollectiveCommType.Value(recorded))
    result = adapt_workload(_write(tmp_path, {0: [node]}), tmp_path / "out", Target.ASTRA_SIM)
    written = _nodes(tmp_path / "out.0.et")[1]
    assert CollectiveCommType.Name(get_attr(written, "comm_type")) == stand_in
    assert CollectiveCommType.Name(get_attr(written, "recorded_comm_type")) == recorded
    assert result.changes.details[Change.STAND_IN] == {f"{recorded} as {stand_in}": 1}


def test_dependencies_on_missing_ids_are_dropped_and_counted_by_field(tmp_path: Path):
    nodes = [make_node(1, "a", COMP, ctrl_deps=[77]), make_node(2, "b", COMP, data_deps=[1, 78], ctrl_deps=[79])]
    result = adapt_workload(_write(tmp_path, {0: nodes}), tmp_path / "out", Target.ASTRA_SIM)
    after = _nodes(tmp_path / "out.0.et")
    assert (list(after[1].ctrl_deps), list(after[2].data_deps), list(after[2].ctrl_deps)) == ([], [1], [])
    assert result.changes.details[Change.MISSING_DEP_DROPPED] == {"ctrl_deps": 2, "data_deps": 1}


def test_cycles_are_broken_at_the_dependency_on_a_later_node_and_named(tmp_path: Path):
    nodes = [
        make_node(1, "a", COMP, ctrl_deps=[2]),
        make_node(2, "b", COMP, data_deps=[1]),
        make_node(3, "c", COMP, data_deps=[2], ctrl_deps=[3]),
    ]
    result = adapt_workload(_write(tmp_path, {0: nodes}), tmp_path / "out", Target.ASTRA_SIM)
    assert result.changes.details[Change.CYCLE_EDGE_DROPPED] == {"1 -> 2 (ctrl_deps)": 1, "3 -> 3 (ctrl_deps)": 1}
    after = _nodes(tmp_path / "out.0.et")
    assert list(after[2].data_deps) == [1] and list(after[3].data_deps) == [2]
    assert _astra_problems(tmp_path / "out") == []


def test_attributes_are_rewritten_into_the_member_consumers_read_in_place(tmp_path: Path):
    node = _allreduce(1)
    node.attr[2].ClearField("int64_val")
    node.attr[2].uint64_val = 4096  # comm_size
    node.attr[0].string_val = "false"  # is_cpu_op
    node.attr.append(AttributeProto(name="comm_priority", double_val=1.5))  # not readable: left as it is
    result = adapt_workload(_write(tmp_path, {0: [node]}), tmp_path / "out", Target.ASTRA_SIM)
    written = _nodes(tmp_path / "out.0.et")[1]
    assert [(a.name, a.WhichOneof("value")) for a in written.attr] == [
        ("is_cpu_op", "bool_val"), ("comm_type", "int64_val"), ("comm_size", "int64_val"),
        ("comm_priority", "double_val"),
    ]  # fmt: skip
    assert get_attr(written, "comm_size") == 4096 and get_attr(written, "is_cpu_op") is False
    assert result.changes.details[Change.ATTR_MEMBER] == {
        "comm_size: uint64_val -> int64_val": 1,
        "is_cpu_op: string_val -> bool_val": 1,
    }


def test_host_ops_typed_as_communication_become_cpu_compute(tmp_path: Path):
    launcher = make_node(1, "c10d::allreduce_(0)", COLL, is_cpu_op=True, duration_micros=85)
    result = adapt_workload(_write(tmp_path, {0: [launcher, _allreduce(2, 1)]}), tmp_path / "out", Target.ASTRA_SIM)
    written = _nodes(tmp_path / "out.0.et")
    assert written[1].type == COMP and get_attr(written[1], "recorded_node_type") == COLL
    assert written[1].duration_micros == 85 and get_attr(written[1], "is_cpu_op") is True
    assert result.changes.counts[Change.CPU_COMM_AS_COMPUTE] == 1


def test_a_complete_collective_marked_as_cpu_work_moves_to_the_device(tmp_path: Path):
    result = adapt_workload(_write(tmp_path, {0: [_allreduce(1, is_cpu_op=True)]}), tmp_path / "out", Target.ASTRA_SIM)
    assert get_attr(_nodes(tmp_path / "out.0.et")[1], "is_cpu_op") is False
    assert result.changes.details[Change.COMM_OFF_CPU] == {"COMM_COLL_NODE": 1}


def _pair_then_world(tmp_path: Path) -> Path:
    """Ranks 0 and 1 all-reduce in their pair, then all four all-reduce: ASTRA-sim hangs on it."""
    per_rank = {
        r: ([_allreduce(1, pg_name="1")] if r < 2 else []) + [_allreduce(2, *([1] if r < 2 else []))] for r in range(4)
    }
    prefix = _write(tmp_path, per_rank)
    CommGroups({1: (0, 1)}).write(tmp_path / "w.comm_groups.json")
    return prefix


def test_uneven_subgroup_collectives_before_a_world_one_are_an_astra_sim_error(tmp_path: Path):
    codes = {f.code for f in validate_set(open_workload(_pair_then_world(tmp_path), whole=True), target="astra-sim")}
    assert "astra-world-collective-tags" in codes


def test_then_the_world_collectives_get_an_explicit_group_of_every_rank(tmp_path: Path):
    result = adapt_workload(_pair_then_world(tmp_path), tmp_path / "out", Target.ASTRA_SIM)
    assert result.changes.counts[Change.WORLD_GROUP] == 4
    assert dict(CommGroups.read(tmp_path / "out.comm_groups.json")) == {1: (0, 1), 2: (0, 1, 2, 3)}
    assert get_attr(_nodes(tmp_path / "out.3.et")[2], "pg_name") == "2"
    assert get_attr(_nodes(tmp_path / "out.0.et")[1], "pg_name") == "1"
    assert _astra_problems(tmp_path / "out") == []


def test_even_subgroup_collectives_leave_the_world_ones_alone(tmp_path: Path):
    per_rank = {r: [_allreduce(1, pg_name=str(1 + r // 2)), _allreduce(2, 1)] for r in range(4)}
    prefix = _write(tmp_path, per_rank)
    CommGroups({1: (0, 1), 2: (2, 3)}).write(tmp_path / "w.comm_groups.json")
    assert adapt_workload(prefix, tmp_path / "out", Target.ASTRA_SIM).changes.total == 0


def test_compressed_ranks_are_written_plain_and_in_place_adapting_replaces_them(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, num_ranks=2, suffix=".et.gz")
    result = adapt_workload(prefix, prefix, Target.ASTRA_SIM)
    assert result.changes.counts[Change.DECOMPRESSED] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workload.0.et", "workload.1.et"]
    assert sorted(p.name for p in result.removed) == ["workload.0.et.gz", "workload.1.et.gz"]
    assert _astra_problems(prefix) == []


def test_every_finding_adapt_fixes_names_it_and_is_gone_after_it(tmp_path: Path):
    odd_size = _allreduce(6, 5)
    odd_size.attr[2].uint64_val = 64  # comm_size in another integer member: a warning
    text_flag = _allreduce(7, 6)
    text_flag.attr[0].string_val = "false"  # is_cpu_op as text: an error
    nodes = [
        _metadata(1, {}),
        make_node(2, "nothing", NodeType.INVALID_NODE, ctrl_deps=[1]),
        _allreduce(3, 2, comm_type=CollectiveCommType.BARRIER),
        make_node(4, "a", COMP, data_deps=[3, 99], ctrl_deps=[5]),  # 99 is missing; 4 <-> 5 a cycle
        make_node(5, "b", COMP, data_deps=[4]),
        odd_size,
        text_flag,
        make_node(8, "c10d::allreduce_(0)", COLL, [7], is_cpu_op=True),
    ]
    write_et(tmp_path / "w.0.et.gz", nodes)
    findings = validate_set(open_workload(tmp_path / "w", whole=True), target="astra-sim", limit_per_code=None)
    flagged = [f for f in findings if f.severity in (ERROR, WARNING)]
    assert {f.code for f in flagged} == {
        "astra-compressed", "astra-metadata-node", "astra-invalid-node", "astra-unsupported-collective",
        "missing-data-dep", "cycle", "unreachable", "attr-kind", "comm-on-cpu", "comm-missing-attr",
    }  # fmt: skip
    assert [f.code for f in flagged if "chakra adapt" not in f.hint] == []
    adapt_workload(tmp_path / "w", tmp_path / "out", Target.ASTRA_SIM)
    assert _astra_problems(tmp_path / "out") == []


# -- real inputs ----------------------------------------------------------------------------------


def test_upstreams_sample_trace_validates_clean_after_adapting_with_each_change_listed(
    upstream_et: Path, tmp_path: Path
):
    result = adapt_workload(upstream_et, tmp_path / "up", Target.ASTRA_SIM)
    changes = result.changes
    assert changes.counts[Change.MISSING_DEP_DROPPED] == 1277
    assert "3317 -> 3318 (ctrl_deps)" in changes.details[Change.CYCLE_EDGE_DROPPED]
    assert changes.counts[Change.CPU_COMM_AS_COMPUTE] == 14  # c10d::allreduce_(0) etc.: host ops
    assert _astra_problems(tmp_path / "up") == []
    assert len(io.read(tmp_path / "up.0.et")[1]) == len(io.read(upstream_et)[1])


# -- the command ----------------------------------------------------------------------------------


def test_the_command_prints_each_change_and_writes_the_report(tmp_path: Path):
    prefix = _write(tmp_path, {0: [_metadata(0, {1: (0,)}), _allreduce(1, 0, comm_type=CollectiveCommType.BARRIER)]})
    result = run_cli("adapt", str(prefix), "-o", str(tmp_path / "out"), "--report", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stderr
    assert "metadata-node-removed" in result.stdout and "BARRIER as ALL_REDUCE" in result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["changes"]["collective-stand-in"]["count"] == 1 and report["target"] == "astra-sim"


def test_the_command_lists_its_targets_in_its_help():
    assert "astra-sim" in run_cli("adapt", "--help").stdout


def test_a_missing_workload_is_one_line_naming_it(tmp_path: Path):
    assert_one_line_error(run_cli("adapt", str(tmp_path / "none"), "-o", str(tmp_path / "out")), "none")


@pytest.mark.parametrize(
    ("host", "device"),
    [
        ("upstream-chakra/1.0.2-chakra.0.0.4.json", None),
        ("param/linear_et.json.gz", None),
        ("param/resnet_1gpu_et.json.gz", None),
        ("param/resnet_2gpu_et.json.gz", None),
        ("hta/benchmark_simple_add_et.json.gz", "hta/benchmark_simple_add_trace.json.gz"),
    ],
)
def test_every_shared_host_trace_converted_and_adapted_for_astra_sim_validates_clean(
    host: str, device: str | None, tmp_path
):
    convert_workload(str(require_shared(host)), str(require_shared(device)) if device else None, tmp_path / "x")
    before = Counter(f.code for f in validate_set(open_workload(tmp_path / "x", whole=True), target="astra-sim",
                                                  limit_per_code=None) if f.severity == ERROR)  # fmt: skip
    changes = adapt_workload(tmp_path / "x", tmp_path / "astra", Target.ASTRA_SIM).changes.counts
    # the report lists what validate refused, one change per finding
    assert changes[Change.METADATA_NODE_REMOVED] == before["astra-metadata-node"]
    assert changes[Change.STAND_IN] == before["astra-unsupported-collective"]
    problems = _astra_problems(tmp_path / "astra")
    if device is None:  # host-only: no durations, and ASTRA-sim replays a broadcast for its duration
        problems = [p for p in problems if not p.startswith("astra-broadcast-replay")]
    if host == "param/resnet_2gpu_et.json.gz":  # rank 1 of a 2-rank job: its workload lacks rank 0
        assert "missing-rank: no file for rank(s) 0" in problems
        problems.remove("missing-rank: no file for rank(s) 0")
    assert problems == []
