"""How a workload lies on disk: ``PREFIX.{rank}.et`` per rank (``.gz``/``.zst`` too) and, where it has
communicator groups, ``PREFIX.comm_groups.json`` (``reference/astra-sim.md`` §1, §4.4).

Example:
    >>> rank_of("out/job.3.et.gz"), prefix_of("out/job.3.et"), rank_path("out/job", 1)
    (3, PosixPath('out/job'), PosixPath('out/job.1.et'))
    >>> groups_path("out/job")
    PosixPath('out/job.comm_groups.json')
"""

from __future__ import annotations

import re
from pathlib import Path

from chakra.errors import PathLike

#: A rank file's name: the prefix's last part, the rank, ``.et`` and an optional compression suffix.
RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz|\.zst|\.zstd)?$")
#: Suffix of a workload's groups file beside its rank files: ``PREFIX.comm_groups.json``.
COMM_GROUPS_SUFFIX = ".comm_groups.json"


def rank_of(path: PathLike) -> int | None:
    """The rank encoded in a ``PREFIX.{rank}.et`` file name, or ``None``."""
    match = RANK_FILE.match(Path(path).name)
    return int(match.group("rank")) if match else None


def prefix_of(path: PathLike) -> Path | None:
    """The workload prefix of a ``PREFIX.{rank}.et`` file, or ``None`` for another name."""
    path = Path(path)
    match = RANK_FILE.match(path.name)
    return path.with_name(match.group("prefix")) if match else None


def rank_path(prefix: PathLike, rank: int) -> Path:
    """``PREFIX.{rank}.et``."""
    prefix = Path(prefix)
    return prefix.with_name(f"{prefix.name}.{rank}.et")


def groups_path(prefix: PathLike) -> Path:
    """The groups file of the workload ``PREFIX``: ``PREFIX.comm_groups.json``."""
    prefix = Path(prefix)
    return prefix.with_name(prefix.name + COMM_GROUPS_SUFFIX)
