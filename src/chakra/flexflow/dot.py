"""The part of Graphviz's DOT language FlexFlow writes, read with positions for every error.

FlexFlow's task graphs and computation graphs (and upstream Chakra's labelled task graphs) are
``digraph NAME { ... }`` files of node statements ``nodeN [key=value,...];`` and edge statements
``nodeA -> nodeB;``, with record labels ``"{ a | b | { c | d } }"``. :func:`read_dot` reads the
DOT grammar's statements (node, edge chains, ``subgraph`` blocks, graph/node/edge defaults and
``key = value`` statements, whose contents are not needed and are skipped), quoted and bare IDs,
and ``//``, ``/* */`` and ``#`` comments. :func:`parse_record` splits a record label into its
nested fields. Every mistake is a :class:`~chakra.errors.ChakraInputError` naming the file, line and
column.

Example:
    >>> graph = parse_dot('digraph g { n0 [label="{ a | { 1 | 2 } }"]; n0 -> n1; }', "g.dot")
    >>> [(n.name, n.attrs.get("label", "")) for n in graph.nodes], [(e.source, e.target) for e in graph.edges]
    ([('n0', '{ a | { 1 | 2 } }'), ('n1', '')], [('n0', 'n1')])
    >>> parse_record("{ a | { 1 | 2 } }")
    ['a', ['1', '2']]
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from chakra._dot import plain_statements
from chakra.errors import ChakraInputError, PathLike

#: Tokens: comments and white space (skipped), quoted strings, the edge operators, punctuation, bare IDs.
_TOKEN = re.compile(
    r"""(?P<skip>\s+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
      | (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<arrow>->|--)
      | (?P<punct>[{}\[\]=;,:])
      | (?P<id>[A-Za-z0-9_.\-\u0080-\U0010ffff]+)
      | (?P<html><)""",
    re.VERBOSE | re.DOTALL,
)
_UNCLOSED = re.compile(r'"|/\*')
FIX_HINT = "fix the graph file"


def position_error(path: PathLike, line: int, column: int, message: str, hint: str = FIX_HINT) -> ChakraInputError:
    """``PATH: line L, column C: message (hint: ...)``."""
    return ChakraInputError(f"line {line}, column {column}: {message}", path=path, hint=hint)


@dataclass(slots=True)
class DotNode:
    """A node statement (or a node first named by an edge): its attributes, and where it was first seen."""

    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    line: int = 0
    column: int = 0


class DotEdge(NamedTuple):
    """An edge statement (one edge of a chain) and where it was written."""

    source: str
    target: str
    line: int
    column: int


@dataclass
class DotGraph:
    """The nodes in the order they were first named and the edges in file order, as columns (a task
    graph holds hundreds of thousands of each): the nodes' ``names``, ``attrs`` and ``node_at`` (rows
    of line, column), and ``edge_rows`` (rows of source, target, line, column; the ends as indices of
    nodes). :attr:`nodes` and :attr:`edges` make an object of each."""

    path: str
    names: list[str]
    attrs: list[dict[str, str]]
    node_at: np.ndarray  # (nodes, 2) int64
    edge_rows: np.ndarray  # (edges, 4) int64

    @classmethod
    def of(cls, path: str, nodes: list[DotNode], edges: list[DotEdge]) -> DotGraph:
        """The graph of node and edge objects (the Python readers')."""
        index = {node.name: i for i, node in enumerate(nodes)}
        node_at = np.array([(node.line, node.column) for node in nodes], dtype=np.int64).reshape(-1, 2)
        edge_rows = np.array(
            [(index[e.source], index[e.target], e.line, e.column) for e in edges], dtype=np.int64
        ).reshape(-1, 4)
        return cls(path, [node.name for node in nodes], [node.attrs for node in nodes], node_at, edge_rows)

    @property
    def nodes(self) -> list[DotNode]:
        at = self.node_at.tolist()
        return [DotNode(name, attrs, *where) for name, attrs, where in zip(self.names, self.attrs, at, strict=True)]

    @property
    def edges(self) -> list[DotEdge]:
        names = self.names
        return [DotEdge(names[a], names[b], line, column) for a, b, line, column in self.edge_rows.tolist()]


class _Token(NamedTuple):
    kind: str
    text: str
    offset: int


class _Lines:
    """Line and column (from 1) of an offset in a text."""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


def read_dot(path: PathLike) -> DotGraph:
    """Read a DOT file (UTF-8)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ChakraInputError(
            f"not a text file (byte {error.start} is not UTF-8)", path=path, hint="give the .dot file FlexFlow wrote"
        ) from None
    except OSError as error:
        raise ChakraInputError(f"cannot read it: {error.strerror}", path=path) from None
    return parse_dot(text, str(path))


def parse_dot(text: str, path: str) -> DotGraph:
    """Parse DOT text (``path`` names it in errors)."""
    plain = plain_statements(text)  # FlexFlow's own statements, read in C
    if plain is not None:
        names, attrs, node_at, edge_rows = plain
        return DotGraph(
            path, names, attrs, np.frombuffer(node_at, np.int64).reshape(-1, 2),
            np.frombuffer(edge_rows, np.int64).reshape(-1, 4),
        )  # fmt: skip
    lines = _Lines(text)
    return _regular(text, path, lines) or _Parser(_tokens(text, path, lines), path, lines).graph()


#: The statements FlexFlow writes, a whole file of which is read by regular expressions at once
#: (by ``chakra._dot.plain_statements`` in C where the text is ASCII, as these expressions read it);
#: anything else (comments, subgraphs, a mistake) takes the token parser and its errors.
_HEADER = re.compile(r"\s*digraph\s+[\w.]*\s*\{")
_STATEMENT = re.compile(
    r"""\s*(?:(?P<source>[\w.]+)\s*->\s*(?P<target>[\w.]+)\s*;
      | (?P<node>[\w.]+)\s*\[(?P<attrs>(?:[^\]"]|"(?:[^"\\]|\\.)*")*)\]\s*;)""",
    re.VERBOSE,
)
_ATTRIBUTE = re.compile(r'\s*(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,"\s]+)\s*(?:,|$)')
_ESCAPED = re.compile(r'\\(["\\])')
_FOOTER = re.compile(r"\s*\}\s*")


def _regular(text: str, path: str, lines: _Lines) -> DotGraph | None:
    """The graph of a file made only of FlexFlow's own statements, or ``None``."""
    header = _HEADER.match(text)
    if header is None:
        return None
    nodes: dict[str, DotNode] = {}
    edges: list[DotEdge] = []
    pos = header.end()
    for match in _STATEMENT.finditer(text, pos):
        if match.start() != pos:
            return None
        pos = match.end()
        if match["source"] is not None:
            where = lines(match.start("source"))
            for name in (match["source"], match["target"]):
                if name not in nodes:
                    nodes[name] = DotNode(name, {}, *where)
            edges.append(DotEdge(match["source"], match["target"], *where))
            continue
        attrs = {}
        at, body = 0, match["attrs"]
        for attribute in _ATTRIBUTE.finditer(body):
            if attribute.start() != at:
                return None
            value = attribute[2]
            if value.startswith('"'):
                value = _ESCAPED.sub(r"\1", value[1:-1]) if "\\" in value else value[1:-1]
            attrs[attribute[1]] = value
            at = attribute.end()
        if at != len(body) and body[at:].strip():
            return None
        name = match["node"]
        node = nodes.setdefault(name, DotNode(name))
        node.line, node.column = lines(match.start("node"))
        node.attrs.update(attrs)
    return DotGraph.of(path, list(nodes.values()), edges) if _FOOTER.fullmatch(text, pos) else None


def _tokens(text: str, path: str, lines: _Lines) -> list[_Token]:
    tokens: list[_Token] = []
    append = tokens.append
    pos = 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if match.start() != pos or kind == "html":
            break
        if kind != "skip":
            append(_Token(kind or "", match.group(), pos))
        pos = match.end()
    if pos != len(text):
        unclosed = _UNCLOSED.match(text, pos)
        what = (
            "a quoted string or comment that is never closed"
            if unclosed
            else "HTML labels (<...>) are not read"
            if text[pos] == "<"
            else f"{text[pos]!r} is not part of DOT"
        )
        raise position_error(path, *lines(pos), what)
    append(_Token("end", "", pos))
    return tokens


def _unquote(token: _Token) -> str:
    if token.kind != "string":
        return token.text
    return re.sub(r'\\(["\\])', r"\1", token.text[1:-1]).replace("\\\n", "")


class _Parser:
    def __init__(self, tokens: list[_Token], path: str, lines: _Lines):
        self.tokens = tokens
        self.at = 0
        self.path = path
        self.lines = lines
        self.nodes: dict[str, DotNode] = {}
        self.edges: list[DotEdge] = []

    # -- helpers -----------------------------------------------------------------------------------
    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def error(self, token: _Token, message: str, hint: str = FIX_HINT) -> ChakraInputError:
        return position_error(self.path, *self.lines(token.offset), message, hint)

    def expect(self, text: str, what: str) -> _Token:
        token = self.take()
        if token.text != text or token.kind == "string":
            found = "the end of the file" if token.kind == "end" else repr(token.text)
            raise self.error(token, f"expected {text!r} {what}, found {found}")
        return token

    def identifier(self, what: str) -> _Token:
        token = self.take()
        if token.kind not in ("id", "string"):
            found = "the end of the file" if token.kind == "end" else repr(token.text)
            raise self.error(token, f"expected {what}, found {found}")
        return token

    # -- grammar -----------------------------------------------------------------------------------
    def graph(self) -> DotGraph:
        first = self.peek()
        if first.text.lower() == "strict":
            self.take()
        kind = self.identifier("'digraph' at the start of the file")
        if kind.text.lower() not in ("digraph", "graph"):
            raise self.error(kind, f"expected 'digraph' at the start of the file, found {kind.text!r}")
        if self.peek().text != "{":
            self.identifier("the graph's name")
        opening = self.expect("{", "to open the graph")
        self.statements(opening)
        end = self.peek()
        if end.kind != "end":
            raise self.error(end, f"{end.text!r} after the graph's closing brace")
        return DotGraph.of(self.path, list(self.nodes.values()), self.edges)

    def statements(self, opening: _Token) -> None:
        while True:
            token = self.peek()
            if token.kind == "end":
                raise self.error(
                    opening,
                    "this '{' is never closed (unbalanced braces)",
                    hint="add the missing '}' or remove this one",
                )
            if token.text == "}" and token.kind == "punct":
                self.take()
                return
            if token.text == ";" and token.kind == "punct":
                self.take()
                continue
            self.statement()

    def statement(self) -> None:
        token = self.peek()
        if token.kind == "punct" and token.text == "{":
            self.statements(self.take())  # an anonymous subgraph
            return
        first = self.identifier("a node, an edge or '}'")
        word = first.text.lower() if first.kind == "id" else ""
        if word == "subgraph":
            if self.peek().text != "{":
                self.identifier("the subgraph's name")
            self.statements(self.expect("{", "to open the subgraph"))
            return
        if word in ("graph", "node", "edge") and self.peek().text == "[":
            self.attributes()
            return
        if self.peek().text == "=" and self.peek().kind == "punct":
            self.take()
            self.identifier("a value after '='")
            return
        self.port()
        if self.peek().kind == "arrow":
            self.edge_chain(first)
        else:
            node = self.add_node(first)
            node.line, node.column = self.lines(first.offset)  # errors about a node point at its statement
            node.attrs.update(self.attributes())

    def port(self) -> None:
        while self.peek().text == ":" and self.peek().kind == "punct":
            self.take()
            self.identifier("a port after ':'")

    def edge_chain(self, first: _Token) -> None:
        ends = [first]
        while self.peek().kind == "arrow":
            self.take()
            ends.append(self.identifier("a node after '->'"))
            self.port()
        self.attributes()
        for source, target in itertools.pairwise(ends):
            self.add_node(source)
            self.add_node(target)
            self.edges.append(DotEdge(_unquote(source), _unquote(target), *self.lines(source.offset)))

    def add_node(self, token: _Token) -> DotNode:
        name = _unquote(token)
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = DotNode(name, {}, *self.lines(token.offset))
        return node

    def attributes(self) -> dict[str, str]:
        attrs: dict[str, str] = {}
        while self.peek().text == "[" and self.peek().kind == "punct":
            opening = self.take()
            while True:
                token = self.peek()
                if token.kind == "end":
                    raise self.error(opening, "this '[' is never closed", hint="add the missing ']'")
                if token.text == "]" and token.kind == "punct":
                    self.take()
                    break
                if token.text in (",", ";") and token.kind == "punct":
                    self.take()
                    continue
                key = self.identifier("an attribute name")
                self.expect("=", f"after the attribute {_unquote(key)!r}")
                attrs[_unquote(key)] = _unquote(self.identifier(f"the value of {_unquote(key)!r}"))
        return attrs


#: A record label's pieces: an escaped character, a brace or bar, a run of plain text, a backslash that ends it.
_RECORD_TOKEN = re.compile(r"\\(.)|([{}|])|([^\\{}|]+)|(\\)", re.DOTALL)
#: A field's port (``<p>``), dropped.
_PORT = re.compile(r"^\s*<[^>]*>")


def parse_record(label: str) -> list:  # type: ignore[type-arg]  # nested lists of str
    r"""The fields of a record label, nested as its braces nest (:class:`ValueError` when they do not balance).

    Field text is stripped; ``\|``, ``\{``, ``\}`` and ``\\`` stand for the characters; a port
    (``<p>``) is dropped.

    >>> parse_record(r"{ seg 0 from a\|b to c | Comm | { 1.5 | 2 } }")
    ['seg 0 from a|b to c', 'Comm', ['1.5', '2']]
    """
    stack: list[list] = [[]]  # type: ignore[type-arg]
    field_text: list[str] = []
    closed: list | None = None  # type: ignore[type-arg]  # a nested record that just ended

    def end_field() -> None:
        nonlocal closed
        if closed is not None:
            stack[-1].append(closed)
            closed = None
        else:
            text = "".join(field_text)
            stack[-1].append((_PORT.sub("", text) if "<" in text else text).strip())
        field_text.clear()

    # runs of plain text at once: a character at a time was most of reading a computation graph
    for escaped, special, plain, lone in _RECORD_TOKEN.findall(label):
        if special == "{":
            stack.append([])
            field_text.clear()
        elif special == "}":
            if len(stack) == 1:
                raise ValueError("unbalanced braces")
            end_field()
            closed = stack.pop()
        elif special == "|":
            end_field()
        else:
            field_text.append(plain or escaped or lone)
    if len(stack) != 1:
        raise ValueError("unbalanced braces")
    end_field()
    fields = stack[0]
    if len(fields) == 1 and isinstance(fields[0], list):
        return fields[0]
    return fields
