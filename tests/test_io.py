"""chakra.io: framing, compression, streaming and atomic writing of ``.et`` files.

Corrupt and truncated input is covered in ``test_io_corruption.py``.
"""

from __future__ import annotations

import gc
import gzip
import os
import warnings
from pathlib import Path

import pytest
from helpers import UPSTREAM_NODE_COUNT, chain, make_metadata, make_node, records, require_shared, write_et
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import metadatas, nodes

from chakra import io
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMP_NODE,
    GlobalMetadata,
    IOInfo,
    Node,
)


def sample_nodes() -> list[Node]:
    """A few nodes using every kind of Node field."""
    first = make_node(1, "aten::mm", COMP_NODE, duration_micros=12, start_time_micros=100, is_cpu_op=True, rf_id=7)
    first.inputs.CopyFrom(IOInfo(values="[[1, 2, 0, 4, 4, 'cuda:0']]", shapes="[[4]]", types="['Tensor(float)']"))
    first.outputs.CopyFrom(IOInfo())  # set but empty: written as `4a 00`
    second = make_node(
        2,
        "all_reduce",
        COMM_COLL_NODE,
        data_deps=[1],
        ctrl_deps=[1],
        is_cpu_op=False,
        comm_type=0,
        comm_size=1 << 20,
        pg_name="0",
        involved_dim=[True, False],
    )
    return [first, second, *chain(3, first_id=3)]


# ---------------------------------------------------------------------------------------------
# Round trips


def test_written_file_reads_back_with_identical_metadata_and_nodes(tmp_path):
    metadata = make_metadata("1.0.0", schema="1.0.2-chakra.1.0.0", pid=42)
    nodes = sample_nodes()
    path = write_et(tmp_path / "w.0.et", nodes, metadata)

    read_metadata, read_nodes = io.read(path)

    assert read_metadata == metadata
    assert read_nodes == nodes


def test_write_returns_the_number_of_nodes_written(tmp_path):
    assert io.write(tmp_path / "w.0.et", None, chain(7)) == 7


def test_file_is_a_varint_framed_metadata_record_followed_by_node_records(tmp_path):
    metadata = make_metadata("1.0.0")
    nodes = sample_nodes()
    path = write_et(tmp_path / "w.0.et", nodes, metadata)

    assert path.read_bytes() == records(metadata, *nodes)


def test_writer_output_matches_the_byte_level_example_of_the_format_reference(tmp_path):
    # chakra-format.md §2.2: a one-node rank file as ASTRA-sim's microbenchmark generator writes it
    node = make_node(3, "all_reduce_8npus_1MB", COMM_COLL_NODE, is_cpu_op=False, comm_type=0, comm_size=1048576)
    path = write_et(tmp_path / "ar.0.et", [node], GlobalMetadata(version="0.0.4"))

    expected = (
        b"\x07"
        + b"\x0a\x05"
        + b"0.0.4"
        + b"\x4a"
        + b"\x08\x03"
        + b"\x12\x14"
        + b"all_reduce_8npus_1MB"
        + b"\x18\x07"
        + b"\x52\x0e"
        + b"\x0a\x09"
        + b"is_cpu_op"
        + b"\xd8\x01\x00"
        + b"\x52\x0d"
        + b"\x0a\x09"
        + b"comm_type"
        + b"\x48\x00"
        + b"\x52\x0f"
        + b"\x0a\x09"
        + b"comm_size"
        + b"\x48\x80\x80\x40"
    )
    assert path.read_bytes() == expected


def test_upstream_trace_reads_all_3664_nodes(upstream_et):
    metadata, nodes = io.read(upstream_et)

    assert len(nodes) == UPSTREAM_NODE_COUNT
    assert {a.name: a.string_val for a in metadata.attr}["schema"] == "1.0.1"


def test_upstream_trace_written_back_is_byte_identical(upstream_et, tmp_path):
    metadata, nodes = io.read(upstream_et)
    copy = write_et(tmp_path / "copy.0.et", nodes, metadata)

    assert copy.read_bytes() == upstream_et.read_bytes()


