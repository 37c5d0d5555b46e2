"""chakra.pytorch.host: host execution traces of every schema, read into one form."""

from __future__ import annotations

import gzip
import json
from contextlib import ExitStack
from pathlib import Path
from unittest.mock import patch

import msgspec
import pytest
from helpers import require_shared
from hypothesis import given
from hypothesis import strategies as st

import chakra.pytorch.host as host_module
from chakra._host_record import host_nodes
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.pytorch.host import (
    CORE_ATTRS,
    PROCESS_ROOT_NAMES,
    GroupedRecord,
    HostNode,
    IOLists,
    SharedValues,
    _attrs_by_msgspec,
    host_node_from_record,
    load_host_trace,
)

#: Every host trace in ../shared/data: (path, schema, layout, node count).
SHARED_HOST_TRACES = [
    ("param/linear_et.json.gz", "1.0.1", "flat", 931),
    ("hta/benchmark_simple_add_et.json.gz", "1.0.1", "flat", 38),
    ("upstream-chakra/1.0.2-chakra.0.0.4.json", "1.0.2-chakra.0.0.4", "grouped", 263),
    ("param/resnet_1gpu_et.json.gz", "1.0.3-chakra.0.0.4", "grouped", 14391),
    ("param/resnet_2gpu_et.json.gz", "1.1.0-chakra.0.0.4", "grouped", 14392),
]


@pytest.mark.parametrize(("relpath", "schema", "layout", "count"), SHARED_HOST_TRACES)
def test_every_shared_host_trace_loads_with_its_schema_and_layout(relpath, schema, layout, count):
    trace = load_host_trace(require_shared(relpath))
    assert (trace.schema, trace.layout, len(trace.nodes), trace.notes) == (schema, layout, count, [])


@pytest.mark.parametrize(("relpath", "schema", "layout", "count"), SHARED_HOST_TRACES)
def test_both_layouts_give_the_same_node_fields(relpath, schema, layout, count):
    trace = load_host_trace(require_shared(relpath))
    ids = {n.id for n in trace.nodes}
    process_root = next(n for n in trace.nodes if n.name in PROCESS_ROOT_NAMES)
    assert process_root.id == 1
    assert all(n.parent in ids for n in trace.nodes)  # every call-stack parent is in the file
    assert any(n.rf_id > 0 for n in trace.nodes) and any(n.tid > 0 for n in trace.nodes)


def test_flat_layout_maps_parent_and_positional_lists():
    trace = load_host_trace(require_shared("param/linear_et.json.gz"))
    addmm = next(n for n in trace.nodes if n.name == "aten::addmm")
    assert addmm.parent == 9 and addmm.op_schema.startswith("aten::addmm(")
    assert addmm.inputs.types()[:3] == ["Tensor(float)"] * 3
    assert addmm.inputs.shapes()[1] == [512, 1024]
    assert addmm.inputs.values()[1] == [3, 4, 0, 524288, 4, "cuda:0"]


def test_grouped_layout_keeps_collective_attributes():
    trace = load_host_trace(require_shared("param/resnet_2gpu_et.json.gz"))
    comm = next(n for n in trace.nodes if n.name == "record_param_comms")
    assert comm.attrs["collective_name"] == "broadcast"
    assert comm.attrs["in_msg_nelems"] == 53120 and comm.attrs["pg_name"] == "0"
    assert "rf_id" not in comm.attrs  # core attributes are fields


def test_process_groups_come_from_the_process_group_record():
    trace = load_host_trace(require_shared("param/resnet_2gpu_et.json.gz"))
    assert trace.process_groups() == [
        {
            "pg_name": "0",
            "pg_desc": "default_pg",
            "backend_config": "cuda:nccl",
            "ranks": [],
            "group_size": 2,
            "group_count": 1,
        }
    ]


def test_a_trace_the_observer_never_finalised_is_repaired_and_says_so(tmp_path: Path):
    text = require_shared("upstream-chakra/1.0.2-chakra.0.0.4.json").read_text()
    document = json.loads(text)
    nodes = document.pop("nodes")[:10]
    head = json.dumps(document)[:-1] + ', "nodes": ['
    path = tmp_path / "host.0.json"
    path.write_text(head + ",\n".join(json.dumps(n) for n in nodes) + ",\n")

    trace = load_host_trace(path)

    assert len(trace.nodes) == 10
    assert "not finalised" in trace.notes[0]


