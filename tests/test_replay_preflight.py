"""``chakra replay --dry-run`` (chakra.replay.preflight): what a replay would issue, and what would hang
it, read from the rank files without starting a process."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import allreduce_rank_nodes, chain, make_metadata, make_node, run_cli, write_allreduce_workload, write_et

from chakra.groups import CommGroups
from chakra.paths import COMM_GROUPS_SUFFIX
from chakra.replay.preflight import plan_replay
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE

RANKS = 4


def _transfer(rank: int, peer: int, node_type: int) -> list:
    """A rank's one compute node, then one half of a 64-byte transfer with ``peer``."""
    src, dst = (rank, peer) if node_type == COMM_SEND_NODE else (peer, rank)
    return [
        *chain(1, duration_micros=5),
        make_node(1, "p2p", node_type, [0], comm_src=src, comm_dst=dst, comm_tag=src, comm_size=64),
    ]


def _dry_run(prefix: Path, *extra: str):
    return run_cli("replay", str(prefix), "--dry-run", *extra)


def test_a_dry_run_counts_what_each_rank_would_issue_without_starting_a_process(tmp_path: Path, no_processes):
    prefix = write_allreduce_workload(tmp_path, num_ranks=RANKS, comm_size=4096)
    done = _dry_run(prefix, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [(r["rank"], r["nodes"], r["compute"], r["collectives"]) for r in plan["ranks"]] == [
        (rank, 3, 2, 1) for rank in range(RANKS)
    ]
    assert {r["largest_message_bytes"] for r in plan["ranks"]} == {4096}
    assert plan["problems"] == []


def test_the_table_says_no_hang_is_predicted_when_the_counts_agree(tmp_path: Path, no_processes):
    done = _dry_run(write_allreduce_workload(tmp_path, num_ranks=RANKS))
    assert done.returncode == 0, done.stderr
    assert "no hang predicted" in done.stdout


def test_a_member_that_skips_a_collective_is_predicted_to_hang(tmp_path: Path, no_processes):
    prefix = write_allreduce_workload(tmp_path, num_ranks=RANKS)
    write_et(f"{prefix}.3.et", chain(3), make_metadata(rank=3))
    done = _dry_run(prefix)
    assert done.returncode == 1
    assert "would hang: the members of the world group issue different numbers of collectives on it" in done.stderr
    assert "{0: 1, 1: 1, 2: 1, 3: 0}" in done.stderr


def test_a_collective_on_a_group_the_rank_is_not_a_member_of_is_predicted_to_hang(tmp_path: Path, no_processes):
    prefix = write_allreduce_workload(tmp_path, num_ranks=RANKS, comm_groups={5: [0, 1]})
    assert plan_replay(prefix).problems() == ["ranks [2, 3] issue collectives on group 5 without being its members"]


def test_a_collective_on_a_group_the_workload_does_not_define_runs_on_every_rank(tmp_path: Path):
    for rank in range(RANKS):  # a groups file without group 9: the replay issues it on every rank
        write_et(tmp_path / f"job.{rank}.et", allreduce_rank_nodes(rank, pg_name="9"), make_metadata(rank=rank))
    CommGroups({5: (0, 1)}).write(tmp_path / f"job{COMM_GROUPS_SUFFIX}")
    assert plan_replay(tmp_path / "job").problems() == []


def test_a_send_without_its_receive_is_predicted_to_hang(tmp_path: Path, no_processes):
    write_et(tmp_path / "job.0.et", _transfer(0, 1, COMM_SEND_NODE), make_metadata(rank=0))
    write_et(tmp_path / "job.1.et", chain(2), make_metadata(rank=1))
    done = _dry_run(tmp_path / "job")
    assert done.returncode == 1
    assert "would hang: rank 0 posts 1 send(s) to rank 1, which posts 0 receive(s) from it" in done.stderr


def test_a_matched_send_and_receive_predict_no_hang(tmp_path: Path):
    write_et(tmp_path / "job.0.et", _transfer(0, 1, COMM_SEND_NODE), make_metadata(rank=0))
    write_et(tmp_path / "job.1.et", _transfer(1, 0, COMM_RECV_NODE), make_metadata(rank=1))
    plan = plan_replay(tmp_path / "job")
    assert (plan.ranks[0].sends_to, plan.ranks[1].recvs_from, plan.problems()) == ({1: 1}, {0: 1}, [])


def test_the_plan_and_its_problems_are_written_to_the_report(tmp_path: Path, no_processes):
    prefix = write_allreduce_workload(tmp_path, num_ranks=RANKS)
    write_et(f"{prefix}.3.et", chain(3), make_metadata(rank=3))
    report = tmp_path / "plan.json"
    assert _dry_run(prefix, "--report", str(report)).returncode == 1
    written = json.loads(report.read_text())
    assert len(written["ranks"]) == RANKS
    assert len(written["problems"]) == 1


def test_a_missing_rank_is_refused_in_one_line(tmp_path: Path, no_processes):
    prefix = write_allreduce_workload(tmp_path, num_ranks=RANKS)
    Path(f"{prefix}.1.et").unlink()
    done = _dry_run(prefix)
    assert done.returncode == 2
    assert "ranks [0, 2, 3] are not 0..2" in done.stderr
