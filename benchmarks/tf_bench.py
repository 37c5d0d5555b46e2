"""Converting a TensorFlow step at scale: ``chakra convert tensorflow`` on a deep MLP trained under
MirroredStrategy on 4 logical devices (issue 17).

Records ``examples/tf_mirrored_mlp.py --layers N`` (N hidden layers: every device's partition
graph grows by some 25 nodes a layer, and the profile by their executions over 6 steps), then runs
the CLI in a fresh process and reports the nodes written per second of its wall time, the profile
events read per second, and its peak RSS (:func:`harness.run_measured`); then the same command on a
recording of a few nodes, the fixed cost every conversion pays, and the rate beyond it.

Usage: python benchmarks/tf_bench.py [--layers 400] [--repeat 3]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import best_of, layers_arguments, verdict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tf_mirrored_mlp.py"
#: A two-device recording of a few nodes (tests/data/tensorflow/README.md): the command's fixed cost.
SMALLEST = ROOT / "tests" / "data" / "tensorflow" / "mirrored_mlp_2dev"
DEFAULT_LAYERS = 400
#: Nodes written per second of the CLI's wall time, start-up included (issue 37).
TARGET_NODES_PER_S = 100_000


def main() -> None:
    layers, repeat = layers_arguments(__doc__, DEFAULT_LAYERS)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        subprocess.run([sys.executable, str(EXAMPLE), str(out), "--layers", str(layers)], check=True)
        command = [sys.executable, "-m", "chakra", "convert", "tensorflow", str(out), "-o", str(out / "et" / "s")]
        best = best_of([*command, "--json"], repeat)
        report = json.loads(best.stdout)
        nodes = sum(report["nodes_per_rank"].values())
        events = sum(report["events"].values())
        size_mib = sum(p.stat().st_size for p in out.rglob("*.pb")) / 2**20
        print(
            f"{layers:,} layers, {len(report['devices'])} devices, {size_mib:,.1f} MiB recorded -> "
            f"{nodes:,} nodes: {best.wall_s:.2f} s (best of {repeat}), {nodes / best.wall_s:,.0f} nodes/s, "
            f"{events / best.wall_s:,.0f} profile events/s, peak RSS {best.peak_rss / 2**20:,.0f} MiB"
        )
        floor = best_of([sys.executable, "-m", "chakra", "convert", "tensorflow", str(SMALLEST), "-o",
                         str(out / "et" / "smallest")], repeat)  # fmt: skip
        print(
            f"the same command on a recording of a few nodes: {floor.wall_s:.2f} s (start-up, imports, "
            f"writing): {nodes / max(best.wall_s - floor.wall_s, 1e-9):,.0f} nodes/s beyond it"
        )
        rate = nodes / best.wall_s
        print(f"{verdict(rate >= TARGET_NODES_PER_S)}: {rate:,.0f} nodes/s (target >= {TARGET_NODES_PER_S:,})")


if __name__ == "__main__":
    main()