def test_gzip_and_plain_files_read_the_same(tmp_path: Path):
    plain = require_shared("upstream-chakra/1.0.2-chakra.0.0.4.json")
    packed = tmp_path / "host.0.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_host_trace(packed).nodes == load_host_trace(plain).nodes


def test_an_unknown_schema_string_is_read_by_its_fields_and_noted(tmp_path: Path):
    path = tmp_path / "host.0.json"
    path.write_text(json.dumps({"schema": "9.9.9-chakra.9.9.9", "nodes": [{"id": 1, "name": "x", "ctrl_deps": 1}]}))
    trace = load_host_trace(path)
    assert trace.layout == "grouped" and "9.9.9" in trace.notes[0]


def test_a_kineto_trace_is_named_as_such():
    with pytest.raises(ChakraFormatError, match="Kineto"):
        load_host_trace(require_shared("hta/benchmark_simple_add_trace.json.gz"))


def test_broken_json_is_reported_with_line_and_column(tmp_path: Path):
    path = tmp_path / "host.0.json"
    path.write_text('{"schema": "1.0.1",\n "nodes": [{"id": 1, "name": }]}')
    with pytest.raises(ChakraFormatError, match="line 2, column"):
        load_host_trace(path)


def test_a_missing_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="no such file"):
        load_host_trace(tmp_path / "host.0.json")


# -- the attribute splitter reads what msgspec reads ----------------------------------------------------

ATTR_NAMES = st.sampled_from(["rf_id", "seq_id", "tid", "op_schema", "kernel_file", "pg_name", "in_msg_nelems", "é"])
ATTR_VALUES = st.one_of(
    st.integers(-(1 << 70), 1 << 70), st.text(max_size=6), st.booleans(), st.none(),
    st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=2),
)  # fmt: skip


def _attr_json(attrs: list[tuple[str, object, bool]]) -> bytes:
    """The attrs list as a writer might write it: ``type`` or not, spaces or not, text escaped or not."""
    objects = [{"name": n, "type": "x", "value": v} if typed else {"value": v, "name": n} for n, v, typed in attrs]
    spaced = (",", ":") if len(attrs) % 2 else (", ", ": ")
    return json.dumps(objects, separators=spaced, ensure_ascii=len(attrs) % 3 == 0).encode()


@given(attrs=st.lists(st.tuples(ATTR_NAMES, ATTR_VALUES, st.booleans()), max_size=6))
def test_split_attributes_are_the_ones_msgspec_decodes(attrs):
    record = GroupedRecord(id=1, name="op", attrs=msgspec.Raw(_attr_json(attrs)))
    try:
        expected = _attrs_by_msgspec(record)
    except msgspec.ValidationError:
        with pytest.raises(msgspec.ValidationError):
            host_node_from_record(record)
        return
    node = host_node_from_record(record, SharedValues())
    assert {name: getattr(node, name) for name in CORE_ATTRS} == expected[0]
    assert node.attrs == expected[1] and list(node.attrs) == list(expected[1])


IO_OBJECTS = st.fixed_dictionaries(
    {},
    optional={
        "values": st.lists(st.one_of(st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2))),
        "shapes": st.lists(st.lists(st.integers(0, 9), max_size=3)),
        "types": st.lists(st.text(max_size=6)),
        "strides": st.one_of(st.none(), st.lists(st.lists(st.integers(0, 9), max_size=3))),
        "other": st.integers(),
    },
)


@given(
    records=st.lists(
        st.tuples(st.lists(st.tuples(ATTR_NAMES, ATTR_VALUES, st.booleans()), max_size=5), IO_OBJECTS, st.text()),
        max_size=8,
    )
)
def test_records_read_in_c_are_the_nodes_the_python_path_makes(records):
    def raw_records() -> list[GroupedRecord]:
        return [
            GroupedRecord(id=i, name=name, ctrl_deps=i // 2, attrs=msgspec.Raw(_attr_json(attrs)),
                          inputs=msgspec.Raw(json.dumps(io).encode()), outputs=msgspec.Raw(b"null"))
            for i, (attrs, io, name) in enumerate(records)
        ]  # fmt: skip

    expected: list[object] = []
    for record in raw_records():
        try:
            expected.append(host_node_from_record(record, SharedValues()))
        except msgspec.ValidationError:
            expected.append(record)  # a core value of another kind: the C path leaves it too
    nodes: list[object] = raw_records()
    shared = SharedValues()
    left = host_nodes(nodes, CORE_ATTRS, shared.extras, shared.texts, shared.strings, HostNode, IOLists)
    for index in left:
        assert isinstance(nodes[index], GroupedRecord)
        nodes[index] = (
            host_node_from_record(nodes[index], shared) if isinstance(expected[index], HostNode) else (expected[index])
        )
    assert nodes == expected


