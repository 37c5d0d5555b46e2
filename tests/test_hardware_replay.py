"""``chakra replay`` (issue 18): workloads run on this machine, one gloo process per rank, measured."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import make_node, run_cli, write_et

from chakra.replay.choices import REPLAY_CHECK_TOLERANCE
from chakra.schema.protobuf.et_def_pb2 import BARRIER, COMM_RECV_NODE
from chakra.table import COMPUTE, MISSING, load_table

#: A replay that stops moving for this long is a hang (short here: the hanging workloads are tiny).
HANG_TIMEOUT_S = 5
#: Starting the ranks (importing torch) and stopping them takes seconds on a loaded machine.
HANG_DIAGNOSIS_BOUND_S = 120
#: torchrun starts both ranks (importing torch) on a loaded machine.
TORCHRUN_TIMEOUT_S = 300
#: The collectives of chakra generate micro, and the transfer families.
COLLECTIVES = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL", "BROADCAST", "REDUCE", "GATHER",
               "SCATTER", "BARRIER")  # fmt: skip
TRANSFERS = ("send_recv_pair", "send_recv_ring")
ELEMENT_BYTES = 4
#: The bundled ASTRA-sim system and 2-NPU network.
ASTRA = Path(__file__).resolve().parents[1] / "examples" / "astra"
#: A compute node that outlasts a 1-s hang timeout (µs).
LONG_NODE_US = 2_500_000
TINY_LLM = """model: {{name: tiny, layers: 2, hidden: 128, heads: 4, kv_heads: 4, ffn: 512, vocab: 1024, seq_len: 64}}
parallel: {{tp: {tp}, pp: {pp}, dp: {dp}}}
global_batch: 4
micro_batch: 1
"""


def _micro(folder: Path, ranks: int) -> Path:
    assert run_cli("generate", "micro", "-o", str(folder), "--ranks", str(ranks)).returncode == 0
    return folder


@pytest.fixture(scope="module")
def micro2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _micro(tmp_path_factory.mktemp("micro2"), 2)


@pytest.fixture(scope="module")
def micro4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _micro(tmp_path_factory.mktemp("micro4"), 4)


def _replay(workload: Path, *extra: str) -> dict:
    done = run_cli("replay", str(workload), "--json", "--iterations", "1", "--timeout", "60", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _recorded_bytes(path: Path) -> int:
    """What a rank's communication nodes put in, by the format's comm_size convention (a receive
    puts nothing in; a barrier moves nothing)."""
    table = load_table(path)
    comm = table.comm
    moving = (comm.size != MISSING) & (comm.kind != BARRIER) & (table.node_type[comm.pos] != COMM_RECV_NODE)
    return sum(-(-int(size) // ELEMENT_BYTES) * ELEMENT_BYTES for size in comm.size[moving].tolist())


@pytest.mark.parametrize("family", COLLECTIVES + TRANSFERS)
def test_every_micro_collective_and_transfer_replays_on_two_ranks_with_its_bytes(micro2: Path, family: str):
    result = _replay(micro2 / family, "--compute", "none")
    for rank, ranked in result["ranks"].items():
        put_in = sum(ranked["sent_bytes"].values())
        if family in ("REDUCE_SCATTER", "ALL_TO_ALL"):  # the whole buffer, rounded up to the group size
            assert put_in >= _recorded_bytes(micro2 / f"{family}.{rank}.et")
        else:
            assert put_in == _recorded_bytes(micro2 / f"{family}.{rank}.et"), ranked


@pytest.mark.parametrize("family", COLLECTIVES + TRANSFERS)
def test_every_micro_collective_and_transfer_replays_on_four_ranks(micro4: Path, family: str):
    result = _replay(micro4 / family, "--compute", "none")
    assert sorted(result["ranks"]) == ["0", "1", "2", "3"]
    assert all(sum(r["issued"].values()) > 0 for r in result["ranks"].values())


def test_a_receive_with_no_send_is_diagnosed_and_stopped(micro2: Path):
    began = time.monotonic()
    done = run_cli("replay", str(micro2 / "one_comm_recv_node"), "--timeout", str(HANG_TIMEOUT_S))
    assert done.returncode == 1
    assert "made no progress" in done.stderr and "rank 0 waits for node 0" in done.stderr
    assert "recv from rank 1" in done.stderr
    assert time.monotonic() - began < HANG_DIAGNOSIS_BOUND_S


@pytest.mark.parametrize(("tp", "pp", "dp"), [(2, 2, 1), (2, 1, 2)])
def test_a_generated_parallel_llm_step_replays_on_four_ranks_with_kernels_to_the_end(
    tmp_path: Path, tp: int, pp: int, dp: int
):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_LLM.format(tp=tp, pp=pp, dp=dp))
    assert run_cli("generate", "llm", "--spec", str(spec), "-o", str(tmp_path / "llm" / "tiny")).returncode == 0
    result = _replay(tmp_path / "llm" / "tiny", "--compute", "kernels", "--warmup", "0")
    for rank in range(4):
        ranked = result["ranks"][str(rank)]
        table = load_table(tmp_path / "llm" / f"tiny.{rank}.et")
        assert ranked["issued"]["compute"] == int((table.category == COMPUTE).sum())
        assert ranked["issued"].get("collective", 0) + ranked["issued"].get("send", 0) > 0


def test_a_recorded_gloo_job_replays_within_its_bound_of_the_measured_step(gloo_job: Path):
    prefix = gloo_job
    done = run_cli("replay", str(prefix), "--json", "--iterations", "3", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    errors = {rank: r["error"] for rank, r in json.loads(done.stdout)["ranks"].items()}
    assert all(abs(e) <= REPLAY_CHECK_TOLERANCE for e in errors.values()), errors


def test_an_unknown_compute_mode_is_a_usage_error(micro2: Path):
    done = run_cli("replay", str(micro2 / "ALL_REDUCE"), "--compute", "gpu")
    assert done.returncode == 2 and "--compute" in done.stderr


def test_the_overlap_study_reports_compute_only_communication_only_and_what_the_whole_hid(gloo_job: Path):
    # timing is not asserted: beside a busy machine's load the whole replay slows by more than the
    # overlap it hides (a CI run beside a CPU hog); the figures idle are in the README
    study = _replay(gloo_job, "--overlap")
    for rank, hidden_us in study["overlap_us"].items():
        median = {run: study[run]["ranks"][rank]["step_us"]["median"] for run in ("full", "compute_only", "comm_only")}
        assert hidden_us == pytest.approx(median["compute_only"] + median["comm_only"] - median["full"])
    slowest = {run: max(r["step_us"]["median"] for r in study[run]["ranks"].values())
               for run in ("full", "compute_only", "comm_only")}  # fmt: skip
    assert study["job_overlap_us"] == pytest.approx(slowest["compute_only"] + slowest["comm_only"] - slowest["full"])
    assert study["compute_only"]["comm"] is False and study["comm_only"]["compute"] == "none"
    assert all(sum(r["sent_bytes"].values()) == 0 for r in study["compute_only"]["ranks"].values())


def test_the_timeline_has_every_node_of_every_rank_on_its_track_with_its_bytes(micro2: Path, tmp_path: Path):
    timeline = tmp_path / "replay.json"
    done = run_cli("replay", str(micro2 / "send_recv_ring"), "--iterations", "1", "--timeline", str(timeline))
    assert done.returncode == 0, done.stderr
    spans = [e for e in json.loads(timeline.read_text())["traceEvents"] if e["ph"] == "X"]
    for rank in (0, 1):
        table = load_table(micro2 / f"send_recv_ring.{rank}.et")
        mine = [e for e in spans if e["pid"] == rank]
        assert sorted(e["args"]["id"] for e in mine) == sorted(table.ids.tolist())
        assert {e["args"]["comm_size"] for e in mine} == set(table.comm.size.tolist())
        assert all(e["tid"].startswith("communication") and e["dur"] >= 0 for e in mine)
        for track in {e["tid"] for e in mine}:  # a Chrome trace nests a track's spans: none overlap
            spans_of = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine if e["tid"] == track)
            assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans_of))


def test_under_torchrun_each_process_replays_its_rank_and_rank_0_reports(micro2: Path):
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--nproc-per-node", "2", "-m", "chakra", "replay", str(micro2 / "ALL_REDUCE"),
               "--compute", "none", "--iterations", "1", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=TORCHRUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.index("{") :])
    assert sorted(result["ranks"]) == ["0", "1"]
    assert all(r["sent_bytes"]["ALL_REDUCE"] == _recorded_bytes(micro2 / f"ALL_REDUCE.{k}.et")
               for k, r in result["ranks"].items())  # fmt: skip


def test_the_aten_mode_reruns_the_recorded_ops_and_counts_what_fell_back(gloo_job: Path):
    result = _replay(gloo_job, "--compute", "aten")
    for ranked in result["ranks"].values():
        fallbacks = ranked["fallbacks"]
        assert fallbacks["aten: re-run"] > 0
        assert sum(fallbacks.values()) == ranked["issued"]["compute"]  # every compute node accounted for


@pytest.mark.parametrize(("family", "factor"), [("ALL_REDUCE", 1.0), ("ALL_GATHER", 0.5), ("BROADCAST", 1.0)])
def test_each_collective_gets_the_nccl_tests_algorithm_and_bus_bandwidth(micro2: Path, family: str, factor: float):
    result = _replay(micro2 / family, "--compute", "none")
    (row,) = result["collectives"]
    size = int(load_table(micro2 / f"{family}.0.et").comm.size[0])
    whole = size * 2 if family == "ALL_GATHER" else size  # all-gather: S is the whole output
    assert (row["comm_type"], row["group_size"], row["size_bytes"]) == (family, 2, size)
    assert row["algbw_GBps"] == pytest.approx(whole / (row["time_us"] * 1000))  # bytes/ns = GB/s
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * factor)  # 2(n-1)/n, (n-1)/n, 1 at n = 2


def test_a_barrier_has_a_time_and_no_bandwidth(micro2: Path):
    (row,) = _replay(micro2 / "BARRIER", "--compute", "none")["collectives"]
    assert row["time_us"] > 0 and row["algbw_GBps"] is None and row["busbw_GBps"] is None


def test_time_by_node_kind_puts_the_replay_beside_the_recorded_durations(gloo_job: Path):
    result = _replay(gloo_job)
    for rank, ranked in result["ranks"].items():
        table = load_table(Path(f"{gloo_job}.{rank}.et"))
        recorded_us = int(table.dur_ns[table.category == COMPUTE].sum()) / 1000
        compute = ranked["kinds"]["compute"]
        assert compute["recorded_us"] == pytest.approx(recorded_us)
        assert compute["replayed_us"] == pytest.approx(recorded_us, abs=1)  # duration: timers of the recorded time
        assert ranked["kinds"]["ALL_REDUCE"]["count"] > 0 and ranked["kinds"]["ALL_REDUCE"]["replayed_us"] > 0


def test_a_workload_without_times_is_compared_with_the_simulators_prediction(micro2: Path):
    system = ("--system", str(ASTRA / "system.json"), "--network", str(ASTRA / "ring2.yml"))
    result = _replay(micro2 / "ALL_REDUCE", *system)
    simulated = run_cli("simulate", "--workload", str(micro2 / "ALL_REDUCE"), *system, "--json")
    finish_ns = {str(r["rank"]): r["finish_ns"] for r in json.loads(simulated.stdout)["ranks"]}
    for rank, ranked in result["ranks"].items():
        assert ranked["reference"] == "simulated" and ranked["recorded_span_us"] is None
        assert ranked["reference_us"] == pytest.approx(finish_ns[rank] / 1000)
        assert ranked["error"] == pytest.approx(ranked["step_us"]["median"] / ranked["reference_us"] - 1)


def test_a_compute_node_longer_than_the_timeout_is_not_a_hang(tmp_path: Path):
    for rank in (0, 1):
        write_et(tmp_path / f"long.{rank}.et", [make_node(0, duration_micros=LONG_NODE_US)])
    done = run_cli("replay", str(tmp_path / "long"), "--timeout", "1", "--warmup", "0", "--iterations", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert all(r["step_us"]["median"] >= LONG_NODE_US for r in json.loads(done.stdout)["ranks"].values())


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or __import__("torch").cuda.is_available(),
                    reason="a machine with CUDA runs NCCL")  # fmt: skip
def test_the_nccl_backend_on_a_machine_without_cuda_is_refused_in_one_line(micro2: Path):
    done = run_cli("replay", str(micro2 / "ALL_REDUCE"), "--backend", "nccl")
    assert done.returncode == 2 and "needs CUDA devices" in done.stderr and "Traceback" not in done.stderr
