"""Simulator throughput (simulated nodes per second) and peak memory of ``chakra.sim``.

Generates, once, two synthetic workloads into ``--data-dir`` (``--regenerate`` redoes it), each with
its system JSON, network YAML and, for (b), its communicator groups:

* (a) ``a-2x500k``: 2 ranks x 500,000 nodes (1M nodes in all) on a 2-NPU ring. A collective needs
  a network of at least two NPUs, so the issue's "one rank with 1M nodes" is two identical ranks.
* (b) ``b-256x10k``: 256 ranks x 10,000 nodes on a 2-D ``[Switch, Ring]`` network of ``[8, 32]``
  NPUs; collectives on all ranks and on the rank's 8-rank group (``pg_name`` "1".."32").
* ``b-64x10k``: the first 64 ranks of (b) on ``[8, 8]`` NPUs, to show memory is linear in the
  workload (RSS per node of the 64- and 256-rank runs should match).

Every rank is the same chain-ish graph: compute nodes (GPU, 1-10 µs, every third one a CPU op) in a
chain; every tenth node an ALL_REDUCE of 1 MiB that waits for the compute before it and for the
previous collective, while compute runs on; the compute of the block after next waits for it.

Each case runs in a fresh process pinned to one core, so peak RSS (``ru_maxrss``) is the case's
own: ``load_rank`` for every rank (the load stage), then ``simulate`` (the simulate stage), each
timed alone. Targets (issue): at least 500k simulated nodes/s on one core (simulate stage) and
memory linear in the workload. ``--profile`` samples one case with py-spy (cProfile around
``simulate`` when py-spy is missing) and prints the functions with the most own time in the
simulate stage. Run: ``python benchmarks/sim_bench.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from harness import child_argv, peak_rss_bytes, pin_to_one_core, pyspy, spawn_json, verdict

if TYPE_CHECKING:
    from chakra.wire import AttrEncoder

DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "chakra-sim-bench"
DEFAULT_REPEAT = 3  # fresh runs per case (best time kept); a run of all three cases takes about 40 s

TARGET_NODES_PER_S = 500_000  # simulated nodes per second in the simulate stage, one core
LINEAR_TOLERANCE = 0.15  # RSS per node of the 64- and 256-rank runs may differ by this fraction

# Shape of every rank's graph (see the module docstring).
COLL_EVERY = 10  # every tenth node is a collective
CPU_EVERY = 3  # every third node (that is not a collective) is a CPU op
SUBGROUP_EVERY = 4  # with groups, every fourth collective runs on the rank's group
COLL_BYTES = 1 << 20  # comm_size of every collective: 1 MiB
MIN_DURATION_US = 1  # compute durations run from this ...
DURATION_SPAN_US = 10  # ... through MIN_DURATION_US + DURATION_SPAN_US - 1
DURATION_STRIDE = 7  # spreads the durations over the span (coprime with it)
GPU_OPS = ("aten::mm", "aten::add_", "aten::gelu", "aten::layer_norm")
CPU_OPS = ("aten::empty", "aten::view", "aten::to")
COLL_OP = "nccl:all_reduce"


class Workload(NamedTuple):
    """A generated workload: every rank the same graph of ``nodes`` nodes."""

    ranks: int
    nodes: int  # per rank
    topology: tuple[str, ...]  # of the networks it runs on
    grouped: bool  # collectives also on the rank's GROUP_SIZE-rank group


class Case(NamedTuple):
    """A measurement: the first ``ranks`` ranks of ``workload`` on a network of ``npus`` NPUs."""

    workload: str
    ranks: int
    npus: tuple[int, ...]  # npus_count per dimension


GROUP_SIZE = 8  # ranks per communicator group in (b)
WORKLOADS = {
    "a": Workload(2, 500_000, ("Ring",), grouped=False),
    "b": Workload(256, 10_000, ("Switch", "Ring"), grouped=True),
}
CASES = {
    "a-2x500k": Case("a", 2, (2,)),
    "b-256x10k": Case("b", 256, (GROUP_SIZE, 32)),
    "b-64x10k": Case("b", 64, (GROUP_SIZE, 8)),
}
LINEAR_CASES = ("b-64x10k", "b-256x10k")  # same graph per rank, 4x the ranks
DEFAULT_PROFILE_CASE = "b-256x10k"
LINK_BANDWIDTH_GBPS = 50.0  # every dimension of the generated networks
LINK_LATENCY_NS = 500.0  # ns per hop on every dimension

# The system file: examples/astra/system.json with an algorithm per network dimension.
SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": 900,
}
COLL_IMPLEMENTATIONS = (
    "all-reduce-implementation",
    "all-gather-implementation",
    "reduce-scatter-implementation",
    "all-to-all-implementation",
)

TRACE_PREFIX = "trace"  # rank files are PREFIX.{rank}.et, groups PREFIX.comm_groups.json
META_FILE = "workload.json"
SYSTEM_FILE = "system.json"
MIB = 1024 * 1024
PROFILE_TOP = 15  # functions listed by --profile
PYSPY_RATE_HZ = 250  # py-spy samples per second
SIMULATE_FRAME = "simulate ("  # py-spy's frame of chakra.sim.engine.simulate starts with this
ENGINE_FILE = "engine.py"


# --- workloads -------------------------------------------------------------------------------


def _network_yaml(topology: tuple[str, ...], npus: tuple[int, ...]) -> str:
    dims = len(topology)
    return (
        f"topology: [ {', '.join(topology)} ]\n"
        f"npus_count: [ {', '.join(map(str, npus))} ]\n"
        f"bandwidth: [ {', '.join([str(LINK_BANDWIDTH_GBPS)] * dims)} ]  # GB/s\n"
        f"latency: [ {', '.join([str(LINK_LATENCY_NS)] * dims)} ]  # ns\n"
    )


def _network_file(npus: tuple[int, ...]) -> str:
    return "network." + "x".join(map(str, npus)) + ".yml"


def _groups_file(case: Case) -> str:
    """All ranks: beside the rank files, where ``chakra simulate`` finds it; a subset: its own file."""
    full = case.ranks == WORKLOADS[case.workload].ranks
    return f"{TRACE_PREFIX}.comm_groups.json" if full else f"comm_groups.{case.ranks}.json"


def rank_payloads(num_nodes: int, pg_name: str | None, enc: AttrEncoder) -> list[bytes]:
    """One rank's serialized nodes; ``pg_name`` None puts every collective on all ranks.
    ``enc`` is shared between ranks (its cache keeps the attribute bytes)."""
    from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE
    from chakra.wire import encode_node

    gpu, cpu = enc("is_cpu_op", False), enc("is_cpu_op", True)
    coll_attrs = [gpu, enc("comm_type", ALL_REDUCE), enc("comm_size", COLL_BYTES)]
    group_attrs = coll_attrs + ([enc("pg_name", pg_name)] if pg_name is not None else [])
    last = COLL_EVERY - 1
    out = []
    for i in range(num_nodes):
        block, offset = divmod(i, COLL_EVERY)
        if offset == last:  # collective: after the compute before it and the previous collective
            ctrl = [i - COLL_EVERY] if block else []
            attrs = group_attrs if pg_name is not None and block % SUBGROUP_EVERY == SUBGROUP_EVERY - 1 else coll_attrs
            out.append(encode_node(i, COLL_OP, COMM_COLL_NODE, ctrl, [i - 1], 0, 0, None, None, attrs))
            continue
        data = [i - 1 if offset else i - 2] if i else []  # the previous compute node
        ctrl = [i - COLL_EVERY - 1] if offset == 0 and block >= 2 else []  # the collective two blocks back
        duration = MIN_DURATION_US + (i * DURATION_STRIDE) % DURATION_SPAN_US
        if i % CPU_EVERY == 0:
            name, attrs = CPU_OPS[i % len(CPU_OPS)], [cpu]
        else:
            name, attrs = GPU_OPS[i % len(GPU_OPS)], [gpu]
        out.append(encode_node(i, name, COMP_NODE, ctrl, data, 0, duration, None, None, attrs))
    return out


def _workload_meta(name: str) -> dict[str, object]:
    """What the cached files were generated from: a mismatch regenerates them."""
    shape = [COLL_EVERY, CPU_EVERY, SUBGROUP_EVERY, COLL_BYTES, MIN_DURATION_US, DURATION_SPAN_US, DURATION_STRIDE]
    cases = {case: list(CASES[case].npus) for case in CASES if CASES[case].workload == name}
    workload = WORKLOADS[name]._asdict()
    return {**workload, "topology": list(workload["topology"]), "cases": cases, "shape": shape}


def ensure_workload(data_dir: Path, name: str, regenerate: bool) -> Path:
    """The workload's folder, generated unless a matching one is cached."""
    from chakra import io
    from chakra.wire import AttrEncoder

    folder = data_dir / name
    meta_path = folder / META_FILE
    meta = _workload_meta(name)
    if not regenerate and meta_path.exists() and json.loads(meta_path.read_text()) == meta:
        return folder
    workload = WORKLOADS[name]
    print(f"generating workload {name}: {workload.ranks} x {workload.nodes:,} nodes -> {folder}", file=sys.stderr)
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    meta_path.unlink(missing_ok=True)
    system = dict(SYSTEM)
    for key in COLL_IMPLEMENTATIONS:
        system[key] = ["ring"] * len(workload.topology)
    (folder / SYSTEM_FILE).write_text(json.dumps(system, indent=1) + "\n")
    for case in CASES.values():
        if case.workload == name:
            (folder / _network_file(case.npus)).write_text(_network_yaml(workload.topology, case.npus))
            if workload.grouped:
                groups = {
                    str(g + 1): list(range(g * GROUP_SIZE, (g + 1) * GROUP_SIZE))
                    for g in range(case.ranks // GROUP_SIZE)
                }
                (folder / _groups_file(case)).write_text(json.dumps(groups) + "\n")
    encoder = AttrEncoder()
    for rank in range(workload.ranks):
        pg_name = str(rank // GROUP_SIZE + 1) if workload.grouped else None
        with io.EtWriter(folder / f"{TRACE_PREFIX}.{rank}.et") as writer:
            for payload in rank_payloads(workload.nodes, pg_name, encoder):
                writer.write_serialized(payload)
    meta_path.write_text(json.dumps(meta) + "\n")
    print(f"  done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return folder


# --- measurement (child process) -------------------------------------------------------------


def run_case(case: str, data_dir: Path, cprofile_out: Path | None = None) -> dict[str, object]:
    """Load and simulate one case in this (fresh) process; the figures as a JSON-ready dict."""
    cpu = pin_to_one_core()
    from chakra.groups import CommGroups
    from chakra.sim.config import load_network, load_system
    from chakra.sim.engine import simulate
    from chakra.sim.program import load_rank

    spec = CASES[case]
    folder = data_dir / spec.workload
    system = load_system(folder / SYSTEM_FILE)
    network = load_network(folder / _network_file(spec.npus))
    groups = CommGroups.read(folder / _groups_file(spec)) if WORKLOADS[spec.workload].grouped else None
    baseline = peak_rss_bytes()

    t0 = time.perf_counter()
    programs = {rank: load_rank(folder / f"{TRACE_PREFIX}.{rank}.et", rank) for rank in range(spec.ranks)}
    t1 = time.perf_counter()
    rss_loaded = peak_rss_bytes()
    profiler = cProfile.Profile() if cprofile_out else None
    if profiler:
        profiler.enable()
    result = simulate(programs, system, network, comm_groups=groups)
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(cprofile_out))
    t2 = time.perf_counter()

    nodes = sum(len(p) for p in programs.values())
    simulated = sum(s.nodes for s in result.ranks.values())
    if simulated != nodes:
        raise SystemExit(f"{case}: simulated {simulated:,} of {nodes:,} nodes")
    return {
        "cpu": cpu,
        "nodes": nodes,
        "load_s": t1 - t0,
        "simulate_s": t2 - t1,
        "baseline_rss": baseline,
        "loaded_rss": rss_loaded,
        "peak_rss": peak_rss_bytes(),
        "finish_ns": result.finish_ns,
        "collectives": sum(c["count"] for c in result.collectives.values()),
    }


def measure(case: str, data_dir: Path, repeat: int) -> dict:
    """Best simulate time of ``repeat`` fresh runs (best load time apart), highest peak RSS among them."""
    runs = [spawn_json(__file__, ["--case", case, "--data-dir", str(data_dir)]) for _ in range(repeat)]
    best = min(runs, key=lambda r: r["simulate_s"])
    best["load_s"] = min(r["load_s"] for r in runs)
    best["peak_rss"] = max(r["peak_rss"] for r in runs)
    best["all_simulate_s"] = [r["simulate_s"] for r in runs]
    return best


# --- profile ---------------------------------------------------------------------------------


def profile(case: str, data_dir: Path) -> None:
    """Print the ``PROFILE_TOP`` functions by own time in the simulate stage of one run of ``case``."""
    case_argv = child_argv(__file__, ["--case", case, "--data-dir", str(data_dir)])
    pyspy_path = pyspy()
    with tempfile.TemporaryDirectory() as tmp:
        if not pyspy_path:
            stats_path = Path(tmp) / "simulate.pstats"
            subprocess.run([*case_argv, "--cprofile", str(stats_path)], check=True, capture_output=True)
            print(f"\ncProfile of simulate() in {case} (py-spy not found), by own time:")
            pstats.Stats(str(stats_path)).sort_stats("tottime").print_stats(PROFILE_TOP)
            return
        raw = Path(tmp) / "stacks.txt"
        cmd = [pyspy_path, "record", "--function", "--format", "raw", "--rate", str(PYSPY_RATE_HZ), "-o", str(raw)]
        subprocess.run([*cmd, "--", *case_argv], check=True, capture_output=True)
        own: Counter[str] = Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            if any(f.startswith(SIMULATE_FRAME) and ENGINE_FILE in f for f in frames):
                own[frames[-1]] += int(count)
        total = sum(own.values())
        print(f"\npy-spy, simulate stage of {case}: {total:,} samples at {PYSPY_RATE_HZ} Hz; own time")
        print("(C calls count to their caller)")
        print(f"{'own %':>7}{'samples':>9}  function")
        for frame, n in own.most_common(PROFILE_TOP):
            print(f"{100 * n / total:>6.1f}%{n:>9,}  {frame}")


# --- report ----------------------------------------------------------------------------------


def _rss_per_node(r: dict) -> float:
    return (r["peak_rss"] - r["baseline_rss"]) / r["nodes"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the workloads are cached")
    parser.add_argument("--regenerate", action="store_true", help="generate the workloads again even when cached")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="fresh runs per case (best time kept)")
    parser.add_argument(
        "--profile",
        nargs="?",
        const=DEFAULT_PROFILE_CASE,
        choices=sorted(CASES),
        help=f"also profile the simulate stage of one case (default {DEFAULT_PROFILE_CASE})",
    )
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.data_dir, args.cprofile)))
        return 0

    for name in WORKLOADS:
        ensure_workload(args.data_dir, name, args.regenerate)
    results = {case: measure(case, args.data_dir, args.repeat) for case in CASES}

    cpu = next(iter(results.values()))["cpu"]
    print(f"python {sys.version.split()[0]}, each case in a fresh process pinned to CPU {cpu}; best of {args.repeat}")
    print(
        f"\n{'case':<11}{'nodes':>11}{'load s':>8}{'sim s':>8}{'sim nodes/s':>13}{'load+sim n/s':>14}"
        f"{'RSS loaded':>12}{'peak RSS':>10}{'B/node':>8}"
    )
    for case, r in results.items():
        nodes = r["nodes"]
        print(
            f"{case:<11}{nodes:>11,}{r['load_s']:>8.2f}{r['simulate_s']:>8.2f}{nodes / r['simulate_s']:>13,.0f}"
            f"{nodes / (r['load_s'] + r['simulate_s']):>14,.0f}{r['loaded_rss'] / MIB:>12.0f}"
            f"{r['peak_rss'] / MIB:>10.0f}{_rss_per_node(r):>8.0f}"
        )
    print("(RSS in MiB; B/node: peak RSS above the process after imports and configs, per node)")
    for case, r in results.items():
        runs = ", ".join(f"{s:.2f}" for s in r["all_simulate_s"])
        print(
            f"{case}: {r['collectives']:,} collectives (one per group and turn), "
            f"simulated span {r['finish_ns'] / 1e6:,.1f} ms, baseline RSS {r['baseline_rss'] / MIB:.0f} MiB, "
            f"simulate runs {runs} s"
        )

    print()
    for case, r in results.items():
        rate = r["nodes"] / r["simulate_s"]
        target = f"(target >= {TARGET_NODES_PER_S:,})"
        print(f"{verdict(rate >= TARGET_NODES_PER_S)}: {case} simulates {rate:,.0f} nodes/s {target}")
    small, large = (_rss_per_node(results[c]) for c in LINEAR_CASES)
    spread = abs(large - small) / small
    print(
        f"{verdict(spread <= LINEAR_TOLERANCE)}: memory linear in the workload: {small:,.0f} B/node at "
        f"{LINEAR_CASES[0]}, {large:,.0f} B/node at {LINEAR_CASES[1]} ({100 * spread:.0f} % apart, "
        f"tolerance {100 * LINEAR_TOLERANCE:.0f} %)"
    )
    if args.profile:
        profile(args.profile, args.data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
