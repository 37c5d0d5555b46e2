"""Anonymizing a workload: structure, kinds, dependencies, collectives, groups, sizes and times kept;
every name and free text replaced or removed.

:func:`anonymize_workload` reads ``PREFIX.{rank}.et`` rank by rank and writes an anonymized copy
through the core writer (all ranks or none), then runs the leakage check
(:mod:`chakra.share.leakage`). The records are rewritten in C (``chakra.share._native.Rewriter``)
by rules decided once per distinct name, text or kind of attribute (:mod:`chakra.share.rules`).
Per node:

* **kept**: id, type, data and ctrl deps, duration (``duration_micros``, ``duration_ns``), and every
  numeric attribute of the registry (:data:`chakra.attrs.WELL_KNOWN`): ``comm_type``, ``comm_size``,
  peers, tags, ``is_cpu_op``, ``num_ops``, ``tensor_size``, ``stream``...; ``pg_name`` as its
  group id (``"3"``; ``""`` for the whole job); tensor shapes (``inputs.shapes``, ``outputs.shapes``)
  as numbers.
* **tokenized**: the name, as a keyed hash (HMAC-SHA256 with ``key``: the same name gets the same
  token in every rank and file anonymized with one key), ``class:token`` with ``keep_op_kinds``
  (:func:`chakra.share.opclass.op_class`); the buffer names of ``inputs``/``outputs`` string lists;
  string values of attributes kept by ``keep_attrs``.
* **renumbered**: host thread ids (``tid``, ``fw_tid``: 1, 2, ... in order of appearance, the same
  across ranks), which name OS threads; start times shifted so that the workload's first start is
  at 1 µs (0 means "not recorded"), which drops the wall-clock date and keeps ranks aligned.
* **removed** (counted): ``op_schema``, IO values and types, attribute doc strings, attributes not
  in the registry (unless in ``keep_attrs``), the file metadata's attributes (pid, host, times,
  schema strings), process-group descriptions (a METADATA node's groups are written again from
  their ids and ranks alone).

On request, numbers that can identify a model are coarsened: ``size_buckets`` ``pow2`` rounds
sizes (``comm_size``, ``tensor_size``, ``num_ops``, shape dimensions) up to a power of two;
``time_noise`` multiplies each node's durations by one factor drawn uniformly from [1 - b, 1 + b]
(``seed``); ``shuffle`` writes each rank's nodes in a random dependency-respecting order (ids,
and so every consumer's issue order, unchanged).

Example:
    report = anonymize_workload("runs/job", "share/job", AnonymizeOptions(key=b"owner secret"))
    report.leaks    # [] (else the command fails naming the field)
"""

from __future__ import annotations

import random
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from chakra import io
from chakra.errors import ChakraInputError, PathLike
from chakra.graph import TraceGraph, reordered, topological_order
from chakra.share._native import Rewriter, first_start
from chakra.share.leakage import Leak, StringSet, find_leaks
from chakra.share.rules import Rules
from chakra.table import load_table
from chakra.workload import Workload, open_workload
from chakra.workload_writer import WorkloadWriter

#: The first start of an anonymized workload (µs; 0 means "not recorded").
FIRST_START_US = 1
#: Distinct attribute values and shape texts whose anonymized form is remembered; beyond, they are
#: worked out each time (bounds memory; converted traces repeat most of theirs).
ATTR_CACHE_ENTRIES = 1 << 16


class SizeBuckets(str, Enum):
    NONE = "none"
    POW2 = "pow2"


@dataclass(frozen=True)
class AnonymizeOptions:
    """What :func:`anonymize_workload` keeps and coarsens (see the module's docstring)."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    keep_op_kinds: bool = False
    keep_attrs: frozenset[str] = frozenset()
    size_buckets: SizeBuckets = SizeBuckets.NONE
    time_noise: float = 0.0
    shuffle: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.time_noise < 1:
            raise ChakraInputError(
                f"time noise {self.time_noise:g} is not a fraction below 1", hint="e.g. 0.02 for 2 %"
            )


@dataclass
class AnonymizeReport:
    """What was written and what was taken out: nodes, distinct names tokenized, removed fields and
    attributes by name (counts), coarsened values, and the leakage check's findings."""

    prefix: str
    ranks: int = 0
    nodes: int = 0
    tokens: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    dropped_attrs: Counter[str] = field(default_factory=Counter)
    coarsened: Counter[str] = field(default_factory=Counter)
    strings_checked: int = 0
    leaks: list[Leak] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.prefix, "ranks": self.ranks, "nodes": self.nodes, "tokens": self.tokens,
            "removed": dict(self.removed), "dropped_attrs": dict(self.dropped_attrs),
            "coarsened": dict(self.coarsened), "strings_checked": self.strings_checked,
            "leaks": [leak.to_dict() for leak in self.leaks],
        }  # fmt: skip


#: A batch of rewritten records: the framed records, how many, and each one's end (with shuffle).
Batch = tuple[bytes, int, bytes | None]
#: Told ``(stage, done, total)`` as work goes: the stages are :data:`STAGES`.
Progress = Callable[[str, int, int], None]
#: The stages of :func:`anonymize_workload`: ranks read for the first start, ranks written, files searched.
STAGES = ("finding the first start", "anonymizing ranks", "searching the output for input strings")


