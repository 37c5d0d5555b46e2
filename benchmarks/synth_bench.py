"""Synthetic workloads (issue 19): ``fit`` and ``sample`` nodes a second, and peak memory.

Generates a Llama 3 8B training step on 8 data-parallel ranks with enough micro-batches for about
``--nodes`` nodes in all (``chakra generate llm``, not timed), then, each case in its own process so
that peak RSS is that case's alone:

* ``fit``: :func:`chakra.synth.fit.fit_workload` and writing the model;
* ``sample``: :func:`chakra.synth.sample.sample_workload` at the fitted scale.

Usage: python benchmarks/synth_bench.py [--nodes 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import peak_rss_bytes

DEFAULT_NODES = 1_000_000
RANKS = 8
#: Nodes of one micro-batch of Llama 3 8B on one rank without tensor or pipeline parallelism (measured).
NODES_PER_MICRO_BATCH = 713
CASES = ("fit", "sample")


def run_case(case: str, folder: Path) -> dict[str, float]:
    from chakra.synth.fit import fit_workload
    from chakra.synth.model import load_model, save_model
    from chakra.synth.sample import sample_workload

    model_path = folder / "llama.synth.json"
    t0 = time.perf_counter()
    if case == "fit":
        model, report = fit_workload([folder / "llama"])
        size = save_model(model, model_path)
        nodes = report.nodes
    else:
        result = sample_workload(load_model(model_path), folder / "sample" / "llama", seed=1)
        nodes, size = result.nodes, model_path.stat().st_size
    seconds = time.perf_counter() - t0
    peak_mib = peak_rss_bytes() / 2**20
    return {"seconds": seconds, "nodes": nodes, "peak_rss_mib": peak_mib, "model_bytes": size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.folder)))
        return 0
    from chakra.generate.llm import generate_llm
    from chakra.generate.spec_input import spec_from_mapping

    micro_batches = max(1, args.nodes // (RANKS * NODES_PER_MICRO_BATCH))
    spec = spec_from_mapping({
        "model": {"preset": "llama3-8b"}, "parallel": {"tp": 1, "pp": 1, "dp": RANKS}, "hardware": "h100",
        "global_batch": RANKS * micro_batches, "micro_batch": 1,
    })  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "sample").mkdir()
        generate_llm(spec, folder / "llama")
        print(f"workload: Llama 3 8B, {RANKS} ranks, {micro_batches} micro-batches a rank")
        for case in CASES:
            done = subprocess.run(
                [sys.executable, __file__, "--case", case, "--folder", str(folder)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            r = json.loads(done.stdout.strip().splitlines()[-1])
            rate = r["nodes"] / r["seconds"]
            print(
                f"{case:8} {r['nodes']:>10,} nodes  {r['seconds']:7.2f} s  {rate:>10,.0f} nodes/s  "
                f"peak {r['peak_rss_mib']:,.0f} MiB  model {r['model_bytes']:,} bytes"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
