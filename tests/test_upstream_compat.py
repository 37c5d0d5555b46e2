"""Scripts written for upstream Chakra run unchanged, and their output reads back and validates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chakra.attrs import get_attr
from chakra.errors import ChakraFormatError
from chakra.schema.protobuf import et_def_pb2
from chakra.src.third_party.utils import protolib
from chakra.trace import Trace
from chakra.validate import validate_set
from chakra.workload import open_workload

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "upstream_style_allreduce.py"


def test_upstream_style_script_writes_a_clean_8_rank_allreduce_workload(tmp_path: Path):
    subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path), "--npus", "8"], check=True)
    workload = open_workload(tmp_path / "all_reduce")
    assert workload.ranks == list(range(8))
    assert validate_set(workload, target="astra-sim") == []
    for rank in workload.ranks:
        allreduce = workload.trace(rank).node(2)
        assert get_attr(allreduce, "comm_size") == 1 << 20
        assert list(allreduce.data_deps) == [1]


def test_protolib_decode_reads_what_our_writer_wrote(tmp_path: Path):
    path = tmp_path / "w.0.et"
    Trace(nodes=[et_def_pb2.Node(id=i, name=f"n{i}", type=et_def_pb2.COMP_NODE) for i in range(5)]).save(path)
    with protolib.openFileRd(str(path)) as f:
        metadata = et_def_pb2.GlobalMetadata()
        assert protolib.decodeMessage(f, metadata)
        node = et_def_pb2.Node()
        ids = []
        while protolib.decodeMessage(f, node):
            ids.append(node.id)
    assert metadata.version and ids == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("suffix", [".et.gz", ".et.zst"])
def test_protolib_reads_compressed_files(tmp_path: Path, suffix: str):
    path = tmp_path / f"w.0{suffix}"
    Trace(nodes=[et_def_pb2.Node(id=7, name="n", type=et_def_pb2.COMP_NODE)]).save(path)
    with protolib.openFileRd(str(path)) as f:
        assert protolib.decodeMessage(f, et_def_pb2.GlobalMetadata())
        node = et_def_pb2.Node()
        assert protolib.decodeMessage(f, node) and node.id == 7
        assert not protolib.decodeMessage(f, node)


def test_protolib_treats_a_zero_length_record_as_an_empty_node_not_end_of_file(tmp_path: Path):
    path = tmp_path / "w.0.et"
    with open(path, "wb") as f:
        protolib.encodeMessage(f, et_def_pb2.GlobalMetadata(version="1.0.0"))
        f.write(b"\x00")
        protolib.encodeMessage(f, et_def_pb2.Node(id=3, name="after"))
    with protolib.openFileRd(str(path)) as f:
        protolib.decodeMessage(f, et_def_pb2.GlobalMetadata())
        node = et_def_pb2.Node()
        assert protolib.decodeMessage(f, node) and node.id == 0
        assert protolib.decodeMessage(f, node) and node.name == "after"


def test_protolib_refuses_a_huge_length_prefix_without_allocating_it(tmp_path: Path):
    path = tmp_path / "w.0.et"
    path.write_bytes(b"\xff\xff\xff\xff\x0f" + b"x" * 10)  # claims 4 GiB
    with protolib.openFileRd(str(path)) as f, pytest.raises(ChakraFormatError, match="claims"):
        protolib.decodeMessage(f, et_def_pb2.GlobalMetadata())


def test_protolib_reports_a_truncated_record(tmp_path: Path):
    path = tmp_path / "w.0.et"
    path.write_bytes(b"\x40" + b"x" * 10)  # claims 64 bytes, has 10
    with protolib.openFileRd(str(path)) as f, pytest.raises(ChakraFormatError, match="truncated"):
        protolib.decodeMessage(f, et_def_pb2.GlobalMetadata())
