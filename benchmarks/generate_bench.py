"""Time ``chakra.generate.llm.generate_llm`` on GPT-3 175B at 2,048 ranks (TP 8, PP 8, DP 32, 1F1B).

Each configuration runs in a fresh process pinned to one core (peak RSS is its own), writes into
``--out-dir`` (default ``/tmp/chakra-generate-bench``, emptied before each run) and reports the wall
time, ranks/s, nodes/s, bytes written and peak memory; best of ``--repeat`` runs. Configurations:

* ``m8``: 8 micro-batches (global batch 256), the configuration the reference's STG timing used
  (380 s for 2,048 ranks there);
* ``m48``: 48 micro-batches (global batch 1,536 sequences, GPT-3's published batch).

Target (issue 6): under 60 s on one core.

Usage: python benchmarks/generate_bench.py [--config m8 m48] [--repeat 3] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from harness import peak_rss_bytes, pin_to_one_core, spawn_json, verdict

#: Issue 6's target for the 2,048-rank GPT-3 workload.
TARGET_S = 60.0
#: Global batch (sequences) of each configuration; micro-batch 1, DP 32.
CONFIGS = {"m8": 256, "m48": 1536}
MIB = 1 << 20


def measure(config: str, out_dir: Path) -> dict:
    """Generate once in this process; the figures as a dict."""
    from chakra.generate.llm import generate_llm
    from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ParallelSpec, WorkloadSpec

    pin_to_one_core()
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    spec = WorkloadSpec(
        PRESETS["gpt3-175b"],
        ParallelSpec(tp=8, pp=8, dp=32, schedule="1f1b"),
        HARDWARE_PRESETS["h100"],
        global_batch=CONFIGS[config],
    )
    started = time.perf_counter()
    result = generate_llm(spec, out_dir / "gpt3")
    elapsed_s = time.perf_counter() - started
    size_bytes = sum(p.stat().st_size for p in result.files)
    figures = {
        "config": config,
        "ranks": result.world_size,
        "micro_batches": spec.micro_batches,
        "nodes": result.total_nodes,
        "nodes_per_rank_max": max(result.nodes_per_stage),
        "seconds": elapsed_s,
        "bytes": size_bytes,
        "peak_rss_bytes": peak_rss_bytes(),
    }
    shutil.rmtree(out_dir, ignore_errors=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs per configuration (best is kept)")
    parser.add_argument("--out-dir", type=Path, default=Path("/tmp/chakra-generate-bench"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.out_dir)))
        return 0
    print(f"Python {sys.version.split()[0]}, one core, best of {args.repeat} fresh runs")
    print(f"{'config':>6} {'ranks':>6} {'m':>3} {'nodes':>12} {'seconds':>8} {'ranks/s':>8} {'nodes/s':>10} "
          f"{'MiB written':>11} {'peak MiB':>9}  target")  # fmt: skip
    ok = True
    for config in args.config:
        runs = [spawn_json(__file__, ["--child", config, "--out-dir", str(args.out_dir)]) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        passed = best["seconds"] < TARGET_S
        ok &= passed
        print(
            f"{config:>6} {best['ranks']:>6} {best['micro_batches']:>3} {best['nodes']:>12,} {best['seconds']:>8.2f} "
            f"{best['ranks'] / best['seconds']:>8.0f} {best['nodes'] / best['seconds']:>10,.0f} "
            f"{best['bytes'] / MIB:>11,.0f} {best['peak_rss_bytes'] / MIB:>9.0f}  "
            f"{verdict(passed)} (< {TARGET_S:.0f} s)"
        )
        seconds = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(f"       runs: {seconds} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
