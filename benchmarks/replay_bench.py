"""Replay on this machine (issue 18): the overhead of issuing a node, and the bus bandwidth of gloo's
collectives as ``chakra replay`` drives them.

* **Overhead**: one rank of a chain of ``--nodes`` compute nodes, replayed with ``--compute duration``
  twice: nodes of 0 µs (nothing to hold: the pure cost of issuing, waiting checks and progress) and
  of 1 µs (the holding loop too); µs of overhead per node = (step - held time) / nodes.
* **Bus bandwidth**: ``chakra generate micro`` all-reduce, all-gather, reduce-scatter and all-to-all
  at ``--sizes`` on 2 ranks, replayed with ``--compute none``; the median step is the collective's
  time, and bandwidth follows the nccl-tests definitions: algbw = bytes / time, busbw = algbw x
  2(n-1)/n for all-reduce and (n-1)/n for the others (n ranks; the bytes are the whole buffer:
  for all-gather, n times what each rank puts in).

Usage: python benchmarks/replay_bench.py [--nodes 100000] [--sizes 4KiB,1MiB,16MiB] [--iterations 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from chakra import io
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, GlobalMetadata, Node

RANKS = 2
COLLECTIVES = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
#: nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md there), by collective, for n ranks.
BUS_FACTOR = {
    "ALL_REDUCE": lambda n: 2 * (n - 1) / n,
    "ALL_GATHER": lambda n: (n - 1) / n,
    "REDUCE_SCATTER": lambda n: (n - 1) / n,
    "ALL_TO_ALL": lambda n: (n - 1) / n,
}
SIZE_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _bytes(text: str) -> int:
    for unit, factor in SIZE_UNITS.items():
        if text.endswith(unit):
            return int(text[: -len(unit)]) * factor
    return int(text)


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
    for dur_us in (0, 1):
        prefix = folder / f"chain{dur_us}"
        _chain(Path(f"{prefix}.0.et"), nodes, dur_us)
        result = _replay(prefix, "--iterations", str(iterations))["ranks"]["0"]
        step_us = result["step_us"]["median"]
        per_node = (step_us - nodes * dur_us) / nodes
        print(
            f"chain of {nodes:,} nodes of {dur_us} µs: step {step_us / 1000:,.1f} ms, {per_node:.2f} µs overhead a node"
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
            time_us = max(r["step_us"]["median"] for r in result["ranks"].values())
            whole = _bytes(size) * (RANKS if collective == "ALL_GATHER" else 1)
            algbw = whole / (time_us * 1e-6) / 1e9
            busbw = algbw * BUS_FACTOR[collective](RANKS)
            print(f"{collective:16} {size:>8} {time_us:10,.1f} {algbw:11.3f} {busbw:11.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--sizes", default="4KiB,1MiB,16MiB")
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        overhead(Path(folder), args.nodes, args.iterations)
        bandwidth(Path(folder) / "micro", args.sizes.split(","), args.iterations)


if __name__ == "__main__":
    main()
