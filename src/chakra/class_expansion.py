"""One file per rank from a workload written as classes (:mod:`chakra.class_layout`): what ASTRA-sim
and every other tool that reads ``PREFIX.{rank}.et`` needs (``chakra expand``).

Each class file is read once and split into the records that every rank of the class shares (copied
as bytes) and the nodes that name groups or peers, which are renamed and encoded per rank. The files
are byte for byte what the generator writes when it writes one file per rank.

Example:
    >>> import tempfile
    >>> from chakra.generate.llm import generate_llm
    >>> from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ParallelSpec, WorkloadSpec
    >>> from chakra.workload import open_workload
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2, pp=2, dp=1), HARDWARE_PRESETS["h100"],
    ...                     global_batch=2)
    >>> folder = tempfile.mkdtemp()
    >>> generate_llm(spec, f"{folder}/per_class", as_classes=True).class_files[1].name
    'per_class.class1.et'
    >>> written = expand_classes(open_workload(f"{folder}/per_class"), f"{folder}/per_rank")
    >>> direct = generate_llm(spec, f"{folder}/direct")
    >>> sorted(written.paths), direct.files[3].read_bytes() == written.paths[3].read_bytes()
    ([0, 1, 2, 3], True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError

from chakra import io
from chakra.attrs import get_attr, set_attr
from chakra.class_layout import RENAMED_ATTRS, RankRenaming
from chakra.errors import ChakraInputError, PathLike
from chakra.io.framing import read_record
from chakra.schema.protobuf.et_def_pb2 import Node
from chakra.workload import Workload
from chakra.workload_writer import WorkloadWriter, WrittenWorkload


def expand_classes(
    workload: Workload, out_prefix: PathLike, *, progress: Callable[[int, int], None] | None = None
) -> WrittenWorkload:
    """Write ``OUT_PREFIX.{rank}.et`` for every rank of ``workload`` (written as classes) and its
    groups file; ``progress(done, total)`` as ranks are written. ``out_prefix`` may be the
    workload's own prefix: its class files and mapping are then replaced by the rank files."""
    layout = workload.classes
    if layout is None:
        raise ChakraInputError("the workload already has one file per rank", path=workload.prefix,
                               hint="expand a workload written with `chakra generate llm --classes`")  # fmt: skip
    total = len(workload.files)
    tell = None if progress is None else (lambda done: progress(done, total))
    with WorkloadWriter(out_prefix, progress=tell) as writer:
        by_file: dict[Path, list[int]] = {}
        for rank, path in workload.files.items():
            by_file.setdefault(path, []).append(rank)
        for path, ranks in by_file.items():
            parts = _class_parts(path)
            for rank in ranks:
                renaming = workload.renaming(rank)
                assert renaming is not None
                writer.write_bytes(rank, _render(parts, renaming))
        writer.groups_file = workload.comm_groups_path
    assert writer.result is not None
    return writer.result


class _Renamed(NamedTuple):
    """A node whose last attributes name groups or peers: its bytes without them, and for each of
    them its name, value and bytes (attr is the last field of ``Node``, so a rank's node is the prefix
    followed by its renamed attributes: what protobuf writes for it)."""

    prefix: bytes
    attrs: tuple[tuple[str, Any, bytes], ...]


def _class_parts(path: Path) -> list[bytes | _Renamed | Node]:
    """A class file as framed bytes shared by every rank, and the nodes to rename per rank, in order
    (as :class:`_Renamed` where their renamed attributes come last, else whole)."""
    parts: list[bytes | _Renamed | Node] = []
    shared: list[bytes] = []
    stream, _ = io.open_decompressed(path)
    with stream:
        first = read_record(stream, path)
        if first is None:
            raise ChakraInputError("the class file is empty", path=path, hint="write the workload again")
        shared.append(io.frame(first))
        count = 0
        while (payload := read_record(stream, path)) is not None:
            try:
                node = Node.FromString(payload)
            except DecodeError as error:
                hint = "write the workload again; `chakra validate` locates the damage"
                raise ChakraInputError(f"node record #{count} does not decode: {error}", path=path, hint=hint) from None
            count += 1
            if any(attr.name in RENAMED_ATTRS for attr in node.attr):
                parts.append(b"".join(shared))
                shared = []
                parts.append(_renamed(node, payload))
            else:
                shared.append(io.frame(payload))
    parts.append(b"".join(shared))
    return parts


def _renamed(node: Node, payload: bytes) -> _Renamed | Node:
    """``node`` (read from ``payload``) as a prefix and its trailing renamed attributes, or itself
    where that would not give back its bytes (renamed attributes between others, a name twice, a
    value outside its canonical member, unknown fields)."""
    first = len(node.attr)
    while first and node.attr[first - 1].name in RENAMED_ATTRS:
        first -= 1
    names = [attr.name for attr in node.attr[first:]]
    if any(attr.name in RENAMED_ATTRS for attr in node.attr[:first]) or len(set(names)) != len(names):
        return node
    attrs = tuple((attr.name, get_attr(node, attr.name), attr.SerializeToString()) for attr in node.attr[first:])
    stripped = Node()
    stripped.CopyFrom(node)
    del stripped.attr[first:]
    found = _Renamed(stripped.SerializeToString(), attrs)
    if found.prefix + b"".join(_attr_field(data, name, value) for name, value, data in attrs) != payload:
        return node
    return found


@functools.lru_cache(maxsize=1 << 16)
def _attr_field(attr: bytes, name: str, value: Any) -> bytes:
    """The ``attr`` field of a node holding the attribute ``attr`` (its bytes) set to ``value``."""
    holder = Node()
    holder.attr.add().MergeFromString(attr)
    set_attr(holder, name, value)
    return holder.SerializeToString()


def _render(parts: list[bytes | _Renamed | Node], renaming: RankRenaming) -> bytes:
    out: list[bytes] = []
    for part in parts:
        if isinstance(part, bytes):
            out.append(part)
        elif isinstance(part, _Renamed):
            extra = b"".join(_attr_field(data, name, renaming.value(name, value)) for name, value, data in part.attrs)
            out.append(io.encode_varint(len(part.prefix) + len(extra)))
            out.append(part.prefix)
            out.append(extra)
        else:
            node = Node()
            node.CopyFrom(part)
            renaming.node(node)
            out.append(io.frame(node.SerializeToString()))
    return b"".join(out)