def anonymize_workload(
    workload: PathLike,
    out: PathLike,
    options: AnonymizeOptions,
    *,
    mapping: PathLike | None = None,
    progress: Progress | None = None,
) -> AnonymizeReport:
    """Write the anonymized copy of ``workload`` to ``out`` (``OUT.{rank}.et``, and the groups
    file), then check it for leaks (:attr:`AnonymizeReport.leaks`); with ``mapping`` write the
    tokens' names there (JSON, for the owner). ``progress`` is told ``(stage, done, total)``."""
    traces = open_workload(workload, whole=True)
    traces.require_rank_files("anonymize")
    if mapping is not None and not Path(mapping).resolve().parent.is_dir():  # refused before any work
        raise ChakraInputError("the mapping's folder does not exist", path=mapping, hint="create it first")
    report = AnonymizeReport(str(out), ranks=len(traces.files))
    inputs = StringSet()
    rules = Rules(
        options.key, inputs=inputs, keep_op_kinds=options.keep_op_kinds, keep_attrs=options.keep_attrs,
        pow2=options.size_buckets is SizeBuckets.POW2, noise=options.time_noise > 0,
    )  # fmt: skip
    tell = progress or (lambda stage, done, total: None)
    rewriter = Rewriter(
        rules, inputs.fingerprints, _shift_us(traces, tell), options.time_noise, options.seed,
        options.keep_op_kinds, rules.fixed_counters, ATTR_CACHE_ENTRIES,
    )  # fmt: skip
    shuffler = random.Random(options.seed)
    with WorkloadWriter(out) as writer:
        if traces.comm_groups is not None:
            writer.groups = traces.comm_groups
        for done, (rank, path) in enumerate(traces.files.items(), start=1):
            with io.EtReader(path) as reader:
                metadata, dropped = rules.metadata(reader.metadata)
                if dropped:
                    report.removed["file metadata attributes"] += dropped
                batches = _rewritten(reader, rewriter, report, options.shuffle)
                if options.shuffle:
                    batches = _shuffled(list(batches), load_table(path).graph, shuffler)
                writer.write_framed(rank, metadata, ((records, count) for records, count, _ in batches))
            tell(STAGES[1], done, len(traces.files))
    for name, counts in rules.totals(rewriter.counts()).items():
        getattr(report, name).update(counts)
    report.tokens = len(rules.tokens.mapping)
    if mapping is not None:
        import orjson

        with io.AtomicFile(mapping) as file:
            file.write(orjson.dumps(rules.tokens.mapping, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    written = writer.result.paths if writer.result is not None else {}
    report.strings_checked = len(inputs)
    files = list(written.values())
    report.leaks = find_leaks(inputs, files, rules.generated, progress=lambda done: tell(STAGES[2], done, len(files)))
    return report


def _rewritten(reader: io.EtReader, rewriter: Rewriter, report: AnonymizeReport, bounds: bool) -> Iterator[Batch]:
    def rewrite(buf: bytes, pos: int, end: int) -> tuple[object, ...]:
        return rewriter.rewrite(buf, pos, end, bounds)

    for *_, count, (records, ends) in reader.record_batches(rewrite):
        report.nodes += count
        yield records, count, ends


def _shift_us(traces: Workload, tell: Progress) -> int:
    """What every start is moved back by: the workload's first recorded start, less :data:`FIRST_START_US`."""
    firsts: list[int] = []
    for done, path in enumerate(traces.files.values(), start=1):
        with io.EtReader(path) as reader:
            firsts.extend(start for *_, (start,) in reader.record_batches(first_start) if start)
        tell(STAGES[0], done, len(traces.files))
    return min(firsts) - FIRST_START_US if firsts else 0


def _shuffled(batches: list[Batch], graph: TraceGraph, rng: random.Random) -> Iterator[Batch]:
    """One rank's rewritten records in the order :func:`shuffled_order` draws."""
    records: list[bytes] = []
    for data, _, ends in batches:
        assert ends is not None  # rewritten with their bounds
        stops = np.frombuffer(ends, dtype=np.int64).tolist()
        records.extend(data[start:stop] for start, stop in zip([0, *stops[:-1]], stops, strict=True))
    order = shuffled_order(graph, rng)
    yield b"".join([records[i] for i in order]), len(records), None


def shuffled_order(graph: TraceGraph, rng: random.Random) -> list[int]:
    """The positions of ``graph`` in a random order in which every node comes after the nodes it
    depends on: the core's topological order of a random permutation (smallest permuted position
    first); nodes on a cycle keep their permuted order, after the rest.

    >>> from chakra.graph import graph_from_arrays
    >>> no_times = np.zeros(3, np.uint64)
    >>> chain = graph_from_arrays(np.arange(3, dtype=np.uint64), np.zeros(3, np.int32), no_times, no_times,
    ...     np.array([0, 1, 1]), np.array([0, 1], np.uint64), np.zeros(3), np.array([], np.uint64))
    >>> shuffled_order(chain, random.Random(1))
    [0, 1, 2]
    """
    permutation = rng.sample(range(graph.num_nodes), graph.num_nodes)
    placed = topological_order(reordered(graph, np.array(permutation, dtype=np.int64)), strict=False).tolist()
    if len(placed) < len(permutation):
        seen = set(placed)
        placed.extend(i for i in range(len(permutation)) if i not in seen)
    return [permutation[i] for i in placed]
