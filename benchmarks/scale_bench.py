"""Workload commands at cluster scale: GPT-3 175B on 2,048 ranks, as the README generates it.

Each command runs as a user runs it (``python -m chakra ...``, a fresh process, stdout to a pipe),
measured by :func:`harness.run_measured`: wall time, the peak RSS of its process tree (workers
included) and the lines it printed. Issue 15's targets: ``info``, ``validate``, ``analyze
breakdown``, ``simulate`` and ``report`` each print under 60 lines by default, and ``analyze
breakdown`` of one named rank file takes about as long as of that file on its own (a copy in
another folder, with no workload around it). The simulator's bytes per node are its peak RSS over
the nodes of the workload (the whole process: imports and configurations included).

Usage: python benchmarks/scale_bench.py [--data DIR] [--only info,validate]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import run_measured, verdict

DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "chakra-scale-bench"
#: The README's example (GPT-3 175B, TP 8, PP 8, DP 32, global batch 256: 8 micro-batches of 1).
GENERATE = ["generate", "llm", "--preset", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "32", "--global-batch", "256"]
#: Issue 15: every workload command's default output fits a screen or two.
MAX_LINES = 60
#: "About as long": the named rank file may take this much longer than the file alone (s), the
#: margin of a busy 2-core machine on sub-second runs.
SAME_TIME_MARGIN_S = 0.5
#: The system and network the simulation runs on: H100 boxes of 8 on a 400 GB/s switch, 256 of
#: them on a 50 GB/s one (the bandwidths of HGX-H100-validated and of a 400 Gb/s NIC per GPU).
NETWORK_YAML = """topology: [ Switch, Switch ]
npus_count: [ 8, 256 ]
bandwidth: [ 400.0, 50.0 ]  # GB/s
latency: [ 936.25, 2000.0 ]  # ns
"""
SHARED = Path(__file__).resolve().parents[2] / "shared"
SYSTEM_JSON = SHARED / "astra-sim" / "examples" / "system" / "native_collectives" / "HGX-H100-validated.json"
TWO_DIMENSIONS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def chakra(*args: str) -> list[str]:
    return [sys.executable, "-m", "chakra", *args]


def prepare(data: Path) -> tuple[Path, Path, Path]:
    """The workload (generated once), and the system and network files of the simulation."""
    data.mkdir(parents=True, exist_ok=True)
    prefix = data / "gpt3"
    if not (data / "gpt3.2047.et").exists():
        print("generating GPT-3 175B on 2,048 ranks ...", file=sys.stderr)
        subprocess.run(chakra(*GENERATE, "-o", str(prefix)), check=True, capture_output=True)
    system = json.loads(SYSTEM_JSON.read_text())
    for key in TWO_DIMENSIONS:
        system[f"{key}-implementation"] = ["ring", "ring"]
    (data / "system.json").write_text(json.dumps(system, indent=1))
    (data / "network.yml").write_text(NETWORK_YAML)
    return prefix, data / "system.json", data / "network.yml"


def nodes_of(prefix: Path) -> int:
    """Nodes of the whole workload (the rank files summed, by ``chakra.analyze.summary``)."""
    script = (
        "import sys; from chakra.analyze.summary import summarize_file; from chakra.workload import open_workload; "
        "print(sum(summarize_file(p).num_nodes for p in open_workload(sys.argv[1]).files.values()))"
    )
    out = subprocess.run([sys.executable, "-c", script, str(prefix)], check=True, capture_output=True, text=True)
    return int(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="where the workload is generated")
    parser.add_argument("--only", default="", help="comma-separated command names to run")
    args = parser.parse_args()
    prefix, system, network = prepare(args.data)
    alone = args.data / "alone"
    alone.mkdir(exist_ok=True)
    shutil.copy(f"{prefix}.0.et", alone / "rank.et")
    report = args.data / "report.html"
    sim = ["simulate", "--workload", str(prefix), "--system", str(system), "--network", str(network)]
    commands = {
        "info": ["info", str(prefix)],
        "validate": ["validate", str(prefix)],
        "analyze breakdown": ["analyze", "breakdown", str(prefix)],
        "analyze breakdown rank 0": ["analyze", "breakdown", f"{prefix}.0.et"],
        "analyze breakdown file alone": ["analyze", "breakdown", str(alone / "rank.et")],
        "analyze ranks": ["analyze", "ranks", str(prefix)],
        "simulate": sim,
        "report": ["report", str(prefix), "-o", str(report)],
    }
    wanted = set(filter(None, args.only.split(",")))
    results = {}
    for name, argv in commands.items():
        if wanted and name not in wanted:
            continue
        ran = run_measured(chakra(*argv))
        lines = len(ran.stdout.splitlines())
        results[name] = ran
        status = "ok" if ran.returncode == 0 else f"exit {ran.returncode}: {ran.output[-300:]}"
        print(f"{name:<30}{ran.wall_s:>8.1f} s{ran.tree_rss / 2**20:>8.0f} MiB{lines:>7} lines  {status}", flush=True)
    for name, ran in results.items():
        if name.startswith("analyze breakdown rank") or name.endswith("alone"):
            continue
        lines = len(ran.stdout.splitlines())
        print(f"{verdict(lines < MAX_LINES)} {name}: {lines} lines (target < {MAX_LINES})")
    if "analyze breakdown rank 0" in results and "analyze breakdown file alone" in results:
        named, single = results["analyze breakdown rank 0"].wall_s, results["analyze breakdown file alone"].wall_s
        ok = named <= single + SAME_TIME_MARGIN_S
        print(f"{verdict(ok)} one named rank file: {named:.2f} s, the file alone {single:.2f} s")
    if "simulate" in results:
        nodes = nodes_of(prefix)
        ran = results["simulate"]
        print(
            f"simulate: {nodes:,} nodes, peak RSS {ran.peak_rss / 2**20:,.0f} MiB = {ran.peak_rss / nodes:,.0f} B/node"
        )


if __name__ == "__main__":
    main()
