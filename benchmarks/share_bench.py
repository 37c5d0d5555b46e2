"""Anonymizing a workload (issue 19): nodes a second against the streaming reader, and peak memory.

Generates one rank shaped like a converted PyTorch trace (``io_bench.generate``: about 300 bytes a
node, IO strings, op_schema, the converter's attributes), then, each case in its own process so
that peak RSS is that case's alone:

* ``stream``: :class:`chakra.io.EtReader` over every node (the reader the anonymizer streams with);
* ``anonymize``: :func:`chakra.share.anonymize.anonymize_workload`, writing and leak-checking;
* ``anonymize-kinds``: the same with ``keep_op_kinds`` (a class rule match a distinct name);
* ``anonymize-coarse``: the same with ``pow2`` size buckets and 2 % time noise.

Each case runs with one BLAS thread, as the ``chakra`` command does.

Usage: python benchmarks/share_bench.py [--nodes 1000000]
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

from harness import peak_rss_bytes
from io_bench import generate

DEFAULT_NODES = 1_000_000
CASES = ("stream", "anonymize", "anonymize-kinds", "anonymize-coarse")
#: What the chakra command sets before numpy loads (chakra.cli.main): idle BLAS threads spin otherwise.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
#: --time-noise of the coarse case.
NOISE = 0.02


def run_case(case: str, path: Path) -> dict[str, float]:
    from chakra import io
    from chakra.share.anonymize import AnonymizeOptions, SizeBuckets, anonymize_workload

    t0 = time.perf_counter()
    if case == "stream":
        count = 0
        with io.EtReader(path) as reader:
            for _ in reader:
                count += 1
        leaks = 0
    else:
        coarse = case == "anonymize-coarse"
        options = AnonymizeOptions(
            key=b"bench", keep_op_kinds=case == "anonymize-kinds", time_noise=NOISE if coarse else 0.0,
            size_buckets=SizeBuckets.POW2 if coarse else SizeBuckets.NONE,
        )  # fmt: skip
        report = anonymize_workload(path, path.parent / "out" / "job", options)
        count, leaks = report.nodes, len(report.leaks)
    seconds = time.perf_counter() - t0
    peak_mib = peak_rss_bytes() / 2**20
    return {"seconds": seconds, "nodes": count, "peak_rss_mib": peak_mib, "leaks": leaks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.path)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "job.0.et"
        generate(path, args.nodes)
        print(f"{args.nodes:,} nodes, {path.stat().st_size / 2**20:,.0f} MiB")
        for case in CASES:
            done = subprocess.run([sys.executable, __file__, "--case", case, "--path", str(path)],
                                  check=True, capture_output=True, text=True,
                                  env={**os.environ, **ONE_BLAS_THREAD})  # fmt: skip
            result = json.loads(done.stdout)
            rate = result["nodes"] / result["seconds"]
            peak_mib, leaks = result["peak_rss_mib"], result["leaks"]
            seconds = result["seconds"]
            print(f"{case:16} {seconds:7.2f} s  {rate:10,.0f} nodes/s  peak {peak_mib:6,.0f} MiB  leaks {leaks}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