def test_upstream_trace_read_straight_from_gz_and_written_plain_is_byte_identical(
    upstream_et_gz, upstream_et_bytes, tmp_path
):
    metadata, nodes = io.read(upstream_et_gz)
    copy = write_et(tmp_path / "copy.0.et", nodes, metadata)

    assert len(nodes) == UPSTREAM_NODE_COUNT
    assert copy.read_bytes() == upstream_et_bytes


def test_unpacked_repeated_deps_are_accepted_and_written_back_packed(tmp_path):
    # proto3 writes data_deps packed (tag 2a); parsers must accept one tag 28 per value too
    unpacked_node = b"\x08\x05" + b"\x12\x01x" + b"\x28\x01" + b"\x28\x02"
    path = tmp_path / "unpacked.0.et"
    path.write_bytes(records(make_metadata(), unpacked_node))

    _, nodes = io.read(path)

    assert list(nodes[0].data_deps) == [1, 2]
    assert b"\x2a\x02\x01\x02" in nodes[0].SerializeToString()


def test_unknown_node_fields_are_skipped_and_survive_a_round_trip(tmp_path):
    # e.g. the proposed `optional StorageInfo storage = 11` (tag 5a) read by today's schema
    extended_node = make_node(4, "op").SerializeToString() + b"\x5a\x02\x08\x01"
    path = tmp_path / "ext.0.et"
    path.write_bytes(records(make_metadata(), extended_node))

    metadata, nodes = io.read(path)
    assert (nodes[0].id, nodes[0].name) == (4, "op")

    copy = write_et(tmp_path / "copy.0.et", nodes, metadata)
    assert copy.read_bytes() == path.read_bytes()


# ---------------------------------------------------------------------------------------------
# Compression


@pytest.mark.parametrize(
    ("suffix", "magic"), [(".et.gz", io.GZIP_MAGIC), (".et.zst", io.ZSTD_MAGIC), (".et.zstd", io.ZSTD_MAGIC)]
)
def test_compressed_file_is_chosen_by_suffix_and_reads_back(tmp_path, suffix, magic):
    nodes = sample_nodes()
    path = write_et(tmp_path / f"w.0{suffix}", nodes)

    assert path.read_bytes().startswith(magic)
    assert io.read(path)[1] == nodes


@pytest.mark.parametrize(("compress", "magic"), [("gzip", io.GZIP_MAGIC), ("zstd", io.ZSTD_MAGIC)])
def test_compressed_content_under_a_plain_name_is_detected_by_its_magic_number(tmp_path, compress, magic):
    nodes = sample_nodes()
    path = tmp_path / "w.0.et"
    io.write(path, None, nodes, compress=compress)

    assert path.read_bytes().startswith(magic)
    assert io.read(path)[1] == nodes


def test_compress_none_writes_a_plain_file_whatever_the_suffix(tmp_path):
    path = tmp_path / "w.0.et.gz"
    io.write(path, None, chain(2), compress=None)

    assert path.read_bytes() == records(make_metadata(), *chain(2))


def test_a_plain_file_named_gz_is_a_format_error_not_a_crash(tmp_path):
    path = tmp_path / "w.0.et.gz"
    io.write(path, None, chain(2), compress="none")

    with pytest.raises(ChakraFormatError, match="cannot decompress"):
        io.read(path)


def test_read_mapped_maps_a_plain_file_and_reads_a_compressed_or_empty_one(tmp_path):
    plain, packed, empty = tmp_path / "a.pb", tmp_path / "a.pb.gz", tmp_path / "empty.pb"
    plain.write_bytes(b"recorded bytes")
    packed.write_bytes(gzip.compress(b"recorded bytes"))
    empty.write_bytes(b"")
    mapped = io.read_mapped(plain, what="a recording")
    assert not isinstance(mapped, bytes) and mapped[:] == b"recorded bytes"
    assert io.read_mapped(packed, what="a recording") == b"recorded bytes"
    assert io.read_mapped(empty, what="a recording") == b""