def test_nodes_given_one_shared_dict_share_equal_extra_attributes():
    raw = msgspec.Raw(b'[{"name": "rf_id", "type": "uint64", "value": 3}, {"name": "kernel_file", "value": ""}]')
    shared = SharedValues()
    first, second = (host_node_from_record(GroupedRecord(id=i, name="op", attrs=raw), shared) for i in (1, 2))
    assert first.attrs is second.attrs and first.attrs == {"kernel_file": ""} and first.rf_id == 3


def test_inputs_that_are_not_an_object_are_refused_naming_the_node(tmp_path: Path):
    path = tmp_path / "host.0.json"
    node = {"id": 2, "name": "aten::mm", "ctrl_deps": 1, "inputs": [1, 2], "attrs": []}
    path.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": [node]}))
    with pytest.raises(ChakraFormatError, match=r"node #0.*inputs or outputs: Expected `object \| null`"):
        load_host_trace(path)


@given(io=IO_OBJECTS, spaced=st.booleans())
def test_io_lists_are_the_texts_msgspec_reads(io, spaced):
    text = json.dumps(io, separators=(", ", ": ") if spaced else (",", ":")).encode()
    record = GroupedRecord(id=1, name="op", inputs=msgspec.Raw(text))
    lists = host_node_from_record(record).inputs
    expected = msgspec.json.decode(text)
    assert lists.values() == expected.get("values", []) and lists.shapes() == expected.get("shapes", [])
    assert lists.types() == expected.get("types", []) and lists.strides() == expected.get("strides")


def test_nodes_given_one_shared_values_share_equal_shapes_and_types_but_not_values():
    io = msgspec.Raw(b'{"values": [[1, 2]], "shapes": [[4, 8]], "types": ["Tensor(float)"], "strides": [[8, 1]]}')
    shared = SharedValues()
    first, second = (host_node_from_record(GroupedRecord(id=i, name="op", inputs=io), shared) for i in (1, 2))
    assert first.inputs.raw_shapes is second.inputs.raw_shapes and first.inputs.raw_types is second.inputs.raw_types
    assert (
        first.inputs.raw_values == second.inputs.raw_values and first.inputs.raw_values is not second.inputs.raw_values
    )


# -- the trace's text read straight into nodes gives what msgspec's records give ----------------------


def _load_both(path: Path, block_bytes: int | None = None) -> tuple[object, object]:
    """What ``load_host_trace`` gives (nodes and header, or the error's text), read from the text in C
    (``block_bytes`` at a time, and the layout sniffed in the first 512 bytes, where given) and read
    by msgspec's records."""

    def outcome() -> object:
        try:
            trace = load_host_trace(path)
        except ChakraFormatError as exc:
            return str(exc)
        return trace.nodes, trace.schema, trace.pid, trace.start_ts, trace.notes

    with ExitStack() as patches:
        if block_bytes is not None:
            patches.enter_context(patch.object(host_module, "_BLOCK_BYTES", block_bytes))
            patches.enter_context(patch.object(host_module, "_LAYOUT_SNIFF_BYTES", 256))
        scanned = outcome()
        with patch.object(host_module, "_scan_grouped", lambda path, shared: None):
            return scanned, outcome()


RECORD_EXTRAS = st.dictionaries(
    st.sampled_from(["extra", "é", "flag", 'quo"te']),
    st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3), st.lists(st.integers())),
    max_size=2,
)
RECORDS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.one_of(st.integers(-5, 1 << 20), st.just(1 << 64)),
            "name": st.sampled_from(["aten::mm", "op\n", "ü", "a\\b", "x\u2028"]),
        },
        optional={
            "ctrl_deps": st.one_of(st.integers(0, 9), st.sampled_from([1.0, None])),
            "inputs": st.one_of(st.none(), IO_OBJECTS),
            "outputs": IO_OBJECTS,
            "attrs": st.lists(st.tuples(ATTR_NAMES, ATTR_VALUES, st.booleans()), max_size=4),
        },
    ).flatmap(lambda record: RECORD_EXTRAS.map(lambda extra: {**record, **extra})),
    min_size=1,
    max_size=6,
)


