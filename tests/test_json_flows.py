"""chakra._json_scan.without_flows: the flow events of a piece of a Kineto event list left out before
the piece is decoded (a third of a trace, which converting never reads), counted; only where the
event decoder would have taken them, so that the text read is refused exactly where it was before."""

from __future__ import annotations

import json
from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._json_scan import without_flows
from chakra.pytorch.kineto import _FLOW_CATEGORIES, _KnownInputEvent

#: What the loader decodes each piece with, its phases and categories known.
DECODER = msgspec.json.Decoder(list[_KnownInputEvent])
FLOW_PHASES = ("s", "f", "t")


def left_out(items: list[str]) -> tuple[list[object], Counter[tuple[str, str]]] | None:
    """The decoded items of the array of ``items`` (their texts) without_flows keeps, and its counts."""
    cut = without_flows(("[" + ", ".join(items) + "]").encode(), _FLOW_CATEGORIES)
    if cut is None:
        return None
    piece, counts = cut
    return msgspec.json.decode(piece), Counter(counts)


def test_flows_are_left_out_and_counted_by_category_and_phase():
    items = [
        '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2}',
        '{"ph": "f", "id": 1, "pid": 7, "tid": 9, "ts": 4458676522709.059, "cat": "ac2g", "name": "ac2g", "bp": "e"}',
        '{"ph": "s", "id": 2, "pid": 7, "tid": "stream 7", "ts": 3, "cat": "fwdbwd", "name": "fwdbwd"}',
        '{"ph": "f", "id": 3, "cat": "ac2g"}',
    ]
    kept, counts = left_out(items)
    assert kept == [json.loads(items[0])]
    assert counts == {("ac2g", "f"): 2, ("fwdbwd", "s"): 1}


def test_a_piece_without_flows_is_given_back_as_it_is():
    piece = b'[{"ph": "X", "ts": 1}, {"ph": "i"}]'
    assert without_flows(piece, _FLOW_CATEGORIES) == (piece, {})


def test_flow_like_text_inside_another_event_is_kept():
    item = '{"ph": "X", "name": "}, {\\"ph\\": \\"f\\"}", "args": {"x": [{"ph": "f", "cat": "ac2g"}]}}'
    kept, counts = left_out([item])
    assert kept == [json.loads(item)] and not counts


def test_a_flow_the_decoder_would_refuse_or_read_otherwise_is_kept_for_it():
    refused_or_unusual = [
        '{"ph": "f", "pid": 1.5}',  # pid is an int or a str
        '{"ph": "f", "ts": "soon"}',
        '{"ph": "f", "cat": "npu_flow"}',  # a category not known: the decoder reads strings from there on
        '{"ph": "f", "ph": "f"}',  # a key twice
        '{"ph": "f", "args": {}}',  # a key that is not a flow's
        '{"ph": "f", "name": "a\\u0041"}',  # an escape
        '{"ph": "f", "tid": 1234567890123456789012}',  # an integer too long to be sure of
        '{"ph": "f", "ts": 1e400}',
        '{"ph": "f", "id": 01}',  # not JSON
    ]
    for item in refused_or_unusual:
        assert without_flows(f"[{item}]".encode(), _FLOW_CATEGORIES) == (f"[{item}]".encode(), {}), item


def test_text_that_is_not_an_array_of_complete_items_is_not_cut():
    for text in (b'[{"ph": "f"}, {"a": "open', b'[{"ph": "f"}, {"a": [1}', b'{"ph": "f"}', b'[{"ph": "f"} {"a": 1}]'):
        assert without_flows(text, _FLOW_CATEGORIES) is None, text


def test_a_missing_item_is_not_left_out_with_the_flows_around_it():
    """An empty place between commas is not JSON: leaving out the flows beside it must not hide it."""
    flow = '{"ph": "s", "cat": "ac2g"}'
    for text in (f"[{flow},]", f"[,{flow}]", f"[{flow},,{flow}]", f"[ , {flow} ]", f'[,{flow},{{"ph": "X"}}]', "[]x"):
        assert without_flows(text.encode(), _FLOW_CATEGORIES) is None, text


