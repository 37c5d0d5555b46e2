"""Which profiler traces make up a job, and which rank each one is.

Users hand over what ``tensorboard_trace_handler`` or ``export_chrome_trace`` left: files, a folder
or a glob, ``.json`` or ``.json.gz``, one trace per rank. A trace's rank is its
``distributedInfo.rank`` (written when ``torch.distributed`` was initialised), else a number in its
file name (``rank3``, ``rank_3``, ``device.3.json``), else ``--rank`` for a single file. The
traces must be one job: one rank each, the same world size, every rank below it.

Only the head of each file is read here (``distributedInfo`` precedes ``traceEvents``); the
workers read the traces.

Example:
    job = job_traces(["traces/"])
    {rank: t.path.name for rank, t in job.ranks.items()}
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chakra import io
from chakra.errors import ChakraFormatError, ChakraInputError

#: File names a folder is searched for (what torch.profiler's handlers write).
TRACE_SUFFIXES = (".json", ".json.gz", ".json.zst")
#: How much of a trace's decompressed head is searched for ``distributedInfo`` (bytes).
HEAD_BYTES = 1 << 20
_DIST_INFO = re.compile(rb'"distributedInfo"\s*:\s*\{')
_RANK = re.compile(rb'"rank"\s*:\s*(\d+)')
_WORLD = re.compile(rb'"world_size"\s*:\s*(\d+)')
_NAME_RANK = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_NAME_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace: where it is, its rank, how that was found, its world size (if recorded)."""

    path: Path
    rank: int
    rank_from: str
    world_size: int | None


def find_traces(inputs: Sequence[str | Path]) -> dict[Path, bool]:
    """The trace files ``inputs`` name, each once in the order given, and whether it was found by
    a search (a folder's files, not below it; a glob's matches) rather than named."""
    found: dict[Path, bool] = {}
    for given in inputs:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not files:
                raise ChakraInputError(
                    "the folder holds no profiler traces", path=path, hint="expected *.json or *.json.gz files"
                )
            found.update(dict.fromkeys(files, True))
        elif path.exists():
            found[path] = False
        elif glob.has_magic(str(given)):
            matches = sorted(Path(p) for p in glob.glob(str(given)) if Path(p).is_file())
            if not matches:
                raise ChakraInputError(f"no files match {str(given)!r}", hint="check the pattern")
            found.update(dict.fromkeys(matches, True))
        else:
            raise ChakraInputError("no such file", path=path, hint="check the path")
    if not found:
        raise ChakraInputError("no profiler traces given", hint="give trace files, a folder or a glob")
    return found


def is_host_trace(head: bytes) -> bool:
    """Whether a file's head is a host execution trace's (``nodes`` and no ``traceEvents``).

    >>> is_host_trace(b'{"schema": "1.1.1-chakra.0.0.4", "pid": 7, "nodes": [')
    True
    """
    return b'"nodes"' in head and b'"traceEvents"' not in head


def _head(path: Path) -> bytes:
    stream, _ = io.open_decompressed(path, what="a Kineto trace")
    try:
        return stream.read(HEAD_BYTES)
    except io.DECOMPRESS_ERRORS as exc:
        raise ChakraFormatError(f"cannot decompress: {exc}", path=path, hint="the compressed file is corrupt") from None
    finally:
        stream.close()


def distributed_rank(head: bytes) -> tuple[int | None, int | None]:
    """``(rank, world_size)`` of a trace's ``distributedInfo``, from its ``head`` (``None`` where it
    records none).

    >>> distributed_rank(b'{"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}, "traceEvents": [')
    (3, 8)
    """
    match = _DIST_INFO.search(head)
    if match is None:
        return None, None
    info = head[match.end() : head.find(b"}", match.end()) if b"}" in head[match.end() :] else len(head)]
    rank, world = _RANK.search(info), _WORLD.search(info)
    return (int(rank.group(1)) if rank else None), (int(world.group(1)) if world else None)


