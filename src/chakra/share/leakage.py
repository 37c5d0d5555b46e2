"""The leakage check: no string of an anonymizer's input may be left in its output.

Every string the input carried (:class:`StringSet`: names, attribute texts and bytes, attribute
names dropped, IO strings, doc strings, file metadata) that is longer than :data:`MIN_CHARS`
characters and is not just a number (sizes and shapes are kept on purpose) is searched for in the
bytes of every output file at once (an Aho-Corasick automaton, ``pyahocorasick``).

A hit is a leak unless it is explained by what the anonymizer wrote itself (``generated``: tokens,
class names, group ids, registry attribute names): a random token may happen to contain a short
input string. For every string that hit, the output files are decoded and each text field is
looked at: a field that contains the string and is not one the anonymizer generated is a leak,
named by file, node and field; a hit in no text field at all (raw bytes no field explains) is a
leak too, named by its offset, unless the string is part of a generated string.

Example:
    strings = StringSet()
    strings.add("aten::secret_op")
    find_leaks(strings, [Path("share/job.0.et")], generated={"t4mzq..."})    # [] when clean
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from chakra import io
from chakra.schema.protobuf.et_def_pb2 import AttributeProto, Node

#: Strings of this many characters or fewer are not searched for (issue 19: "longer than 3").
MIN_CHARS = 3
#: Text made only of digits and the punctuation of numbers and lists is a number, not a name.
NUMERIC_TEXT = re.compile(r"^[\d\s\[\]\(\),.+\-eE]*$")


class StringSet:
    """The strings of an input worth searching for (longer than :data:`MIN_CHARS`, not numeric)."""

    def __init__(self) -> None:
        self._strings: set[str] = set()

    def add(self, text: str) -> None:
        if len(text) > MIN_CHARS and text not in self._strings and not NUMERIC_TEXT.match(text):
            self._strings.add(text)

    def add_bytes(self, data: bytes) -> None:
        """Bytes are searched for as they are (as Latin-1 text: one character a byte)."""
        self.add(data.decode("latin-1"))

    def __len__(self) -> int:
        return len(self._strings)

    def __iter__(self) -> Iterator[str]:
        return iter(self._strings)


@dataclass(frozen=True)
class Leak:
    """An input string found in the output: which file, and where (a node's field, or a byte offset)."""

    text: str
    path: str
    where: str

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "path": self.path, "where": self.where}

    def __str__(self) -> str:
        return f"{self.path}: {self.where} holds {self.text!r} from the input"


def _latin1(text: str) -> str:
    """``text`` as the characters of its UTF-8 bytes read as Latin-1 (how file bytes are searched)."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def _automaton(inputs: Iterable[str]):  # type: ignore[no-untyped-def]  # pyahocorasick has no stubs
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for text in inputs:
        key = _latin1(text)
        automaton.add_word(key, (text, len(key)))
    if len(automaton) == 0:
        return None
    automaton.make_automaton()
    return automaton


def _explained(automaton, generated: set[str]) -> set[str]:  # type: ignore[no-untyped-def]
    """The input strings that occur inside a generated string (hits of them can be generated)."""
    return {text for _, (text, _) in automaton.iter(_latin1("\0".join(sorted(generated))))}


def strings_in(inputs: Iterable[str], data: bytes, generated: set[str]) -> list[str]:
    """The input strings found in ``data`` (a file that is not an ET: a model, a report) that are not
    part of a ``generated`` string, in order of first occurrence.

    >>> strings_in(["aten::secret", "matmul_big"], b'{"class": "matmul", "x": "aten::secret"}', {"matmul"})
    ['aten::secret']
    """
    automaton = _automaton(inputs)
    if automaton is None:
        return []
    explained = _explained(automaton, generated)
    found: dict[str, int] = {}
    for end, (text, length) in automaton.iter(data.decode("latin-1")):
        if text not in explained and text not in found:
            found[text] = end - length + 1
    return sorted(found, key=lambda text: found[text])


def find_leaks(inputs: Iterable[str], outputs: list[Path], generated: set[str]) -> list[Leak]:
    """Every input string left in ``outputs`` (see the module's docstring), at most one leak per
    string and file."""
    automaton = _automaton(inputs)
    if automaton is None:
        return []
    in_generated = _explained(automaton, generated)
    leaks: list[Leak] = []
    for path in outputs:
        hits: dict[str, int] = {}
        with open(path, "rb") as file:
            data = file.read().decode("latin-1")
        for end, (text, length) in automaton.iter(data):
            if text not in hits:
                hits[text] = end - length + 1
        if not hits:
            continue
        found = _field_hits(path, set(hits), generated)
        for text, offset in sorted(hits.items(), key=lambda kv: kv[1]):
            if text in found:
                leaks.append(Leak(text, str(path), found[text]))
            elif text not in in_generated:
                leaks.append(Leak(text, str(path), f"bytes at offset {offset}"))
    return leaks


def _field_hits(path: Path, texts: set[str], generated: set[str]) -> dict[str, str]:
    """For each of ``texts`` the first text field of ``path`` that holds it and is not generated."""
    found: dict[str, str] = {}
    with io.EtReader(path) as reader:
        metadata = reader.metadata
        _look(metadata.version, "metadata version", texts, generated, found)
        for attr in metadata.attr:
            for where, value in _attr_texts(attr):
                _look(value, f"metadata {where}", texts, generated, found)
        for node in reader:
            for where, value in _node_texts(node):
                _look(value, f"node {node.id} {where}", texts, generated, found)
    return found


def _look(value: str, where: str, texts: set[str], generated: set[str], found: dict[str, str]) -> None:
    if not value or value in generated:
        return
    for text in texts:
        if text not in found and text in value:
            found[text] = where


def _node_texts(node: Node) -> Iterator[tuple[str, str]]:
    yield "name", node.name
    for side in ("inputs", "outputs"):
        info = getattr(node, side)
        for part in ("values", "shapes", "types"):
            yield f"{side}.{part}", getattr(info, part)
    for attr in node.attr:
        yield from _attr_texts(attr)


def _attr_texts(attr: AttributeProto) -> Iterator[tuple[str, str]]:
    yield "attribute name", attr.name
    yield f"attribute {attr.name!r} doc_string", attr.doc_string
    member = attr.WhichOneof("value")
    if member == "string_val":
        yield f"attribute {attr.name!r}", attr.string_val
    elif member == "bytes_val":
        yield f"attribute {attr.name!r}", attr.bytes_val.decode("latin-1")
    elif member == "string_list":
        for value in attr.string_list.values:
            yield f"attribute {attr.name!r}", value
    elif member == "bytes_list":
        for data in attr.bytes_list.values:
            yield f"attribute {attr.name!r}", data.decode("latin-1")
