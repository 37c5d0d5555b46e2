"""chakra.wire: the hand-written encoder writes exactly what protobuf writes."""

from __future__ import annotations

import json
from collections import Counter

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chakra._encode import count_rows, dense_ranks
from chakra.attrs import WELL_KNOWN, set_attr
from chakra.errors import AttrKindError
from chakra.schema.protobuf.et_def_pb2 import IOInfo, Node
from chakra.wire import RAW, AttrColumn, AttrEncoder, encode_columns, encode_node, python_repr_of_json, varint

#: A value of each well-known attribute's kind, defaults included (oneof members have presence).
SAMPLE_VALUES = {"bool": [True, False], "int": [0, 1, 300, -1, 1 << 40], "str": ["", "aten::mm(Tensor self)"]}


def _value_samples():
    for name, spec in WELL_KNOWN.items():
        for value in SAMPLE_VALUES.get(spec.kind, []):
            if spec.member.startswith("uint") and isinstance(value, int) and value < 0:
                continue
            if spec.member == "int32_val" and isinstance(value, int) and abs(value) >= 1 << 31:
                continue
            yield name, value


@pytest.mark.parametrize(("name", "value"), list(_value_samples()))
def test_well_known_attributes_encode_like_protobuf(name, value):
    expected = Node()
    set_attr(expected, name, value)
    assert AttrEncoder()(name, value) == expected.SerializeToString()


@pytest.mark.parametrize("value", [7, "text", 2.5, True, [1, 2], ["a", "b"]])
def test_other_attributes_take_the_member_their_python_type_asks_for(value):
    expected = Node()
    set_attr(expected, "custom", value)
    assert AttrEncoder()("custom", value) == expected.SerializeToString()


def test_values_the_member_cannot_hold_are_refused():
    with pytest.raises(AttrKindError):
        AttrEncoder()("comm_src", 1 << 40)  # int32


@given(
    node_id=st.integers(0, 1 << 40),
    name=st.text(max_size=20),
    node_type=st.integers(0, 7),
    ctrl=st.lists(st.integers(0, 1 << 50), max_size=4),
    data=st.lists(st.integers(0, 1 << 50), max_size=4),
    start=st.integers(0, 1 << 60),
    dur=st.integers(0, 1 << 30),
    io=st.one_of(st.none(), st.tuples(st.text(max_size=10), st.text(max_size=10), st.text(max_size=10))),
)
def test_nodes_encode_like_protobuf(node_id, name, node_type, ctrl, data, start, dur, io):
    expected = Node(
        id=node_id, name=name, type=node_type, ctrl_deps=ctrl, data_deps=data,
        start_time_micros=start, duration_micros=dur,
    )  # fmt: skip
    if io is not None:
        expected.inputs.CopyFrom(IOInfo(values=io[0], shapes=io[1], types=io[2]))
    set_attr(expected, "is_cpu_op", True)
    attrs = [AttrEncoder()("is_cpu_op", True)]
    payload = encode_node(node_id, name, node_type, ctrl, data, start, dur, io, None, attrs)
    assert payload == expected.SerializeToString()


@given(
    node_id=st.integers(0, (1 << 64) - 1),
    deps=st.lists(st.integers(0, (1 << 64) - 1), max_size=6),
    io=st.tuples(st.text(max_size=300), st.text(max_size=10), st.text(max_size=10)),
)
def test_full_range_ids_and_both_io_lists_encode_like_protobuf(node_id, deps, io):
    expected = Node(id=node_id, data_deps=deps)
    expected.inputs.CopyFrom(IOInfo(values=io[0], shapes=io[1], types=io[2]))
    expected.outputs.CopyFrom(IOInfo(values=io[2], shapes=io[0], types=io[1]))
    payload = encode_node(node_id, "", 0, [], deps, 0, 0, io, (io[2], io[0], io[1]), [])
    assert payload == expected.SerializeToString()


