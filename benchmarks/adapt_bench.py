"""Throughput and peak memory of ``chakra adapt --target astra-sim`` next to the streaming readers.

Generates one rank of ``--nodes`` nodes shaped like a converted PyTorch trace (``io_bench.generate``:
about 250 bytes a node) in two versions:

* ``clean``: nothing for ASTRA-sim to refuse (adapt copies the file after its planning pass);
* ``dirty``: a METADATA root that every thread's first node depends on, every 50th node a BARRIER
  (written as its stand-in), every 100th a ``comm_size`` in ``uint64_val`` (rewritten) and a
  dependency on an absent id (dropped): 4 % of the nodes change, the rest are copied as bytes.

Each case runs in its own process pinned to one core (peak RSS is its own):

* ``stream``: iterate ``chakra.io.EtReader`` touching every node's id (protobuf messages);
* ``chunks``: ``chakra.chunks.iter_chunks`` (the node table's decoder, what ``chakra info`` reads);
* ``adapt-clean``, ``adapt-dirty``: ``chakra.adapt.adapt_workload`` (one worker: one rank).

Memory is measured at the full size and at a quarter of it. Target (issue 13): adapt near the
streaming reader's speed. Run: ``python benchmarks/adapt_bench.py --nodes 1000000``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from harness import peak_rss_bytes, pin_to_one_core, spawn_json, verdict

DATA_DIR = Path(__file__).resolve().parent / ".data"
DEFAULT_NODES = 1_000_000
#: "Near the streaming reader": adapt within this factor of ``stream``'s time.
TARGET_FACTOR = 2.0
#: Every how many nodes the dirty version has a barrier, and a uint64 size plus a dangling dependency.
BARRIER_EVERY, ODD_EVERY = 50, 100
#: An id no node has.
ABSENT_ID = 1 << 40
CASES = ("stream", "chunks", "adapt-clean", "adapt-dirty")
MIB = 1 << 20


def generate_dirty(clean: Path, out: Path) -> None:
    """The dirty version of ``clean`` (module docstring)."""
    from chakra import io
    from chakra.attrs import set_attr
    from chakra.schema.protobuf.et_def_pb2 import AttributeProto, CollectiveCommType, Node, NodeType

    def nodes():
        yield Node(id=ABSENT_ID - 1, name="## process_group:init ##", type=NodeType.METADATA_NODE)
        for node in io.stream(clean):
            if not node.data_deps and not node.ctrl_deps:
                node.ctrl_deps.append(ABSENT_ID - 1)
            if node.id % BARRIER_EVERY == 0:
                node.type = NodeType.COMM_COLL_NODE
                set_attr(node, "is_cpu_op", False)
                set_attr(node, "comm_type", CollectiveCommType.BARRIER)
                set_attr(node, "comm_size", 0)
            if node.id % ODD_EVERY == 1:
                node.type = NodeType.COMM_COLL_NODE
                set_attr(node, "is_cpu_op", False)
                set_attr(node, "comm_type", CollectiveCommType.ALL_REDUCE)
                node.attr.append(AttributeProto(name="comm_size", uint64_val=4096))
                node.data_deps.append(ABSENT_ID)
            yield node

    io.write(out, io.read_metadata(clean), nodes())


def measure(case: str, path: Path, out_dir: Path) -> dict:
    from chakra import io
    from chakra.adapt import Target, adapt_workload
    from chakra.chunks import iter_chunks

    pin_to_one_core()
    started = time.perf_counter()
    count = 0
    if case == "stream":
        total = 0
        with io.EtReader(path) as reader:
            for node in reader:
                total += node.id
                count += 1
    elif case == "chunks":
        _, chunks, _ = iter_chunks(path)
        count = sum(len(chunk.rows) for chunk in chunks)
    else:
        shutil.rmtree(out_dir, ignore_errors=True)
        result = adapt_workload(path, out_dir / "out", Target.ASTRA_SIM, workers=1)
        seconds = time.perf_counter() - started
        return {"case": case, "seconds": seconds, "changes": result.changes.total, "peak_rss_bytes": peak_rss_bytes()}
    seconds = time.perf_counter() - started
    return {"case": case, "seconds": seconds, "nodes": count, "peak_rss_bytes": peak_rss_bytes()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    parser.add_argument("--measure", nargs=3, metavar=("CASE", "PATH", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        case, path, out = args.measure
        print(json.dumps(measure(case, Path(path), Path(out))))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from io_bench import generate

    DATA_DIR.mkdir(exist_ok=True)
    rows = []
    for nodes in (args.nodes // 4, args.nodes):
        clean = DATA_DIR / f"adapt-clean-{nodes}.0.et"
        dirty = DATA_DIR / f"adapt-dirty-{nodes}.0.et"
        if not clean.exists():
            generate(clean, nodes)
        if not dirty.exists():
            generate_dirty(clean, dirty)
        for case in CASES:
            path = dirty if case == "adapt-dirty" else clean
            figures = spawn_json(__file__, ["--measure", case, str(path), str(DATA_DIR / f"out-{case}")])
            figures.update(nodes=nodes, file_mib=path.stat().st_size / MIB)
            rows.append(figures)
            rate_k = nodes / figures["seconds"] / 1e3
            print(
                f"{nodes:>9,} nodes {case:<12} {figures['seconds']:7.2f} s {rate_k:7.0f}k nodes/s "
                f"peak {figures['peak_rss_bytes'] / MIB:6.0f} MiB (file {figures['file_mib']:.0f} MiB)",
                flush=True,
            )
    full = {r["case"]: r for r in rows if r["nodes"] == args.nodes}
    for case in ("adapt-clean", "adapt-dirty"):
        factor = full[case]["seconds"] / full["stream"]["seconds"]
        print(f"{case}: {factor:.2f}x the streaming reader's time (target <= {TARGET_FACTOR}x): "
              f"{verdict(factor <= TARGET_FACTOR)}")  # fmt: skip


if __name__ == "__main__":
    main()
