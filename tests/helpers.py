"""Helpers shared by the test modules: import them with ``from helpers import make_node, ...``.

* :func:`require_shared` -- path of a file under the shared real-trace folder ``../shared/data``;
  skips the test when the folder is absent, fails instead when ``CHAKRA_REQUIRE_SHARED_DATA=1``.
* :func:`make_node`, :func:`make_metadata` -- build ``Node`` / ``GlobalMetadata`` messages in one line,
  attributes written through :func:`chakra.attrs.set_attr` (canonical oneof members).
* :func:`chain` -- ``n`` compute nodes, each depending on the previous one.
* :func:`write_et` -- write nodes (and metadata) to an ``.et`` file with :func:`chakra.io.write`.
* :func:`records` -- hand-built file bytes from raw payloads (for framing corner cases the writer refuses).
* :func:`write_allreduce_workload` -- a small multi-rank workload ``PREFIX.{rank}.et`` (+ comm groups).
* :func:`record_gloo` -- record a real 2-rank gloo job (examples/collect_gloo.py).
* :func:`host_node`, :func:`kineto_op`, ... -- hand-made PyTorch host and Kineto traces.
* :func:`run_cli` -- run the ``chakra`` command in this process (typer's runner), as a user would;
  :func:`run_subprocess` in a fresh process, for what only a real process shows (tracebacks, exit
  codes of the console script).
* :func:`assert_one_line_error`, :func:`assert_usage_error` -- a refused input: exit code 2, no
  traceback, and one line (a library error) or typer's usage message (a command-line mistake).

Fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chakra import io
from chakra.attrs import set_attr
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMP_NODE,
    GlobalMetadata,
    Node,
)

#: The folder of the interpreter running the tests: the ``chakra`` command's own environment.
BIN = Path(sys.executable).parent
#: Columns the CLI renders to in tests, so that rich wraps no line.
CLI_COLUMNS = 200

#: The shared folder of real traces: ``../shared/data`` beside the project checkout.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


#: Set to ``1`` (CI does) to turn "shared data missing" from a skip into a failure.
REQUIRE_SHARED_ENV = "CHAKRA_REQUIRE_SHARED_DATA"


#: ``upstream-chakra/chakra.0.et.gz``: gzip of a raw ``.et`` from the upstream 2023/2024 PyTorch converter.
UPSTREAM_ET_GZ = "upstream-chakra/chakra.0.et.gz"


UPSTREAM_NODE_COUNT = 3664


def require_shared(relpath: str | os.PathLike[str] = "") -> Path:
    """Path of ``relpath`` inside the shared data folder (the folder itself for ``""``).

    When it is missing the calling test is skipped with the reason, or failed when
    ``CHAKRA_REQUIRE_SHARED_DATA=1`` is set (the data README's rule: CI must not skip silently).
    """
    path = SHARED_DATA / relpath
    if not path.exists():
        reason = f"shared test data not found: {path} (expected ../shared/data beside the checkout)"
        if os.environ.get(REQUIRE_SHARED_ENV) == "1":
            pytest.fail(f"{reason}; {REQUIRE_SHARED_ENV}=1 requires it", pytrace=False)
        pytest.skip(reason)
    return path


#: ASTRA-sim's own analytical binaries (``../shared/astra-sim``, its README): the real consumer.
#: A system file for simulator tests: ring everywhere, one active chunk, baseline.
SIM_SYSTEM_JSON = """{
  "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
  "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
  "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
  "collective-optimization": "baseline", "local-mem-bw": 1600, "peak-perf": 900
}"""

ASTRA_SIM = SHARED_DATA.parent / "astra-sim"
#: The stock build (asserts active) and the one built with -DNDEBUG.
ASTRA_SIM_STOCK = "AstraSim_Analytical_Congestion_Unaware"
ASTRA_SIM_NDEBUG = f"{ASTRA_SIM_STOCK}_NDEBUG"
ASTRA_TIMEOUT_S = 300


def run_astra_sim(
    prefix: Path, network: Path, system: Path, build: str = ASTRA_SIM_STOCK
) -> tuple[int, dict[int, int]]:
    """Run one of ASTRA-sim's builds on the workload ``prefix`` (its groups file too, if there is one)
    through :func:`chakra.sim.astra.run_astra_sim`: its exit code and the cycles of each rank that
    printed its ``finished`` line. Skips (or fails, as :func:`require_shared`) when the binaries are
    not there."""
    from chakra.sim.astra import run_astra_sim as run

    binary = require_shared(Path("..") / ASTRA_SIM.name / "bin" / build)
    ran = run(binary, prefix, system, network, timeout_s=ASTRA_TIMEOUT_S)
    return ran.returncode, {rank: done.finish_ns for rank, done in ran.ranks.items()}


def make_node(
    id: int,  # mirrors the protobuf field name
    name: str | None = None,
    type: int = COMP_NODE,
    data_deps: Iterable[int] = (),
    ctrl_deps: Iterable[int] = (),
    *,
    duration_micros: int = 0,
    start_time_micros: int = 0,
    **attrs: Any,
) -> Node:
    """A ``Node`` with the given fields; every extra keyword becomes an attribute via ``set_attr``.

    ``name`` defaults to ``f"node{id}"`` so the node never serializes to zero bytes. Attributes keep
    keyword order. Example: ``make_node(3, "ar", COMM_COLL_NODE, [2], comm_type=0, comm_size=1 << 20)``.
    """
    node = Node(
        id=id,
        name=f"node{id}" if name is None else name,
        type=type,
        data_deps=list(data_deps),
        ctrl_deps=list(ctrl_deps),
        duration_micros=duration_micros,
        start_time_micros=start_time_micros,
    )
    for attr_name, value in attrs.items():
        set_attr(node, attr_name, value)
    return node


def make_metadata(version: str = io.FORMAT_VERSION, **attrs: Any) -> GlobalMetadata:
    """A ``GlobalMetadata`` with ``version`` and attributes (type inferred as in ``set_attr``)."""
    metadata = GlobalMetadata(version=version)
    for attr_name, value in attrs.items():
        set_attr(metadata, attr_name, value)  # type: ignore[arg-type]  # same repeated attr field
    return metadata


def chain(n: int, *, first_id: int = 0, duration_micros: int = 1, name_prefix: str = "op") -> list[Node]:
    """``n`` compute nodes with ids ``first_id, first_id+1, ...``, each data-dependent on the previous."""
    return [
        make_node(
            first_id + i,
            f"{name_prefix}{first_id + i}",
            COMP_NODE,
            data_deps=[first_id + i - 1] if i else (),
            duration_micros=duration_micros,
        )
        for i in range(n)
    ]


def write_et(path: str | os.PathLike[str], nodes: Iterable[Node], metadata: GlobalMetadata | None = None) -> Path:
    """Write ``nodes`` to ``path`` (compression by suffix) and return the path."""
    io.write(path, metadata, nodes)
    return Path(path)


def records(*payloads: bytes | Node | GlobalMetadata) -> bytes:
    """File bytes built record by record: each payload (raw bytes or a message) is framed as-is.

    Unlike the writer this allows zero-length records (``b""``), a missing metadata record, etc.
    """
    out = bytearray()
    for payload in payloads:
        raw = payload if isinstance(payload, bytes) else payload.SerializeToString()
        out += io.frame(raw)
    return bytes(out)


def record_payloads(data: bytes) -> list[bytes]:
    """The payloads of a framed file's records, in order (the GlobalMetadata record first)."""
    payloads, pos = [], 0
    while pos < len(data):
        length, shift = 0, 0
        while True:
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        payloads.append(data[pos : pos + length])
        pos += length
    return payloads


def allreduce_rank_nodes(rank: int, *, comm_size: int = 1 << 20, pg_name: str = "0", skew_us: int = 1) -> list[Node]:
    """One rank's nodes: compute (``10 + rank * skew_us`` µs) -> all-reduce (``comm_size`` bytes, group
    ``pg_name``) -> compute."""
    return [
        make_node(0, f"fwd_rank{rank}", COMP_NODE, duration_micros=10 + rank * skew_us, is_cpu_op=False, num_ops=1000),
        make_node(
            1,
            "all_reduce",
            COMM_COLL_NODE,
            data_deps=[0],
            is_cpu_op=False,
            comm_type=ALL_REDUCE,
            comm_size=comm_size,
            pg_name=pg_name,
        ),
        make_node(2, f"bwd_rank{rank}", COMP_NODE, data_deps=[1], duration_micros=20, is_cpu_op=False),
    ]


def write_allreduce_workload(
    directory: str | os.PathLike[str],
    prefix: str = "workload",
    num_ranks: int = 4,
    *,
    comm_size: int = 1 << 20,
    comm_groups: dict[int, Sequence[int]] | None = None,
    suffix: str = ".et",
    skew_us: int = 1,
) -> Path:
    """Write ``PREFIX.{rank}.et`` for ranks ``0..num_ranks-1`` (see :func:`allreduce_rank_nodes`).

    With ``comm_groups`` the collectives use group ``min(comm_groups)`` and ``PREFIX.comm_groups.json``
    is written. ``suffix`` may be ``.et.gz``/``.et.zst``; ``skew_us`` 0 makes every rank's durations
    the same. Returns the prefix path (``directory/prefix``).
    """
    from chakra.groups import CommGroups
    from chakra.paths import COMM_GROUPS_SUFFIX

    directory = Path(directory)
    pg_name = str(min(comm_groups)) if comm_groups else "0"
    for rank in range(num_ranks):
        write_et(
            directory / f"{prefix}.{rank}{suffix}",
            allreduce_rank_nodes(rank, comm_size=comm_size, pg_name=pg_name, skew_us=skew_us),
            make_metadata(rank=rank),
        )
    if comm_groups:
        CommGroups({k: tuple(v) for k, v in comm_groups.items()}).write(directory / f"{prefix}{COMM_GROUPS_SUFFIX}")
    return directory / prefix


#: Ranks and steps of the recorded gloo job (examples/collect_gloo.py; the first step is warm-up).
GLOO_RANKS = 2


GLOO_STEPS = 3


#: The job takes about 5 s; this is only a guard against a hang.
GLOO_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: A compute-bound DDP job (examples/collect_gloo.py --training-only): wide batches, small gradients,
#: so that gloo's loopback communication is a few per cent of a step.
TRAINING_JOB_ARGS = ("--hidden", "128", "--batch", "16384", "--training-only")


def record_gloo(out: Path, *extra: str) -> Path:
    """Run examples/collect_gloo.py into ``out`` (GLOO_RANKS ranks, GLOO_STEPS steps, a free port)."""
    return _run_gloo_job(out, "--ranks", str(GLOO_RANKS), "--steps", str(GLOO_STEPS), *extra)


#: Starts of a gloo job: a port free when picked can be taken by another test's job before the
#: rendezvous binds it (the suite runs on several workers), which no test is about.
GLOO_STARTS = 3


def _run_gloo_job(out: Path, *args: str) -> Path:
    """Run examples/collect_gloo.py into ``out`` on a fresh port, started again on a new port when
    a start fails; every failed start's error output is in the error raised if none succeeds."""
    example = Path(__file__).resolve().parents[1] / "examples" / "collect_gloo.py"
    failures = []
    for _ in range(GLOO_STARTS):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        command = [sys.executable, str(example), str(out), *args, "--port", str(_free_port())]
        done = subprocess.run(command, capture_output=True, text=True, timeout=GLOO_TIMEOUT_S)
        if done.returncode == 0:
            return out
        failures.append(f"exit {done.returncode}: {done.stderr[-2000:]}")
    raise AssertionError(f"{' '.join(command)} failed {GLOO_STARTS} times:\n" + "\n".join(failures))


def host_node(node_id: int, name: str, rf_id: int, parent: int = 1, **attrs: Any) -> dict:
    """A grouped-layout host trace node; extra keyword attributes (``tid=2``) become typed attrs."""
    node_attrs = [{"name": "rf_id", "value": rf_id}] + [{"name": k, "value": v} for k, v in attrs.items()]
    return {"id": node_id, "name": name, "ctrl_deps": parent, "attrs": node_attrs}


def kineto_op(name: str, rf_id: int, ts: float, dur: float, tid: int = 1) -> dict:
    """A Kineto ``cpu_op`` event joined to the host node with the same ``rf_id``."""
    return {"ph": "X", "cat": "cpu_op", "name": name, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Record function id": rf_id}}  # fmt: skip


def kineto_kernel(ts: float, correlation: int, stream: int = 7, dur: float = 5, name: str = "k") -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "stream": stream}}  # fmt: skip