def test_io_text_given_as_utf8_bytes_encodes_as_the_same_text():
    as_text = encode_node(1, "n", 4, [], [], 0, 0, ("[1, 'é']", "[[]]", "['Int']"), None, [])
    as_bytes = encode_node(1, "n", 4, [], [], 0, 0, ("[1, 'é']".encode(), b"[[]]", b"['Int']"), None, [])
    assert as_text == as_bytes


@pytest.mark.parametrize(
    "arguments",
    [
        (1.5, "n", 4, [], [], 0, 0, None, None, []),  # a float id
        (1, "n", 4, ["2"], [], 0, 0, None, None, []),  # a dependency that is text
        (1, "n", 4, [], [], 0, 0, ("values", "shapes"), None, []),  # an IOInfo of two lists
        (1, "n", 4, [], [], 0, 0, None, None, ["is_cpu_op"]),  # an attr that is not encoded
        (1, 2, 4, [], [], 0, 0, None, None, []),  # a name that is not text
    ],
)
def test_wrong_argument_types_are_refused_with_a_type_error(arguments):
    with pytest.raises(TypeError):
        encode_node(*arguments)


def test_negative_numbers_are_64_bit_twos_complement_varints():
    assert varint(-1) == b"\xff" * 9 + b"\x01"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@given(value=JSON_VALUES, spaced=st.booleans())
def test_json_as_python_text_is_strs_text_or_left_to_python(value, spaced):
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":")).encode()
    written = python_repr_of_json(text)
    assert written is None or written == str(msgspec.json.decode(text)).encode()


@given(
    value=st.lists(
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(10**17), 10**17)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(
                alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="\\'\""), max_size=8
            ),
            lambda inner: st.lists(inner, max_size=4),
            max_leaves=12,
        )
    )
)
def test_io_lists_of_numbers_flags_and_plain_names_are_written_without_python(value):
    text = json.dumps(value).encode()
    assert python_repr_of_json(text) == str(msgspec.json.decode(text)).encode()


@given(text=st.text(alphabet='[], "-0123456789.eE+truefalsn\t\n', max_size=30))
def test_any_json_text_of_lists_numbers_words_and_spaces_is_written_as_str_writes_it(text):
    try:
        value = msgspec.json.decode(text.encode())
    except msgspec.DecodeError:
        return  # not JSON: no text to agree with
    written = python_repr_of_json(text.encode())
    assert written is None or written == str(value).encode()


def test_forms_whose_python_text_has_rules_of_its_own_are_left_to_python():
    for text in (
        b'"bare"',
        b'["it\'s"]',
        b'["caf\\u00e9"]',
        '["café"]'.encode(),
        b'[{"a": 1, "a": 2}]',
        b"[123456789012345678901]",
        b"[1,",
    ):
        assert python_repr_of_json(text) is None, text


# -- the batch encoder: columns in, the same records out ---------------------------------------------

IO_TEXTS = st.one_of(st.none(), st.tuples(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8)))
#: Values of attributes of each member the batch encoder writes itself, None for rows without one.
ATTR_COLUMNS = {
    "rf_id": st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1)),  # int64_val
    "comm_src": st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1)),  # int32_val
    "tensor_size": st.one_of(st.none(), st.integers(0, (1 << 64) - 1)),  # uint64_val
    "is_cpu_op": st.one_of(st.none(), st.booleans()),  # bool_val
    "op_schema": st.one_of(st.none(), st.text(max_size=12)),  # string_val
}
ROWS = st.fixed_dictionaries(
    {
        "name": st.text(max_size=10),
        "type": st.integers(0, 7),
        "ctrl": st.lists(st.integers(0, 1 << 40), max_size=4),
        "data": st.lists(st.integers(0, 1 << 40), max_size=4),
        "start": st.integers(0, 1 << 50),
        "dur": st.integers(0, 1 << 30),
        "inputs": IO_TEXTS,
        "outputs": IO_TEXTS,
        **ATTR_COLUMNS,
    }
)


def _columns(rows: list[dict]) -> tuple[list, list[AttrColumn]]:
    keys = ["name", "type", "ctrl", "data", "start", "dur", "inputs", "outputs"]
    return [[r[k] for r in rows] for k in keys], [AttrColumn(name, [r[name] for r in rows]) for name in ATTR_COLUMNS]