def _trace_text(records: list[dict], spaced: bool, ascii_only: bool, order: list[int]) -> bytes:
    """A host trace holding ``records`` (each twice, so repeated text is read again), keys in the order
    ``order`` permutes them, attrs as :func:`_attr_json` writes them."""
    separators = (", ", ": ") if spaced else (",", ":")
    parts = []
    for record in records + records:
        keys = sorted(record, key=lambda key: order[hash(key) % len(order)])
        fields = [
            json.dumps(key) + separators[1] + (
                _attr_json(record[key]).decode() if key == "attrs"
                else json.dumps(record[key], separators=separators, ensure_ascii=ascii_only)
            )
            for key in keys
        ]  # fmt: skip
        parts.append("{" + separators[0].join(fields) + "}")
    return (
        '{"schema": "1.1.1-chakra.0.0.4", "pid": 7, "nodes": [\n' + ",\n".join(parts) + '], "finish_ts": 9}'
    ).encode()


BLOCKS = st.sampled_from([None, 1, 7, 64])  # bytes read at a time (None: the default): records cut anywhere


@given(records=RECORDS, spaced=st.booleans(), ascii_only=st.booleans(), order=st.permutations(range(8)), block=BLOCKS)
def test_nodes_read_from_the_text_are_the_nodes_msgspec_records_make(
    tmp_path_factory, records, spaced, ascii_only, order, block
):
    path = tmp_path_factory.mktemp("scan") / "host.0.json"
    path.write_bytes(_trace_text(records, spaced, ascii_only, order))
    scanned, decoded = _load_both(path, block)
    assert scanned == decoded


@given(
    cut=st.integers(0, 10_000),
    insert=st.sampled_from(['"', "{", "}", "[", "]", ",", ":", "\\", " ", "0", "-", ".", "e", "\x00", "\xff", ""]),
    block=BLOCKS,
)
def test_text_made_not_json_anywhere_is_read_as_msgspec_reads_it(tmp_path_factory, cut, insert, block):
    records = [
        {"id": 2, "name": "aten::mm", "ctrl_deps": 1, "inputs": {"values": [[1, 2, 0, 4, 4, "cpu"], 1.5e3, None],
         "shapes": [[2, 2], [], []], "types": ["Tensor(float)", "Double", "None"], "strides": [[2, 1], [], []]},
         "outputs": {"values": [], "shapes": [], "types": []}, "other": [True, False, {"k": -0.5}],
         "attrs": [("rf_id", 3, True), ("op_schema", "aten::mm(Tensor self) -> Tensor", True),
                   ("kernel_file", "", True)]},
    ]  # fmt: skip
    text = _trace_text(records, True, True, list(range(8)))
    at = cut % len(text)
    damaged = text[:at] + insert.encode("latin-1") + text[at + 1 :]
    path = tmp_path_factory.mktemp("damaged") / "host.0.json"
    path.write_bytes(damaged)
    scanned, decoded = _load_both(path, block)
    assert scanned == decoded


@pytest.mark.parametrize("relpath", [relpath for relpath, _, layout, _ in SHARED_HOST_TRACES if layout == "grouped"])
def test_a_shared_host_trace_reads_the_same_from_its_text_as_by_msgspec(relpath):
    path = require_shared(relpath)
    scanned, decoded = _load_both(path)
    assert scanned == decoded and not isinstance(scanned, str)
    assert host_module._scan_grouped(path, SharedValues()) is not None


@pytest.mark.parametrize("second", ['[{"id": 2, "name": "second", "ctrl_deps": 0}]', "[]"])
def test_a_second_list_of_nodes_under_a_key_spelled_with_escapes_is_read_as_msgspec_reads_it(tmp_path, second):
    path = tmp_path / "host.0.json"
    first = '[{"id": 1, "name": "first", "ctrl_deps": 0}]'
    text = '{"schema": "1.1.1-chakra.0.0.4", "nodes": ' + first + ', "\\u006eodes": ' + second + "}"
    path.write_text(text)
    scanned, decoded = _load_both(path)
    assert scanned == decoded
