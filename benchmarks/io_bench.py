"""I/O throughput and peak memory of chakra.io next to a bare protobuf loop.

Generates a workload of ``--nodes`` nodes shaped like a converted PyTorch trace (name, type, one
ctrl and one to three data deps, duration, short IOInfo strings, eight attributes; about 250 bytes a
node), then runs each case in its own process so that peak RSS belongs to that case alone:

* ``bare-read``:   ``Node(); ParseFromString(...)`` per record over the framed bytes already in
  memory (file reading not timed), nodes kept in a list - the baseline for ``read``
* ``read``:        ``chakra.io.read(path)`` (file reading included), nodes kept
* ``bare-stream``: the bare loop without keeping nodes - the baseline for ``stream``
* ``stream``:      iterate ``chakra.io.EtReader(path)`` touching every node's id, nodes not kept
* ``bare-write``:  ``SerializeToString`` + length prefix per node into one in-memory buffer
  (file writing not timed) - the baseline for ``write``
* ``write``:       ``chakra.io.write(path, ...)`` to disk (atomic, fsync included)

Streaming memory is measured at the full size and at a quarter of it: flat memory means the two
peaks match. Run: ``make bench`` or ``python benchmarks/io_bench.py --nodes 1000000``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import peak_rss_bytes

DATA_DIR = Path(__file__).resolve().parent / ".data"
DEFAULT_NODES = 1_000_000

# Shape of the generated nodes, modelled on the upstream converter's output (reference: a
# converted trace carries these eight attributes on every node).
ATTRS_PER_NODE = ("is_cpu_op", "rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema")
OPS = ("aten::mm", "aten::add_", "aten::relu", "aten::copy_", "aten::view", "aten::empty_strided")


def _rss_mb() -> float:
    return peak_rss_bytes() / 2**20


def generate(path: Path, num_nodes: int) -> None:
    from chakra import io
    from chakra.attrs import set_attr
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node, NodeType

    def nodes():
        for i in range(num_nodes):
            op = OPS[i % len(OPS)]
            node = Node(id=i, name=f"{op}({i % 97})", type=NodeType.COMP_NODE, duration_micros=(i * 7) % 300)
            if i:
                node.ctrl_deps.append(max(0, i - 1 - i % 5))
                node.data_deps.extend(range(max(0, i - 1 - i % 3), i))
            node.inputs.values = f"[[{i}, {i + 1}, 0, 64, 4, 'cuda:0']]"
            node.inputs.shapes = "[[64]]"
            node.inputs.types = "['Tensor(float)']"
            node.outputs.values = f"[[{i + 2}, {i + 3}, 0, 64, 4, 'cuda:0']]"
            for name in ATTRS_PER_NODE:
                if name == "is_cpu_op":
                    set_attr(node, name, i % 4 != 0)
                elif name == "op_schema":
                    set_attr(node, name, f"{op}(Tensor self, Tensor other) -> Tensor")
                else:
                    set_attr(node, name, i % 1000)
            yield node

    io.write(path, GlobalMetadata(version=io.FORMAT_VERSION), nodes())


def _framed_payloads(buf: bytes):
    """(start, end) of every record payload: the inline varint loop of the bare baselines."""
    pos, end = 0, len(buf)
    while pos < end:
        byte = buf[pos]
        if byte < 0x80:
            n = byte
            pos += 1
        else:
            n = shift = 0
            while True:
                byte = buf[pos]
                pos += 1
                n |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
        yield pos, pos + n
        pos += n


def run_case(case: str, path: Path) -> dict[str, float]:
    from google.protobuf.internal.encoder import _VarintBytes

    from chakra import io
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node

    baseline = _rss_mb()
    if case in ("bare-read", "bare-stream"):
        buf = path.read_bytes()
        baseline = _rss_mb()
        keep = case == "bare-read"
        kept = []
        t0 = time.perf_counter()
        records = _framed_payloads(buf)
        start, stop = next(records)
        GlobalMetadata().ParseFromString(buf[start:stop])
        count = 0
        for count, (start, stop) in enumerate(records, 1):  # noqa: B007 - count is the result
            node = Node()
            node.ParseFromString(buf[start:stop])
            if keep:
                kept.append(node)
        seconds = time.perf_counter() - t0
    elif case == "read":
        t0 = time.perf_counter()
        _, nodes = io.read(path)
        seconds = time.perf_counter() - t0
        count = len(nodes)
    elif case == "stream":
        t0 = time.perf_counter()
        count = 0
        total = 0
        with io.EtReader(path) as reader:
            for node in reader:
                total += node.id
                count += 1
        seconds = time.perf_counter() - t0
    elif case in ("bare-write", "write"):
        metadata, nodes = io.read(path)
        baseline = _rss_mb()
        count = len(nodes)
        if case == "bare-write":
            t0 = time.perf_counter()
            out = [io.frame(metadata.SerializeToString())]
            for node in nodes:
                payload = node.SerializeToString()
                out.append(_VarintBytes(len(payload)))
                out.append(payload)
            blob = b"".join(out)
            seconds = time.perf_counter() - t0
            assert len(blob) == path.stat().st_size
        else:
            target = path.with_name("written.0.et")
            t0 = time.perf_counter()
            io.write(target, metadata, nodes)
            seconds = time.perf_counter() - t0
            assert target.stat().st_size == path.stat().st_size
            target.unlink()
    else:
        raise SystemExit(f"unknown case {case}")
    return {"seconds": seconds, "nodes": count, "peak_rss_mb": _rss_mb(), "baseline_rss_mb": baseline}


def _spawn(case: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--case", case, "--path", str(path)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="nodes in the generated workload")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.path)))
        return 0

    DATA_DIR.mkdir(exist_ok=True)
    full = DATA_DIR / f"bench{args.nodes}.0.et"
    quarter = DATA_DIR / f"bench{args.nodes // 4}.0.et"
    for path, n in ((full, args.nodes), (quarter, args.nodes // 4)):
        if not path.exists():
            print(f"generating {n:,} nodes -> {path}", file=sys.stderr)
            generate(path, n)
    size_mb = full.stat().st_size / 1e6
    print(f"workload: {args.nodes:,} nodes, {size_mb:,.1f} MB, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    results = {
        case: _spawn(case, full) for case in ("bare-read", "read", "bare-stream", "stream", "bare-write", "write")
    }
    results["stream-quarter"] = _spawn("stream", quarter)
    print(f"{'case':<16}{'nodes/s':>14}{'seconds':>10}{'MB/s':>9}{'peak RSS MB':>13}{'over baseline':>15}")
    for case, r in results.items():
        rate = r["nodes"] / r["seconds"]
        mbs = (size_mb * r["nodes"] / args.nodes) / r["seconds"]
        print(
            f"{case:<16}{rate:>14,.0f}{r['seconds']:>10.2f}{mbs:>9.1f}{r['peak_rss_mb']:>13.0f}"
            f"{r['peak_rss_mb'] - r['baseline_rss_mb']:>15.0f}"
        )
    for ours, bare in (("read", "bare-read"), ("stream", "bare-stream"), ("write", "bare-write")):
        ratio = results[ours]["seconds"] / results[bare]["seconds"]
        print(f"{ours}: {ratio:.2f}x the time of {bare} (goal <= 1.25x)")
    flat = results["stream"]["peak_rss_mb"] - results["stream-quarter"]["peak_rss_mb"]
    print(f"stream peak RSS at {args.nodes:,} vs {args.nodes // 4:,} nodes: {flat:+.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
