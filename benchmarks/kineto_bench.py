"""Converting profiler traces alone (issue 30): Kineto events a second and peak memory, end to end.

The input is a real trace made long: rank 0 of the 2-rank NCCL job in ``../shared/data/hta``
(40,573 events, 3 steps of a ResNet under DDP on an A100) repeated ``--copies`` times one after the
other, with its times shifted, its correlation, External, record-function and flow ids and its step
numbers made unique, written as plain JSON. Each case runs in its own process pinned to one core,
so that peak RSS is that case's alone:

* ``load``: the trace read (msgspec) and its events sorted by role;
* ``step``: ``convert_kineto_workload`` with its default window (the median complete step), written;
* ``all``: the same for the whole trace (``--step all``).

Each case runs ``--repeat`` times: the best time is reported, with the highest peak of the runs.

Targets (issue 30): at least 500k events/s end to end on one core; peak memory under 3x the JSON.

Usage: python benchmarks/kineto_bench.py [--copies 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import peak_rss_bytes, pin_to_one_core, verdict

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "hta" / "nccl_2rank_rank0_kineto.json.gz"
DEFAULT_COPIES = 10
DEFAULT_REPEAT = 3
CASES = ("load", "step", "all")
#: Targets of issue 30.
TARGET_EVENTS_PER_S = 500_000
TARGET_MEMORY_RATIO = 3.0
#: Ids shifted per copy so that no two copies share one (the source's are below this).
ID_STRIDE = 10_000_000
#: What the chakra command sets before numpy loads (chakra.cli.main).
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
_ID_ARGS = ("External id", "Record function id", "correlation", "Ev Idx")


def tile(copies: int, out: Path) -> int:
    """Write the source trace repeated ``copies`` times to ``out``; the number of events."""
    with gzip.open(SOURCE, "rt") as handle:
        trace = json.load(handle)
    events = trace["traceEvents"]
    timed = [e for e in events if e.get("ph") == "X"]
    first = min(e["ts"] for e in timed)
    span_us = max(e["ts"] + e.get("dur", 0) for e in timed) - first + 1000.0
    tiled = [e for e in events if e.get("ph") == "M"]
    for copy in range(copies):
        shift_us, shift_id = copy * span_us, copy * ID_STRIDE
        for event in events:
            if event.get("ph") == "M":
                continue
            event = dict(event)
            event["ts"] = event["ts"] + shift_us
            if "id" in event and isinstance(event["id"], int):
                event["id"] += shift_id
            args = event.get("args")
            if isinstance(args, dict):
                args = dict(args)
                for key in _ID_ARGS:
                    if isinstance(args.get(key), int) and args[key] > 0:
                        args[key] += shift_id
                event["args"] = args
            name = event.get("name", "")
            if name.startswith("ProfilerStep#"):
                event["name"] = f"ProfilerStep#{int(name[13:]) + 3 * copy}"
            tiled.append(event)
    trace["traceEvents"] = tiled
    out.write_text(json.dumps(trace))
    return len(tiled)


def run_case(case: str, path: Path) -> dict[str, float]:
    pin_to_one_core()
    from chakra.kineto.window import ALL_STEPS
    from chakra.kineto.workload import convert_kineto_workload
    from chakra.pytorch.kineto import classify, load_kineto_trace

    t0 = time.perf_counter()
    nodes = 0
    if case == "load":
        classify(load_kineto_trace(path))
    else:
        with tempfile.TemporaryDirectory() as folder:
            step = ALL_STEPS if case == "all" else None
            result = convert_kineto_workload([path], Path(folder) / "w", step=step, workers=1)
            nodes = sum(r.node_count for r in result.conversion.reports.values())
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_bytes": peak_rss_bytes(), "nodes": nodes}


def _run_case(case: str, path: Path) -> dict[str, float]:
    """One run of ``case`` in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--case", case, "--path", str(path)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **ONE_BLAS_THREAD},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=DEFAULT_COPIES)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs of each case (best time)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.path)))
        return 0
    if not SOURCE.exists():
        print(f"needs {SOURCE} (the shared data beside the checkout)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "rank0.json"
        events = tile(args.copies, path)
        size = path.stat().st_size
        print(
            f"{events:,} events ({args.copies} copies of {SOURCE.name}), {size / 2**20:,.1f} MiB of JSON; "
            f"best of {args.repeat} runs"
        )
        for case in CASES:
            runs = [_run_case(case, path) for _ in range(max(1, args.repeat))]
            result = min(runs, key=lambda run: run["seconds"])
            result["peak_rss_bytes"] = max(run["peak_rss_bytes"] for run in runs)
            rate = events / result["seconds"]
            ratio = result["peak_rss_bytes"] / size
            nodes = f"  {result['nodes']:,} nodes" if result["nodes"] else ""
            judged = (
                ""
                if case == "load"
                else (f"  speed {verdict(rate >= TARGET_EVENTS_PER_S)}, memory {verdict(ratio <= TARGET_MEMORY_RATIO)}")
            )
            print(
                f"{case:5} {result['seconds']:7.2f} s  {rate:10,.0f} events/s  "
                f"peak {result['peak_rss_bytes'] / 2**20:7,.0f} MiB ({ratio:.2f}x the JSON){nodes}{judged}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
