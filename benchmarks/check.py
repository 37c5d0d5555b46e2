"""``make bench-check``: the fast benchmarks, each judged against its issue's targets; exit 1 on a MISS.

Runs every benchmark of :data:`FAST` in turn (each measures in fresh processes of its own), shows
its output as it comes, and counts the ``PASS``/``MISS`` verdicts it prints. A benchmark that misses
is run once more and judged by that second run: on a shared machine a slow spell of a minute made
one miss on code that had not changed, and passes; a slowdown of the code misses again. A benchmark
that fails, or prints no verdict at all, counts as a miss too: a guard that judged nothing guards
nothing. The summary names every miss, so a slowdown shows up the day it lands rather than at the
next release.

Usage: python benchmarks/check.py [--only convert_bench.py ...]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The benchmarks quick enough to run on every change (a minute or two each here): the conversion
#: front ends of issue 37 and the Kineto reader, each the best of its default 3 fresh runs (one run
#: judged a machine's passing stall, not the code: a verdict that flips between runs guards nothing).
FAST = (
    ("convert_bench.py",),
    ("kineto_bench.py",),
    ("xla_bench.py",),
    ("tf_bench.py",),
    ("flexflow_bench.py",),
)
#: A verdict as the benchmarks print it (``harness.verdict``), and the line it stands on.
VERDICT = re.compile(r"\b(PASS|MISS)\b")


def run_benchmark(argv: tuple[str, ...]) -> tuple[int, list[str], list[str], float]:
    """Run one benchmark, echoing its output; its exit code, PASS lines, MISS lines and seconds."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(HERE / argv[0]), *argv[1:]],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE.parent,
    )  # fmt: skip
    passed: list[str] = []
    missed: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", flush=True)
        found = VERDICT.findall(line)
        if "MISS" in found:
            missed.append(line.strip())
        elif found:
            passed.append(line.strip())
    return process.wait(), passed, missed, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these of the fast benchmarks")
    args = parser.parse_args()
    chosen = [b for b in FAST if not args.only or b[0] in args.only]
    if not chosen:
        print(f"no fast benchmark named {args.only}; they are: {', '.join(b[0] for b in FAST)}", file=sys.stderr)
        return 2
    rows: list[tuple[str, str, float]] = []
    misses: list[str] = []
    for argv in chosen:
        print(f"\n=== {' '.join(argv)}", flush=True)
        code, passed, missed, seconds = run_benchmark(argv)
        runs = 1
        if code == 0 and missed:
            print(f"\n=== {' '.join(argv)}, run again: {len(missed)} MISS in its first run", flush=True)
            code, passed, missed, again = run_benchmark(argv)
            runs, seconds = 2, seconds + again
        if code != 0:
            misses.append(f"{argv[0]}: exited {code}")
        elif not passed and not missed:
            misses.append(f"{argv[0]}: printed no verdict")
        misses += [f"{argv[0]}: {line}" for line in missed]
        state = "failed" if code != 0 else f"{len(passed)} PASS, {len(missed)} MISS"
        state += "" if runs == 1 else " (run 2)"
        rows.append((argv[0], state, seconds))
    print(f"\n{'benchmark':<22}{'verdicts':<28}{'seconds':>8}")
    for name, state, seconds in rows:
        print(f"{name:<22}{state:<28}{seconds:>8.0f}")
    if misses:
        print(f"\n{len(misses)} miss(es):")
        for miss in misses:
            print(f"  {miss}")
        return 1
    print("\nevery target met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