@given(rows=st.lists(ROWS, max_size=6), first_id=st.integers(0, 1 << 40))
def test_a_batch_encodes_as_each_node_alone_with_its_dependencies_once(rows, first_id):
    columns, attrs = _columns(rows)
    ids = [first_id + i for i in range(len(rows))]
    done = encode_columns(*columns, attrs, node_ids=ids)
    encode = AttrEncoder()
    alone = [
        encode_node(
            ids[i], r["name"], r["type"], list(dict.fromkeys(r["ctrl"])), list(dict.fromkeys(r["data"])),
            r["start"], r["dur"], r["inputs"], r["outputs"],
            [encode(name, r[name]) for name in ATTR_COLUMNS if r[name] is not None],
        )
        for i, r in enumerate(rows)
    ]  # fmt: skip
    assert done.payloads == alone
    assert done.repeated == sum(
        len(r["ctrl"]) - len(set(r["ctrl"])) + len(r["data"]) - len(set(r["data"])) for r in rows
    )


@given(deps=st.lists(st.integers(0, 200), max_size=150))
def test_long_dependency_lists_keep_the_first_mention_of_each_id_in_order(deps):
    done = encode_columns(["n"], [4], [deps], [[]], [0], [0], [None], [None], node_ids=[1000])
    assert list(Node.FromString(done.payloads[0]).ctrl_deps) == list(dict.fromkeys(deps))


def test_dependencies_are_mapped_and_those_not_below_the_node_are_left_out_and_counted():
    id_map = {10: 0, 20: 1, 30: 2}
    done = encode_columns(
        ["a", "b", "c"], [4, 4, 4], [[], [10, 99], [20, 30]], [[], [], [10, 10]], [0] * 3, [0] * 3,
        [None] * 3, [None] * 3, id_map=id_map, earlier_only=True,
    )  # fmt: skip
    c = Node.FromString(done.payloads[2])
    assert (list(c.ctrl_deps), list(c.data_deps)) == ([1], [0])
    assert (done.later, done.repeated) == (1, 1)  # 30 is c itself; 99 names no node written: skipped


@given(
    ids=st.lists(st.integers(0, 60), min_size=1, max_size=20, unique=True),
    deps=st.lists(st.lists(st.integers(0, 70), max_size=6), min_size=20, max_size=20),
)
def test_dependencies_mapped_through_dense_ranks_as_through_the_dict_of_the_same_ids(ids, deps):
    rows = len(ids)
    ranks = dense_ranks(ids)
    assert ranks is not None
    columns = (["n"] * rows, [4] * rows, deps[:rows], deps[::-1][:rows], [0] * rows, [0] * rows, [None] * rows)
    by_dict = encode_columns(
        *columns, [None] * rows, id_map=dict(zip(ids, range(rows), strict=True)), earlier_only=True
    )
    by_ranks = encode_columns(*columns, [None] * rows, id_map=memoryview(ranks).cast("q"), earlier_only=True)
    assert by_ranks == by_dict


def test_dense_ranks_give_each_id_its_position_and_leave_sparse_or_odd_ids_to_a_dict():
    assert list(memoryview(dense_ranks([3, 0, 5])).cast("q")) == [1, -1, -1, 0, -1, 2]
    assert dense_ranks([2, 2]) is not None and memoryview(dense_ranks([2, 2])).cast("q")[2] == 1  # the last
    assert dense_ranks([-1]) is None
    assert dense_ranks([10**9]) is None  # far more ids than nodes: an array would waste memory
    assert dense_ranks([True]) is None


@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([4, 5, 4.0, True]), st.sampled_from(["kernel", "gpu_memcpy", None]), st.integers(0, 3)
        ),
        max_size=40,
    ),
    skip=st.sampled_from([-1, 1]),
)
def test_rows_are_counted_as_a_counter_of_their_tuples_counts_them(rows, skip):
    """Equal values of other types (4, 4.0, True) are one row, as in a dict; keys in first-seen order."""
    columns = tuple(list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [])
    kept = [row for row in rows if skip < 0 or row[skip] is not None]
    found = count_rows(columns, skip)
    assert found == Counter(kept)
    assert list(found) == list(Counter(kept))


