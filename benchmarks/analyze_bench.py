"""Speed and peak memory of the per-rank analyses: ``critical_path`` and ``breakdown`` on a 1M-node rank.

Generates, once, a synthetic rank shaped like a converted PyTorch training trace into ``--data-dir``
(``--regenerate`` redoes it): ``--nodes`` nodes (default 1,000,000) in blocks of ten, each block
a layer: a host op (``aten::linear``, thread 1) holding ``aten::addmm``, which holds a kernel
launch; the GEMM kernel on stream 7; ``aten::gelu`` and its launch and kernel; on thread 2
``record_param_comms`` and ``aten::add_``; an ``ALL_REDUCE`` of 4 MiB on stream 20 (10 % of the
nodes are communication). Every node records a start time (µs since the epoch, as PyTorch does)
and a duration; ctrl deps point to the call-tree parent (the launching op for kernels), data deps
to the producer of the inputs, across blocks too, so the graph is one long chain of layers with
the communication hanging off it, overlapping the next layers' compute.

Each run is a fresh process pinned to one core, so peak RSS (``VmHWM``) is its own:
``load_table`` (the load stage), then ``critical_path``, ``breakdown`` and, for reference,
``top_operators`` (exclusive time; not part of the target), each timed alone. Target (issue):
critical path plus breakdown of the 1M-node rank under 5 s on one core; the load stage is reported
apart and the sum with it too. ``--profile`` samples one run with py-spy (cProfile when py-spy is
missing) and prints the functions with the most own time in the analyses. Run:
``python benchmarks/analyze_bench.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import child_argv, peak_rss_bytes, pin_to_one_core, pyspy, spawn_json, verdict

DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "chakra-analyze-bench"
DEFAULT_NODES = 1_000_000
DEFAULT_REPEAT = 3  # fresh runs (best time of each stage kept)
TARGET_S = 5.0  # critical path + breakdown of the 1M-node rank, one core (issue)

# Shape of the rank (see the module docstring).
BLOCK = 10  # nodes per layer
BLOCK_PERIOD_US = 40  # a layer starts every 40 µs; its 35 µs all-reduce overlaps the next layer
EPOCH_US = 1_700_000_000_000_000  # start times in µs since the epoch, like a PyTorch recording
COLL_BYTES = 4 << 20  # comm_size of every all-reduce: 4 MiB
MAIN_TID, SIDE_TID = 1, 2  # host threads: the forward ops, and the comms bookkeeping
COMPUTE_STREAM, COMM_STREAM = 7, 20
JITTER_SPAN_US = 4  # durations vary by 0 .. JITTER_SPAN_US - 1 µs ...
JITTER_STRIDE = 3  # ... spread over the blocks by this stride (coprime with the span)

TRACE_FILE = "analyze.0.et"
META_FILE = "trace.json"
MIB = 1024 * 1024
PROFILE_TOP = 15  # functions listed by --profile
PYSPY_RATE_HZ = 250  # py-spy samples per second
ANALYZE_FRAMES = ("critical_path (", "breakdown (")  # py-spy frames of the two timed analyses


# --- the trace -------------------------------------------------------------------------------


def block_payloads(block: int, enc) -> list[bytes]:  # type: ignore[no-untyped-def]  # enc: chakra.wire.AttrEncoder
    """The ten serialized nodes of layer ``block`` (ids ``block * BLOCK + offset``)."""
    from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
    from chakra.wire import encode_node

    base = block * BLOCK
    t = EPOCH_US + block * BLOCK_PERIOD_US
    j = (block * JITTER_STRIDE) % JITTER_SPAN_US
    cpu_main = [enc("is_cpu_op", True), enc("tid", MAIN_TID)]
    cpu_side = [enc("is_cpu_op", True), enc("tid", SIDE_TID)]
    kernel = [enc("is_cpu_op", False), enc("stream", COMPUTE_STREAM)]
    coll = [
        enc("is_cpu_op", False),
        enc("stream", COMM_STREAM),
        enc("comm_type", ALL_REDUCE),
        enc("comm_size", COLL_BYTES),
        enc("pg_name", "0"),
    ]
    prev = base - BLOCK
    first = block == 0

    def node(offset, name, ctrl, data, start, dur, attrs, node_type=COMP_NODE):  # type: ignore[no-untyped-def]
        return encode_node(base + offset, name, node_type, ctrl, data, start, dur, None, None, attrs)

    return [
        node(0, "aten::linear", [], [] if first else [prev + 4], t, 18 + j, cpu_main),
        node(1, "aten::addmm", [base], [], t + 2, 15, cpu_main),
        node(2, "cudaLaunchKernel", [base + 1], [], t + 4, 5, cpu_main),
        node(3, "sm80_xmma_gemm", [base + 2], [] if first else [prev + 6], t + 10, 17 + j, kernel),
        node(4, "aten::gelu", [], [base + 1], t + 22, 10, cpu_main),
        node(5, "cudaLaunchKernel", [base + 4], [], t + 24, 4, cpu_main),
        node(6, "vectorized_elementwise_kernel", [base + 5], [base + 3], t + 30, 6, kernel),
        node(7, "record_param_comms", [], [base + 4], t + 31, 6, cpu_side),
        node(8, "ncclDevKernel_AllReduce_Sum_f32", [base + 7], [base + 6], t + 40, 35, coll, COMM_COLL_NODE),
        node(9, "aten::add_", [], [base + 8], t + 78, 3 + j, cpu_side),
    ]


def ensure_trace(data_dir: Path, nodes: int, regenerate: bool) -> Path:
    """The trace file, generated unless a matching one is cached."""
    from chakra import io
    from chakra.wire import AttrEncoder

    path = data_dir / TRACE_FILE
    meta_path = data_dir / META_FILE
    shape = [BLOCK, BLOCK_PERIOD_US, EPOCH_US, COLL_BYTES, JITTER_SPAN_US, JITTER_STRIDE]
    meta = {"nodes": nodes, "shape": shape}
    if not regenerate and path.exists() and meta_path.exists() and json.loads(meta_path.read_text()) == meta:
        return path
    if nodes % BLOCK:
        raise SystemExit(f"--nodes must be a multiple of {BLOCK}")
    print(f"generating {nodes:,} nodes -> {path}", file=sys.stderr)
    t0 = time.perf_counter()
    data_dir.mkdir(parents=True, exist_ok=True)
    meta_path.unlink(missing_ok=True)
    encoder = AttrEncoder()
    with io.EtWriter(path) as writer:
        for block in range(nodes // BLOCK):
            for payload in block_payloads(block, encoder):
                writer.write_serialized(payload)
    meta_path.write_text(json.dumps(meta) + "\n")
    print(f"  done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return path


# --- measurement (child process) -------------------------------------------------------------


def run_once(path: Path, cprofile_out: Path | None = None) -> dict[str, object]:
    """Load and analyse the trace in this (fresh) process; the figures as a JSON-ready dict."""
    cpu = pin_to_one_core()
    from chakra.analyze.breakdown import BY_EXCLUSIVE, breakdown, top_operators
    from chakra.analyze.critical_path import critical_path
    from chakra.table import load_table

    baseline = peak_rss_bytes()
    t0 = time.perf_counter()
    table = load_table(path)
    t1 = time.perf_counter()
    rss_loaded = peak_rss_bytes()
    profiler = cProfile.Profile() if cprofile_out else None
    if profiler:
        profiler.enable()
    path_result = critical_path(table)
    t2 = time.perf_counter()
    result = breakdown(table)
    t3 = time.perf_counter()
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(cprofile_out))
    rss_analysed = peak_rss_bytes()
    top = top_operators(table, 3, by=BY_EXCLUSIVE)
    t4 = time.perf_counter()
    return {
        "cpu": cpu,
        "nodes": len(table),
        "load_s": t1 - t0,
        "critical_path_s": t2 - t1,
        "breakdown_s": t3 - t2,
        "top_operators_s": t4 - t3,
        "baseline_rss": baseline,
        "loaded_rss": rss_loaded,
        "analysed_rss": rss_analysed,
        "peak_rss": peak_rss_bytes(),
        "path_nodes": len(path_result.positions),
        "length_ns": path_result.length_ns,
        "span_ns": result.span_ns,
        "comm_exposed_ns": result.comm_exposed_ns,
        "top_exclusive": [(s.name, s.exclusive_ns) for s in top],
    }


STAGES = ("load_s", "critical_path_s", "breakdown_s", "top_operators_s")


def measure(path: Path, repeat: int) -> dict:
    """The best time of each stage over ``repeat`` fresh runs, the highest peak RSS among them."""
    runs = [spawn_json(__file__, ["--run", str(path)]) for _ in range(repeat)]
    best = dict(runs[0])
    for stage in STAGES:
        best[stage] = min(r[stage] for r in runs)
    best["all_analysis_s"] = [r["critical_path_s"] + r["breakdown_s"] for r in runs]
    best["peak_rss"] = max(r["peak_rss"] for r in runs)
    return best


# --- profile ---------------------------------------------------------------------------------


def profile(path: Path) -> None:
    """Print the ``PROFILE_TOP`` functions by own time inside ``critical_path`` and ``breakdown``."""
    run_argv = child_argv(__file__, ["--run", str(path)])
    pyspy_path = pyspy()
    with tempfile.TemporaryDirectory() as tmp:
        if not pyspy_path:
            stats_path = Path(tmp) / "analyze.pstats"
            subprocess.run([*run_argv, "--cprofile", str(stats_path)], check=True, capture_output=True)
            print("\ncProfile of critical_path() + breakdown() (py-spy not found), by own time:")
            pstats.Stats(str(stats_path)).sort_stats("tottime").print_stats(PROFILE_TOP)
            return
        raw = Path(tmp) / "stacks.txt"
        cmd = [pyspy_path, "record", "--function", "--format", "raw", "--rate", str(PYSPY_RATE_HZ), "-o", str(raw)]
        subprocess.run([*cmd, "--", *run_argv], check=True, capture_output=True)
        own: Counter[str] = Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            if any(f.startswith(ANALYZE_FRAMES) for f in frames):
                own[frames[-1]] += int(count)
        total = sum(own.values())
        print(f"\npy-spy, critical_path + breakdown: {total:,} samples at {PYSPY_RATE_HZ} Hz; own time")
        print("(C calls count to their caller)")
        print(f"{'own %':>7}{'samples':>9}  function")
        for frame, n in own.most_common(PROFILE_TOP):
            print(f"{100 * n / total:>6.1f}%{n:>9,}  {frame}")


# --- report ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the trace is cached")
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="nodes of the generated rank")
    parser.add_argument("--regenerate", action="store_true", help="generate the trace again even when cached")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="fresh runs (best time kept)")
    parser.add_argument("--profile", action="store_true", help="also profile the analyses of one run")
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_once(args.run, args.cprofile)))
        return 0

    path = ensure_trace(args.data_dir, args.nodes, args.regenerate)
    r = measure(path, args.repeat)
    nodes = r["nodes"]
    analysis_s = r["critical_path_s"] + r["breakdown_s"]
    print(
        f"python {sys.version.split()[0]}, each run in a fresh process pinned to CPU {r['cpu']}; "
        f"best of {args.repeat}; {nodes:,} nodes, {path.stat().st_size / MIB:,.0f} MiB"
    )
    print(f"\n{'stage':<22}{'seconds':>9}{'nodes/s':>13}")
    rows = [
        ("load (load_table)", r["load_s"]),
        ("critical_path", r["critical_path_s"]),
        ("breakdown", r["breakdown_s"]),
        ("analysis (cp + bd)", analysis_s),
        ("load + analysis", r["load_s"] + analysis_s),
        ("top_operators (extra)", r["top_operators_s"]),
    ]
    for stage, seconds in rows:
        print(f"{stage:<22}{seconds:>9.2f}{nodes / seconds:>13,.0f}")
    runs = ", ".join(f"{s:.2f}" for s in r["all_analysis_s"])
    print(
        f"\nRSS MiB: {r['baseline_rss'] / MIB:.0f} after imports, {r['loaded_rss'] / MIB:.0f} after load, "
        f"{r['analysed_rss'] / MIB:.0f} after the analyses, {r['peak_rss'] / MIB:.0f} peak; analysis runs {runs} s"
    )
    print(
        f"critical path: {r['path_nodes']:,} nodes, {r['length_ns'] / 1e6:,.1f} ms; recorded span "
        f"{r['span_ns'] / 1e6:,.1f} ms, exposed communication {r['comm_exposed_ns'] / 1e6:,.1f} ms"
    )
    print(f"top exclusive: {r['top_exclusive']}")
    ok = analysis_s < TARGET_S
    print(f"\n{verdict(ok)}: critical path + breakdown in {analysis_s:.2f} s (target < {TARGET_S:.0f} s on one core)")
    if args.profile:
        profile(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
