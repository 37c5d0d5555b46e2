"""Converting a TensorFlow step at scale: a deep MLP trained under MirroredStrategy on 4 logical
devices (issues 17 and 37).

Records ``examples/tf_mirrored_mlp.py --layers N`` (N hidden layers: every device's partition
graph grows by some 25 nodes a layer, and the profile by their executions over 6 steps), then:

* ``conversion``: :func:`chakra.tensorflow.pipeline.convert_tensorflow_recordings` timed in a fresh
  process pinned to one core, its modules imported first, as the ``chakra`` command runs it (in
  :func:`chakra.collector.batch_process`): reading the recording to the ETs written. This is the
  figure the target applies to, measured as ``convert_bench.py`` measures PyTorch's conversion;
* ``command``: ``chakra convert tensorflow`` in a fresh process, its wall time with the
  interpreter's start-up and imports, and its peak RSS (:func:`harness.run_measured`); then the
  same command on a recording of a few nodes, the fixed cost every conversion pays. On this step of
  16k nodes that fixed cost (about 0.2 s here) is more than 100k nodes/s would allow for the whole
  command, which is why the target is put on the conversion.

Usage: python benchmarks/tf_bench.py [--layers 400] [--repeat 3] [--recording DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import best_of, peak_rss_bytes, pin_to_one_core, spawn_json, verdict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tf_mirrored_mlp.py"
#: A two-device recording of a few nodes (tests/data/tensorflow/README.md): the command's fixed cost.
SMALLEST = ROOT / "tests" / "data" / "tensorflow" / "mirrored_mlp_2dev"
DEFAULT_LAYERS = 400
#: Nodes written per second of the conversion, reading to writing, in a fresh process (issue 37).
TARGET_NODES_PER_S = 100_000


def run_conversion(recording: Path, prefix: Path) -> dict[str, float]:
    """The conversion timed in this (fresh) process, as the ``chakra`` command runs it."""
    cpu = pin_to_one_core()
    from chakra.collector import batch_process
    from chakra.tensorflow.pipeline import convert_tensorflow_recordings

    with batch_process():
        t0 = time.perf_counter()
        result = convert_tensorflow_recordings([recording], prefix)
        seconds = time.perf_counter() - t0
    nodes = sum(len(payloads) for payloads in result.conversion.payloads.values())
    return {"seconds": seconds, "nodes": nodes, "peak_rss": peak_rss_bytes(), "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--recording", type=Path, help="convert this recording instead of making one")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case == "conversion":
        print(json.dumps(run_conversion(args.folder, args.folder / "et" / "lib")))
        return
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        if args.recording is None:
            subprocess.run([sys.executable, str(EXAMPLE), str(out), "--layers", str(args.layers)], check=True)
        else:
            shutil.copytree(args.recording, out, dirs_exist_ok=True)
        size_mib = sum(p.stat().st_size for p in out.rglob("*.pb")) / 2**20
        runs = [spawn_json(__file__, ["--case", "conversion", "--folder", str(out)]) for _ in range(args.repeat)]
        conversion = min(runs, key=lambda r: r["seconds"])
        rate = conversion["nodes"] / conversion["seconds"]
        print(
            f"{args.layers:,} layers, {size_mib:,.1f} MiB recorded -> {conversion['nodes']:,} nodes; conversion "
            f"(fresh process, one core): {conversion['seconds']:.3f} s (best of {args.repeat}: "
            f"{', '.join(format(r['seconds'], '.3f') for r in runs)}), {rate:,.0f} nodes/s, "
            f"peak RSS {max(r['peak_rss'] for r in runs) / 2**20:,.0f} MiB"
        )
        command = [sys.executable, "-m", "chakra", "convert", "tensorflow", str(out), "-o", str(out / "et" / "s")]
        best = best_of([*command, "--json"], args.repeat)
        report = json.loads(best.stdout)
        events = sum(report["events"].values())
        print(
            f"the command, start-up included: {best.wall_s:.2f} s (best of {args.repeat}), "
            f"{conversion['nodes'] / best.wall_s:,.0f} nodes/s, {events / best.wall_s:,.0f} profile events/s, "
            f"peak RSS {best.peak_rss / 2**20:,.0f} MiB"
        )
        floor = best_of([sys.executable, "-m", "chakra", "convert", "tensorflow", str(SMALLEST), "-o",
                         str(out / "et" / "smallest")], args.repeat)  # fmt: skip
        print(f"the same command on a recording of a few nodes (start-up, imports, writing): {floor.wall_s:.2f} s")
        target = TARGET_NODES_PER_S
        print(f"{verdict(rate >= target)}: conversion {rate:,.0f} nodes/s (target >= {target:,})")


if __name__ == "__main__":
    main()
