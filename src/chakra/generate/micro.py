"""Microbenchmark workloads: one small ET per rank for each node type, collective and transfer pattern.

The families of upstream's ``chakra_generator`` (``reference/upstream-behaviour.md`` §6), with the
same file stems and defaults, fixed where upstream's files could not be consumed (Part B item 38):

* every node carries what its consumers read, in the value kind they read (through
  :func:`chakra.attrs.set_attr`): ``is_cpu_op = false``; compute nodes ``duration_micros``,
  ``num_ops`` and ``tensor_size`` (both >= 1, so the roofline works too); memory nodes
  ``tensor_size``; collectives ``comm_type`` and ``comm_size`` (BROADCAST also ``duration_micros``,
  which is all ASTRA-sim replays of it); sends ``comm_src`` (own rank), ``comm_dst``, ``comm_tag``,
  ``comm_size``; receives ``comm_src``, ``comm_dst`` (own rank), ``comm_tag``, ``comm_size``;
* send and receive nodes have peers. Pairing rule, used by every point-to-point family: rank ``r``
  sends to ``(r + 1) mod n`` and receives from ``(r - 1) mod n``, and the tag is the sending rank
  (:func:`p2p_tag`). So ``one_comm_send_node`` and ``one_comm_recv_node`` are the two halves of
  ``send_recv_ring``: alone, the sends go unreceived and the receives wait forever; together
  (merged per rank) they match;
* node ids start at 0 in every file (upstream continued one counter across the files it wrote);
* files go to a directory of the caller's choice (upstream: the current directory).

More families than upstream: REDUCE, GATHER, SCATTER (ASTRA-sim refuses them, ``chakra simulate``
models them), ``send_recv_pair``, ``send_recv_ring`` and ``comp_chain``; and a sweep of collectives
over sizes and rank counts (:func:`sweep_collectives`).

A workload is ``DIR/NAME.{rank}.et`` (+ ``DIR/NAME.comm_groups.json`` when it has groups), NAME the
family, or ``COLLECTIVE.SIZE.Nr`` in a sweep (``ALL_REDUCE.1MiB.8r``). Sizes are bytes, times µs.

This module lists the families (:data:`FAMILIES`), sweeps and writes them; each family's builder is in
:mod:`chakra.generate.micro_families`, the parsing of sizes in :mod:`chakra.generate.sizes`.

Example:
    from chakra.generate.micro import MicroParams, generate, sweep_collectives
    written = generate("micro", ["ALL_REDUCE", "send_recv_ring"], MicroParams(num_npus=8))
    written = sweep_collectives("sweep", ["ALL_REDUCE"], [1 << 10, 1 << 20], [8, 16])
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from chakra import workload_writer
from chakra.errors import ChakraInputError
from chakra.generate.micro_families import (
    ALL_GATHER_NOTE_BELOW_BYTES,
    BARRIER_SIZE_BYTES,
    COLLECTIVE_FAMILIES,
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_COMM_SIZE_BYTES,
    DEFAULT_NUM_NPUS,
    DEFAULT_RUNTIME_US,
    DEFAULT_TENSOR_SIZE_BYTES,
    EXTRA_COLLECTIVES,
    MIN_NPUS,
    REFERENCE_PEAK_TFLOPS,
    SIM_MODELS,
    SWEEP_COLLECTIVES,
    UPSTREAM_COLLECTIVES,
    MicroParams,
    MicroWorkload,
    collective_family,
    collective_workload,
    comp_chain,
    compute_flops,
    one_comm_recv_node,
    one_comm_send_node,
    one_comp_node,
    one_metadata_node_all_types,
    one_remote_mem_load_node,
    one_remote_mem_store_node,
    p2p_tag,
    send_recv_pair,
    send_recv_ring,
    two_comp_nodes_dependent,
    two_comp_nodes_independent,
    value_kind_members,
)
from chakra.generate.sizes import SIZE_UNITS, format_size, parse_counts, parse_size, parse_sizes, unique
from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType
from chakra.units import FLOPS_PER_TFLOPS, US_PER_S
from chakra.validate import ASTRA_UNSUPPORTED_COLLECTIVES

__all__ = [
    "ALL_GATHER_NOTE_BELOW_BYTES",
    "ASTRA_ABORTS",
    "ASTRA_NEEDS_REMOTE_MEMORY",
    "ASTRA_REFUSES",
    "ASTRA_REPLAYS",
    "ASTRA_SIMULATES",
    "ASTRA_WITH_PAIR",
    "BARRIER_SIZE_BYTES",
    "COLLECTIVE_FAMILIES",
    "DEFAULT_CHAIN_LENGTH",
    "DEFAULT_COMM_SIZE_BYTES",
    "DEFAULT_NUM_NPUS",
    "DEFAULT_RUNTIME_US",
    "DEFAULT_TENSOR_SIZE_BYTES",
    "EXTRA_COLLECTIVES",
    "FAMILIES",
    "FLOPS_PER_TFLOPS",
    "MIN_NPUS",
    "REFERENCE_PEAK_TFLOPS",
    "SIM_MODELS",
    "SIZE_UNITS",
    "SWEEP_COLLECTIVES",
    "UPSTREAM_COLLECTIVES",
    "UPSTREAM_FAMILIES",
    "US_PER_S",
    "Family",
    "MicroParams",
    "MicroWorkload",
    "WrittenMicroWorkload",
    "build_families",
    "collective_sweep",
    "collective_workload",
    "comp_chain",
    "compute_flops",
    "format_size",
    "generate",
    "one_comm_recv_node",
    "one_comm_send_node",
    "one_comp_node",
    "one_metadata_node_all_types",
    "one_remote_mem_load_node",
    "one_remote_mem_store_node",
    "p2p_tag",
    "parse_counts",
    "parse_size",
    "parse_sizes",
    "resolve_families",
    "send_recv_pair",
    "send_recv_ring",
    "sweep_collectives",
    "two_comp_nodes_dependent",
    "two_comp_nodes_independent",
    "value_kind_members",
    "write_micro_workload",
    "write_workloads",
]


# ---------------------------------------------------------------------------------------------
# The families by name

# What ASTRA-sim does with each family (the ``astra_sim`` column of ``--list``).
ASTRA_SIMULATES = "simulates"
ASTRA_REPLAYS = "replays duration"
ASTRA_REFUSES = "refuses"
ASTRA_WITH_PAIR = "with its pair"
ASTRA_NEEDS_REMOTE_MEMORY = "needs remote mem"
#: A METADATA node aborts builds with assertions (astra-sim.md §7); a release build, with nothing else
#: in the rank, throws from its overlap statistics before the rank's line (both seen in its analytical
#: builds). ``chakra validate --target astra-sim`` reports it.
ASTRA_ABORTS = "aborts"


@dataclass(frozen=True)
class Family:
    """A family: its file stem, a one-line summary, how to build it, whether upstream's generator
    writes it, and what ASTRA-sim does with it (one of the ``ASTRA_*`` strings)."""

    name: str
    summary: str
    build: Callable[[MicroParams], MicroWorkload]
    upstream: bool
    astra_sim: str


@dataclass(frozen=True)
class WrittenMicroWorkload:
    """A workload on disk: its rank files, its groups file, and the stale files of an earlier
    workload of the same name that were removed so the directory holds one consistent workload."""

    workload: MicroWorkload
    prefix: Path
    paths: tuple[Path, ...]
    comm_groups_path: Path | None
    removed_stale: tuple[Path, ...]


def _family(build: Callable[[MicroParams], MicroWorkload], summary: str, *, upstream: bool, astra_sim: str) -> Family:
    return Family(build.__name__, summary, build, upstream, astra_sim)


def _collective_entry(comm_type: str) -> Family:
    type_value = CollectiveCommType.Value(comm_type)
    if type_value in ASTRA_UNSUPPORTED_COLLECTIVES:
        astra = ASTRA_REFUSES
    elif type_value == CollectiveCommType.BROADCAST:
        astra = ASTRA_REPLAYS
    else:
        astra = ASTRA_SIMULATES
    size = "0 bytes (a barrier moves no data)" if comm_type == "BARRIER" else "comm_size"
    summary = f"one {comm_type} COMM_COLL_NODE of {size} on every rank"
    if comm_type == "BROADCAST":
        summary += ", with duration_micros = runtime"
    return Family(comm_type, summary, collective_family(comm_type), comm_type in UPSTREAM_COLLECTIVES, astra)


#: Every family by name: upstream's 14 in upstream's order, then ours.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _family(
            one_metadata_node_all_types,
            "a METADATA_NODE with one attribute of every value kind, lists too",
            upstream=True,
            astra_sim=ASTRA_ABORTS,
        ),
        _family(
            one_remote_mem_load_node,
            "a MEM_LOAD_NODE of tensor_size bytes",
            upstream=True,
            astra_sim=ASTRA_NEEDS_REMOTE_MEMORY,
        ),
        _family(
            one_remote_mem_store_node,
            "a MEM_STORE_NODE of tensor_size bytes",
            upstream=True,
            astra_sim=ASTRA_NEEDS_REMOTE_MEMORY,
        ),
        _family(one_comp_node, "one COMP_NODE of runtime µs", upstream=True, astra_sim=ASTRA_SIMULATES),
        _family(
            two_comp_nodes_independent,
            "two COMP_NODEs without dependencies",
            upstream=True,
            astra_sim=ASTRA_SIMULATES,
        ),
        _family(
            two_comp_nodes_dependent,
            "two COMP_NODEs, the second data-depending on the first",
            upstream=True,
            astra_sim=ASTRA_SIMULATES,
        ),
        *(_collective_entry(c) for c in UPSTREAM_COLLECTIVES),
        _family(
            one_comm_send_node,
            "a SEND of comm_size from rank r to r+1 mod n (tag r); receives: one_comm_recv_node",
            upstream=True,
            astra_sim=ASTRA_WITH_PAIR,
        ),
        _family(
            one_comm_recv_node,
            "a RECV of comm_size at rank r from r-1 mod n (tag r-1); sends: one_comm_send_node",
            upstream=True,
            astra_sim=ASTRA_WITH_PAIR,
        ),
        *(_collective_entry(c) for c in EXTRA_COLLECTIVES),
        _family(
            send_recv_pair,
            "even rank r sends comm_size to r+1, which receives it",
            upstream=False,
            astra_sim=ASTRA_SIMULATES,
        ),
        _family(
            send_recv_ring,
            "rank r sends comm_size to r+1 mod n and receives from r-1 mod n",
            upstream=False,
            astra_sim=ASTRA_SIMULATES,
        ),
        _family(
            comp_chain,
            "chain_length COMP_NODEs, each data-depending on the previous",
            upstream=False,
            astra_sim=ASTRA_SIMULATES,
        ),
    )
}
#: The families upstream's chakra_generator writes (what the drop-in writes).
UPSTREAM_FAMILIES = tuple(name for name, f in FAMILIES.items() if f.upstream)


def resolve_families(names: Iterable[str] | None) -> list[Family]:
    """The families called ``names`` (all of them for ``None`` or none), refusing unknown or repeated names."""
    chosen = list(names or ())
    if not chosen:
        return list(FAMILIES.values())
    unique(chosen, "the families", str)
    for name in chosen:
        if name not in FAMILIES:
            close = difflib.get_close_matches(name, FAMILIES, n=1)
            guess = f"did you mean {close[0]}? " if close else ""
            raise ChakraInputError(
                f"unknown family {name!r}", hint=f"{guess}`chakra generate micro --list` lists the families"
            )
    return [FAMILIES[name] for name in chosen]


def build_families(names: Iterable[str] | None, params: MicroParams) -> list[MicroWorkload]:
    """Build the named families (all for ``None``) in memory."""
    return [family.build(params) for family in resolve_families(names)]


# ---------------------------------------------------------------------------------------------
# Sweeps


def collective_sweep(
    collectives: Iterable[str],
    sizes_bytes: Iterable[int],
    rank_counts: Iterable[int],
    *,
    runtime_us: int = DEFAULT_RUNTIME_US,
) -> list[MicroWorkload]:
    """One workload per (collective, size, rank count), named ``COLLECTIVE.SIZE.Nr`` (``ALL_REDUCE.1MiB.8r``).

    Collectives are family names from :data:`SWEEP_COLLECTIVES` (BARRIER carries no size to sweep).
    """
    chosen = unique(list(collectives), "the collectives", str)
    sizes = unique(list(sizes_bytes), "the sizes", format_size)
    counts = unique(list(rank_counts), "the rank counts", str)
    for name in chosen:
        if name not in SWEEP_COLLECTIVES:
            why = "BARRIER carries no data, so there is no size to sweep" if name == "BARRIER" else "not a collective"
            raise ChakraInputError(f"cannot sweep {name!r}: {why}", hint=f"sweep any of {', '.join(SWEEP_COLLECTIVES)}")
    if not (chosen and sizes and counts):
        raise ChakraInputError("a sweep needs at least one collective, size and rank count")
    return [
        collective_workload(name, size, count, runtime_us=runtime_us, name=f"{name}.{format_size(size)}.{count}r")
        for name in chosen
        for size in sizes
        for count in counts
    ]


def sweep_collectives(
    out_dir: str | Path,
    collectives: Iterable[str],
    sizes_bytes: Iterable[int],
    rank_counts: Iterable[int],
    *,
    runtime_us: int = DEFAULT_RUNTIME_US,
) -> list[WrittenMicroWorkload]:
    """Write :func:`collective_sweep` into ``out_dir``: every collective × size × rank count."""
    return write_workloads(out_dir, collective_sweep(collectives, sizes_bytes, rank_counts, runtime_us=runtime_us))


# ---------------------------------------------------------------------------------------------
# Writing


def write_micro_workload(out_dir: str | Path, workload: MicroWorkload) -> WrittenMicroWorkload:
    """Write ``DIR/NAME.{rank}.et`` for every rank and ``DIR/NAME.comm_groups.json`` when the workload
    has groups, through the core writer (:class:`chakra.workload_writer.WorkloadWriter`: all or nothing; files of
    an earlier workload of the same name that would join this one are removed and listed in the result).
    """
    written = workload_writer.write_workload(
        Path(out_dir) / workload.name, dict(enumerate(workload.ranks)), workload.comm_groups
    )
    return WrittenMicroWorkload(
        workload, written.prefix, tuple(written.paths.values()), written.groups_path, written.removed
    )


def write_workloads(out_dir: str | Path, workloads: Iterable[MicroWorkload]) -> list[WrittenMicroWorkload]:
    """Write each workload into ``out_dir`` (see :func:`write_micro_workload`)."""
    return [write_micro_workload(out_dir, w) for w in workloads]


def generate(
    out_dir: str | Path, families: Iterable[str] | None = None, params: MicroParams | None = None
) -> list[WrittenMicroWorkload]:
    """Build and write the named families (all for ``None``) with ``params`` (upstream's defaults)."""
    return write_workloads(out_dir, build_families(families, params or MicroParams()))
