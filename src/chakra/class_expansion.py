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

from collections.abc import Callable
from pathlib import Path

from google.protobuf.message import DecodeError

from chakra import io
from chakra.class_layout import RENAMED_ATTRS, RankRenaming
from chakra.errors import ChakraInputError, PathLike
from chakra.io.framing import read_record
from chakra.schema.protobuf.et_def_pb2 import Node
from chakra.trace import WorkloadWriter, WrittenWorkload
from chakra.workload import Workload


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


def _class_parts(path: Path) -> list[bytes | Node]:
    """A class file as framed bytes shared by every rank, and the nodes to rename per rank, in order."""
    parts: list[bytes | Node] = []
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
                parts.append(node)
            else:
                shared.append(io.frame(payload))
    parts.append(b"".join(shared))
    return parts


def _render(parts: list[bytes | Node], renaming: RankRenaming) -> bytes:
    out: list[bytes] = []
    for part in parts:
        if isinstance(part, bytes):
            out.append(part)
            continue
        node = Node()
        node.CopyFrom(part)
        renaming.node(node)
        out.append(io.frame(node.SerializeToString()))
    return b"".join(out)
