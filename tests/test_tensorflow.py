"""The TensorFlow front end (issue 17): live TF jobs (4 logical devices under MirroredStrategy, 2 worker
processes under MultiWorkerMirroredStrategy, Keras ``model.fit``) recorded by
``chakra.tensorflow.collect``, converted to one ET per device, and bad input."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import assert_one_line_error, run_cli, validate_and_simulate

from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER, ALL_REDUCE, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE
from chakra.table import MISSING, NodeTable, load_table
from chakra.tensorflow.costs import MATMULS
from chakra.tensorflow.pipeline import TF_FIDELITY_TOLERANCE

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MIRRORED, MULTI_WORKER = EXAMPLES / "tf_mirrored_mlp.py", EXAMPLES / "tf_multi_worker.py"
#: Importing TensorFlow and recording a few steps takes ~20 s here; generous for a loaded machine.
RECORD_TIMEOUT_S = 600
DEVICES, WORKERS = 4, 2
F32_BYTES = 4
#: The examples' models (examples/tf_mirrored_mlp.py, examples/tf_multi_worker.py).
MIRRORED_BATCH, MIRRORED_IN, MIRRORED_HIDDEN, MIRRORED_OUT = 64, 64, 128, 16
WORKER_IN, WORKER_HIDDEN, WORKER_OUT = 64, 512, 16

# found, not imported: the examples import TensorFlow in processes of their own, this one never does
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="the TensorFlow front end's live tests need tensorflow-cpu (the dev extra, installed by make)",
)


def _record(example: Path, out: Path, *extra: str) -> Path:
    """Run one of the TF examples in a process of its own (it configures devices before TF starts)."""
    done = subprocess.run(
        [sys.executable, str(example), str(out), *extra], capture_output=True, text=True, timeout=RECORD_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _convert(recording: Path, prefix: Path, *extra: str) -> dict:
    done = run_cli("convert", "tensorflow", str(recording), "-o", str(prefix), "--json", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(MIRRORED, tmp_path_factory.mktemp("mirrored"))


@pytest.fixture(scope="module")
def mirrored_et(mirrored: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    prefix = tmp_path_factory.mktemp("mirrored_et") / "step"
    return prefix, _convert(mirrored, prefix)


@pytest.fixture(scope="module")
def multi_worker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(MULTI_WORKER, tmp_path_factory.mktemp("workers"), "--workers", str(WORKERS))


@pytest.fixture(scope="module")
def multi_worker_et(multi_worker: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The two-worker job converted with --check; the report gains the exit code (1 when the check
    failed: on a loaded machine a live recording's gaps may put a rank past the bound)."""
    prefix = tmp_path_factory.mktemp("workers_et") / "step"
    done = run_cli("convert", "tensorflow", str(multi_worker), "-o", str(prefix), "--json", "--check")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return prefix, {**json.loads(done.stdout), "exit_code": done.returncode}


def _tables(prefix: Path, ranks: int) -> list[NodeTable]:
    return [load_table(f"{prefix}.{rank}.et") for rank in range(ranks)]


def _collectives(table: NodeTable) -> list[tuple[int, int, int]]:
    """(type, bytes or MISSING, group) of every collective, in file order."""
    comm = table.comm
    at = (table.node_type[comm.pos] == COMM_COLL_NODE).nonzero()[0]
    return [(int(comm.kind[i]), int(comm.size[i]), int(comm.group[i])) for i in at]


def _transfers(table: NodeTable, node_type: int) -> list[tuple[int, int, int, int]]:
    """(source, destination, tag, bytes) of every send or receive."""
    comm = table.comm
    at = (table.node_type[comm.pos] == node_type).nonzero()[0]
    return [(int(comm.src[i]), int(comm.dst[i]), int(comm.tag[i]), int(comm.size[i])) for i in at]


# ---- 4 logical devices under MirroredStrategy -------------------------------------------------
def test_every_device_all_reduces_the_packed_gradients_and_the_loss_in_one_group(mirrored_et):
    prefix, report = mirrored_et
    gradients = (MIRRORED_IN * MIRRORED_HIDDEN + MIRRORED_HIDDEN * MIRRORED_OUT) * F32_BYTES
    assert report["groups"] == {"1": [0, 1, 2, 3]}
    for table in _tables(prefix, DEVICES):
        assert sorted(_collectives(table)) == [(ALL_REDUCE, F32_BYTES, 1), (ALL_REDUCE, gradients, 1)]


