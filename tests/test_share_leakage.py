"""The leakage check (issue 19): every input string is found wherever it lies in the output, and a hit
is a leak unless it lies inside a field the anonymizer generated."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_node, write_et
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra.schema.protobuf.et_def_pb2 import COMP_NODE
from chakra.share import leakage
from chakra.share.leakage import StringSet, find_leaks, strings_in

#: Bytes a kept string may be made of: few, so that strings overlap and share their starts.
ALPHABET = b"ab\x00:"

kept_strings = st.binary(min_size=4, max_size=20).map(lambda b: bytes(ALPHABET[x % 4] for x in b))


@settings(max_examples=150, deadline=None)
@given(strings=st.lists(kept_strings, min_size=1, max_size=12), filler=st.binary(max_size=200), data=st.data())
def test_every_kept_string_is_found_at_its_first_occurrence_and_no_other_is(strings, filler, data):
    buf = bytearray(filler)
    for text in data.draw(st.lists(st.sampled_from(strings), max_size=6)):
        at = data.draw(st.integers(0, len(buf)))
        buf[at:at] = text
    found = StringSet()
    for text in strings:
        found.add_bytes(text)
    hits = found.fingerprints.search(bytes(buf), found.new_mark())
    expected = {(bytes(buf).find(text), len(text)) for text in set(strings) if text in buf}
    assert {(offset, length) for offset, length in hits} == expected


def test_a_string_at_the_very_end_of_the_buffer_is_found():
    strings = StringSet()
    strings.add("tail")
    assert strings.fingerprints.search(b"xxxxtail", strings.new_mark()) == [(4, 4)]


def test_each_search_reports_a_string_once_and_the_next_search_again():
    strings = StringSet()
    strings.add("twice")
    assert len(strings.fingerprints.search(b"twice twice", strings.new_mark())) == 1
    assert len(strings.fingerprints.search(b"twice", strings.new_mark())) == 1


def test_numbers_and_short_strings_are_not_kept_and_bytes_are_kept_as_they_are():
    strings = StringSet()
    for text in ("4096", "[[16, 32]]", "1.5e3", "abc"):
        strings.add(text)
    strings.add_bytes(b"\xff\xfe\x00\x01")
    assert len(strings) == 1 and strings.fingerprints.search(b"..\xff\xfe\x00\x01", strings.new_mark()) == [(2, 4)]


def test_a_leak_split_across_the_files_read_chunks_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(leakage, "SEARCH_CHUNK_BYTES", 7)
    nodes = [make_node(i, f"t{i:012d}", COMP_NODE, note="padding" * (i % 3)) for i in range(200)]
    nodes.append(make_node(200, "t0", COMP_NODE, note="the SecretProject"))
    written = write_et(tmp_path / "out.0.et", nodes)
    strings = StringSet()
    strings.add("SecretProject")
    (leak,) = find_leaks(strings, [written], generated={"t0", "padding"})
    assert leak.where == "node 200 attribute 'note'"


def test_a_string_across_two_fields_is_a_leak_named_by_its_offset(tmp_path: Path):
    written = write_et(tmp_path / "out.0.et", [make_node(7, "tabc", COMP_NODE)])
    data = written.read_bytes()
    spanning = data[data.index(b"bc") : data.index(b"bc") + 4]  # the name's end, the type's tag and value
    strings = StringSet()
    strings.add_bytes(spanning)
    (leak,) = find_leaks(strings, [written], generated={"tabc"})
    assert leak.where == f"bytes at offset {data.index(b'bc')}"


def test_a_string_in_a_generated_field_and_in_another_is_a_leak_of_the_other(tmp_path: Path):
    nodes = [make_node(0, "tsecrxyz", COMP_NODE), make_node(1, "t1", COMP_NODE, note="my secr")]
    written = write_et(tmp_path / "out.0.et", nodes)
    strings = StringSet()
    strings.add("secr")
    (leak,) = find_leaks(strings, [written], generated={"tsecrxyz", "t1"})
    assert leak.where == "node 1 attribute 'note'"


def test_file_metadata_is_searched_too(tmp_path: Path):
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata

    written = write_et(tmp_path / "out.0.et", [make_node(0, "t0")], GlobalMetadata(version="build-secret-7"))
    strings = StringSet()
    strings.add("build-secret-7")
    (leak,) = find_leaks(strings, [written], generated={"t0"})
    assert leak.where == "metadata version"


def test_strings_in_a_model_file_leave_out_those_inside_its_own_words():
    data = b'{"op_class": "matmul", "note": "a aten::secret here", "x": "aten::secret"}'
    assert strings_in(["aten::secret", "matmul", "atmu"], data, {"matmul"}) == ["aten::secret"]
