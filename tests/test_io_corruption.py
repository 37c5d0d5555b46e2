"""chakra.io on damaged input: every corrupt or truncated file gives a clean ChakraFormatError.

The contract checked here: reading any byte string either parses (a valid file, or a valid prefix of
one cut at a record boundary) or raises :class:`ChakraFormatError` naming the file and the byte
offset (and the node index where a node record is at fault). Never another exception, never a
hang, and never an allocation sized by a corrupt length prefix.
"""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zstandard
from helpers import make_metadata, make_node, no_hang, records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chakra import io
from chakra.errors import ChakraFormatError
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, Node

# ---------------------------------------------------------------------------------------------
# A small valid file and where its records start and end

METADATA = make_metadata("1.0.0", schema="1.0.2-chakra.0.0.4")
NODES = [
    make_node(0, "root", COMP_NODE, duration_micros=5, is_cpu_op=True),
    make_node(1, "aten::mm", COMP_NODE, [0], duration_micros=300, rf_id=17, op_schema="aten::mm(Tensor a) -> Tensor"),
    make_node(2, "k" * 140, COMP_NODE, [1], [0], is_cpu_op=False),  # 2-byte length prefix
    make_node(3, "all_reduce", COMM_COLL_NODE, [2], is_cpu_op=False, comm_type=0, comm_size=1 << 20, pg_name="0"),
    make_node(4, "tail", COMP_NODE, [3]),
]
VALID = records(METADATA, *NODES)
METADATA_END = len(records(METADATA))
#: byte offset where node record i starts; NODE_STARTS[-1] is the end of the file
NODE_STARTS = [METADATA_END + len(records(*NODES[:i])) for i in range(len(NODES) + 1)]
assert NODE_STARTS[-1] == len(VALID)

HYPOTHESIS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture(autouse=True)
def _guard_against_hangs():
    with no_hang(25.0):
        yield


def check_error(error: ChakraFormatError, path: Path) -> ChakraFormatError:
    """A clean format error names the file and the byte offset of the record at fault."""
    text = str(error)
    assert str(path) in text
    assert error.offset is not None and error.offset >= 0
    assert f"byte {error.offset}" in text
    if error.node_index is not None:
        assert f"node #{error.node_index}" in text
    return error


def read_all(path: Path) -> list[Node] | ChakraFormatError:
    """``io.read(path)`` nodes, or the ChakraFormatError (checked); any other exception escapes."""
    try:
        return io.read(path)[1]
    except ChakraFormatError as error:
        return check_error(error, path)


def stream_all(path: Path) -> tuple[list[Node], ChakraFormatError | None]:
    """Nodes the streaming reader yields before it stops, and the (checked) error it stopped with, if any.

    Errors of the GlobalMetadata record come from the constructor and give no nodes.
    """
    nodes: list[Node] = []
    try:
        with io.EtReader(path) as reader:
            for node in reader:
                nodes.append(node)
    except ChakraFormatError as error:
        return nodes, check_error(error, path)
    return nodes, None


def compress(data: bytes, kind: str) -> bytes:
    if kind == "gz":
        return gzip.compress(data, mtime=0)
    if kind == "zst":
        return zstandard.ZstdCompressor().compress(data)
    return data


