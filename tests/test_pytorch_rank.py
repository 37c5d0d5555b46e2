"""The rank of a host trace converted on its own comes from its own records (issue 15): the device
trace's ``distributedInfo``, else the rank its ``record_param_comms`` ops name; ``--rank`` sets it,
and a record that disagrees with the rank used is reported."""

from __future__ import annotations

from pathlib import Path

from helpers import require_shared, run_cli

from chakra.pytorch.comms import recorded_rank
from chakra.pytorch.host import load_host_trace

#: PARAM's ResNet trace of rank 1 of 2 (its tensors on cuda:1, its all-reduces naming rank 1).
RANK1_TRACE = "param/resnet_2gpu_et.json.gz"


def test_a_host_traces_comms_name_the_rank_it_was_recorded_on():
    assert recorded_rank(load_host_trace(require_shared(RANK1_TRACE)).nodes) == 1


def test_a_single_host_trace_is_written_as_the_rank_it_records(tmp_path: Path):
    done = run_cli("convert", "pytorch", "--host", str(require_shared(RANK1_TRACE)), "-o", str(tmp_path / "job"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("job.*.et")) == ["job.1.et"]


def test_a_rank_given_against_the_records_is_used_and_the_disagreement_reported(tmp_path: Path):
    done = run_cli(
        "convert", "pytorch", "--host", str(require_shared(RANK1_TRACE)), "-o", str(tmp_path / "job"), "--rank", "0"
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "job.0.et").exists()
    assert "record_param_comms says rank 1, but rank 0 (from --rank) is used" in done.stderr


def test_rank_is_refused_with_rank_patterns(gloo_traces: Path, tmp_path: Path):
    done = run_cli(
        "convert", "pytorch", "--host", str(gloo_traces / "host.{rank}.json"), "-o", str(tmp_path / "job"),
        "--rank", "1",
    )  # fmt: skip
    assert done.returncode == 2 and "--rank is for a single host trace" in done.stderr
