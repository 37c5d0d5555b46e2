"""Group inference on a real gloo job of nested process groups (examples/collect_gloo.py --groups).

Gloo traces do not say which group ran a collective; the converter infers it. The job has the
world, data parallel pairs {0,2} {1,3}, tensor parallel pairs {0,1} {2,3} and a trio {0,1,2}, and
issues every collective gloo runs on each, with non-zero roots, some ranks sleeping before others
(``program.{rank}.json`` says what each rank issued, in order). The k-th collective of a rank's
converted file is the k-th it issued (the calls are synchronous); its ``pg_name`` must name the
group that ran it, and its ``comm_root`` the root as a global rank. Collective types are not
checked here (how stand-ins are written is another matter).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import GLOO_GROUPS_RANKS

from chakra import io
from chakra.attrs import get_attr
from chakra.pytorch.comms import comm_kind
from chakra.pytorch.groups import ALIGNED, AMBIGUOUS_LARGEST, DEFAULT_GROUP
from chakra.pytorch.host import load_host_trace
from chakra.pytorch.workload import PyTorchResult, convert_workload
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, Node

WORLD_RANKS = list(range(GLOO_GROUPS_RANKS))
#: The subgroups the job creates (examples/collect_gloo.py SUBGROUPS), as sorted global ranks.
SUBGROUPS = [[0, 1], [0, 1, 2], [0, 2], [1, 3], [2, 3]]


@pytest.fixture(scope="module")
def groups_workload(gloo_groups_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> PyTorchResult:
    out = tmp_path_factory.mktemp("groups_converted") / "job"
    return convert_workload(
        str(gloo_groups_traces / "host.{rank}.json"), str(gloo_groups_traces / "device.{rank}.json"), out
    )


def _program(traces: Path, rank: int) -> list[dict[str, Any]]:
    """What ``rank`` issued in the recorded step: ``{"call", "group", "ranks", "root"}`` each."""
    return json.loads((traces / f"program.{rank}.json").read_text())


def _collectives(path: Path) -> list[Node]:
    """A rank's collective nodes in the order they ran."""
    _, nodes = io.read(path)
    return sorted((n for n in nodes if n.type == COMM_COLL_NODE), key=lambda n: (n.start_time_micros, n.id))


def _members(pg_name: str, comm_groups: dict[str, list[int]]) -> list[int]:
    return WORLD_RANKS if pg_name == DEFAULT_GROUP else sorted(comm_groups[pg_name])


@pytest.mark.parametrize("rank", WORLD_RANKS)
def test_each_collective_is_written_in_the_order_the_rank_issued_it(groups_workload, gloo_groups_traces, rank: int):
    issued = [comm_kind(p["call"]) for p in _program(gloo_groups_traces, rank)]
    written = [comm_kind(get_attr(n, "comm_call")) for n in _collectives(groups_workload.written.paths[rank])]
    assert written == issued


@pytest.mark.parametrize("rank", WORLD_RANKS)
def test_every_collective_names_the_group_that_ran_it(groups_workload, gloo_groups_traces, rank: int):
    comm_groups = json.loads(groups_workload.written.groups_path.read_text())
    program = _program(gloo_groups_traces, rank)
    collectives = _collectives(groups_workload.written.paths[rank])
    got = [
        (p["call"], _members(get_attr(n, "pg_name"), comm_groups)) for p, n in zip(program, collectives, strict=True)
    ]
    assert got == [(p["call"], sorted(p["ranks"])) for p in program]


@pytest.mark.parametrize("rank", WORLD_RANKS)
def test_roots_are_global_ranks(groups_workload, gloo_groups_traces, rank: int):
    program = _program(gloo_groups_traces, rank)
    roots = [get_attr(n, "comm_root", None) for n in _collectives(groups_workload.written.paths[rank])]
    assert roots == [p["root"] for p in program]
    # the job's roots are not 0, and on subgroups the global rank is not the group rank
    assert any(p["root"] is not None and p["root"] != p["ranks"].index(p["root"]) for p in program)


def test_subgroup_collectives_carry_the_names_pytorch_gave_the_groups(groups_workload, gloo_groups_traces):
    # new_group names its groups "1", "2", ... in creation order; a rank's process-group record
    # lists the groups it is in; the names are decimal, so they are ASTRA-sim's ids unchanged
    for rank in WORLD_RANKS:
        recorded = {
            tuple(g["ranks"]) or tuple(WORLD_RANKS): g["pg_name"] for g in _process_groups(gloo_groups_traces, rank)
        }
        program = _program(gloo_groups_traces, rank)
        names = [get_attr(n, "pg_name") for n in _collectives(groups_workload.written.paths[rank])]
        assert names == [recorded[tuple(p["ranks"])] for p in program]


def test_the_groups_file_lists_every_subgroup(groups_workload):
    comm_groups = json.loads(groups_workload.written.groups_path.read_text())
    assert sorted(sorted(ranks) for ranks in comm_groups.values()) == SUBGROUPS


def test_the_groups_were_found_by_aligning_the_ranks(groups_workload):
    for report in groups_workload.conversion.reports.values():
        assert set(report.comm_groups) <= {ALIGNED, AMBIGUOUS_LARGEST}


def _process_groups(traces: Path, rank: int) -> list[dict[str, Any]]:
    return load_host_trace(traces / f"host.{rank}.json").process_groups()