def kineto_launch(ts: float, correlation: int, tid: int = 1, name: str = "cudaLaunchKernel", dur: float = 2) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": correlation}}  # fmt: skip


def write_trace_pair(folder: Path, host_nodes: list[dict], events: list[dict], rank: int = 0) -> tuple[Path, Path]:
    """Write ``host.{rank}.json`` (schema 1.1.1) and ``device.{rank}.json``; returns both paths."""
    host = folder / f"host.{rank}.json"
    host.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": host_nodes}))
    device = folder / f"device.{rank}.json"
    device.write_text(json.dumps({"traceEvents": events}))
    return host, device


# ---------------------------------------------------------------------------------------------
# Running the command


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``chakra ARGS...`` in this process, through typer's test runner: the exit code, stdout and
    stderr as a user sees them (an exception that escaped the command shows as its traceback on
    stderr, exit code 1)."""
    from typer.testing import CliRunner

    from chakra.cli import console
    from chakra.cli.main import app

    console.stdout.width = console.stderr.width = CLI_COLUMNS
    here = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner(env={"COLUMNS": str(CLI_COLUMNS)}).invoke(app, list(args))
    finally:
        os.chdir(here)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["chakra", *args], result.exit_code, result.stdout, stderr)


def run_subprocess(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``chakra ARGS...`` in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "chakra", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"COLUMNS": str(CLI_COLUMNS), "PATH": str(BIN), "HOME": str(cwd or Path.cwd())},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """The command refused its input the way the CLI promises: exit code 2, no traceback, one
    line on stderr containing every fragment."""
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """A command-line mistake (an unknown option, a value not among the choices): typer's usage
    message on stderr naming every fragment, exit code 2, no traceback."""
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


#: Ranks and steps of the recorded nested-groups job (examples/collect_gloo.py --groups; the
#: first step is warm-up): world, DP pairs {0,2} {1,3}, TP pairs {0,1} {2,3} and a trio {0,1,2}.
GLOO_GROUPS_RANKS = 4
GLOO_GROUPS_STEPS = 2


def record_gloo_groups(out: Path) -> Path:
    """Run examples/collect_gloo.py --groups into ``out`` (host and device traces, plus
    ``program.{rank}.json``: what each rank issued in the recorded step, in order)."""
    return _run_gloo_job(out, "--groups", "--ranks", str(GLOO_GROUPS_RANKS), "--steps", str(GLOO_GROUPS_STEPS))


# ---------------------------------------------------------------------------------------------
# Disks that fail: a real tmpfs, full or read-only (root only; the tests skip elsewhere)

#: Small enough to fill at once; tmpfs counts whole pages.
DISK_SIZE = "64k"
#: The file that fills a full disk (not an output of the command under test).
FILLER = "filler"


def _mount(folder: Path, options: str) -> None:
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'}): the fault tests need root")


def fill_disk(folder: Path) -> None:
    """Write zeros until the disk is full."""
    block = bytes(4096)
    with open(folder / FILLER, "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(block)
        except OSError:
            pass


def left_files(folder: Path) -> list[str]:
    """What a command left in ``folder`` (the filler aside)."""
    return sorted(p.name for p in folder.iterdir() if p.name != FILLER)


@contextlib.contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``folder`` (made here) with ``options``, unmounted afterwards."""
    folder.mkdir()
    _mount(folder, options)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