flow_values = {
    "ph": st.sampled_from(FLOW_PHASES),
    "cat": st.sampled_from(["ac2g", "fwdbwd", "", "npu_flow"]),
    "name": st.sampled_from(["ac2g", "fwdbwd", "é", "a\\b"]),
    "pid": st.integers(-(2**70), 2**70) | st.sampled_from(["stream 7", 1.5, None]),
    "tid": st.integers(0, 2**31) | st.just("Spans"),
    "ts": st.floats(allow_nan=False) | st.integers(0, 2**60) | st.just("x"),
    "id": st.none() | st.booleans() | st.integers(0, 2**40) | st.floats(allow_nan=False, allow_infinity=False),
    "bp": st.sampled_from(["e", None, 1]),
}
flows = st.fixed_dictionaries({"ph": flow_values["ph"]}, optional={k: v for k, v in flow_values.items() if k != "ph"})
others = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "M"]), "ts": st.floats(0, 100)},
    optional={
        "cat": st.sampled_from(["kernel", "cpu_op"]),
        "name": st.sampled_from(['}, {"ph": "f"}', "aten::mm"]),
        "args": st.fixed_dictionaries(
            {}, optional={"correlation": st.integers(0, 9), "flows": st.lists(flows, max_size=2)}
        ),
    },
)
events = st.lists(flows | others, max_size=10)


@settings(max_examples=400, deadline=None)
@given(events, st.sampled_from([None, 1]))
def test_the_events_decoded_are_those_of_the_whole_piece_but_the_flows_counted(events, indent):
    text = json.dumps(events, indent=indent).encode()
    piece, counts = without_flows(text, _FLOW_CATEGORIES)
    assert _decodes(text) == _decodes(piece)  # refused exactly where it was
    if _decodes(text):
        whole, kept = DECODER.decode(text), DECODER.decode(piece)
        missing = _left_out_of(whole, kept)
        assert Counter((str(e.cat), str(e.ph)) for e in missing) == counts
        assert all(str(e.ph) in FLOW_PHASES for e in missing)


@settings(max_examples=400, deadline=None)
@given(events, st.data())
def test_a_damaged_piece_is_not_made_readable_by_leaving_flows_out(events, data):
    text = bytearray(json.dumps(events).encode())
    at = data.draw(st.integers(0, len(text)))
    if data.draw(st.booleans()) and at < len(text):
        del text[at]
    else:
        text[at:at] = data.draw(st.sampled_from([b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"1", b" "]))
    cut = without_flows(bytes(text), _FLOW_CATEGORIES)
    if cut is not None and _decodes(cut[0]):
        assert _decodes(bytes(text))
        assert len(DECODER.decode(bytes(text))) - len(DECODER.decode(cut[0])) == sum(cut[1].values())


@settings(max_examples=400, deadline=None)
@given(
    st.lists(flows | others, max_size=6),
    st.lists(st.sampled_from([",", ", ", ",,", " , ", ", ,", ""]), min_size=7, max_size=7),
    st.sampled_from(["", ",", " , "]),
    st.sampled_from(["", ",", " ,"]),
)
def test_a_piece_with_separators_missing_or_doubled_is_refused_as_it_was(events, separators, head, tail):
    """Leaving flows out must not leave out the fault beside them: "[F,]" or "[F,,X]" stay refused."""
    body = "".join(
        json.dumps(event) + separator for event, separator in zip(events, separators[: len(events)], strict=True)
    )
    text = f"[{head}{body}{tail}]".encode()
    cut = without_flows(text, _FLOW_CATEGORIES)
    if cut is not None and _decodes(cut[0]):
        assert _decodes(text)
        assert len(DECODER.decode(text)) - len(DECODER.decode(cut[0])) == sum(cut[1].values())


def _left_out_of(whole: list[_KnownInputEvent], kept: list[_KnownInputEvent]) -> list[_KnownInputEvent]:
    """The events of ``whole`` that are not in ``kept``, which must hold the others in their order."""
    missing, at = [], 0
    for event in whole:
        if at < len(kept) and kept[at] == event:
            at += 1
        else:
            missing.append(event)
    assert at == len(kept), "the events kept are not those of the piece, in order"
    return missing


def _decodes(text: bytes | bytearray) -> bool:
    try:
        DECODER.decode(text)
    except msgspec.DecodeError:
        return False
    return True