def test_read_mapped_names_a_missing_file_as_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="no such file"):
        io.read_mapped(tmp_path / "absent.pb", what="a recording")


def test_unknown_compression_is_refused(tmp_path):
    with pytest.raises(ChakraInputError, match="unknown compression"):
        io.EtWriter(tmp_path / "w.0.et", compress="lz4")
    assert list(tmp_path.iterdir()) == []


def test_gzip_output_is_reproducible(tmp_path):
    first = write_et(tmp_path / "a.0.et.gz", sample_nodes())
    second = write_et(tmp_path / "b.0.et.gz", sample_nodes())

    assert first.read_bytes() == second.read_bytes()
    assert gzip.decompress(first.read_bytes()) == records(make_metadata(), *sample_nodes())


# ---------------------------------------------------------------------------------------------
# Streaming


def test_streaming_reader_yields_the_same_nodes_as_read(upstream_et):
    _, expected = io.read(upstream_et)

    with io.EtReader(upstream_et) as reader:
        streamed = list(reader)
        assert reader.node_count == UPSTREAM_NODE_COUNT

    assert streamed == expected


def test_streaming_reader_has_the_metadata_before_any_node_is_read(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(3), make_metadata("9.9"))

    with io.EtReader(path) as reader:
        assert reader.metadata.version == "9.9"
        assert reader.node_count == 0


def test_read_metadata_does_not_look_at_the_nodes(tmp_path):
    path = tmp_path / "w.0.et"
    path.write_bytes(records(make_metadata("2.0")) + b"\x05garbage that is no node")

    assert io.read_metadata(path).version == "2.0"


def test_readers_close_their_files_including_compressed_ones(tmp_path):
    # an unclosed file shows up as a ResourceWarning when it is garbage-collected
    paths = [write_et(tmp_path / f"w.0{suffix}", chain(3)) for suffix in (".et", ".et.gz", ".et.zst")]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for path in paths:
            io.read(path)
            io.read_metadata(path)
            with io.EtReader(path) as reader:
                next(iter(reader))
            del reader
        gc.collect()

    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


# ---------------------------------------------------------------------------------------------
# Records at the edges of the format


def test_zero_length_record_in_the_middle_is_an_empty_node_not_end_of_file(tmp_path):
    # protolib (upstream Python) stops at a zero-length record; the C++ readers parse it as Node()
    before, after = make_node(1, "before"), make_node(2, "after")
    path = tmp_path / "hole.0.et"
    path.write_bytes(records(make_metadata(), before, b"", after))

    _, nodes = io.read(path)

    assert nodes == [before, Node(), after]


def test_zero_length_metadata_record_reads_as_empty_metadata_followed_by_the_nodes(tmp_path):
    path = tmp_path / "nometa.0.et"
    path.write_bytes(records(b"", *chain(2)))

    metadata, nodes = io.read(path)

    assert metadata == GlobalMetadata()
    assert nodes == chain(2)


def test_empty_file_is_a_format_error(tmp_path):
    path = tmp_path / "empty.0.et"
    path.write_bytes(b"")

    with pytest.raises(ChakraFormatError, match="empty") as info:
        io.read(path)
    assert info.value.offset == 0
    assert str(path) in str(info.value)


def test_metadata_only_file_has_no_nodes(tmp_path):
    path = write_et(tmp_path / "meta.0.et", [], make_metadata("1.0.0"))

    metadata, nodes = io.read(path)

    assert metadata.version == "1.0.0"
    assert nodes == []


def test_record_bigger_than_the_read_chunk_reads_fine(tmp_path):
    big = make_node(1, "x" * (3 << 20))
    assert big.ByteSize() > 2 * io.READ_CHUNK_BYTES
    nodes = [*chain(2, first_id=10), big, *chain(2, first_id=20)]
    path = write_et(tmp_path / "big.0.et", nodes)

    assert io.read(path)[1] == nodes


