"""Workload commands at cluster scale: GPT-3 175B, Llama 3 405B and other parallelisms on 2,048 to
32,768 ranks, written one file per rank or (``--classes``) one file per class.

Each command runs as a user runs it (``python -m chakra ...``, a fresh process, stdout to a pipe),
measured by :func:`harness.run_measured`: wall time, the peak RSS of its process tree (workers
included) and the lines it printed. The workload is generated first (measured too) with TP 8 and
PP 8 at 2,048 ranks (the README's example), PP 16 from 8,192 on, DP the rest, 8 micro-batches of
one; the network is H100 boxes of 8 on a 400 GB/s switch, the boxes on a 50 GB/s one. Other
``--workload`` choices add sequence, context or expert parallelism or ZeRO-3 (:data:`WORKLOADS`).
``--classes`` generates the workload with ``generate llm --classes`` (a file per pipeline stage and
the rank-to-class mapping) and times ``expand`` too (the rank files written from it).

Targets: issue 15's, every command's default output under 60 lines, and ``analyze breakdown`` of
one named rank file about as long as of that file alone; issue 35's, ``simulate`` under 60 s and
4 GB at 32,768 ranks (one rank per class of equivalent ranks), every other command under 3 minutes
and 4 GB there. The simulator's bytes per node are its peak RSS over the nodes of the workload.

Usage: python benchmarks/scale_bench.py [--ranks 2048] [--workload gpt3-175b] [--classes] [--data DIR]
                                        [--only info,validate]
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
#: Micro-batches of one sequence per step (the pipeline depth by scale: :func:`pipeline_depth`).
MICRO_BATCHES = 8
#: The workloads: (model preset, TP, PP (``None``: by scale), the parallelism's own options, CP).
WORKLOADS: dict[str, tuple[str, int, int | None, tuple[str, ...], int]] = {
    "gpt3-175b": ("gpt3-175b", 8, None, (), 1),
    "llama3-405b": ("llama3-405b", 8, None, (), 1),
    "gpt3-175b-sp": ("gpt3-175b", 8, None, ("--sp",), 1),
    "llama3-405b-cp": ("llama3-405b", 8, None, ("--cp", "2"), 2),
    "mixtral-8x7b-ep": ("mixtral-8x7b", 4, 4, ("--ep", "8"), 1),
    "llama3-70b-zero3": ("llama3-70b", 8, 4, ("--zero", "3"), 1),
}
#: Issue 15: every workload command's default output fits a screen or two.
MAX_LINES = 60
#: "About as long": the named rank file may take this much longer than the file alone (s), the
#: margin of a busy 2-core machine on sub-second runs.
SAME_TIME_MARGIN_S = 0.5
#: Issue 35, at 32,768 ranks: simulate, and every other command.
TARGET_RANKS = 32_768
SIMULATE_TARGET_S, OTHER_TARGET_S = 60.0, 180.0
MEMORY_TARGET_BYTES = 4 * 2**30
#: Generation writes more than its default 4 GiB guard at these scales.
MAX_SIZE = "64GiB"
BOX_NPUS = 8
#: The bandwidths of HGX-H100-validated within a box and of a 400 Gb/s NIC per GPU between them.
NETWORK_YAML = """topology: [ Switch, Switch ]
npus_count: [ {box}, {boxes} ]
bandwidth: [ 400.0, 50.0 ]  # GB/s
latency: [ 936.25, 2000.0 ]  # ns
"""
SHARED = Path(__file__).resolve().parents[2] / "shared"
SYSTEM_JSON = SHARED / "astra-sim" / "examples" / "system" / "native_collectives" / "HGX-H100-validated.json"
TWO_DIMENSIONS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def pipeline_depth(ranks: int) -> int:
    return 8 if ranks <= 2048 else 16


def chakra(*args: str) -> list[str]:
    return [sys.executable, "-m", "chakra", *args]


def generate_argv(workload: str, ranks: int, prefix: Path, *, classes: bool) -> list[str]:
    preset, tp, pp, options, cp = WORKLOADS[workload]
    pp = pp or pipeline_depth(ranks)
    dp = ranks // (tp * pp * cp)
    return [
        "generate", "llm", "--preset", preset, "--tp", str(tp), "--pp", str(pp), "--dp", str(dp), *options,
        "--global-batch", str(dp * MICRO_BATCHES), "--max-size", MAX_SIZE, "-o", str(prefix),
        *(["--classes"] if classes else []),
    ]  # fmt: skip


def prepare(data: Path, ranks: int) -> tuple[Path, Path]:
    """The system and network files of the simulation."""
    data.mkdir(parents=True, exist_ok=True)
    system = json.loads(SYSTEM_JSON.read_text())
    for key in TWO_DIMENSIONS:
        system[f"{key}-implementation"] = ["ring", "ring"]
    (data / "system.json").write_text(json.dumps(system, indent=1))
    (data / "network.yml").write_text(NETWORK_YAML.format(box=BOX_NPUS, boxes=ranks // BOX_NPUS))
    return data / "system.json", data / "network.yml"


def nodes_of(prefix: Path) -> int:
    """Nodes of the whole workload (the rank files summed, by ``chakra.analyze.summary``)."""
    script = (
        "import sys, functools; from chakra.analyze.summary import summarize_file; "
        "from chakra.workload import open_workload; nodes = functools.cache(lambda p: summarize_file(p).num_nodes); "
        "print(sum(nodes(p) for p in open_workload(sys.argv[1]).files.values()))"
    )
    out = subprocess.run([sys.executable, "-c", script, str(prefix)], check=True, capture_output=True, text=True)
    return int(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2048, help="ranks to generate (a multiple of 512)")
    parser.add_argument("--workload", "--preset", default="gpt3-175b", choices=WORKLOADS)
    parser.add_argument("--classes", action="store_true", help="generate one file per class (generate llm --classes)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="where the workload is generated")
    parser.add_argument("--only", default="", help="comma-separated command names to run")
    parser.add_argument("--keep", action="store_true", help="keep the generated workload afterwards")
    args = parser.parse_args()
    data = args.data / f"{args.workload}-{args.ranks}{'-classes' if args.classes else ''}"
    system, network = prepare(data, args.ranks)
    prefix = data / "w"
    report = data / "report.html"
    sim = ["simulate", "--workload", str(prefix), "--system", str(system), "--network", str(network)]
    first_file = f"{prefix}.class0.et" if args.classes else f"{prefix}.0.et"
    commands = {
        "generate": generate_argv(args.workload, args.ranks, prefix, classes=args.classes),
        "info": ["info", str(prefix)],
        "validate": ["validate", str(prefix)],
        "analyze breakdown": ["analyze", "breakdown", str(prefix)],
        "analyze breakdown rank 0": ["analyze", "breakdown", first_file],
        "analyze breakdown file alone": ["analyze", "breakdown", str(data / "alone" / "rank.et")],
        "analyze ranks": ["analyze", "ranks", str(prefix)],
        "simulate": sim,
        "report": ["report", str(prefix), "-o", str(report)],
    }
    if args.classes:
        commands["expand"] = ["expand", str(prefix), "-o", str(data / "expanded" / "w")]
    wanted = set(filter(None, args.only.split(",")))
    results = {}
    print(f"{args.workload} on {args.ranks:,} ranks: chakra {' '.join(commands['generate'])}", flush=True)
    # kept from a run with --keep
    generated = Path(f"{prefix}.classes.json" if args.classes else f"{prefix}.{args.ranks - 1}.et").exists()
    for name, argv in commands.items():
        skip = generated if name == "generate" else bool(wanted) and name not in wanted
        if skip:
            continue
        if name == "analyze breakdown file alone":
            (data / "alone").mkdir(exist_ok=True)
            shutil.copy(first_file, data / "alone" / "rank.et")
        ran = run_measured(chakra(*argv))
        lines = len(ran.stdout.splitlines())
        results[name] = ran
        status = "ok" if ran.returncode == 0 else f"exit {ran.returncode}: {ran.output[-300:]}"
        print(f"{name:<30}{ran.wall_s:>8.1f} s{ran.tree_rss / 2**20:>8.0f} MiB{lines:>7} lines  {status}", flush=True)
    verdicts(results, args.ranks, prefix)
    if not args.keep:
        shutil.rmtree(data)


def verdicts(results: dict, ranks: int, prefix: Path) -> None:
    """PASS/MISS against issue 15's and (at :data:`TARGET_RANKS`) issue 35's targets."""
    for name, ran in results.items():
        if name.startswith("analyze breakdown rank") or name.endswith("alone") or name == "generate":
            continue
        lines = len(ran.stdout.splitlines())
        print(f"{verdict(lines < MAX_LINES)} {name}: {lines} lines (target < {MAX_LINES})")
    if "analyze breakdown rank 0" in results and "analyze breakdown file alone" in results:
        named, single = results["analyze breakdown rank 0"].wall_s, results["analyze breakdown file alone"].wall_s
        ok = named <= single + SAME_TIME_MARGIN_S
        print(f"{verdict(ok)} one named rank file: {named:.2f} s, the file alone {single:.2f} s")
    if ranks >= TARGET_RANKS:
        for name, ran in results.items():
            limit_s = SIMULATE_TARGET_S if name == "simulate" else OTHER_TARGET_S
            ok = ran.returncode == 0 and ran.wall_s < limit_s and ran.tree_rss < MEMORY_TARGET_BYTES
            print(f"{verdict(ok)} {name}: {ran.wall_s:.1f} s, {ran.tree_rss / 2**30:.2f} GiB "
                  f"(target < {limit_s:.0f} s, < {MEMORY_TARGET_BYTES / 2**30:.0f} GiB)")  # fmt: skip
    if "simulate" in results:
        nodes = nodes_of(prefix)
        ran = results["simulate"]
        print(
            f"simulate: {nodes:,} nodes, peak RSS {ran.peak_rss / 2**20:,.0f} MiB = {ran.peak_rss / nodes:,.0f} B/node"
        )


if __name__ == "__main__":
    main()