@contextlib.contextmanager
def no_hang(seconds: float = 20.0) -> Iterator[None]:
    """Fail the test instead of hanging forever: the block is stopped after ``seconds`` (POSIX, in the
    main thread; a no-op elsewhere)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        pytest.fail(f"still running after {seconds} s (hang?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def validate_and_simulate(prefix: Path, tmp_path: Path, npus: int) -> None:
    """A converted workload validates clean for ASTRA-sim and simulates on a switch of ``npus``."""
    assert run_cli("validate", str(prefix), "--target", "astra-sim").returncode == 0
    network = tmp_path / f"switch{npus}.yml"
    network.write_text(f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    system = Path(__file__).resolve().parents[1] / "examples" / "astra" / "system.json"
    done = run_cli("simulate", "--workload", str(prefix), "--system", str(system), "--network", str(network))
    assert done.returncode == 0, done.stderr


def _tf_node(graph: Any, device: str, scope: str, name: str, op: str, inputs: list[str], dtype: int,
             shape: list[int] | None) -> Any:  # fmt: skip
    """A NodeDef of ``write_tf_recording``: names in ``scope``, one output of ``shape`` if given."""
    from chakra.schema.tensorflow.tf_subset_pb2 import Dim

    made = graph.node.add(name=scope + name, op=op, input=[scope + i for i in inputs], device=device)
    made.attr["T"].type = dtype
    if shape is not None:
        made.attr["_output_shapes"].list.shape.add().dim.extend([Dim(size=d) for d in shape])
    return made


def write_tf_recording(folder: Path) -> Path:
    """A two-device TensorFlow recording as ``chakra.tensorflow.collect`` writes it, built with the
    front end's own protos: each device (one process, node names unique across its partitions, as
    MirroredStrategy names replicas) runs a MatMul and all-reduces it (group key 1, size 2), and
    device 1 sends the result to device 0. Three steps are profiled, each without a gap: MatMul
    10-50 µs, all-reduce 50-85 µs, then the send 85-90 µs; the receive (no inputs: ready at once)
    is launched at 10 µs and done at 90 µs."""
    from chakra.schema.tensorflow.tf_subset_pb2 import RunMetadata, XSpace

    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{d}" for d in (0, 1)]
    scopes = ["", "replica_1/"]
    float32, int32 = 1, 3
    metadata = RunMetadata()
    graphs = metadata.function_graphs.add()
    for device, scope in zip(devices, scopes, strict=True):
        graph = graphs.partition_graphs.add()
        node = functools.partial(_tf_node, graph, device, scope)
        node("x", "_Arg", [], float32, [8, 16])
        node("w", "_Arg", [], float32, [16, 4])
        node("mm", "MatMul", ["x", "w"], float32, [8, 4])
        for const, value in (("ar/group_size", 2), ("ar/group_key", 1)):
            node(const, "Const", [], int32, []).attr["value"].tensor.int_val.append(value)
        node("ar", "CollectiveReduceV2", ["mm", "ar/group_size", "ar/group_key"], float32, [8, 4])
        sending = bool(scope)
        moved = node("ar/_send" if sending else "ar/_recv", "_Send" if sending else "_Recv",
                     ["ar"] if sending else [], float32, None)  # fmt: skip
        moved.attr["send_device"].s = devices[1].encode()
        moved.attr["recv_device"].s = devices[0].encode()
        moved.attr["tensor_name"].s = b"edge_1_ar"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_metadata.pb").write_bytes(metadata.SerializeToString())
    space = XSpace()
    plane = space.planes.add(name="/host:CPU")
    events = ["ExecutorState::Process", "ExecutorState::ProcessAsync::Start", "ExecutorState::ProcessAsync::Done"]
    events += [f"{s}{n}" for s in scopes for n in ("mm:MatMul", "ar:CollectiveReduceV2")] + ["replica_1/ar/_send:_Send"]
    for key, name in enumerate(events, start=1):
        plane.event_metadata[key].name = name
    stats = ["id", "step_id", "group_key", "instance_key", "name", "ar/_recv"]
    for key, name in enumerate(stats, start=1):
        plane.stat_metadata[key].name = name
    us = 1_000_000  # ps
    for device, scope in enumerate(scopes):
        compute = plane.lines.add(id=device, name=f"tf_Compute/{device}", timestamp_ns=10**9)
        collective = plane.lines.add(id=10 + device, name=f"collective_ops/{device}", timestamp_ns=10**9)
        for step in range(3):
            base = step * 1000 * us
            region = compute.events.add(metadata_id=1, offset_ps=base, duration_ps=100 * us)
            region.stats.add(metadata_id=1, int64_value=500 + step)
            compute.events.add(metadata_id=4 + 2 * device, offset_ps=base + 10 * us, duration_ps=40 * us)
            reduce = collective.events.add(metadata_id=5 + 2 * device, offset_ps=base + 50 * us, duration_ps=35 * us)
            for stat, value in ((2, 500 + step), (3, 1), (4, 100 + step)):
                reduce.stats.add(metadata_id=stat, int64_value=value)
            if scope:
                compute.events.add(metadata_id=8, offset_ps=base + 85 * us, duration_ps=5 * us)
            else:  # the receive waits for the send: launched at 10 µs, done at 90 µs
                for kind, at_us in ((2, 10), (3, 89)):
                    edge = compute.events.add(metadata_id=kind, offset_ps=base + at_us * us, duration_ps=us)
                    edge.stats.add(metadata_id=2, int64_value=500 + step)
                    edge.stats.add(metadata_id=5, ref_value=6)
    (folder / "profile").mkdir(exist_ok=True)
    (folder / "profile" / "host.xplane.pb").write_bytes(space.SerializeToString())
    return folder