def test_rows_too_many_to_count_in_c_are_left_to_the_caller():
    assert count_rows((list(range(65)),), -1) is None
    assert count_rows((list(range(64)),), -1) == dict.fromkeys([(k,) for k in range(64)], 1)


def test_rows_end_where_a_comparison_shortens_a_column_as_zip_would_end_them():
    """The columns are read as they are, not copied (a copy was a list per column more at the peak)."""
    letters = ["a", "b", "c"]

    class Clearing:
        def __eq__(self, other):
            letters.clear()
            return False

        __hash__ = object.__hash__

    firsts = [Clearing(), Clearing(), Clearing()]
    assert list(count_rows((firsts, letters), -1).values()) == [1, 1]  # the second row cleared the letters


def test_raw_columns_append_fields_encoded_elsewhere():
    encode = AttrEncoder()
    fields = encode("comm_type", 0) + encode("comm_size", 1 << 20)
    done = encode_columns(["ar"], [7], [[]], [[]], [0], [0], [None], [None], [AttrColumn("group", [fields], RAW)])
    expected = Node(id=0, name="ar", type=7)
    set_attr(expected, "comm_type", 0)
    set_attr(expected, "comm_size", 1 << 20)
    assert done.payloads[0] == expected.SerializeToString()


@pytest.mark.parametrize("values", [[1.5, 0.25], ["a", "bc"], [[1, 2], [3]], [b"x", b"yz"]])
def test_columns_of_other_members_encode_as_set_attr_writes_them(values):
    done = encode_columns(["a", "b"], [4, 4], [[], []], [[], []], [0, 0], [0, 0], [None] * 2, [None] * 2,
                          [AttrColumn("custom", values)])  # fmt: skip
    for payload, value in zip(done.payloads, values, strict=True):
        expected = Node(id=Node.FromString(payload).id, name=Node.FromString(payload).name, type=4)
        set_attr(expected, "custom", value)
        assert payload == expected.SerializeToString()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("comm_src", 1 << 40),
        ("rf_id", 1 << 63),
        ("tensor_size", -1),
        ("tensor_size", 1 << 64),
        ("is_cpu_op", 2),
        ("op_schema", 3),
        ("rf_id", True),
        ("rf_id", 1.0),
    ],
)
def test_batch_values_the_member_cannot_hold_are_refused_as_set_attr_refuses_them(name, value):
    with pytest.raises(AttrKindError) as batch:
        encode_columns(["n"], [4], [[]], [[]], [0], [0], [None], [None], [AttrColumn(name, [value])])
    with pytest.raises(AttrKindError) as alone:
        set_attr(Node(), name, value)
    assert str(batch.value) == str(alone.value)


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="node_types has 1 rows, names has 2"):
        encode_columns(["a", "b"], [4], [[], []], [[], []], [0, 0], [0, 0], [None] * 2, [None] * 2)


@given(lists=st.lists(st.tuples(JSON_VALUES, JSON_VALUES, JSON_VALUES), min_size=1, max_size=4))
def test_io_lists_given_as_json_are_written_as_the_text_of_their_python_values(lists):
    as_json = [tuple(json.dumps(value).encode() for value in io) for io in lists]
    as_text = [tuple(str(value) for value in io) for io in lists]
    rows = len(lists)
    common = (["n"] * rows, [4] * rows, [[]] * rows, [[]] * rows, [0] * rows, [0] * rows)
    from_json = encode_columns(*common, as_json, [None] * rows, io_json=lambda raw: str(json.loads(raw)))
    assert from_json.payloads == encode_columns(*common, as_text, [None] * rows).payloads