def rank_in_name(path: Path) -> int | None:
    """The rank a file name gives: ``rank3``/``rank_3``/``rank-3``, else its last number.

    >>> rank_in_name(Path("nccl_2rank_rank1_kineto.json.gz")), rank_in_name(Path("device.3.json"))
    (1, 3)
    >>> rank_in_name(Path("alexnet_kineto.json.gz")) is None
    True
    """
    name = path.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    match = _NAME_RANK.search(name)
    if match is not None:
        return int(match.group(1))
    numbers = _NAME_NUMBER.findall(name)
    return int(numbers[-1]) if numbers else None


@dataclass(frozen=True)
class JobTraces:
    """One job's traces by rank, and the host execution traces a search found beside them (left
    for ``chakra convert pytorch``)."""

    ranks: dict[int, RankTrace]
    host_traces: tuple[Path, ...] = ()


def job_traces(inputs: Sequence[str | Path], rank: int | None = None) -> JobTraces:
    """Every rank's trace of one job. Raises :class:`ChakraInputError` naming the files when two
    traces are one rank, their world sizes disagree, a rank is past the world size, or a rank
    cannot be told. A host execution trace found by a search (the folder ``chakra.pytorch.collect``
    writes) is set aside; one named is refused when it is read."""
    heads: dict[Path, bytes] = {}
    host_traces: list[Path] = []
    for path, searched in find_traces(inputs).items():
        head = _head(path)
        if searched and is_host_trace(head):
            host_traces.append(path)
        else:
            heads[path] = head
    if not heads:
        raise ChakraInputError(
            "no profiler traces among the files: only host execution traces",
            path=host_traces[0] if host_traces else None,
            hint="convert them with their device traces: chakra convert pytorch --host ... --device ...",
        )
    paths = list(heads)
    if rank is not None and len(paths) > 1:
        raise ChakraInputError(
            f"--rank is for a single trace, and {len(paths)} were given",
            hint="the ranks of several traces come from their distributedInfo or their file names",
        )
    traces: dict[int, RankTrace] = {}
    for path in paths:
        recorded, world = distributed_rank(heads[path])
        if rank is not None:
            found, source = rank, "--rank"
        elif recorded is not None:
            found, source = recorded, "distributedInfo"
        elif (named := rank_in_name(path)) is not None and len(paths) > 1:
            found, source = named, "the file name"
        elif len(paths) == 1:
            found, source = 0, "none recorded: rank 0"
        else:
            raise ChakraInputError(
                "the trace says not which rank it is (no distributedInfo, no number in its name)",
                path=path,
                hint="name the files by rank (rank0.json, rank1.json, ...) or convert them one at a time with --rank",
            )
        if found in traces:
            raise ChakraInputError(
                f"two traces of rank {found}: {traces[found].path} and this one (two jobs in one folder?)",
                path=path,
                hint="give the traces of one job only",
            )
        traces[found] = RankTrace(path, found, source, world)
    worlds = {t.world_size for t in traces.values() if t.world_size is not None}
    if len(worlds) > 1:
        first = next(t for t in traces.values() if t.world_size is not None)
        other = next(t for t in traces.values() if t.world_size not in (None, first.world_size))
        raise ChakraInputError(
            f"the ranks disagree on the world size: {first.path.name} says {first.world_size}, "
            f"this one {other.world_size} (two jobs in one folder?)",
            path=other.path,
            hint="give the traces of one job only",
        )
    world = worlds.pop() if worlds else None
    if world is not None:
        for trace in traces.values():
            if trace.rank >= world:
                raise ChakraInputError(
                    f"rank {trace.rank} (from {trace.rank_from}) is not below the world size {world}",
                    path=trace.path,
                    hint="give the traces of one job only, or --rank for a single trace",
                )
    return JobTraces(dict(sorted(traces.items())), tuple(host_traces))
