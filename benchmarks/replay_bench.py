"""Replay on this machine (issue 18): the overhead of issuing a node, and the bus bandwidth of gloo's
collectives as ``chakra replay`` drives them.

* **Overhead**: one rank of a chain of ``--nodes`` compute nodes, replayed with ``--compute duration``
  twice: nodes of 0 µs (the pure cost of issuing: dependency checks, the timer schedule, progress),
  µs a node = step / nodes; and nodes of 10 µs, where the loop runs ahead of the timers it plans,
  so the step should be the chain's recorded time (error = step / recorded - 1).
* **Bus bandwidth**: ``chakra generate micro`` all-reduce, all-gather, reduce-scatter and all-to-all
  at ``--sizes`` on 2 ranks, replayed with ``--compute none``; time, algbw and busbw are the
  replay's own report (``collectives``: issue to completion on the slowest rank, nccl-tests'
  definitions, :mod:`chakra.replay.measure`).

Usage: python benchmarks/replay_bench.py [--nodes 100000] [--sizes 4KiB,1MiB,16MiB] [--iterations 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from chakra import io
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, GlobalMetadata, Node

RANKS = 2
COLLECTIVES = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
#: The chain's node durations (µs): nothing to hold, and nodes the loop runs ahead of.
CHAIN_DURATIONS_US = (0, 10)
KIB = 1024


def _replay(workload: Path, *extra: str) -> dict:
    command = [sys.executable, "-m", "chakra", "replay", str(workload), "--json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return json.loads(done.stdout)


def _chain(path: Path, nodes: int, dur_us: int) -> None:
    chained = (
        Node(id=i, name=f"op{i}", type=COMP_NODE, duration_micros=dur_us, data_deps=[i - 1] if i else [])
        for i in range(nodes)
    )
    io.write(path, GlobalMetadata(version=io.FORMAT_VERSION), chained)


def overhead(folder: Path, nodes: int, iterations: int) -> None:
    for dur_us in CHAIN_DURATIONS_US:
        prefix = folder / f"chain{dur_us}"
        _chain(Path(f"{prefix}.0.et"), nodes, dur_us)
        result = _replay(prefix, "--iterations", str(iterations))["ranks"]["0"]
        step_us = result["step_us"]["median"]
        if dur_us == 0:
            print(f"chain of {nodes:,} nodes of 0 µs: step {step_us / 1000:,.1f} ms, {step_us / nodes:.2f} µs a node")
        else:
            recorded_us = nodes * dur_us
            print(
                f"chain of {nodes:,} nodes of {dur_us} µs: step {step_us / 1000:,.1f} ms against "
                f"{recorded_us / 1000:,.1f} ms recorded ({step_us / recorded_us - 1:+.2%})"
            )


def bandwidth(folder: Path, sizes: list[str], iterations: int) -> None:
    args = ["generate", "micro", *COLLECTIVES, "-o", str(folder), "--sizes", ",".join(sizes), "--rank-counts", "2"]
    subprocess.run([sys.executable, "-m", "chakra", *args], capture_output=True, check=True)
    print(f"{'collective':16} {'size':>8} {'time µs':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}")
    for collective in COLLECTIVES:
        for size in sizes:
            result = _replay(
                folder / f"{collective}.{size}.{RANKS}r", "--compute", "none", "--iterations", str(iterations)
            )
            (row,) = result["collectives"]
            print(
                f"{collective:16} {size:>8} {row['time_us']:10,.1f} {row['algbw_GBps']:11.3f} {row['busbw_GBps']:11.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--sizes", default="4KiB,1MiB,16MiB")
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        overhead(Path(folder), args.nodes, args.iterations)
        bandwidth(Path(folder) / "micro", args.sizes.split(","), args.iterations)
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"peak RSS of one replay process: {children_kib / KIB:,.0f} MiB")


if __name__ == "__main__":
    main()