@pytest.mark.parametrize(
    ("text", "python"), [(b"[-0, 0, 10, -7]", b"[0, 0, 10, -7]"), (b"[-0.0, 1E2]", b"[-0.0, 100.0]")]
)
def test_numbers_are_written_as_python_prints_them_not_as_the_json_spells_them(text, python):
    assert python_repr_of_json(text) == python == str(msgspec.json.decode(text)).encode()


def test_a_well_known_attribute_given_another_member_is_refused_as_set_attr_refuses_it():
    with pytest.raises(AttrKindError, match="must be written as int64_val"):
        encode_columns(["n"], [4], [[]], [[]], [0], [0], [None], [None], [AttrColumn("rf_id", [1], "uint64_val")])


@given(picks=st.lists(st.tuples(st.integers(0, 2999), st.integers(0, 2999)), min_size=1, max_size=60))
def test_io_texts_recurring_as_the_same_objects_are_written_as_each_alone(picks):
    # shapes and types recur as the very same objects (host traces keep one of each equal text); the
    # encoder keeps their text by object, and thousands of them share its slots
    texts = [json.dumps([[k % 7, k]]).encode() for k in range(3000)]
    lists = [(b"[1]", texts[a], texts[b]) for a, b in picks]
    rows = len(lists)
    common = (["n"] * rows, [4] * rows, [[]] * rows, [[]] * rows, [0] * rows, [0] * rows)
    cached = encode_columns(*common, lists, lists, io_json=lambda raw: str(json.loads(raw)))
    alone = [
        encode_columns(*(c[:1] for c in common), [io], [io], io_json=str, node_ids=[row]).payloads[0]
        for row, io in enumerate(lists)
    ]
    assert cached.payloads == alone
    expected = [str(json.loads(text)) for io in lists for text in io]
    written = [
        text
        for payload in cached.payloads
        for text in (lambda i: (i.values, i.shapes, i.types))(Node.FromString(payload).inputs)
    ]
    assert written == expected


def test_io_lists_can_be_read_from_the_fields_of_objects():
    class Lists(msgspec.Struct):
        raw_values: bytes
        raw_shapes: bytes
        raw_types: bytes

    io = Lists(b"[1, true]", b"[[2]]", b'["Int"]')
    common = (["n"], [4], [[]], [[]], [0], [0])
    from_fields = encode_columns(
        *common, [io], [None], io_json=str, io_fields=("raw_values", "raw_shapes", "raw_types")
    )
    from_tuple = encode_columns(*common, [(io.raw_values, io.raw_shapes, io.raw_types)], [None], io_json=str)
    assert from_fields.payloads == from_tuple.payloads
    assert Node.FromString(from_fields.payloads[0]).inputs.values == "[1, True]"


@given(
    times=st.lists(st.one_of(st.none(), st.floats(-1e6, 1e15), st.integers(-(10**6), 10**15)), min_size=1, max_size=8)
)
def test_float_times_are_written_rounded_as_round_rounds_them_and_negatives_as_zero(times):
    rows = len(times)
    common = (["n"] * rows, [4] * rows, [[]] * rows, [[]] * rows)
    written = encode_columns(*common, times, times, [None] * rows, [None] * rows, float_times=True)
    as_ints = [max(0, round(t)) if t is not None else 0 for t in times]
    assert written.payloads == encode_columns(*common, as_ints, as_ints, [None] * rows, [None] * rows).payloads


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_float_times_that_are_not_numbers_are_refused(bad):
    with pytest.raises(ValueError, match="cannot be written"):
        encode_columns(["n"], [4], [[]], [[]], [bad], [0], [None], [None], float_times=True)


def test_float_times_past_64_bits_are_written_as_their_int_would_be():
    # a damaged trace's 1e308 us: written as round(1e308) is, modulo 2**64, not refused mid-conversion
    common = (["n"], [4], [[]], [[]])
    huge = [1e308, 2.0**64 + 2.0**20]
    as_floats = encode_columns(*common, huge[:1], huge[1:], [None], [None], float_times=True)
    as_ints = encode_columns(*common, [round(huge[0])], [round(huge[1])], [None], [None])
    assert as_floats.payloads == as_ints.payloads
