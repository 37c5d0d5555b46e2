"""Converting an XLA program at scale: ``chakra convert xla`` on a ``lax.scan`` stack of layers
unrolled to 100k+ nodes (issue 16).

Compiles ``examples/jax_scan_layers.py`` with ``--layers N`` (the gradient of N scanned
transformer-like layers, attention and an MLP each: two ``while`` loops of N iterations), then runs
the CLI in a fresh process and reports the nodes written per second of its wall time and its peak
RSS (:func:`harness.run_measured`).

Usage: python benchmarks/xla_bench.py [--layers 1300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import run_measured

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_scan_layers.py"
DEFAULT_LAYERS = 1300
#: What convert xla prints about the files it wrote.
WROTE = re.compile(r"wrote \d+ files of ([\d,]+) nodes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        subprocess.run([sys.executable, str(EXAMPLE), str(out), "--layers", str(args.layers)], check=True)
        module = out / "scan.hlo.pb"
        instructions = len(re.findall(r"^\s+(?:ROOT )?%", (out / "scan.hlo.txt").read_text(), re.MULTILINE))
        best = None
        for _ in range(args.repeat):
            ran = run_measured([sys.executable, "-m", "chakra", "convert", "xla", str(module), "-o", str(out / "et")])
            if ran.returncode != 0:
                raise SystemExit(ran.output)
            if best is None or ran.wall_s < best.wall_s:
                best = ran
        assert best is not None
        found = WROTE.search(best.stdout)
        nodes = int(found.group(1).replace(",", "")) if found else 0
        print(
            f"{args.layers:,} layers, {instructions:,} HLO instructions -> {nodes:,} nodes: "
            f"{best.wall_s:.2f} s (best of {args.repeat}), {nodes / best.wall_s:,.0f} nodes/s, "
            f"peak RSS {best.peak_rss / 2**20:,.0f} MiB"
        )


if __name__ == "__main__":
    main()