def test_the_ranks_are_the_devices_in_order(mirrored_et):
    _, report = mirrored_et
    assert report["devices"] == [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(DEVICES)]


def test_the_ranks_agree_on_the_order_of_their_collectives(mirrored_et):
    prefix, _ = mirrored_et
    orders = {tuple(_collectives(table)) for table in _tables(prefix, DEVICES)}
    assert len(orders) == 1


def test_sends_and_receives_pair_exactly_with_their_bytes(mirrored_et):
    prefix, _ = mirrored_et
    sends: Counter[tuple[int, int, int, int]] = Counter()
    receives: Counter[tuple[int, int, int, int]] = Counter()
    for rank, table in enumerate(_tables(prefix, DEVICES)):
        sent, received = _transfers(table, COMM_SEND_NODE), _transfers(table, COMM_RECV_NODE)
        assert {s[0] for s in sent} <= {rank} and {r[1] for r in received} <= {rank}
        sends.update(sent)
        receives.update(received)
    assert sends and sends == receives and all(size >= 0 for *_, size in sends)
    assert max(sends.values()) == 1  # one tag per transfer


def test_a_matmul_carries_its_flops_and_its_measured_time(mirrored_et):
    prefix, _ = mirrored_et
    table = load_table(f"{prefix}.1.et")
    forward = table.names.index("replica_1/MatMul")
    assert int(table.num_ops[forward]) == 2 * (MIRRORED_BATCH // DEVICES) * MIRRORED_IN * MIRRORED_HIDDEN
    assert int(table.dur_ns[forward]) > 0 and int(table.start_us[forward]) > 0


def test_every_graph_node_and_event_is_accounted_for(mirrored_et):
    _, report = mirrored_et
    # MatMul, or _MklMatMul where TensorFlow's oneDNN rewrite runs (CPUs with AVX-512)
    matmuls = sum(count for op, count in report["converted"].items() if op in MATMULS)
    assert report["folded"]["Const"] > 0 and matmuls == 5 * DEVICES
    assert report["events"]["converted"] > 0 and report["events"]["in other steps"] > 0
    assert any("median span" in text for text in report["notes"])


def test_the_mirrored_step_validates_for_astra_sim_and_simulates(mirrored_et, tmp_path: Path):
    validate_and_simulate(mirrored_et[0], tmp_path, DEVICES)


# ---- 2 worker processes under MultiWorkerMirroredStrategy ---------------------------------------
def test_each_worker_is_a_rank_and_they_all_reduce_together(multi_worker_et):
    prefix, report = multi_worker_et
    gradients = (WORKER_IN * WORKER_HIDDEN + WORKER_HIDDEN * WORKER_OUT) * F32_BYTES
    assert report["devices"] == [f"/job:worker/replica:0/task:{t}/device:CPU:0" for t in range(WORKERS)]
    assert report["groups"] == {"1": [0, 1]}
    assert [_collectives(t) for t in _tables(prefix, WORKERS)] == [[(ALL_REDUCE, gradients, 1)]] * WORKERS


def test_the_fidelity_check_reports_every_worker_and_fails_exactly_past_its_bound(multi_worker_et):
    # the figures come from a live recording: their size is the benchmark's to report, not a test's
    _, report = multi_worker_et
    fidelity = report["fidelity"]
    errors = [rank["error"] for rank in fidelity["ranks"].values()]
    assert len(errors) == WORKERS and all(math.isfinite(error) for error in errors)
    assert fidelity["tolerance"] == TF_FIDELITY_TOLERANCE
    assert report["exit_code"] == (1 if any(abs(error) > TF_FIDELITY_TOLERANCE for error in errors) else 0)
    assert fidelity["ok"] is (report["exit_code"] == 0)


def test_the_two_worker_step_validates_for_astra_sim_and_simulates(multi_worker_et, tmp_path: Path):
    validate_and_simulate(multi_worker_et[0], tmp_path, WORKERS)


def test_one_workers_folder_converts_alone_and_says_the_group_is_incomplete(multi_worker: Path, tmp_path: Path):
    report = _convert(multi_worker / "worker1", tmp_path / "one")
    assert report["devices"] == ["/job:worker/replica:0/task:1/device:CPU:0"]
    assert any("group_size 2 but 1 collected devices" in text for text in report["notes"])


# ---- Keras model.fit, and all_gather ------------------------------------------------------------
def test_a_keras_model_trained_with_fit_converts(tmp_path: Path):
    recording = _record(MIRRORED, tmp_path / "keras", "--keras")
    report = _convert(recording, tmp_path / "et" / "fit")
    tables = _tables(tmp_path / "et" / "fit", DEVICES)
    assert all(any(kind == ALL_REDUCE for kind, _, _ in _collectives(t)) for t in tables)
    fused = [i for i, op in enumerate(tables[0].names) if "MatMul" in op]
    assert fused and all(int(tables[0].num_ops[i]) > 0 for i in fused)
    assert report["events"]["converted"] > 0


def test_an_all_gather_padded_at_run_time_has_its_type_and_group_and_the_report_says_its_size_is_unknown(
    tmp_path: Path,
):
    recording = _record(MIRRORED, tmp_path / "gather", "--gather")
    report = _convert(recording, tmp_path / "et" / "g")
    for table in _tables(tmp_path / "et" / "g", DEVICES):
        gathers = [c for c in _collectives(table) if c[0] == ALL_GATHER]
        # the shapes (one int32 each), then the padded losses, of no size the graph knows
        assert sorted(size for _, size, _ in gathers) == [MISSING, F32_BYTES] and {g for *_, g in gathers} == {1}
    assert any(
        "CollectiveGatherV2 nodes move a tensor whose size is known only at run time" in t for t in report["notes"]
    )


# ---- bad input ------------------------------------------------------------------------------------
def test_a_graph_and_a_profile_of_different_runs_are_refused_in_one_line(
    mirrored: Path, multi_worker: Path, tmp_path: Path
):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(mirrored / "run_metadata.pb", mixed / "run_metadata.pb")
    shutil.copytree(multi_worker / "worker0" / "profile", mixed / "profile")
    done = run_cli("convert", "tensorflow", str(mixed), "-o", str(tmp_path / "out" / "x"))
    assert done.returncode == 2
    assert_one_line_error(done, "xplane.pb", "has no step of this graph")


def test_a_truncated_run_metadata_is_refused_naming_the_file(mirrored: Path, tmp_path: Path):
    cut = tmp_path / "cut"
    cut.mkdir()
    data = (mirrored / "run_metadata.pb").read_bytes()
    (cut / "run_metadata.pb").write_bytes(data[: len(data) // 2])
    done = run_cli("convert", "tensorflow", str(cut), "-o", str(tmp_path / "x"))
    assert done.returncode == 2
    assert_one_line_error(done, "run_metadata.pb", "not a TensorFlow RunMetadata")


def test_a_profile_with_no_step_is_refused_in_one_line(mirrored: Path, tmp_path: Path):
    from chakra.schema.tensorflow.tf_subset_pb2 import XSpace

    empty = tmp_path / "empty"
    (empty / "profile").mkdir(parents=True)
    shutil.copy(mirrored / "run_metadata.pb", empty / "run_metadata.pb")
    space = XSpace()
    space.planes.add(name="/host:CPU").lines.add(name="python")
    (empty / "profile" / "host.xplane.pb").write_bytes(space.SerializeToString())
    done = run_cli("convert", "tensorflow", str(empty), "-o", str(tmp_path / "x"))
    assert done.returncode == 2
    assert_one_line_error(done, "host.xplane.pb", "no op executions of a step")


def test_a_folder_with_no_recording_is_refused_with_what_to_pass(tmp_path: Path):
    done = run_cli("convert", "tensorflow", str(tmp_path), "-o", str(tmp_path / "x"))
    assert done.returncode == 2
    assert_one_line_error(done, "run_metadata.pb", "chakra.tensorflow.collect")