def test_record_bigger_than_the_read_chunk_reads_fine_from_gzip(tmp_path):
    big = make_node(1, "y" * (3 << 20))
    nodes = [make_node(0, "a"), big, make_node(2, "b")]
    path = write_et(tmp_path / "big.0.et.gz", nodes)

    with io.EtReader(path) as reader:
        assert list(reader) == nodes


def test_many_nodes_spanning_several_read_chunks_read_fine(tmp_path):
    nodes = [make_node(i, f"kernel_{i:06d}_" + "k" * 150, COMP_NODE, [i - 1] if i else (), tid=i) for i in range(20000)]
    path = write_et(tmp_path / "many.0.et", nodes)
    assert path.stat().st_size > 3 * io.READ_CHUNK_BYTES

    with io.EtReader(path) as reader:
        batches = [list(batch) for batch in reader.batches()]

    assert len(batches) >= 3
    assert [node for batch in batches for node in batch] == nodes


@pytest.mark.parametrize("suffix", [".et", ".et.gz", ".et.zst"])
def test_records_and_length_prefixes_cut_by_tiny_read_chunks_read_fine(tmp_path, monkeypatch, suffix):
    # records of 1..~300 bytes: 1- and 2-byte length prefixes, many straddling a 64-byte chunk edge
    nodes = [make_node(i, "n" * (i % 300), COMP_NODE, range(max(0, i - 3), i)) for i in range(600)]
    path = write_et(tmp_path / f"tiny.0{suffix}", nodes)
    monkeypatch.setattr(io.framing, "READ_CHUNK_BYTES", 64)

    assert io.read(path)[1] == nodes
    with io.EtReader(path) as reader:
        assert list(reader) == nodes


def test_a_record_ending_or_a_length_prefix_splitting_exactly_at_a_chunk_boundary_reads_fine(tmp_path, monkeypatch):
    chunk = 64
    monkeypatch.setattr(io.framing, "READ_CHUNK_BYTES", chunk)
    nodes = [make_node(1, "a" * 130), make_node(2, "b" * 5), make_node(3, "c" * 200)]  # 2-byte, 1-byte prefixes
    # shift the records by 0..chunk bytes (version length) so every alignment with the edge occurs
    for shift in range(chunk + 1):
        path = write_et(tmp_path / "edge.0.et", nodes, make_metadata("v" * (1 + shift)))
        assert io.read(path)[1] == nodes, f"shift {shift}"


# ---------------------------------------------------------------------------------------------
# Writing rules


def test_empty_metadata_is_written_with_the_format_version(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(1), GlobalMetadata())

    assert io.read(path)[0].version == io.FORMAT_VERSION
    assert path.read_bytes()[0] != 0  # never a zero-length first record


def test_no_metadata_is_written_as_metadata_with_the_format_version(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(1), None)

    assert io.read(path)[0] == GlobalMetadata(version=io.FORMAT_VERSION)


def test_metadata_with_attributes_but_no_version_is_written_unchanged(tmp_path):
    metadata = GlobalMetadata()
    metadata.attr.add(name="schema", string_val="1.0.2-chakra.0.0.4")
    path = write_et(tmp_path / "w.0.et", chain(1), metadata)

    assert io.read(path)[0] == metadata


def test_writer_refuses_an_all_default_node_and_leaves_no_file(tmp_path):
    path = tmp_path / "w.0.et"

    with pytest.raises(ChakraInputError, match="zero-length record"), io.EtWriter(path) as writer:
        writer.write(make_node(1, "fine"))
        writer.write(Node())

    assert list(tmp_path.iterdir()) == []


def test_writer_accepts_a_node_with_id_0_when_it_has_a_name(tmp_path):
    path = write_et(tmp_path / "w.0.et", [Node(name="root")])

    assert io.read(path)[1] == [Node(name="root")]


