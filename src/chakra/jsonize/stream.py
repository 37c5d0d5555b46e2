"""Streaming reader of the JSON text forms: message objects one at a time, with exact error positions.

Reads our document form ``{"globalMetadata": {...}, "nodes": [...]}``, JSON Lines and upstream's
``MessageToJson`` objects back to back, plain or ``.gz``/``.zst``. Memory is bounded by the largest
single message (a node), however long the file. Errors name the line and column (1-based, in
characters) and the byte offset of the decompressed text.

Examples:
    from chakra.jsonize import stream
    for message in stream.iter_json_messages("llama.0.json"):
        print(message.get("name"))
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from chakra import io
from chakra.errors import ChakraFormatError
from chakra.jsonize.mapping import DOC_METADATA_KEY, DOC_NODES_KEY

#: Bytes read (and decoded to text) per refill of the streaming JSON reader.
JSON_READ_CHUNK_CHARS = 1 << 20

#: Longest line the streaming JSON reader hands to orjson whole; a longer value is parsed by
#: ``json.JSONDecoder.raw_decode`` instead (nodes are far shorter; see :meth:`_JsonText.value`).
JSON_FAST_LINE_CHARS = 1 << 16

#: How far into the text the first key of the document form is looked for.
JSON_DETECT_CHARS = 1 << 16

#: A JSON syntax error this close to the end of the buffered text may just be a value cut by the
#: buffer boundary (a literal, a number or a ``\\uXXXX`` escape is shorter), so more text is read.
JSON_TAIL_SLACK_CHARS = 32

#: JSON's whitespace characters.
_WS_CHARS = " \t\n\r"
_WS = re.compile(f"[{_WS_CHARS}]*")
#: How our document form starts (its first key); anything else is read as objects back to back.
_DOCUMENT_START = re.compile(rf'\{{[{_WS_CHARS}]*"(?:{DOC_METADATA_KEY}|{DOC_NODES_KEY})"')
_UTF8_BOM = "\ufeff"


def _utf8_len(text: str) -> int:
    """Bytes of ``text`` in the UTF-8 file it was decoded from."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _JsonText:
    """Incremental reader of JSON values from a text file, with line/column/byte positions for errors.

    Values are parsed one at a time, so memory is bounded by the largest single value (a node):
    a value that ends its line is parsed by orjson (our own document and JSON Lines layouts), any
    other by ``json.JSONDecoder.raw_decode`` (indented or concatenated objects).
    """

    def __init__(self, path: io.PathLike):
        self.path = Path(path)
        self._stream, _ = io.open_decompressed(self.path, what="a JSON file")
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._raw_decode = json.JSONDecoder().raw_decode
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._started = False
        self._line_base = 0  # newlines before buf[0]
        self._col_base = 0  # characters between the last newline and buf[0]
        self._byte_base = 0  # bytes of the decoded stream before buf[0]
        self._bytes_read = 0  # bytes of the (decompressed) stream read so far
        self._dropped_chars = 0  # characters before buf[0]: absolute position = _dropped_chars + pos

    def close(self) -> None:
        self._stream.close()

    # -- buffer ----------------------------------------------------------------------------
    def _read_more(self, want_chars: int | None = None) -> bool:
        """Drop the consumed text and append at least ``want_chars`` more (default: one chunk).

        Returns False at end of file (nothing more to read)."""
        if self.eof:
            return False
        chunk_chars = JSON_READ_CHUNK_CHARS  # read at call time, so tests can shrink it
        want_chars = want_chars or chunk_chars
        if self.pos:
            dropped = self.buf[: self.pos]
            newlines = dropped.count("\n")
            self._line_base += newlines
            last = dropped.rfind("\n")
            self._col_base = len(dropped) - last - 1 if last >= 0 else self._col_base + len(dropped)
            self._byte_base += _utf8_len(dropped)
            self._dropped_chars += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        pieces = [self.buf]
        got = 0
        while got < want_chars:
            pending = len(self._decoder.getstate()[0])  # bytes of a character cut by the last chunk
            try:
                chunk = self._stream.read(max(want_chars - got, chunk_chars))
            except io.DECOMPRESS_ERRORS as exc:
                raise ChakraFormatError(
                    f"cannot decompress: {exc}",
                    path=self.path,
                    offset=self._bytes_read,
                    hint="the compressed file is truncated or corrupt",
                ) from None
            self._bytes_read += len(chunk)
            try:
                text = self._decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                raise ChakraFormatError(
                    f"not UTF-8 text ({exc.reason})",
                    path=self.path,
                    offset=self._bytes_read - len(chunk) - pending + exc.start,
                    hint="JSON files must be UTF-8; is this a binary .et file? (use jsonize for .et -> JSON)",
                ) from None
            if not self._started and (text or not chunk):
                self._started = True
                if text.startswith(_UTF8_BOM):
                    text = text[1:]
                    self._byte_base += _utf8_len(_UTF8_BOM)
            pieces.append(text)
            got += len(text)
            if not chunk:
                self.eof = True
                break
        self.buf = "".join(pieces)
        return got > 0

    def peek(self) -> str | None:
        """The next non-whitespace character (``pos`` moves onto it), None at end of file."""
        buf, pos = self.buf, self.pos
        if pos < len(buf) and buf[pos] not in _WS_CHARS:  # already on it (a ',' after a node): no regex
            return buf[pos]
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._read_more():
                return None

    # -- values ----------------------------------------------------------------------------
    def value(self, node_index: int | None) -> Any:
        """Parse the JSON value at ``pos`` (after :meth:`peek`) and move past it.

        Fast path: the value ends its line (our layouts), so orjson parses the line. Lines longer
        than ``JSON_FAST_LINE_CHARS`` (e.g. a whole document on one line) go to ``raw_decode``,
        so no text is scanned or copied more than a bounded number of times.
        """
        limit = JSON_FAST_LINE_CHARS
        newline = self.buf.find("\n", self.pos, self.pos + limit)
        while newline < 0 and not self.eof and len(self.buf) - self.pos < limit:
            searched = len(self.buf) - self.pos
            self._read_more()
            newline = self.buf.find("\n", self.pos + searched, self.pos + limit)
        if newline < 0:
            if len(self.buf) - self.pos >= limit:
                return self._slow_value(node_index)
            newline = len(self.buf)  # end of file ends the last line
        end = newline
        buf = self.buf
        while end > self.pos and buf[end - 1] in " \t\r":
            end -= 1
        if end > self.pos and buf[end - 1] == ",":
            end -= 1
        try:
            result = orjson.loads(buf[self.pos : end])
        except orjson.JSONDecodeError:
            return self._slow_value(node_index)
        self.pos = end
        return result

    def _slow_value(self, node_index: int | None) -> Any:
        while True:
            try:
                result, end = self._raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - JSON_TAIL_SLACK_CHARS or exc.msg.startswith("Unterminated")
                if cut and self._read_more(max(len(self.buf), JSON_READ_CHUNK_CHARS)):
                    continue
                raise self.error(f"invalid JSON: {exc.msg}", exc.pos, node_index) from None
            except RecursionError:
                raise self.error("invalid JSON: nested too deeply", self.pos, node_index) from None
            # a number or literal that ends the buffer may continue in the next chunk
            if end == len(self.buf) and not self.eof and self.buf[end - 1] not in '}]"' and self._read_more():
                continue
            self.pos = end
            return result

    def string(self, node_index: int | None) -> str:
        """A JSON string at ``pos`` (an object key)."""
        value = self.value(node_index) if self.buf.startswith('"', self.pos) else None
        if not isinstance(value, str):
            raise self.error("expected a string key", self.pos, node_index)
        return value

    def expect(self, chars: str, what: str, node_index: int | None) -> str:
        """Consume one of ``chars`` (after whitespace) and return it, or raise naming ``what``."""
        char = self.peek()
        if char is None or char not in chars:
            found = "end of file" if char is None else repr(char)
            raise self.error(f"invalid JSON: expected {what}, found {found}", self.pos, node_index)
        self.pos += 1
        return char

    # -- errors ----------------------------------------------------------------------------
    def error(self, message: str, pos: int, node_index: int | None, hint: str | None = None) -> ChakraFormatError:
        """A ChakraFormatError at ``buf[pos]``: line and column (1-based, in characters) and byte offset."""
        buf = self.buf
        line = self._line_base + buf.count("\n", 0, pos) + 1
        last = buf.rfind("\n", 0, pos)
        column = pos - last if last >= 0 else self._col_base + pos + 1
        offset = self._byte_base + _utf8_len(buf[:pos])
        return ChakraFormatError(
            f"{message} (line {line}, column {column})",
            path=self.path,
            offset=offset,
            node_index=node_index,
            hint=hint or "the JSON is damaged or truncated; regenerate it with `chakra jsonize`",
        )

    # -- layouts ---------------------------------------------------------------------------
    def is_document(self) -> bool:
        """Whether the text is our document form: an object whose first key is globalMetadata or nodes."""
        if self.peek() != "{":
            return False
        # the first key must be buffered whole: read on until its closing quote (or give up)
        while (
            self.buf.count('"', self.pos, self.pos + JSON_DETECT_CHARS) < 2
            and len(self.buf) - self.pos < JSON_DETECT_CHARS
            and self._read_more()
        ):
            pass
        return _DOCUMENT_START.match(self.buf, self.pos) is not None

    def message(self, node_index: int | None, hint: str | None = None) -> dict[str, Any]:
        """The JSON object at ``pos`` (after :meth:`peek`): node ``node_index``, or the GlobalMetadata for None."""
        start = self._dropped_chars + self.pos  # absolute: value() may drop consumed text
        value = self.value(node_index)
        if type(value) is not dict:
            what = "the GlobalMetadata" if node_index is None else "a node"
            raise self.error(
                f"expected {what} object, got {type(value).__name__}", start - self._dropped_chars, node_index, hint
            )
        return value

    def stream_messages(self) -> Iterator[dict[str, Any]]:
        """Objects back to back (JSON Lines or upstream concatenated): metadata first, then nodes."""
        index: int | None = None
        while self.peek() is not None:
            yield self.message(index, hint="each message is one JSON object")
            index = 0 if index is None else index + 1

    def document_messages(self) -> Iterator[dict[str, Any]]:
        """The document form, streamed: the globalMetadata object, then every element of nodes."""
        self.expect("{", "'{'", None)
        seen: set[str] = set()
        while True:
            self.peek()
            key_pos = self.pos
            key = self.string(None)
            self.expect(":", "':' after a key", None)
            if key in seen:
                raise self.error(f"key {key!r} given twice", key_pos, None)
            seen.add(key)
            if key == DOC_METADATA_KEY:
                self.peek()
                metadata = self.value(None)
                if type(metadata) is not dict:
                    raise self.error("globalMetadata must be an object", key_pos, None)
                yield metadata
            elif key == DOC_NODES_KEY:
                if DOC_METADATA_KEY not in seen:
                    raise self.error(
                        "nodes come before globalMetadata",
                        key_pos,
                        None,
                        hint=f'put "{DOC_METADATA_KEY}" first (jsonize writes it so)',
                    )
                yield from self._document_nodes()
            else:
                raise self.error(
                    f"unknown top-level key {key!r}",
                    key_pos,
                    None,
                    hint=f'the document has only "{DOC_METADATA_KEY}" and "{DOC_NODES_KEY}"',
                )
            if self.expect(",}", "',' or '}'", None) == "}":
                break
        if self.peek() is not None:
            raise self.error("invalid JSON: extra data after the document", self.pos, None)

    def _document_nodes(self) -> Iterator[dict[str, Any]]:
        self.expect("[", "'[' (the nodes list)", 0)
        index = 0
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            self.peek()
            yield self.message(index)
            index += 1
            if self.expect(",]", "',' or ']' in the nodes list", index) == "]":
                return


def iter_json_messages(src: io.PathLike) -> Iterator[dict[str, Any]]:
    """Stream the message objects of any supported JSON form: the metadata dict, then each node dict.

    Forms: our document, JSON Lines, upstream concatenated ``MessageToJson`` objects; plain or
    ``.gz``/``.zst``. Raises :class:`ChakraFormatError` with line, column and byte offset for bad JSON.
    """
    text = _JsonText(src)
    try:
        if text.peek() is None:
            raise ChakraFormatError(
                "file is empty: expected JSON", path=text.path, hint="write it with `chakra jsonize` or chakra_jsonizer"
            )
        messages = text.document_messages() if text.is_document() else text.stream_messages()
        yield from messages
    finally:
        text.close()
