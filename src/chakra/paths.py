"""How a workload lies on disk: ``PREFIX.{rank}.et`` per rank (``.gz``/``.zst`` too) and, where it has
communicator groups, ``PREFIX.comm_groups.json`` (``reference/astra-sim.md`` §1, §4.4); or, in
chakra-et's own layout (:mod:`chakra.class_layout`), ``PREFIX.class{k}.et`` per class of equivalent
ranks and ``PREFIX.classes.json``, the rank-to-class mapping.

Example:
    >>> rank_of("out/job.3.et.gz"), prefix_of("out/job.3.et"), rank_path("out/job", 1)
    (3, PosixPath('out/job'), PosixPath('out/job.1.et'))
    >>> groups_path("out/job")
    PosixPath('out/job.comm_groups.json')
    >>> class_path("out/job", 2), classes_path("out/job"), prefix_of_classes("out/job.classes.json")
    (PosixPath('out/job.class2.et'), PosixPath('out/job.classes.json'), PosixPath('out/job'))
"""

from __future__ import annotations

import re
from pathlib import Path

from chakra.errors import PathLike

#: A rank file's name: the prefix's last part, the rank, ``.et`` and an optional compression suffix.
RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz|\.zst|\.zstd)?$")
#: Suffix of a workload's groups file beside its rank files: ``PREFIX.comm_groups.json``.
COMM_GROUPS_SUFFIX = ".comm_groups.json"
#: Suffix of the rank-to-class mapping of a workload written as classes: ``PREFIX.classes.json``.
CLASSES_SUFFIX = ".classes.json"
#: A class file's name: the prefix's last part, ``class`` and the class's index, ``.et``.
CLASS_FILE = re.compile(r"^(?P<prefix>.+)\.class(?P<index>\d+)\.et$")


def rank_of(path: PathLike) -> int | None:
    """The rank encoded in a ``PREFIX.{rank}.et`` file name, or ``None``."""
    match = RANK_FILE.match(Path(path).name)
    return int(match.group("rank")) if match else None


def prefix_of(path: PathLike) -> Path | None:
    """The workload prefix of a ``PREFIX.{rank}.et`` file, or ``None`` for another name."""
    path = Path(path)
    match = RANK_FILE.match(path.name)
    return path.with_name(match.group("prefix")) if match else None


def beside_prefix(prefix: PathLike, suffix: str) -> Path:
    """The file ``PREFIX`` + ``suffix`` of the workload ``PREFIX`` (in its folder)."""
    prefix = Path(prefix)
    return prefix.with_name(prefix.name + suffix)


def rank_path(prefix: PathLike, rank: int) -> Path:
    """``PREFIX.{rank}.et``."""
    return beside_prefix(prefix, f".{rank}.et")


def groups_path(prefix: PathLike) -> Path:
    """The groups file of the workload ``PREFIX``: ``PREFIX.comm_groups.json``."""
    return beside_prefix(prefix, COMM_GROUPS_SUFFIX)


def class_path(prefix: PathLike, index: int) -> Path:
    """``PREFIX.class{index}.et``: the file of class ``index`` of a workload written as classes."""
    return beside_prefix(prefix, f".class{index}.et")


def classes_path(prefix: PathLike) -> Path:
    """The rank-to-class mapping of the workload ``PREFIX``: ``PREFIX.classes.json``."""
    return beside_prefix(prefix, CLASSES_SUFFIX)


def prefix_of_classes(path: PathLike) -> Path | None:
    """The workload prefix of a ``PREFIX.classes.json`` file, or ``None`` for another name."""
    path = Path(path)
    if not path.name.endswith(CLASSES_SUFFIX) or path.name == CLASSES_SUFFIX:
        return None
    return path.with_name(path.name[: -len(CLASSES_SUFFIX)])
