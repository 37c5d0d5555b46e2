"""Converting FlexFlow task graphs (issue 20): tasks a second and peak memory.

Writes a FlexFlow task graph of ``--layers`` operators on 64 devices, most data parallel, every
fourth on 8 devices, with FlexFlow's bulk-synchronous weight update (the tests' generator,
``tests/flexflow_graphs.py``, which follows FlexFlow's simulator), its strategy and its computation
graph; then, each case in its own process so that peak RSS is that case's alone:

* ``read``: the task graph read (DOT, labels) and placed (devices and bytes inferred);
* ``convert``: :func:`chakra.flexflow.convert_flexflow`, the ETs written;
* ``convert-check``: the same with the fidelity replay of every device together.

Usage: python benchmarks/flexflow_bench.py [--layers 384]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import peak_rss_bytes, verdict

# the task graph generator is the tests' (one simulation of FlexFlow's semantics, not two)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

DEFAULT_LAYERS = 384
DEVICES = 64
LINK_GBPS = 25.0
CASES = ("read", "convert", "convert-check")
#: Tasks converted (ETs written) per second, the case ``convert`` (issue 37: every front end past 100k/s).
TARGET_TASKS_PER_S = 100_000
#: What the chakra command sets before numpy loads (chakra.cli.main).
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}


def run_case(case: str, folder: Path) -> dict[str, float]:
    from chakra.flexflow import convert_flexflow
    from chakra.flexflow.compgraph import read_compgraph
    from chakra.flexflow.placement import place
    from chakra.flexflow.strategy import read_strategy
    from chakra.flexflow.taskgraph import read_task_graph

    graph, strategy, compgraph = folder / "big.dot", folder / "big.strategy", folder / "big.compgraph.dot"
    t0 = time.perf_counter()
    error = None
    if case == "read":
        tasks = len(place(read_task_graph(graph), read_strategy(strategy), read_compgraph(compgraph)).device)
    else:
        result = convert_flexflow(graph, folder / "et" / "big", strategy=strategy, compgraph=compgraph,
                                  bandwidth_gbps=LINK_GBPS, check=case == "convert-check")  # fmt: skip
        tasks = sum(result.conversion.tasks.values())
        if result.fidelity is not None and result.fidelity.whole is not None:
            error = result.fidelity.whole.error
    seconds = time.perf_counter() - t0
    peak_mib = peak_rss_bytes() / 2**20
    return {"seconds": seconds, "tasks": tasks, "peak_rss_mib": peak_mib, "error": error}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.folder)))
        return 0
    from flexflow_graphs import large_model, simulate, write_compgraph, write_strategy, write_task_graph

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        ops = large_model(num_devices=DEVICES, layers=args.layers)
        ran = simulate(ops, DEVICES, updates=True)
        write_task_graph(ran, folder / "big.dot")
        write_strategy(ops, folder / "big.strategy")
        write_compgraph(ops, folder / "big.compgraph.dot")
        size_mib = (folder / "big.dot").stat().st_size / 2**20
        print(f"{len(ran):,} tasks on {DEVICES} devices, task graph {size_mib:,.1f} MiB")
        for case in CASES:
            done = subprocess.run([sys.executable, __file__, "--case", case, "--folder", str(folder)],
                                  check=True, capture_output=True, text=True,
                                  env={**os.environ, **ONE_BLAS_THREAD})  # fmt: skip
            result = json.loads(done.stdout)
            rate = result["tasks"] / result["seconds"]
            fidelity = "" if result["error"] is None else f"  replay {result['error']:+.4%} of the makespan"
            print(f"{case:14} {result['seconds']:7.2f} s  {rate:10,.0f} tasks/s  "
                  f"peak {result['peak_rss_mib']:6,.0f} MiB{fidelity}")  # fmt: skip
            if case == "convert":
                print(f"{verdict(rate >= TARGET_TASKS_PER_S)}: convert {rate:,.0f} tasks/s "
                      f"(target >= {TARGET_TASKS_PER_S:,})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
