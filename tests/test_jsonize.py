"""Tests for chakra.jsonize: proto3 JSON mapping, the three JSON forms, round trips and errors."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from helpers import require_shared
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import ONEOF_MEMBERS, metadatas, nodes

from chakra import io, jsonize
from chakra.errors import ChakraFormatError
from chakra.jsonize import (
    JsonizeResult,
    dejsonize,
    dict_to_metadata,
    dict_to_node,
    has_unknown_fields,
    message_to_dict,
    message_to_upstream_json,
)
from chakra.jsonize import stream as json_stream
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMP_NODE,
    AttributeProto,
    GlobalMetadata,
    Node,
)

UPSTREAM_NODE_COUNT = 3664

#: Hypothesis budget per property: enough to hit every oneof member many times, small enough
#: that the whole file runs in a few seconds.
MAX_EXAMPLES = 150
HYPOTHESIS = settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: The largest finite float32 (FLT_MAX), as a double.
FLOAT32_MAX = 3.4028234663852886e38

#: Field 11 of Node with wire type LEN (tag (11 << 3) | 2 = 0x5a) and a 3-byte payload: what a
#: future schema (e.g. the proposed ``StorageInfo storage = 11``) would add.
UNKNOWN_NODE_FIELD = b"\x5a\x03abc"
#: Field 40 of AttributeProto, varint 1 (tag (40 << 3) | 0 = 320 = varint c0 02).
UNKNOWN_ATTR_FIELD = b"\xc0\x02\x01"


def small_nodes(count: int = 5) -> list[Node]:
    """A short chain of nodes with the usual fields, attributes and IOInfo text."""
    nodes = []
    for i in range(count):
        node = Node(
            id=i + 1, name=f"aten::mm_{i} ünïcødé", type=COMP_NODE if i % 2 else COMM_COLL_NODE, duration_micros=10 * i
        )
        if i:
            node.data_deps.append(i)
            node.ctrl_deps.append(i)
        node.inputs.values = f"[[{i}, 1, 0, 64, 4, 'cuda:0']]"
        node.inputs.shapes = "[[16, 4]]"
        node.outputs.SetInParent()  # present but empty: must survive as {}
        node.attr.add(name="is_cpu_op", bool_val=False)
        node.attr.add(name="comm_size", int64_val=1 << 40)
        node.attr.add(name="f", float_val=0.1)
        node.attr.add(name="involved_dim").bool_list.values.extend([True, False])
        nodes.append(node)
    return nodes


@pytest.fixture
def small_et(tmp_path: Path) -> Path:
    path = tmp_path / "small.0.et"
    metadata = GlobalMetadata(version="1.0.0")
    metadata.attr.add(name="schema", string_val="1.0.2-chakra.0.0.4")
    io.write(path, metadata, small_nodes())
    return path


def same_json(ours: object, reference: object) -> bool:
    """Equal as JSON text: key order, int vs float and bool vs int all count."""
    return json.dumps(ours) == json.dumps(reference)


# ---------------------------------------------------------------------------------------------
# message -> dict


@HYPOTHESIS
@given(nodes())
def test_node_dict_equals_json_format_message_to_dict(node: Node) -> None:
    assert same_json(message_to_dict(node), json_format.MessageToDict(node))


@HYPOTHESIS
@given(metadatas())
def test_metadata_dict_equals_json_format_message_to_dict(metadata: GlobalMetadata) -> None:
    assert same_json(message_to_dict(metadata), json_format.MessageToDict(metadata))


@pytest.mark.parametrize("member", ONEOF_MEMBERS)
def test_every_oneof_member_at_its_default_value_is_rendered(member: str) -> None:
    attr = AttributeProto(name="x")
    if member.endswith("_list"):
        getattr(attr, member).SetInParent()
    else:
        setattr(attr, member, type(getattr(attr, member))())  # 0, 0.0, False, "" or b""
    assert attr.WhichOneof("value") == member
    assert same_json(message_to_dict(attr), json_format.MessageToDict(attr))
    node = Node(name="n", attr=[attr])
    assert dict_to_node(message_to_dict(node)).SerializeToString() == node.SerializeToString()


def test_float32_values_print_like_json_format() -> None:
    attr = AttributeProto(name="f", float_list={"values": [0.1, 1e-7, 3.4028234663852886e38, -0.0, math.inf]})
    assert message_to_dict(attr) == json_format.MessageToDict(attr)
    assert message_to_dict(attr)["floatList"]["values"][0] == 0.1


def test_large_uint64_ids_are_strings() -> None:
    node = Node(id=(1 << 64) - 1, name="n", data_deps=[(1 << 64) - 1])
    assert message_to_dict(node) == {"id": "18446744073709551615", "name": "n", "dataDeps": ["18446744073709551615"]}


@HYPOTHESIS
@given(st.one_of(nodes(), metadatas()))
def test_upstream_text_equals_json_format_message_to_json(msg: Node | GlobalMetadata) -> None:
    assert message_to_upstream_json(msg) == json_format.MessageToJson(msg)


# ---------------------------------------------------------------------------------------------
# dict -> message


@HYPOTHESIS
@given(nodes())
def test_node_dict_round_trip_gives_identical_bytes(node: Node) -> None:
    as_json = orjson.loads(orjson.dumps(message_to_dict(node)))  # through JSON text, as dejsonize reads it
    assert dict_to_node(as_json).SerializeToString() == node.SerializeToString()


@HYPOTHESIS
@given(metadatas())
def test_metadata_dict_round_trip_gives_identical_bytes(metadata: GlobalMetadata) -> None:
    as_json = orjson.loads(orjson.dumps(message_to_dict(metadata)))
    assert dict_to_metadata(as_json).SerializeToString() == metadata.SerializeToString()


@HYPOTHESIS
@given(nodes())
def test_dict_to_node_agrees_with_json_format_parse_dict(node: Node) -> None:
    d = json_format.MessageToDict(node, preserving_proto_field_name=True, use_integers_for_enums=True)
    try:
        expected = json_format.ParseDict(d, Node())
    except json_format.ParseError:
        assume(False)  # json_format refuses its own ±FLT_MAX; dict_to_node reads it (test below)
    assert dict_to_node(d).SerializeToString() == expected.SerializeToString()


def test_dict_to_node_reads_the_largest_float32_that_json_format_cannot_read_back() -> None:
    node = Node(name="n")
    node.attr.add(name="f", float_list={"values": [FLOAT32_MAX, -FLOAT32_MAX]})
    d = json_format.MessageToDict(node)
    assert d["attr"][0]["floatList"]["values"] == [3.4028235e38, -3.4028235e38]  # above FLT_MAX as doubles
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(d, Node())
    assert dict_to_node(d).SerializeToString() == node.SerializeToString()


def test_dict_to_node_accepts_what_json_format_accepts() -> None:
    d = {
        "id": 7,  # number instead of string
        "name": "n",
        "type": 4,  # enum by number
        "ctrl_deps": [1, "2"],  # proto field name, mixed kinds
        "durationMicros": "1e3",  # integral exponent form
        "startTimeMicros": None,  # null = default
        "attr": [{"name": "a", "int64_val": 3.0}, {"name": "b", "bytesVal": "_-8"}, {"name": "c", "doubleVal": "NaN"}],
    }
    expected = json_format.ParseDict(d, Node())
    assert dict_to_node(d).SerializeToString() == expected.SerializeToString()


@pytest.mark.parametrize(
    ("d", "key"),
    [
        ({"id": "-1"}, "id"),
        ({"id": True}, "id"),
        ({"id": 1.5}, "id"),
        ({"id": "12 "}, "id"),
        ({"type": "NOT_A_TYPE"}, "type"),
        ({"dataDeps": "4"}, "dataDeps"),
        ({"dataDeps": ["1", str(1 << 64)]}, "dataDeps"),
        ({"inputs": {"values": 3}}, "inputs.values"),
        ({"attr": [{"name": "a"}, {"name": "b", "int32Val": 1 << 31}]}, "attr[1].int32Val"),
        ({"attr": [{"name": "a", "int64Val": "1", "boolVal": True}]}, "attr[0].boolVal"),
        ({"attr": [{"name": "a", "boolVal": 1}]}, "attr[0].boolVal"),
        ({"attr": [{"name": "a", "floatVal": 1e39}]}, "attr[0].floatVal"),
        ({"attr": [{"name": "a", "int64List": {"values": ["x"]}}]}, "attr[0].int64List"),
        ({"attr": [{"nam": "a"}]}, "attr[0].nam"),
        ({"durationMicro": "5"}, "durationMicro"),
        ({"dataDeps": ["1"], "data_deps": ["2"]}, "data_deps"),
    ],
)
def test_dict_to_node_rejects_bad_content_naming_file_node_and_key(d: dict, key: str) -> None:
    with pytest.raises(ChakraFormatError) as info:
        dict_to_node(d, path="trace.json", node_index=41)
    error = info.value
    assert error.path == "trace.json"
    assert error.node_index == 41
    assert f"JSON key {key}" in error.message
    assert error.hint
    assert "node #41" in str(error)


def test_dict_to_node_rejects_a_non_object() -> None:
    with pytest.raises(ChakraFormatError, match="must be a JSON object"):
        dict_to_node(["not", "a", "node"], node_index=0)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# files: output forms


def test_document_loads_with_plain_json_load(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    result = jsonize.jsonize(small_et, out)
    assert result == JsonizeResult(nodes=5)
    document = json.loads(out.read_text(encoding="utf-8"))
    metadata, expected = io.read(small_et)
    assert document["globalMetadata"] == json_format.MessageToDict(metadata)
    assert document["nodes"] == [json_format.MessageToDict(n) for n in expected]


def test_document_has_one_node_per_line(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith('{"globalMetadata":')
    assert lines[1] == '"nodes":['
    assert [orjson.loads(line.rstrip(",")) for line in lines[2:-1]] == [message_to_dict(n) for n in small_nodes()]
    assert lines[-1] == "]}"


def test_document_of_a_trace_without_nodes_is_valid_json(tmp_path: Path) -> None:
    src = tmp_path / "empty.et"
    io.write(src, GlobalMetadata(version="1.0.0"), [])
    jsonize.jsonize(src, tmp_path / "empty.json")
    assert json.loads((tmp_path / "empty.json").read_text()) == {"globalMetadata": {"version": "1.0.0"}, "nodes": []}
    assert dejsonize(tmp_path / "empty.json", tmp_path / "back.et") == 0
    assert (tmp_path / "back.et").read_bytes() == src.read_bytes()


def test_lines_form_has_metadata_then_one_node_per_line(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.jsonl"
    assert jsonize.jsonize(small_et, out, lines=True).nodes == 5
    objects = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert objects[0] == {"version": "1.0.0", "attr": [{"name": "schema", "stringVal": "1.0.2-chakra.0.0.4"}]}
    assert len(objects) == 6


def test_upstream_form_is_message_to_json_back_to_back(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.up.json"
    jsonize.jsonize(small_et, out, upstream=True)
    metadata, expected = io.read(small_et)
    text = json_format.MessageToJson(metadata) + "".join(json_format.MessageToJson(n) for n in expected)
    assert out.read_text(encoding="ascii") == text


def test_gzip_output_by_suffix_reads_back(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.json.gz"
    jsonize.jsonize(small_et, out)
    assert json.loads(gzip.decompress(out.read_bytes()))["nodes"][0]["id"] == "1"
    assert dejsonize(out, tmp_path / "back.et") == 5
    assert (tmp_path / "back.et").read_bytes() == small_et.read_bytes()


# ---------------------------------------------------------------------------------------------
# files: round trips


@pytest.mark.parametrize("form", ["document", "lines", "upstream"])
def test_small_trace_round_trips_byte_identical(small_et: Path, tmp_path: Path, form: str) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out, lines=form == "lines", upstream=form == "upstream")
    assert dejsonize(out, tmp_path / "back.et") == 5
    assert (tmp_path / "back.et").read_bytes() == small_et.read_bytes()


@pytest.mark.parametrize("form", ["document", "lines", "upstream"])
def test_reader_handles_values_split_across_tiny_buffers(
    small_et: Path, tmp_path: Path, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out, lines=form == "lines", upstream=form == "upstream")
    monkeypatch.setattr(json_stream, "JSON_READ_CHUNK_CHARS", 7)
    assert dejsonize(out, tmp_path / "back.et") == 5
    assert (tmp_path / "back.et").read_bytes() == small_et.read_bytes()


def test_reindented_document_reads_back(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(out.read_text()), indent=4, ensure_ascii=False), encoding="utf-8")
    assert dejsonize(pretty, tmp_path / "back.et") == 5
    assert (tmp_path / "back.et").read_bytes() == small_et.read_bytes()


@pytest.mark.parametrize("tiny_buffers", [False, True])
def test_compact_single_line_document_reads_back(
    small_et: Path, tmp_path: Path, tiny_buffers: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out)
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(out.read_text()), ensure_ascii=True), encoding="utf-8")
    assert "\n" not in compact.read_text()
    if tiny_buffers:  # lines longer than the fast-path limit, values cut by every refill
        monkeypatch.setattr(json_stream, "JSON_READ_CHUNK_CHARS", 7)
        monkeypatch.setattr(json_stream, "JSON_FAST_LINE_CHARS", 10)
    assert dejsonize(compact, tmp_path / "back.et") == 5
    assert (tmp_path / "back.et").read_bytes() == small_et.read_bytes()


@HYPOTHESIS
@given(
    st.lists(nodes().filter(lambda n: n.ByteSize() > 0), max_size=4),
    metadatas(),
    st.sampled_from(["document", "lines", "upstream"]),
)
def test_random_traces_round_trip_byte_identical(
    tmp_path_factory: pytest.TempPathFactory, node_list: list[Node], metadata: GlobalMetadata, form: str
) -> None:
    tmp = tmp_path_factory.mktemp("rt")
    if not metadata.ByteSize():
        metadata.version = io.FORMAT_VERSION  # the writer never writes an empty metadata record
    src = tmp / "t.et"
    io.write(src, metadata, node_list)
    jsonize.jsonize(src, tmp / "t.json", lines=form == "lines", upstream=form == "upstream")
    dejsonize(tmp / "t.json", tmp / "back.et")
    assert (tmp / "back.et").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("form", ["document", "lines", "upstream"])
def test_real_upstream_trace_round_trips_byte_identical(upstream_et: Path, tmp_path: Path, form: str) -> None:
    out = tmp_path / "real.json"
    result = jsonize.jsonize(upstream_et, out, lines=form == "lines", upstream=form == "upstream")
    assert result == JsonizeResult(nodes=UPSTREAM_NODE_COUNT)
    assert dejsonize(out, tmp_path / "back.et") == UPSTREAM_NODE_COUNT
    assert (tmp_path / "back.et").read_bytes() == upstream_et.read_bytes()


def test_real_upstream_trace_upstream_text_matches_message_to_json(upstream_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "real.json"
    jsonize.jsonize(upstream_et, out, upstream=True)
    metadata, expected = io.read(upstream_et)
    text = json_format.MessageToJson(metadata) + "".join(json_format.MessageToJson(n) for n in expected)
    assert out.read_text(encoding="ascii") == text


# ---------------------------------------------------------------------------------------------
# unknown fields


def node_with_unknown_field(node_id: int) -> Node:
    return Node.FromString(Node(id=node_id, name="future", type=COMP_NODE).SerializeToString() + UNKNOWN_NODE_FIELD)


def test_unknown_node_fields_are_counted_not_dropped_silently(tmp_path: Path) -> None:
    src = tmp_path / "future.et"
    io.write(src, None, [Node(id=1, name="a"), node_with_unknown_field(2), node_with_unknown_field(3)])
    result = jsonize.jsonize(src, tmp_path / "future.json")
    assert result == JsonizeResult(nodes=3, nodes_with_unknown_fields=2)
    assert result.dropped_unknown_fields


def test_unknown_fields_inside_attributes_and_lists_are_counted(tmp_path: Path) -> None:
    in_attr = Node(id=1, name="a")
    in_attr.attr.append(AttributeProto.FromString(AttributeProto(name="x").SerializeToString() + UNKNOWN_ATTR_FIELD))
    in_list = Node(id=2, name="b")
    in_list.attr.add(name="l").int64_list.MergeFromString(b"\x10\x01")  # Int64List field 2
    in_io = Node(id=3, name="c")
    in_io.inputs.MergeFromString(b"\x20\x01")  # IOInfo field 4
    assert all(has_unknown_fields(n) for n in (in_attr, in_list, in_io))
    src = tmp_path / "nested.et"
    io.write(src, None, [in_attr, in_list, in_io, Node(id=4, name="plain")])
    assert jsonize.jsonize(src, tmp_path / "nested.json").nodes_with_unknown_fields == 3


def test_unknown_metadata_fields_are_reported(tmp_path: Path) -> None:
    metadata = GlobalMetadata.FromString(GlobalMetadata(version="9").SerializeToString() + b"\x18\x01")
    src = tmp_path / "meta.et"
    io.write(src, metadata, [Node(id=1, name="a")])
    assert jsonize.jsonize(src, tmp_path / "meta.json").metadata_has_unknown_fields


def test_unknown_fields_error_mode_refuses_and_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "future.et"
    io.write(src, None, [Node(id=1, name="a"), node_with_unknown_field(2)])
    with pytest.raises(ChakraFormatError) as info:
        jsonize.jsonize(src, tmp_path / "future.json", unknown_fields="error")
    assert info.value.node_index == 1
    assert not (tmp_path / "future.json").exists()
    assert list(tmp_path.iterdir()) == [src]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------
# bad JSON


def broken_copy(small_et: Path, tmp_path: Path, line_number: int, new_line: str, **kwargs: bool) -> Path:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out, **kwargs)
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[line_number - 1] = new_line
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def test_bad_json_in_document_names_line_column_and_node(small_et: Path, tmp_path: Path) -> None:
    bad = broken_copy(small_et, tmp_path, 4, '{"id":"2","name": },')  # node #1 sits on line 4
    with pytest.raises(ChakraFormatError) as info:
        dejsonize(bad, tmp_path / "back.et")
    error = info.value
    assert error.path == str(bad)
    assert error.node_index == 1
    assert "line 4, column 19" in error.message
    assert error.offset == len("\n".join(bad.read_text().splitlines()[:3]).encode()) + 1 + 18
    assert error.hint
    assert not (tmp_path / "back.et").exists()


def test_bad_json_in_upstream_text_names_the_line(small_et: Path, tmp_path: Path) -> None:
    bad = broken_copy(small_et, tmp_path, 12, '  "name": tru,', upstream=True)
    with pytest.raises(ChakraFormatError, match=r"invalid JSON: .*line 12, column 11"):
        dejsonize(bad, tmp_path / "back.et")


def test_truncated_json_is_reported_not_read_as_shorter_trace(small_et: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    jsonize.jsonize(small_et, out)
    out.write_bytes(out.read_bytes()[:-40])
    with pytest.raises(ChakraFormatError, match="line"):
        dejsonize(out, tmp_path / "back.et")


def test_bad_node_content_names_node_and_key(small_et: Path, tmp_path: Path) -> None:
    bad = broken_copy(small_et, tmp_path, 5, '{"id":"x3","name":"n"},')
    with pytest.raises(ChakraFormatError, match="JSON key id") as info:
        dejsonize(bad, tmp_path / "back.et")
    assert info.value.node_index == 2


def test_json_lines_without_metadata_line_is_explained(tmp_path: Path) -> None:
    src = tmp_path / "nodes.jsonl"
    src.write_text('{"id": "1", "name": "a"}\n{"id": "2", "name": "b"}\n')
    with pytest.raises(ChakraFormatError, match="GlobalMetadata has no key 'id'"):
        dejsonize(src, tmp_path / "back.et")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "file is empty"),
        ("  \n", "file is empty"),
        ("[1, 2]", "expected the GlobalMetadata object"),
        ('{"globalMetadata": {}, "nodes": [], "extra": 1}', "unknown top-level key 'extra'"),
        ('{"nodes": [], "globalMetadata": {}}', "nodes come before globalMetadata"),
        ('{"globalMetadata": {}, "nodes": [1]}', "expected a node object"),
        ('{"globalMetadata": {}, "nodes": []} {}', "extra data after the document"),
    ],
)
def test_malformed_json_structure_is_a_format_error(tmp_path: Path, text: str, message: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(text)
    with pytest.raises(ChakraFormatError, match=message):
        dejsonize(src, tmp_path / "back.et")


def test_error_position_stays_right_when_the_buffer_moves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "bad.json"
    src.write_text('{"globalMetadata": {"version": "1"},\n"nodes": [\n{"id": "1", "name": "a"},\n   7\n]}\n')
    monkeypatch.setattr(json_stream, "JSON_READ_CHUNK_CHARS", 3)
    with pytest.raises(ChakraFormatError, match=r"expected a node object, got int \(line 4, column 4\)") as info:
        dejsonize(src, tmp_path / "back.et")
    assert info.value.node_index == 1
    assert info.value.offset == src.read_text().index("7")


def test_binary_et_given_to_dejsonize_is_explained(small_et: Path, tmp_path: Path) -> None:
    with pytest.raises(ChakraFormatError, match=r"not UTF-8|invalid JSON"):
        dejsonize(small_et, tmp_path / "back.et")


@pytest.mark.parametrize(
    ("relpath", "named"),
    [
        ("upstream-chakra/small_chakra.0.json", "workload_graph"),
        ("upstream-chakra/1.0.2-chakra.0.0.4.json", "PyTorch execution trace"),
        ("param/resnet_1gpu_et.json.gz", "PyTorch execution trace"),
        ("hta/benchmark_simple_add_trace.json.gz", "Kineto"),
    ],
)
def test_dejsonize_names_json_formats_that_are_not_chakra_json(tmp_path: Path, relpath: str, named: str):
    with pytest.raises(ChakraFormatError, match=named):
        dejsonize(require_shared(relpath), tmp_path / "x.0.et")
    assert not (tmp_path / "x.0.et").exists()
