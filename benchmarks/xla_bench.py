"""Converting an XLA program at scale: ``chakra convert xla`` on a ``lax.scan`` stack of layers
unrolled to 100k+ nodes (issue 16).

Compiles ``examples/jax_scan_layers.py`` with ``--layers N`` (the gradient of N scanned
transformer-like layers, attention and an MLP each: two ``while`` loops of N iterations), then runs
the CLI in a fresh process and reports the nodes written per second of its wall time and its peak
RSS (:func:`harness.run_measured`).

Usage: python benchmarks/xla_bench.py [--layers 1300] [--repeat 3]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import best_of, layers_arguments, verdict

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_scan_layers.py"
DEFAULT_LAYERS = 1300
#: Nodes written per second of the CLI's wall time, start-up included (issue 37).
TARGET_NODES_PER_S = 100_000
#: What convert xla prints about the files it wrote.
WROTE = re.compile(r"wrote \d+ files of ([\d,]+) nodes")


def main() -> None:
    layers, repeat = layers_arguments(__doc__, DEFAULT_LAYERS)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        subprocess.run([sys.executable, str(EXAMPLE), str(out), "--layers", str(layers)], check=True)
        module = out / "scan.hlo.pb"
        instructions = len(re.findall(r"^\s+(?:ROOT )?%", (out / "scan.hlo.txt").read_text(), re.MULTILINE))
        command = [sys.executable, "-m", "chakra", "convert", "xla", str(module), "-o", str(out / "et")]
        best = best_of(command, repeat)
        found = WROTE.search(best.stdout)
        nodes = int(found.group(1).replace(",", "")) if found else 0
        print(
            f"{layers:,} layers, {instructions:,} HLO instructions -> {nodes:,} nodes: "
            f"{best.wall_s:.2f} s (best of {repeat}), {nodes / best.wall_s:,.0f} nodes/s, "
            f"peak RSS {best.peak_rss / 2**20:,.0f} MiB"
        )
        rate = nodes / best.wall_s
        print(f"{verdict(rate >= TARGET_NODES_PER_S)}: {rate:,.0f} nodes/s (target >= {TARGET_NODES_PER_S:,})")


if __name__ == "__main__":
    main()
