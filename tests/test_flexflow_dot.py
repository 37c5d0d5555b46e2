"""FlexFlow's plain DOT statements read in C (chakra._dot) are what the regular expressions of
chakra.flexflow.dot read, and a file of any other form is left to them; a record label's fields are
what reading it a character at a time gives."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra._dot import plain_statements
from chakra.flexflow.dot import _Lines, _regular, parse_dot, parse_record


def _as_tuples(text: str):
    """What the regular expressions read, in plain_statements' form (None: not of the plain form)."""
    graph = _regular(text, "g.dot", _Lines(text))
    if graph is None:
        return None
    return graph.names, graph.attrs, graph.node_at.tobytes(), graph.edge_rows.tobytes()


_spaces = st.sampled_from(["", " ", "  ", "\n", "\t", " \n ", "\r\n"])
_names = st.sampled_from(["node0", "node1", "n.2", "_x", "a"])
_values = st.one_of(
    st.sampled_from(["1", "1.5", "x_y", "{a|b}"]),
    st.builds(
        lambda s: '"' + s + '"', st.sampled_from(["", "{ a | b }", 'say \\"hi\\"', "back\\\\slash", "new\nline", "\\n"])
    ),
)
_attribute = st.builds(
    lambda k, a, v, b: f"{k}{a}={b}{v}", st.sampled_from(["label", "shape", "x1"]), _spaces, _values, _spaces
)


@st.composite
def _statement(draw) -> str:
    s1, s2, s3 = draw(_spaces), draw(_spaces), draw(_spaces)
    if draw(st.booleans()):
        return f"{s1}{draw(_names)}{s2}->{s3}{draw(_names)}{draw(_spaces)};"
    attributes = draw(st.lists(_attribute, max_size=3))
    separator = draw(st.sampled_from([",", ", ", " ,"]))
    trailing = draw(st.sampled_from(["", ",", " "] if attributes else ["", " "]))
    return f"{s1}{draw(_names)}{s2}[{separator.join(attributes)}{trailing}]{s3};"


@st.composite
def _plain_text(draw) -> str:
    statements = draw(st.lists(_statement(), max_size=6))
    name = draw(st.sampled_from(["", "g", "taskgraph.1"]))
    return f"{draw(_spaces)}digraph {name}{draw(_spaces)}{{{''.join(statements)}{draw(_spaces)}}}{draw(_spaces)}"


@settings(max_examples=300, deadline=None)
@given(text=_plain_text())
def test_a_file_of_plain_statements_is_read_in_c_as_the_expressions_read_it(text):
    expected = _as_tuples(text)
    assert expected is not None and plain_statements(text) == expected


#: Pieces that break the plain form somewhere (or only look as if they might).
_breakers = st.sampled_from(
    ["//c\n", "/* c */", "#c\n", "subgraph s { }", "a -> b -> c;", "[", "]", '"', "\\", ";", "{", "}", "=", ",",
     "a [label=];", "a [=1];", "a [x=1 y=2];", "\f", "\x1c", "é", "->", "a -> ;", "node a;", "a [x=\"q\\\nz\"];"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(text=_plain_text(), breaker=_breakers, at=st.floats(0, 1))
def test_a_file_of_another_form_is_read_in_c_as_the_expressions_read_it_or_left_to_them(text, breaker, at):
    cut = int(at * len(text))
    text = text[:cut] + breaker + text[cut:]
    found = plain_statements(text)
    if found is not None:
        assert found == _as_tuples(text)


def test_a_flexflow_file_read_in_c_gives_the_graph_with_positions():
    graph = parse_dot(
        'digraph taskgraph {\nnode0 [label="{ fc | FORWARD | { 0 | 1.5 } }"];\nnode0 -> node1;\n}', "g.dot"
    )
    assert [(n.name, n.line, n.column) for n in graph.nodes] == [("node0", 2, 1), ("node1", 3, 1)]
    assert graph.nodes[0].attrs == {"label": "{ fc | FORWARD | { 0 | 1.5 } }"}
    assert [tuple(e) for e in graph.edges] == [("node0", "node1", 3, 1)]


def _record_a_character_at_a_time(label: str) -> list:  # type: ignore[type-arg]
    """parse_record's rule written out a character at a time (ValueError for unbalanced braces)."""
    stack: list[list] = [[]]  # type: ignore[type-arg]
    text: list[str] = []
    closed: list | None = None  # type: ignore[type-arg]

    def end_field() -> None:
        nonlocal closed
        stack[-1].append(closed if closed is not None else re.sub(r"^\s*<[^>]*>", "", "".join(text)).strip())
        closed = None
        text.clear()

    i = 0
    while i < len(label):
        char = label[i]
        if char == "\\" and i + 1 < len(label):
            text.append(label[i + 1])
            i += 2
            continue
        if char == "{":
            stack.append([])
            text.clear()
        elif char == "}":
            if len(stack) == 1:
                raise ValueError("unbalanced braces")
            end_field()
            closed = stack.pop()
        elif char == "|":
            end_field()
        else:
            text.append(char)
        i += 1
    if len(stack) != 1:
        raise ValueError("unbalanced braces")
    end_field()
    return stack[0][0] if len(stack[0]) == 1 and isinstance(stack[0][0], list) else stack[0]


@settings(max_examples=400, deadline=None)
@given(label=st.text(alphabet=st.sampled_from("{}|\\<> ab\n1."), max_size=24))
def test_a_record_label_is_read_as_a_character_at_a_time_reads_it(label):
    try:
        expected = _record_a_character_at_a_time(label)
    except ValueError:
        with pytest.raises(ValueError, match="unbalanced"):
            parse_record(label)
        return
    assert parse_record(label) == expected
