"""The leakage check: no string of an anonymizer's input may be left in its output.

Every string the input carried (:class:`StringSet`: names, attribute texts and bytes, attribute
names dropped, IO strings, doc strings, file metadata) that is longer than :data:`MIN_CHARS`
bytes and is not just a number (sizes and shapes are kept on purpose) is searched for in the bytes
of every output file at once. The set keeps each string as a 64-bit hash and its length, indexed by
its first bytes (``chakra.share._native.Fingerprints``): a string in the output is always found,
and memory stays at about 40 bytes a distinct string.

A hit is explained when it lies inside a text field whose whole value the anonymizer generated
(``generated``: tokens, class names, group ids, registry attribute names, shapes): a random token
may happen to contain a short input string. Any other hit is a leak: in a text field, named by
file, node and field (the record is decoded to name it); across the bytes of several fields, named
by its offset, unless the string is part of a generated string. At most one leak is reported per
string and file.

Example:
    strings = StringSet()
    strings.add("aten::secret_op")
    find_leaks(strings, [Path("share/job.0.et")], generated={"t4mzq..."})    # [] when clean
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from chakra.schema.protobuf.et_def_pb2 import AttributeProto, GlobalMetadata, Node
from chakra.share._native import Fingerprints

#: Strings of this many bytes or fewer are not searched for (issue 19: "longer than 3").
MIN_CHARS = 3
#: Bytes of an output file read at a time (and the longest input string more, for a hit at the end).
SEARCH_CHUNK_BYTES = 8 << 20


class StringSet:
    """The strings of an input worth searching for (longer than :data:`MIN_CHARS` bytes, not numeric),
    as fingerprints: ``len`` counts the distinct ones, ``in`` asks for one; they cannot be listed.

    >>> strings = StringSet()
    >>> for text in ("4096", "[[16, 32]]", "abc", "real", "real"):
    ...     strings.add(text)
    >>> len(strings), "real" in strings, "abc" in strings
    (1, True, False)
    """

    def __init__(self) -> None:
        self.fingerprints = Fingerprints()
        self._marks = itertools.count(1)

    def add(self, text: str) -> None:
        self.fingerprints.add(text.encode("utf-8", "surrogatepass"))

    def add_bytes(self, data: bytes) -> None:
        """Bytes are searched for as they are."""
        self.fingerprints.add(data)

    def new_mark(self) -> int:
        """A number for one search (each search reports a string once)."""
        return next(self._marks)

    def __len__(self) -> int:
        return len(self.fingerprints)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text.encode("utf-8", "surrogatepass") in self.fingerprints


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


def _string_set(inputs: StringSet | Iterable[str]) -> StringSet:
    if isinstance(inputs, StringSet):
        return inputs
    strings = StringSet()
    for text in inputs:
        strings.add(text)
    return strings


def _generated_bytes(generated: Iterable[str]) -> set[bytes]:
    return {text.encode("utf-8", "surrogatepass") for text in generated}


def _inside_generated(data: bytes, generated: set[bytes]) -> bool:
    return any(data in text for text in generated)


def strings_in(inputs: StringSet | Iterable[str], data: bytes, generated: set[str]) -> list[str]:
    """The input strings found in ``data`` (a file that is not an ET: a model, a report) that are not
    part of a ``generated`` string, in order of first occurrence.

    >>> strings_in(["aten::secret", "matmul_big"], b'{"class": "matmul", "x": "aten::secret"}', {"matmul"})
    ['aten::secret']
    """
    strings = _string_set(inputs)
    own = _generated_bytes(generated)
    found = []
    for offset, length in sorted(strings.fingerprints.search(data, strings.new_mark())):
        text = data[offset : offset + length]
        if not _inside_generated(text, own):
            found.append(text.decode("utf-8", "replace"))
    return found


def find_leaks(
    inputs: StringSet | Iterable[str],
    outputs: list[Path],
    generated: set[str],
    *,
    progress: Callable[[int], None] | None = None,
) -> list[Leak]:
    """Every input string left in the ET files ``outputs`` (see the module's docstring), at most one
    leak per string and file; ``progress`` is told the files searched so far."""
    strings = _string_set(inputs)
    own = _generated_bytes(generated)
    exact = Fingerprints(exact=True)
    for text in own:
        exact.add(text)
    leaks: list[Leak] = []
    for done, path in enumerate(outputs, start=1):
        for offset, text, record, payload, in_text in _hits(strings, Path(path), exact):
            if in_text:
                where = _field_of(text, record, payload, own) or f"bytes at offset {offset}"
            elif _inside_generated(text, own):
                continue
            else:
                where = f"bytes at offset {offset}"
            leaks.append(Leak(text.decode("utf-8", "replace"), str(path), where))
        if progress is not None:
            progress(done)
    return leaks


def _hits(strings: StringSet, path: Path, generated: Fingerprints) -> Iterator[tuple[int, bytes, int, bytes, bool]]:
    """The unexplained hits in one ET file, a chunk at a time: (file offset, the bytes, record index,
    the record's payload, whether the bytes lie inside one text field)."""
    mark = strings.new_mark()
    lookahead = strings.fingerprints.max_len
    with open(path, "rb") as file:
        buf, base, record, eof = b"", 0, 0, False
        while not eof:
            chunk = file.read(SEARCH_CHUNK_BYTES + lookahead)
            eof = not chunk
            buf += chunk
            stop, records, hits = strings.fingerprints.search_records(buf, 0, record, eof, generated, mark)
            for offset, length, index, payload_at, payload_len, in_text in hits:
                yield (base + offset, buf[offset : offset + length], index, buf[payload_at : payload_at + payload_len],
                       in_text)  # fmt: skip
            record += records
            base += stop
            buf = buf[stop:]


def _field_of(text: bytes, record: int, payload: bytes, generated: set[bytes]) -> str | None:
    """The first text field of the record (GlobalMetadata when ``record`` is 0, else a Node) that holds
    ``text`` and is not a generated string, named; ``None`` when none does."""
    fields: list[tuple[str, str | bytes]]
    if record == 0:
        metadata = GlobalMetadata.FromString(payload)
        fields = [("metadata version", metadata.version)]
        fields += [(f"metadata {where}", value) for attr in metadata.attr for where, value in _attr_texts(attr)]
    else:
        node = Node.FromString(payload)
        fields = [(f"node {node.id} {where}", value) for where, value in _node_texts(node)]
    for where, value in fields:
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        if data and data not in generated and text in data:
            return where
    return None


def _node_texts(node: Node) -> Iterator[tuple[str, str | bytes]]:
    yield "name", node.name
    for side in ("inputs", "outputs"):
        info = getattr(node, side)
        for part in ("values", "shapes", "types"):
            yield f"{side}.{part}", getattr(info, part)
    for attr in node.attr:
        yield from _attr_texts(attr)


def _attr_texts(attr: AttributeProto) -> Iterator[tuple[str, str | bytes]]:
    yield "attribute name", attr.name
    yield f"attribute {attr.name!r} doc_string", attr.doc_string
    member = attr.WhichOneof("value")
    if member in ("string_val", "bytes_val"):
        yield f"attribute {attr.name!r}", getattr(attr, member)
    elif member in ("string_list", "bytes_list"):
        for value in getattr(attr, member).values:
            yield f"attribute {attr.name!r}", value