def test_exception_inside_the_writer_leaves_the_previous_file_untouched_and_no_temp_file(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(3))
    before = path.read_bytes()

    with pytest.raises(RuntimeError, match="producer failed"), io.EtWriter(path) as writer:
        writer.write_many(chain(1000))
        raise RuntimeError("producer failed")

    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_refused_node_leaves_the_previous_file_untouched(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(3))
    before = path.read_bytes()

    with pytest.raises(ChakraInputError):
        io.write(path, None, [*chain(2), Node()])

    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_a_successful_write_replaces_the_previous_file_and_leaves_no_temp_file(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(3))
    write_et(path, chain(5))

    assert len(io.read(path)[1]) == 5
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_file_gets_the_usual_permissions_not_the_temp_file_ones(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = write_et(tmp_path / "w.0.et", chain(1))
    finally:
        os.umask(old)

    assert path.stat().st_mode & 0o777 == mode


def test_writing_into_a_missing_directory_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="does not exist"):
        io.write(tmp_path / "nowhere" / "w.0.et", None, chain(1))


# ---------------------------------------------------------------------------------------------
# Files that cannot be opened


def test_missing_file_is_an_input_error_naming_the_path(tmp_path):
    path = tmp_path / "absent.0.et"

    with pytest.raises(ChakraInputError, match="no such file") as info:
        io.read(path)
    assert info.value.path == str(path)


def test_a_directory_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="directory"):
        io.read(tmp_path)


# ---------------------------------------------------------------------------------------------
# Helpers


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_encode_varint_is_protobufs_base_128_encoding(value, encoded):
    assert io.encode_varint(value) == encoded


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.0.et", None), ("a.0.et.gz", "gzip"), ("a.0.ET.GZ", "gzip"), ("a.0.et.zst", "zstd"), ("a.0.et.zstd", "zstd")],
)
def test_compression_is_named_by_the_last_suffix(name, kind):
    assert io.compression_for(name) == kind


# ---------------------------------------------------------------------------------------------
# The shared-data rule of the test suite itself (../shared/data README)


def test_tests_needing_absent_shared_data_skip_with_the_reason(monkeypatch, tmp_path):
    import helpers

    monkeypatch.setattr(helpers, "SHARED_DATA", tmp_path / "absent")
    monkeypatch.delenv(helpers.REQUIRE_SHARED_ENV, raising=False)

    with pytest.raises(pytest.skip.Exception, match="shared test data not found"):
        helpers.require_shared(helpers.UPSTREAM_ET_GZ)


def test_tests_needing_absent_shared_data_fail_when_ci_requires_it(monkeypatch, tmp_path):
    import helpers

    monkeypatch.setattr(helpers, "SHARED_DATA", tmp_path / "absent")
    monkeypatch.setenv(helpers.REQUIRE_SHARED_ENV, "1")

    with pytest.raises(pytest.fail.Exception, match="CHAKRA_REQUIRE_SHARED_DATA=1"):
        helpers.require_shared(helpers.UPSTREAM_ET_GZ)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=metadatas(), nodes=st.lists(nodes().filter(lambda n: n.ByteSize() > 0), max_size=6))
def test_any_written_file_reads_back_equal_and_rewrites_to_identical_bytes(tmp_path, metadata, nodes):
    first = tmp_path / "first.0.et"
    second = tmp_path / "second.0.et"
    io.write(first, metadata, nodes)

    read_metadata, read_nodes = io.read(first)
    io.write(second, read_metadata, read_nodes)

    # compared as bytes: a NaN attribute makes message equality false
    assert [n.SerializeToString() for n in read_nodes] == [n.SerializeToString() for n in nodes]
    assert second.read_bytes() == first.read_bytes()