def assert_prefix_of_valid(nodes: list[Node]) -> None:
    assert nodes == NODES[: len(nodes)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A directory reused by hypothesis examples (function-scoped tmp_path would be shared anyway)."""
    return tmp_path_factory.mktemp("corrupt")


def test_the_sample_file_is_valid_and_uses_a_two_byte_length_prefix(tmp_path):
    path = tmp_path / "valid.0.et"
    path.write_bytes(VALID)

    assert read_all(path) == NODES
    assert VALID[NODE_STARTS[2]] >= 0x80  # continuation bit: the prefix of node #2 is 2 bytes


# ---------------------------------------------------------------------------------------------
# Truncation, exhaustively


def expected_truncation(cut: int) -> tuple[int | None, int | None]:
    """For a file cut after ``cut`` bytes: (node count if it is a valid prefix, node index at fault)."""
    if cut < METADATA_END:
        return None, None
    for i, start in enumerate(NODE_STARTS):
        if cut == start:
            return i, None
        if cut < start:
            return None, i - 1
    raise AssertionError(cut)


def test_truncating_a_plain_file_at_every_byte_gives_a_valid_prefix_or_a_clean_error(tmp_path):
    path = tmp_path / "cut.0.et"
    for cut in range(len(VALID) + 1):
        path.write_bytes(VALID[:cut])
        result = read_all(path)
        complete, broken = expected_truncation(cut)
        if complete is not None:
            assert result == NODES[:complete], f"cut at {cut}"
            continue
        assert isinstance(result, ChakraFormatError), f"cut at {cut}: parsed {result}"
        if broken is None:  # cut inside the GlobalMetadata record (or an empty file)
            assert (result.offset, result.node_index) == (0, None), f"cut at {cut}"
        else:
            assert (result.offset, result.node_index) == (NODE_STARTS[broken], broken), f"cut at {cut}"


def test_truncating_at_every_byte_through_the_streaming_reader_with_tiny_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(io.framing, "READ_CHUNK_BYTES", 7)
    path = tmp_path / "cut.0.et"
    for cut in range(len(VALID) + 1):
        path.write_bytes(VALID[:cut])
        nodes, error = stream_all(path)
        complete, broken = expected_truncation(cut)
        assert_prefix_of_valid(nodes)
        if complete is not None:
            assert (len(nodes), error) == (complete, None), f"cut at {cut}"
        else:
            assert error is not None, f"cut at {cut}"
            assert error.node_index == broken, f"cut at {cut}"


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_truncating_a_compressed_file_gives_a_valid_prefix_or_a_clean_error(tmp_path, kind):
    packed = compress(VALID, kind)
    path = tmp_path / f"cut.0.et.{kind}"
    cuts = sorted({*range(0, len(packed), 5), *range(max(0, len(packed) - 12), len(packed) + 1)})
    for cut in cuts:
        path.write_bytes(packed[:cut])
        result = read_all(path)
        if isinstance(result, list):
            assert_prefix_of_valid(result)
    assert read_all(path) == NODES  # the last cut is the whole file


def test_truncated_gzip_is_reported_as_a_decompression_error(tmp_path):
    path = tmp_path / "cut.0.et.gz"
    path.write_bytes(compress(VALID, "gz")[:-4])

    with pytest.raises(ChakraFormatError, match="cannot decompress"):
        io.read(path)


# ---------------------------------------------------------------------------------------------
# Random damage (hypothesis)


def flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for position, mask in flips:
        out[position % len(out)] ^= mask
    return bytes(out)


FLIPS = st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), min_size=1, max_size=4)


@HYPOTHESIS
@given(flips=FLIPS)
def test_flipped_bytes_in_a_plain_file_give_a_parse_or_a_clean_error(scratch, flips):
    path = scratch / "flipped.0.et"
    path.write_bytes(flip(VALID, flips))

    result = read_all(path)
    streamed, error = stream_all(path)

    if isinstance(result, list):  # the streaming reader agrees with read()
        assert (streamed, error) == (result, None)
    else:
        assert error is not None
        assert (error.offset, error.node_index) == (result.offset, result.node_index)


@HYPOTHESIS
@given(flips=FLIPS, kind=st.sampled_from(["gz", "zst"]))
def test_flipped_bytes_in_a_compressed_file_give_a_parse_or_a_clean_error(scratch, flips, kind):
    path = scratch / f"flipped.0.et.{kind}"
    path.write_bytes(flip(compress(VALID, kind), flips))

    read_all(path)


@HYPOTHESIS
@given(
    head=st.sampled_from([b"", io.GZIP_MAGIC + b"\x08", io.ZSTD_MAGIC, VALID[:METADATA_END]]),
    body=st.binary(max_size=300),
    suffix=st.sampled_from([".et", ".et.gz", ".et.zst"]),
)
def test_arbitrary_bytes_give_a_parse_or_a_clean_error(scratch, head, body, suffix):
    # heads steer the input into the gzip/zstd sniffing and past a valid metadata record
    path = scratch / f"garbage.0{suffix}"
    path.write_bytes(head + body)

    read_all(path)


# ---------------------------------------------------------------------------------------------
# Length prefixes that no valid file contains


@contextmanager
def allocation_limit(limit_bytes: int) -> Iterator[None]:
    """Fail when the Python heap peak inside the block exceeds ``limit_bytes``."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit_bytes, f"allocated {peak / 2**20:.1f} MiB"


HUGE_PREFIXES = {
    "2 GiB + 5": io.encode_varint((1 << 31) + 5),
    "4 GiB": io.encode_varint(4 << 30),
    "largest 5-byte varint": b"\xff\xff\xff\xff\x7f",
    "6-byte varint": b"\x80\x80\x80\x80\x80\x01",
    "10-byte varint": b"\xff" * 9 + b"\x01",
}
BEFORE_NODE_2 = records(METADATA, *NODES[:2])


@pytest.mark.parametrize("prefix", HUGE_PREFIXES.values(), ids=HUGE_PREFIXES.keys())
@pytest.mark.parametrize("where", ["metadata", "node #2"])
@pytest.mark.parametrize("kind", ["plain", "gz", "zst"])
@pytest.mark.parametrize("reader", ["read", "stream"])
def test_impossible_length_prefix_is_refused_at_once_without_allocating(tmp_path, prefix, where, kind, reader):
    head, offset, node_index = (b"", 0, None) if where == "metadata" else (BEFORE_NODE_2, len(BEFORE_NODE_2), 2)
    path = tmp_path / ("huge.0.et" + ("" if kind == "plain" else f".{kind}"))
    path.write_bytes(compress(head + prefix + b"\x08\x01" * 50, kind))

    with allocation_limit(4 << 20):
        result = read_all(path) if reader == "read" else stream_all(path)[1]

    assert isinstance(result, ChakraFormatError)
    assert "length prefix" in str(result)
    assert (result.offset, result.node_index) == (offset, node_index)


@pytest.mark.parametrize("claimed", [1000, 1 << 30, io.MAX_RECORD_BYTES])
@pytest.mark.parametrize("where", ["metadata", "node #2"])
def test_length_prefix_beyond_the_end_of_a_plain_file_is_refused_before_reading(tmp_path, claimed, where):
    head, offset = (b"", 0) if where == "metadata" else (BEFORE_NODE_2, len(BEFORE_NODE_2))
    path = tmp_path / "short.0.et"
    path.write_bytes(head + io.encode_varint(claimed) + b"\x08\x01" * 5)

    with allocation_limit(4 << 20), pytest.raises(ChakraFormatError) as info:
        io.read(path)

    check_error(info.value, path)
    assert info.value.offset == offset
    if where == "node #2":
        assert f"record claims {claimed} bytes but only 10 remain" in str(info.value)


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_length_prefix_beyond_the_data_of_a_compressed_file_costs_memory_for_the_data_only(tmp_path, kind):
    # a compressed stream has no known size: the reader must read to the end, but in bounded pieces
    path = tmp_path / f"short.0.et.{kind}"
    path.write_bytes(compress(BEFORE_NODE_2 + io.encode_varint(io.MAX_RECORD_BYTES) + b"\x08\x01" * 5, kind))

    with allocation_limit(32 << 20), pytest.raises(ChakraFormatError, match="ends inside") as info:  # not 2 GiB
        io.read(path)

    check_error(info.value, path)
    assert (info.value.offset, info.value.node_index) == (len(BEFORE_NODE_2), 2)


def test_a_node_record_that_does_not_parse_names_its_offset_and_index(tmp_path):
    bad_node = b"\x12\x05ab"  # name claims 5 bytes, the record holds 2
    path = tmp_path / "bad.0.et"
    path.write_bytes(BEFORE_NODE_2 + records(bad_node, NODES[3]))

    with pytest.raises(ChakraFormatError, match="does not parse") as info:
        io.read(path)

    check_error(info.value, path)
    assert (info.value.offset, info.value.node_index) == (len(BEFORE_NODE_2), 2)


def test_streaming_yields_every_node_before_a_corrupt_record_then_raises(tmp_path):
    path = tmp_path / "bad.0.et"
    path.write_bytes(BEFORE_NODE_2 + records(b"\x12\x05ab", NODES[3]))

    nodes, error = stream_all(path)

    assert [n.id for n in nodes] == [n.id for n in NODES[:2]]
    assert error is not None and error.node_index == 2


def test_streaming_yields_every_node_before_a_truncated_last_record_then_raises(tmp_path):
    path = tmp_path / "cut.0.et"
    path.write_bytes(BEFORE_NODE_2 + records(NODES[3])[:-2])

    nodes, error = stream_all(path)

    assert [n.id for n in nodes] == [n.id for n in NODES[:2]]
    assert error is not None and error.node_index == 2 and "remain" in error.message


def test_a_corrupt_record_is_reported_before_a_truncation_after_it(tmp_path):
    path = tmp_path / "bad.0.et"
    path.write_bytes(BEFORE_NODE_2 + records(b"\x12\x05ab") + records(NODES[3])[:-2])

    nodes, error = stream_all(path)

    assert len(nodes) == 2 and error is not None and error.node_index == 2 and "does not parse" in error.message


def test_metadata_from_the_pre_october_2023_schema_is_refused_with_a_hint(tmp_path):
    # before v0.0.4, GlobalMetadata.attr was field 1: an AttributeProto where a string is expected
    old_metadata = b"\x0a\x04" + b"\x0a\x02\xff\xfe"  # field 1 holding invalid UTF-8 for `version`
    path = tmp_path / "old.0.et"
    path.write_bytes(records(old_metadata, NODES[0]))

    with pytest.raises(ChakraFormatError, match="GlobalMetadata does not parse") as info:
        io.read(path)

    check_error(info.value, path)
    assert info.value.node_index is None


#: Bytes of zeros in the "bomb" below: 64 Mi empty records once decompressed, about 65 KB as gzip.
ZEROS_BYTES = 64 << 20


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_file_of_zeros_is_refused_at_once_not_read_as_millions_of_empty_nodes(tmp_path: Path, compressed: bool):
    path = tmp_path / ("zeros.et.gz" if compressed else "zeros.et")
    path.write_bytes(gzip.compress(bytes(ZEROS_BYTES)) if compressed else bytes(ZEROS_BYTES >> 6))
    with pytest.raises(ChakraFormatError, match=r"empty \(zero-length\) records") as raised:
        io.read(path)
    assert str(raised.value.path) == str(path)
    for decoded in (False, True):  # the node table's reader refuses it too
        with io.EtReader(path) as reader, pytest.raises(ChakraFormatError, match="zero-length"):
            if decoded:
                list(reader.decoded_batches({}, {}))
            else:
                list(reader)


def test_a_few_empty_records_are_still_read(tmp_path: Path):
    path = tmp_path / "few.et"
    path.write_bytes(records(make_metadata()) + b"\x00" * 3 + records(make_node(1, "n")))
    _, nodes = io.read(path)
    assert [n.name for n in nodes] == ["", "", "", "n"]
