"""File to file: ``.et`` -> JSON (:func:`jsonize`) and JSON -> ``.et`` (:func:`dejsonize`), streamed.

Both run in constant memory (one batch of nodes, or one JSON node, at a time) and write their
output atomically. The forms are described in :mod:`chakra.jsonize`.

Examples:
    jsonize("llama.0.et", "llama.0.jsonl.gz", lines=True)
    # JsonizeResult(nodes=3664, nodes_with_unknown_fields=0, metadata_has_unknown_fields=False)
    dejsonize("llama.0.jsonl.gz", "llama.0.et")
    # 3664
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Literal

import orjson
from google.protobuf.unknown_fields import UnknownFieldSet

from chakra import io
from chakra.errors import ChakraFormatError, ChakraInputError
from chakra.io import PathLike
from chakra.jsonize.decode import dict_to_metadata, dict_to_node
from chakra.jsonize.encode import (
    has_unknown_fields,
    inner_unknown_fields,
    may_hold_lists,
    metadata_to_dict,
    node_to_dict,
    upstream_bytes,
)
from chakra.jsonize.mapping import DOC_METADATA_KEY, DOC_NODES_KEY
from chakra.jsonize.stream import iter_json_messages


@dataclass(frozen=True)
class JsonizeResult:
    """What :func:`jsonize` wrote.

    ``nodes``: node count. ``nodes_with_unknown_fields``: nodes that carried protobuf fields unknown
    to this schema (anywhere inside the node); JSON cannot hold those fields, so they are missing
    from the output. ``metadata_has_unknown_fields``: the same for the GlobalMetadata record.
    """

    nodes: int
    nodes_with_unknown_fields: int = 0
    metadata_has_unknown_fields: bool = False

    @property
    def dropped_unknown_fields(self) -> bool:
        """Whether anything was lost because it had no JSON rendering."""
        return bool(self.nodes_with_unknown_fields or self.metadata_has_unknown_fields)


@contextmanager
def _output(dst: PathLike) -> Iterator[IO[bytes]]:
    """An atomically written output file, gzip/zstd compressed when its suffix says so."""
    kind = io.compression_for(dst)
    with io.AtomicFile(dst) as raw:
        if kind == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as sink:  # mtime=0: reproducible bytes
                yield sink  # type: ignore[misc]
        elif kind == "zstd":
            import zstandard

            with zstandard.ZstdCompressor().stream_writer(raw, closefd=False) as sink:
                yield sink  # type: ignore[misc]
        else:
            yield raw


def jsonize(
    src: PathLike,
    dst: PathLike,
    *,
    lines: bool = False,
    upstream: bool = False,
    unknown_fields: Literal["count", "error"] = "count",
) -> JsonizeResult:
    """Write the ``.et`` file ``src`` as JSON to ``dst``; stream, constant memory, atomic.

    ``lines=False``: one JSON document ``{"globalMetadata": {...}, "nodes": [...]}``, one node per
    line. ``lines=True``: JSON Lines (metadata object first). ``upstream=True``: the text of upstream
    ``chakra_jsonizer`` (``MessageToJson`` of each message back to back). A ``.gz``/``.zst`` suffix
    on ``dst`` compresses. ``unknown_fields``: ``"count"`` (report them in the result) or
    ``"error"`` (raise :class:`ChakraFormatError` at the first message that carries some).
    """
    if lines and upstream:
        raise ChakraInputError("lines and upstream exclude each other", hint="upstream text is concatenated objects")
    if unknown_fields not in ("count", "error"):
        raise ChakraInputError(f"unknown_fields must be 'count' or 'error', not {unknown_fields!r}")
    strict = unknown_fields == "error"
    dumps = orjson.dumps
    render = upstream_bytes if upstream else dumps
    unknown_nodes = 0
    with io.EtReader(src) as reader, _output(dst) as out:
        metadata = reader.metadata
        metadata_unknown = has_unknown_fields(metadata)
        if metadata_unknown and strict:
            raise _unknown_error(src, None)
        meta_dict = metadata_to_dict(metadata)
        if upstream:
            out.write(upstream_bytes(meta_dict))
        elif lines:
            out.write(dumps(meta_dict) + b"\n")
        else:
            out.write(
                b'{"' + DOC_METADATA_KEY.encode() + b'":' + dumps(meta_dict) + b',\n"' + DOC_NODES_KEY.encode() + b'":['
            )
        index = 0
        separator = b"\n"  # before the first node; ",\n" between nodes of the document
        for batch in reader.batches():
            parts: list[bytes] = []
            for node in batch:
                text = render(node_to_dict(node))
                if len(UnknownFieldSet(node)) or inner_unknown_fields(node, lists_possible=may_hold_lists(text)):
                    if strict:
                        raise _unknown_error(src, index)
                    unknown_nodes += 1
                parts.append(text)
                index += 1
            if not parts:
                continue
            if upstream:
                out.write(b"".join(parts))
            elif lines:
                out.write(b"\n".join(parts) + b"\n")
            else:
                out.write(separator + b",\n".join(parts))
                separator = b",\n"
        if not upstream and not lines:
            out.write(b"\n]}\n")
    return JsonizeResult(index, unknown_nodes, metadata_unknown)


def _unknown_error(src: PathLike, node_index: int | None) -> ChakraFormatError:
    return ChakraFormatError(
        "carries protobuf fields unknown to this schema, which JSON cannot represent",
        path=src,
        node_index=node_index,
        hint="keep the .et file, or jsonize with unknown_fields='count' to drop them",
    )


#: Top-level keys that identify JSON files that are not Chakra JSON, and what they are.
_OTHER_JSON_FORMATS = (
    ("workload_graph", "the mlcommons C++ feeder's JSON workload form (`workload_graph`), not proto3 JSON of an ET"),
    ("traceEvents", "a Kineto/Chrome trace (GPU timeline), not a Chakra ET"),
    ("nodes", "a PyTorch execution trace (host trace JSON), not a Chakra ET; convert it with the PyTorch front end"),
)


def _refuse_other_json_formats(first: Any, src: PathLike) -> None:
    """Name the JSON formats that are often mistaken for Chakra JSON instead of failing on a key."""
    if type(first) is not dict:
        return
    for key, what in _OTHER_JSON_FORMATS:
        if key in first:
            raise ChakraFormatError(
                f"this is {what}",
                path=src,
                hint="dejsonize reads the output of `chakra jsonize` or upstream chakra_jsonizer",
            )


def dejsonize(src: PathLike, dst: PathLike, *, compress: str | None = "auto") -> int:
    """Write the ``.et`` file ``dst`` from JSON ``src`` (any form :func:`iter_json_messages` reads).

    The form is detected from the text. Streams (memory bounded by one node) and writes atomically
    through :class:`chakra.io.EtWriter` (``compress`` as there). ``jsonize`` then ``dejsonize`` gives
    the identical bytes for canonically encoded files. Returns the node count.
    """
    messages = iter_json_messages(src)
    try:
        first = next(messages, None)
        if first is None:
            raise ChakraFormatError(
                "no GlobalMetadata object found", path=src, hint="the first JSON object must be the GlobalMetadata"
            )
        _refuse_other_json_formats(first, src)
        metadata = dict_to_metadata(first, path=src)
        with io.EtWriter(dst, metadata, compress=compress) as writer:
            write = writer.write
            for index, d in enumerate(messages):
                write(dict_to_node(d, path=src, node_index=index))
        return writer.node_count
    finally:
        messages.close()  # type: ignore[attr-defined]