@pytest.mark.parametrize(
    "relpath",
    ["upstream-chakra/small_chakra.0.json", "param/linear_et.json.gz", "hta/alexnet_kineto.json.gz"],
)
def test_json_traces_read_as_et_are_named_as_json(relpath):
    path = require_shared(relpath)
    with pytest.raises(ChakraFormatError, match="this is JSON text") as info:
        io.read(path)
    assert "dejsonize" in str(info.value)


def test_a_metadata_record_of_123_bytes_is_not_mistaken_for_json(tmp_path):
    # 123 is the code of "{": the length prefix of a valid file may look like JSON's first byte
    metadata = GlobalMetadata(version="v" * 121)
    assert len(metadata.SerializeToString()) == 0x7B
    path = write_et(tmp_path / "w.0.et", chain(2), metadata)

    assert path.read_bytes()[:1] == b"{"
    assert len(io.read(path)[1]) == 2


def test_a_text_file_read_as_et_is_named_as_text(tmp_path):
    path = tmp_path / "workload.et"
    path.write_text("DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5\n")
    with pytest.raises(ChakraFormatError, match=r"this is text \('DATA'\.\.\.\), not a binary Chakra \.et file"):
        io.read(path)


def test_a_metadata_record_of_printable_length_still_reads(tmp_path):
    # a valid file whose first bytes are printable is never refused as text: only a broken one is
    metadata = GlobalMetadata(version="v" * 63)
    assert 32 <= len(metadata.SerializeToString()) < 127
    path = write_et(tmp_path / "w.0.et", chain(2), metadata)
    assert len(io.read(path)[1]) == 2


def test_writing_to_a_directory_path_is_an_input_error(tmp_path):
    with pytest.raises(ChakraInputError, match="is a directory"):
        io.write(tmp_path, None, chain(1))


def test_a_directory_where_no_file_can_be_created_is_an_input_error(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    # as root a read-only directory is still writable, so the refusal is simulated
    monkeypatch.setattr(io.writer.tempfile, "mkstemp", refuse)
    with pytest.raises(ChakraInputError, match="cannot create a file here: Permission denied"):
        io.write(tmp_path / "w.0.et", None, chain(1))


def test_a_pipe_can_be_read(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(50))
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "wb") as w:
        w.write(path.read_bytes())  # small enough for the pipe buffer
    fifo = f"/dev/fd/{read_fd}"
    try:
        assert len(io.read(fifo)[1]) == 50
    finally:
        os.close(read_fd)


def test_writer_refuses_an_empty_node_but_keeps_going(tmp_path):
    path = tmp_path / "w.0.et"
    with io.EtWriter(path) as writer:
        writer.write(make_node(1))
        with pytest.raises(ChakraInputError, match="empty"):
            writer.write(Node())
        writer.write(make_node(2))
    assert [n.id for n in io.read(path)[1]] == [1, 2]


def test_writing_after_close_is_an_error_not_a_silent_loss(tmp_path):
    writer = io.EtWriter(tmp_path / "w.0.et")
    writer.close()
    with pytest.raises(ChakraInputError, match="after close"):
        writer.write(make_node(1))


def test_a_writer_that_fails_to_start_leaves_no_temp_file(tmp_path):
    with pytest.raises(AttributeError):
        io.EtWriter(tmp_path / "w.0.et", metadata={"version": "1"})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_stream_yields_the_nodes_of_a_file(tmp_path):
    path = write_et(tmp_path / "w.0.et", chain(4))
    assert [n.id for n in io.stream(path)] == [0, 1, 2, 3]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=40) | st.builds(lambda n: b"x" * n, st.integers(100, 20_000)), max_size=20)
)
def test_payloads_framed_at_once_are_the_records_framed_one_by_one(payloads: list[bytes]):
    assert io.frame_all(payloads) == b"".join(map(io.frame, payloads))
    assert b"".join(records for records, _ in io.framed_batches(payloads)) == io.frame_all(payloads)


def test_an_empty_payload_is_refused_naming_its_node(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="node #2 is empty"):
        io.frame_all([b"a", b"b", b"", b"c"], tmp_path / "w.0.et")
