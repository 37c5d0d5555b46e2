"""Our PyTorch converter side by side with upstream's ``chakra_converter`` on the same linked trace.

Upstream's converter takes one file: the host trace and the Kineto trace joined by its
``chakra_trace_link`` (the "linked JSON"). This writes that file from ``convert_bench.py``'s cached
recording (run that first) with :func:`chakra.pytorch.linked_json.write_linked_json`, then converts it
with both, each in a fresh process, alternating, and prints the wall times, peak RSS and their ratios.

Upstream's converter is run from a checkout of its repository (``--upstream-source DIR``, a clone of
github.com/mlcommons/chakra): its converter package and its ``et_def.proto`` (compiled here with
grpcio-tools) are laid out as the package it installs, in a folder put first on the path of this
environment's Python. It needs only protobuf, which this environment has; a venv of its own would
install the same protobuf, and its pyproject's other dependency (HTA from git) is for the linker,
which is not timed.

Usage: python benchmarks/upstream_bench.py --upstream-source ~/src/chakra [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Ran, run_measured

DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "chakra-convert-bench"  # convert_bench.py's
HOST_FILE, DEVICE_FILE = "host.0.json", "device.0.json"
#: Upstream's packages as its pyproject maps them: installed name -> folder of its repository.
UPSTREAM_PACKAGES = {"chakra/src/converter": "src/converter", "chakra/src/third_party": "src/third_party"}
MIB = 2**20

OURS = """
import sys
from chakra.pytorch.convert import convert_linked_file
convert_linked_file(sys.argv[1]).write(sys.argv[2])
"""
THEIRS = """
import sys
sys.path.insert(0, sys.argv[1])
import chakra
assert chakra.__file__.startswith(sys.argv[1]), chakra.__file__
from chakra.src.converter.converter import main
linked, out, log = sys.argv[2:5]
sys.argv = ["chakra_converter", "--log-filename", log, "PyTorch", "--input", linked, "--output", out]
main()
"""


def lay_out_upstream(source: Path, root: Path) -> Path:
    """Upstream's converter and schema as the package ``chakra`` under ``root``; ``root``."""
    for installed, folder in UPSTREAM_PACKAGES.items():
        shutil.copytree(source / folder, root / installed)
    schema = root / "chakra" / "schema" / "protobuf"
    schema.mkdir(parents=True)
    shutil.copy(source / "schema" / "protobuf" / "et_def.proto", schema)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "et_def.proto"],
                   cwd=schema, check=True)  # fmt: skip
    for package in {p for p in root.rglob("*") if p.is_dir()}:
        (package / "__init__.py").touch()
    return root


def write_linked(data_dir: Path, path: Path) -> int:
    """The linked JSON of the recording at ``path``; its host nodes. Run in a child process of its own:
    a process forked from one holding the traces would count their pages in its peak RSS."""
    from chakra.pytorch.host import load_host_trace
    from chakra.pytorch.kineto import load_kineto_trace
    from chakra.pytorch.link import link
    from chakra.pytorch.linked_json import write_linked_json

    host = load_host_trace(data_dir / HOST_FILE)
    return write_linked_json(link(host, load_kineto_trace(data_dir / DEVICE_FILE)), path)


def best(runs: list[Ran], who: str) -> Ran:
    failed = [r for r in runs if r.returncode != 0]
    if failed:
        raise SystemExit(f"{who} failed:\n{failed[0].output[-3000:]}")
    return min(runs, key=lambda r: r.wall_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-source", type=Path, required=True, help="a checkout of mlcommons/chakra")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="convert_bench.py's traces")
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs of each (best kept)")
    parser.add_argument("--write-linked", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_linked:
        print(write_linked(args.data_dir, args.write_linked))
        return 0
    if not (args.data_dir / HOST_FILE).exists():
        print(f"no traces in {args.data_dir}: run benchmarks/convert_bench.py first", file=sys.stderr)
        return 2
    if not (args.upstream_source / "src" / "converter" / "converter.py").exists():
        print(f"{args.upstream_source} is not a checkout of mlcommons/chakra (no src/converter)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        root = lay_out_upstream(args.upstream_source, folder / "upstream")
        linked = folder / "linked.0.json"
        written = subprocess.run([sys.executable, __file__, "--write-linked", str(linked), "--data-dir",
                                  str(args.data_dir), "--upstream-source", str(args.upstream_source)],
                                 check=True, capture_output=True, text=True)  # fmt: skip
        nodes = int(written.stdout)
        ours_runs, theirs_runs = [], []
        for _ in range(max(1, args.repeat)):
            ours_runs.append(run_measured([sys.executable, "-c", OURS, str(linked), str(folder / "ours.0.et")]))
            theirs_runs.append(run_measured([sys.executable, "-c", THEIRS, str(root), str(linked),
                                             str(folder / "theirs.0.et"), str(folder / "theirs.log")]))  # fmt: skip
        ours, theirs = best(ours_runs, "ours"), best(theirs_runs, "upstream's chakra_converter")
        print(f"linked trace: {nodes:,} host nodes, {linked.stat().st_size / MIB:,.1f} MiB; best of {args.repeat}")
        for who, ran in (("chakra-et (convert_linked_file)", ours), ("upstream chakra_converter", theirs)):
            print(f"{who:<34}{ran.wall_s:>8.2f} s{nodes / ran.wall_s:>12,.0f} nodes/s{ran.peak_rss / MIB:>8,.0f} MiB")
        print(f"ratio: {theirs.wall_s / ours.wall_s:.1f}x faster, {theirs.peak_rss / ours.peak_rss:.1f}x less memory")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
